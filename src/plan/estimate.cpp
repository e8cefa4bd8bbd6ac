#include "plan/estimate.h"

#include <algorithm>

#include "plan/dp_overlap.h"

namespace trident::plan {

namespace {

// ZeRO-3's per-layer gather and reduce-scatter times of the dp x cp group for a layer of
// `layer_params`: the stages of a split mostly hold equal layers, so the last answer is kept.
// A MoE model's routed experts are sharded over their own group (edp: the expert grid's
// tp x cp x dp / (ep x etp), Megatron's expert data parallel group), so each layer also gathers
// its local experts' `expert_params` over edp and reduce-scatters their gradients there.
struct Zero3Layer {
  double layer_params = -1, gather_s = 0, scatter_s = 0;
  double expert_params = -1, expert_gather_s = 0, expert_scatter_s = 0;
};

// Half of an all-reduce of `bytes` over the group (an all-gather or a reduce-scatter of it).
double half_allreduce_s(double bytes, int64_t members, const DimLink& link, const ClusterSpec& cluster,
                        const CostConstants& c) {
  return dp_comm(bytes, members, link.link, link.members_per_node, cluster, 0, c).total_s / 2;
}

std::vector<Zero3Chunk> zero3_stage(const Estimate& e, const DimLink& dcp, const DimLink& edp_link, int64_t stage,
                                    const std::vector<int64_t>& chunks, Zero3Layer& memo) {
  const RunSpec& run = e.run;
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const int64_t data = l.dp * l.cp;
  std::vector<Zero3Chunk> out;
  const StageTime& st = e.stages.at(size_t(stage));
  if (x.zero < 3 || data <= 1 || st.layers <= 0) return out;
  const StateBytes sb = state_bytes(x);
  const double layer_params = e.memory.at(size_t(stage)).params.layer_params / double(st.layers);
  auto half_allreduce = [&](double bytes) { return half_allreduce_s(bytes, data, dcp, run.cluster, e.cost); };
  if (layer_params != memo.layer_params) {
    memo.layer_params = layer_params;
    memo.gather_s = half_allreduce(layer_params * sb.gathered);
    memo.scatter_s = half_allreduce(layer_params * sb.gradients);
  }
  const int64_t edp = l.size(Dim::EDP);
  const double expert_params = e.memory.at(size_t(stage)).params.expert_params / double(st.layers);
  if (expert_params != memo.expert_params) {
    memo.expert_params = expert_params;
    const bool sharded = expert_params > 0 && edp > 1;
    memo.expert_gather_s = sharded ? half_allreduce_s(expert_params * sb.gathered, edp, edp_link, run.cluster, e.cost) : 0.0;
    memo.expert_scatter_s = sharded ? half_allreduce_s(expert_params * sb.gradients, edp, edp_link, run.cluster, e.cost) : 0.0;
  }
  // Per-layer compute it hides behind: the stage's, with its TP share (a third forward).
  const double L = double(st.layers);
  const double fwd_layer = (st.compute_forward_s + st.tp_comm_s / 3) / L;
  const double bwd_layer = (st.compute_backward_s + 2 * st.tp_comm_s / 3) / L;
  for (size_t ch = size_t(stage); ch < chunks.size(); ch += size_t(l.pp))
    out.push_back(zero3_chunk(memo.gather_s + memo.expert_gather_s, memo.scatter_s + memo.expert_scatter_s,
                              double(chunks[ch]), fwd_layer, bwd_layer, dp_overlapped(x, l.pp), e.cost));
  return out;
}

std::vector<int64_t> chunks_of(const RunSpec& run) {
  const ExecutionSpec& x = run.exec;
  return chunk_layers(run.model.layers, run.layout.pp, x);
}

}  // namespace

std::vector<Zero3Chunk> zero3_stage(const Estimate& e, int64_t stage) {
  Zero3Layer memo;
  return zero3_stage(e, e.links.dcp, e.links.edp, stage, chunks_of(e.run), memo);
}

Estimate estimate(const RunSpec& run, double overhead_bytes) { return estimate(run, overhead_bytes, cost_table(run)); }

Estimate estimate(const RunSpec& run, double overhead_bytes, const CostConstants& c) {
  Mesh mesh(run.layout, run.cluster.gpus_per_node);
  return estimate_with_links(run, mesh_links(mesh, run.cluster), overhead_bytes, c);
}

Estimate estimate_with_links(const RunSpec& run, const Links& links, double overhead_bytes) {
  return estimate_with_links(run, links, overhead_bytes, cost_table(run));
}

Estimate estimate_with_links(const RunSpec& run, const Links& links, double overhead_bytes,
                             const CostConstants& c) {
  const Layout& l = run.layout;
  return estimate_with_links(run, links, stage_memory(run.model, run.exec, {l.tp, l.pp, l.dp, overhead_bytes, l.cp, l.ep, l.etp}),
                             c);
}

namespace {

// The stages' times, the pipeline over them, and the step's compute, TP, PP, CP and EP terms.
void time_pipeline(Estimate& e, const Links& links, const CostConstants& c) {
  const RunSpec& run = e.run;
  const ModelSpec& m = run.model;
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  const EpLinks epl = ep_links(links.ep, run.cluster);
  StageInputs in{l.tp, l.pp, links.tp.link, links.pp.link, l.cp, l.ep, links.cp.link, links.ep.link, l.etp, links.etp.link,
                 epl.members_in_domain, epl.domain_link};
  e.stages = stage_times(m, x, in, run.cluster.gpu, c);
  // ZeRO-3 / FSDP traffic runs inside each layer's passes: part of every stage's time per
  // micro-batch (so the pipeline's fill and drain carry it too), as the simulator plays it.
  const std::vector<int64_t> chunks = chunks_of(run);
  Zero3Layer zero3_memo;
  for (size_t s = 0; s < e.stages.size(); ++s) {
    const std::vector<Zero3Chunk> zero3 = zero3_stage(e, links.dcp, links.edp, int64_t(s), chunks, zero3_memo);
    for (size_t ch = 0; ch < zero3.size(); ++ch) {
      const Zero3Chunk& z = zero3[ch];
      StageTime& st = e.stages[s];
      st.chunks[ch].zero3_forward_s = z.forward.cost_s;
      st.chunks[ch].zero3_backward_s = z.backward.cost_s;
      st.zero3_s += z.forward.cost_s + z.backward.cost_s;
      st.zero3_total_s += z.forward.total_s + z.backward.total_s;
      st.zero3_hidden_s += z.forward.hidden_s + z.backward.hidden_s;
    }
  }
  // The host's issue of each stage's micro-batch against its GPU time (plan/host_issue.h).
  for (StageTime& st : e.stages) {
    const int64_t layers = st.layers + (st.last ? m.mtp_layers : 0);
    st.host_issue = host_issue(x, st.layer_kernels, layers, st.first, st.last, st.gpu_s(), c);
    st.host_s = st.host_issue.exposed_s;
    // Shared among the chunks by their layers and between the passes by their launches.
    const double per_layer = st.host_s / double(std::max<int64_t>(st.layers, 1));
    for (ChunkTime& ch : st.chunks) {
      ch.host_forward_s = double(ch.layers) * per_layer * st.host_issue.forward_share();
      ch.host_backward_s = double(ch.layers) * per_layer * (1 - st.host_issue.forward_share());
    }
  }
  e.pipeline = pipeline_time(e.stages, e.micro_batches, x.schedule, v);
  const StageTime& slow = e.stages[e.pipeline.slowest_stage];
  const double mb = double(e.micro_batches);
  e.time.compute = mb * (slow.compute_forward_s + slow.compute_backward_s);
  e.time.launch = mb * slow.launch_s;
  e.time.host = mb * slow.host_s;
  e.time.tp_comm = mb * slow.tp_comm_s;
  e.time.pp_comm = mb * slow.pp_comm_s;
  e.time.tp_hidden = mb * slow.tp_hidden_s;
  e.time.pp_hidden = mb * slow.pp_hidden_s;
  e.time.bubble = e.pipeline.bubble_s;
  e.time.cp_comm = mb * slow.cp_comm_s;
  e.time.ep_comm = mb * slow.ep_comm_s;
  e.time.ep_wait = mb * slow.ep_wait_s;
  e.time.cp_hidden = mb * (slow.cp_total_s - slow.cp_comm_s);
  if (l.cp > 1 || l.ep > 1 || l.etp > 1) {  // the same calls stage_times makes, kept for the report
    const LayerCompute lc = layer_compute(m, x, l.tp, run.cluster.gpu, c, l.cp, l.ep, l.etp);
    e.cp_ring = cp_comm_per_layer(m, x, l.tp, l.cp, links.cp.link, lc.block_attention_s, lc.block_attention_backward_s, c);
    e.ep_alltoall = ep_comm_per_layer(per_rank_sequence(m, l.cp), x, l.ep, epl, c, l.tp, l.etp, links.etp.link);
    e.ep_wait = ep_wait_per_layer(m, x, l.ep, lc.moe_routed_s);
  }
  if (l.pp > 1) e.pp_message = pp_comm_per_message(per_rank_sequence(m, l.cp), x, l.tp, links.pp.link, links.tp.link, c);

}

// The data-parallel reduction of the dense and the expert gradients, the tied embedding's sum and
// the optimizer step over what each rank updates.
void time_data_parallel(Estimate& e, const Links& links, const CostConstants& c) {
  const RunSpec& run = e.run;
  const ModelSpec& m = run.model;
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const StageTime& slow = e.stages[e.pipeline.slowest_stage];
  const double mb = double(e.micro_batches);
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  // Data-parallel reduction of the stage with the most parameters, hidden behind its last backward.
  size_t biggest = 0;
  for (size_t i = 0; i < e.memory.size(); ++i)
    if (e.memory[i].params.total() > e.memory[biggest].params.total()) biggest = i;
  // Dense gradients are reduced over dp x cp (the dp group without cp), the routed experts'
  // over the edp ranks that hold the same experts (below).
  const double params = e.memory[biggest].params.dense();
  const double expert_params = e.memory[biggest].params.expert_params;
  const int64_t data = l.dp * l.cp;
  const DimLink& grad_link = links.dcp;
  const StateBytes sb = state_bytes(x);
  const StageTime& bst = e.stages[biggest];
  // The backward it hides behind (none when the stack does not overlap DP, or reduces after the
  // pipeline flush).
  const bool overlapped = dp_overlapped(x, l.pp);
  const double window = overlapped ? bst.compute_backward_s + bst.tp_comm_s / 2 : 0.0;
  e.dp = dp_comm(params * sb.gradients, data, grad_link.link, grad_link.members_per_node, run.cluster,
                 window, c);
  // Per-chunk overlap (interleaved): each chunk's piece behind the backwards after its last one.
  const int64_t dp_chunks = overlapped && x.recipe.dp_overlap_per_chunk ? v : 1;
  const int64_t dp_group = std::min<int64_t>(e.micro_batches, l.pp);
  auto exposed_behind = [&](double t, double bytes, double behind) {
    const double last_bucket = t * std::min(1.0, c.dp_bucket_bytes() / std::max(bytes, 1.0));
    return chunked_dp(t, last_bucket, dp_chunks, dp_group, behind).exposed_s;
  };
  e.dp.chunks = dp_chunks;
  e.dp.chunk_group = dp_group;
  if (dp_chunks > 1) e.dp.exposed_s = exposed_behind(e.dp.total_s, params * sb.gradients, window);
  if (!overlapped) e.dp.exposed_s = e.dp.total_s;
  auto half_allreduce = [&](double bytes) {
    return dp_comm(bytes, data, grad_link.link, grad_link.members_per_node, run.cluster, 0, c).total_s / 2;
  };
  e.dp_phases = dp_phases(params * sb.gradients, params * sb.gathered, data, x.zero, e.micro_batches,
                          grad_link.link, grad_link.members_per_node, run.cluster, c);
  if (x.zero >= 1 && x.zero <= 2 && data > 1) {
    // Sharded states: reduce-scatters hidden behind the backward they follow (all but the last
    // bucket), the weight all-gather after the step, hidden behind the next step's first forward
    // when the stack overlaps it (Megatron's overlap_param_gather).
    const DpPhases& ph = e.dp_phases;
    const double rs_exposed = exposed_behind(ph.reduce_scatter_s, params * sb.gradients, window);
    const double gather_exposed = overlapped ? exposed_behind(ph.gather_weights_s, params * sb.gathered, bst.compute_forward_s)
                                               : ph.gather_weights_s;
    e.dp.total_s = double(ph.reduce_scatters_per_step) * ph.reduce_scatter_s +
                   double(ph.weight_gathers_per_step) * ph.gather_weights_s;
    e.dp.exposed_s = double(ph.reduce_scatters_per_step) * rs_exposed + gather_exposed;
    e.dp.weight_gather_exposed_s = gather_exposed;
  } else if (x.zero >= 3 && data > 1) {
    // ZeRO-3 / FSDP, layer by layer, every micro-batch and chunk (zero3_stage, in the stage
    // times): no reduction at the end of the step. Reported as DP time: m x the slowest stage's.
    e.dp.total_s = mb * slow.zero3_total_s;
    e.dp.exposed_s = mb * (slow.zero3_total_s - slow.zero3_hidden_s);
    const double gathered = 2 * sb.gathered;  // bytes per parameter: 2 gathers, 1 reduce-scatter
    e.dp.weight_gather_exposed_s = e.dp.exposed_s * gathered / (gathered + sb.gradients);
    const double layer_params = bst.layers > 0 ? e.memory[biggest].params.layer_params / double(bst.layers) : 0.0;
    e.dp.layer_gather_s = half_allreduce(layer_params * sb.gathered);
    e.dp.layer_scatter_s = half_allreduce(layer_params * sb.gradients);
    const int64_t edp_size = l.size(Dim::EDP);
    const double layer_experts = bst.layers > 0 ? e.memory[biggest].params.expert_params / double(bst.layers) : 0.0;
    if (layer_experts > 0 && edp_size > 1) {
      e.dp.expert_layer_params = layer_experts;
      e.dp.expert_layer_gather_s = half_allreduce_s(layer_experts * sb.gathered, edp_size, links.edp, run.cluster, c);
      e.dp.expert_layer_scatter_s = half_allreduce_s(layer_experts * sb.gradients, edp_size, links.edp, run.cluster, c);
    }
  }
  // Hidden traffic is not free: it slows the compute it overlaps.
  e.dp.hidden_s = std::max(0.0, e.dp.total_s - e.dp.exposed_s);
  e.dp.exposed_s += c.overlap_slowdown * e.dp.hidden_s;
  // Expert gradients: one more reduction over the edp group, after the dense one (exposed
  // beyond the same backward window; with ZeRO a reduce-scatter and a gather of half the volume each).
  const int64_t edp = l.size(Dim::EDP);  // the expert grid's: tp x cp x dp / (ep x etp)
  // ZeRO-3 reduce-scatters them layer by layer inside the passes (zero3_stage): none at the end.
  if (expert_params > 0 && edp > 1 && !(x.zero >= 3 && data > 1)) {
    e.expert_dp = dp_comm(expert_params * sb.gradients, edp, links.edp.link, links.edp.members_per_node,
                          run.cluster, std::max(0.0, window - e.dp.total_s), c);
    e.expert_dp.hidden_s = std::max(0.0, e.expert_dp.total_s - e.expert_dp.exposed_s);
    e.expert_dp.exposed_s += c.overlap_slowdown * e.expert_dp.hidden_s;
  }
  if (l.pp > 1 && m.tied_embeddings())
    e.dp.embedding_sync_s =
        ring_allreduce_time_s(double(e.vocab_padded) * m.hidden / l.tp * sb.gradients, 2, links.embedding, c);
  e.time.dp_comm = e.dp.exposed_s + e.dp.embedding_sync_s + e.expert_dp.exposed_s;
  e.time.zero_gather = e.dp.weight_gather_exposed_s;  // of dp_comm

  const double updated = x.zero >= 1 ? params / double(data) + expert_params / double(std::max<int64_t>(edp, 1))
                                     : params + expert_params;
  e.optimizer = optimizer_time(updated, x, run.cluster.gpu, c);
  e.time.optimizer = e.optimizer.time_s;
}

// What the step executes (FLOPs, tokens) per second, and the MFU.
void count_throughput(Estimate& e) {
  const RunSpec& run = e.run;
  const ModelSpec& m = run.model;
  const ExecutionSpec& x = run.exec;
  const Layout& l = run.layout;
  const double mb = double(e.micro_batches);
  const double world = double(l.world_size());
  double executed_per_pipeline_mb = 0;
  double flash_per_pipeline_mb = 0;
  for (const auto& st : e.stages) executed_per_pipeline_mb += st.executed_flops, flash_per_pipeline_mb += st.flash_recompute_flops;
  e.executed_flops = executed_per_pipeline_mb * double(l.tp) * double(l.cp) * mb * double(l.dp);
  e.flash_recompute_flops = flash_per_pipeline_mb * double(l.tp) * double(l.cp) * mb * double(l.dp);

  e.tokens_per_s = double(x.global_batch_size) * double(m.seq_len) / e.time.step;
  e.tflops_per_gpu = e.executed_flops / (world * e.time.step) / 1e12;
  e.mfu_figures = mfu_of(m, x.global_batch_size, e.time.step, world * peak_flops(run.cluster.gpu, x.precision));
  e.model_flops = e.mfu_figures.model_flops;
  e.mfu = e.mfu_figures.full();
}

}  // namespace

Estimate estimate_with_links(const RunSpec& run, const Links& links, std::vector<StageMemory> memory,
                             const CostConstants& c) {
  Estimate e = estimate_without_links(run, links, std::move(memory), c);
  e.links = links;
  return e;
}

Estimate estimate_without_links(const RunSpec& run, const Links& links, std::vector<StageMemory> memory,
                                const CostConstants& c) {
  Estimate e;
  e.run = run;
  e.cost = c;
  const Layout& l = run.layout;
  e.micro_batches = std::max<int64_t>(run.exec.micro_batches(l.dp), 1);
  e.vocab_padded = padded_vocab(run.model.vocab, l.tp);

  // Memory.
  e.memory = std::move(memory);
  for (size_t i = 0; i < e.memory.size(); ++i)
    if (e.memory[i].total_bytes() > e.memory[e.most_loaded_stage].total_bytes()) e.most_loaded_stage = int64_t(i);
  e.capacity_bytes = run.cluster.gpu.memory_bytes;
  e.fits = e.peak_memory().total_bytes() <= e.capacity_bytes;

  time_pipeline(e, links, c);
  time_data_parallel(e, links, c);
  // ZeRO-3's per-layer traffic is already in the pipeline's stage times: counted once.
  const StageTime& slow = e.stages[e.pipeline.slowest_stage];
  e.time.step = e.pipeline.total_s + e.time.dp_comm - double(e.micro_batches) * slow.zero3_s + e.time.optimizer;
  count_throughput(e);
  return e;
}

}  // namespace trident::plan
