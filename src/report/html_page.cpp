#include "report/html_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/dimensions.h"
#include "report/palette.h"
#include "report/pipeline_svg.h"
#include "report/xml_escape.h"

namespace trident {
namespace {

const char* kStyle = R"(
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:24px 32px;color:#222;background:#fff;max-width:1400px}
h1{font-size:22px;margin:0 0 8px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
#summary p{margin:2px 0;font-size:14px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:right} th{background:#f0f3f7}
td:first-child,th:first-child{text-align:left}
tr.best td{background:#eef7ee;font-weight:bold}
caption{caption-side:top;text-align:left;font-size:13px;color:#555;padding:2px 0}
svg{max-width:100%;height:auto}
.note{font-size:13px;color:#8a5a00}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
.zoom-controls{font-size:13px;margin:6px 0} .zoom-controls input{vertical-align:middle;width:260px;margin:0 14px 0 6px}
svg.window{cursor:grab}
)";

// The zoomable timeline window (pipeline_svg's zoomable drawing): the sliders, a drag or the
// page's #ID-zoom=K&ID-pan=P fragment set the window; the nested <svg id=ID> shows
// [from + pan x (span - span / K), + span / K] of the step by its viewBox, its texts scaled back
// to their size and each block label shown when its block is wide enough.
const char* kZoomScript = R"(
function tridentZoom(id) {
  const win = document.getElementById(id), zoom = document.getElementById(id + '-zoom'),
        pan = document.getElementById(id + '-pan'), shown = document.getElementById(id + '-range');
  const left = +win.dataset.left, width = +win.dataset.width, height = +win.dataset.height;
  const from = +win.dataset.fromMs, span = +win.dataset.spanMs;
  const texts = Array.from(win.querySelectorAll('text')), fine = Array.from(win.querySelectorAll('.fine'));
  function apply() {
    const k = Math.max(1, +zoom.value), w = width / k, a = (+pan.value / 1000) * (width - w);
    win.setAttribute('viewBox', (left + a) + ' 0 ' + w + ' ' + height);
    for (const t of texts) {
      const x = +t.getAttribute('x');
      t.setAttribute('transform', 'translate(' + x + ' 0) scale(' + (1 / k) + ' 1) translate(' + (-x) + ' 0)');
      if (t.dataset.w) t.style.display = +t.dataset.w * k >= +t.dataset.need ? '' : 'none';
    }
    for (const g of fine) g.style.display = k >= 4 ? '' : 'none';
    shown.textContent = 'showing ' + (from + span * a / width).toFixed(3) + ' - ' +
        (from + span * (a + w) / width).toFixed(3) + ' ms of ' + (from + span).toFixed(3) + ' ms (zoom ' + k.toFixed(1) + 'x)';
  }
  zoom.addEventListener('input', apply);
  pan.addEventListener('input', apply);
  let drag = null;
  win.addEventListener('pointerdown', e => { drag = {x: e.clientX, p: +pan.value}; win.setPointerCapture(e.pointerId); });
  win.addEventListener('pointerup', () => { drag = null; });
  win.addEventListener('pointermove', e => {
    if (!drag) return;
    const k = Math.max(1, +zoom.value), px = win.getBoundingClientRect().width / width;  // screen px per unit
    const room = width - width / k;
    if (room > 0) pan.value = drag.p - 1000 * (e.clientX - drag.x) / (px * k * room);
    apply();
  });
  apply();
  // A link to a window: the fragment moves the sliders, which then say so as a reader's move does.
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has(id + '-zoom')) zoom.value = hash.get(id + '-zoom');
  if (hash.has(id + '-pan')) pan.value = hash.get(id + '-pan');
  if (hash.has(id + '-zoom') || hash.has(id + '-pan')) zoom.dispatchEvent(new Event('input'));
}
)";

// A part's palette term: its own name, or the one the bars map it to (a rehearsal row's label).
std::string term_of(const HtmlBars& b, const std::string& name) {
  const auto it = b.terms.find(name);
  return it == b.terms.end() ? name : it->second;
}

std::string table_html(const HtmlTable& t, const std::string& id, int highlight_row = -1) {
  std::string s = fmt::format("<table id=\"{}\">", id);
  if (!t.caption.empty()) s += "<caption>" + xml_escape(t.caption) + "</caption>";
  s += "<tr>";
  for (const auto& h : t.header) s += "<th>" + xml_escape(h) + "</th>";
  s += "</tr>\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    s += int(r) == highlight_row ? "<tr class=\"best\">" : "<tr>";
    for (const auto& c : t.rows[r]) s += "<td>" + xml_escape(c) + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string bars_svg(const HtmlBars& b, const std::string& id) {
  const int label_w = 190, plot_w = 820, bar_h = 22, gap = 8, top = 8, axis = 30;
  double max_total = b.limit;
  for (const auto& bar : b.bars) {
    double t = 0;
    for (const auto& p : bar.parts) t += std::max(0.0, p.second);
    max_total = std::max(max_total, t);
  }
  if (max_total <= 0) max_total = 1;
  const double scale = plot_w / (max_total * 1.08);
  const int height = top + int(b.bars.size()) * (bar_h + gap) + axis;
  const int width = label_w + plot_w + 120;
  std::string s = fmt::format("<svg id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                              "viewBox=\"0 0 {} {}\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
                              id, width, height, width, height);
  for (size_t i = 0; i < b.bars.size(); ++i) {
    const auto& bar = b.bars[i];
    const int y = top + int(i) * (bar_h + gap);
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n", label_w - 8,
                     y + bar_h / 2 + 4, xml_escape(bar.label));
    double x = label_w, total = 0;
    for (const auto& [name, value] : bar.parts) {
      if (value <= 0) continue;
      const double w = value * scale;
      s += fmt::format("<rect class=\"part\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
                       "<title>{}: {:.4g} {}</title></rect>\n",
                       x, y, w, bar_h, term_colour(term_of(b, name)).fill, xml_escape(name), value, xml_escape(b.unit));
      if (w > 46)
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" fill=\"{}\" text-anchor=\"middle\">{:.3g}</text>\n",
                         x + w / 2, y + bar_h / 2 + 4, term_colour(term_of(b, name)).ink, value);
      x += w;
      total += value;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"12\">{:.4g} {}</text>\n", x + 6, y + bar_h / 2 + 4, total,
                     xml_escape(b.unit));
  }
  const int ay = top + int(b.bars.size()) * (bar_h + gap);
  if (b.limit > 0) {
    const double lx = label_w + b.limit * scale;
    s += fmt::format("<line class=\"limit\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#c00\" stroke-width=\"2\" "
                     "stroke-dasharray=\"5,3\"/>\n",
                     lx, top - 4, lx, ay);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"12\" fill=\"#c00\" text-anchor=\"middle\">{}</text>\n", lx,
                     ay + 16, xml_escape(b.limit_label));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">0</text>\n", label_w, ay + 16);
  s += "</svg>\n";
  // Legend of the part names, in the order they first appear.
  std::vector<std::string> names;
  for (const auto& bar : b.bars)
    for (const auto& p : bar.parts)
      if (std::find(names.begin(), names.end(), p.first) == names.end()) names.push_back(p.first);
  s += "<div class=\"legend\">";
  for (const auto& n : names)
    s += fmt::format("<span data-term=\"{}\"><i style=\"background:{}\"></i>{}</span>", xml_escape(term_of(b, n)),
                     term_colour(term_of(b, n)).fill, xml_escape(n));
  return s + "</div>\n";
}

// The curve's axes span every series' points (the y axis padded 5%, so no line runs along an
// edge); the svg carries that span and the plot's box (data-*), from which a reader (or a test)
// turns any point back into its values.
std::string curve_svg(const HtmlCurve& c, const std::string& id) {
  const int left = 70, right = 20, top = 12, bottom = 44, plot_w = 900, plot_h = 260;
  const int width = left + plot_w + right, height = top + plot_h + bottom;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& sr : c.series)
    for (const auto& [x, y] : sr.points) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // no point at all
  if (x1 - x0 <= 0) x0 -= 0.5, x1 += 0.5;
  const double pad = y1 - y0 > 0 ? 0.05 * (y1 - y0) : std::max(0.05 * std::fabs(y0), 0.5);
  y0 -= pad, y1 += pad;
  auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * plot_w; };
  auto Y = [&](double y) { return top + (y1 - y) / (y1 - y0) * plot_h; };
  std::string s = fmt::format("<svg id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                              "viewBox=\"0 0 {} {}\" font-family=\"DejaVu Sans, Arial, sans-serif\" data-x-min=\"{:.17g}\" "
                              "data-x-max=\"{:.17g}\" data-y-min=\"{:.17g}\" data-y-max=\"{:.17g}\" data-plot=\"{} {} {} {}\">\n",
                              id, width, height, width, height, x0, x1, y0, y1, left, top, plot_w, plot_h);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#bbb\"/>\n", left, top,
                   plot_w, plot_h);
  const double xs = std::max(1.0, nice_tick_step(x1 - x0, 8)), ys = nice_tick_step(y1 - y0, 6);
  for (double t = std::ceil(x0 / xs) * xs; t <= x1 + 1e-9 * xs; t += xs)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#000\" stroke-opacity=\"0.08\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" font-size=\"11\" text-anchor=\"middle\">{4:g}</text>\n",
                     X(t), top, top + plot_h, top + plot_h + 16, t);
  for (double t = std::ceil(y0 / ys) * ys; t <= y1 + 1e-9 * ys; t += ys)
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#000\" stroke-opacity=\"0.08\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" font-size=\"11\" text-anchor=\"end\">{5:.4g}</text>\n",
                     left, Y(t), left + plot_w, left - 6, Y(t) + 4, t);
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2,
                   height - 8, xml_escape(c.x_label));
  s += fmt::format("<text x=\"14\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>\n",
                   top + plot_h / 2, top + plot_h / 2, xml_escape(c.y_label));
  for (const auto& sr : c.series) {
    const std::string& colour = term_colour(sr.term).fill;
    std::string pts;
    for (const auto& [x, y] : sr.points) pts += fmt::format("{:.2f},{:.2f} ", X(x), Y(y));
    s += fmt::format("<polyline class=\"series\" data-term=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
                     "stroke-width=\"2\"/>\n",
                     xml_escape(sr.term), pts, colour);
    if (sr.markers || sr.points.size() == 1)
      for (const auto& [x, y] : sr.points)
        s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3.5\" fill=\"{}\"><title>{} {:g}: {:.4f}</title></circle>\n",
                         X(x), Y(y), colour, xml_escape(c.x_label), x, y);
  }
  s += "</svg>\n<div class=\"legend\">";
  for (const auto& sr : c.series)
    s += fmt::format("<span data-term=\"{}\"><i style=\"background:{}\"></i>{}</span>", xml_escape(sr.term),
                     term_colour(sr.term).fill, xml_escape(sr.name));
  return s + "</div>\n";
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

}  // namespace

std::string html_page(const HtmlPage& p) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  s += "<title>" + xml_escape(p.title) + "</title>\n<style>" + std::string(kStyle) + "</style></head>\n<body>\n";
  s += "<h1 id=\"title\">" + xml_escape(p.title) + "</h1>\n<div id=\"summary\">";
  for (const auto& line : p.summary) s += "<p>" + xml_escape(line) + "</p>";
  s += "</div>\n";
  for (const auto& sec : p.sections) {
    s += "<h2>" + xml_escape(sec.heading) + "</h2>\n<div id=\"" + xml_escape(sec.id) + "\">";
    for (const auto& line : sec.lines) s += "<p>" + xml_escape(line) + "</p>";
    if (sec.table) s += table_html(*sec.table, sec.id + "-table");
    s += "</div>\n";
  }
  if (p.candidates) {
    s += "<h2>Candidate layouts</h2>\n" + table_html(*p.candidates, "candidates", 0);
  }
  if (p.findings) s += "<h2>Findings</h2>\n" + table_html(*p.findings, "findings");
  if (p.memory) {
    s += "<h2>Memory per GPU, by pipeline stage</h2>\n<div id=\"memory\">";
    if (!p.memory->caption.empty()) s += "<p>" + xml_escape(p.memory->caption) + "</p>";
    s += bars_svg(*p.memory, "memory-bars") + "</div>\n";
  }
  if (p.time_breakdown) {
    s += "<h2>Step time breakdown</h2>\n<div id=\"time-breakdown\">";
    if (!p.time_breakdown->caption.empty()) s += "<p>" + xml_escape(p.time_breakdown->caption) + "</p>";
    s += bars_svg(*p.time_breakdown, "time-bars");
    if (p.time_table) s += table_html(*p.time_table, "time-table");
    s += "</div>\n";
  }
  if (p.topology) s += "<h2>Strategy &harr; topology</h2>\n" + table_html(*p.topology, "topology");
  if (p.timeline) {
    SvgOptions o;
    o.width_px = 1300;
    s += "<h2>Pipeline timeline</h2>\n<div id=\"timeline\">\n" + pipeline_svg(*p.timeline, o);
    if (p.timeline_zoom_to_s > 0) {
      // The whole step once more, in a window the reader zooms and moves; it opens on [0, zoom_to].
      SvgOptions z = o;
      z.id_prefix = "zoom-", z.zoomable = true;
      const double opening = std::max(1.0, p.timeline->end_s() / p.timeline_zoom_to_s);
      s += "<p>" + xml_escape(p.timeline_zoom_caption) + "</p>\n";
      s += fmt::format("<div id=\"timeline-zoom\"><div class=\"zoom-controls\"><label>zoom<input type=\"range\" "
                       "id=\"zoom-window-zoom\" min=\"1\" max=\"{:.1f}\" step=\"0.1\" value=\"{:.1f}\"></label><label>"
                       "position<input type=\"range\" id=\"zoom-window-pan\" min=\"0\" max=\"1000\" step=\"1\" "
                       "value=\"0\"></label><span id=\"zoom-window-range\"></span></div>\n",
                       std::max(8.0, 4 * opening), opening);
      s += pipeline_svg(*p.timeline, z) + "<script>" + kZoomScript + "tridentZoom('zoom-window');</script></div>\n";
    }
    s += "</div>\n";
  }
  if (p.loss_curve) {
    s += "<h2>Loss</h2>\n<div id=\"loss-curve\">";
    if (!p.loss_curve->caption.empty()) s += "<p>" + xml_escape(p.loss_curve->caption) + "</p>";
    s += curve_svg(*p.loss_curve, "loss-svg") + "</div>\n";
  }
  if (!p.rehearsal.empty()) {
    s += "<h2>Rehearsal: measured beside predicted</h2>\n<div id=\"rehearsal\">";
    HtmlBars bars;
    bars.unit = "%";
    HtmlBar measured{"measured", {}}, predicted{"predicted", {}};
    bool any_prediction = false;
    HtmlTable t;
    t.header = {"share of the step", "measured", "predicted"};
    for (const auto& sh : p.rehearsal) {
      t.rows.push_back({sh.name, pct(sh.measured), sh.predicted ? pct(*sh.predicted) : "-"});
      if (sh.part) continue;  // counted in the row it is part of: the bars add to 100%
      if (!sh.key.empty()) bars.terms[sh.name] = sh.key;
      measured.parts.push_back({sh.name, 100 * sh.measured});
      if (sh.predicted) {
        predicted.parts.push_back({sh.name, 100 * *sh.predicted});
        any_prediction = true;
      }
    }
    bars.bars.push_back(measured);
    if (any_prediction) bars.bars.push_back(predicted);
    s += bars_svg(bars, "rehearsal-bars") + table_html(t, "rehearsal-shares");
    if (p.rehearsal_table) s += table_html(*p.rehearsal_table, "rehearsal-ranks");
    s += "</div>\n";
  }
  if (!p.notes.empty()) {
    s += "<div id=\"notes\">";
    for (const auto& n : p.notes) s += "<p class=\"note\">" + xml_escape(n) + "</p>";
    s += "</div>\n";
  }
  s += "<p style=\"font-size:11px;color:#888\">Written by trident. Every figure is in the command's text and JSON "
       "output with its inputs.</p>\n</body></html>\n";
  return s;
}

HtmlPage rehearsal_page(const std::string& text) {
  using nlohmann::json;
  const json j = json::parse(text);
  HtmlPage p;
  const auto& l = j.at("layout");
  p.title = fmt::format("Rehearsal: {}, schedule {}", layout_from_json(l).describe(),
                        j.value("schedule", std::string("?")));
  const auto& measured = j.at("measured");
  p.summary.push_back(fmt::format("measured step {:.4g} s (mean over ranks and the steps after {} warm-up steps)",
                                  measured.value("step_s", 0.0), j.value("warmup_steps", 0)));
  const bool predicted = j.contains("predicted") && !j["predicted"].is_null();
  if (predicted)
    p.summary.push_back(fmt::format("predicted step {:.4g} s on {} ({})", j["predicted"].value("step_s", 0.0),
                                    j["predicted"].value("cluster", std::string()),
                                    j["predicted"].value("cluster_source", std::string())));
  else p.notes.push_back("no prediction: " + j.value("prediction_missing", std::string("not asked for")));
  if (j.contains("losses") && !j["losses"].empty())
    p.summary.push_back(fmt::format("loss {:.4f} -> {:.4f} over {} steps", j["losses"].front().get<double>(),
                                    j["losses"].back().get<double>(), j["losses"].size()));
  // The loss curve: each step's training loss (rank 0's, as the log prints it) and each
  // evaluation's validation loss, steps counted from 1 (a resumed run's from the checkpoint's).
  if (j.contains("losses") && !j["losses"].empty()) {
    HtmlCurve c;
    c.x_label = "step", c.y_label = "loss";
    const int64_t first = j.value("first_step", int64_t(0));
    HtmlSeries train{"training loss (per step)", "loss", {}, false};
    for (size_t i = 0; i < j["losses"].size(); ++i)
      train.points.push_back({double(first + int64_t(i) + 1), j["losses"][i].get<double>()});
    c.series.push_back(train);
    if (j.contains("val_losses") && !j["val_losses"].empty()) {
      HtmlSeries val{"validation loss", "val_loss", {}, true};
      for (const auto& v : j["val_losses"]) val.points.push_back({v.value("step", 0.0), v.value("loss", 0.0)});
      c.series.push_back(val);
    }
    c.caption = fmt::format("{} steps ({} - {}){}", j["losses"].size(), first + 1, first + int64_t(j["losses"].size()),
                            c.series.size() > 1 ? fmt::format(", {} evaluations", c.series[1].points.size()) : "");
    p.loss_curve = c;
  }
  // The text report's rows (share_rows): the parts of the step, each column adding to 100%.
  for (const auto& r : j.at("share_rows")) {
    HtmlShare sh{r.value("label", std::string()), r.value("measured", 0.0), std::nullopt, !r["part_of"].is_null(),
                 r.value("key", std::string())};
    if (r.contains("predicted") && !r["predicted"].is_null()) sh.predicted = r["predicted"].get<double>();
    p.rehearsal.push_back(sh);
  }
  if (j.contains("ranks")) {
    HtmlTable t;
    t.caption = "memory per rank";
    // A column per dense dimension (the rank's coordinate), from the table: none can be left out.
    t.header = {"rank"};
    for (const Dimension& d : dimensions())
      if (d.dense) t.header.push_back(d.name);
    t.header.insert(t.header.end(), {"allocated MiB", "peak resident MiB"});
    for (const auto& r : j["ranks"]) {
      std::vector<std::string> row = {std::to_string(r.value("rank", 0))};
      for (const Dimension& d : dimensions())
        if (d.dense) row.push_back(std::to_string(r.value(d.name, 0)));
      row.push_back(fmt::format("{:.1f}", r.value("allocated_bytes", 0.0) / 1048576.0));
      row.push_back(fmt::format("{:.1f}", r.value("peak_rss_bytes", 0.0) / 1048576.0));
      t.rows.push_back(row);
    }
    p.rehearsal_table = t;
  }
  return p;
}

}  // namespace trident
