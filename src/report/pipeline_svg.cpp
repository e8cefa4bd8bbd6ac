#include "report/pipeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/output_path.h"
#include "report/palette.h"
#include "report/xml_escape.h"

namespace trident {
namespace {

// Fill and text colour of a block: its kind's palette colour (report/palette.h); an interleaved
// schedule's chunks in lighter shades of it, chunk 0 the darkest.
TermColour paint(const TimelineBlock& b, int chunks = 1) {
  const TermColour& base = term_colour(b.kind);
  const bool compute = b.kind == "F" || b.kind == "B" || b.kind == "W";
  return compute && chunks > 1 && b.chunk >= 0 ? chunk_shade(base, b.chunk, chunks) : base;
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

static int chunk_count(const Timeline& tl) {
  int32_t most = 0;
  for (const auto& b : tl.blocks)
    if (b.lane == 0 && (b.kind == "F" || b.kind == "B" || b.kind == "W")) most = std::max(most, b.chunk);
  return int(most) + 1;
}

double zoom_window_end(const Timeline& tl) {
  if (tl.rows.empty()) return 0;
  const int64_t last = int64_t(tl.rows.size()) - 1;
  int64_t blocks = 0;
  for (const auto& b : tl.blocks)
    blocks += b.row == last && b.lane == 0 && (b.kind == "F" || b.kind == "B" || b.kind == "W");
  if (blocks <= kZoomBlocks * 4) return 0;  // wide enough to read over the whole step
  const double to = compute_window_end(tl, last, kZoomBlocks);
  return to > 0 && to < tl.end_s() ? to : 0;
}

namespace {

// Where everything goes: the time window drawn, the rows' heights and the plot's extent.
struct Frame {
  double step_end = 0, from = 0, to = 0, end = 0;  // end: the span drawn
  int chunks = 1;
  int left = 0, right = 24, top = 92, axis = 46, rows = 0, lane_h = 6, band_h = 0, rh = 0;
  int width = 0, height = 0;
  double plot_w = 0, scale = 0;
  std::string idle, clip;  // ids of the hatch pattern and the clip path
  double X(double t) const { return left + (t - from) * scale; }
};

Frame frame_for(const Timeline& tl, const SvgOptions& opt) {
  Frame f;
  f.step_end = std::max(tl.end_s(), 1e-12);
  f.from = std::clamp(opt.from_s, 0.0, f.step_end);
  f.to = opt.to_s > f.from ? std::min(opt.to_s, f.step_end) : f.step_end;
  f.end = std::max(f.to - f.from, 1e-12);
  // Interleaved: still one row per GPU (a row per chunk read as a GPU idle while it ran another
  // chunk); the chunks are told apart by shade and by the label "c<chunk>/<micro-batch>".
  f.chunks = chunk_count(tl);
  if (f.chunks > 1) f.top += 18;  // the chunks' line of the legend
  // Row names are measured (about 0.62 em per character at 12 px), so "stage 7  ranks 12288-12295"
  // is never clipped.
  size_t longest = 0;
  for (const auto& r : tl.rows) longest = std::max(longest, r.size());
  f.left = std::max(120, int(7.6 * double(longest)) + 20);
  f.rows = int(tl.rows.size());
  f.band_h = opt.row_height_px - f.lane_h - 8;  // the row's compute stream
  f.rh = opt.row_height_px;
  f.width = std::max(opt.width_px, f.left + 400);
  f.height = f.top + f.rows * f.rh + f.axis;
  f.plot_w = f.width - f.left - f.right;
  f.scale = f.plot_w / f.end;
  f.idle = opt.id_prefix + "idle";
  f.clip = opt.id_prefix + "plot";
  return f;
}

// The <svg> element, the idle hatch, the background, title and subtitle.
void draw_header(std::string& s, const Timeline& tl, const Frame& f) {
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
      f.width, f.height, f.width, f.height);
  s += fmt::format("<defs><pattern id=\"{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                   "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
                   "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c8c8c8\" stroke-width=\"2\"/></pattern></defs>\n",
                   f.idle);
  s += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", f.width, f.height);
  s += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"17\" font-weight=\"bold\">{}</text>\n", 12, xml_escape(tl.title));
  s += fmt::format("<text x=\"{}\" y=\"46\" font-size=\"12\" fill=\"#333\">{}</text>\n", 12, xml_escape(tl.subtitle));
}

// One key per block kind, the idle hatch, and under an interleaved schedule the chunks' shades.
void draw_legend(std::string& s, const Frame& f) {
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
    b.chunk = 0;
    s += fmt::format("<rect class=\"key\" x=\"{:.1f}\" y=\"58\" width=\"14\" height=\"12\" fill=\"{}\"/>", lx,
                     paint(b, f.chunks).fill);
    s += fmt::format("<text x=\"{:.1f}\" y=\"68\" font-size=\"11\">{}</text>\n", lx + 18, k.text);
    lx += 26 + 6.3 * std::string(k.text).size();
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"58\" width=\"14\" height=\"12\" fill=\"url(#{})\" stroke=\"#bbb\"/>", lx, f.idle);
  s += fmt::format("<text x=\"{:.1f}\" y=\"68\" font-size=\"11\">idle (bubble)</text>\n", lx + 18);
  if (f.chunks <= 1) return;
  // On a line of its own: the shades of the chunks, forward's, and how a block names its chunk.
  lx = 12;
  s += fmt::format("<text x=\"{:.1f}\" y=\"88\" font-size=\"11\">chunks</text>", lx);
  lx += 46;
  for (int c = 0; c < f.chunks; ++c) {
    TimelineBlock b;
    b.kind = "F", b.chunk = c;
    const TermColour pt = paint(b, f.chunks);
    s += fmt::format("<rect class=\"chunk-key\" x=\"{:.1f}\" y=\"76\" width=\"18\" height=\"15\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"87\" font-size=\"10\" text-anchor=\"middle\" fill=\"{}\">{}</text>",
                     lx, pt.fill, lx + 9, pt.ink, c);
    lx += 20;
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"88\" font-size=\"11\">(one row per GPU, its chunks in shades; a block reads "
                   "c&lt;chunk&gt;/&lt;micro-batch&gt;, or c&lt;chunk&gt; where narrow)</text>\n",
                   lx + 6);
}

// Rows: name, idle background, the DP lane.
void draw_rows(std::string& s, const Timeline& tl, const Frame& f) {
  for (int r = 0; r < f.rows; ++r) {
    const int y = f.top + r * f.rh;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n",
                     f.left - 8, y + f.band_h / 2 + 4, xml_escape(tl.rows[r]));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"url(#{})\"/>\n", f.left, y, f.plot_w,
                     f.band_h, f.idle);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#fafafa\" stroke=\"#e0e0e0\" stroke-width=\"0.5\"/>\n",
                     f.left, y + f.band_h + 2, f.plot_w, f.lane_h);
  }
}

// The plot's container: a zoomable nested <svg> (closed after the axis), or a clipped group.
void open_plot(std::string& s, const Frame& f, const SvgOptions& opt) {
  if (opt.zoomable) {
    // viewBox starts at `left`: the blocks keep the coordinates they have in the whole drawing.
    s += fmt::format("<svg id=\"{}window\" class=\"window\" x=\"{}\" y=\"0\" width=\"{:.1f}\" height=\"{}\" "
                     "viewBox=\"{} 0 {:.1f} {}\" preserveAspectRatio=\"none\" data-left=\"{}\" data-width=\"{:.1f}\" "
                     "data-height=\"{}\" data-from-ms=\"{:.6g}\" data-span-ms=\"{:.6g}\">\n",
                     opt.id_prefix, f.left, f.plot_w, f.height, f.left, f.plot_w, f.height, f.left, f.plot_w, f.height,
                     f.from * 1e3, f.end * 1e3);
  } else {
    s += fmt::format("<clipPath id=\"{}\"><rect x=\"{}\" y=\"0\" width=\"{:.1f}\" height=\"{}\"/></clipPath>\n", f.clip,
                     f.left, f.plot_w, f.height);
    s += fmt::format("<g clip-path=\"url(#{})\">\n", f.clip);
  }
}

// One block with its tooltip and, when it fits (or always, for the zoom script), its label.
void draw_block(std::string& s, const TimelineBlock& b, const Frame& f, const SvgOptions& opt) {
  if (b.row < 0 || b.row >= f.rows) return;
  if (b.end_s < f.from || b.start_s > f.to) return;  // outside the zoom window
  const TermColour pt = paint(b, f.chunks);
  const double x0 = f.X(std::max(b.start_s, f.from)),
               w = std::max((std::min(b.end_s, f.to) - std::max(b.start_s, f.from)) * f.scale, 0.6);
  const int y = f.top + int(b.row) * f.rh + (b.lane != 0 ? f.band_h + 2 : 0);
  const int h = b.lane != 0 ? f.lane_h : f.band_h;
  // Interleaved: the chunk in the label, whole ("c1/3": chunk 1, micro-batch 3) or alone ("c1").
  const bool chunked = f.chunks > 1 && b.chunk >= 0 && b.lane == 0;
  const std::string label = chunked ? fmt::format("c{}/{}", b.chunk, b.label) : b.label;
  const std::string narrow = chunked ? fmt::format("c{}", b.chunk) : "";
  const std::string tip = fmt::format("{} {}{} ({:.3f} ms)", b.kind, b.label,
                                      b.chunk >= 0 ? fmt::format(" chunk {}", b.chunk) : "", (b.end_s - b.start_s) * 1e3);
  const char* stroke = !opt.zoomable ? " stroke=\"#ffffff\" stroke-width=\"0.6\""
                                     : " stroke=\"#ffffff\" stroke-width=\"0.6\" vector-effect=\"non-scaling-stroke\"";
  s += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"{}><title>{}</title></rect>\n",
                   x0, y, w, h, pt.fill, w > 3 ? stroke : "", xml_escape(tip));
  if (opt.zoomable && b.lane == 0 && !b.label.empty()) {
    // Every label written; the script shows those whose block is wide enough at its zoom.
    const int size = h >= 11 ? 11 : 8;
    const double need = 0.6 * size * double(label.size()) + 1.5;
    s += fmt::format("<text x=\"{:.2f}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"{}\" data-w=\"{:.2f}\" "
                     "data-need=\"{:.1f}\"{}>{}</text>\n",
                     x0 + w / 2, y + h / 2 + size / 3, size, pt.ink, w, need, w < need ? " style=\"display:none\"" : "",
                     xml_escape(label));
    return;
  }
  // Label at 11 px when it fits, else 8 px (about 0.6 em per character), else the chunk alone, else none.
  for (const std::string& text : {label, narrow})
    for (int size : {11, 8}) {
      if (b.lane != 0 || b.label.empty() || text.empty() || w < 0.6 * size * double(text.size()) + 1.5 || size > h)
        continue;
      s += fmt::format("<text x=\"{:.2f}\" y=\"{}\" font-size=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                       x0 + w / 2, y + h / 2 + size / 3, size, pt.ink, xml_escape(text));
      return;
    }
}

// The time axis, its ticks and grid lines (and, zoomable, the finer ticks the script reveals).
void draw_axis(std::string& s, const Frame& f, const SvgOptions& opt, const char* keep) {
  const int ay = f.top + f.rows * f.rh + 4;
  const double step = nice_tick_step(f.end, 10);
  const bool seconds = f.to >= 2.0;
  const double unit = seconds ? 1.0 : 1e-3;
  const char* suffix = seconds ? "s" : "ms";
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"/>\n", f.left, ay, f.left + f.plot_w, ay);
  for (int i = int(std::ceil(f.from / step - 1e-9)); double(i) * step <= f.to * (1 + 1e-9); ++i) {
    const double t = double(i) * step;
    const double x = f.X(t);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\"{}/>", x, ay, x, ay + 5, keep);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#000\" stroke-opacity=\"0.08\"{}/>", x,
                     f.top, x, ay, keep);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>\n", x, ay + 18,
                     format_time(t, unit, suffix));
  }
  if (opt.zoomable) {
    // Ticks ten times finer between the others, for the script to show once zoomed in.
    const double fine = step / 10;
    for (int64_t i = int64_t(std::ceil(f.from / fine - 1e-9)); double(i) * fine <= f.to * (1 + 1e-9); ++i) {
      if (i % 10 == 0) continue;  // a tick above
      const double t = double(i) * fine, x = f.X(t);
      s += fmt::format("<g class=\"fine\" style=\"display:none\"><line x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" "
                       "stroke=\"#333\" vector-effect=\"non-scaling-stroke\"/><text x=\"{:.2f}\" y=\"{}\" font-size=\"10\" "
                       "text-anchor=\"middle\" fill=\"#555\">{}</text></g>",
                       x, ay, x, ay + 3, x, ay + 18, format_time(t, unit, suffix));
    }
    s += "</svg>\n";
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">time</text>\n",
                   f.left + f.plot_w, ay + 34);
}

}  // namespace

std::string pipeline_svg(const Timeline& tl, const SvgOptions& opt) {
  const Frame f = frame_for(tl, opt);
  std::string s;
  draw_header(s, tl, f);
  draw_legend(s, f);
  draw_rows(s, tl, f);
  open_plot(s, f, opt);
  for (const auto& b : tl.blocks) draw_block(s, b, f, opt);
  if (!opt.zoomable) s += "</g>\n";
  // Lines keep their width in a zoomed window. End of the step:
  const char* keep = opt.zoomable ? " vector-effect=\"non-scaling-stroke\"" : "";
  if (f.to >= f.step_end)
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#000\" stroke-dasharray=\"4,3\"{}/>\n",
                     f.X(f.to), f.top - 6, f.X(f.to), f.top + f.rows * f.rh, keep);
  draw_axis(s, f, opt, keep);
  s += "</svg>\n";
  return s;
}

std::string pipeline_svg_file(const Timeline& tl, const SvgOptions& opt) {
  const double to = zoom_window_end(tl);
  if (to <= 0) return pipeline_svg(tl, opt);
  // The whole step, then a window on its start: two panels in one file, one above the other.
  SvgOptions zoom = opt;
  zoom.from_s = 0, zoom.to_s = to, zoom.id_prefix = opt.id_prefix + "zoom-";
  const std::string whole = pipeline_svg(tl, opt), window = pipeline_svg(tl, zoom);
  auto size = [](const std::string& svg, const char* attr) {
    const size_t at = svg.find(attr);
    return at == std::string::npos ? 0 : std::stoi(svg.substr(at + std::char_traits<char>::length(attr)));
  };
  const int w = size(whole, "width=\""), h1 = size(whole, "height=\""), h2 = size(window, "height=\""), caption = 30;
  std::string s = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                              "font-family=\"DejaVu Sans, Arial, sans-serif\">\n<rect width=\"{}\" height=\"{}\" "
                              "fill=\"#ffffff\"/>\n",
                              w, h1 + caption + h2, w, h1 + caption + h2, w, h1 + caption + h2);
  s += "<svg x=\"0\" y=\"0\"" + whole.substr(4);
  s += fmt::format("<text id=\"zoom-caption\" x=\"12\" y=\"{}\" font-size=\"13\" font-weight=\"bold\">Window on 0 - {:.4g} "
                   "ms of the {:.4g} ms step: the pipeline filling, until the last stage has run its first {} compute "
                   "blocks</text>\n",
                   h1 + 20, to * 1e3, tl.end_s() * 1e3, kZoomBlocks);
  s += fmt::format("<svg id=\"zoom\" x=\"0\" y=\"{}\"", h1 + caption) + window.substr(4);
  return s + "</svg>\n";
}

bool write_pipeline_svg(const Timeline& tl, const std::string& path, std::string& error, const SvgOptions& options) {
  // The one atomic writer: refuses special files, never leaves half a file.
  try {
    write_text_atomically(path, pipeline_svg_file(tl, options));
  } catch (const InputError& e) {
    error = e.problems().empty() ? "failed writing " + path : e.problems().front().what;
    return false;
  }
  return true;
}

}  // namespace trident
