// Rehearsal check of a planned recipe (see rehearsal_check.h).
#include "capability/rehearsal_check.h"

#include "capability/capability.h"

namespace trident::capability {

RehearsalCheck rehearsal_check(const RunSpec& recipe) {
  RehearsalCheck out;
  RunSpec r = recipe;
  ExecutionSpec& x = r.exec;
  if (x.precision != Precision::FP32) {
    out.substitutions.push_back("precision " + to_string(x.precision) + " -> fp32 (the CPU kernels compute in fp32)");
    x.precision = Precision::FP32;
  }
  if (x.attention != AttentionKind::Unfused) {
    out.substitutions.push_back("attention " + to_string(x.attention) + " -> unfused (the CPU kernels' attention)");
    x.attention = AttentionKind::Unfused;
  }
  if (!(overlap_in_effect(x.overlap, x.schedule) == Overlap{})) {
    out.substitutions.push_back("overlap " + to_string(overlap_in_effect(x.overlap, x.schedule)) + " -> " + to_string(Overlap{}) +
                                " (TP collectives block on CPU ranks; pipeline sends stay asynchronous there)");
    x.overlap = Overlap{};
  }
  if (x.grad_bits != 32) {
    out.substitutions.push_back("gradients " + std::to_string(x.grad_bits) + "-bit -> 32-bit");
    x.grad_bits = 32;
  }
  if (x.recipe.fp8_params || x.recipe.optimizer_state_bits != 32) {
    out.substitutions.push_back("optimizer states and weights -> fp32 (the CPU runtime's Adam)");
    x.recipe.fp8_params = false;
    x.recipe.optimizer_state_bits = 32;
  }
  if (x.recipe.dp_after_pipeline_flush && r.layout.pp > 1) {
    out.substitutions.push_back("gradient reduction after the pipeline flush -> behind the last backward (the "
                                "runtime's grad-ready hook)");
    x.recipe.dp_after_pipeline_flush = false;
  }
  if (r.layout.ep > 1 && (x.recipe.moe_dispatcher != MoeDispatcher::AllToAll || x.recipe.moe_fp8_dispatch || x.recipe.moe_ep_overlap)) {
    out.substitutions.push_back("MoE dispatcher " + to_string(x.recipe.moe_dispatcher) +
                                (x.recipe.moe_fp8_dispatch ? ", FP8 dispatch" : "") +
                                (x.recipe.moe_ep_overlap ? ", overlapped" : "") +
                                " -> 16-bit all-to-all, not overlapped (the runtime's)");
    x.recipe.moe_dispatcher = MoeDispatcher::AllToAll;
    x.recipe.moe_fp8_dispatch = x.recipe.moe_ep_overlap = false;
  }
  if (x.recompute == Recompute::Selective && x.recompute_modules.any() &&
      !(x.recompute_modules == RecomputeModules{.core_attn = true})) {
    out.substitutions.push_back("recompute modules " + to_string(x.recompute_modules) +
                                " -> the core attention (the runtime's selective recompute)");
    x.recompute_modules = {};
  }
  if (x.recipe.cuda_graphs != CudaGraphs::None) {
    out.substitutions.push_back("CUDA graphs " + to_string(x.recipe.cuda_graphs) +
                                " -> none (the runtime issues its kernels one by one)");
    x.recipe.cuda_graphs = CudaGraphs::None;
    x.recipe.cuda_graph_scopes = {};
  }
  if (x.recipe.cp_kind != CpKind::Ring && r.layout.cp > 1) {
    out.substitutions.push_back("cp " + to_string(x.recipe.cp_kind) + " -> ring (the runtime's ring attention)");
    x.recipe.cp_kind = CpKind::Ring;
  }
  // The runtime sends each TP rank's boundary activation as it holds it: its own s/tp rows under
  // sequence parallel, the whole tensor without (no scatter/gather), as Megatron-Core does.
  if (pipeline_sends_scattered(x, r.layout.tp, r.layout.pp)) {
    out.substitutions.push_back("pipeline sends 1/tp shares gathered by the receiver -> the whole tensor from every TP "
                                "rank (the runtime sends the activation each rank holds)");
    x.recipe.pipeline_sends_whole_tensor = true;
  }
  // The runtime lays experts out on the plan's expert grid (capability.cpp, train-expert-layout)
  // except without ep, where it needs etp = tp: such a plan is rehearsed at etp = tp.
  Layout& L = r.layout;
  if (r.model.is_moe() && L.ep == 1 && L.etp != L.tp && L.tp > 0) {
    out.substitutions.push_back("expert layout etp " + std::to_string(L.etp) + " -> " + std::to_string(L.tp) +
                                " (= tp: without ep the runtime reduces the experts' gradients over the dense dp x cp "
                                "ranks, the EDP group at etp = tp)");
    L.etp = L.tp;
  }
  // The runtime's capability check, as `trident train` runs it on CPU ranks (no data, paths or
  // resume: those are the rehearsal's own, not the recipe's).
  Problems p;
  check_executable(r, "cpu", {}, p);
  out.refusals = p.list();
  // The rehearsal runs Trident's runtime, which issues its kernels from C++: a Python stack's host
  // issue floor (plan/host_issue.h) is not the rehearsed job's, and `trident train` (which takes
  // no --stack) predicts without it. Cleared after the check so its refusals still name the stack.
  if (python_issued(x))
    out.substitutions.push_back("kernel issue from Python (stack " + x.stack +
                                ") -> from C++ (the runtime's; no host issue floor)");
  x.stack.clear();
  out.run = r;
  return out;
}

}  // namespace trident::capability
