#include "core/layout_rules.h"

#include <fmt/format.h>

#include <cstring>
#include <sstream>

#include "core/checked_size.h"
#include "core/dimensions.h"
#include "core/pipeline_units.h"
#include "core/run_spec.h"

namespace trident {

namespace {

std::string list_of(const std::vector<int64_t>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(std::to_string(x));
  return join_choices(s);
}

bool order_names(const Layout& l, const char* name) {
  std::stringstream in(l.order);
  std::string token;
  while (std::getline(in, token, '-'))
    if (token == name) return true;
  return false;
}

// --- the layout alone ---

void sizes_positive(const RunSpec& r, Problems& p) {
  for (const Dimension& d : dimensions())
    if (r.layout.*d.size <= 0)
      p.add(fmt::format("--{} is {}, must be positive", d.name, r.layout.*d.size),
            fmt::format("give --{} 1 or more", d.name), "dimension-positive");
}

void order_parses(const RunSpec& r, Problems& p) {
  std::array<Dim, kNumDims> dims;
  parse_order(r.layout.order, dims, p);  // its problems carry order-malformed
}

void order_places_every_dimension(const RunSpec& r, Problems& p) {
  const Layout& l = r.layout;
  std::array<Dim, kNumDims> dims;
  Problems malformed;  // said by order_parses
  if (!parse_order(l.order, dims, malformed)) return;
  for (const Dimension& d : dimensions()) {
    if (!d.ordered || !d.order_optional || l.*d.size <= 1 || order_names(l, d.name)) continue;
    p.add(fmt::format("{} is {} but order '{}' does not place it", d.name, l.*d.size, l.order),
          d.dense ? fmt::format("add {} to the order, e.g. --order tp-cp-dp-pp (Megatron's default is tp-cp-ep-dp-pp)",
                                d.name)
                  : fmt::format("add {} next to dp, e.g. --order tp-cp-ep-dp-pp", d.name),
          "order-omits-dimension");
  }
}

// Megatron-Core's rule (parallel_state.initialize_model_parallel): the expert grid etp x ep x
// edp x pp covers the world, so etp x ep divides each stage's tp x cp x dp ranks.
void expert_grid_divides_ranks(const RunSpec& r, Problems& p) {
  const Layout& l = r.layout;
  if (l.ep <= 0 || l.etp <= 0 || l.tp <= 0 || l.cp <= 0 || l.dp <= 0) return;  // dimension-positive says it
  const int64_t ranks = l.tp * l.cp * l.dp, grid = l.ep * l.etp;
  if (ranks % grid == 0) return;
  const int64_t folded_ep = ranks % l.ep == 0 ? l.ep : 0;
  p.add(fmt::format("ep {} x etp {} = {} does not divide a stage's {} ranks (tp {} x cp {} x dp {})", l.ep, l.etp, grid,
                    ranks, l.tp, l.cp, l.dp),
        folded_ep ? fmt::format("use --etp {} (1: experts whole, folded over tp)", list_of(divisors(ranks / l.ep)))
                  : fmt::format("the expert grid etp x ep x edp lays out the tp x cp x dp ranks again: use --ep and "
                                "--etp whose product divides {}",
                                ranks),
        "expert-grid-divides-ranks");
}

// Megatron-Core asserts that the expert grid keeps the dense grid's pipeline groups, and that
// an order not ending in pp gives the expert layers attention's data-parallel size. A model
// without experts has no expert grid (Megatron builds one at etp = tp, which always holds).
void expert_grid_keeps_stages(const RunSpec& r, Problems& p) {
  const Layout& l = r.layout;
  std::array<Dim, kNumDims> dims;
  Problems malformed;  // said by order_parses
  if (!r.model.is_moe() || l.pp <= 1 || !parse_order(l.order, dims, malformed) || l.ep <= 0 || l.etp <= 0 ||
      (l.tp * l.cp * l.dp) % (l.ep * l.etp) != 0)
    return;
  int64_t dense_below = 1, expert_below = 1;
  for (Dim d : l.dims_fastest_first()) {
    if (d == Dim::PP) break;
    dense_below *= l.size(d);
  }
  for (Dim d : l.expert_dims_fastest_first()) {
    if (d == Dim::PP) break;
    expert_below *= l.size(d);
  }
  const bool pp_last = dims[kNumDims - 1] == Dim::PP;
  if (dense_below == expert_below && (pp_last || l.size(Dim::EDP) == l.dp)) return;
  p.add(fmt::format("order '{}' gives the expert layers other pipeline stages than attention (ranks below pp: {} "
                    "dense, {} in the expert grid etp {} x ep {}{})",
                    l.order, dense_below, expert_below, l.etp, l.ep,
                    pp_last ? "" : fmt::format("; pp not last, so edp {} must equal dp {}", l.size(Dim::EDP), l.dp)),
        fmt::format("put pp last, e.g. --order tp-cp-ep-dp-pp (Megatron-Core's default), or use --etp {} with ep 1",
                    l.tp),
        "expert-grid-keeps-stages");
}

// --- against the cluster and the model ---

void world_size(const RunSpec& r, Problems& p) {
  const Layout& l = r.layout;
  const int64_t world = r.cluster.world_size();
  const int64_t split = l.tp * l.cp * l.pp;
  if (l.world_size() == world) return;
  const std::string cp_text = l.cp > 1 ? fmt::format(" x cp {}", l.cp) : "";
  p.add(fmt::format("layout tp {} x pp {} x dp {}{} = {} GPUs, but the cluster has {} ({} nodes x {})", l.tp, l.pp,
                    l.dp, cp_text, l.world_size(), world, r.cluster.nodes, r.cluster.gpus_per_node),
        world % split == 0
            ? fmt::format("use --dp {} or --nodes {}", world / split,
                          (l.world_size() + r.cluster.gpus_per_node - 1) / r.cluster.gpus_per_node)
            : fmt::format("make tp x pp x dp{} equal {}, or change --nodes", l.cp > 1 ? " x cp" : "", world),
        "world-size");
}

// The shape of the tp-divides rules: `what` (a model size of `value`) splits evenly over tp.
void tp_must_divide(const char* what, int64_t value, int64_t tp, const char* code, Problems& p) {
  if (value > 0 && value % tp != 0)
    p.add(fmt::format("{} ({}) not divisible by tensor-parallel size ({})", what, value, tp),
          fmt::format("use --tp {}", list_of(divisors(value))), code);
}

void tp_divides_heads(const RunSpec& r, Problems& p) {
  tp_must_divide("heads", r.model.heads, r.layout.tp, "tp-divides-heads", p);
}

void tp_divides_kv_heads(const RunSpec& r, Problems& p) {
  const int64_t tp = r.layout.tp, kv = r.model.kv_heads;
  // Only when the heads divide (else tp-divides-heads says it): a kv head is split or replicated.
  if (kv > 0 && r.model.heads % tp == 0 && kv % tp != 0 && tp % kv != 0)
    p.add(fmt::format("kv-heads ({}) and tensor-parallel size ({}) do not divide one another", kv, tp),
          fmt::format("use --tp among {} or a multiple of {}", list_of(divisors(kv)), kv), "tp-divides-kv-heads");
}

void tp_divides_ffn(const RunSpec& r, Problems& p) {
  tp_must_divide("ffn hidden", r.model.ffn_hidden, r.layout.tp, "tp-divides-ffn", p);
}

// The routed experts are split over etp (etp-divides-expert-ffn), not tp. The shared experts,
// one MLP of shared x expert-ffn columns every token passes, are split over tp like the dense MLP.
void tp_divides_expert_ffn(const RunSpec& r, Problems& p) {
  if (r.model.is_moe() && r.model.shared_experts > 0)
    tp_must_divide("the shared experts' ffn hidden (shared experts x expert ffn hidden)",
                   r.model.shared_experts * r.model.expert_ffn_hidden, r.layout.tp, "tp-divides-expert-ffn", p);
}

void pp_within_layers(const RunSpec& r, Problems& p) {
  const int64_t chunks =
      checked_product("model chunks", {{"pp", r.layout.pp}, {"virtual-stages", r.exec.virtual_stages}}, kMaxCount,
                      "use a smaller --virtual-stages", p)
          .value_or(0);
  const ExecutionSpec& e = r.exec;
  const int64_t units = r.model.layers + pipeline_split_extra_units(e);
  if (r.model.layers <= 0 || chunks <= 0 || !e.pipeline_layout.empty()) return;  // a layout: pipeline-layout-matches
  if (units > r.model.layers) {
    // Megatron's split with the embedding and/or the loss as units: (layers + units) / chunks each,
    // the first (last) chunk one less; the planner's split equals it when the loss goes with the embedding.
    if (units % chunks != 0)
      p.add(fmt::format("{} layers + {} (embedding / loss) = {} pipeline units do not divide over pp {} x virtual stages {} "
                        "= {} chunks (Megatron requires it when it accounts for them)",
                        r.model.layers, units - r.model.layers, units, r.layout.pp, e.virtual_stages, chunks),
            "choose pp x virtual stages dividing " + std::to_string(units) + ", or drop --account-for-*-in-pipeline-split",
            "pp-exceeds-layers");
    else if (!e.embedding_in_pipeline_split)
      p.add("--account-for-loss-in-pipeline-split without the embedding: the planner's split (the first and last "
            "chunks keep the fewer layers) is Megatron's with both or with the embedding only",
            "add --account-for-embedding-in-pipeline-split", "pp-exceeds-layers");
    return;
  }
  if (chunks > r.model.layers)
    p.add(fmt::format("pp {} x virtual stages {} = {} stages but the model has only {} layers", r.layout.pp,
                      r.exec.virtual_stages, chunks, r.model.layers),
          fmt::format("use --pp of at most {}, or count the embedding and the loss as pipeline units "
                      "(--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split, as Megatron) "
                      "when pp x virtual stages = layers + 2",
                      r.model.layers),
          "pp-exceeds-layers");
}

// A given layout replaces the even split: it must hold the model's layers in pp x v chunks, the
// embedding first and the loss and MTP modules in the last chunk (core/pipeline_layout.h).
void pipeline_layout_matches(const RunSpec& r, Problems& p) {
  const ExecutionSpec& e = r.exec;
  if (e.pipeline_layout.empty() || r.model.layers <= 0) return;
  check_pipeline_layout(e.pipeline_layout, r.model.layers, r.model.mtp_layers, r.layout.pp, e.virtual_stages,
                        "pipeline-layout-matches", p);
  if (pipeline_split_extra_units(e) > 0)
    p.add("--pipeline-layout with --account-for-*-in-pipeline-split: the layout already places the embedding and the loss",
          "drop --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split", "pipeline-layout-matches");
}

void cp_divides_sequence(const RunSpec& r, Problems& p) {
  // Causal load balancing gives each cp rank two chunks of the sequence (one early, one late).
  const int64_t cp = r.layout.cp, seq = r.model.seq_len;
  if (cp > 1 && seq > 0 && seq % (2 * cp) != 0)
    p.add(fmt::format("sequence length {} is not divisible by 2 x cp = {} (each cp rank holds two chunks of the "
                      "sequence, one from each end, to balance causal attention)",
                      seq, 2 * cp),
          fmt::format("use --seq-len {} or --cp among the divisors of {} / 2", (seq / (2 * cp) + 1) * 2 * cp, seq),
          "cp-divides-sequence");
}

// Sequence parallelism splits the rows outside the tensor-parallel GEMMs (norms, dropout, the
// residual) over the tp group: it needs a tp group, and each rank's rows (T / cp under cp) to
// divide over it, as Megatron-Core asserts.
}  // namespace

bool sequence_parallel_fits(const Layout& l, int64_t seq_len) {
  return l.tp > 1 && (seq_len <= 0 || l.cp < 1 || seq_len % (l.tp * l.cp) == 0);
}

namespace {

void sp_needs_tp(const RunSpec& r, Problems& p) {
  if (r.exec.sequence_parallel && r.layout.tp == 1)
    p.add("sequence parallel splits sequences across the tensor-parallel group, but tp is 1",
          "use --tp 2 or more with --sequence-parallel, or drop it", "sp-needs-tp");
}

void sp_divides_sequence(const RunSpec& r, Problems& p) {
  const Layout& L = r.layout;
  const int64_t seq = r.model.seq_len;
  if (!r.exec.sequence_parallel || L.tp <= 1 || sequence_parallel_fits(L, seq)) return;
  p.add("sequence parallel splits each sequence" + std::string(L.cp > 1 ? " (its T / cp rows on a cp rank)" : "") +
            " across the TP group, but seq_len (" + std::to_string(seq) + ") is not divisible by " +
            (L.cp > 1 ? "cp x tp (" + std::to_string(L.cp * L.tp) + ")" : "tp (" + std::to_string(L.tp) + ")"),
        "use a --seq-len that is a multiple of " + std::to_string(L.tp * L.cp) + ", or drop --sequence-parallel",
        "sp-divides-seq");
}

void ep_needs_experts(const RunSpec& r, Problems& p) {
  if (r.layout.ep > 1 && !r.model.is_moe())
    p.add(fmt::format("ep is {} but {} has no experts", r.layout.ep, r.model.name),
          "use --ep 1, or a mixture-of-experts model (--model mixtral-8x7b, or --experts N)", "ep-needs-experts");
}

void etp_needs_experts(const RunSpec& r, Problems& p) {
  if (r.layout.etp > 1 && !r.model.is_moe())
    p.add(fmt::format("etp is {} but {} has no experts", r.layout.etp, r.model.name),
          "use --etp 1, or a mixture-of-experts model (--model mixtral-8x7b, or --experts N)", "etp-needs-experts");
}

void etp_divides_expert_ffn(const RunSpec& r, Problems& p) {
  const int64_t etp = r.layout.etp, fe = r.model.expert_ffn_hidden;
  if (etp > 1 && r.model.is_moe() && fe > 0 && fe % etp != 0)
    p.add(fmt::format("expert ffn hidden ({}) not divisible by expert-tensor-parallel size ({})", fe, etp),
          fmt::format("use --etp {}", list_of(divisors(fe))), "etp-divides-expert-ffn");
}

void ep_divides_experts(const RunSpec& r, Problems& p) {
  const int64_t ep = r.layout.ep;
  if (ep > 1 && r.model.is_moe() && r.model.experts % ep != 0)
    p.add(fmt::format("ep {} does not divide the {} experts", ep, r.model.experts),
          fmt::format("use --ep {} (each ep rank holds experts / ep whole experts)", list_of(divisors(r.model.experts))),
          "ep-divides-experts");
}

// --- against the batch ---

void batch_divides(const RunSpec& r, Problems& p) {
  const ExecutionSpec& e = r.exec;
  const int64_t dp = r.layout.dp;
  if (e.global_batch_size <= 0 || e.micro_batch_size <= 0) return;
  if (e.micro_batch_size > e.global_batch_size) {
    p.add(fmt::format("micro-batch size ({}) is larger than the global batch ({})", e.micro_batch_size,
                      e.global_batch_size),
          "lower --micro-batch-size or raise --global-batch-size", "batch-divisibility");
  } else if (e.global_batch_size % (e.micro_batch_size * dp) == 0) {
    checked_product("pipeline blocks of one step",
                    {{"micro-batches", e.global_batch_size / (e.micro_batch_size * dp)}, {"pp", r.layout.pp},
                     {"virtual-stages", e.virtual_stages}},
                    kMaxPipelineBlocks, "use a larger --micro-batch-size or a smaller --global-batch-size", p);
  } else {
    const int64_t unit = e.micro_batch_size * dp, below = (e.global_batch_size / unit) * unit;
    p.add(fmt::format("global batch ({}) not divisible by micro-batch ({}) x dp ({}) = {}", e.global_batch_size,
                      e.micro_batch_size, dp, unit),
          e.global_batch_size < unit
              ? fmt::format("use --global-batch-size {} (or more), or a smaller --micro-batch-size or dp", unit)
              : fmt::format("use --global-batch-size {} or {}", below, below + unit),
          "batch-divisibility");
  }
}

}  // namespace

const std::vector<LayoutRule>& layout_rules() {
  static const std::vector<LayoutRule> rules = {
      {"dimension-positive", "layout", RuleKind::Layout, "every dimension's size is 1 or more", sizes_positive},
      {"order-malformed", "layout", RuleKind::Layout,
       "--order names tp, dp and pp once each (cp and ep at most once)", order_parses},
      {"order-omits-dimension", "layout", RuleKind::Layout, "a cp or ep above 1 is placed in --order",
       order_places_every_dimension},
      {"expert-grid-divides-ranks", "ep", RuleKind::Layout,
       "ep x etp divides a stage's tp x cp x dp ranks (Megatron-Core's expert grid)", expert_grid_divides_ranks},
      {"expert-grid-keeps-stages", "ep", RuleKind::Shape,
       "the expert grid keeps attention's pipeline groups (pp last, or edp = dp)", expert_grid_keeps_stages},
      {"world-size", "layout", RuleKind::Shape, "tp x cp x pp x dp equals the cluster's GPUs", world_size},
      {"tp-divides-heads", "tp", RuleKind::Shape, "tp divides the attention heads", tp_divides_heads},
      {"tp-divides-kv-heads", "tp", RuleKind::Shape, "tp and the kv heads divide one another", tp_divides_kv_heads},
      {"tp-divides-ffn", "tp", RuleKind::Shape, "tp divides the MLP's hidden size", tp_divides_ffn},
      {"tp-divides-expert-ffn", "tp", RuleKind::Shape, "tp divides the shared experts' MLP width (routed experts split over etp)", tp_divides_expert_ffn},
      {"pp-exceeds-layers", "pp", RuleKind::Shape, "pp x virtual stages is at most the layers", pp_within_layers},
      {"pipeline-layout-matches", "pp", RuleKind::Shape,
       "a --pipeline-layout has pp x virtual stages chunks and the model's layers, E first, L and the MTP modules last",
       pipeline_layout_matches},
      {"cp-divides-sequence", "cp", RuleKind::Shape, "2 x cp divides the sequence (two chunks per cp rank)",
       cp_divides_sequence},
      {"sp-needs-tp", "tp", RuleKind::Shape, "sequence parallel needs tp above 1", sp_needs_tp},
      {"sp-divides-seq", "tp", RuleKind::Shape, "with sequence parallel, tp x cp divides the sequence",
       sp_divides_sequence},
      {"ep-needs-experts", "ep", RuleKind::Shape, "ep above 1 needs a mixture-of-experts model", ep_needs_experts},
      {"ep-divides-experts", "ep", RuleKind::Shape, "ep divides the experts", ep_divides_experts},
      {"etp-needs-experts", "etp", RuleKind::Shape, "etp above 1 needs a mixture-of-experts model", etp_needs_experts},
      {"etp-divides-expert-ffn", "etp", RuleKind::Shape, "etp divides the routed experts' ffn hidden",
       etp_divides_expert_ffn},
      {"batch-divisibility", "dp", RuleKind::Batch, "micro-batch x dp divides the global batch", batch_divides},
  };
  return rules;
}

const LayoutRule* find_layout_rule(const char* code) {
  for (const LayoutRule& r : layout_rules())
    if (std::strcmp(r.code, code) == 0) return &r;
  return nullptr;
}

void validate_layout(const Layout& layout, Problems& problems) {
  RunSpec run;
  run.layout = layout;
  check_rules(RuleKind::Layout, run, problems);
}

void check_rules(RuleKind kind, const RunSpec& run, Problems& problems) {
  for (const LayoutRule& r : layout_rules())
    if (r.kind == kind) r.check(run, problems);
}

void check_dimension_rules(const std::vector<const char*>& dims, const RunSpec& run, Problems& problems) {
  for (const LayoutRule& r : layout_rules())
    for (const char* d : dims)
      if (r.kind == RuleKind::Shape && std::strcmp(r.dimension, d) == 0) r.check(run, problems);
}

}  // namespace trident
