#include "report/rehearsal_report.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/dimensions.h"
#include "core/step_terms.h"

namespace trident {

namespace {

// Means of the phase times (every term's field, the step's total) and of what is left of each step.
struct Means {
  PhaseTimes t;
  double other = 0;
};

void add(Means& to, const PhaseTimes& t, double other) {
  for (const StepTerm& term : step_time_terms()) to.t.*term.measured += t.*term.measured;
  to.t.total += t.total, to.other += other;
}

void divide(Means& m, double n) {
  for (const StepTerm& term : step_time_terms()) m.t.*term.measured /= n;
  m.t.total /= n, m.other /= n;
}

Means rank_means(const RehearsalData& d, size_t rank) {
  Means m;
  int64_t n = 0;
  for (size_t s = size_t(d.warmup); s < d.times.size(); ++s, ++n) add(m, d.times[s][rank], d.times[s][rank].other());
  if (n > 0) divide(m, double(n));
  return m;
}

Means overall(const RehearsalData& d) {
  Means o;
  for (size_t r = 0; r < d.ranks.size(); ++r) {
    const Means m = rank_means(d, r);
    add(o, m.t, m.other);
  }
  divide(o, double(std::max<size_t>(1, d.ranks.size())));
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

// The planner's value of a term, with the terms the runtime times inside it (compute's optimizer).
double predicted_with_inside(const Prediction& p, const StepTerm& term) {
  double x = p.time.*term.planned;
  for (const StepTerm& in : step_time_terms())
    if (in.timed_inside && std::string(in.timed_inside) == term.key) x += p.time.*in.planned;
  return x;
}

ShareRow share_row(const StepTerm& term, const RehearsalData& d, const Means& o) {
  std::optional<double> predicted;
  if (d.prediction && term.planned) predicted = predicted_with_inside(*d.prediction, term);
  return {term.share_key, term.share_label, o.t.*term.measured, predicted,
          term.part_of ? step_time_term(term.part_of)->share_key : ""};
}

bool listed(const StepTerm& term, const RunSpec& run) { return term.share_label && (!term.shown || term.shown(run)); }

// The terms of the step table (core/step_terms.h) in its order, each followed by its details.
std::vector<ShareRow> share_rows(const RehearsalData& d, const Means& o) {
  std::vector<ShareRow> rows;
  for (const StepTerm& term : step_time_terms()) {
    if (term.part_of || !listed(term, d.run)) continue;
    rows.push_back(share_row(term, d, o));
    for (const StepTerm& detail : step_time_terms())
      if (detail.part_of && std::string(detail.part_of) == term.key && listed(detail, d.run))
        rows.push_back(share_row(detail, d, o));
  }
  double sum = 0;
  for (const auto& r : rows)
    if (r.part_of.empty() && r.predicted_s) sum += *r.predicted_s;
  const double step = d.prediction ? d.prediction->step_s : 0;
  rows.push_back({"other", "other (host work)", o.other, d.prediction ? std::optional<double>(step - sum) : std::nullopt, ""});
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
                  coords.c_str(), m.t.total * 1e3, m.t.compute * 1e3, m.t.tp * 1e3, m.t.pp * 1e3,
                  m.t.bubble * 1e3, m.t.dp_exposed * 1e3, m.other * 1e3, d.ranks[r].allocated_bytes / (1 << 20),
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
    std::snprintf(line, sizeof line, "  %-20s %8.1f%%", r.label.c_str(), pct(r.measured_s, o.t.total));
    out += line;
    if (d.prediction) out += r.predicted_s ? fmt("  %8.1f%%", pct(*r.predicted_s, d.prediction->step_s)) : "         -";
    if (r.key == "weight_grad") out += fmt("  (weight-gradient halves of the backward, %.2f ms per step)", o.t.weight * 1e3);
    out += "\n";
    if (r.key == "cp_exchange")  // the KV blocks' wait left after the ring attention's blocks (in compute)
      out += "    (rank 0 sends " + std::to_string(d.cp_blocks) + " KV blocks per step, each " +
             fmt("%.3f ms on the wire (ring shift) = ", d.cp_block_s * 1e3) +
             fmt("%.2f ms, behind ", double(d.cp_blocks) * d.cp_block_s * 1e3) +
             fmt("%.2f ms of ring attention blocks, in compute; a wait beyond the wire is the cp ranks' skew)\n",
                 o.t.cp_attention * 1e3);
  }
  const Prediction p = d.prediction.value_or(Prediction{});
  out += "  step time            " + fmt("%8.2f ms", o.t.total * 1e3);
  if (d.prediction) out += fmt("  %8.2f ms", p.step_s * 1e3) + fmt("  (measured / predicted = %.2f)", o.t.total / p.step_s);
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
      json rank = {{"rank", r}, {"total_s", t.total}, {"other_s", t.other()}};
      for (const StepTerm& term : step_time_terms()) rank[term.phase_key] = t.*term.measured;
      ranks.push_back(rank);
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
  json measured_shares = {{"other", o.other / o.t.total}};
  for (const StepTerm& term : step_time_terms())
    // The rows the share table can list; its norm-wait row is in share_rows only.
    if (term.share_label && std::string(term.key) != "norm_wait")
      measured_shares[term.share_key] = o.t.*term.measured / o.t.total;
  j["measured"] = {{"step_s", o.t.total}, {"shares", measured_shares}};
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
    rows.push_back({{"key", r.key}, {"label", r.label}, {"measured", o.t.total > 0 ? r.measured_s / o.t.total : 0.0},
                    {"predicted", r.predicted_s && step > 0 ? json(*r.predicted_s / step) : json(nullptr)},
                    {"part_of", r.part_of.empty() ? json(nullptr) : json(r.part_of)}});
  }
  j["share_rows"] = rows;  // the text's rows; those without part_of add to 1 in each column
  if (d.prediction) {
    const Prediction& p = *d.prediction;
    json cost = json::object();
    for (const auto& [name, value] : p.cost_values) cost[name] = value;
    json terms = json::object(), shares = json::object();
    for (const StepTerm& term : step_time_terms())
      if (term.planned) {
        terms[term.share_key] = p.time.*term.planned;
        // A term timed inside another is in that one's share (the optimizer in compute's).
        if (!term.timed_inside) shares[term.share_key] = predicted_with_inside(p, term) / p.step_s;
      }
    j["predicted"] = {{"cluster", p.cluster}, {"cluster_source", p.cluster_source}, {"note", p.note},
                      {"cost_source", p.cost_source}, {"cost", cost},
                      {"step_s", p.step_s}, {"peak_memory_bytes", p.peak_memory_bytes},
                      {"terms_s", terms}, {"ep_load_imbalance", p.ep_load_imbalance}, {"shares", shares}};
  } else {
    j["predicted"] = nullptr;
    j["prediction_missing"] = d.prediction_missing;
  }
  return j;
}

}  // namespace trident
