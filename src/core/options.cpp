#include "core/options.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/dimensions.h"
#include "core/hf_config.h"
#include "core/input_file.h"
#include "core/suggest.h"

namespace trident {

// Upper bounds of the model and batch sizes, far beyond any model trained (the deepest have
// about 200 layers, the widest h = 25600, the longest contexts 10M tokens, the largest
// vocabularies 256k, global batches a few thousand sequences): within them every per-layer
// table and memory estimate stays a number a person can read and a plan of a million GPUs
// finishes in about a minute; beyond them a plan or a simulation would never finish.
constexpr double kMaxLayers = 1 << 12, kMaxWidth = 1 << 22, kMaxHeads = 1 << 16, kMaxSequence = 1 << 24,
                 kMaxVocab = 1 << 24, kMaxBatch = 1 << 20;

std::vector<OptionDef> model_options() {
  return {
      {"model", "model", "model preset (gpt3-175b, gpt2-small, llama3-8b, ...)", false, "NAME", "none"},
      input_path({"hf-config", "model", "the model of a Hugging Face config.json (GPT-2, Llama 2/3/4, Mistral, Mixtral, "
                  "Qwen2/3 dense and MoE, DeepSeek-V2/V3, GPT-OSS, Grok-1, Nemotron-4); flags override its sizes",
                  false, "FILE", "none"}),
      {"family", "model", "gpt or llama (for a model described by its sizes)", false, "gpt|llama", "gpt"},
      {"layers", "model", "transformer layers", false, "INT", "preset", 0, kMaxLayers},
      {"hidden", "model", "hidden size h", false, "INT", "preset", 0, kMaxWidth},
      {"heads", "model", "attention heads", false, "INT", "preset", 0, kMaxHeads},
      {"head-dim", "model", "width of one attention head (Qwen3: 128 on hidden 2048 x 32 heads)", false, "INT", "hidden/heads", 1, kMaxWidth},
      {"qk-norm", "model", "RMSNorm over each head's queries and keys (Qwen3)", true, "", "off, or the config's"},
      {"rope-theta", "model", "base of the rotary embedding angles", false, "NUM", "10000, Llama 3: 500000", 1, 1e12},
      {"norm-epsilon", "model", "LayerNorm / RMSNorm epsilon", false, "NUM", "1e-5", 1e-12, 0.1},
      {"window-size", "model", "sliding-window attention: each query sees the last N keys, itself included (Hugging Face's sliding_window; GPT-OSS: 128); 0 = none", false, "INT", "0 or the config's", 0, kMaxSequence},
      {"window-attn-skip-freq", "model", "with --window-size: every N-th layer attends to all keys (Megatron's --window-attn-skip-freq; GPT-OSS: 2, alternate layers); 0 = every layer windowed", false, "INT", "0 or the config's", 0, kMaxLayers},
      {"attention-sinks", "model", "a learned logit per head in each attention row's softmax denominator (GPT-OSS's sinks; Megatron's softmax_type learnable)", true, "", "off, or the config's"},
      {"add-qkv-bias", "model", "biases on the query, key and value projections (Megatron's; Qwen2)", true, "", "the family's (GPT on, Llama off), or the config's"},
      {"add-bias-linear", "model", "biases on every linear layer: q/k/v, the output projection, the MLP or experts and the router (Megatron's add_bias_linear, on there by default; GPT-OSS)", true, "", "the family's (GPT on, Llama off), or the config's"},
      {"activation-func-clamp-value", "model", "GPT-OSS's gated unit: gate clamped to at most this, up to +-this, (up + 1) gate sigmoid(1.702 gate) (Megatron's, with its quick_geglu and glu_linear_offset 1.0; GPT-OSS: 7); 0 = SwiGLU", false, "NUM", "0, or the config's swiglu_limit", 0, 1e6},
      {"multi-latent-attention", "model", "multi-head latent attention (DeepSeek-V2/V3, Megatron's): keys and values "
       "from a latent of --kv-lora-rank, heads of --qk-head-dim + --qk-pos-emb-head-dim, values of --v-head-dim", true, "",
       "off, or the config's"},
      {"q-lora-rank", "model", "with MLA: the queries' latent rank (0: queries projected from h)", false, "INT", "0, or the config's", 0, kMaxWidth},
      {"kv-lora-rank", "model", "with MLA: the keys' and values' latent rank", false, "INT", "32, or the config's", 1, kMaxWidth},
      {"qk-head-dim", "model", "with MLA: a query/key head's part without rotary embeddings (DeepSeek-V3: 128)", false, "INT", "128, or the config's", 1, kMaxWidth},
      {"qk-pos-emb-head-dim", "model", "with MLA: a query/key head's rotary part, one rope key shared by the heads (DeepSeek-V3: 64)", false, "INT", "64, or the config's", 1, kMaxWidth},
      {"v-head-dim", "model", "with MLA: a value head's width (DeepSeek-V3: 128)", false, "INT", "128, or the config's", 1, kMaxWidth},
      {"rope-scaling-factor", "model", "Llama 3.1's rope scaling (Megatron's use_rope_scaling with this factor): "
       "low frequencies slowed by this factor", false, "NUM", "none, or the config's", 1, 1e6},
      {"rope-low-freq-factor", "model", "with rope scaling: wavelengths over original context / this are scaled", false, "NUM", "1", 1e-6, 1e6},
      {"rope-high-freq-factor", "model", "with rope scaling: wavelengths under original context / this are kept", false, "NUM", "4", 1e-6, 1e6},
      {"rope-original-max-position", "model", "with rope scaling: the context the model was trained at before", false, "INT", "8192", 1, kMaxSequence},
      // YaRN (DeepSeek-V3, GPT-OSS) by Megatron's names; a config's rope_scaling {type yarn} sets them.
      {"rope-type", "model", "rope (plain, or Llama 3.1's with --rope-scaling-factor) or yarn (YaRN's frequencies "
       "and attention factor, Megatron's --rope-type yarn)", false, "rope|yarn", "rope, or the config's"},
      {"rotary-scaling-factor", "model", "with --rope-type yarn: the context extension factor (DeepSeek-V3: 40, GPT-OSS: 32)", false, "NUM", "1, or the config's", 1, 1e6},
      {"yarn-original-max-position-embeddings", "model", "with --rope-type yarn: the context before extension", false, "INT", "4096, or the config's", 1, kMaxSequence},
      {"yarn-beta-fast", "model", "with --rope-type yarn: rotations that end the ramp's extrapolated pairs", false, "NUM", "32, or the config's", 1e-6, 1e6},
      {"yarn-beta-slow", "model", "with --rope-type yarn: rotations that start the ramp's interpolated pairs", false, "NUM", "1, or the config's", 1e-6, 1e6},
      {"mscale", "model", "with --rope-type yarn: the attention factor's mscale (0.1 mscale ln(factor) + 1)", false, "NUM", "1, or the config's", 0, 1e6},
      {"mscale-all-dim", "model", "with --rope-type yarn: the attention factor's divisor mscale, and MLA's softmax "
       "scale x (0.1 mscale-all-dim ln(factor) + 1)^2; 0 = none", false, "NUM", "0, or the config's", 0, 1e6},
      {"yarn-correction-range-round-to-int", "model", "with --rope-type yarn: the ramp's ends rounded to whole pairs "
       "(Hugging Face's truncate; GPT-OSS: --no-yarn-correction-range-round-to-int)", true, "", "on, or the config's"},
      {"kv-heads", "model", "key/value heads (grouped-query attention); default = heads", false, "INT", "heads", 0, kMaxHeads},
      {"ffn-hidden", "model", "MLP width; default 4h", false, "INT", "4*hidden", 0, kMaxWidth},
      {"seq-len", "model", "sequence length in tokens", false, "INT", "preset or 2048", 0, kMaxSequence},
      {"vocab", "model", "vocabulary size", false, "INT", "preset or 50257", 0, kMaxVocab},
      {"experts", "model", "routed experts per MoE layer (0 = dense model)", false, "INT", "0 or preset", 0, kMaxHeads},
      {"experts-per-token", "model", "experts each token is routed to (top-k)", false, "INT", "2 or preset", 0, kMaxHeads},
      {"expert-ffn-hidden", "model", "MLP width of one expert", false, "INT", "ffn-hidden or preset", 0, kMaxWidth},
      {"shared-experts", "model", "experts every token uses besides its top-k (DeepSeek style)", false, "INT", "0 or preset", 0, kMaxHeads},
      {"moe-dense-layers", "model", "leading layers that keep a dense MLP", false, "INT", "0 or preset", 0, kMaxLayers},
      {"moe-layer-freq", "model", "after them, every N-th layer is a MoE layer, the others dense (Megatron's --moe-layer-freq N)", false, "INT", "1", 0, kMaxLayers},
      {"capacity-factor", "model", "most tokens an expert takes, over the mean (1 = balanced)", false, "NUM", "1"},
      {"moe-router-score-function", "model", "the router's scores: softmax over the experts, or sigmoid of each (DeepSeek-V3)", false, "softmax|sigmoid", "softmax, or the config's"},
      {"moe-router-enable-expert-bias", "model", "the top-k chosen on score + a per-expert bias that each step moves towards balance (DeepSeek-V3's aux-loss-free balancing)", true, "", "off, or the config's"},
      {"moe-router-topk-scaling-factor", "model", "the chosen experts' weights scaled by this (DeepSeek-V3's routed_scaling_factor: 2.5)", false, "NUM", "1, or the config's", 1e-6, 1e6},
      {"mtp-num-layers", "model", "multi-token-prediction layers after the last layer, each predicting one token further (DeepSeek-V3's num_nextn_predict_layers: 1)", false, "INT", "0, or the config's", 0, kMaxLayers},
      {"moe-router-num-groups", "model", "group-limited routing: the experts in this many groups, each token choosing among its best --moe-router-group-topk groups (DeepSeek-V3's n_group: 8)", false, "INT", "0, or the config's", 0, 1 << 20},
      {"moe-router-group-topk", "model", "with --moe-router-num-groups: the groups a token chooses its experts in, by the sum of each group's top k / this scores (DeepSeek-V3's topk_group: 4)", false, "INT", "0, or the config's", 0, 1 << 20},
      {"moe-load-imbalance", "model", "rows the most loaded ep rank's experts take per dispatch, over the mean (1 = balanced; the planner charges the others' wait)", false, "NUM", "1"},
  };
}

std::vector<OptionDef> cluster_options() {
  return {
      {"cluster", "cluster", "cluster preset (dgx-a100-80g, dgx-h100, gigabit-ethernet, ...)", false, "NAME", "dgx-a100-80g"},
      {"nodes", "cluster", "number of nodes", false, "INT", "preset or layout", 1},
      {"gpus-per-node", "cluster", "GPUs in each node (host)", false, "INT", "preset", 1},
      {"hosts-per-nvlink-domain", "cluster", "hosts sharing one NVLink fabric (1 for a DGX, 18 for GB200 NVL72)", false, "INT", "preset"},
      {"gpu", "cluster", "GPU type from the catalog (a100-80g, h100-80g, ...)", false, "NAME", "preset"},
      {"gpu-memory-gib", "cluster", "GPU memory, GiB", false, "NUM", "preset"},
      {"gpu-bf16-tflops", "cluster", "dense 16-bit peak, TFLOP/s", false, "NUM", "preset"},
      {"gpu-fp32-tflops", "cluster", "fp32 peak, TFLOP/s", false, "NUM", "preset"},
      {"gpu-fp8-tflops", "cluster", "dense FP8 peak, TFLOP/s (0: no FP8)", false, "NUM", "preset"},
      {"gpu-fp4-tflops", "cluster", "dense FP4 peak, TFLOP/s (0: no FP4, nor MXFP8 / NVFP4 block scaling)", false, "NUM", "preset"},
      {"gpu-hbm-gbytes-per-s", "cluster", "memory bandwidth, GB/s", false, "NUM", "preset"},
      {"intra-link", "cluster", "link inside a node: nvlink or pcie", false, "nvlink|pcie", "preset"},
      {"intra-gbytes-per-s", "cluster", "per-GPU bandwidth inside a node, GB/s per direction (or with a unit: 900GB/s, 400Gb/s)", false, "NUM", "preset"},
      {"intra-latency-us", "cluster", "latency inside a node, microseconds", false, "NUM", "preset"},
      {"inter-link", "cluster", "link between nodes: infiniband or ethernet", false, "infiniband|ethernet", "preset"},
      {"inter-node-gbytes-per-s", "cluster", "a node's total network bandwidth, GB/s per direction; or per GPU with a unit as vendors quote it (400Gb/s: one 400 Gb/s NIC per GPU)", false, "NUM", "preset"},
      {"inter-latency-us", "cluster", "latency between nodes, microseconds", false, "NUM", "preset"},
  };
}

std::vector<OptionDef> layout_options() { return dimension_options(); }

std::vector<OptionDef> execution_options() {
  return {
      {"global-batch-size", "training", "sequences per optimizer step", false, "INT", "none", 0, kMaxBatch},
      {"micro-batch-size", "training", "sequences per micro-batch", false, "INT", "1", 0, kMaxBatch},
      {"schedule", "training", "pipeline schedule: gpipe, 1f1b, interleaved or zb-h1", false, "gpipe|1f1b|interleaved|zb-h1", "1f1b"},
      {"virtual-stages", "training", "model chunks per GPU for the interleaved schedule", false, "INT", "1 (2 if interleaved)", 0, kMaxLayers},
      {"account-for-embedding-in-pipeline-split", "training",
       "count the embedding as a layer when splitting layers over pipeline chunks (Megatron's flag): the first chunk holds one layer less",
       true, "", "off"},
      {"account-for-loss-in-pipeline-split", "training",
       "count the loss as a layer when splitting layers over pipeline chunks (Megatron's flag): the last chunk holds one layer less",
       true, "", "off"},
      {"pipeline-layout", "training",
       "the layers of each pipeline chunk as Megatron-Core's pipeline_model_parallel_layout writes them (E embedding, t layer, "
       "m MTP module, L loss, | between chunks, X*N and (...)*N repeats), e.g. \"Et*4|(t*4|)*14tmL\"; the even split when not given",
       false, "LAYOUT", "the even split"},
      {"zero", "training", "ZeRO stage 0-3 (1 = distributed optimizer)", false, "0|1|2|3", "0", -1e18},  // its own check names the stages
      {"recompute", "training", "activation recomputation: none, selective or full", false, "none|selective|full", "none"},
      {"recompute-modules", "training",
       "with --recompute selective, the modules recomputed (Megatron-Core's --recompute-modules): a list of core_attn, "
       "mla_up_proj, moe_act, layernorm, mlp (moe, shared_experts: not modelled, refused)",
       false, "LIST", "core_attn"},
      {"sequence-parallel", "training", "sequence parallel around LayerNorm and dropout", true, "", "on with tp > 1 (train: off)"},
      {"recompute-flash-attention", "training",
       "with --recompute selective and flash attention, rerun the fused attention forward before the backward "
       "(Megatron-Core's core-attention checkpoint)",
       true, "", "on with --stack megatron-core-te, else off"},
      {"precision", "training",
       "bf16, fp16 (both with fp32 master weights), fp32, or fp8 (FP8 matrix products, bf16 elsewhere)", false,
       "bf16|fp16|fp32|fp8", "bf16"},
      {"grad-bits", "training", "gradient element size, also of the DP reduction: 32 (fp32 main grads) or 16", false,
       "32|16", "32"},
      {"fp8-params", "training",
       "with --precision fp8, keep the weights in FP8 (Transformer Engine's fp8 primary weights): 1 byte per "
       "parameter, no 16-bit copy, FP8 weight all-gathers in the distributed optimizer",
       true, "", "off"},
      {"optimizer-state-bits", "training",
       "Adam moments and master weights: 32, or 16 (Megatron-Core's precision-aware optimizer)", false, "32|16", "32"},
      {"cp-kind", "training",
       "context parallel attention: ring (KV blocks passed round the cp group behind the attention) or allgather "
       "(K and V all-gathered in the cp group, as Meta ran Llama 3)",
       false, "ring|allgather", "ring (allgather with --stack torchtitan)"},
      {"moe-dispatcher", "training",
       "how a MoE layer moves tokens to the expert ranks (Megatron-Core's moe_token_dispatcher_type): alltoall (every "
       "routed copy), allgather (the tokens all-gathered over the ep group, reduce-scattered back), deepep or hybridep "
       "(flex: one network copy per destination NVLink domain, fanned out over NVLink; flex = deepep)",
       false, "alltoall|allgather|deepep|hybridep|flex", "alltoall"},
      {"moe-fp8-dispatch", "training",
       "the forward dispatch sends MXFP8 rows (1 B + a scale per 32), combine and backward stay 16-bit "
       "(Megatron-Core's moe_dispatch_fwd_dtype mxfp8)",
       true, "", "off"},
      {"moe-ep-overlap", "training",
       "MoE dispatch and combine of one micro-batch behind the other micro-batch's compute (Megatron-Core's "
       "overlap_moe_expert_parallel_comm, delay_wgrad_compute); needs the alltoall or flex dispatcher, pp 1 or the "
       "interleaved schedule, and no full recompute",
       true, "", "off"},
      {"cuda-graphs", "training",
       "CUDA graphs (Megatron-Core's cuda_graph_impl): none, local or transformer-engine (each layer's --cuda-graph-scope "
       "captured, one host launch per graph instead of one per kernel), full-iteration (the whole step one graph: no "
       "host floor)",
       false, "none|local|transformer-engine|full-iteration", "none"},
      {"cuda-graph-scope", "training",
       "what a per-layer CUDA graph captures, comma separated (Megatron-Core's cuda_graph_modules): attn, mlp, moe, "
       "moe_router, moe_preprocess; empty or full: the whole layer",
       false, "LIST", "the whole layer"},
      {"dp-overlap-per-chunk", "training",
       "interleaved schedule: each model chunk's gradient reduction and weight all-gather overlapped on its own "
       "(Megatron's overlap_grad_reduce per chunk)",
       true, "", "on with --stack megatron-core-te, else off"},
      {"pipeline-sends-whole-tensor", "training",
       "without sequence parallel, pipeline sends carry the whole b x s x h activation from every TP rank (Megatron-Core, "
       "DeepSpeed's pipeline engine, torchtitan, trident train); off, each TP rank sends a 1/tp share that the receiver "
       "all-gathers (Megatron-LM's scatter/gather up to 2022). Under sequence parallel each TP rank sends its s/tp rows either way",
       true, "", "on with every --stack but megatron-lm-2021; off without one"},
      {"dp-after-pipeline-flush", "training",
       "with pp > 1, reduce the gradients after the pipeline flush instead of behind the last micro-batch's backward "
       "(DeepSpeed's pipeline engine: its ReduceGrads step follows the last backward)",
       true, "", "on with --stack deepspeed, else off"},
      {"fp8-fused-casts", "training",
       "with --precision fp8, the casts of the QKV and FC1 inputs fused into the norms and the FC2 input's into the "
       "activation (Transformer Engine's LayerNormLinear / LayerNormMLP); off, each GEMM input is cast on its own",
       true, "", "on with --stack megatron-core-te, else off"},
      {"fused-swiglu", "training",
       "a SwiGLU MLP's activation fused into one kernel that keeps only the gate and up projections' output for the "
       "backward (Megatron-Core's bias_swiglu_fusion, Transformer Engine's LayerNormMLP, Trident's kernel): 6 s b f "
       "bytes stored; off, eager silu then product also keep silu(gate): 8 s b f",
       true, "", "on, off with --stack deepspeed or torchtitan"},
      {"stack-compute-efficiency", "training",
       "share of the cost table's compute rate the software stack reaches on the same layout (1 = Megatron-LM's, "
       "on which the tables are measured; --stack deepspeed sets the ratio measured between the two stacks)",
       false, "NUM", "1 (--stack deepspeed: its measured ratio)", 0.05, 1},
      {"attention", "training", "attention kernels: unfused (scores stored) or flash (fused, never stores them)", false,
       "unfused|flash", "unfused"},
      {"overlap", "training", "communications hidden behind compute: any of tp,dp,pp, or none, or all", false,
       "LIST", "dp"},
      {"stack", "training",
       "software stack preset: trident, megatron-lm-2021, megatron-core-te, deepspeed or torchtitan (flags win)", false,
       "NAME", "none"},
      {"tied-embeddings", "model", "tie the output layer to the token embedding", true, "", "GPT yes, Llama no"},
  };
}

std::vector<OptionDef> concat(std::vector<std::vector<OptionDef>> groups) {
  std::vector<OptionDef> out;
  for (auto& g : groups) out.insert(out.end(), g.begin(), g.end());
  return out;
}

const OptionDef* OptionValues::find_def(const std::string& name) const {
  for (const auto& d : defs_)
    if (d.name == name) return &d;
  return nullptr;
}

void OptionValues::set(const std::string& name, const std::string& value, const std::string& source) {
  values_[name] = {value, source};
}

std::string OptionValues::source(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? "" : it->second.source;
}

namespace {

std::string canonical(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// TOML scalars become the same text a flag would carry.
std::optional<std::string> scalar_text(const toml::node& node) {
  if (auto v = node.value<std::string>()) return *v;
  if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
  if (node.is_integer()) return std::to_string(*node.value<int64_t>());
  if (node.is_floating_point()) {
    std::ostringstream s;
    s.precision(17);
    s << *node.value<double>();
    return s.str();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> read_settings_file(const std::string& path, const std::string& what,
                                              const std::string& flag, const std::string& code, Problems& problems) {
  return read_input_file({path, what, flag, code}, kMaxSettingsBytes, problems);
}

void OptionValues::load_toml_file(const std::string& path, Problems& problems) {
  if (auto text = read_settings_file(path, "config file", "--config", "config-file", problems))
    load_toml_text(*text, path, problems);
}

void OptionValues::load_toml_text(const std::string& text, const std::string& origin, Problems& problems) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    if (looks_like_json(text)) {
      problems.add(origin + " is JSON, not TOML: a Hugging Face config.json describes only the model",
                   "give it as --hf-config " + origin + " (or hf-config = \"" + origin +
                       "\" in the [model] table of a TOML config)",
                   "config-is-json");
      return;
    }
    const auto& where = e.source().begin;
    problems.add("malformed TOML in " + origin + " at line " + std::to_string(where.line) + ", column " +
                     std::to_string(where.column) + ": " + std::string(e.description()),
                 "fix the TOML syntax (strings need quotes, tables are [name])");
    return;
  }
  std::vector<std::string> sections;
  for (const auto* defs : {&defs_, &elsewhere_})
    for (const auto& d : *defs)
      if (std::find(sections.begin(), sections.end(), d.section) == sections.end()) sections.push_back(d.section);
  auto elsewhere = [&](const std::string& key) -> const OptionDef* {
    for (const auto& d : elsewhere_)
      if (d.name == key) return &d;
    return nullptr;
  };

  std::map<std::string, std::string> seen;  // canonical key -> where this file set it
  constexpr int64_t kUnknownKeysListed = 10;
  int64_t unknown_keys = 0, unknown_tables = 0;
  auto take = [&](const std::string& raw_key, const toml::node& node, const std::string& table) {
    const std::string key = canonical(raw_key);
    const std::string where = origin + (table.empty() ? "" : " [" + table + "]");
    const std::string here = "'" + raw_key + "'" + (table.empty() ? " at the top level" : " in [" + table + "]");
    if (auto it = seen.find(key); it != seen.end()) {
      // global_batch_size and global-batch-size, or a key at the top level and in its table.
      problems.add("key " + here + " of " + origin + " sets '" + key + "' a second time (also " + it->second + ")",
                   "keep one of them", "config-duplicate");
      return;
    }
    seen[key] = here;
    const OptionDef* def = find_def(key);
    if (!def && (def = elsewhere(key)) != nullptr && (table.empty() || def->section == table)) {
      ignored_.push_back((table.empty() ? "" : table + ".") + raw_key);
      return;
    }
    if (!def) {
      // The first few named with a suggestion, the rest counted: a file of a million unknown keys
      // is refused in the time it takes to read, with a list one can read.
      if (++unknown_keys > kUnknownKeysListed) return;
      std::vector<std::string> known;
      for (const auto* defs : {&defs_, &elsewhere_})
        for (const auto& d : *defs) {
          std::string k = d.name;  // suggested in the file's own spelling (global_batch_size)
          if (raw_key.find('_') != std::string::npos) std::replace(k.begin(), k.end(), '-', '_');
          known.push_back(k);
        }
      problems.add("unknown key '" + raw_key + "' in " + where,
                   did_you_mean(raw_key, known) + "remove it or use a known key; run with --help to list them",
                   "unknown-key");
      return;
    }
    if (!table.empty() && def->section != table) {
      problems.add("key '" + raw_key + "' in " + where + " belongs in [" + def->section + "]",
                   "move it to the [" + def->section + "] table or to the top level");
      return;
    }
    auto text_value = scalar_text(node);
    if (!text_value) {
      problems.add("key '" + raw_key + "' in " + where + " must be a single value, not a table or array",
                   "write it as " + raw_key + " = VALUE");
      return;
    }
    if (!has(key)) set(key, *text_value, origin);  // flags given on the command line win
  };

  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    if (const toml::table* t = node.as_table()) {
      if (std::find(sections.begin(), sections.end(), key) == sections.end()) {
        if (++unknown_tables > kUnknownKeysListed) continue;
        problems.add("unknown table [" + key + "] in " + origin,
                     did_you_mean(key, sections) + "use one of " + join_choices([&] {
                       std::vector<std::string> s;
                       for (auto& x : sections) s.push_back("[" + x + "]");
                       return s;
                     }()));
        continue;
      }
      for (const auto& [k2, inner] : *t) take(std::string(k2.str()), inner, key);
    } else {
      take(key, node, "");
    }
  }
  for (const auto& [n, what] : {std::pair{unknown_keys, "keys"}, {unknown_tables, "tables"}})
    if (n > kUnknownKeysListed)
      problems.add(fmt::format("{} unknown {} in {} in all; the first {} are listed above", n, what, origin,
                               kUnknownKeysListed),
                   "remove them or use known names; run with --help to list them", std::string("unknown-") + what);
}

std::optional<std::string> OptionValues::get_string(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.text;
}

static std::string from(const std::string& source, const std::string& name) {
  return source == "--" + name ? "" : " (from " + source + ")";
}

std::optional<int64_t> OptionValues::get_int(const std::string& name, Problems& problems) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  const std::string& t = it->second.text;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  const OptionDef* def = find_def(name);
  const double lo = def ? def->min : 0, hi = std::min(def ? def->max : 1e18, double(std::numeric_limits<int32_t>::max()));
  const auto out_of_range = [&] {
    // The text as given: a number beyond 64 bits is not shown as the int64 it saturates to.
    problems.add("--" + name + " " + t + from(it->second.source, name) + " is outside its range " +
                     fmt::format("{:.0f} .. {:.0f}", lo, hi),
                 fmt::format("give --{} a whole number from {:.0f} to {:.0f}", name, lo, hi), "option-range");
    return std::nullopt;
  };
  if (ec == std::errc::result_out_of_range && end == t.data() + t.size()) return out_of_range();
  if (ec != std::errc() || end != t.data() + t.size() || t.empty()) {
    problems.add("--" + name + " '" + t + "'" + from(it->second.source, name) + " is not a whole number",
                 "give --" + name + " an integer such as 8");
    return std::nullopt;
  }
  if (double(v) < lo || double(v) > hi) return out_of_range();
  return v;
}

std::optional<double> OptionValues::get_double(const std::string& name, Problems& problems) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  const std::string& t = it->second.text;
  try {
    size_t used = 0;
    double v = std::stod(t, &used);
    if (used == t.size()) {
      // NaN compares false with everything: without this check `--comm-timeout nan` would
      // silently turn stall detection off.
      const OptionDef* def = find_def(name);
      const double lo = def ? def->min : 0, hi = def ? def->max : 1e18;
      if (!std::isfinite(v) || v < lo || v > hi) {
        problems.add("--" + name + " " + t + from(it->second.source, name) + " is outside its range " +
                         fmt::format("{:g} .. {:g}", lo, hi),
                     fmt::format("give --{} a finite number from {:g} to {:g}", name, lo, hi), "option-range");
        return std::nullopt;
      }
      return v;
    }
  } catch (const std::exception&) {
  }
  problems.add("--" + name + " '" + t + "'" + from(it->second.source, name) + " is not a number",
               "give --" + name + " a number such as 2.5");
  return std::nullopt;
}

std::optional<bool> OptionValues::get_bool(const std::string& name, Problems& problems) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  const std::string& t = it->second.text;
  if (t == "true" || t == "1" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "no") return false;
  problems.add("--" + name + " '" + t + "'" + from(it->second.source, name) + " is not true or false",
               "use true or false");
  return std::nullopt;
}

}  // namespace trident
