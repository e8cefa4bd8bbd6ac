// The text of estimates, lint findings and search results (`trident lint`, `trident plan`); their
// JSON is plan_json.cpp.
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

std::string exec_summary(const RunSpec& r, int64_t m) {
  const ExecutionSpec& x = r.exec;
  std::string sched = to_string(x.schedule);
  if (x.schedule == ScheduleKind::Interleaved) sched += fmt::format(" (v {})", x.virtual_stages);
  return fmt::format("micro-batch {} x {} per pipeline (global {}), {}, ZeRO {}, recompute {}{}, {}, {} attention, "
                     "overlap {}, {}-bit grads{}{}",
                     x.micro_batch_size, m, x.global_batch_size, sched, x.zero,
                     to_string(x.recompute) +
                         (x.recompute == Recompute::Selective && x.recompute_modules.any()
                              ? " (" + to_string(x.recompute_modules) + ")"
                              : "") +
                         (x.recompute == Recompute::Selective && x.attention == AttentionKind::Flash &&
                                  (!x.recompute_modules.any() || x.recompute_modules.core_attn)
                                                   ? (x.recompute_flash_attention ? " (the fused attention too)"
                                                                                  : " (not the fused attention)")
                                                   : ""),
                     x.sequence_parallel ? ", sequence parallel" : "", to_string(x.precision), to_string(x.attention),
                     overlap_text(x.overlap, x.schedule), x.grad_bits,
                     recipe_text(x, r.layout.tp, r.layout.cp, r.layout.pp) + (r.model.tied_embeddings() ? ", tied embeddings" : ""),
                     x.stack.empty() ? "" : ", stack " + x.stack);
}

std::string link_text(const GroupLink& l) {
  return fmt::format("{} {:.3g} GB/s{}", to_string(l.kind), gbps(l.bandwidth_Bps),
                     l.crosses_nodes() ? fmt::format(" across {} nodes", l.nodes) : "");
}

// The rank orders merged into a candidate: those as fast tie, the others say how much slower.
std::string other_orders_text(const Estimate& e) {
  std::string tie, slower;
  for (const auto& [order, tps] : e.other_orders) {
    if (tps >= e.tokens_per_s * (1 - 1e-9)) tie += (tie.empty() ? "" : ", ") + order;
    else slower += fmt::format("{}{} ({:.0f} tokens/s, {:.2f}% slower)", slower.empty() ? "" : ", ", order, tps,
                               100 * (1 - tps / e.tokens_per_s));
  }
  std::string s = "Same layout in other rank orders (merged here):";
  if (!tie.empty()) s += " " + tie + " tie with " + e.run.layout.order + ";";
  if (!slower.empty()) s += " " + slower + ";";
  s.back() = '\n';
  return s;
}

// "dp x cp 16" or "dp 8": the ranks the dense states and gradients are sharded and reduced over.
std::string data_group_name(const RunSpec& r) {
  const int64_t data = r.layout.dp * r.layout.cp;
  return r.layout.cp > 1 ? fmt::format("dp x cp {}", data) : fmt::format("dp {}", data);
}

}  // namespace

// The EP all-to-alls of one layer and micro-batch after --moe-ep-overlap, as stage_times charges
// them (the same calls: the layer's compute is the window).
Overlapped ep_overlap_of(const Estimate& e) {
  const RunSpec& r = e.run;
  const LayerCompute lc = layer_compute(r.model, r.exec, r.layout.tp, r.cluster.gpu, e.cost, r.layout.cp, r.layout.ep,
                                        r.layout.etp);
  return ep_overlap_per_layer(e.ep_alltoall, lc.forward_s(), lc.backward_s(), r.exec, r.layout.pp, e.cost);
}

std::string cost_text(const CostTable& c) {
  const std::string warning = calibration_warning(c);
  return fmt::format("Cost table ({}, {}): {}\n{}", c.gpu, c.source, describe(c),
                     warning.empty() ? "" : "  warning: " + warning + "\n");
}

namespace {

// The memory lines: the most loaded stage's states, each with the params, bytes per param and
// divisor it used, its activations and overhead (and every stage with per_stage).
std::string memory_text(const Estimate& e, bool per_stage) {
  const RunSpec& r = e.run;
  const StageMemory& pm = e.peak_memory();
  const StateBytes sb = state_bytes(r.exec);
  const double p = pm.params.total();
  std::string s;
  s += fmt::format("Memory per GPU, stage {} of {} (most loaded, {} layers): {:.1f} GiB of {:.1f} GiB - {}\n", pm.stage,
                   r.layout.pp, pm.layers, gib(pm.total_bytes()), gib(e.capacity_bytes),
                   e.fits ? "fits" : "DOES NOT FIT");
  // Dense states are sharded over dp x cp, a MoE model's routed experts over the edp ranks that
  // hold the same experts: each line names the params, bytes per param and divisor it used.
  const int64_t data = r.layout.dp * r.layout.cp, edp = r.layout.size(Dim::EDP);  // the expert grid's
  const double x = pm.params.expert_params;
  const std::string data_name = data_group_name(r);
  auto states = [&](double bytes_per_param, int zero_from) {
    const bool sharded = r.exec.zero >= zero_from;
    if (x <= 0) return fmt::format("x {:g} B{}", bytes_per_param, sharded ? " / " + data_name : "");
    return fmt::format("{:.3f} B dense x {:g} B{} + {:.3f} B expert x {:g} B{}", pm.params.dense() / 1e9, bytes_per_param,
                       sharded ? " / " + data_name : "", x / 1e9, bytes_per_param,
                       sharded ? fmt::format(" / edp {}", edp) : "");
  };
  s += fmt::format("  weights      {:7.2f} GiB  {:.3f} B params: {}{}\n", gib(pm.weights_bytes), p / 1e9, states(sb.weights, 3),
                   pm.plain_weight_params > 0
                       ? fmt::format(" (of the dense, {:.3f} B embedding / output params x 2 B: no quantised copies)",
                                     pm.plain_weight_params / 1e9)
                       : "");
  s += fmt::format("  gradients    {:7.2f} GiB  {}\n", gib(pm.gradients_bytes), states(sb.gradients, 2));
  s += fmt::format("  optimizer    {:7.2f} GiB  {} ({}-bit master, momentum, variance)\n", gib(pm.optimizer_bytes),
                   states(sb.optimizer, 1), r.exec.recipe.optimizer_state_bits);
  s += fmt::format("  activations  {:7.2f} GiB  {:g} chunks in flight x {:.3g} layers x {:.1f} MiB{}{}\n",
                   gib(pm.activations_bytes), pm.in_flight,
                   double(pm.layers) / double(r.exec.schedule == ScheduleKind::Interleaved ? r.exec.virtual_stages : 1),
                   pm.per_layer_activation_bytes / kMiB,
                   pm.logits_bytes > 0 ? fmt::format(" + logits {:.2f} GiB", gib(pm.logits_bytes)) : "",
                   pm.embedding_activation_bytes > 0
                       ? fmt::format(" + embedding dropout masks {:.2f} GiB ({:g} micro-batches x {:.1f} MiB)",
                                     gib(pm.embedding_activation_bytes), pm.embedding_in_flight,
                                     pm.embedding_activation_bytes / pm.embedding_in_flight / kMiB)
                       : "");
  if (pm.per_layer_fp8_copy_bytes > 0)
    s += fmt::format("               (each layer's {:.1f} MiB include {:.1f} MiB of {} copies of its GEMM inputs, kept for\n"
                     "               the weight-gradient GEMMs: QKV, projection, MLP-in and MLP-out inputs, {:g} byte each{})\n",
                     pm.per_layer_activation_bytes / kMiB, pm.per_layer_fp8_copy_bytes / kMiB, to_string(r.exec.precision),
                     quantized_element_bytes(r.exec.precision),
                     r.exec.precision == Precision::FP8 ? "" : " with the block scales");
  if (pm.cp_ring_buffer_bytes > 0)
    s += fmt::format("               (activations include {:.2f} GiB of {}: {} KV blocks of {} tokens)\n",
                     gib(pm.cp_ring_buffer_bytes),
                     r.exec.recipe.cp_kind == CpKind::AllGather ? "gathered K, V and their gradients" : "ring buffers",
                     r.exec.recipe.cp_kind == CpKind::AllGather ? 2 * r.layout.cp : 4,
                     r.model.seq_len / r.layout.cp * r.exec.micro_batch_size);
  if (pm.params.expert_params > 0)
    s += fmt::format("  experts      {:7.2f} GiB  of the weights, gradients and optimizer above: {:.3f} B routed-expert "
                     "params ({} of {} experts per GPU, ep {}, {}){}\n",
                     gib(pm.expert_state_bytes), pm.params.expert_params / 1e9, r.model.experts / r.layout.ep,
                     r.model.experts, r.layout.ep,
                     r.layout.etp > 1 ? fmt::format("each 1/{} of an expert: etp {}", r.layout.etp, r.layout.etp)
                                      : "whole: etp 1",
                     r.exec.zero >= 1 ? fmt::format(", states sharded over edp {} (tp x cp x dp / (ep x etp))", r.layout.size(Dim::EDP)) : "");
  s += fmt::format("  overhead     {:7.2f} GiB  context, buffers, fragmentation (--overhead-gib)\n", gib(pm.overhead_bytes));
  if (per_stage)
    for (const auto& m : e.memory)
      s += fmt::format("    stage {:3}: {:3} layers  {:6.2f} GiB (weights {:.2f} + grads {:.2f} + optimizer {:.2f} + "
                       "activations {:.2f} + overhead {:.2f})\n",
                       m.stage, m.layers, gib(m.total_bytes()), gib(m.weights_bytes), gib(m.gradients_bytes),
                       gib(m.optimizer_bytes), gib(m.activations_bytes), gib(m.overhead_bytes));
  return s;
}

// One KV block of the cp exchange with the inputs of its size, for both kinds (ring, all-gather):
// "2.00 MiB (b 1 x s/cp 8192 x K,V 2 x kv dim 1024 / 8 x 2 B)"; `each` follows the size.
std::string kv_block_text(const RunSpec& r, const CpComm& cr, const char* each) {
  return fmt::format("{:.2f} MiB{} (b {} x s/cp {} x K,V 2 x kv dim {} / {} x {} B)", cr.block_bytes / kMiB, each,
                     r.exec.micro_batch_size, r.model.seq_len / r.layout.cp, r.model.kv_dim(),
                     std::min<int64_t>(r.layout.tp, r.model.kv_heads), r.exec.precision == Precision::FP32 ? 4 : 2);
}

// The wire part of one EP all-to-all: on one link, or hierarchical (NVLink inside the domain,
// the network between, the larger of the two).
std::string ep_wire_text(const EpComm& ea, const Estimate& e) {
  const RunSpec& r = e.run;
  const AlltoallTime& a = ea.alltoall;
  const std::string imbalance =
      ea.load_imbalance > 1 ? fmt::format(" x {:g} (the most loaded rank's rows, --moe-load-imbalance)", ea.load_imbalance) : "";
  const std::string share = e.cost.alltoall_efficiency > 0 ? "alltoall_efficiency" : "the link's collective share";
  if (ea.dispatcher == MoeDispatcher::AllGather)
    return fmt::format("as the allgather dispatcher: the tokens (not their top-k copies) gathered over a ring on {}, "
                       "{:.2f} MiB in at {:.3g} GB/s x {:.3g} = {:.3f} ms + {} x {:.2f} us (the link's latency)",
                       link_text(e.links.ep.link), a.network_bytes / kMiB, e.links.ep.link.bandwidth_Bps / 1e9,
                       link_efficiency(e.links.ep.link.kind, e.cost), 1e3 * a.network_s, a.n - 1, 1e6 * e.links.ep.link.latency_s);
  if (a.g >= a.n)
    return fmt::format("on {}: {} x {:.2f} us ({}) + {}/{} of it{} at {:.3g} GB/s x {:.3g} ({})", link_text(e.links.ep.link),
                       r.layout.ep - 1, 1e6 * alltoall_latency_s(e.links.ep.link, e.cost),
                       e.cost.alltoall_latency_us * 1e-6 > e.links.ep.link.latency_s ? "alltoall_latency_us" : "the link's latency",
                       r.layout.ep - 1, r.layout.ep, imbalance, e.links.ep.link.bandwidth_Bps / 1e9,
                       alltoall_efficiency(e.links.ep.link, e.cost), share);
  const EpLinks l = ep_links(e.links.ep, r.cluster);
  const bool flex = ea.dispatcher == MoeDispatcher::DeepEP || ea.dispatcher == MoeDispatcher::HybridEP;
  const double remote_calls = flex ? std::ceil(double(a.n) / double(a.g)) - 1 : double(a.n - a.g);
  return fmt::format("hierarchically, {} of its peers in its NVLink domain and {} beyond it: {:.2f} MiB{}{} on NVLink at "
                     "{:.3g} GB/s x {:.3g} = {:.3f} ms while {:.2f} MiB{} go on {} at {:.3g} GB/s x {:.3g} ({}) = {:.3f} ms; "
                     "the larger + {} x {:.2f} us + {:g} x {:.2f} us of latency",
                     a.g - 1, a.n - a.g, a.nvlink_bytes / kMiB,
                     flex ? " (every routed copy: its own domain's, and those it fans out)" : fmt::format(" ({}/{} of it)", a.g - 1, a.n),
                     imbalance, l.domain_link.bandwidth_Bps / 1e9, alltoall_efficiency(l.domain_link, e.cost), 1e3 * a.nvlink_s,
                     a.network_bytes / kMiB,
                     flex ? fmt::format(" (one copy of each token per remote domain, {:.3g} of them)", ea.remote_domains)
                          : fmt::format(" ({}/{} of it)", a.n - a.g, a.n),
                     link_text(l.link), l.link.bandwidth_Bps / 1e9, alltoall_efficiency(l.link, e.cost), share,
                     1e3 * a.network_s, a.g - 1, 1e6 * alltoall_latency_s(l.domain_link, e.cost), remote_calls,
                     1e6 * alltoall_latency_s(l.link, e.cost));
}

// The step line, with the cp ring's and the ep all-to-all's inputs when they are there.
std::string step_text(const Estimate& e) {
  const RunSpec& r = e.run;
  std::string s;
  const auto& t = e.time;
  auto pct = [&](double x) { return 100 * x / t.step; };
  // The terms of core/step_terms in its order; CP named by its kind.
  s += fmt::format("Step {:.3f} s", t.step);
  const char* sep = " = ";
  for (const PlannedTerm& p : planned_step_terms(r, t)) {
    std::string label = p.term->step_label;
    if (p.term->dim == Dim::CP) label += r.exec.recipe.cp_kind == CpKind::AllGather ? " all-gather" : " ring";
    s += fmt::format("{}{} {:.3f} ({:.1f}%)", sep, label, p.seconds, pct(p.seconds));
    sep = " + ";
  }
  s += "\n";
  const StageTime& sl = e.stages[e.pipeline.slowest_stage];
  const double layers = double(sl.layers);
  if (r.layout.cp > 1 && e.cp_ring.kind == CpKind::AllGather) {
    const CpComm& cr = e.cp_ring;
    s += fmt::format("  CP all-gather per layer and micro-batch: K and V of {} ranks, {}, gathered on {} = {:.3f} ms "
                     "behind {:.3f} ms of the local block's attention forward: {:.3f} ms exposed; backward gathers "
                     "again behind {:.3f} ms and reduce-scatters the gradients ({:.3f} ms, exposed): {:.3f} ms "
                     "exposed; x {:g} layers x {} micro-batches = {:.3f} s exposed, {:.3f} s hidden\n",
                     cr.cp, kv_block_text(r, cr, " each"), link_text(e.links.cp.link), 1e3 * cr.gather_s,
                     1e3 * cr.block_attention_s, 1e3 * cr.forward_exposed_s, 1e3 * cr.block_attention_backward_s,
                     1e3 * cr.gather_s, 1e3 * cr.backward_exposed_s, layers, e.micro_batches, t.cp_comm, t.cp_hidden);
  } else if (r.layout.cp > 1) {
    // Every input of the ring term, so it can be redone by hand: one KV block per step.
    const CpComm& cr = e.cp_ring;
    s += fmt::format("  CP ring per layer and micro-batch: {} steps, each a KV block of {} on {} = {:.3f} ms, "
                     "behind {:.3f} ms of one block's attention forward ({:.3f} ms backward, which moves the block "
                     "and its gradient): forward {:.3f} ms, {:.3f} exposed; backward {:.3f} ms, {:.3f} exposed; x {:g} "
                     "layers x {} micro-batches = {:.3f} s exposed, {:.3f} s hidden\n",
                     cr.steps, kv_block_text(r, cr, ""), link_text(e.links.cp.link), 1e3 * cr.block_transfer_s,
                     1e3 * cr.block_attention_s, 1e3 * cr.block_attention_backward_s, 1e3 * cr.forward_total_s,
                     1e3 * cr.forward_exposed_s, 1e3 * cr.backward_total_s, 1e3 * cr.backward_exposed_s, layers,
                     e.micro_batches, t.cp_comm, t.cp_hidden);
  }
  if (r.layout.ep > 1 || r.layout.etp > 1) {
    const EpComm& ea = e.ep_alltoall;
    const double tokens = double(r.exec.micro_batch_size) * double(r.model.seq_len / r.layout.cp) / double(r.layout.tp);
    s += fmt::format("  EP all-to-all per MoE layer and micro-batch: each GPU sends {:.2f} MiB ({:g} tokens of b x s/cp / tp, "
                     "its own share, x top-{} x hidden {} x {} B, unpadded: the capacity factor bounds the "
                     "drops, not the bytes) over ep {} "
                     "{} = {:.3f} ms per all-to-all{}; "
                     "{} forward (dispatch, combine) + {} backward, and {} + {} exchanges of the {} experts' row counts "
                     "before a dispatch (all-to-all of {} x 4 B: {:.2f} us), x {:.3g} MoE share of {:g} layers x {} micro-batches "
                     "= {:.3f} s\n",
                     ea.message_bytes / kMiB, tokens, r.model.experts_per_token, r.model.hidden, r.exec.precision == Precision::FP32 ? 4 : 2, r.layout.ep,
                     ep_wire_text(ea, e), 1e3 * ea.alltoall_s,
                     ea.etp_gather_s > 0 ? fmt::format(", each with the etp {} group's ring all-gather (reduce-scatter) of "
                                                       "etp x its bytes, {:.2f} MiB on {}: {:.3f} ms",
                                                       r.layout.etp, ea.etp_gather_bytes / kMiB, link_text(e.links.etp.link),
                                                       1e3 * ea.etp_gather_s)
                                         : std::string(),
                     ea.forward_alltoalls, ea.backward_alltoalls, ea.forward_count_exchanges,
                     ea.backward_count_exchanges, r.model.experts, r.model.experts, 1e6 * ea.count_exchange_s,
                     moe_layer_share(r.model), layers, e.micro_batches, t.ep_comm);
    std::string how = "  MoE dispatcher " + to_string(ea.dispatcher) + " (--moe-dispatcher)";
    if (ea.dispatcher == MoeDispatcher::DeepEP || ea.dispatcher == MoeDispatcher::HybridEP)
      how += fmt::format(": {:.3g} remote NVLink domains per token (one network copy each, flex_remote_domains)", ea.remote_domains);
    if (ea.dispatcher == MoeDispatcher::AllGather) how += ": the tokens all-gathered over the ep ring, reduce-scattered back";
    if (r.exec.recipe.moe_fp8_dispatch)
      how += fmt::format("; FP8 forward dispatch (--moe-fp8-dispatch): {:.2f} MiB at 1 + 1/32 B an element = {:.3f} ms",
                         ea.dispatch_bytes / kMiB, 1e3 * ea.dispatch_s);
    const Overlapped o = ep_overlap_of(e);
    const std::string blocker = ep_overlap_blocker(r.exec, r.layout.pp);
    if (r.exec.recipe.moe_ep_overlap && blocker.empty())
      how += fmt::format("; overlapped with the adjacent micro-batch's layer compute (--moe-ep-overlap): {:.3f} ms of "
                         "all-to-alls per layer, {:.3f} ms exposed + {:g} x {:.3f} ms hidden = {:.3f} ms charged",
                         1e3 * o.total_s, 1e3 * o.exposed_s, e.cost.overlap_slowdown, 1e3 * o.hidden_s, 1e3 * o.cost_s);
    else if (r.exec.recipe.moe_ep_overlap)
      how += "; not overlapped: --moe-ep-overlap does not run with " + blocker;
    else
      how += "; not overlapped (--moe-ep-overlap off)";
    s += how + fmt::format("; routing balanced at {:g} (--moe-load-imbalance; published MoE benchmarks force-balance)\n",
                           r.model.moe_load_imbalance);
    const EpWait& w = e.ep_wait;
    if (t.ep_wait > 0)
      s += fmt::format("  EP wait per MoE layer and micro-batch: the most loaded ep rank's experts take {:g} x the mean rows "
                       "(--moe-load-imbalance), so the others wait ({:g} - 1) x {:.3f} ms of the experts' forward GEMMs "
                       "(balanced, MoE share in) before the combine = {:.3f} ms, and {:.3f} ms backward (their input- and "
                       "weight-gradient GEMMs{}); x {:g} layers x {} micro-batches = {:.3f} s\n",
                       w.imbalance, w.imbalance, 1e3 * w.routed_forward_s, 1e3 * w.forward_s, 1e3 * w.backward_s,
                       r.exec.recompute == Recompute::Full ? ", and the recomputed forward" : "", layers, e.micro_batches,
                       t.ep_wait);
  }
  return s;
}

// One pipeline send's bytes and how they add up to the PP term of the slowest stage.
std::string pp_sends_text(const Estimate& e) {
  const RunSpec& r = e.run;
  const PpComm& pm = e.pp_message;
  const StageTime& st = e.stages[e.pipeline.slowest_stage];
  const int64_t tp = r.layout.tp, v = r.exec.schedule == ScheduleKind::Interleaved ? r.exec.virtual_stages : 1;
  const int64_t s_rank = r.model.seq_len / r.layout.cp;
  const double element = pm.activation_bytes / (double(r.exec.micro_batch_size) * double(s_rank) * double(r.model.hidden));
  const std::string split = pm.split > 1 && r.exec.sequence_parallel
                                ? fmt::format(" / tp {}: each TP rank sends its own s/tp rows", pm.split)
                            : pm.split > 1 ? fmt::format(" / tp {}: each TP rank sends its share", pm.split)
                            : tp > 1       ? fmt::format(", whole, from each of the tp {} ranks", tp)
                                           : "";
  // Without sequence parallel the receiver all-gathers the shares on the TP link before using them.
  const std::string gather =
      pm.gather_s > 0 ? fmt::format(" + the receiver's all-gather of the {} shares ({:.2f} MiB) on {} {:.3f} ms = {:.3f} ms",
                                    pm.split, pm.activation_bytes / kMiB, link_text(e.links.tp.link), 1e3 * pm.gather_s,
                                    1e3 * pm.message_s)
                      : "";
  return fmt::format("  PP sends per micro-batch: {:.2f} MiB per message (b {} x s/cp {} x h {} x {:g} B = {:.2f} MiB{}) on {} "
                     "= {:.3f} ms{}; 2 per chunk (activation forward, gradient backward) x {} chunk{} = {:.3f} ms, {:.3f} ms "
                     "of it on the critical path; x {} micro-batches = {:.3f} s\n",
                     pm.message_bytes / kMiB, r.exec.micro_batch_size, s_rank, r.model.hidden, element,
                     pm.activation_bytes / kMiB, split, link_text(e.links.pp.link), 1e3 * pm.wire_s, gather, v,
                     v > 1 ? "s" : "", 1e3 * st.pp_total_s, 1e3 * st.pp_comm_s, e.micro_batches, e.time.pp_comm);
}

// FP8: the GEMM inputs' casts of one layer, those kept as kernels of their own and those fused
// into the norms and the activation, and what the kept ones add up to over the step.
// One MoE layer's MLP compute for one micro-batch, forward, with the inputs of its terms.
std::string moe_compute_text(const Estimate& e) {
  const RunSpec& r = e.run;
  if (!r.model.is_moe()) return "";
  const MoeCompute mc = layer_moe_compute(per_rank_sequence(r.model, r.layout.cp), r.exec, r.layout.tp, r.cluster.gpu,
                                          e.cost, r.layout.ep, r.layout.etp);
  return fmt::format(
      "  MoE layer per micro-batch, forward: router GEMM {:.3f} ms; score function and top-k {:.2f} MiB at HBM = {:.3f} ms; "
      "{} local experts x {:g} rows each: GEMMs {:.3f} ms on the tensor cores, {:.3f} ms to read {:.2f} MiB of weights "
      "and the rows from HBM: {:.3f} ms ({}-bound); shared experts {:.3f} ms\n",
      1e3 * mc.router_s, mc.router_score_bytes / kMiB, 1e3 * mc.router_score_s, mc.local_experts, mc.tokens_per_expert,
      1e3 * mc.routed_compute_s, 1e3 * mc.routed_memory_s, mc.expert_weight_bytes / kMiB, 1e3 * mc.routed_s,
      mc.routed_memory_bound ? "memory" : "compute", 1e3 * mc.shared_s);
}

std::string fp8_casts_text(const Estimate& e) {
  const RunSpec& r = e.run;
  const LayerCompute lc = layer_compute(r.model, r.exec, r.layout.tp, r.cluster.gpu, e.cost, r.layout.cp, r.layout.ep, r.layout.etp);
  if (!lc.fp8) return "";
  const FusedCasts fc = fused_fp8_casts(r.model, r.exec);
  std::string kept = "projection", fused;
  for (auto [on, name] : {std::pair{fc.qkv, "QKV"}, {fc.fc1, "FC1"}, {fc.fc2, "FC2"}}) {
    std::string& list = on ? fused : kept;
    list += (list.empty() ? "" : ", ") + std::string(name);
  }
  const double B = cast_bytes_per_element(r.exec.precision, e.cost);
  const StageTime& st = e.stages[e.pipeline.slowest_stage];
  // The backward's gradient casts are not fused: 2x the traffic of all four, as its other kernels.
  const double backward_s = 2 * (lc.fp8_cast_s + lc.fp8_fused_cast_s);
  const char* format = r.exec.precision == Precision::NVFP4 ? "NVFP4" : r.exec.precision == Precision::MXFP8 ? "MXFP8" : "FP8";
  return fmt::format("  {} casts per layer and micro-batch: forward {:.2f} MiB kept ({:.4g} M elements of the {} inputs x {:g} "
                     "B) = {:.3f} ms, {:.2f} MiB removed ({:.4g} M elements{}); backward 2 x {:.2f} MiB (gradient casts, "
                     "not fused) = {:.3f} ms; x {} layers x {} micro-batches = {:.3f} s of the compute\n",
                     format, lc.fp8_cast_elements * B / kMiB, lc.fp8_cast_elements / 1e6, kept, B, 1e3 * lc.fp8_cast_s,
                     lc.fp8_fused_cast_elements * B / kMiB, lc.fp8_fused_cast_elements / 1e6,
                     fused.empty() ? ": no cast fused, --fp8-fused-casts is off"
                                   : " of the " + fused + " inputs, cast inside the norm or activation before them",
                     (lc.fp8_cast_elements + lc.fp8_fused_cast_elements) * B / kMiB, 1e3 * backward_s, st.layers,
                     e.micro_batches, double(st.layers) * double(e.micro_batches) * (lc.fp8_cast_s + backward_s));
}

// The slowest stage per micro-batch, then the data-parallel, kernel-launch, optimizer, overlap
// and ZeRO-3 terms, each with what it was computed from.
std::string stage_terms_text(const Estimate& e) {
  const RunSpec& r = e.run;
  std::string s;
  const StageTime& st = e.stages[e.pipeline.slowest_stage];
  s += fmt::format("  slowest stage {} ({} layers), per micro-batch: forward {:.2f} ms, backward {:.2f} ms (recompute "
                   "{:.2f}), TP {:.2f} ms on {}, PP sends {:.2f} ms on {}; x {} micro-batches\n",
                   st.stage, st.layers, 1e3 * st.compute_forward_s, 1e3 * st.compute_backward_s, 1e3 * st.recompute_s,
                   1e3 * st.tp_comm_s, link_text(e.links.tp.link), 1e3 * st.pp_comm_s, link_text(e.links.pp.link),
                   e.micro_batches);
  if (const double k = r.exec.recipe.compute_efficiency; k != 1.0)
    s += fmt::format("  stack compute efficiency {:g} (--stack-compute-efficiency): forward and backward kernels run at "
                     "{:g} x the cost table's GEMM, attention and HBM rates, so the compute above, kernel launches aside, is 1/{:g} = {:.3f}x "
                     "what the table gives\n",
                     k, k, k, 1.0 / k);
  if (r.layout.pp > 1) s += pp_sends_text(e);
  if (r.layout.dp > 1)
    s += fmt::format("  DP: {:.2f} GiB of {}gradients over {} GPUs ({}) on {}{}{}: {:.3f} s, {:.3f} s hidden behind compute, "
                     "{:.3f} s exposed (incl. {:.0f}% of the hidden time as overlap slowdown){}\n",
                     gib(e.dp.gradient_bytes), e.peak_memory().params.expert_params > 0 ? "dense " : "", r.layout.dp * r.layout.cp, data_group_name(r), link_text(e.links.dcp.link),
                     r.exec.zero == 0 ? std::string(" (one all-reduce)")
                     : r.exec.zero == 1 ? fmt::format(" (ZeRO 1: one reduce-scatter + one weight all-gather of {:g} B per param)", state_bytes(r.exec).gathered)
                     : r.exec.zero == 2 ? fmt::format(" (ZeRO 2: a reduce-scatter per micro-batch, {} + one weight all-gather)", e.micro_batches)
                                        : fmt::format(" (ZeRO 3: a reduce-scatter per micro-batch and a weight all-gather per pass, {} + {})", e.micro_batches, 2 * e.micro_batches),
                     (e.dp.hierarchical ? fmt::format(" (hierarchical: {} per node x {} nodes)", e.dp.gpus_per_node_in_group, e.dp.nodes) : "") +
                         (dp_overlapped(r.exec, r.layout.pp) ? ""
                          : r.exec.overlap.dp ? " (after the pipeline flush: the stack reduces there with pp > 1)"
                                              : " (not overlapped: after the last backward)") +
                         (e.dp.chunks > 1 ? fmt::format(" (per chunk: {} pieces, each after its chunk's last backward, {} micro-batches x "
                                                        "{:.2f} ms apart)", e.dp.chunks, e.dp.chunk_group,
                                                        1e3 * e.dp.overlap_window_s / double(e.dp.chunks))
                                          : ""),
                     e.dp.total_s, e.dp.hidden_s, e.dp.exposed_s, 100 * e.cost.overlap_slowdown,
                     e.dp.embedding_sync_s > 0 ? fmt::format(" + tied-embedding sync {:.3f} s", e.dp.embedding_sync_s) : "");
  if (e.expert_dp.total_s > 0)
    s += fmt::format("  expert DP: {:.2f} GiB of routed-expert gradients over the {} GPUs holding the same experts on {}: "
                     "{:.3f} s, {:.3f} s exposed\n",
                     gib(e.expert_dp.gradient_bytes), e.expert_dp.dp, link_text(e.links.edp.link), e.expert_dp.total_s,
                     e.expert_dp.exposed_s);
  if (e.time.launch > 0) {
    const LayerCompute lc = layer_compute(r.model, r.exec, r.layout.tp, r.cluster.gpu, e.cost, r.layout.cp, r.layout.ep, r.layout.etp);
    s += fmt::format("  kernel calls per layer and micro-batch: forward {} ({}), backward {} ({}){}; slowest stage {} "
                     "calls per micro-batch ({} layers{}{}) x {:g} us x {} micro-batches = {:.3f} s of the compute\n",
                     lc.kernels.forward.total(), lc.kernels.forward.describe(), lc.kernels.backward.total(),
                     lc.kernels.backward.describe(),
                     lc.kernels.recompute.total() > 0 ? fmt::format(", recompute {} ({})", lc.kernels.recompute.total(),
                                                                    lc.kernels.recompute.describe())
                                                      : "",
                     st.kernel_calls, st.layers, st.first ? fmt::format(" + embedding {}", kEmbeddingKernels) : "",
                     st.last ? fmt::format(" + logits {}", kLogitsKernels) : "", e.cost.kernel_launch_us,
                     e.micro_batches, e.time.launch);
  }
  s += host_issue_text(e);
  s += fp8_casts_text(e);
  s += moe_compute_text(e);
  s += fmt::format("  optimizer: {:.3f} B params x {:g} B of HBM traffic{}\n", e.optimizer.params / 1e9, e.optimizer.bytes_per_param,
                   e.optimizer.inputs.empty() ? "" : " (" + e.optimizer.inputs + ")");
  if (e.time.tp_hidden + e.time.pp_hidden > 0)
    s += fmt::format("  overlap {}: TP {:.3f} s and PP {:.3f} s hidden behind compute; TP and PP above are what stays "
                     "exposed plus {:.0f}% of the hidden time as slowdown\n",
                     overlap_text(r.exec.overlap, r.exec.schedule), e.time.tp_hidden, e.time.pp_hidden, 100 * e.cost.overlap_slowdown);
  if (r.exec.zero >= 3 && r.layout.dp > 1)
    s += fmt::format("  ZeRO-3 per layer and micro-batch: weight all-gather {:.2f} ms (twice), gradient reduce-scatter "
                     "{:.2f} ms, against {:.2f} ms of layer compute\n",
                     1e3 * e.dp.layer_gather_s, 1e3 * e.dp.layer_scatter_s,
                     1e3 * (st.compute_forward_s + st.compute_backward_s) / std::max<double>(1, double(st.layers)));
  if (r.exec.zero >= 3 && r.layout.dp > 1 && e.dp.expert_layer_params > 0)
    s += fmt::format("  ZeRO-3 experts per layer and micro-batch: {:.3f} B local expert parameters over edp {}: all-gather "
                     "{:.2f} ms (twice), gradient reduce-scatter {:.2f} ms, after the dense ones\n",
                     e.dp.expert_layer_params / 1e9, r.layout.size(Dim::EDP), 1e3 * e.dp.expert_layer_gather_s,
                     1e3 * e.dp.expert_layer_scatter_s);
  return s;
}

}  // namespace

std::string estimate_text(const Estimate& e, bool per_stage) {
  std::string s = fmt::format("Layout: {}; {}\n", e.run.layout.describe(), exec_summary(e.run, e.micro_batches));
  s += memory_text(e, per_stage);
  s += step_text(e);
  s += stage_terms_text(e);
  s += cost_text(e.cost);
  s += fmt::format("Throughput: {:.0f} tokens/s, {:.1f} TFLOP/s per GPU executed (with recompute{}), {}\n",
                   e.tokens_per_s, e.tflops_per_gpu,
                   e.flash_recompute_flops > 0
                       ? fmt::format(" and flash attention's backward recomputing the scores, {:.1f}% of the executed "
                                     "FLOPs; MFU counts model FLOPs only",
                                     100 * e.flash_recompute_flops / e.executed_flops)
                       : "",
                   mfu_text(e.mfu_figures));
  return s;
}


std::string findings_text(const std::vector<Finding>& findings) {
  if (findings.empty()) return "No findings.\n";
  std::string s;
  for (const auto& f : findings) {
    s += fmt::format("{}[{}] {}\n", to_string(f.severity), f.code, f.message);
    if (!f.fix.empty()) s += fmt::format("    fix: {}\n", f.fix);
  }
  return s;
}

std::string lint_text(const RunSpec& run, const LintResult& r, bool per_stage) {
  std::string s = fmt::format("Model {}; {}\n", run.model.name, run.cluster.describe());
  if (r.estimate) s += estimate_text(*r.estimate, per_stage);
  else s += fmt::format("Layout: {} (not estimated: fix the errors below first)\n", run.layout.describe());
  int errors = 0, warnings = 0;
  for (const auto& f : r.findings) {
    errors += f.severity == Severity::Error;
    warnings += f.severity == Severity::Warning;
  }
  s += fmt::format("\nFindings: {} error{}, {} warning{}\n", errors, errors == 1 ? "" : "s", warnings,
                   warnings == 1 ? "" : "s");
  s += findings_text(r.findings);
  return s;
}

std::string stack_line(const ExecutionSpec& x, bool given) {
  const StackPreset* p = find_stack(x.stack);
  if (!p) return "Stack: the runtime's defaults, what trident train runs (--stack chooses a preset)\n";
  return fmt::format("Stack: {} ({}): {}\n", p->name,
                     given ? "--stack" : "the default on a GPU cluster; --stack trident for the runtime's own",
                     p->description);
}

std::string plan_text(const ModelSpec& model, const ClusterSpec& cluster, int64_t global_batch,
                      const SearchResult& res, const std::vector<std::vector<Finding>>& findings,
                      const std::vector<std::string>& rationale, bool per_stage, const NoFitAdvice* no_fit) {
  const ParamCount pc = count_parameters(model);
  std::string s = fmt::format("Model {} ({:.2f} B params{}), global batch {} x {} tokens\n{}\n", model.name,
                              pc.total / 1e9,
                              model.is_moe() ? fmt::format(", {:.2f} B active per token: FLOPs and MFU count these",
                                                           pc.active / 1e9)
                                             : "",
                              global_batch, model.seq_len, cluster.describe());
  if (const auto beyond = model.beyond_family(); !beyond.empty()) {
    std::string list;
    for (const auto& b : beyond) list += (list.empty() ? "" : ", ") + b;
    s += "Architecture (beyond a plain " + to_string(model.family) + " layer): " + list + "\n";
  }
  s += fmt::format("Searched {} combinations in {:.3f} s: {} fit in memory and were estimated, of those not pruned "
                   "first by their step-time bound ({} orders merged with identical links)\n",
                   res.enumerated, res.seconds, res.estimated, res.duplicate_orders);
  for (const auto& [reason, n] : res.rejected) s += fmt::format("  rejected {:>8}  {}\n", n, reason);
  if (res.best.empty()) {
    s += "\nNo layout fits.";
    if (no_fit && no_fit->top_count > 0)
      s += fmt::format(" Most candidates ({} of the {} rejected) fail the rule: {}.", no_fit->top_count,
                       no_fit->rejected, no_fit->top_rule);
    if (no_fit && !no_fit->changes.empty()) {
      s += " Smallest changes that fit (each planned again with that one change):\n";
      for (const auto& c : no_fit->changes) s += "  " + c + "\n";
    } else {
      s += " No single change tried fits (the nearest global batch sizes, each fixed dimension left to the search, "
           "up to 8x the nodes): use GPUs with more memory or a smaller model.\n";
    }
    return s;
  }
  for (size_t i = 0; i < res.best.size(); ++i) {
    s += fmt::format("\n#{}  {:.0f} tokens/s, step {:.3f} s, MFU {:.1f}% ({:.1f}% causal-halved)\n", i + 1,
                     res.best[i].tokens_per_s, res.best[i].time.step, 100 * res.best[i].mfu,
                     100 * res.best[i].mfu_figures.causal());
    if (!res.best[i].other_orders.empty()) s += other_orders_text(res.best[i]);
    s += estimate_text(res.best[i], per_stage);
    std::vector<Finding> shown;
    for (const auto& f : findings[i])
      if (f.severity != Severity::Info) shown.push_back(f);
    if (!shown.empty()) s += findings_text(shown);
  }
  s += "\nWhy this layout (the source chapter's decision flow):\n";
  for (const auto& line : rationale) s += "  - " + line + "\n";
  return s;
}

}  // namespace trident
