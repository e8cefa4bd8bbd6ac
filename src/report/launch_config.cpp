#include "report/launch_config.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <toml++/toml.h>

#include "core/run_values.h"
#include "report/topology_report.h"

namespace trident {

namespace {

// The option's text as a TOML value of its type; text that does not parse stays a string so the
// reading command reports it with the option's name.
void insert_typed(toml::table& table, const OptionDef& def, const std::string& text) {
  const std::string key = [&] {
    std::string k = def.name;
    for (char& c : k)
      if (c == '-') c = '_';
    return k;
  }();
  if (def.is_flag) {
    table.insert_or_assign(key, text == "true" || text == "1" || text == "yes");
    return;
  }
  if (def.type == "INT" || def.type == "0|1|2|3" || def.type == "32|16") {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) {
      table.insert_or_assign(key, v);
      return;
    }
  }
  if (def.type == "NUM") {
    try {
      size_t used = 0;
      double v = std::stod(text, &used);
      if (used == text.size()) {
        table.insert_or_assign(key, v);
        return;
      }
    } catch (const std::exception&) {
    }
  }
  table.insert_or_assign(key, text);
}

}  // namespace

std::string config_toml(const std::vector<OptionDef>& defs, const OptionValues& given, const RunSpec& chosen,
                        const std::set<std::string>& skip, const std::vector<std::string>& header) {
  const auto chosen_texts = run_option_texts(chosen);
  toml::table root;
  std::vector<std::string> sections;
  for (const OptionDef& d : defs) {
    if (skip.count(d.name)) continue;
    std::optional<std::string> text;
    if (auto it = chosen_texts.find(d.name); it != chosen_texts.end()) text = it->second;
    else text = given.get_string(d.name);
    if (!text) continue;
    if (!root.contains(d.section)) {
      root.insert(d.section, toml::table{});
      sections.push_back(d.section);
    }
    insert_typed(*root[d.section].as_table(), d, *text);
  }
  std::ostringstream out;
  for (const auto& line : header) out << "# " << line << "\n";
  // Sections in the order of the option table (model, cluster, layout, training, ...).
  for (const auto& s : sections) {
    toml::table one;
    one.insert(s, *root[s].as_table());
    out << "\n" << toml::toml_formatter(one) << "\n";
  }
  return out.str();
}

std::string megatron_args(const RunSpec& run) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  std::vector<std::string> a, notes;
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
    a.push_back("--swiglu");
    a.push_back("--normalization RMSNorm");
    a.push_back("--position-embedding-type rope");
    a.push_back("--disable-bias-linear");
    a.push_back("--untie-embeddings-and-output-weights");
  }
  notes.push_back(fmt::format("vocabulary {}: set by the tokenizer (--tokenizer-type / --vocab-file), Megatron pads it "
                              "to a multiple of 128 x tp",
                              m.vocab));
  a.push_back(fmt::format("--tensor-model-parallel-size {}", l.tp));
  a.push_back(fmt::format("--pipeline-model-parallel-size {}", l.pp));
  if (l.cp > 1) a.push_back(fmt::format("--context-parallel-size {}", l.cp));
  if (m.is_moe()) {
    a.push_back(fmt::format("--num-experts {}", m.experts));
    a.push_back(fmt::format("--moe-router-topk {}", m.experts_per_token));
    a.push_back(fmt::format("--moe-ffn-hidden-size {}", m.expert_ffn_hidden));
    if (m.shared_experts > 0)
      a.push_back(fmt::format("--moe-shared-expert-intermediate-size {}", m.shared_experts * m.expert_ffn_hidden));
    if (m.capacity_factor > 1.0) a.push_back(fmt::format("--moe-expert-capacity-factor {}", m.capacity_factor));
    if (m.moe_dense_layers > 0)
      notes.push_back(fmt::format("{} leading dense layers: give Megatron --moe-layer-freq as a list with {} zeros first",
                                  m.moe_dense_layers, m.moe_dense_layers));
  }
  if (l.ep > 1) a.push_back(fmt::format("--expert-model-parallel-size {}", l.ep));
  if (e.schedule == ScheduleKind::Interleaved && e.virtual_stages > 1) {
    const int64_t chunks = l.pp * e.virtual_stages;
    if (m.layers % chunks == 0)
      a.push_back(fmt::format("--num-layers-per-virtual-pipeline-stage {}", m.layers / chunks));
    else
      notes.push_back(fmt::format("interleaved v = {}: {} layers do not split into {} equal chunks, which Megatron needs",
                                  e.virtual_stages, m.layers, chunks));
  }
  if (e.schedule == ScheduleKind::GPipe && l.pp > 1)
    notes.push_back("schedule gpipe: Megatron always runs 1F1B (same step time, less activation memory)");
  if (e.schedule == ScheduleKind::ZeroBubbleH1)
    notes.push_back("schedule zb-h1: not in Megatron-LM's pretrain_gpt.py; it runs 1F1B with these arguments");
  if (l.order == "tp-pp-dp") a.push_back("--use-tp-pp-dp-mapping");
  else if (l.order != "tp-dp-pp" && l.order != "tp-cp-dp-pp")
    notes.push_back(fmt::format("rank order {}: Megatron offers tp-cp-ep-dp-pp (default) or tp-pp-dp "
                                "(--use-tp-pp-dp-mapping) only",
                                l.order));
  if (e.sequence_parallel) a.push_back("--sequence-parallel");
  if (e.recompute == Recompute::Selective) a.push_back("--recompute-granularity selective");
  if (e.recompute == Recompute::Full) {
    a.push_back("--recompute-granularity full");
    a.push_back("--recompute-method uniform");
    a.push_back("--recompute-num-layers 1");
  }
  if (e.zero >= 1) a.push_back("--use-distributed-optimizer");
  if (e.zero >= 2)
    notes.push_back(fmt::format("ZeRO-{}: Megatron's distributed optimizer shards optimizer states only (ZeRO-1); "
                                "gradients{} stay whole",
                                e.zero, e.zero == 3 ? " and weights" : ""));
  a.push_back(fmt::format("--micro-batch-size {}", e.micro_batch_size));
  if (e.global_batch_size > 0) a.push_back(fmt::format("--global-batch-size {}", e.global_batch_size));
  if (e.precision == Precision::BF16) a.push_back("--bf16");
  if (e.precision == Precision::FP16) a.push_back("--fp16");
  if (e.precision != Precision::FP32 && e.grad_bits == 32) a.push_back("--accumulate-allreduce-grads-in-fp32");

  std::string s;
  s += fmt::format("# Megatron-LM pretrain_gpt.py arguments for {} on {} GPUs ({} nodes x {}): {}\n", describe_model(m),
                   l.world_size(), run.cluster.nodes, run.cluster.gpus_per_node, l.describe());
  s += fmt::format("# data-parallel size {} = world {} / (tp {} x pp {}{}): Megatron derives it from the world size\n",
                   l.dp, l.world_size(), l.tp, l.pp, l.cp > 1 ? fmt::format(" x cp {}", l.cp) : "");
  for (const auto& n : notes) s += "# note: " + n + "\n";
  for (size_t i = 0; i < a.size(); ++i) s += a[i] + (i + 1 < a.size() ? " \\\n" : "\n");
  return s;
}

std::string torchtitan_toml(const RunSpec& run) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  std::vector<std::string> notes;
  toml::table parallelism;
  // torchtitan shards with FSDP2: a shard degree d is ZeRO-3; ZeRO 0-2 replicate (DDP / HSDP).
  if (e.zero == 3) {
    parallelism.insert("data_parallel_shard_degree", l.dp);
    parallelism.insert("data_parallel_replicate_degree", int64_t(1));
  } else {
    parallelism.insert("data_parallel_shard_degree", int64_t(1));
    parallelism.insert("data_parallel_replicate_degree", l.dp);
    if (e.zero > 0)
      notes.push_back(fmt::format("ZeRO-{}: torchtitan shards all or nothing (FSDP = ZeRO-3); written as replicas "
                                  "(set data_parallel_shard_degree = {} to shard everything)",
                                  e.zero, l.dp));
  }
  parallelism.insert("tensor_parallel_degree", l.tp);
  if (l.cp > 1) parallelism.insert("context_parallel_degree", l.cp);
  if (l.ep > 1) parallelism.insert("expert_parallel_degree", l.ep);
  parallelism.insert("pipeline_parallel_degree", l.pp);
  const char* schedule = "1F1B";
  switch (e.schedule) {
    case ScheduleKind::GPipe: schedule = "GPipe"; break;
    case ScheduleKind::OneFOneB: schedule = "1F1B"; break;
    case ScheduleKind::Interleaved: schedule = "Interleaved1F1B"; break;
    case ScheduleKind::ZeroBubbleH1:
      schedule = "InterleavedZeroBubble";
      notes.push_back("zb-h1: torchtitan's nearest is InterleavedZeroBubble (B/W split, with 2 stages per rank)");
      break;
  }
  parallelism.insert("pipeline_parallel_schedule", schedule);
  parallelism.insert("pipeline_parallel_microbatch_size", e.micro_batch_size);
  if (e.schedule == ScheduleKind::Interleaved && e.virtual_stages > 1) {
    const int64_t chunks = l.pp * e.virtual_stages;
    if (m.layers % chunks == 0) parallelism.insert("pipeline_parallel_layers_per_stage", m.layers / chunks);
  }
  if (!e.sequence_parallel && l.tp > 1)
    notes.push_back("sequence parallel off: torchtitan's tensor parallel always shards the sequence around the norms");

  toml::table ac;
  ac.insert("mode", e.recompute == Recompute::None ? "none" : to_string(e.recompute));
  if (e.recompute == Recompute::Selective) ac.insert("selective_ac_option", "op");

  toml::table training;
  // local_batch_size: sequences each data-parallel rank takes per step (all its micro-batches).
  training.insert("local_batch_size", e.global_batch_size > 0 ? e.global_batch_size / l.dp : e.micro_batch_size);
  if (e.global_batch_size > 0) training.insert("global_batch_size", e.global_batch_size);
  training.insert("seq_len", m.seq_len);
  training.insert("mixed_precision_param", e.precision == Precision::FP32 ? "float32" : e.precision == Precision::FP16 ? "float16" : "bfloat16");
  training.insert("mixed_precision_reduce", e.grad_bits == 32 ? "float32" : "bfloat16");

  toml::table root;
  root.insert("parallelism", parallelism);
  root.insert("activation_checkpoint", ac);
  root.insert("training", training);
  std::ostringstream out;
  out << fmt::format("# torchtitan job config sections for {} on {} GPUs ({} nodes x {}): {}\n", describe_model(m),
                     l.world_size(), run.cluster.nodes, run.cluster.gpus_per_node, l.describe());
  out << fmt::format("# model sizes (layers {}, hidden {}, heads {}, kv heads {}, ffn {}, vocab {}) go in the model "
                     "flavor's args; launch with torchrun --nproc_per_node {} --nnodes {}\n",
                     m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab, run.cluster.gpus_per_node,
                     run.cluster.nodes);
  for (const auto& n : notes) out << "# note: " << n << "\n";
  // Fixed section order: the one a torchtitan config file uses.
  for (const char* s : {"parallelism", "activation_checkpoint", "training"}) {
    toml::table one;
    one.insert(s, *root[s].as_table());
    out << "\n" << toml::toml_formatter(one) << "\n";
  }
  return out.str();
}

}  // namespace trident
