// The JSON of estimates, lint findings and search results (`trident lint --json`, `trident plan
// --json`; the shape is in plan_report.h). The text is plan_report.cpp.
#include "report/plan_report.h"

#include <cmath>

#include "core/recipe_settings.h"

#include <fmt/format.h>

#include "core/dimensions.h"
#include "core/step_terms.h"
#include "core/units.h"
#include "report/host_issue_report.h"

namespace trident {

using nlohmann::json;
using namespace plan;  // the planner's results are what this file writes

namespace {

double round3(double x) { return std::round(x * 1000.0) / 1000.0; }
double round6(double x) { return std::round(x * 1e6) / 1e6; }
double round9(double x) { return std::round(x * 1e9) / 1e9; }  // per-layer terms of microseconds

json stage_memory_json(const StageMemory& s) {
  return {{"stage", s.stage},
          {"layers", s.layers},
          {"params", s.params.total()},
          {"weights_gib", round3(gib(s.weights_bytes))},
          {"gradients_gib", round3(gib(s.gradients_bytes))},
          {"optimizer_gib", round3(gib(s.optimizer_bytes))},
          {"activations_gib", round3(gib(s.activations_bytes))},
          {"in_flight", s.in_flight},
          {"per_layer_activation_mib", round3(s.per_layer_activation_bytes / kMiB)},
          {"per_layer_fp8_copy_mib", round3(s.per_layer_fp8_copy_bytes / kMiB)},
          {"overhead_gib", round3(gib(s.overhead_bytes))},
          {"total_gib", round3(gib(s.total_bytes()))}};
}

}  // namespace

json cost_json(const CostTable& c) {
  json j = {{"gpu", c.gpu}, {"source", c.source}, {"calibrated", c.calibrated}};
  if (!c.calibrated) j["warning"] = calibration_warning(c);
  if (!c.borrowed_from.empty()) j["borrowed_from"] = c.borrowed_from;
  for (const auto& f : cost_fields()) j[f.name] = c.*(f.member);
  return j;
}

json layout_json(const RunSpec& r, int64_t m) {
  json j = trident::layout_json(r.layout);
  j.update(json{{"global_batch_size", r.exec.global_batch_size},
          {"micro_batch_size", r.exec.micro_batch_size},
          {"micro_batches", m},
          {"schedule", to_string(r.exec.schedule)},
          {"virtual_stages", r.exec.virtual_stages},
          {"zero", r.exec.zero},
          {"recompute", to_string(r.exec.recompute)},
          {"sequence_parallel", r.exec.sequence_parallel},
          {"precision", to_string(r.exec.precision)},
          {"attention", to_string(r.exec.attention)},
          {"overlap", to_string(overlap_in_effect(r.exec.overlap, r.exec.schedule))},
          {"grad_bits", r.exec.grad_bits},
          {"tied_embeddings", r.model.tied_embeddings()},
          {"stack", r.exec.stack},
          {"recipe", recipe_json(r.exec.recipe)},
          {"description", r.layout.describe()}});
  return j;
}

json candidate_json(const RunSpec& run, const Estimate* e, const std::vector<Finding>& findings, bool per_stage) {
  json j;
  const int64_t m = run.layout.dp > 0 && run.exec.micro_batch_size > 0 ? run.exec.micro_batches(run.layout.dp) : 0;
  j["layout"] = layout_json(run, m);
  if (e) {
    json orders = json::array();
    for (const auto& [order, tps] : e->other_orders) orders.push_back({{"order", order}, {"tokens_per_s", std::round(tps)}});
    j["other_orders"] = orders;  // the same candidate in other rank orders, merged into this one
    const StageMemory& pm = e->peak_memory();
    j["fits"] = e->fits;
    j["memory_gib"] = {{"weights", round3(gib(pm.weights_bytes))},
                       {"gradients", round3(gib(pm.gradients_bytes))},
                       {"optimizer", round3(gib(pm.optimizer_bytes))},
                       {"activations", round3(gib(pm.activations_bytes))},
                       {"overhead", round3(gib(pm.overhead_bytes))},
                       {"expert_states", round3(gib(pm.expert_state_bytes))},
                       {"cp_ring_buffers", round3(gib(pm.cp_ring_buffer_bytes))},
                       {"total", round3(gib(pm.total_bytes()))},
                       {"capacity", round3(gib(e->capacity_bytes))}};
    j["memory_stage"] = pm.stage;
    j["cost_table"] = cost_json(e->cost);
    j["time_s"] = {{"step", round6(e->time.step)}, {"kernel_launch", round6(e->time.launch)}};
    for (const StepTerm& t : step_time_terms())
      if (t.plan_key) j["time_s"][t.plan_key] = round6(e->time.*t.planned);
    {
      // One layer, one micro-batch, by pass: the inputs of the launch term (part of compute).
      const LayerCompute lc = layer_compute(run.model, run.exec, run.layout.tp, run.cluster.gpu, e->cost,
                                            run.layout.cp, run.layout.ep, run.layout.etp);
      auto pass = [](const KernelPass& k) {
        return json{{"gemms", k.gemms},           {"attention", k.attention}, {"elementwise", k.elementwise},
                    {"collectives", k.collectives}, {"casts", k.casts},       {"total", k.total()}};
      };
      const StageTime& sl = e->stages[e->pipeline.slowest_stage];
      j["kernel_calls"] = {{"per_layer_forward", pass(lc.kernels.forward)},
                           {"per_layer_backward", pass(lc.kernels.backward)},
                           {"per_layer_recompute", pass(lc.kernels.recompute)},
                           {"slowest_stage_per_micro_batch", sl.kernel_calls},
                           {"kernel_launch_us", e->cost.kernel_launch_us},
                           {"seconds_per_step", round6(e->time.launch)}};
      if (nlohmann::json h = host_issue_json(*e); !h.is_null()) j["host_issue"] = h;
      if (lc.fp8)  // one layer, one micro-batch: the casts kept as kernels and those fused away
        j["fp8_casts"] = {{"kept_bytes", lc.fp8_cast_elements * cast_bytes_per_element(run.exec.precision, e->cost)},
                          {"removed_bytes", lc.fp8_fused_cast_elements * cast_bytes_per_element(run.exec.precision, e->cost)},
                          {"bytes_per_element", cast_bytes_per_element(run.exec.precision, e->cost)},
                          {"kept_s", round9(lc.fp8_cast_s)}};
      if (run.model.is_moe()) {  // one MoE layer, one micro-batch, forward: the inputs of its MLP's terms
        const MoeCompute mc = layer_moe_compute(per_rank_sequence(run.model, run.layout.cp), run.exec, run.layout.tp,
                                                run.cluster.gpu, e->cost, run.layout.ep, run.layout.etp);
        j["moe_compute"] = {{"local_experts", mc.local_experts},
                            {"tokens_per_expert", mc.tokens_per_expert},
                            {"router_gemm_s", round9(mc.router_s)},
                            {"router_score_bytes", mc.router_score_bytes},
                            {"router_score_s", round9(mc.router_score_s)},
                            {"expert_weight_bytes", mc.expert_weight_bytes},
                            {"routed_compute_s", round9(mc.routed_compute_s)},
                            {"routed_memory_s", round9(mc.routed_memory_s)},
                            {"routed_memory_bound", mc.routed_memory_bound},
                            {"routed_s", round9(mc.routed_s)},
                            {"shared_s", round9(mc.shared_s)},
                            {"moe_layer_share", moe_layer_share(run.model)}};
      }
    }
    if (run.layout.cp > 1) {
      const CpComm& cr = e->cp_ring;  // one layer, one micro-batch
      j["cp_ring"] = {{"steps", cr.steps},
                      {"block_bytes", cr.block_bytes},
                      {"block_transfer_s", round9(cr.block_transfer_s)},
                      {"block_attention_s", round9(cr.block_attention_s)},
                      {"block_attention_backward_s", round9(cr.block_attention_backward_s)},
                      {"forward_s", round9(cr.forward_total_s)},
                      {"forward_exposed_s", round9(cr.forward_exposed_s)},
                      {"backward_s", round9(cr.backward_total_s)},
                      {"backward_exposed_s", round9(cr.backward_exposed_s)},
                      {"hidden_per_step_s", round6(e->time.cp_hidden)}};
    }
    if (run.layout.pp > 1) {
      const PpComm& pm = e->pp_message;  // one send of one micro-batch
      j["pp_sends"] = {{"activation_bytes", pm.activation_bytes},
                       {"split", pm.split},
                       {"message_bytes", pm.message_bytes},
                       {"wire_s", round9(pm.wire_s)},
                       {"gather_s", round9(pm.gather_s)},
                       {"message_s", round9(pm.message_s)},
                       {"whole_tensor", run.exec.recipe.pipeline_sends_whole_tensor}};
    }
    if (run.layout.ep > 1 || run.layout.etp > 1) {
      const EpComm& ea = e->ep_alltoall;  // one MoE layer, one micro-batch
      j["ep_alltoall"] = {{"message_bytes", ea.message_bytes},
                          {"alltoall_s", round9(ea.alltoall_s)},
                          {"hierarchical", {{"ranks", ea.alltoall.n}, {"members_in_domain", ea.alltoall.g},
                                            {"nvlink_bytes", ea.alltoall.nvlink_bytes},
                                            {"network_bytes", ea.alltoall.network_bytes},
                                            {"nvlink_s", round9(ea.alltoall.nvlink_s)},
                                            {"network_s", round9(ea.alltoall.network_s)},
                                            {"latency_s", round9(ea.alltoall.latency_s)}}},
                          {"latency_per_peer_s", round9(alltoall_latency_s(e->links.ep.link, e->cost))},
                          {"forward_alltoalls", ea.forward_alltoalls},
                          {"backward_alltoalls", ea.backward_alltoalls},
                          {"count_exchange_s", round9(ea.count_exchange_s)},
                          {"forward_count_exchanges", ea.forward_count_exchanges},
                          {"backward_count_exchanges", ea.backward_count_exchanges},
                          {"moe_layer_share", moe_layer_share(run.model)},
                          {"capacity_factor", run.model.capacity_factor},
                          {"load_imbalance", run.model.moe_load_imbalance},
                          {"wait_forward_s", round9(e->ep_wait.forward_s)},
                          {"wait_backward_s", round9(e->ep_wait.backward_s)},
                          {"expert_tensor_parallel", run.layout.etp},
                          {"etp_gather_bytes", ea.etp_gather_bytes},
                          {"etp_gather_s", round9(ea.etp_gather_s)},
                          {"dispatcher", to_string(ea.dispatcher)},
                          {"remote_domains", ea.remote_domains},
                          {"fp8_dispatch", run.exec.recipe.moe_fp8_dispatch},
                          {"dispatch_bytes", ea.dispatch_bytes},
                          {"dispatch_s", round9(ea.dispatch_s)}};
      const Overlapped o = ep_overlap_of(*e);
      j["ep_alltoall"]["overlap"] = {{"requested", run.exec.recipe.moe_ep_overlap},
                                     {"blocked_by", ep_overlap_blocker(run.exec, run.layout.pp)},
                                     {"per_layer_total_s", round9(o.total_s)},
                                     {"per_layer_exposed_s", round9(o.exposed_s)},
                                     {"per_layer_hidden_s", round9(o.hidden_s)},
                                     {"per_layer_cost_s", round9(o.cost_s)}};
    }
    if (e->expert_dp.total_s > 0)
      j["expert_dp"] = {{"gradient_bytes", e->expert_dp.gradient_bytes},
                        {"edp", e->expert_dp.dp},
                        {"total_s", round6(e->expert_dp.total_s)},
                        {"exposed_s", round6(e->expert_dp.exposed_s)}};
    j["tokens_per_s"] = std::round(e->tokens_per_s);
    j["tflops_per_gpu"] = round3(e->tflops_per_gpu);
    j["executed_flops"] = e->executed_flops;
    j["flash_recompute_flops"] = e->flash_recompute_flops;
    j.update(mfu_json(e->mfu_figures));  // mfu, mfu_causal_halved and the convention
    if (per_stage) {
      json stages = json::array();
      for (size_t i = 0; i < e->memory.size(); ++i) {
        json s = stage_memory_json(e->memory[i]);
        const StageTime& t = e->stages[i];
        s["forward_s"] = round6(t.compute_forward_s);
        s["backward_s"] = round6(t.compute_backward_s);
        s["tp_comm_s"] = round6(t.tp_comm_s);
        s["pp_comm_s"] = round6(t.pp_comm_s);
        s["cp_comm_s"] = round6(t.cp_comm_s);
        s["ep_comm_s"] = round6(t.ep_comm_s);
        s["ep_wait_s"] = round6(t.ep_wait_s);
        stages.push_back(s);
      }
      j["stages"] = stages;
    }
  } else {
    j["fits"] = nullptr;
    j["memory_gib"] = nullptr;
    j["time_s"] = nullptr;
    j["tokens_per_s"] = nullptr;
    j["tflops_per_gpu"] = nullptr;
    j["mfu"] = nullptr;
    j["mfu_causal_halved"] = nullptr;
  }
  json f = json::array();
  for (const auto& x : findings)
    f.push_back({{"severity", to_string(x.severity)}, {"code", x.code}, {"message", x.message}, {"fix", x.fix}});
  j["findings"] = f;
  return j;
}

json lint_json(const RunSpec& run, const LintResult& r, bool per_stage) {
  return candidate_json(run, r.estimate ? &*r.estimate : nullptr, r.findings, per_stage);
}

json plan_json(const SearchResult& res, const std::vector<std::vector<Finding>>& findings,
               const std::vector<std::string>& rationale, bool per_stage, const NoFitAdvice* no_fit) {
  json j;
  j["candidates"] = json::array();
  for (size_t i = 0; i < res.best.size(); ++i)
    j["candidates"].push_back(candidate_json(res.best[i].run, &res.best[i], findings[i], per_stage));
  j["rationale"] = rationale;
  j["search"] = {{"enumerated", res.enumerated}, {"estimated", res.estimated}, {"feasible", res.feasible},
                 {"duplicate_orders", res.duplicate_orders}, {"rejected", res.rejected},
                 {"seconds", round6(res.seconds)}};
  if (no_fit)
    j["no_fit"] = {{"top_rule", no_fit->top_rule}, {"top_rule_rejected", no_fit->top_count},
                   {"rejected", no_fit->rejected}, {"changes_that_fit", no_fit->changes}};
  return j;
}
}  // namespace trident
