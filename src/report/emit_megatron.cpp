// `trident plan --emit megatron`: the planned run as Megatron-LM pretrain_gpt.py arguments.
// Every setting the prediction assumes is written (Megatron's defaults are not relied on where
// the plan differs from them), or the plan is refused with what Megatron cannot express. The
// flags and the rules they must satisfy are kept in data/frameworks/ (checked by a test).
#include <fmt/format.h>

#include <algorithm>

#include "capability/capability_table.h"
#include "plan/mixture_of_experts.h"
#include "core/dimensions.h"
#include "core/pipeline_units.h"
#include "plan/cost_model.h"
#include "report/launch_config.h"
#include "report/megatron_architecture.h"
#include "report/topology_report.h"

namespace trident {

namespace {

constexpr const char* kMegatronVersion = "Megatron-LM commit d98e8a64ddf3 (Megatron-Core, 2026)";

// The order with the dimensions of size 1 left out: two orders that agree on the rest place
// every group on the same ranks.
std::string effective_order(const std::string& order, const Layout& l) {
  std::string out;
  size_t start = 0;
  while (start <= order.size()) {
    const size_t end = order.find('-', start);
    const std::string d = order.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const Dimension* dim = find_dimension(d);
    const int64_t size = dim ? l.*dim->size : 1;
    if (size > 1) out += (out.empty() ? "" : "-") + d;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

void model_args(const ModelSpec& m, std::vector<std::string>& a) {
  a.push_back(fmt::format("--num-layers {}", m.layers));
  a.push_back(fmt::format("--hidden-size {}", m.hidden));
  a.push_back(fmt::format("--ffn-hidden-size {}", m.ffn_hidden));
  a.push_back(fmt::format("--num-attention-heads {}", m.heads));
  if (m.kv_heads != m.heads) {
    a.push_back("--group-query-attention");
    a.push_back(fmt::format("--num-query-groups {}", m.kv_heads));
  }
  a.push_back(fmt::format("--seq-length {}", m.seq_len));
  a.push_back(fmt::format("--max-position-embeddings {}", m.seq_len));
  if (m.family == ModelFamily::Llama) {
    if (m.is_gated_mlp()) a.push_back("--swiglu");
    a.push_back(m.has_layer_norm() ? "--normalization LayerNorm" : "--normalization RMSNorm");
    // YaRN-scaled rotary embeddings are their own type (MLA takes them as --rope-type instead).
    a.push_back(m.rope_scaling.type == "yarn" && !m.is_mla() ? "--position-embedding-type yarn"
                                                             : "--position-embedding-type rope");
    a.push_back(fmt::format("--rotary-base {}", int64_t(m.rope_theta)));
  } else {
    a.push_back("--normalization LayerNorm");
    a.push_back("--position-embedding-type learned_absolute");
  }
  a.push_back(fmt::format("--norm-epsilon {}", m.norm_epsilon()));
  if (!m.tied_embeddings()) a.push_back("--untie-embeddings-and-output-weights");
}

void moe_args(const ModelSpec& m, const Layout& l, const ExecutionSpec& e, std::vector<std::string>& a,
              std::vector<std::string>& comments, Problems& refuse) {
  if (!m.is_moe()) return;
  const bool sequence_parallel = e.sequence_parallel;
  const RecipeSettings& r = e.recipe;
  a.push_back(fmt::format("--num-experts {}", m.experts));
  a.push_back(fmt::format("--moe-router-topk {}", m.experts_per_token));
  a.push_back(fmt::format("--moe-ffn-hidden-size {}", m.expert_ffn_hidden));
  // The plan's dispatcher (--moe-dispatcher; Megatron's own default is allgather): flex with its
  // backend for DeepEP / HybridEP.
  switch (r.moe_dispatcher) {
    case MoeDispatcher::AllToAll: a.push_back("--moe-token-dispatcher-type alltoall"); break;
    case MoeDispatcher::AllGather: a.push_back("--moe-token-dispatcher-type allgather"); break;
    case MoeDispatcher::DeepEP:
    case MoeDispatcher::HybridEP:
      a.push_back("--moe-token-dispatcher-type flex");
      a.push_back("--moe-flex-dispatcher-backend " + to_string(r.moe_dispatcher));
      break;
  }
  if (r.moe_fp8_dispatch) a.push_back("--moe-dispatch-fwd-dtype mxfp8");
  if (r.moe_ep_overlap) {
    const std::string blocker = plan::ep_overlap_blocker(e, l.pp);
    if (!blocker.empty())
      refuse.add("--moe-ep-overlap with " + blocker + ": Megatron-Core's --overlap-moe-expert-parallel-comm needs the "
                 "alltoall or flex dispatcher, pp 1 or the interleaved schedule, and no full recompute",
                 "replan without --moe-ep-overlap, or with what it needs", "megatron-ep-overlap");
    a.push_back("--overlap-moe-expert-parallel-comm");
    a.push_back("--delay-wgrad-compute");
  }
  if (m.shared_experts > 0)
    a.push_back(fmt::format("--moe-shared-expert-intermediate-size {}", m.shared_experts * m.shared_expert_width()));
  if (m.capacity_factor > 1.0) a.push_back(fmt::format("--moe-expert-capacity-factor {}", m.capacity_factor));
  if (m.moe_dense_layers > 0 && m.moe_layer_freq == 1) {
    // "[0]*k+[1]*n": the first k layers keep a dense MLP.
    a.push_back(fmt::format("--moe-layer-freq ([0]*{}+[1]*{})", m.moe_dense_layers, m.layers - m.moe_dense_layers));
  } else if (m.moe_dense_layers == 0 && m.moe_layer_freq > 1 && m.moe_layer_phase == 0) {
    a.push_back(fmt::format("--moe-layer-freq {}", m.moe_layer_freq));  // layer i is MoE when i % N == 0
  } else if (m.moe_layer_freq > 1) {
    std::string pattern;  // one 0/1 per layer: Megatron's list form
    for (int64_t l = 0; l < m.layers; ++l) pattern += fmt::format("{}{}", l ? "," : "", m.is_moe_layer(l) ? 1 : 0);
    a.push_back(fmt::format("--moe-layer-freq [{}]", pattern));
  }
  if (l.ep > 1) a.push_back(fmt::format("--expert-model-parallel-size {}", l.ep));
  // Always written: the plan's expert grid (core/mesh.h) is Megatron's for this etp, whose own
  // default (etp = tp) would differ from the plan's where the plan folds (etp 1).
  if (m.is_moe()) a.push_back(fmt::format("--expert-tensor-parallel-size {}", l.etp));
  if (m.is_moe() && l.etp != l.tp)
    comments.push_back(fmt::format("experts folded over attention's tp {}: the expert grid etp {} x ep {} x edp {} "
                                   "lays out each stage's tp x cp x dp ranks again (MoE parallel folding)",
                                   l.tp, l.etp, l.ep, l.size(Dim::EDP)));
  if (l.ep > 1 && l.tp > 1 && !sequence_parallel)
    refuse.add("expert parallel with tp > 1 and no sequence parallel: Megatron requires --sequence-parallel then",
               "replan with --sequence-parallel", "megatron-ep-sequence-parallel");
}

// Layers per pipeline stage as the planner split them: even, uneven first/last stages, or (with
// interleaving) a layout string of every chunk.
void pipeline_args(const RunSpec& run, std::vector<std::string>& a, std::vector<std::string>& comments,
                   Problems& refuse) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;
  if (e.schedule == ScheduleKind::ZeroBubbleH1 && l.pp > 1)
    refuse.add("schedule zb-h1: Megatron-LM's pretrain_gpt.py has no zero-bubble schedule",
               "replan without --schedule: with --emit megatron the search keeps to the schedules Megatron runs",
               "megatron-schedule");
  if (e.schedule == ScheduleKind::GPipe && l.pp > 1)
    refuse.add("schedule gpipe: Megatron always runs 1F1B (the plan's activation memory differs)",
               "replan without --schedule: with --emit megatron the search keeps to the schedules Megatron runs",
               "megatron-schedule");
  if (l.pp == 1) return;
  // A --pipeline-layout is written back as the layout string (spelled out below).
  const bool given = !e.pipeline_layout.empty();
  if (!given && (e.embedding_in_pipeline_split || e.loss_in_pipeline_split)) {
    // Megatron splits layers + the units evenly, the first (last) chunk holding one layer less:
    // the planner's split (pp_within_layers checked that they divide).
    const int64_t units = m.layers + pipeline_split_extra_units(e);
    if (e.embedding_in_pipeline_split) a.push_back("--account-for-embedding-in-pipeline-split");
    if (e.loss_in_pipeline_split) a.push_back("--account-for-loss-in-pipeline-split");
    if (v > 1) a.push_back(fmt::format("--num-layers-per-virtual-pipeline-stage {}", units / (l.pp * v)));
    comments.push_back(fmt::format("{} layers and {} pipeline units (embedding / loss) in {} chunks of {} (pp {} x v {})",
                                   m.layers, units - m.layers, l.pp * v, units / (l.pp * v), l.pp, v));
    return;
  }
  const std::vector<int64_t> chunks = plan::chunk_layers(m.layers, l.pp, e);
  const bool even = !given && std::all_of(chunks.begin(), chunks.end(), [&](int64_t c) { return c == chunks.front(); });
  if (even) {
    if (v > 1) a.push_back(fmt::format("--num-layers-per-virtual-pipeline-stage {}", chunks.front()));
    return;
  }
  const std::vector<int64_t> stages = plan::stage_layers(m.layers, l.pp, 1);
  // Megatron's first/last flags split the layers left evenly over the middle stages: they say the
  // planner's split only when its middle stages are equal (61 layers on pp 8 is 7, 8 x 5, 7, 7: not).
  const bool middle_even = l.pp > 2 && std::all_of(stages.begin() + 1, stages.end() - 1,
                                                   [&](int64_t s) { return s == stages[1]; });
  if (!given && v == 1 && middle_even) {
    a.push_back(fmt::format("--decoder-first-pipeline-num-layers {}", stages.front()));
    a.push_back(fmt::format("--decoder-last-pipeline-num-layers {}", stages.back()));
    comments.push_back(fmt::format("pipeline stages of {} layers: first {}, last {}, the {} others {} each", m.layers,
                                   stages.front(), stages.back(), l.pp - 2, l.pp > 2 ? stages[1] : 0));
    return;
  }
  // Otherwise every chunk spelled out (E embedding, t a layer, m an MTP module, L the loss), in
  // Megatron's order of virtual stage then pipeline rank, the planner's chunk order too; the MTP
  // modules sit before the loss on the last chunk, where the plan costs them.
  std::string layout;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (c > 0) layout += "|";
    if (c == 0) layout += "E";
    layout += std::string(size_t(chunks[c]), 't');
    if (c + 1 == chunks.size()) layout += std::string(size_t(std::max<int64_t>(m.mtp_layers, 0)), 'm') + "L";
  }
  a.push_back(fmt::format("--pipeline-model-parallel-layout {}", layout));
  comments.push_back(fmt::format("{} layers in {} chunks of {} to {} (pp {} x v {}): written as a layout string",
                                 m.layers, chunks.size(), *std::min_element(chunks.begin(), chunks.end()),
                                 *std::max_element(chunks.begin(), chunks.end()), l.pp, v));
}

void parallel_args(const RunSpec& run, std::vector<std::string>& a, Problems& refuse) {
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  a.push_back(fmt::format("--tensor-model-parallel-size {}", l.tp));
  a.push_back(fmt::format("--pipeline-model-parallel-size {}", l.pp));
  if (l.cp > 1) {
    a.push_back(fmt::format("--context-parallel-size {}", l.cp));
    // p2p: the ring of KV blocks; allgather: K and V gathered in the cp group (what the plan costs).
    a.push_back(run.exec.recipe.cp_kind == CpKind::AllGather ? "--cp-comm-type allgather" : "--cp-comm-type p2p");
  }
  const std::string order = effective_order(l.order, l);
  const Layout def{l.tp, l.cp, l.dp, l.pp, "tp-cp-ep-dp-pp", l.ep};
  const Layout tppd{l.tp, l.cp, l.dp, l.pp, "tp-pp-dp", l.ep};
  if (order == effective_order(def.order, def)) {
    // Megatron's default order.
  } else if (l.cp == 1 && l.ep == 1 && order == effective_order(tppd.order, tppd)) {
    a.push_back("--use-tp-pp-dp-mapping");
  } else {
    refuse.add(fmt::format("rank order {}: Megatron places ranks as tp-cp-ep-dp-pp (its default) or tp-pp-dp "
                           "(--use-tp-pp-dp-mapping, without cp or ep) only",
                           l.order),
               "replan with --order tp-cp-ep-dp-pp" + std::string(l.cp == 1 && l.ep == 1 ? " or --order tp-pp-dp" : ""),
               "megatron-order");
  }
  if (e.sequence_parallel && l.tp > 1) a.push_back("--sequence-parallel");
  if (e.recompute == Recompute::Selective) {
    // Megatron's selective recompute checkpoints the core attention (its default
    // --recompute-modules core_attn), fused or not: it cannot keep a fused attention's output.
    // (the capability table's Megatron column refuses that plan).
    const bool core_attn = !e.recompute_modules.any() || e.recompute_modules.core_attn;
    if (!(core_attn && e.attention == AttentionKind::Flash && !e.recompute_flash_attention))
      a.push_back("--recompute-granularity selective");
    if (e.recompute_modules.any()) {  // a list: each module a word of its own (Megatron's nargs '*')
      a.push_back("--recompute-modules");
      const std::string modules = to_string(e.recompute_modules);
      for (size_t start = 0, end = 0; start < modules.size(); start = end + 1) {
        end = std::min(modules.find(',', start), modules.size());
        a.push_back(modules.substr(start, end - start));
      }
    }
  }
  if (e.recompute == Recompute::Full) {
    a.push_back("--recompute-granularity full");
    a.push_back("--recompute-method uniform");
    a.push_back("--recompute-num-layers 1");
  }
  if (e.zero == 1) a.push_back("--use-distributed-optimizer");
  if (e.zero >= 2) {
    // Megatron-FSDP: ZeRO-2 shards optimizer and gradients, ZeRO-3 the weights too.
    a.push_back("--use-megatron-fsdp");
    a.push_back("--use-distributed-optimizer");
    a.push_back("--no-gradient-accumulation-fusion");
    a.push_back(fmt::format("--data-parallel-sharding-strategy {}", e.zero == 2 ? "optim_grads" : "optim_grads_params"));
    a.push_back("--ckpt-format fsdp_dtensor");
  }
  a.push_back(fmt::format("--micro-batch-size {}", e.micro_batch_size));
  if (e.global_batch_size > 0) a.push_back(fmt::format("--global-batch-size {}", e.global_batch_size));
}

// Number formats, the attention kernel and each overlap the prediction assumed.
void recipe_args(const RunSpec& run, std::vector<std::string>& a, Problems& refuse) {
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  a.push_back("--transformer-impl transformer_engine");
  if (e.precision == Precision::BF16 || quantized_gemms(e.precision)) a.push_back("--bf16");
  if (e.precision == Precision::FP16) a.push_back("--fp16");
  // FP8 matrix products in the layers (E4M3 forward, E5M2 gradients), bf16 elsewhere; MXFP8 E4M3
  // throughout with 32-element block scales; NVFP4 E2M1 with 16-element blocks. Every layer
  // quantised, as planned (no --first-last-layers-bf16).
  if (e.precision == Precision::FP8) a.push_back("--fp8-format hybrid");
  if (e.precision == Precision::MXFP8) a.insert(a.end(), {"--fp8-format e4m3", "--fp8-recipe mxfp8"});
  if (e.precision == Precision::NVFP4) a.insert(a.end(), {"--fp4-format e2m1", "--fp4-recipe nvfp4"});
  if (quantized_gemms(e.precision) && !e.recipe.fp8_fused_casts)
    refuse.add("FP8 casts not fused: Megatron-Core's Transformer Engine layers cast the QKV, FC1 and FC2 inputs inside "
               "the norms and the activation",
               "replan with --fp8-fused-casts (or --stack megatron-core-te)", "megatron-fp8-casts");
  // Megatron-Core fuses SwiGLU by default (bias_swiglu_fusion: keeps the gate and up output only).
  if (run.model.family == ModelFamily::Llama && !e.recipe.fused_swiglu) a.push_back("--no-bias-swiglu-fusion");
  // CUDA graphs as planned (plan/host_issue.h): Megatron-Core's implementation and, per layer,
  // the modules it captures (none named: the whole layer, its default).
  if (e.recipe.cuda_graphs != CudaGraphs::None) {
    std::string impl = to_string(e.recipe.cuda_graphs);
    std::replace(impl.begin(), impl.end(), '-', '_');
    a.push_back("--cuda-graph-impl " + impl);
    if (e.recipe.cuda_graph_scopes.any()) {  // a list: each module a word of its own
      a.push_back("--cuda-graph-modules");
      const std::string modules = to_string(e.recipe.cuda_graph_scopes);
      for (size_t start = 0, end = 0; start < modules.size(); start = end + 1) {
        end = std::min(modules.find(',', start), modules.size());
        a.push_back(modules.substr(start, end - start));
      }
    }
  }
  if (e.recipe.fp8_params) a.push_back("--fp8-param-gather");  // FP8 weights, gathered as FP8
  if (e.recipe.optimizer_state_bits == 16) {
    // Megatron-Core's precision-aware optimizer: its 16-bit master copy is fp16, the moments bf16.
    a.push_back("--use-precision-aware-optimizer");
    a.push_back("--main-params-dtype fp16");
    a.push_back("--exp-avg-dtype bf16");
    a.push_back("--exp-avg-sq-dtype bf16");
  }
  if (e.precision != Precision::FP32) {
    if (e.grad_bits == 32) a.push_back("--accumulate-allreduce-grads-in-fp32");
    else if (e.precision != Precision::FP16) a.push_back("--grad-reduce-in-bf16");  // fp16: refused by the table
  }
  // flash: fused kernels that never store the scores (cuDNN's, shipped with Transformer Engine).
  a.push_back(fmt::format("--attention-backend {}", e.attention == AttentionKind::Flash ? "fused" : "unfused"));
  // DP overlap per chunk in the interleaved schedule, the pipeline's whole-tensor sends: refused
  // (when the plan differs) by the capability table's Megatron column.
  // Without --overlap-grad-reduce Megatron reduces after the pipeline flush: what
  // dp_after_pipeline_flush asks for.
  if (dp_overlapped(e, l.pp)) {
    a.push_back("--overlap-grad-reduce");
    if (e.zero >= 1) a.push_back("--overlap-param-gather");
  }
  if (e.overlap.tp && l.tp > 1 && e.sequence_parallel) a.push_back("--tp-comm-overlap");  // without sp: refused
  if (l.pp > 1 && e.schedule == ScheduleKind::Interleaved && !e.overlap.pp)
    a.push_back("--no-overlap-p2p-communication");
}

}  // namespace

FrameworkLaunch megatron_launch(const RunSpec& run) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  FrameworkLaunch f;
  f.framework = "Megatron-LM";
  f.version = kMegatronVersion;
  f.entry = "pretrain_gpt.py";
  f.comments.push_back(fmt::format("Megatron-LM pretrain_gpt.py arguments for {} on {} GPUs ({} nodes x {}): {}",
                                   describe_model(m), l.world_size(), run.cluster.nodes, run.cluster.gpus_per_node,
                                   l.describe()));
  f.comments.push_back("written for " + f.version + "; checked against its argument parser and validate_args rules "
                                                    "kept in data/frameworks/");
  f.comments.push_back(fmt::format("world size {}; data-parallel size {} = world / (tp {} x pp {}{}): Megatron "
                                   "derives it",
                                   l.world_size(), l.dp, l.tp, l.pp, l.cp > 1 ? fmt::format(" x cp {}", l.cp) : ""));
  f.comments.push_back(fmt::format("vocabulary {}: from the tokenizer (--tokenizer-type, or NullTokenizer with "
                                   "--vocab-size); Megatron pads it to a multiple of 128 x tp",
                                   m.vocab));
  // Megatron's validate_args refuses tp or cp above 1 without it (kernels must queue in order
  // for the communication/compute overlap).
  if (l.tp > 1 || l.cp > 1) f.env.push_back({"CUDA_DEVICE_MAX_CONNECTIONS", "1"});
  model_args(m, f.args);
  megatron_architecture_args(m, f.args, f.comments, f.refusals);
  parallel_args(run, f.args, f.refusals);
  pipeline_args(run, f.args, f.comments, f.refusals);
  moe_args(m, l, run.exec, f.args, f.comments, f.refusals);
  recipe_args(run, f.args, f.refusals);
  // Each setting Megatron runs one way: its column of the capability table.
  capability::refuse_for_megatron(run, f.refusals);
  return f;
}

}  // namespace trident
