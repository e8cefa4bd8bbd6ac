#include "report/rehearsal_report.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/dimensions.h"

namespace trident {

namespace {

struct Means {
  double total = 0, compute = 0, tp = 0, pp = 0, bubble = 0, dp = 0, optimizer = 0, weight = 0, other = 0;
  double cp = 0, cp_attention = 0, gather = 0, ep = 0, ep_wait = 0, norm_wait = 0;
};

Means rank_means(const RehearsalData& d, size_t rank) {
  Means m;
  int64_t n = 0;
  for (size_t s = size_t(d.warmup); s < d.times.size(); ++s, ++n) {
    const PhaseTimes& t = d.times[s][rank];
    m.total += t.total, m.compute += t.compute, m.tp += t.tp, m.pp += t.pp, m.bubble += t.bubble;
    m.dp += t.dp_exposed, m.optimizer += t.optimizer, m.weight += t.weight, m.other += t.other();
    m.cp += t.cp, m.cp_attention += t.cp_attention, m.gather += t.zero_gather, m.ep += t.ep, m.ep_wait += t.ep_wait;
    m.norm_wait += t.norm_wait;
  }
  if (n > 0)
    for (double* x : {&m.total, &m.compute, &m.tp, &m.pp, &m.bubble, &m.dp, &m.optimizer, &m.weight, &m.other, &m.cp,
                      &m.cp_attention, &m.gather, &m.ep, &m.ep_wait, &m.norm_wait})
      *x /= double(n);
  return m;
}

Means overall(const RehearsalData& d) {
  Means o;
  for (size_t r = 0; r < d.ranks.size(); ++r) {
    Means m = rank_means(d, r);
    o.total += m.total, o.compute += m.compute, o.tp += m.tp, o.pp += m.pp, o.bubble += m.bubble;
    o.dp += m.dp, o.optimizer += m.optimizer, o.weight += m.weight, o.other += m.other;
    o.cp += m.cp, o.cp_attention += m.cp_attention, o.gather += m.gather, o.ep += m.ep, o.ep_wait += m.ep_wait;
    o.norm_wait += m.norm_wait;
  }
  const double n = double(std::max<size_t>(1, d.ranks.size()));
  for (double* x : {&o.total, &o.compute, &o.tp, &o.pp, &o.bubble, &o.dp, &o.optimizer, &o.weight, &o.other, &o.cp,
                    &o.cp_attention, &o.gather, &o.ep, &o.ep_wait, &o.norm_wait})
    *x /= n;
  return o;
}

// As long as the formatted text is: a fixed buffer once cut the CP ring's line mid-word.
std::string fmt(const char* f, double x) {
  std::string b(size_t(std::snprintf(nullptr, 0, f, x)), '\0');
  std::snprintf(b.data(), b.size() + 1, f, x);
  return b;
}

double pct(double x, double total) { return total > 0 ? 100.0 * x / total : 0.0; }

// The rows of the share table, the same in the text, the JSON and the HTML page. The rows
// without `part_of` split the step with nothing left over: measured, "other" is the step less
// the phases timed; predicted, the planner's terms not shown above (an EP all-to-all), so
// each column adds to 100%. A row with `part_of` is a part of that row, counted there.
struct ShareRow {
  std::string key, label;
  double measured_s = 0;
  std::optional<double> predicted_s;
  std::string part_of;
};

std::vector<ShareRow> share_rows(const RehearsalData& d, const Means& o) {
  const auto& L = d.run.layout;
  const bool has = d.prediction.has_value();
  const Prediction p = d.prediction.value_or(Prediction{});
  auto pred = [&](double x) { return has ? std::optional<double>(x) : std::nullopt; };
  std::vector<ShareRow> rows;
  rows.push_back({"compute", "compute (+optimizer)", o.compute, pred(p.compute_s + p.optimizer_s), ""});
  if (d.run.exec.schedule == ScheduleKind::ZeroBubbleH1)  // ZB-H1's postponed weight gradients
    rows.push_back({"weight_grad", "  of which W passes", o.weight, std::nullopt, "compute"});
  rows.push_back({"tp", "TP collectives", o.tp, pred(p.tp_s), ""});
  if (L.cp > 1) rows.push_back({"cp_exchange", "CP ring exchange", o.cp, pred(p.cp_s), ""});
  if (L.ep > 1) {  // the collective with every rank present, against the planner's; apart, the wait for slower peers (the planner's ranks are even)
    rows.push_back({"ep_alltoall", "EP all-to-all", o.ep, pred(p.ep_s), ""});
    rows.push_back({"ep_wait", "EP wait (peers)", o.ep_wait, pred(p.ep_wait_s), ""});
  }
  rows.push_back({"pp", "PP transfers", o.pp, pred(p.pp_s), ""});
  rows.push_back({"bubble", "bubble idle", o.bubble, pred(p.bubble_s), ""});
  // The planner's bubble is the pipeline's fill and drain; at the step's end the drain shows as
  // the wait in the gradient norm's all-reduce, so that wait is counted there (and listed).
  rows.push_back({"norm_wait", "  of it in the norm all-reduce", o.norm_wait, std::nullopt, "bubble"});
  rows.push_back({"dp_exposed", "DP exposed", o.dp, pred(p.dp_s), ""});
  if (d.run.exec.zero >= 1 && L.dp > 1)  // waits on the weight all-gathers
    rows.push_back({"zero_gathers", "  of it ZeRO gathers", o.gather, pred(p.zero_gather_s), "dp_exposed"});
  double listed = 0;
  for (const auto& r : rows)
    if (r.part_of.empty() && r.predicted_s) listed += *r.predicted_s;
  rows.push_back({"other", "other (host work)", o.other, pred(p.step_s - listed), ""});
  return rows;
}

}  // namespace

std::string rehearsal_text(const RehearsalData& d) {
  std::string out;
  const auto& L = d.run.layout;
  const int64_t measured = int64_t(d.times.size()) - d.warmup;
  out += "\nRehearsal report: " + L.describe() + ", schedule " + to_string(d.run.exec.schedule) +
         ", " + std::to_string(d.run.exec.micro_batches(L.dp)) + " micro-batches of " +
         std::to_string(d.run.exec.micro_batch_size) + " per replica, ZeRO " + std::to_string(d.run.exec.zero) +
         (d.run.exec.sequence_parallel && L.tp > 1 ? ", sequence parallel" : "") + "\nmeans over steps " + std::to_string(d.warmup) + ".." + std::to_string(d.times.size() - 1) + " (" +
         std::to_string(measured) + " steps; earlier ones are warm-up), milliseconds per step\n";
  char line[512];
  std::snprintf(line, sizeof line, "%5s %9s %9s %9s %9s %9s %9s %9s %9s %11s %11s\n", "rank",
                L.cp > 1 ? "tp,cp,dp,pp" : "tp,dp,pp", "step",
                "compute", "tp-coll", "pp-xfer", "bubble", "dp-expos", "other", "alloc MiB", "rss MiB");
  out += line;
  for (size_t r = 0; r < d.ranks.size(); ++r) {
    Means m = rank_means(d, r);
    const auto& c = d.ranks[r].coords;
    std::string coords = std::to_string(c.tp()) + "," + (L.cp > 1 ? std::to_string(c[Dim::CP]) + "," : "") +
                         std::to_string(c.dp()) + "," + std::to_string(c.pp());
    std::snprintf(line, sizeof line, "%5zu %9s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.1f %11.1f\n", r,
                  coords.c_str(), m.total * 1e3, m.compute * 1e3, m.tp * 1e3, m.pp * 1e3, m.bubble * 1e3,
                  m.dp * 1e3, m.other * 1e3, d.ranks[r].allocated_bytes / (1 << 20),
                  d.ranks[r].peak_rss_bytes / (1 << 20));
    out += line;
  }
  out += "\nper step, mean over ranks (step = slowest rank), milliseconds\n";
  std::snprintf(line, sizeof line, "%5s %10s %9s %9s %9s %9s %9s %9s\n", "step", "loss", "step", "compute", "tp-coll",
                "pp-xfer", "bubble", "dp-expos");
  out += line;
  for (size_t s = 0; s < d.times.size(); ++s) {
    double mx = 0, c = 0, tp = 0, pp = 0, bu = 0, dp = 0;
    for (const auto& t : d.times[s]) {
      mx = std::max(mx, t.total), c += t.compute, tp += t.tp, pp += t.pp, bu += t.bubble, dp += t.dp_exposed;
    }
    const double n = double(std::max<size_t>(1, d.times[s].size()));
    std::snprintf(line, sizeof line, "%5zu %10.5f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f%s\n", s, d.losses.at(s), mx * 1e3,
                  c / n * 1e3, tp / n * 1e3, pp / n * 1e3, bu / n * 1e3, dp / n * 1e3,
                  int64_t(s) < d.warmup ? "  (warm-up)" : "");
    out += line;
  }
  Means o = overall(d);
  out += "\nshare of step time      measured";
  if (d.prediction) out += "   predicted";
  out += "\n";
  for (const ShareRow& r : share_rows(d, o)) {
    std::snprintf(line, sizeof line, "  %-20s %8.1f%%", r.label.c_str(), pct(r.measured_s, o.total));
    out += line;
    if (d.prediction) out += r.predicted_s ? fmt("  %8.1f%%", pct(*r.predicted_s, d.prediction->step_s)) : "         -";
    if (r.key == "weight_grad") out += fmt("  (weight-gradient halves of the backward, %.2f ms per step)", o.weight * 1e3);
    out += "\n";
    if (r.key == "cp_exchange")  // the KV blocks' wait left after the ring attention's blocks (in compute)
      out += "    (rank 0 sends " + std::to_string(d.cp_blocks) + " KV blocks per step, each " +
             fmt("%.3f ms on the wire (ring shift) = ", d.cp_block_s * 1e3) +
             fmt("%.2f ms, behind ", double(d.cp_blocks) * d.cp_block_s * 1e3) +
             fmt("%.2f ms of ring attention blocks, in compute; a wait beyond the wire is the cp ranks' skew)\n",
                 o.cp_attention * 1e3);
  }
  const Prediction p = d.prediction.value_or(Prediction{});
  out += "  step time            " + fmt("%8.2f ms", o.total * 1e3);
  if (d.prediction) out += fmt("  %8.2f ms", p.step_s * 1e3) + fmt("  (measured / predicted = %.2f)", o.total / p.step_s);
  out += "\n";
  double alloc = 0, rss = 0;
  for (const auto& r : d.ranks) alloc = std::max(alloc, r.allocated_bytes), rss = std::max(rss, r.peak_rss_bytes);
  out += "  peak memory per rank  " + fmt("%8.1f MiB allocated, ", alloc / (1 << 20)) + fmt("%.1f MiB resident", rss / (1 << 20));
  if (d.prediction) out += fmt("; predicted %.1f MiB (planner's memory model, fp32)", p.peak_memory_bytes / (1 << 20));
  out += "\n";
  out += "  pipeline message wire time (measured ping-pong): " + fmt("%.3f ms", d.pp_message_s * 1e3) +
         "; a receive wait beyond it counts as bubble\n";
  if (L.ep > 1) {
    out += "  EP all-to-all: from the last EP rank's entry to the last exit (every call's entry and exit, "
           "gathered after each step on clocks aligned at start-up to " +
           fmt("%.1f us", d.ep_clock_error_s * 1e6) + "); a call's time beyond it counts as EP wait\n";
    if (!d.ep_load_imbalance.empty()) {
      const auto [lo, hi] = std::minmax_element(d.ep_load_imbalance.begin(), d.ep_load_imbalance.end());
      out += "  EP load imbalance: the most loaded EP rank received " + fmt("%.3f", *lo) + ".." + fmt("%.3f", *hi) +
             " x the mean rows over the steps";
      if (d.prediction)
        out += "; the prediction takes " + fmt("%.3f", d.prediction->ep_load_imbalance) +
               (d.ep_load_imbalance_given ? " (--moe-load-imbalance)" : " (the median over the measured steps)") +
               ": its EP wait is (that - 1) x the experts' GEMMs at the balanced load, its all-to-alls that x the wire bytes";
      out += "\n";
    }
  }
  if (d.load) {
    out += "  machine load (rank 0's node, /proc/stat over the run): the ranks there " + d.load->describe() + "\n";
    if (d.load->under_load())
      out += "  measured under load: the times above include other processes' share of the cores\n";
  }
  if (d.prediction) {
    out += "prediction: planner on " + p.cluster + " (from " + p.cluster_source + ")\n";
    out += "  cost table (" + p.cost_source + "): " + p.cost + "\n";
    if (!p.note.empty()) out += "  note: " + p.note + "\n";
  } else {
    out += "prediction: none (" + d.prediction_missing + ")\n";
  }
  if (!d.straggler_rule.empty()) {
    out += "stragglers (" + d.straggler_rule + "): " + (d.stragglers.empty() ? "none\n" : "\n");
    for (const auto& x : d.stragglers) out += "  " + x + "\n";
  }
  return out;
}

nlohmann::json rehearsal_json(const RehearsalData& d) {
  using nlohmann::json;
  json j;
  j["layout"] = layout_json(d.run.layout);
  j["schedule"] = to_string(d.run.exec.schedule);
  j["zero"] = d.run.exec.zero;
  j["micro_batches"] = d.run.exec.micro_batches(d.run.layout.dp);
  j["warmup_steps"] = d.warmup;
  j["losses"] = d.losses;
  j["first_step"] = d.first_step;
  json val = json::array();
  for (const auto& [step, loss] : d.val_losses) val.push_back({{"step", step}, {"loss", loss}});
  j["val_losses"] = val;
  j["pp_message_wire_s"] = d.pp_message_s;
  j["cp_block_wire_s"] = d.cp_block_s;
  j["cp_blocks_per_step"] = d.cp_blocks;
  j["ep_clock_error_s"] = d.ep_clock_error_s;
  json steps = json::array();
  for (size_t s = 0; s < d.times.size(); ++s) {
    json ranks = json::array();
    for (size_t r = 0; r < d.times[s].size(); ++r) {
      const PhaseTimes& t = d.times[s][r];
      ranks.push_back({{"rank", r}, {"total_s", t.total}, {"compute_s", t.compute}, {"tp_s", t.tp},
                       {"pp_s", t.pp}, {"bubble_s", t.bubble}, {"dp_exposed_s", t.dp_exposed},
                       {"optimizer_s", t.optimizer}, {"weight_grad_s", t.weight}, {"other_s", t.other()},
                       {"cp_exchange_s", t.cp}, {"cp_attention_s", t.cp_attention}, {"zero_gather_s", t.zero_gather},
                       {"ep_alltoall_s", t.ep}, {"ep_wait_s", t.ep_wait},
                       {"norm_wait_s", t.norm_wait}});
    }
    steps.push_back({{"step", s}, {"loss", d.losses.at(s)}, {"ranks", ranks}});
  }
  j["steps"] = steps;
  json ranks = json::array();
  for (const auto& r : d.ranks)
  {
    json row = {{"rank", r.rank}, {"allocated_bytes", r.allocated_bytes}, {"peak_rss_bytes", r.peak_rss_bytes}};
    for (const Dimension& dim : dimensions())
      if (dim.dense) row[dim.name] = r.coords[dim.dim];  // the rank's coordinate
    ranks.push_back(row);
  }
  j["ranks"] = ranks;
  Means o = overall(d);
  j["measured"] = {{"step_s", o.total},
                   {"shares", {{"compute", o.compute / o.total}, {"tp", o.tp / o.total}, {"pp", o.pp / o.total},
                               {"bubble", o.bubble / o.total}, {"dp_exposed", o.dp / o.total},
                               {"other", o.other / o.total}, {"weight_grad", o.weight / o.total},
                               {"cp_exchange", o.cp / o.total}, {"zero_gathers", o.gather / o.total},
                               {"ep_alltoall", o.ep / o.total}, {"ep_wait", o.ep_wait / o.total}}}};
  if (!d.ep_load_imbalance.empty()) j["measured"]["ep_load_imbalance"] = d.ep_load_imbalance;  // per step
  if (d.load && d.load->known)
    j["machine_load"] = {{"wall_s", d.load->wall_s}, {"cores", d.load->cores}, {"threads", d.load->threads},
                         {"ranks_cpu_s", d.load->self_cpu_s}, {"others_cpu_s", d.load->others_cpu_s()},
                         {"cpu_share", d.load->cpu_share()}, {"other_cores_busy", d.load->other_cores_busy()},
                         {"measured_under_load", d.load->under_load()}};
  j["stragglers"] = {{"rule", d.straggler_rule.empty() ? json(nullptr) : json(d.straggler_rule)},
                     {"not_watched", d.straggler_off.empty() ? json(nullptr) : json(d.straggler_off)},
                     {"named", d.stragglers}};
  json rows = json::array();
  for (const ShareRow& r : share_rows(d, o)) {
    const double step = d.prediction ? d.prediction->step_s : 0;
    rows.push_back({{"key", r.key}, {"label", r.label}, {"measured", o.total > 0 ? r.measured_s / o.total : 0.0},
                    {"predicted", r.predicted_s && step > 0 ? json(*r.predicted_s / step) : json(nullptr)},
                    {"part_of", r.part_of.empty() ? json(nullptr) : json(r.part_of)}});
  }
  j["share_rows"] = rows;  // the text's rows; those without part_of add to 1 in each column
  if (d.prediction) {
    const Prediction& p = *d.prediction;
    json cost = json::object();
    for (const auto& [name, value] : p.cost_values) cost[name] = value;
    j["predicted"] = {{"cluster", p.cluster}, {"cluster_source", p.cluster_source}, {"note", p.note},
                      {"cost_source", p.cost_source}, {"cost", cost},
                      {"step_s", p.step_s}, {"peak_memory_bytes", p.peak_memory_bytes},
                      {"terms_s", {{"compute", p.compute_s}, {"optimizer", p.optimizer_s}, {"tp", p.tp_s},
                                   {"cp_exchange", p.cp_s}, {"pp", p.pp_s}, {"bubble", p.bubble_s},
                                   {"dp_exposed", p.dp_s}, {"zero_gathers", p.zero_gather_s}, {"ep_alltoall", p.ep_s},
                                   {"ep_wait", p.ep_wait_s}}},
                      {"ep_load_imbalance", p.ep_load_imbalance},
                      {"shares", {{"compute", (p.compute_s + p.optimizer_s) / p.step_s}, {"tp", p.tp_s / p.step_s},
                                  {"pp", p.pp_s / p.step_s}, {"bubble", p.bubble_s / p.step_s},
                                  {"dp_exposed", p.dp_s / p.step_s}, {"cp_exchange", p.cp_s / p.step_s},
                                  {"zero_gathers", p.zero_gather_s / p.step_s}, {"ep_alltoall", p.ep_s / p.step_s},
                                  {"ep_wait", p.ep_wait_s / p.step_s}}}};
  } else {
    j["predicted"] = nullptr;
    j["prediction_missing"] = d.prediction_missing;
  }
  return j;
}

}  // namespace trident
