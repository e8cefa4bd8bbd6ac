#include "sim/plan_costs.h"

#include "plan/dp_overlap.h"

#include <algorithm>
#include <cmath>

#include "plan/context_parallel.h"
#include "plan/memory_model.h"

namespace trident::sim {
namespace {

// Slowest link between stage `from` and stage `to` over every (dp, tp) pair. A pair is either
// inside one node (the intra link) or across two (the network), so one of each class decides;
// the scan stops at the first pair that crosses nodes. At most O(world / pp) steps.
GroupLink boundary_link(const Mesh& mesh, const ClusterSpec& cluster, int64_t from, int64_t to) {
  GroupLink worst;
  bool have_intra = false, have = false;
  for (int64_t d = 0; d < mesh.size(Dim::DP); ++d)
    for (int64_t t = 0; t < mesh.size(Dim::TP); ++t) {
      Coords a;
      a[Dim::DP] = d;
      a[Dim::TP] = t;
      a[Dim::PP] = from;
      Coords b = a;
      b[Dim::PP] = to;
      const int64_t ra = mesh.rank_of(a), rb = mesh.rank_of(b);
      const int64_t hosts = std::max<int64_t>(cluster.hosts_per_nvlink_domain, 1);
      const bool cross = mesh.node_of(ra) / hosts != mesh.node_of(rb) / hosts;  // leaves the NVLink domain
      if (!cross && have_intra) continue;
      const GroupLink l = mesh.link_of({ra, rb}, cluster);
      if (!have || l.bandwidth_Bps < worst.bandwidth_Bps) worst = l;
      have = true;
      if (cross) return worst;
      have_intra = true;
    }
  return worst;
}

// Pipeline boundaries: i -> i+1, and p-1 -> 0 when interleaving wraps round; each one's link
// and message into out.boundaries. Returns the message seconds each stage sends.
std::vector<double> add_boundaries(PlannedCosts& out, const Mesh& mesh, const RunSpec& run, const ModelSpec& local,
                                   const GroupLink& tp_link, const plan::CostConstants& c) {
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const int64_t p = l.pp;
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  std::vector<double> p2p(p, 0.0);
  for (int64_t i = 0; i < p && p > 1; ++i) {
    if (i == p - 1 && v == 1) break;
    BoundaryLink b;
    b.from_stage = i;
    b.to_stage = (i + 1) % p;
    b.link = boundary_link(mesh, run.cluster, b.from_stage, b.to_stage);
    b.message = plan::pp_comm_per_message(local, x, l.tp, b.link, tp_link, c);
    p2p[i] = b.message.message_s;
    out.boundaries.push_back(b);
  }
  return p2p;
}

// Stage s's data-parallel reduction, embedding sync and optimizer step.
void data_parallel_costs(StageCost& sc, const plan::Estimate& est, int64_t s, const RunSpec& run,
                         const plan::Links& links, const plan::CostConstants& c) {
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const int64_t p = l.pp;
  const plan::StateBytes sb = plan::state_bytes(x);
  // Data parallel: this stage's own gradient buffer, in buckets, hidden behind its last backwards
  // (after them when the stack does not overlap DP).
  // Dense gradients over dp x cp; a MoE model's routed experts over their edp group after them.
  sc.dp_overlapped = dp_overlapped(x, p);
  const double params = est.memory[s].params.dense(), experts = est.memory[s].params.expert_params;
  const double grad_bytes = params * sb.gradients;
  const int64_t data = l.dp * l.cp, edp = l.size(Dim::EDP);  // the expert grid's tp x cp x dp / (ep x etp)
  // ZeRO-3 reduce-scatters the experts' gradients per layer, inside the chunks (zero3_stage).
  const double expert_reduce_s =
      experts > 0 && edp > 1 && !(x.zero >= 3 && data > 1) ? plan::dp_comm(experts * sb.gradients, edp, links.edp.link,
                                             links.edp.members_per_node, run.cluster, 0, c)
                                   .total_s
                             : 0;
  // The planner's phases of this stage's buffer (zero_phases.h), each played where it happens.
  const plan::DpPhases phases = plan::dp_phases(grad_bytes, params * sb.gathered, data, x.zero, est.micro_batches,
                                                links.dcp.link, links.dcp.members_per_node, run.cluster, c);
  for (const plan::ZeroPhase& ph : phases.phases) {
    switch (ph.when) {
      case plan::DpWhen::AfterLastBackward: sc.dp_reduce_s += ph.seconds * double(ph.per_step); break;
      case plan::DpWhen::AfterEveryBackward:
        sc.dp_reduce_each_backward_s += ph.seconds * double(ph.per_step) / double(std::max<int64_t>(est.micro_batches, 1));
        break;
      case plan::DpWhen::AfterOptimizer: {
        // The all-gather of the new weights overlaps the next step's first forwards when the
        // stack overlaps DP (Megatron's overlap_param_gather, per chunk with
        // --dp-overlap-per-chunk). This one-step simulation does not play the next step, so what
        // stays exposed is the planner's rule for it (plan::chunked_dp, behind this stage's
        // forward of one micro-batch).
        const double gather_s = ph.seconds * double(ph.per_step);
        const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
        const int64_t chunks = sc.dp_overlapped && x.recipe.dp_overlap_per_chunk ? v : 1;
        const double last_bucket = gather_s * std::min(1.0, c.dp_bucket_bytes() / std::max(ph.bytes, 1.0));
        sc.dp_after_optimizer_s =
            sc.dp_overlapped ? plan::chunked_dp(gather_s, last_bucket, chunks, std::min<int64_t>(est.micro_batches, l.pp),
                                                est.stages[s].compute_forward_s)
                                   .exposed_s
                             : gather_s;
        break;
      }
      case plan::DpWhen::InsideEveryPass: break;  // ZeRO-3: per layer, in the chunks (zero3_stage)
    }
  }
  sc.dp_reduce_s += expert_reduce_s;
  // A count the cost table must not turn into an endless loop (dp_bucket_mb 1e-9): past 4096
  // buckets a stage's last bucket waits under 0.03% of its reduction, so more play as 4096.
  constexpr int64_t kMostBuckets = 4096;
  const double buckets = (grad_bytes + experts * sb.gradients) / c.dp_bucket_bytes();
  sc.dp_buckets = !(buckets < double(kMostBuckets)) ? kMostBuckets : std::max<int64_t>(1, int64_t(std::ceil(buckets)));
  if (p > 1 && (s == 0 || s == p - 1)) sc.embedding_sync_s = est.dp.embedding_sync_s;
  sc.optimizer_s =
      plan::optimizer_time(x.zero >= 1 ? params / double(data) + experts / double(std::max<int64_t>(edp, 1))
                                       : params + experts,
                           x, run.cluster.gpu, c)
          .time_s;
}

}  // namespace

PlannedCosts costs_from_plan(const RunSpec& run, double overhead_bytes) {
  return costs_from_plan(run, cost_table(run), overhead_bytes);
}

PlannedCosts costs_from_plan(const RunSpec& run, const plan::CostConstants& c, double overhead_bytes) {
  PlannedCosts out;
  const Mesh mesh(run.layout, run.cluster.gpus_per_node);
  const plan::Links links = plan::mesh_links(mesh, run.cluster);
  out.estimate = plan::estimate_with_links(run, links, overhead_bytes, c);
  const plan::Estimate& est = out.estimate;
  const ModelSpec& model = run.model;
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const int64_t p = l.pp;
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  out.micro_batches = est.micro_batches;
  out.virtual_stages = v;

  const ModelSpec local = plan::per_rank_sequence(model, l.cp);  // what one cp rank's messages carry
  const std::vector<double> p2p = add_boundaries(out, mesh, run, local, links.tp.link, c);

  // Megatron's p2p blocks the sender; with --overlap pp the sends run on their own stream (only
  // the receiver waits) and slow the compute they overlap by overlap_slowdown of themselves.
  out.costs.blocking_sends = !(pp_overlapped(x.overlap, x.schedule) && p > 1);
  out.costs.stages.resize(p);
  for (int64_t s = 0; s < p; ++s) {
    const plan::StageTime& st = est.stages[s];
    StageCost& sc = out.costs.stages[s];
    sc.p2p_s = p2p[s];
    const double send_slowdown = out.costs.blocking_sends ? 0.0 : c.overlap_slowdown * p2p[s];
    // The planner's chunks (plan::ChunkTime) as they are: each term inside the pass it belongs to.
    for (const plan::ChunkTime& pc : st.chunks) {
      ChunkCost& cc = sc.chunks.emplace_back();
      cc.tp_forward_s = pc.tp_forward_s, cc.tp_backward_s = pc.tp_backward_s;
      cc.cp_forward_s = pc.cp_forward_s, cc.cp_backward_s = pc.cp_backward_s;
      cc.ep_forward_s = pc.ep_forward_s + pc.ep_wait_forward_s;
      cc.ep_backward_s = pc.ep_backward_s + pc.ep_wait_backward_s;
      cc.dp_forward_s = pc.zero3_forward_s, cc.dp_backward_s = pc.zero3_backward_s;
      cc.host_forward_s = pc.host_forward_s, cc.host_backward_s = pc.host_backward_s;
      cc.forward_s = pc.compute_forward_s + cc.tp_forward_s + cc.cp_forward_s + cc.ep_forward_s + cc.dp_forward_s +
                     cc.host_forward_s + send_slowdown;
      cc.backward_s = pc.compute_backward_s + cc.comm_backward_s() + cc.host_backward_s + send_slowdown;
      // The share of the compute alone; the host's wait then splits between the halves by it.
      const double compute_bwd = pc.compute_backward_s + send_slowdown;
      cc.weight_share = compute_bwd > 0 ? std::clamp(pc.weight_grad_s / compute_bwd, 0.0, 1.0) : 0.5;
    }
    data_parallel_costs(sc, est, s, run, links, c);
  }
  return out;
}

}  // namespace trident::sim
