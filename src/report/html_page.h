// The HTML report (`--html FILE` on plan, lint, simulate and rehearsal runs): ONE self-contained
// page, no network (inline CSS and SVG), with the sections a launch review looks at. Each section
// is optional and has a fixed element id, which the headless-browser test checks:
//   #summary, #candidates (table), #findings (lint), #memory (per-stage stacked bars against capacity),
//   #time-breakdown (the step as a stacked bar and a table), #topology (strategy <-> topology),
//   #timeline (pipeline SVG, whole step; #timeline-zoom: a window on it that a slider or a drag zooms
//   and moves, opening on the first micro-batches),
//   #loss-curve (the training and validation loss of a train run), #rehearsal (measured beside
//   predicted shares).
// The page carries numbers only; the commands fill it (report/html_report.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/timeline.h"

namespace trident {

struct HtmlTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string caption;
};

// One stacked bar: labelled parts (name, value) against an optional limit (memory capacity).
struct HtmlBar {
  std::string label;
  std::vector<std::pair<std::string, double>> parts;
};

struct HtmlBars {
  std::string caption;
  std::string unit;          // "GiB", "s"
  double limit = 0;          // drawn as a red line when > 0 ("capacity 80 GiB")
  std::string limit_label;
  std::vector<HtmlBar> bars;
  std::map<std::string, std::string> terms;  // a part's palette term (report/palette.h) where its name is not one
};

struct HtmlShare {
  std::string name;
  double measured = 0;
  std::optional<double> predicted;
  bool part = false;  // a part of the row above (ZeRO gathers of DP exposed): in the table, not the bars
  std::string key;    // the row's key ("dp_exposed"): its palette term
};

// A line chart (the train page's loss curve): series of (x, y) points on shared axes.
struct HtmlSeries {
  std::string name;  // the legend's label
  std::string term;  // its palette term (report/palette.h)
  std::vector<std::pair<double, double>> points;
  bool markers = false;  // a dot per point, with its values as a tooltip (few points: the evaluations)
};

struct HtmlCurve {
  std::string caption, x_label, y_label;
  std::vector<HtmlSeries> series;
};

// A section of lines and a table under a heading (`trident rehearse`'s verdict, derivation, links).
struct HtmlSection {
  std::string id, heading;
  std::vector<std::string> lines;
  std::optional<HtmlTable> table;
};

struct HtmlPage {
  std::string title;
  std::vector<std::string> summary;  // one line each
  std::vector<HtmlSection> sections;  // after the summary, in order
  std::optional<HtmlTable> candidates;
  std::optional<HtmlTable> findings;  // lint findings: severity, code, message, fix
  std::optional<HtmlBars> memory;
  std::optional<HtmlBars> time_breakdown;
  std::optional<HtmlTable> time_table;
  std::optional<HtmlTable> topology;
  std::optional<Timeline> timeline;
  double timeline_zoom_to_s = 0;          // > 0: the timeline again in a zoomable window opening on [0, this]
  std::string timeline_zoom_caption;
  std::optional<HtmlCurve> loss_curve;    // #loss-curve (train: loss per step, validation loss)
  std::vector<HtmlShare> rehearsal;       // empty: no rehearsal section
  std::optional<HtmlTable> rehearsal_table;
  std::vector<std::string> notes;         // what could not be drawn, and why
};

std::string html_page(const HtmlPage& page);

// The rehearsal report's JSON (report/rehearsal_report.h) as a page: measured beside
// predicted time shares, per-rank times and memory, losses.
HtmlPage rehearsal_page(const std::string& rehearsal_json_text);

}  // namespace trident
