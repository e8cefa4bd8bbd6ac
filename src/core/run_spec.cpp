#include "core/run_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "core/checked_size.h"
#include "core/count_text.h"
#include "core/dimensions.h"
#include "core/hf_config.h"
#include "core/layout_rules.h"
#include "core/suggest.h"
#include "core/units.h"

namespace trident {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  // The small ones are the useful ones in a fix: at most 12, none above 1024.
  for (int64_t i = 1; i <= n && i <= 1024 && out.size() < 12; ++i)
    if (n % i == 0) out.push_back(i);
  return out;
}

static std::string list_of(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return join_choices(s);
}

namespace {

// The GPU fields of a [cluster] table: given without --gpu, they describe a GPU of one's own.
const char* const kGpuFields[] = {"gpu-memory-gib", "gpu-bf16-tflops", "gpu-fp32-tflops", "gpu-hbm-gbytes-per-s"};
const char* const kLinkFields[] = {"intra-link", "intra-gbytes-per-s", "intra-latency-us", "inter-link",
                                   "inter-node-gbytes-per-s", "inter-latency-us"};

bool custom_gpu_given(const OptionValues& v) {
  for (const char* name : kGpuFields)
    if (v.has(name)) return true;
  return false;
}

// A custom cluster names its GPU (--gpu, or all four GPU fields) and both links whole.
void require_custom_fields(const OptionValues& v, Problems& p) {
  std::vector<std::string> missing;
  if (!v.has("gpu"))
    for (const char* name : kGpuFields)
      if (!v.has(name)) missing.push_back(name);
  for (const char* name : kLinkFields)
    if (!v.has(name)) missing.push_back(name);
  if (missing.empty()) return;
  std::string keys;
  for (const auto& m : missing) keys += (keys.empty() ? "" : ", ") + m;
  p.add("a custom cluster (no --cluster preset" + std::string(v.has("gpu") ? "" : ", GPU fields given") +
            ") lacks " + keys + ": Trident would otherwise fill them from a preset it is not",
        "give them in the [cluster] table (see examples/my-cluster.toml), or start from a preset with --cluster NAME "
        "and override what differs",
        "cluster-missing-field");
}

// A link whose kind a config changes from the preset's must bring its own bandwidth and
// latency: the preset's belong to the preset's link (an NVLink's 300 GB/s are not PCIe's).
void check_link_overrides(const OptionValues& v, const std::string& preset, Problems& p) {
  const struct {
    const char *kind, *bandwidth, *latency;
  } links[] = {{"intra-link", "intra-gbytes-per-s", "intra-latency-us"},
               {"inter-link", "inter-node-gbytes-per-s", "inter-latency-us"}};
  for (const auto& l : links) {
    if (!v.has(l.kind) || (v.has(l.bandwidth) && v.has(l.latency))) continue;
    const ClusterSpec base = cluster_preset(preset);
    const std::string kind = *v.get_string(l.kind);
    const LinkSpec& was = std::string(l.kind) == "intra-link" ? base.intra : base.inter;
    std::string was_kind = to_string(was.kind);
    std::transform(was_kind.begin(), was_kind.end(), was_kind.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (kind == was_kind) continue;
    std::string keys = !v.has(l.bandwidth) ? l.bandwidth : "";
    if (!v.has(l.latency)) keys += (keys.empty() ? "" : " and ") + std::string(l.latency);
    p.add(fmt::format("--{} {} replaces the {} of {}, but {} {} not given: the preset's are its {}'s",
                      l.kind, kind, to_string(was.kind), preset, keys, keys.find(" and ") == std::string::npos ? "is" : "are",
                      to_string(was.kind)),
          fmt::format("give {} for the {} links too", keys, kind), "cluster-missing-field");
  }
}

// A link's bandwidth in bytes per second: the option's own unit (GB/s, of `per` GPUs), or as
// vendors quote it per GPU with its unit (400Gb/s: one 400 Gb/s NIC per GPU; 50GB/s), times `per`.
std::optional<double> link_rate_Bps(const OptionValues& v, const std::string& name, int64_t per, Problems& p) {
  const std::optional<std::string> text = v.get_string(name);
  if (!text) return std::nullopt;
  if (const std::optional<double> per_gpu = parse_rate_with_unit(*text)) {
    if (!(*per_gpu > 0) || *per_gpu > 1e15) {
      p.add(fmt::format("--{} '{}' is not a positive link speed", name, *text),
            fmt::format("give --{} in GB/s, or per GPU with its unit such as 400Gb/s", name), "option-range");
      return std::nullopt;
    }
    return *per_gpu * double(std::max<int64_t>(per, 1));
  }
  const std::optional<double> x = v.get_double(name, p);
  if (!x) return std::nullopt;
  return *x * kGB;
}

}  // namespace

ClusterSpec resolve_cluster(const OptionValues& v, Problems& p) {
  ClusterSpec c;
  auto preset = v.get_string("cluster");
  if (preset) {
    if (!is_cluster_preset(*preset)) {
      p.add("unknown cluster preset '" + *preset + "'",
            did_you_mean(*preset, cluster_preset_names()) + "use one of " + join_choices(cluster_preset_names()) + ", or describe it in a [cluster] table",
            "unknown-preset");
      return c;
    }
    c = cluster_preset(*preset);
  } else if (v.has("gpu") || custom_gpu_given(v)) {
    // A cluster of one's own (`trident bench` writes one): every field it needs must be there,
    // never borrowed from a preset whose name and links it does not have.
    c.name = "custom";
    require_custom_fields(v, p);
    if (!v.has("gpu")) c.gpu.name = "custom GPU";
  } else {
    c = cluster_preset("dgx-a100-80g");  // the source chapter's hardware
  }
  if (auto g = v.get_string("gpu")) {
    if (is_gpu_preset(*g)) c.gpu = gpu_preset(*g);
    else p.add("unknown GPU '" + *g + "'", did_you_mean(*g, gpu_preset_names()) + "use one of " + join_choices(gpu_preset_names()), "unknown-preset");
  }
  if (auto x = v.get_int("nodes", p)) c.nodes = *x;
  if (auto x = v.get_int("gpus-per-node", p)) c.gpus_per_node = *x;
  if (auto x = v.get_int("hosts-per-nvlink-domain", p)) c.hosts_per_nvlink_domain = *x;
  if (auto x = v.get_double("gpu-memory-gib", p)) c.gpu.memory_bytes = *x * kGiB;
  if (auto x = v.get_double("gpu-bf16-tflops", p)) c.gpu.bf16_flops = *x * kTera;
  if (auto x = v.get_double("gpu-fp32-tflops", p)) c.gpu.fp32_flops = *x * kTera;
  if (auto x = v.get_double("gpu-fp8-tflops", p)) c.gpu.fp8_flops = *x * kTera;
  if (auto x = v.get_double("gpu-fp4-tflops", p)) c.gpu.fp4_flops = *x * kTera;
  if (auto x = v.get_double("gpu-hbm-gbytes-per-s", p)) c.gpu.hbm_Bps = *x * kGB;
  if (auto k = v.get_string("intra-link")) {
    if (*k == "nvlink") c.intra.kind = LinkKind::NVLink;
    else if (*k == "pcie") c.intra.kind = LinkKind::PCIe;
    else p.add("--intra-link '" + *k + "' is unknown", "use nvlink or pcie");
  }
  if (auto k = v.get_string("inter-link")) {
    if (*k == "infiniband") c.inter.kind = LinkKind::InfiniBand;
    else if (*k == "ethernet") c.inter.kind = LinkKind::Ethernet;
    else p.add("--inter-link '" + *k + "' is unknown", "use infiniband or ethernet");
  }
  if (preset || (!v.has("gpu") && !custom_gpu_given(v))) check_link_overrides(v, c.name, p);
  if (auto x = link_rate_Bps(v, "intra-gbytes-per-s", 1, p)) c.intra.bandwidth_Bps = *x;
  if (auto x = v.get_double("intra-latency-us", p)) c.intra.latency_s = *x * kMicro;
  if (auto x = link_rate_Bps(v, "inter-node-gbytes-per-s", c.gpus_per_node, p)) c.inter.bandwidth_Bps = *x;
  if (auto x = v.get_double("inter-latency-us", p)) c.inter.latency_s = *x * kMicro;
  validate_cluster(c, p);
  if (c.nodes > 0 && c.gpus_per_node > 0 && c.hosts_per_nvlink_domain > 0) {
    checked_product("GPUs of the cluster", {{"nodes", c.nodes}, {"gpus-per-node", c.gpus_per_node}}, kMaxGpus,
                    "use fewer --nodes or --gpus-per-node", p);
    if (c.hosts_per_nvlink_domain > 1)
      checked_product("GPUs of an NVLink domain",
                    {{"hosts-per-nvlink-domain", c.hosts_per_nvlink_domain}, {"gpus-per-node", c.gpus_per_node}},
                    kMaxGpus, "use a smaller --hosts-per-nvlink-domain", p);
  }
  return c;
}

Layout resolve_layout(const OptionValues& v, ClusterSpec& c, Problems& p) {
  Layout l;
  const LayoutSizes sizes = read_layout_sizes(v, p);
  apply_layout_sizes(sizes, l);
  const bool dp_given = sizes.get(Dim::DP).has_value();
  if (l.tp <= 0 || l.cp <= 0 || l.pp <= 0 || l.dp <= 0 || c.gpus_per_node <= 0 || c.nodes <= 0) {
    validate_layout(l, p);
    return l;
  }
  // Sizes beyond any cluster are refused before the arithmetic below (the cluster's own size
  // was reported by resolve_cluster).
  Problems cluster_size;
  const bool sized = checked_product("GPUs of the layout", dense_factors(l), kMaxGpus,
                                     "use smaller --tp, --cp, --pp or --dp", p)
                         .has_value();
  if (!checked_product("", {{"nodes", c.nodes}, {"gpus-per-node", c.gpus_per_node}}, kMaxGpus, "", cluster_size) ||
      !sized)
    return l;
  if (dp_given && !v.has("nodes")) {
    // Size the cluster to the layout when that is a whole number of nodes.
    if (l.world_size() % c.gpus_per_node == 0) c.nodes = l.world_size() / c.gpus_per_node;
    else if (l.world_size() < c.gpus_per_node) {
      c.gpus_per_node = l.world_size();
    }
  }
  const int64_t world = c.world_size();
  const int64_t model_split = l.tp * l.cp * l.pp;
  if (!dp_given) {
    if (world % model_split == 0) l.dp = world / model_split;
    else
      p.add(fmt::format("tp {} x {}pp {} = {} does not divide the {} GPUs of the cluster", l.tp,
                        l.cp > 1 ? fmt::format("cp {} x ", l.cp) : "", l.pp, model_split, world),
            fmt::format("choose tp x {}pp among the divisors of {} ({})", l.cp > 1 ? "cp x " : "", world,
                        list_of(divisors(world))),
            "world-size");
  }
  validate_layout(l, p);
  return l;
}

std::string default_stack(const ClusterSpec& c) {
  return c.gpu.bf16_flops > c.gpu.fp32_flops ? "megatron-core-te" : "";
}

namespace {
// The recipe settings (RecipeSettings) over what the stack preset set; after --precision.
void resolve_recipe(const OptionValues& v, Problems& p, ExecutionSpec& e) {
  RecipeSettings& r = e.recipe;
  if (auto b = v.get_bool("fp8-params", p)) r.fp8_params = *b;
  if (r.fp8_params && e.precision != Precision::FP8)
    p.add("--fp8-params with --precision " + to_string(e.precision) + ": FP8 weights need FP8 matrix products",
          "add --precision fp8, or drop --fp8-params");
  if (auto x = v.get_int("optimizer-state-bits", p)) {
    if (*x != 16 && *x != 32)
      p.add(fmt::format("--optimizer-state-bits {} is not 16 or 32", *x), "use --optimizer-state-bits 32 or 16");
    else r.optimizer_state_bits = int(*x);
  }
  if (auto s = v.get_string("cp-kind")) {
    if (!parse_cp_kind(*s, r.cp_kind))
      p.add("--cp-kind '" + *s + "' is unknown", did_you_mean(*s, cp_kind_names()) + "use " + join_choices(cp_kind_names()));
  }
  if (auto s = v.get_string("moe-dispatcher")) {
    if (!parse_moe_dispatcher(*s, r.moe_dispatcher))
      p.add("--moe-dispatcher '" + *s + "' is unknown",
            did_you_mean(*s, moe_dispatcher_names()) + "use " + join_choices(moe_dispatcher_names()) + " (or flex)");
  }
  if (auto b = v.get_bool("moe-fp8-dispatch", p)) r.moe_fp8_dispatch = *b;
  if (auto b = v.get_bool("moe-ep-overlap", p)) r.moe_ep_overlap = *b;
  if (r.moe_ep_overlap && r.moe_dispatcher == MoeDispatcher::AllGather)
    p.add("--moe-ep-overlap with --moe-dispatcher allgather: Megatron-Core overlaps only the alltoall and flex "
          "dispatchers' communication", "use --moe-dispatcher alltoall (or deepep / hybridep), or drop --moe-ep-overlap");
  if (auto s = v.get_string("cuda-graphs")) {
    if (!parse_cuda_graphs(*s, r.cuda_graphs))
      p.add("--cuda-graphs '" + *s + "' is unknown", did_you_mean(*s, cuda_graphs_names()) + "use " + join_choices(cuda_graphs_names()));
  }
  if (auto s = v.get_string("cuda-graph-scope")) {
    std::vector<std::string> unknown;
    if (!parse_cuda_graph_scopes(*s, r.cuda_graph_scopes, unknown))
      for (const std::string& u : unknown)
        p.add("--cuda-graph-scope '" + u + "' is unknown",
              did_you_mean(u, cuda_graph_scope_names()) + "use a list of " + join_choices(cuda_graph_scope_names()));
    else if (r.cuda_graph_scopes.any() && (r.cuda_graphs == CudaGraphs::None || r.cuda_graphs == CudaGraphs::FullIteration))
      p.add("--cuda-graph-scope " + to_string(r.cuda_graph_scopes) + " with --cuda-graphs " + to_string(r.cuda_graphs) +
                ": scopes are what a per-layer graph captures",
            "use --cuda-graphs local or transformer-engine, or drop --cuda-graph-scope");
  }
  if (r.cuda_graphs != CudaGraphs::None && !python_issued(e))
    p.add("--cuda-graphs " + to_string(r.cuda_graphs) + (e.stack.empty() ? " without a --stack" : " with --stack " + e.stack) +
              ": CUDA graphs remove PyTorch's per-kernel issue from the host; this stack issues its kernels from C++",
          "use --stack megatron-core-te (or another PyTorch stack), or --cuda-graphs none");
  if (auto b = v.get_bool("dp-overlap-per-chunk", p)) r.dp_overlap_per_chunk = *b;
  if (auto b = v.get_bool("pipeline-sends-whole-tensor", p)) r.pipeline_sends_whole_tensor = *b;
  if (auto b = v.get_bool("dp-after-pipeline-flush", p)) r.dp_after_pipeline_flush = *b;
  if (auto b = v.get_bool("fp8-fused-casts", p)) r.fp8_fused_casts = *b;
  if (auto b = v.get_bool("fused-swiglu", p)) r.fused_swiglu = *b;
  if (auto x = v.get_double("stack-compute-efficiency", p)) r.compute_efficiency = *x;
}
}  // namespace

ExecutionSpec resolve_execution(const OptionValues& v, Problems& p, const std::string& default_stack) {
  ExecutionSpec e;
  // A stack preset first; every explicit flag below overrides what it set.
  std::optional<std::string> stack = v.get_string("stack");
  if (!stack && !default_stack.empty()) stack = default_stack;
  if (auto s = stack) {
    if (const StackPreset* stack = find_stack(*s)) {
      apply_stack(*stack, e);
      e.stack = stack->name;
    } else {
      p.add("--stack '" + *s + "' is unknown", did_you_mean(*s, stack_names()) + "use " + join_choices(stack_names()), "unknown-preset");
    }
  }
  if (auto x = v.get_int("global-batch-size", p)) e.global_batch_size = *x;
  if (auto x = v.get_int("micro-batch-size", p)) e.micro_batch_size = *x;
  if (auto s = v.get_string("schedule")) {
    if (!parse_schedule(*s, e.schedule))
      p.add("--schedule '" + *s + "' is unknown", did_you_mean(*s, schedule_names()) + "use " + join_choices(schedule_names()));
  }
  if (auto x = v.get_int("virtual-stages", p)) e.virtual_stages = *x;
  else if (e.schedule == ScheduleKind::Interleaved) e.virtual_stages = 2;
  if (auto b = v.get_bool("account-for-embedding-in-pipeline-split", p)) e.embedding_in_pipeline_split = *b;
  if (auto b = v.get_bool("account-for-loss-in-pipeline-split", p)) e.loss_in_pipeline_split = *b;
  if (auto s = v.get_string("pipeline-layout")) e.pipeline_layout = parse_pipeline_layout(*s, p);
  if (auto x = v.get_int("zero", p)) {
    if (*x < 0 || *x > 3) p.add(fmt::format("--zero {} is not a ZeRO stage", *x), "use --zero 0, 1, 2 or 3");
    else e.zero = int(*x);
  }
  if (auto s = v.get_string("recompute")) {
    if (!parse_recompute(*s, e.recompute))
      p.add("--recompute '" + *s + "' is unknown", did_you_mean(*s, recompute_names()) + "use " + join_choices(recompute_names()));
  }
  if (auto s = v.get_string("recompute-modules")) {
    std::vector<std::string> unknown;
    if (!parse_recompute_modules(*s, e.recompute_modules, unknown))
      for (const std::string& u : unknown)
        p.add("--recompute-modules '" + u + "' is unknown",
              did_you_mean(u, recompute_module_names()) + "use a list of " + join_choices(recompute_module_names()));
    else if (e.recompute_modules.any() && e.recompute != Recompute::Selective)
      p.add("--recompute-modules " + to_string(e.recompute_modules) + " with --recompute " + to_string(e.recompute) +
                ": modules are what selective recomputation reruns",
            "use --recompute selective, or drop --recompute-modules");
  }
  if (auto b = v.get_bool("sequence-parallel", p)) e.sequence_parallel = *b;
  if (auto b = v.get_bool("recompute-flash-attention", p)) e.recompute_flash_attention = *b;
  if (auto s = v.get_string("precision")) {
    if (!parse_precision(*s, e.precision))
      p.add("--precision '" + *s + "' is unknown", did_you_mean(*s, precision_names()) + "use " + join_choices(precision_names()));
  }
  if (e.precision == Precision::FP32) e.grad_bits = 32;
  // A stack that reduces only bf16 gradients in 16 bits keeps fp16 ones in fp32 (--grad-bits wins).
  if (const StackPreset* s = find_stack(e.stack); s && s->fp16_grads_in_fp32 && e.precision == Precision::FP16)
    e.grad_bits = 32;
  if (auto s = v.get_string("attention")) {
    if (!parse_attention(*s, e.attention))
      p.add("--attention '" + *s + "' is unknown", did_you_mean(*s, attention_names()) + "use " + join_choices(attention_names()));
  }
  if (auto s = v.get_string("overlap")) {
    if (!parse_overlap(*s, e.overlap))
      p.add("--overlap '" + *s + "' is not a list of tp, dp, pp", "use e.g. --overlap tp,dp,pp, --overlap none or --overlap all");
  }
  if (auto x = v.get_int("grad-bits", p)) {
    if (*x != 16 && *x != 32) p.add(fmt::format("--grad-bits {} is not 16 or 32", *x), "use --grad-bits 32 or 16");
    else e.grad_bits = int(*x);
  }
  resolve_recipe(v, p, e);
  if (e.micro_batch_size <= 0)
    p.add(fmt::format("--micro-batch-size is {}, must be positive", e.micro_batch_size),
          "give --micro-batch-size 1 or more");
  if (v.has("global-batch-size") && e.global_batch_size <= 0)
    p.add(fmt::format("--global-batch-size is {}, must be positive", e.global_batch_size),
          "give --global-batch-size 1 or more");
  if (e.virtual_stages <= 0)
    p.add(fmt::format("--virtual-stages is {}, must be positive", e.virtual_stages), "give 1 or more");
  if (e.virtual_stages > 1 && e.schedule != ScheduleKind::Interleaved)
    p.add(fmt::format("--virtual-stages {} needs the interleaved schedule, not {}", e.virtual_stages,
                      to_string(e.schedule)),
          "add --schedule interleaved, or use --virtual-stages 1");
  if (const StackPreset* s = find_stack(e.stack); s && !s->runs(e.schedule)) {
    std::vector<std::string> runs, others;
    for (ScheduleKind k : s->schedules) runs.push_back(to_string(k));
    for (const StackPreset& o : stack_presets())
      if (o.runs(e.schedule)) others.push_back(o.name);
    p.add(fmt::format("--stack {} with --schedule {}: the {} stack runs {} only", e.stack, to_string(e.schedule),
                      e.stack, fmt::join(runs, " and ")),
          // Not "--schedule X" among several: one forced by hand may plan worse than the search's pick.
          fmt::format("{} (plan then picks the best of {}; lint and simulate run {}), or use a stack that has the {} "
                      "schedule ({})",
                      runs.size() == 1 ? "use --schedule " + runs.front() + " or leave --schedule out"
                                       : std::string("leave --schedule out"),
                      fmt::join(runs, " and "), to_string(s->schedules.front()), to_string(e.schedule),
                      fmt::join(others, ", ")),
          "stack-schedule");
  }
  return e;
}

// --recompute-modules the model has no such module for, or the planner does not model: by name.
void check_recompute_modules(const ModelSpec& m, const ExecutionSpec& e, Problems& p) {
  const RecomputeModules& r = e.recompute_modules;
  if (r.mla_up_proj && !m.is_mla())
    p.add("--recompute-modules mla_up_proj: the model has no multi-head latent attention (no kv_lora_rank)",
          "drop mla_up_proj (core_attn recomputes standard attention)", "recompute-module-model");
  if (r.moe_act && !m.is_moe())
    p.add("--recompute-modules moe_act: the model has no routed experts", "drop moe_act (mlp recomputes a dense MLP)",
          "recompute-module-model");
  for (auto [on, name] : {std::pair{r.moe, "moe"}, {r.shared_experts, "shared_experts"}})
    if (on)
      p.add(fmt::format("--recompute-modules {}: Megatron's {} checkpoint is not modelled (its memory and time)", name, name),
            "use moe_act (the routed experts' activation), mlp, layernorm, mla_up_proj or core_attn, or --recompute full",
            "recompute-module-unmodelled");
}

void check_run(const RunSpec& r, bool check_batch, Problems& p) {
  const Layout& l = r.layout;
  const ModelSpec& m = r.model;
  if (l.tp <= 0 || l.cp <= 0 || l.pp <= 0 || l.dp <= 0 || l.ep <= 0) return;  // already reported
  {
    Problems reported;  // by resolve_cluster / resolve_layout: only stop here
    if (!checked_product("", dense_factors(l), kMaxGpus, "", reported) ||
        !checked_product("", {{"nodes", r.cluster.nodes}, {"gpus-per-node", r.cluster.gpus_per_node}}, kMaxGpus, "",
                         reported))
      return;
  }
  // Tokens of a step, and the attention scores of one layer of a micro-batch (the largest
  // activation): counts that must stay counts for the memory and time estimates.
  if (r.exec.global_batch_size > 0 && m.seq_len > 0)
    checked_product("tokens per step", {{"global-batch-size", r.exec.global_batch_size}, {"seq-len", m.seq_len}},
                    kMaxCount, "use a smaller --global-batch-size or --seq-len", p);
  if (r.exec.micro_batch_size > 0 && m.heads > 0 && m.seq_len > 0)
    checked_product("attention scores of one layer",
                    {{"micro-batch-size", r.exec.micro_batch_size}, {"heads", m.heads}, {"seq-len", m.seq_len},
                     {"seq-len", m.seq_len}},
                    kMaxCount, "use a smaller --micro-batch-size or --seq-len", p);
  check_rules(RuleKind::Shape, r, p);
  check_recompute_modules(r.model, r.exec, p);
  if (r.exec.precision == Precision::FP8 && !(r.cluster.gpu.fp8_flops > 0))
    p.add(fmt::format("--precision fp8 needs FP8 tensor cores, but the {} has no FP8 peak", r.cluster.gpu.name),
          "use --precision bf16, a GPU with FP8 (h100-80g, h200-141g), or set gpu-fp8-tflops in [cluster]",
          "fp8-unsupported");
  const Precision q = r.exec.precision;
  if ((q == Precision::MXFP8 || q == Precision::NVFP4) && !r.cluster.gpu.block_scaling())
    p.add(fmt::format("--precision {} needs tensor cores that scale blocks of {} elements ({}), but the {} has none "
                      "(no FP4 peak: Hopper and Ampere scale whole tensors only)",
                      to_string(q), q == Precision::MXFP8 ? 32 : 16, q == Precision::MXFP8 ? "MX" : "NVFP4",
                      r.cluster.gpu.name),
          q == Precision::MXFP8 ? "use --precision fp8 (one scale per tensor) on this GPU, or a Blackwell GPU (b200-180g, "
                                  "gb200-186g, b300-288g, gb300-288g), or set gpu-fp4-tflops in [cluster]"
                                : "use --precision fp8 (or bf16) on this GPU, or a Blackwell GPU (b200-180g, gb200-186g, "
                                  "b300-288g, gb300-288g), or set gpu-fp4-tflops in [cluster]",
          q == Precision::MXFP8 ? "mxfp8-unsupported" : "nvfp4-unsupported");
  if (check_batch) check_rules(RuleKind::Batch, r, p);
}

bool sequence_parallel_by_default(const Layout& layout, int64_t seq_len) {
  return sequence_parallel_fits(layout, seq_len);
}

void default_sequence_parallel(const OptionValues& values, RunSpec& run) {
  if (!values.has("sequence-parallel")) run.exec.sequence_parallel = sequence_parallel_by_default(run.layout, run.model.seq_len);
}

RunSpec resolve_run(const OptionValues& values, bool check_batch) {
  Problems p;
  RunSpec r;
  r.model = resolve_model(values, p);
  r.cluster = resolve_cluster(values, p);
  r.layout = resolve_layout(values, r.cluster, p);
  r.exec = resolve_execution(values, p, default_stack(r.cluster));
  default_sequence_parallel(values, r);
  r.cost = resolve_cost(values, r.cluster.gpu, p);
  check_run(r, check_batch, p);
  p.throw_if_any();
  return r;
}

CostTable cost_table(const RunSpec& run) { return run.cost ? *run.cost : builtin_cost(run.cluster.gpu); }

}  // namespace trident
