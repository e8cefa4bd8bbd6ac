#include "report/pipeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/output_path.h"
#include "report/xml_escape.h"

namespace trident {
namespace {

// Fill colour of a block: hue by kind, lighter for later chunks, alternating by micro-batch so
// neighbours stay apart. Text colour chosen for contrast.
struct Paint {
  std::string fill;
  std::string text;
};

Paint paint(const TimelineBlock& b) {
  int hue = 0, sat = 0;
  double light = 45;
  if (b.kind == "F") hue = 212, sat = 72, light = 44;
  else if (b.kind == "B") hue = 140, sat = 55, light = 36;
  else if (b.kind == "W") hue = 33, sat = 90, light = 48;
  else if (b.kind == "send" || b.kind == "recv") return {"#d62728", "#fff"};
  else if (b.kind == "dp") return {"#8e6cc0", "#fff"};
  else if (b.kind == "gather") return {"#b39ddb", "#000"};
  else if (b.kind == "emb") return {"#8c564b", "#fff"};
  else if (b.kind == "opt") return {"#444444", "#fff"};
  else return {"#999999", "#000"};
  // Chunks of an interleaved schedule: the hue turns and the shade steps, so v = 2..8 chunks stay
  // apart instead of merging into one barcode.
  if (b.chunk > 0) {
    hue += (b.kind == "F" ? 22 : -22) * (b.chunk % 4);
    light += 12.0 * ((b.chunk / 4) % 3);
  }
  if (b.micro_batch >= 0 && b.micro_batch % 2 == 1) light += 7;
  light = std::min(light, 85.0);
  return {fmt::format("hsl({},{}%,{:.0f}%)", hue, sat, light), light > 60 ? "#000" : "#fff"};
}

std::string format_time(double t, double unit, const char* suffix) {
  const double x = t / unit;
  if (std::fabs(x - std::round(x)) < 1e-9) return fmt::format("{:.0f} {}", x, suffix);
  return fmt::format("{:g} {}", x, suffix);
}

}  // namespace

double nice_tick_step(double span, int ticks) {
  if (span <= 0 || ticks <= 0) return 1;
  const double raw = span / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * mag >= raw) return f * mag;
  return 10 * mag;
}

double compute_window_end(const Timeline& tl, int64_t row, int n) {
  std::vector<double> ends;
  for (const auto& b : tl.blocks)
    if (b.row == row && b.lane == 0 && (b.kind == "F" || b.kind == "B" || b.kind == "W")) ends.push_back(b.end_s);
  if (n <= 0 || int(ends.size()) < n) return 0;
  std::nth_element(ends.begin(), ends.begin() + (n - 1), ends.end());
  return ends[size_t(n - 1)];
}

std::string pipeline_svg(const Timeline& tl, const SvgOptions& opt) {
  const double step_end = std::max(tl.end_s(), 1e-12);
  const double from = std::clamp(opt.from_s, 0.0, step_end);
  const double to = opt.to_s > from ? std::min(opt.to_s, step_end) : step_end;
  const double end = std::max(to - from, 1e-12);  // the span drawn
  // Row names are measured (about 0.62 em per character at 12 px), so "stage 7  ranks 12288-12295"
  // is never clipped.
  size_t longest = 0;
  for (const auto& r : tl.rows) longest = std::max(longest, r.size());
  const int left = std::max(120, int(7.6 * double(longest)) + 20), right = 24, top = 92, axis = 46;
  const int rows = int(tl.rows.size());
  const int rh = opt.row_height_px, lane_h = 6, band_h = rh - lane_h - 8;
  const int width = std::max(opt.width_px, left + 400), height = top + rows * rh + axis;
  const double plot_w = width - left - right;
  const double scale = plot_w / end;
  auto X = [&](double t) { return left + (t - from) * scale; };

  std::string s;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
      width, height, width, height);
  s += "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/></pattern></defs>\n";
  s += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", width, height);
  s += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"17\" font-weight=\"bold\">{}</text>\n", 12, xml_escape(tl.title));
  s += fmt::format("<text x=\"{}\" y=\"46\" font-size=\"12\" fill=\"#333\">{}</text>\n", 12, xml_escape(tl.subtitle));

  // Legend.
  struct Key {
    const char* kind;
    const char* text;
  };
  const Key keys[] = {{"F", "forward"}, {"B", "backward (input grad for ZB)"}, {"W", "weight grad"},
                      {"send", "pipeline send / wait for transfer"}, {"dp", "DP reduce (bucket)"},
                      {"emb", "embedding sync"}, {"opt", "optimizer"}, {"gather", "ZeRO all-gather"}};
  double lx = 12;
  for (const Key& k : keys) {
    TimelineBlock b;
    b.kind = k.kind;
    s += fmt::format("<rect x=\"{:.1f}\" y=\"58\" width=\"14\" height=\"12\" fill=\"{}\"/>", lx, paint(b).fill);
    s += fmt::format("<text x=\"{:.1f}\" y=\"68\" font-size=\"11\">{}</text>\n", lx + 18, k.text);
    lx += 26 + 6.3 * std::string(k.text).size();
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"58\" width=\"14\" height=\"12\" fill=\"url(#idle)\" stroke=\"#bbb\"/>", lx);
  s += fmt::format("<text x=\"{:.1f}\" y=\"68\" font-size=\"11\">idle (bubble)</text>\n", lx + 18);

  // Rows: name, idle background, then blocks.
  for (int r = 0; r < rows; ++r) {
    const int y = top + r * rh;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n", left - 8,
                     y + band_h / 2 + 4, xml_escape(tl.rows[r]));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"url(#idle)\"/>\n", left, y, plot_w, band_h);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#e0e0e0\" stroke-width=\"0.5\"/>\n",
                     left, y + band_h + 2, plot_w, lane_h);
  }
  s += fmt::format("<clipPath id=\"plot\"><rect x=\"{}\" y=\"0\" width=\"{:.1f}\" height=\"{}\"/></clipPath>\n", left,
                   plot_w, height);
  s += "<g clip-path=\"url(#plot)\">\n";
  for (const auto& b : tl.blocks) {
    if (b.row < 0 || b.row >= rows) continue;
    if (b.end_s < from || b.start_s > to) continue;  // outside the zoom window
    const Paint pt = paint(b);
    const double x0 = X(std::max(b.start_s, from)), w = std::max((std::min(b.end_s, to) - std::max(b.start_s, from)) * scale, 0.6);
    const int y = top + int(b.row) * rh + (b.lane == 0 ? 0 : band_h + 2);
    const int h = b.lane == 0 ? band_h : lane_h;
    const std::string tip = fmt::format("{} {}{} ({:.3f} ms)", b.kind, b.label,
                                        b.chunk >= 0 ? fmt::format(" chunk {}", b.chunk) : "", (b.end_s - b.start_s) * 1e3);
    s += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"{}><title>{}</title></rect>\n",
                     x0, y, w, h, pt.fill, w > 3 ? " stroke=\"#ffffff\" stroke-width=\"0.6\"" : "", xml_escape(tip));
    // Label at 11 px when it fits, else 8 px (about 0.6 em per digit), else none.
    for (int size : {11, 8}) {
      if (b.lane != 0 || b.label.empty() || w < 0.6 * size * double(b.label.size()) + 1.5) continue;
      s += fmt::format("<text x=\"{:.2f}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                       x0 + w / 2, y + band_h / 2 + size / 3, size, pt.text, xml_escape(b.label));
      break;
    }
  }

  s += "</g>\n";
  // End of the step.
  if (to >= step_end) s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#000\" stroke-dasharray=\"4,3\"/>\n",
                   X(to), top - 6, X(to), top + rows * rh);

  // Time axis.
  const int ay = top + rows * rh + 4;
  const double step = nice_tick_step(end, 10);
  const bool seconds = to >= 2.0;
  const double unit = seconds ? 1.0 : 1e-3;
  const char* suffix = seconds ? "s" : "ms";
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"/>\n", left, ay, left + plot_w, ay);
  for (int i = int(std::ceil(from / step - 1e-9)); double(i) * step <= to * (1 + 1e-9); ++i) {
    const double t = double(i) * step;
    const double x = X(t);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"/>", x, ay, x, ay + 5);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#000\" stroke-opacity=\"0.08\"/>", x, top,
                     x, ay);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", x, ay + 18,
                     format_time(t, unit, suffix));
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">time</text>\n",
                   left + plot_w, ay + 34);
  s += "</svg>\n";
  return s;
}

bool write_pipeline_svg(const Timeline& tl, const std::string& path, std::string& error, const SvgOptions& options) {
  // The one atomic writer: refuses special files, never leaves half a file.
  try {
    write_text_atomically(path, pipeline_svg(tl, options));
  } catch (const InputError& e) {
    error = e.problems().empty() ? "failed writing " + path : e.problems().front().what;
    return false;
  }
  return true;
}

}  // namespace trident
