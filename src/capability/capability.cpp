// What the runtime can execute, checked without it (see capability.h).
#include "capability/capability.h"

#include <algorithm>

#include <fmt/format.h>

#include "capability/capability_table.h"

#include "core/checked_size.h"
#include "schedule/schedule.h"

namespace trident::capability {

bool device_computes(const std::string& device, Precision p) {
  if (device == "cpu") return p == Precision::FP32;
  if (device == "cuda") return p == Precision::FP32 || p == Precision::BF16;
  return false;
}

int64_t layout_ranks(std::initializer_list<SizeTerm> dims) {
  Problems named_by_check_run;
  for (const SizeTerm& d : dims)
    if (d.value <= 0) return 0;
  return checked_product("", dims, kMaxGpus, "", named_by_check_run).value_or(0);
}

void check_stage_split(int64_t model_layers, int64_t stages, const std::vector<int64_t>& explicit_layers,
                       const std::string& flag, Problems& problems) {
  auto n = [](int64_t x) { return std::to_string(x); };
  std::string list;
  for (int64_t k : explicit_layers) list += (list.empty() ? "" : ",") + n(k);
  CheckedCount sum = 0;
  bool each_ok = true;
  for (int64_t k : explicit_layers) {
    // A stage holds 1 .. all of the model's layers: beyond that the total can only be wrong.
    each_ok = each_ok && k >= 1 && k <= model_layers;
    sum = sum + k;
  }
  const std::string total = sum.ok() ? n(sum.value_or(0)) : "more than 2^62";
  if (int64_t(explicit_layers.size()) != stages || !each_ok || !sum.ok() || sum.value_or(0) != model_layers)
    problems.add(flag + " " + list + " gives " + n(int64_t(explicit_layers.size())) + " stages summing to " + total +
                     " layers; the run has " + n(stages) + " stages and " + n(model_layers) + " layers",
                 "give " + n(stages) + " counts of 1 to " + n(model_layers) + " adding up to " + n(model_layers) +
                     " (one per pipeline stage, per chunk when interleaved)",
                 "stage-split");
}

std::vector<std::string> beyond_runtime(const ModelSpec& m) {
  ModelSpec trained = m;
  trained.norm_eps = 1e-5;
  if (m.family == ModelFamily::Llama && !m.is_mla()) {
    trained.head_size = 0, trained.qk_norm = false;
    // GPT-OSS's attention: sliding windows (every N-th layer full) and sinks.
    trained.sliding_window = 0, trained.full_attention_every = 0, trained.attention_sinks = false;
    // GPT-OSS's biases (q/k/v, the output projection, the MLP and experts; which mixes train:
    // check_executable's train-biases) and its clamped gated unit.
    trained.qkv_bias = trained.proj_bias = trained.mlp_bias = -1, trained.activation_clamp = 0;
  }
  trained.router_bias = false;  // the router's linear bias (either family's MoE layer)
  // DeepSeek-V2/V3's multi-head latent attention in the Llama layer (runtime/nn/mla_layer.cpp),
  // QK-norm, windows and sinks not combined with it.
  // Its query/key head (nope + rope, Hugging Face's config reads it as head_dim) is the layer's own.
  if (m.family == ModelFamily::Llama && m.is_mla())
    trained.q_lora_rank = 0, trained.kv_lora_rank = 0, trained.qk_nope_head_dim = 0, trained.qk_rope_head_dim = 0,
    trained.v_head_dim = 0, trained.head_size = 0;
  // Llama 3.1's and YaRN's rope scaling (the rope kernels' frequencies, YaRN's attention factor
  // and MLA's softmax multiplier); linear stays refused.
  if (m.family == ModelFamily::Llama && (m.rope_scaling.type == "llama3" || m.rope_scaling.type == "yarn"))
    trained.rope_scaling = RopeScaling{};
  // DeepSeek-V3's router in either family's MoE layer: sigmoid scores, the expert bias, scaled
  // weights, group-limited routing.
  trained.router_score = "softmax", trained.router_expert_bias = false, trained.router_topk_scaling = 1.0;
  trained.router_groups = 0, trained.router_group_topk = 0;  // group-limited routing (moe_routing.cpp)
  // DeepSeek-V3's multi-token prediction after the Llama family's layers (runtime/nn/mtp.cpp), MLA's too.
  if (m.family == ModelFamily::Llama) trained.mtp_layers = 0;
  return trained.beyond_family();
}

void check_executable(const RunSpec& r, const std::string& device, const std::vector<int64_t>& stage_layers,
                      Problems& problems) {
  const auto& m = r.model;
  const auto& L = r.layout;
  const auto& x = r.exec;
  auto n = [](int64_t v) { return std::to_string(v); };
  // The planner's own checks of the run (heads, ffn, layers, batch against the layout), on a
  // cluster of exactly the layout's ranks: the world is what mpirun started, checked at start-up.
  RunSpec sized = r;
  sized.cluster.nodes = 1;
  const int64_t world = layout_ranks({{"tp", L.tp}, {"cp", L.cp}, {"pp", L.pp}, {"dp", L.dp}});
  sized.cluster.gpus_per_node = std::max<int64_t>(1, world);
  check_run(sized, true, problems);

  // What this runtime can execute (the capability check), each refusal with its fix.
  // Both families run in the stage model: GPT (learned positions, tied head) and Llama
  // (RoPE, RMSNorm, SwiGLU, grouped-query attention, untied head).
  if (m.family == ModelFamily::GPT && m.kv_heads > 0 && m.kv_heads != m.heads)
    problems.add("grouped-query attention (kv-heads " + n(m.kv_heads) + " of " + n(m.heads) +
                     " heads) in a GPT-family model: the runtime's GPT layer has one kv head per query head",
                 "use --kv-heads " + n(m.heads) + " (or leave it out) for a GPT model, or --family llama", "train-gqa");
  if (m.family == ModelFamily::Llama) {
    if (m.tied_embeddings())
      problems.add("a Llama model with its output layer tied to the token embedding: the runtime's Llama has an "
                   "untied head", "drop --tied-embeddings for a Llama model", "train-tied-embeddings");
    if (m.heads > 0 && m.hidden % m.heads == 0 && m.head_size == 0 && m.head_dim() % 2 != 0)
      problems.add("rotary embeddings rotate pairs of features, but the head size (" + n(m.head_dim()) + " = hidden " +
                       n(m.hidden) + " / heads " + n(m.heads) + ") is odd",
                   "use --hidden and --heads whose quotient is even", "train-rope-head-dim");
    if (m.head_size > 0 && m.head_size % 2 != 0)
      problems.add("rotary embeddings rotate pairs of features, but --head-dim " + n(m.head_size) + " is odd",
                   "give an even --head-dim (Qwen3: 128)", "train-rope-head-dim");
  }
  // The runtime's two families as they are (the Llama layer with Qwen3's head width and QK-norm,
  // GPT-OSS's sliding windows and sinks):
  // a model read from a config.json (or given --sliding-window, ...) that departs from them
  // would train as a different model.
  if (const auto beyond = beyond_runtime(m); !beyond.empty()) {
    std::string list;
    for (const auto& b : beyond) list += (list.empty() ? "" : ", ") + b;
    problems.add("the runtime trains plain GPT and Llama layers; " + m.name + " has " + list,
                 "plan, lint, simulate or emit it; train a plain " + to_string(m.family) +
                     " model of its sizes (--layers --hidden --heads ...) instead",
                 "train-architecture");
  }
  // Megatron's embedding / loss pipeline units only change which splits are allowed (the split
  // itself is plan::chunk_layers either way); the runtime's stages each run at least one layer.
  if (x.embedding_in_pipeline_split || x.loss_in_pipeline_split)
    problems.add(std::string(x.embedding_in_pipeline_split ? "--account-for-embedding-in-pipeline-split " : "") +
                     (x.loss_in_pipeline_split ? "--account-for-loss-in-pipeline-split " : "") +
                     "(Megatron's pipeline units): the runtime splits the layers alone and runs no pipeline chunk "
                     "that holds only the embedding or the loss",
                 "drop the flag for train: without it the runtime splits the layers as the planner does",
                 "train-pipeline-units");
  if (!x.pipeline_layout.empty())
    problems.add("--pipeline-layout '" + x.pipeline_layout.text + "': the runtime splits the layers evenly "
                     "(plan::chunk_layers, or --stage-layers) and places no MTP module or loss by a layout",
                 "drop --pipeline-layout for train, or give the split per stage with --stage-layers",
                 "train-pipeline-units");
  // Context parallel: ring attention over the cp group, each sequence cut into 2 cp chunks.
  if (L.cp > 1 && device != "cpu")
    problems.add("context parallel (cp " + n(L.cp) + ") needs the ring-attention kernels, which the " + device +
                     " backend lacks", "use --device cpu with --cp, or --cp 1", "cp-device");
  // A seq_len that 2 x cp does not divide is check_run's (cp-divides-sequence), said once.
  // The MoE layer (runtime/nn/moe_layer.cpp) trains with every schedule, zb-h1's split backward
  // included (at etp 1): routed experts on Megatron-Core's expert grid (core/mesh.h: the groups
  // plan and topo list), each tp rank dispatching its own tokens over its EP group (which may mix
  // tp and dp ranks: etp 1 folds the experts over tp x cp x dp), each expert split over its ETP
  // group (FC1 by columns, FC2 by rows; the received rows all-gathered, the outputs
  // reduce-scattered); under cp each rank routes its rows, dropping in one process's token order;
  // shared experts split over tp like the dense MLP.
  if (m.is_mla() && m.family == ModelFamily::Llama) {
    if (m.qk_rope_head_dim % 2 != 0)
      problems.add("rotary embeddings rotate pairs of features, but --qk-pos-emb-head-dim " + n(m.qk_rope_head_dim) +
                       " is odd", "give an even --qk-pos-emb-head-dim (DeepSeek-V3: 64)", "train-rope-head-dim");
    if (m.v_head_dim > m.qk_nope_head_dim + m.qk_rope_head_dim)
      problems.add("--v-head-dim " + n(m.v_head_dim) + " is wider than the query/key head (" +
                       n(m.qk_nope_head_dim + m.qk_rope_head_dim) + " = --qk-head-dim + --qk-pos-emb-head-dim): the "
                       "attention kernels pad the values to the query/key head, not the other way",
                   "give --v-head-dim at most " + n(m.qk_nope_head_dim + m.qk_rope_head_dim), "train-mla");
    if (x.schedule == ScheduleKind::ZeroBubbleH1)
      problems.add("zb-h1 with multi-head latent attention: the split backward's weight pass of MLA is not implemented",
                   "use another --schedule (1f1b, interleaved) with MLA", "train-mla");
    if (m.qk_norm)
      problems.add("QK-norm with multi-head latent attention: the MLA layer has its latents' norms, not QK-norm",
                   "drop --qk-norm", "train-mla");
  }
  if (m.family == ModelFamily::Llama && !m.is_mla()) {
    // Biases as Megatron's switches set them (--add-bias-linear: every linear layer, the router
    // included; --add-qkv-bias: q/k/v alone), so a checkpoint's model reads back from its flags.
    const bool qkv = m.has_qkv_bias(), proj = m.has_proj_bias(), mlp = m.has_mlp_bias();
    const bool all = qkv && proj && mlp && (m.router_bias || !m.is_moe()), none = !proj && !mlp && !m.router_bias;
    if (!all && !none)
      problems.add(fmt::format("biases on q/k/v {}, the output projection {}, the MLP {} and the router {}: the runtime's "
                               "Llama layer biases every linear layer (--add-bias-linear, GPT-OSS) or q/k/v alone "
                               "(--add-qkv-bias, Qwen2)",
                               qkv ? "yes" : "no", proj ? "yes" : "no", mlp ? "yes" : "no",
                               m.router_bias ? "yes" : "no"),
                   "give --add-bias-linear for biases everywhere, or --no-add-bias-linear [--add-qkv-bias]",
                   "train-biases");
    if (mlp && m.shared_experts > 0)
      problems.add(fmt::format("MLP biases with {} shared experts: the Llama layer's shared experts have no biases",
                               m.shared_experts),
                   "drop --add-bias-linear (or --add-qkv-bias alone), or --shared-experts 0", "train-biases");
  }
  if (m.is_moe() && L.etp > 1 && x.schedule == ScheduleKind::ZeroBubbleH1)
    problems.add("zb-h1 with experts split over etp " + n(L.etp) + ": the split backward's weight pass of experts "
                     "split over an etp group is not implemented",
                 "use --etp 1 (experts whole, folded over tp) with --schedule zb-h1, or another schedule",
                 "train-expert-layout");
  // ZeRO 1-3 train (grad_sync.h, zero_shards.h). ZeRO-3 gathers each unit's fp32 master weights
  // and the stage computes from them directly: there is no bf16 copy of a gathered unit yet.
  if (x.zero >= 3 && x.precision == Precision::BF16)
    problems.add("ZeRO-3 with bf16 mixed precision: the runtime gathers the fp32 master weights unit by unit and "
                 "has no bf16 compute copy of a gathered unit",
                 "use --zero 2 with --precision bf16, or --precision fp32 with --zero 3", "zero-stage");
  // Each setting the runtime runs one way (precision, attention, overlap, the stack's recipe, ...):
  // the train column of the capability table, beside the rehearsal's and the emitters'.
  refuse_for_train(r, device, problems);
  if (m.family == ModelFamily::GPT && !m.tied_embeddings())
    problems.add("an untied output layer: the runtime's GPT ties it to the token embedding",
                 "drop --no-tied-embeddings for train", "train-tied-embeddings");
  if (m.mtp_layers > 0 && x.schedule == ScheduleKind::ZeroBubbleH1)
    problems.add("zb-h1's split backward with multi-token prediction (--mtp-num-layers " + n(m.mtp_layers) +
                     "): the MTP layers' weight pass is not written",
                 "use --schedule 1f1b (or interleaved) with --mtp-num-layers, or drop it", "train-mtp");
  if (m.mtp_layers > 0 && x.zero >= 3)
    problems.add("ZeRO-3 with multi-token prediction (--mtp-num-layers " + n(m.mtp_layers) +
                     "): the MTP layers read the embedding, their layer and the head together, which ZeRO-3's "
                     "unit-by-unit weights do not hold at once",
                 "use --zero 1 or 2 with --mtp-num-layers, or drop it", "train-mtp");
  if (x.schedule == ScheduleKind::ZeroBubbleH1 && x.recompute == Recompute::Full)
    problems.add("zb-h1 postpones each weight-gradient pass past the input-gradient pass, which needs the layer "
                 "activations that --recompute full drops",
                 "use --recompute selective or none with zb-h1, or --schedule 1f1b with full recomputation",
                 "train-zb-h1");
  // The sequence-parallel rules (sp-needs-tp, sp-divides-seq) are the rule table's, said by check_run above.
  const int64_t v = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  const int64_t per = x.micro_batch_size * L.dp;
  if (per > 0 && x.global_batch_size > 0 && x.global_batch_size % per == 0 && L.pp * v <= m.layers)
    check_schedule_shape(x.schedule, L.pp, x.micro_batches(L.dp), v, problems);
  if (!stage_layers.empty()) check_stage_split(m.layers, L.pp * v, stage_layers, "--stage-layers", problems);
}

}  // namespace trident::capability
