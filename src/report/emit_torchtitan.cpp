// `trident plan --emit torchtitan` (current flag form) and `--emit torchtitan-toml` (the last
// version that reads a TOML job file): the planned run in torchtitan, or the refusals naming what
// torchtitan cannot express. torchtitan shards with FSDP2 (ZeRO-3) or not at all, reduces
// gradients in fp32, and applies bf16 mixed precision only under FSDP (or DDP alone).
#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <variant>
#include <toml++/toml.h>

#include "capability/capability_table.h"
#include "plan/cost_model.h"
#include "report/launch_config.h"
#include "report/topology_report.h"

namespace trident {

namespace {

constexpr const char* kFlagVersion = "torchtitan commit b5bcd76 (2026-08-21, Python config and --section.option flags)";
constexpr const char* kTomlVersion = "torchtitan commit 238fa99 (the last version that loads a TOML job file)";

using Value = std::variant<int64_t, bool, std::string, std::vector<std::string>>;
struct Setting {
  std::string section, key;
  Value value;
};

// What torchtitan's sharding and precision rules allow for the plan's ZeRO stage and precision.
void check_recipe(const RunSpec& run, bool toml, Problems& refuse) {
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  if (e.zero == 1 || e.zero == 2)
    refuse.add(fmt::format("ZeRO-{}: torchtitan shards all of weights, gradients and optimizer (FSDP2, ZeRO-3) or "
                           "nothing (DDP)",
                           e.zero),
               "replan with --zero 3 (or --stack torchtitan), or --zero 0", "torchtitan-zero");
  if (e.zero == 0 && l.cp > 1)
    refuse.add(fmt::format("cp {} with ZeRO-0: torchtitan applies FSDP over dp_shard x cp, so weights, gradients and "
                           "optimizer are sharded over the cp ranks (ZeRO-3)",
                           l.cp),
               "replan with --zero 3", "torchtitan-cp-shards");
  if (e.zero == 0 && (l.tp > 1 || l.pp > 1) && e.precision != Precision::FP32)
    refuse.add(fmt::format("{} with tp {} x pp {} and no FSDP: torchtitan applies mixed precision only under FSDP "
                           "(or DDP alone) and would train in fp32",
                           to_string(e.precision), l.tp, l.pp),
               "replan with --zero 3, or --precision fp32", "torchtitan-precision");
  if (e.precision == Precision::FP8 && !toml)
    refuse.add("precision fp8: the flag form of " + std::string(kFlagVersion) + " has no float8 option",
               "use --emit torchtitan-toml (its [quantize.linear.float8] converter), or replan with --precision bf16",
               "torchtitan-fp8");
  if (e.precision == Precision::FP8 && e.zero != 3)
    refuse.add("precision fp8 without FSDP: torchtitan's float8 training needs FSDP's bf16 mixed precision",
               "replan with --zero 3", "torchtitan-fp8");
  if (!e.sequence_parallel && l.tp > 1 && toml)
    refuse.add("sequence parallel off with tp > 1: " + std::string(kTomlVersion) + " always shards the sequence "
                                                                                   "around the norms",
               "replan with --sequence-parallel, or use --emit torchtitan (enable_sequence_parallel)",
               "torchtitan-sequence-parallel");
  // Each setting torchtitan runs one way (precision, overlap, attention, the dispatcher, ...): its
  // column of the capability table, beside train's and Megatron-LM's.
  capability::refuse_for_torchtitan(run, toml, refuse);
}

const char* schedule_name(ScheduleKind s) {
  switch (s) {
    case ScheduleKind::GPipe: return "GPipe";
    case ScheduleKind::OneFOneB: return "1F1B";
    case ScheduleKind::Interleaved: return "Interleaved1F1B";
    case ScheduleKind::ZeroBubbleH1: return "InterleavedZeroBubble";
  }
  return "1F1B";
}

// torchtitan splits layers + first_less + last_less slots evenly over pp x v stages (the slots
// stand for the embedding and the output). The planner's split is one of those when the first
// chunk, the last, or both hold one layer less than the others.
void pipeline_settings(const RunSpec& run, std::vector<Setting>& s, Problems& refuse) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  if (l.pp == 1) return;
  if (e.schedule == ScheduleKind::ZeroBubbleH1)
    refuse.add("schedule zb-h1 on one chunk per rank: torchtitan's zero-bubble schedules are multi-stage "
               "(InterleavedZeroBubble, 2 stages or more per rank)",
               "replan without --schedule: with --emit torchtitan the search keeps to the schedules torchtitan runs",
               "torchtitan-schedule");
  const int64_t v = e.schedule == ScheduleKind::Interleaved ? e.virtual_stages : 1;
  const std::vector<int64_t> chunks = plan::chunk_layers(m.layers, l.pp, e);
  const int64_t n = int64_t(chunks.size()), base = *std::max_element(chunks.begin(), chunks.end());
  const int64_t first_less = base - chunks.front(), last_less = base - chunks.back();
  bool fits = first_less <= 1 && last_less <= 1;
  for (int64_t c = 1; c + 1 < n; ++c) fits = fits && chunks[c] == base;
  if (!fits || (m.layers + first_less + last_less) != base * n) {
    refuse.add(fmt::format("the planner's split of {} layers into {} chunks is not one torchtitan makes (it spreads "
                           "layers plus one slot each for the embedding and the output evenly)",
                           m.layers, n),
               "replan with --virtual-stages such that pp x v divides the layers (or the layers + 1 or + 2)",
               "torchtitan-stages");
    return;
  }
  s.push_back({"parallelism", "pipeline_parallel_schedule", std::string(schedule_name(e.schedule))});
  s.push_back({"parallelism", "pipeline_parallel_layers_per_stage", base});
  s.push_back({"parallelism", "pipeline_parallel_first_stage_less_layers", first_less});
  s.push_back({"parallelism", "pipeline_parallel_last_stage_less_layers", last_less});
}

// torchtitan's llama3 flavor of a Trident preset whose sizes are unchanged; "" when none.
std::string llama3_flavor(const ModelSpec& m) {
  for (const auto& [name, flavor] : {std::pair{"llama3-8b", "8B"}, {"llama3-70b", "70B"}, {"llama3-405b", "405B"}}) {
    if (m.name.substr(0, m.name.find(' ')) != name) continue;  // "llama3-8b (modified)": the sizes decide
    const ModelSpec p = model_preset(name);
    if (p.layers == m.layers && p.hidden == m.hidden && p.heads == m.heads && p.kv_heads == m.kv_heads &&
        p.ffn_hidden == m.ffn_hidden && p.vocab == m.vocab && !m.is_moe())
      return flavor;
  }
  return "";
}

std::vector<Setting> settings(const RunSpec& run, bool toml, Problems& refuse) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  const ExecutionSpec& e = run.exec;
  std::vector<Setting> s;
  auto put = [&](const char* section, const char* key, Value value) { s.push_back({section, key, std::move(value)}); };
  if (toml && !llama3_flavor(m).empty()) {
    put("model", "name", std::string("llama3"));
    put("model", "flavor", llama3_flavor(m));
  }
  put("parallelism", "data_parallel_replicate_degree", e.zero == 3 ? int64_t(1) : l.dp);
  put("parallelism", "data_parallel_shard_degree", e.zero == 3 ? l.dp : int64_t(1));
  put("parallelism", "tensor_parallel_degree", l.tp);
  if (!toml && l.tp > 1) put("parallelism", "enable_sequence_parallel", e.sequence_parallel);
  put("parallelism", "context_parallel_degree", l.cp);
  put("parallelism", "expert_parallel_degree", l.ep);
  if (toml && l.ep > 1) put("parallelism", "expert_tensor_parallel_degree", int64_t(1));  // whole experts (tp 1 here)
  put("parallelism", "pipeline_parallel_degree", l.pp);
  pipeline_settings(run, s, refuse);
  // Per data-parallel rank: one micro-batch per step with one stage (gradient accumulation
  // makes up the global batch); with stages, all micro-batches of the step go through the pipeline.
  const int64_t local = l.pp > 1 ? e.global_batch_size / l.dp : e.micro_batch_size;
  const std::string param = e.precision == Precision::FP32 ? "float32" : "bfloat16";
  if (toml) {
    put("training", "local_batch_size", local);
    put("training", "global_batch_size", e.global_batch_size);
    put("training", "seq_len", m.seq_len);
    if (l.pp > 1) put("parallelism", "pipeline_parallel_microbatch_size", e.micro_batch_size);
  } else {
    put("training", "num_tokens_per_microbatch_per_dp_rank", local * m.seq_len);
    put("training", "num_tokens_per_train_step", e.global_batch_size * m.seq_len);
    put("training", "max_context_length", m.seq_len);
    if (l.pp > 1) put("parallelism", "num_pp_microbatches", local / e.micro_batch_size);
  }
  put("training", "dtype", std::string("float32"));  // fp32 master weights and Adam moments
  put("training", "mixed_precision_param", param);
  put("training", "mixed_precision_reduce", std::string("float32"));
  // Always written: torchtitan's default is selective checkpointing of every second layer, which
  // the plan's memory and recompute time do not assume.
  put("activation_checkpoint", "mode", e.recompute == Recompute::None ? std::string("none") : to_string(e.recompute));
  if (e.recompute == Recompute::Selective) put("activation_checkpoint", "selective_ac_option", std::string("op"));
  if (toml && e.precision == Precision::FP8) {
    put("model", "converters", std::vector<std::string>{"quantize.linear.float8"});
    put("quantize.linear.float8", "recipe_name", std::string("tensorwise"));
    put("quantize.linear.float8", "filter_fqns", std::vector<std::string>{"output"});  // the logits stay bf16
    put("quantize.linear.float8", "enable_fsdp_float8_all_gather", e.recipe.fp8_params);  // FP8 weight gathers
  }
  return s;
}

std::string flag_value(const Value& v) {
  if (auto b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto t = std::get_if<std::string>(&v)) return *t;
  std::string list;
  for (const auto& x : std::get<std::vector<std::string>>(v)) list += (list.empty() ? "" : ",") + x;
  return list;
}

void insert(toml::table& t, const std::string& key, const Value& v) {
  if (auto b = std::get_if<bool>(&v)) t.insert_or_assign(key, *b);
  else if (auto i = std::get_if<int64_t>(&v)) t.insert_or_assign(key, *i);
  else if (auto x = std::get_if<std::string>(&v)) t.insert_or_assign(key, *x);
  else {
    toml::array a;
    for (const auto& y : std::get<std::vector<std::string>>(v)) a.push_back(y);
    t.insert_or_assign(key, a);
  }
}

}  // namespace

FrameworkLaunch torchtitan_launch(const RunSpec& run, bool toml, const LaunchCheckpoint* ckpt) {
  const ModelSpec& m = run.model;
  const Layout& l = run.layout;
  FrameworkLaunch f;
  f.framework = "torchtitan";
  f.version = toml ? kTomlVersion : kFlagVersion;
  f.entry = "-m torchtitan.train";
  f.comments.push_back(fmt::format("torchtitan settings for {} on {} GPUs ({} nodes x {}): {}", describe_model(m),
                                   l.world_size(), run.cluster.nodes, run.cluster.gpus_per_node, l.describe()));
  f.comments.push_back("written for " + f.version + "; checked against its config fields kept in data/frameworks/");
  f.comments.push_back(fmt::format("world size {}; model sizes (layers {}, hidden {}, heads {}, kv heads {}, ffn {}, "
                                   "vocab {}, rope theta {:g}, norm epsilon {:g}) are the model flavor's; start with "
                                   "torchrun --nproc_per_node {} --nnodes {}",
                                   l.world_size(), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab,
                                   m.rope_theta, m.norm_epsilon(), run.cluster.gpus_per_node, run.cluster.nodes));
  // The job's settings name a registered model flavor and nothing of its architecture: a model
  // beyond the llama3 flavors' (a head width of its own, QK-norm, MLA, windows, ...) is refused by name.
  if (const auto beyond = m.beyond_family(); !beyond.empty()) {
    std::string list;
    for (const auto& b : beyond) list += (list.empty() ? "" : ", ") + b;
    f.refusals.add("torchtitan's settings name a model flavor and carry none of its architecture; " + m.name +
                       " has " + list + ", which no llama3 flavor has",
                   "launch it with --emit megatron, or register a torchtitan flavor with these fields and write its "
                   "name in [model]",
                   "torchtitan-architecture");
  }
  const ExecutionSpec& e = run.exec;
  if (!toml || llama3_flavor(m).empty())
    f.comments.push_back("the model: " + (llama3_flavor(m).empty() ? std::string("a model and flavor with the sizes above")
                                                                    : "llama3, flavor " + llama3_flavor(m)) +
                         (toml ? " in [model]" : " in the Python config"));
  if (e.zero == 3)
    f.comments.push_back(fmt::format("ZeRO-3: FSDP2 over dp_shard {}{} ranks", l.dp,
                                     l.cp > 1 ? fmt::format(" x cp {} = {}", l.cp, l.dp * l.cp) : ""));
  if (!toml && ckpt && ckpt->interval_steps > 0)
    f.comments.push_back("--checkpoint.*: the field names of the TOML version's [checkpoint] (the listing of this "
                         "version's configs.py holds no checkpoint config)");
  if (!toml)
    f.comments.push_back("--activation_checkpoint.*: the field names of the TOML version's [activation_checkpoint] "
                         "(the listing of this version's configs.py holds no activation-checkpoint config)");
  check_recipe(run, toml, f.refusals);
  std::vector<Setting> s = settings(run, toml, f.refusals);
  if (ckpt && ckpt->interval_steps > 0) {  // saving for failures: torchtitan resumes from the folder's latest step
    s.push_back({"checkpoint", "enable", true});
    s.push_back({"checkpoint", "folder", ckpt->dir});
    s.push_back({"checkpoint", "interval", ckpt->interval_steps});
  }
  if (!toml) {
    for (const auto& x : s) f.args.push_back(fmt::format("--{}.{} {}", x.section, x.key, flag_value(x.value)));
    return f;
  }
  // One table per section, in the order of first use; dotted sections nest.
  toml::table root;
  std::vector<std::string> order;
  for (const auto& x : s) {
    if (std::find(order.begin(), order.end(), x.section) == order.end()) order.push_back(x.section);
    toml::table* t = &root;
    std::stringstream path(x.section);
    for (std::string part; std::getline(path, part, '.');) {
      if (!t->contains(part)) t->insert(part, toml::table{});
      t = (*t)[part].as_table();
    }
    insert(*t, x.key, x.value);
  }
  std::ostringstream out;
  for (const char* top : {"model", "training", "parallelism", "activation_checkpoint", "quantize", "checkpoint"}) {
    if (!root.contains(top)) continue;
    toml::table one;
    one.insert(top, *root[top].as_table());
    out << "\n" << toml::toml_formatter(one) << "\n";
  }
  f.toml = out.str();
  return f;
}

}  // namespace trident
