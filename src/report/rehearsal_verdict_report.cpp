// The verdict of a rehearsal as text, JSON and HTML (see rehearsal_verdict_report.h).
#include "report/rehearsal_verdict_report.h"

#include <utility>

#include <fmt/format.h>

namespace trident {

std::string verdict_text(const Verdict& v) {
  std::string out = fmt::format("\nVerdict: medians over the {} steps after {} warm-up step(s), milliseconds per step\n",
                                v.steps, v.warmup);
  out += fmt::format("  {:<20} {:>10} {:>19} {:>10} {:>8}  {}\n", "term", "measured", "spread (low..high)", "predicted",
                     "ratio", "");
  for (const auto& t : v.terms) {
    const std::string pred = t.predicted_s ? fmt::format("{:.2f}", *t.predicted_s * 1e3) : "-";
    const std::string ratio =
        t.predicted_s && *t.predicted_s > 0 ? fmt::format("{:.2f}", t.median_s / *t.predicted_s) : "-";
    const std::string mark = !t.note.empty() ? t.note : !t.predicted_s ? "" : t.holds ? "holds" : "MISSES";
    out += fmt::format("  {:<20} {:>10.2f} {:>9.2f}..{:<9.2f} {:>10} {:>8}  {}\n", t.label, t.median_s * 1e3,
                       t.low_s * 1e3, t.high_s * 1e3, pred, ratio, mark);
  }
  auto load = [](const MachineLoad& l) {
    return l.known ? fmt::format("other processes kept {:.2f} of {} cores busy (over {:.2f} s)\n", l.other_cores_busy(),
                                 l.cores, l.wall_s)
                   : std::string("unknown (no /proc/stat)\n");
  };
  if (v.load_start) out += "  machine load just before the run: " + load(*v.load_start);
  if (v.load_end) out += "  machine load just after the run:  " + load(*v.load_end);
  out += v.sentence + "\n";
  for (const auto& l : {v.load_start, v.load_end})
    if (l && l->known && l->other_cores_busy() > 0.5 * l->cores) {
      out += fmt::format("Measured under load: other processes kept {:.2f} of the {} cores busy, and every wait on a "
                         "peer (collectives, bubble) grows with their share.\n", l->other_cores_busy(), l->cores);
      break;
    }
  return out;
}

HtmlSection verdict_section(const Verdict& v, const std::string& id, const std::string& heading) {
  HtmlSection sec{id, heading, {v.sentence}, HtmlTable{}};
  sec.table->header = {"term", "measured (median), ms", "spread, ms", "predicted, ms", "ratio", ""};
  sec.table->caption = fmt::format("medians over the {} steps after {} warm-up step(s)", v.steps, v.warmup);
  for (const auto& t : v.terms)
    sec.table->rows.push_back(
        {t.label, fmt::format("{:.2f}", t.median_s * 1e3), fmt::format("{:.2f} .. {:.2f}", t.low_s * 1e3, t.high_s * 1e3),
         t.predicted_s ? fmt::format("{:.2f}", *t.predicted_s * 1e3) : "-",
         t.predicted_s && *t.predicted_s > 0 ? fmt::format("{:.2f}", t.median_s / *t.predicted_s) : "-",
         !t.note.empty() ? t.note : !t.predicted_s ? "" : t.holds ? "holds" : "misses"});
  for (const auto& [name, l] : {std::pair{"just before", v.load_start}, std::pair{"just after", v.load_end}})
    if (l && l->known)
      sec.lines.push_back(fmt::format("machine load {} the run: other processes kept {:.2f} of {} cores busy", name,
                                      l->other_cores_busy(), l->cores));
  return sec;
}

nlohmann::json verdict_json(const Verdict& v) {
  using nlohmann::json;
  json terms = json::array();
  for (const auto& t : v.terms)
    terms.push_back({{"key", t.key}, {"label", t.label}, {"measured_median_s", t.median_s}, {"measured_low_s", t.low_s},
                     {"measured_high_s", t.high_s},
                     {"predicted_s", t.predicted_s ? json(*t.predicted_s) : json(nullptr)},
                     {"holds", t.predicted_s && t.exercised ? json(t.holds) : json(nullptr)},
                     {"note", t.note.empty() ? json(nullptr) : json(t.note)}});
  auto load = [](const std::optional<MachineLoad>& l) -> json {
    if (!l || !l->known) return nullptr;
    return {{"wall_s", l->wall_s}, {"cores", l->cores}, {"other_cores_busy", l->other_cores_busy()}};
  };
  return {{"measured_steps", v.steps}, {"warmup_steps", v.warmup}, {"tolerance", v.tolerance},
          {"small_term_floor_of_step", 0.05}, {"holds", v.predicted ? json(v.holds) : json(nullptr)},
          {"sentence", v.sentence}, {"terms", terms}, {"load_start", load(v.load_start)}, {"load_end", load(v.load_end)}};
}

std::string tp_across_text(const TpAcross& c, const std::string& inside_order, const std::string& across_order) {
  std::string out = fmt::format("\nTP inside the hosts (order {}) against TP across them (order {}), medians in ms\n",
                                inside_order, across_order);
  out += fmt::format("  {:<20} {:>9} {:>9} {:>9}   {:>9} {:>9} {:>9}\n", "", "inside", "across", "factor",
                     "pred. in", "pred. ac", "factor");
  for (const auto& r : c.rows)
    out += fmt::format("  {:<20} {:>9.2f} {:>9.2f} {:>8.2f}x   {:>9.2f} {:>9.2f} {:>8.2f}x\n", r.label, r.inside_s * 1e3,
                       r.across_s * 1e3, r.measured_factor(), r.predicted_inside_s * 1e3, r.predicted_across_s * 1e3,
                       r.predicted_factor());
  return out + c.sentence + "\n";
}

HtmlSection tp_across_section(const TpAcross& c, const std::string& inside_order, const std::string& across_order) {
  HtmlSection sec{"tp-across", "TP inside the hosts (" + inside_order + ") against TP across them (" + across_order + ")",
                  {c.sentence}, HtmlTable{}};
  sec.table->header = {"median, ms", "inside", "across", "factor", "predicted inside", "predicted across", "factor"};
  for (const auto& r : c.rows)
    sec.table->rows.push_back({r.label, fmt::format("{:.2f}", r.inside_s * 1e3), fmt::format("{:.2f}", r.across_s * 1e3),
                               fmt::format("{:.2f}x", r.measured_factor()), fmt::format("{:.2f}", r.predicted_inside_s * 1e3),
                               fmt::format("{:.2f}", r.predicted_across_s * 1e3), fmt::format("{:.2f}x", r.predicted_factor())});
  return sec;
}

nlohmann::json tp_across_json(const TpAcross& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows)
    rows.push_back({{"label", r.label}, {"inside_s", r.inside_s}, {"across_s", r.across_s},
                    {"predicted_inside_s", r.predicted_inside_s}, {"predicted_across_s", r.predicted_across_s},
                    {"measured_factor", r.measured_factor()}, {"predicted_factor", r.predicted_factor()}});
  return {{"rows", rows}, {"tolerance", c.tolerance}, {"holds", c.holds}, {"sentence", c.sentence}};
}

}  // namespace trident
