// The rehearsal of a plan (see rehearsal_shape.h).
#include "rehearse/rehearsal_shape.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "capability/rehearsal_check.h"
#include "core/mesh.h"
#include "core/pipeline_bubble.h"
#include "plan/dim_link.h"
#include "schedule/schedule.h"

namespace trident::rehearse {

namespace {

int64_t round_up(int64_t x, int64_t m) { return m <= 1 ? x : (x + m - 1) / m * m; }
int64_t scaled(int64_t x, double f) { return std::max<int64_t>(1, std::llround(double(x) * f)); }

constexpr Dim kDims[] = {Dim::TP, Dim::CP, Dim::DP, Dim::PP, Dim::EP};

// The bubble's share of the schedule's pipeline of p stages, v chunks each, m micro-batches.
double bubble_share(ScheduleKind schedule, int64_t p, int64_t v, int64_t m) {
  return closed_form_bubble_share(schedule, p, m, v);
}

struct LayoutChoice {
  Layout layout;
  int mismatches = 0;  // dimensions whose crossing of hosts differs from the plan's
};

std::string upper(Dim d) {
  std::string s = to_string(d);
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// What of the plan's parallelism the rehearsed layout L (hosts of per_host ranks) leaves out:
// each dimension the plan has (size above 1) that runs at size 1 here, and each whose groups
// cross hosts in the plan and not here, or here and not in the plan.
struct Coverage {
  std::vector<NotExercised> lines;
  int dims = 0, crossings = 0;  // dimensions at 1 here; dimensions that cross hosts differently
  std::pair<int, int> key() const { return {dims, crossings}; }  // dimensions first: the fewest left out
};
Coverage not_exercised(const RunSpec& plan, const Layout& L, int64_t per_host, int64_t hosts) {
  const Layout& P = plan.layout;
  const int64_t plan_domain = plan.cluster.gpus_per_nvlink_domain();
  Coverage out;
  for (Dim d : kDims) {
    if (P.size(d) == 1) continue;
    const std::string name = to_string(d), plan_text = fmt::format("the plan's {} {}", name, P.size(d));
    const bool plan_crosses = crosses_hosts(P, d, plan_domain), here_crosses = crosses_hosts(L, d, per_host);
    if (L.size(d) == 1) {
      ++out.dims;
      out.lines.push_back({d, false, fmt::format("{} ({}{}): {} 1 here", upper(d), plan_text, plan_crosses ? ", across nodes" : "", name)});
    } else if (plan_crosses != here_crosses) {
      ++out.crossings;
      out.lines.push_back({d, true,
          plan_crosses ? fmt::format("{} across hosts ({} crosses nodes): its groups stay in a host here{}", upper(d),
                                     plan_text, hosts == 1 ? " (one host: --hosts 2 or more emulates the crossing)" : "")
                       : fmt::format("{} inside a node ({} stays in a node): its groups cross hosts here", upper(d), plan_text)});
    }
  }
  return out;
}

// Degrees no larger than the plan's that multiply to `ranks` (ep dividing dp x cp and the
// experts, as the layout rules ask): the fewest of the plan's dimensions and crossings left out
// (not_exercised), then the fewest differences in which groups cross hosts, then the most of
// the plan's dimensions kept, then the deepest pipeline, then tp, then ep.
std::optional<LayoutChoice> choose_layout(const RunSpec& plan, int64_t ranks, int64_t per_host) {
  const Layout& P = plan.layout;
  const int64_t plan_domain = plan.cluster.gpus_per_nvlink_domain();
  const int64_t hosts = std::max<int64_t>(1, ranks / std::max<int64_t>(1, per_host));
  std::optional<LayoutChoice> best;
  std::tuple<std::pair<int, int>, int, int, int64_t, int64_t, int64_t> best_key{};
  for (int64_t tp : divisors(ranks))
    for (int64_t cp : divisors(ranks / tp))
      for (int64_t pp : divisors(ranks / (tp * cp))) {
        const int64_t dp = ranks / (tp * cp * pp);
        if (tp > P.tp || cp > P.cp || pp > P.pp || dp > P.dp) continue;
        for (int64_t ep : divisors(dp * cp)) {
          if (ep > P.ep || (ep > 1 && plan.model.experts % ep != 0)) continue;
          Layout L = P;
          L.tp = tp, L.cp = cp, L.pp = pp, L.dp = dp, L.ep = ep;
          int mismatches = 0, collapsed = 0;
          for (Dim d : kDims) {
            if (P.size(d) == 1) continue;
            collapsed += L.size(d) == 1;
            mismatches += crosses_hosts(L, d, per_host) != crosses_hosts(P, d, plan_domain);
          }
          const auto key = std::make_tuple(not_exercised(plan, L, per_host, hosts).key(), mismatches, collapsed, -pp, -tp, -ep);
          if (!best || key < best_key) best = LayoutChoice{L, mismatches}, best_key = key;
        }
      }
  return best;
}

// Heads, kv-heads and width: heads and kv-heads multiples of tp with the plan's ratio, an even
// head size near hidden x scale / heads.
void scale_width(const ModelSpec& P, double f, int64_t tp, ModelSpec& m) {
  const int64_t kv_plan = P.kv_heads > 0 ? P.kv_heads : P.heads;
  const int64_t group = std::max<int64_t>(1, P.heads / kv_plan);  // query heads per kv head
  m.kv_heads = round_up(scaled(kv_plan, f), tp);
  m.heads = m.kv_heads * group;
  const int64_t head_dim = std::max<int64_t>(8, round_up(scaled(P.hidden, f) / m.heads, 2));
  m.hidden = m.heads * head_dim;
  if (P.kv_heads == 0 || P.kv_heads == P.heads) m.kv_heads = P.kv_heads == 0 ? 0 : m.heads;
  auto width = [&](int64_t w) { return round_up(std::max<int64_t>(tp, std::llround(double(w) * double(m.hidden) / double(P.hidden))), tp); };
  m.ffn_hidden = width(P.ffn_hidden);
  if (P.is_moe()) m.expert_ffn_hidden = width(P.expert_ffn_hidden);  // the experts' count and top-k kept
}

// The vocabulary that gives the embedding (and an untied head) the plan's share of the parameters.
int64_t vocab_in_proportion(const ModelSpec& P, const ModelSpec& m) {
  const ParamCount pc = count_parameters(P);
  const double embedding = double(pc.token_embedding + pc.output_layer);
  const double share = embedding / double(pc.total);
  ModelSpec no_vocab = m;
  no_vocab.vocab = 0;
  const double rest = double(count_parameters(no_vocab).total);
  const double per_token = double(m.hidden) * (m.tied_embeddings() ? 1.0 : 2.0);
  return std::max<int64_t>(1, std::llround(share / (1 - share) * rest / per_token));
}

double embedding_share(const ModelSpec& m) {
  const ParamCount pc = count_parameters(m);
  return double(pc.token_embedding + pc.output_layer) / double(pc.total);
}

// Micro-batches per pipeline whose bubble share is nearest the plan's (the schedule's shape allowing).
int64_t choose_micro_batches(const RunSpec& plan, const Layout& L, int64_t v) {
  const ExecutionSpec& x = plan.exec;
  const int64_t pv = x.schedule == ScheduleKind::Interleaved ? x.virtual_stages : 1;
  const double target = bubble_share(x.schedule, plan.layout.pp, pv, x.micro_batches(plan.layout.dp));
  int64_t best = 0;
  for (int64_t m = 1; m <= 16; ++m) {
    Problems shape;
    check_schedule_shape(x.schedule, L.pp, m, v, shape);
    if (!shape.empty()) continue;
    if (best == 0 || std::abs(bubble_share(x.schedule, L.pp, v, m) - target) <
                         std::abs(bubble_share(x.schedule, L.pp, v, best) - target))
      best = m;
  }
  return best;
}

std::string params_text(const ModelSpec& m) {
  const double n = double(count_parameters(m).total);
  return n >= 1e9 ? fmt::format("{:.1f} B", n / 1e9) : n >= 1e6 ? fmt::format("{:.2f} M", n / 1e6) : fmt::format("{:.0f} K", n / 1e3);
}

void model_rows(const ModelSpec& P, const ModelSpec& m, double f, int64_t data_vocab, int64_t tp, RehearsalShape& out) {
  auto n = [](int64_t v) { return std::to_string(v); };
  auto row = [&](std::string what, int64_t a, int64_t b, std::string why) { out.rows.push_back({what, n(a), n(b), why}); };
  row("layers", P.layers, m.layers,
      fmt::format("x {:.4g}, a multiple of pp x virtual stages{}", f,
                  P.is_moe() && (P.moe_dense_layers > 0 || P.moe_layer_freq > 1)
                      ? fmt::format(", at least the {} dense + 1 MoE{} layers of the pattern", m.moe_dense_layers,
                                    P.moe_layer_freq > 1 ? fmt::format(" + {} dense", P.moe_layer_freq - 1) : "")
                      : ""));
  row("hidden", P.hidden, m.hidden, fmt::format("x {:.4g}: heads x an even head size ({})", f, m.head_dim()));
  row("heads", P.heads, m.heads, "x scale, a multiple of tp " + n(tp) + " (kv-heads too), query heads per kv head kept");
  row("kv-heads", P.kv_heads > 0 ? P.kv_heads : P.heads, m.kv_heads > 0 ? m.kv_heads : m.heads, "");
  row("ffn-hidden", P.ffn_hidden, m.ffn_hidden, fmt::format("ffn / hidden kept ({:.3g}), a multiple of tp",
                                                             double(P.ffn_hidden) / double(P.hidden)));
  if (P.is_moe())
    row("expert-ffn-hidden", P.expert_ffn_hidden, m.expert_ffn_hidden,
        fmt::format("as ffn; {} experts, top-{}, {} shared kept", m.experts, m.experts_per_token, m.shared_experts));
  row("seq-len", P.seq_len, m.seq_len, "seq / hidden kept, at least 32, a multiple of 16 (and of 2 cp, tp x cp)");
  const int64_t proportional = vocab_in_proportion(P, m);
  row("vocab", P.vocab, m.vocab,
      m.vocab > proportional
          ? fmt::format("{} would keep the embedding's share; raised to the token file's {} ({:.1f}% of the "
                        "parameters instead of {:.1f}%)", proportional, data_vocab, 100 * embedding_share(m),
                        100 * embedding_share(P))
          : fmt::format("the embedding keeps its share of the parameters ({:.1f}%)", 100 * embedding_share(P)));
  out.rows.push_back({"parameters", params_text(P), params_text(m), ""});
}

}  // namespace

bool crosses_hosts(const Layout& layout, Dim dim, int64_t per_host) {
  if (layout.size(dim) <= 1) return false;
  const Mesh mesh(layout, per_host);
  ClusterSpec c;
  c.gpus_per_node = per_host;
  c.nodes = std::max<int64_t>(1, (layout.world_size() + per_host - 1) / per_host);
  c.hosts_per_nvlink_domain = 1;
  return plan::dim_link(mesh, dim, c).groups_crossing_domains > 0;
}

std::optional<std::string> tp_across_order(const Layout& layout, int64_t per_host) {
  std::vector<std::string> dims;
  for (size_t start = 0, end; start <= layout.order.size(); start = end + 1) {
    end = std::min(layout.order.find('-', start), layout.order.size());
    dims.push_back(layout.order.substr(start, end - start));
  }
  std::sort(dims.begin(), dims.end());
  std::optional<std::string> best;
  int best_changes = 0;
  do {
    Layout L = layout;
    L.order.clear();
    for (const auto& d : dims) L.order += (L.order.empty() ? "" : "-") + d;
    // Only orders train accepts (ep next to dp): the permutation cp-dp-pp-ep-tp would be refused.
    std::array<Dim, kNumDims> parsed{};
    Problems refused;
    if (!parse_order(L.order, parsed, refused) || !crosses_hosts(L, Dim::TP, per_host)) continue;
    int changes = 0;
    for (Dim d : {Dim::CP, Dim::DP, Dim::PP}) changes += crosses_hosts(L, d, per_host) != crosses_hosts(layout, d, per_host);
    if (!best || changes < best_changes) best = L.order, best_changes = changes;
  } while (std::next_permutation(dims.begin(), dims.end()));
  return best;
}

RankChoice default_ranks(const RunSpec& plan, int64_t hosts, int64_t most) {
  RankChoice best;
  std::pair<int, int> best_missing{};
  const int64_t world = plan.layout.world_size();
  for (int64_t ranks = std::max<int64_t>(2, hosts); ranks <= std::max(most, hosts); ++ranks) {
    if (ranks % hosts != 0 || (ranks > world && best.ranks > 0)) continue;
    const auto choice = choose_layout(plan, ranks, ranks / hosts);
    if (!choice) continue;
    const std::pair<int, int> missing = not_exercised(plan, choice->layout, ranks / hosts, hosts).key();
    if (best.ranks == 0 || missing < best_missing) best.ranks = ranks, best_missing = missing;
  }
  if (best.ranks == 0) best.ranks = std::max<int64_t>(2, hosts) / hosts * hosts;
  // Every dimension the plan has at 2 at least: the fewest ranks that could exercise them all.
  int64_t needed = 1;
  std::string dims;
  for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP})
    if (plan.layout.size(d) > 1) needed *= 2, dims += (dims.empty() ? "" : ", ") + to_string(d);
  best.why = best_missing == std::pair<int, int>{0, 0}
                 ? fmt::format("the fewest ranks (up to {}) that exercise every dimension and host crossing of the plan", most)
                 : fmt::format("of up to {} ranks on {} host{}, the fewest that exercise the most of the plan "
                               "(its {} at 2 each take {} ranks{})",
                               most, hosts, hosts > 1 ? "s" : "", dims, needed,
                               hosts == 1 ? "; its host crossings need --hosts 2 or more" : "");
  return best;
}

double default_scale(const ModelSpec& model, int64_t cores) {
  const double target = double(std::clamp<int64_t>(64 * cores, 64, 512));
  return std::min(1.0, target / double(std::max<int64_t>(1, model.hidden)));
}

RehearsalShape derive_rehearsal(const RunSpec& plan, int64_t ranks, int64_t hosts, double scale, int64_t data_vocab,
                                Problems& problems) {
  RehearsalShape out;
  auto n = [](int64_t v) { return std::to_string(v); };
  if (ranks < 1 || hosts < 1 || ranks % hosts != 0)
    problems.add("--ranks " + n(ranks) + " over --hosts " + n(hosts) + ": every emulated host needs the same number of ranks",
                 "use --ranks a multiple of --hosts, e.g. --ranks " + n(std::max<int64_t>(1, hosts) * 2), "rehearse-ranks");
  if (!(scale > 0 && scale <= 1))
    problems.add(fmt::format("--scale {} is outside (0, 1]", scale), "give e.g. --scale 0.01", "rehearse-scale");
  if (!problems.empty()) return out;
  out.hosts = hosts, out.ranks_per_host = ranks / hosts;
  const auto choice = choose_layout(plan, ranks, out.ranks_per_host);
  if (!choice) {
    problems.add("no layout of " + n(ranks) + " ranks has degrees within the plan's (" + plan.layout.describe() + ")",
                 "use --ranks " + n(std::min<int64_t>(plan.layout.world_size(), 2)) + " or another count the plan's "
                 "degrees multiply to", "rehearse-ranks");
    return out;
  }
  RunSpec r = plan;
  r.layout = choice->layout;
  const Layout& L = r.layout;
  ExecutionSpec& x = r.exec;
  // One stage has nothing to interleave: 1F1B is what an interleaved plan runs without a pipeline.
  if (L.pp == 1 && x.schedule == ScheduleKind::Interleaved) {
    x.schedule = ScheduleKind::OneFOneB;
    out.substitutions.push_back("schedule interleaved -> 1f1b (the rehearsal's pp is 1: nothing to interleave)");
  }
  // Layers: a multiple of pp x virtual stages (the interleaved schedule keeps at least 2 chunks).
  const int64_t want_layers = scaled(plan.model.layers, scale);
  x.virtual_stages = x.schedule == ScheduleKind::Interleaved
                         ? std::clamp<int64_t>(want_layers / L.pp, 2, std::max<int64_t>(2, plan.exec.virtual_stages))
                         : 1;
  ModelSpec& m = r.model;
  m.name = "rehearsal of " + plan.model.name;
  // A mixture of experts keeps its pattern: its dense leading layers (scaled, at least one if it
  // has any) and one MoE layer with the dense ones --moe-layer-freq puts after it.
  if (m.is_moe() && m.moe_dense_layers > 0) m.moe_dense_layers = scaled(plan.model.moe_dense_layers, scale);
  const int64_t pattern_layers = m.is_moe() ? m.moe_dense_layers + m.moe_layer_freq : 1;
  m.layers = round_up(std::max(want_layers, pattern_layers), L.pp * x.virtual_stages);
  scale_width(plan.model, scale, L.tp, m);
  const int64_t seq_unit = std::lcm<int64_t>(16, std::lcm<int64_t>(2 * L.cp, L.tp * L.cp));
  m.seq_len = round_up(std::max<int64_t>(32, std::llround(double(plan.model.seq_len) * double(m.hidden) /
                                                          double(plan.model.hidden))), seq_unit);
  m.vocab = round_up(std::max(data_vocab, vocab_in_proportion(plan.model, m)), L.tp);
  model_rows(plan.model, m, scale, data_vocab, L.tp, out);

  // Layout rows: degree and whether the groups cross hosts, planned beside rehearsed.
  const int64_t plan_domain = plan.cluster.gpus_per_nvlink_domain();
  for (Dim d : kDims) {
    if (plan.layout.size(d) == 1 && L.size(d) == 1) continue;
    const std::string why = d == Dim::TP ? fmt::format("hosts of {} ranks here, of {} GPUs in the plan", out.ranks_per_host, plan_domain)
                            : d == Dim::EP ? fmt::format("divides dp x cp ({}) and the {} experts", L.dp * L.cp, m.experts)
                                           : "";
    out.rows.push_back({to_string(d), n(plan.layout.size(d)) + (crosses_hosts(plan.layout, d, plan_domain) ? " (crosses hosts)" : " (in a host)"),
                        n(L.size(d)) + (crosses_hosts(L, d, out.ranks_per_host) ? " (crosses hosts)" : " (in a host)"), why});
  }
  out.not_exercised = not_exercised(plan, L, out.ranks_per_host, hosts).lines;
  out.rows.push_back({"order", plan.layout.order, L.order,
                      choice->mismatches == 0 ? "the same groups cross hosts as in the plan"
                                              : n(choice->mismatches) + " dimension(s) cross hosts differently: no shape of " +
                                                    n(ranks) + " ranks on " + n(hosts) + " hosts keeps them all"});

  // Batch: the plan's bubble share.
  x.micro_batch_size = std::min<int64_t>(plan.exec.micro_batch_size, 2);
  const int64_t pm = plan.exec.micro_batches(plan.layout.dp), pv = plan.exec.schedule == ScheduleKind::Interleaved ? plan.exec.virtual_stages : 1;
  int64_t mb = choose_micro_batches(plan, L, x.virtual_stages);
  if (mb == 0) mb = std::max<int64_t>(1, L.pp);
  x.global_batch_size = mb * x.micro_batch_size * L.dp;
  out.rows.push_back({"micro-batch size", n(plan.exec.micro_batch_size), n(x.micro_batch_size), "at most 2 on CPU ranks"});
  out.rows.push_back({"micro-batches per pipeline", n(pm), n(mb),
                      fmt::format("bubble (p-1)/({} m+p-1): {:.1f}% planned, {:.1f}% rehearsed",
                                  plan.exec.schedule == ScheduleKind::ZeroBubbleH1 ? "3" : "v",
                                  100 * bubble_share(plan.exec.schedule, plan.layout.pp, pv, pm),
                                  100 * bubble_share(x.schedule, L.pp, x.virtual_stages, mb))});
  out.rows.push_back({"global batch", n(plan.exec.global_batch_size), n(x.global_batch_size), "micro-batches x size x dp"});
  out.rows.push_back({"schedule", to_string(plan.exec.schedule) + (pv > 1 ? " v " + n(pv) : ""),
                      to_string(x.schedule) + (x.virtual_stages > 1 ? " v " + n(x.virtual_stages) : ""),
                      pv != x.virtual_stages ? "virtual stages fit the layers" : ""});
  out.rows.push_back({"ZeRO / recompute", n(plan.exec.zero) + " / " + to_string(plan.exec.recompute),
                      n(x.zero) + " / " + to_string(x.recompute), ""});
  if (x.sequence_parallel && L.tp == 1) {
    x.sequence_parallel = false;
    out.substitutions.push_back("sequence parallel -> off (the rehearsal's tp is 1)");
  }
  const capability::RehearsalCheck check = capability::rehearsal_check(r);
  for (const auto& s : check.substitutions) out.substitutions.push_back(s);
  out.refusals = check.refusals;
  out.run = check.run;
  out.run.cluster.gpus_per_node = out.ranks_per_host;
  out.run.cluster.nodes = hosts;
  return out;
}

}  // namespace trident::rehearse
