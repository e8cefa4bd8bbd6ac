#include "core/execution_spec.h"

#include <algorithm>
#include <utility>

namespace trident {

namespace {
template <typename E>
struct Names {
  E value;
  const char* name;
};
constexpr Names<ScheduleKind> kSchedules[] = {{ScheduleKind::GPipe, "gpipe"},
                                              {ScheduleKind::OneFOneB, "1f1b"},
                                              {ScheduleKind::Interleaved, "interleaved"},
                                              {ScheduleKind::ZeroBubbleH1, "zb-h1"}};
constexpr Names<Recompute> kRecomputes[] = {
    {Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}};
constexpr Names<Precision> kPrecisions[] = {
    {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}, {Precision::FP32, "fp32"}, {Precision::FP8, "fp8"},
    {Precision::MXFP8, "mxfp8"}, {Precision::NVFP4, "nvfp4"}};
constexpr Names<AttentionKind> kAttentions[] = {{AttentionKind::Unfused, "unfused"}, {AttentionKind::Flash, "flash"}};
constexpr Names<CpKind> kCpKinds[] = {{CpKind::Ring, "ring"}, {CpKind::AllGather, "allgather"}};
constexpr Names<MoeDispatcher> kMoeDispatchers[] = {{MoeDispatcher::AllToAll, "alltoall"},
                                                    {MoeDispatcher::AllGather, "allgather"},
                                                    {MoeDispatcher::DeepEP, "deepep"},
                                                    {MoeDispatcher::HybridEP, "hybridep"}};
constexpr Names<CudaGraphs> kCudaGraphs[] = {{CudaGraphs::None, "none"},
                                             {CudaGraphs::Local, "local"},
                                             {CudaGraphs::TransformerEngine, "transformer-engine"},
                                             {CudaGraphs::FullIteration, "full-iteration"}};

template <typename E, size_t N>
std::string name_of(const Names<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "?";
}
template <typename E, size_t N>
bool parse(const Names<E> (&table)[N], const std::string& text, E& out) {
  for (const auto& n : table)
    if (text == n.name) {
      out = n.value;
      return true;
    }
  return false;
}
template <typename E, size_t N>
std::vector<std::string> names(const Names<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& n : table) out.push_back(n.name);
  return out;
}
}  // namespace

std::string to_string(ScheduleKind s) { return name_of(kSchedules, s); }
std::string to_string(Recompute r) { return name_of(kRecomputes, r); }
std::string to_string(Precision p) { return name_of(kPrecisions, p); }
bool quantized_gemms(Precision p) { return p == Precision::FP8 || p == Precision::MXFP8 || p == Precision::NVFP4; }
double quantized_element_bytes(Precision p) {
  switch (p) {
    case Precision::FP8: return 1;
    case Precision::MXFP8: return 1 + 1.0 / 32;
    case Precision::NVFP4: return 0.5 + 1.0 / 16;
    default: return 0;
  }
}
int quantized_copies(Precision p) { return p == Precision::MXFP8 || p == Precision::NVFP4 ? 2 : 1; }
bool parse_schedule(const std::string& t, ScheduleKind& out) { return parse(kSchedules, t, out); }
bool parse_recompute(const std::string& t, Recompute& out) { return parse(kRecomputes, t, out); }
bool parse_precision(const std::string& t, Precision& out) { return parse(kPrecisions, t, out); }
std::vector<std::string> schedule_names() { return names(kSchedules); }
std::vector<std::string> recompute_names() { return names(kRecomputes); }
std::vector<std::string> precision_names() { return names(kPrecisions); }
std::string to_string(AttentionKind a) { return name_of(kAttentions, a); }
bool parse_attention(const std::string& t, AttentionKind& out) { return parse(kAttentions, t, out); }
std::vector<std::string> attention_names() { return names(kAttentions); }
std::string to_string(CpKind k) { return name_of(kCpKinds, k); }
bool parse_cp_kind(const std::string& t, CpKind& out) { return parse(kCpKinds, t, out); }
std::vector<std::string> cp_kind_names() { return names(kCpKinds); }
std::string to_string(MoeDispatcher d) { return name_of(kMoeDispatchers, d); }
bool parse_moe_dispatcher(const std::string& t, MoeDispatcher& out) {
  if (t == "flex") {
    out = MoeDispatcher::DeepEP;
    return true;
  }
  return parse(kMoeDispatchers, t, out);
}
std::vector<std::string> moe_dispatcher_names() { return names(kMoeDispatchers); }
std::string to_string(CudaGraphs g) { return name_of(kCudaGraphs, g); }
bool parse_cuda_graphs(const std::string& t, CudaGraphs& out) {
  std::string dashed = t;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return parse(kCudaGraphs, dashed, out);
}
std::vector<std::string> cuda_graphs_names() { return names(kCudaGraphs); }

namespace {
// A comma list of named flags (Megatron's --cuda-graph-modules / --recompute-modules, also in its
// Python-list spelling ['a', 'b']): one table of {member, name} per set, one parser and printer for both.
template <class Set>
struct FlagName {
  bool Set::*member;
  const char* name;
};
constexpr FlagName<CudaGraphScopes> kScopes[] = {{&CudaGraphScopes::attn, "attn"},
                                                 {&CudaGraphScopes::mlp, "mlp"},
                                                 {&CudaGraphScopes::moe, "moe"},
                                                 {&CudaGraphScopes::moe_router, "moe_router"},
                                                 {&CudaGraphScopes::moe_preprocess, "moe_preprocess"}};
constexpr FlagName<RecomputeModules> kModules[] = {{&RecomputeModules::core_attn, "core_attn"},
                                                   {&RecomputeModules::mla_up_proj, "mla_up_proj"},
                                                   {&RecomputeModules::moe_act, "moe_act"},
                                                   {&RecomputeModules::layernorm, "layernorm"},
                                                   {&RecomputeModules::mlp, "mlp"},
                                                   {&RecomputeModules::moe, "moe"},
                                                   {&RecomputeModules::shared_experts, "shared_experts"}};

template <class Set, size_t N>
std::string flags_to_string(const Set& s, const FlagName<Set> (&table)[N]) {
  std::string out;
  for (const FlagName<Set>& n : table)
    if (s.*n.member) out += (out.empty() ? "" : ",") + std::string(n.name);
  return out;
}

// `also_empty` names a word that sets nothing but is accepted (Megatron's "full" graph scope).
template <class Set, size_t N>
bool parse_flags(const std::string& text, const FlagName<Set> (&table)[N], const char* also_empty, Set& out,
                 std::vector<std::string>& unknown) {
  Set s;
  std::string word;
  auto take = [&] {
    bool found = word.empty() || (also_empty && word == also_empty);
    for (const FlagName<Set>& n : table)
      if (word == n.name) s.*n.member = found = true;
    if (!found) unknown.push_back(word);
    word.clear();
  };
  for (char ch : text) {
    if (ch == ',' || ch == ' ' || ch == '[' || ch == ']' || ch == '\'' || ch == '"') take();
    else word += ch;
  }
  take();
  out = s;
  return unknown.empty();
}

template <class Set, size_t N>
std::vector<std::string> flag_names(const FlagName<Set> (&table)[N]) {
  std::vector<std::string> v;
  for (const FlagName<Set>& n : table) v.push_back(n.name);
  return v;
}
}  // namespace

std::string to_string(const CudaGraphScopes& s) { return flags_to_string(s, kScopes); }
bool parse_cuda_graph_scopes(const std::string& text, CudaGraphScopes& out, std::vector<std::string>& unknown) {
  return parse_flags(text, kScopes, "full", out, unknown);  // "full": Megatron-Core's default, the whole layer
}
std::vector<std::string> cuda_graph_scope_names() { return flag_names(kScopes); }

std::string to_string(const RecomputeModules& r) { return flags_to_string(r, kModules); }
bool parse_recompute_modules(const std::string& text, RecomputeModules& out, std::vector<std::string>& unknown) {
  return parse_flags(text, kModules, nullptr, out, unknown);
}
std::vector<std::string> recompute_module_names() { return flag_names(kModules); }

std::string to_string(const Overlap& o) {
  std::string s;
  for (auto [on, name] : {std::pair{o.tp, "tp"}, {o.dp, "dp"}, {o.pp, "pp"}})
    if (on) s += (s.empty() ? "" : ",") + std::string(name);
  return s.empty() ? "none" : s;
}

bool pp_overlapped(const Overlap& o, ScheduleKind s) {
  return o.pp && (!o.pp_interleaved_only || s == ScheduleKind::Interleaved);
}

bool dp_overlapped(const ExecutionSpec& e, int64_t pp) {
  return e.overlap.dp && !(e.recipe.dp_after_pipeline_flush && pp > 1);
}

bool pipeline_sends_scattered(const ExecutionSpec& e, int64_t tp, int64_t pp) {
  return pp > 1 && tp > 1 && !e.sequence_parallel && !e.recipe.pipeline_sends_whole_tensor;
}

Overlap overlap_in_effect(const Overlap& o, ScheduleKind s) {
  Overlap e = o;
  e.pp = pp_overlapped(o, s);
  e.pp_interleaved_only = false;
  return e;
}

std::string overlap_text(const Overlap& o, ScheduleKind s) {
  const std::string list = to_string(overlap_in_effect(o, s));
  if (!o.pp || pp_overlapped(o, s)) return list;
  return list + " (pipeline sends block in " + to_string(s) + ": the stack overlaps them in the interleaved schedule only)";
}

bool parse_overlap(const std::string& text, Overlap& out) {
  if (text == "none") {
    out = {false, false, false};
    return true;
  }
  if (text == "all") {
    out = {true, true, true};
    return true;
  }
  Overlap o{false, false, false};
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(",+", start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part == "tp") o.tp = true;
    else if (part == "dp") o.dp = true;
    else if (part == "pp") o.pp = true;
    else return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  out = o;
  return true;
}

namespace {
// Megatron-LM's pretrain_gpt.py: 1F1B, or 1F1B interleaved over virtual stages (no GPipe, no
// zero-bubble schedule), as its emitted launch (report/emit_megatron.cpp) refuses the others.
const std::vector<ScheduleKind> kMegatronSchedules = {ScheduleKind::OneFOneB, ScheduleKind::Interleaved};
}  // namespace

bool StackPreset::runs(ScheduleKind s) const {
  return schedules.empty() || std::find(schedules.begin(), schedules.end(), s) != schedules.end();
}

const std::vector<StackPreset>& stack_presets() {
  static const std::vector<StackPreset> stacks = {
      {"trident",
       "what `trident train` runs (the defaults): unfused attention, DP overlap only, fp32 grads, pipeline sends of "
       "the activation each TP rank holds",
       AttentionKind::Unfused, {false, true, false}, 32, -1, false, false, {.pipeline_sends_whole_tensor = true}},
      {"megatron-lm-2021",
       "Megatron-LM as in Narayanan 2021 / Korthikanti 2022: unfused attention, fp32 main grads, gradients all-reduced "
       "after the pipeline flush, not behind the backward (its local DDP; overlap_grad_reduce came with Megatron-Core), "
       "pipeline sends of 1/tp shares gathered by the receiver without sequence parallel (its scatter/gather)",
       AttentionKind::Unfused, {false, false, false}, 32, -1, false, false, {.pipeline_sends_whole_tensor = false},
       kMegatronSchedules, true, true},
      {"megatron-core-te",
       "Megatron-Core / NeMo with Transformer Engine: flash attention, TP and DP overlap, PP overlap in the "
       "interleaved schedule (Megatron's 1F1B sends block), distributed optimizer (ZeRO 1), bf16 gradient reduction, selective recompute of the core attention, "
       "each interleaved chunk's gradient reduction and weight gather overlapped on its own (overlap_grad_reduce), "
       "FP8 casts of the QKV, FC1 and FC2 inputs fused into the norms and the activation (LayerNormLinear / LayerNormMLP), "
       "pipeline sends of the whole activation from every TP rank without sequence parallel (no scatter/gather)",
       AttentionKind::Flash, {true, true, true, true}, 16, 1, false, true,
       {.dp_overlap_per_chunk = true, .pipeline_sends_whole_tensor = true, .fp8_fused_casts = true},
       kMegatronSchedules, true, true},
      {"deepspeed",
       "DeepSpeed ZeRO with its pipeline engine (Megatron-DeepSpeed): flash attention, overlapped gradient "
       "reduction (overlap_comm) without pipeline parallelism, after the pipeline flush with it (the engine's "
       "ReduceGrads step), 16-bit gradients, ZeRO 1, TP collectives not overlapped, 1F1B only (no "
       "interleaving), pipeline sends of the whole activation from every TP rank, SwiGLU in eager PyTorch ops, compute at 0.767 of "
       "Megatron-LM's rates (measured: MT-NLG 530B on 2240 GPUs against Megatron's 530B on the same tp 8 x pp 35)",
       AttentionKind::Flash, {false, true, false}, 16, 1, false, false,
       // 0.767: the one value that gives MT-NLG 530B's published 60.1 s on 2240 A100s (Smith et al.
       // 2022; data/calibration marks that row fitted). The same model and tp 8 x pp 35 under
       // Megatron-LM (Korthikanti 2022, 530B full recompute, predicted within 0.1% at 1) takes
       // 0.168 s per micro-batch against MT-NLG's 0.219 s (bubbles taken out): 0.77, the same ratio.
       {.pipeline_sends_whole_tensor = true, .dp_after_pipeline_flush = true, .fused_swiglu = false, .compute_efficiency = 0.767},
       {ScheduleKind::OneFOneB}, false, true},
      {"torchtitan",
       "torchtitan: FSDP2 (ZeRO 3 only: torchtitan has no ZeRO 1 or 2) with prefetched all-gathers, PyTorch SDPA flash attention, TP "
       "collectives blocking (its default: async TP needs torch.compile, which it leaves off), fp32 "
       "gradient reduction, context parallel by all-gathering K and V (its default rotate method), SwiGLU in eager "
       "PyTorch ops (no torch.compile), pipeline sends of the activation each TP rank holds",
       AttentionKind::Flash, {false, true, false}, 32, 3, true, false,
       {.cp_kind = CpKind::AllGather, .pipeline_sends_whole_tensor = true, .fused_swiglu = false},
       // Its zero-bubble schedules split the model into several chunks per rank; zb-h1 has one.
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}, false, true},
  };
  return stacks;
}

const StackPreset* find_stack(const std::string& name) {
  for (const auto& s : stack_presets())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> stack_names() {
  std::vector<std::string> out;
  for (const auto& s : stack_presets()) out.push_back(s.name);
  return out;
}

void apply_stack(const StackPreset& s, ExecutionSpec& e) {
  e.attention = s.attention;
  e.overlap = s.overlap;
  e.grad_bits = s.grad_bits;
  if (s.zero >= 0) e.zero = s.zero;
  e.recompute_flash_attention = s.recompute_flash_attention;
  e.recipe = s.recipe;
  if (!s.runs(e.schedule)) e.schedule = s.schedules.front();
}

bool python_issued(const ExecutionSpec& e) {
  const StackPreset* s = find_stack(e.stack);
  return s && s->python_issued;
}

}  // namespace trident
