// Fills the HTML report (report/html_page.h) from what plan, lint and simulate computed.
#pragma once

#include <string>

#include "report/simulated_step.h"
#include "plan/estimate.h"
#include "plan/lint.h"
#include "plan/search.h"
#include "report/html_page.h"

namespace trident {

// Summary, per-stage memory against capacity, step-time breakdown, strategy <-> topology and the
// pipeline timeline (whole step, and a zoom on the first micro-batches when blocks get thin).
// `step` is the simulated step when the caller has one; otherwise it is simulated here (a schedule
// that cannot take the run's shape leaves a note instead of the timeline).
HtmlPage run_page(const RunSpec& run, const plan::Estimate& estimate, const std::string& title,
                  const SimulatedStep* step = nullptr);

// The candidate table of a search (best first).
HtmlTable candidates_table(const plan::SearchResult& result);

// Lint findings (and those of a plan's best layout) as a table.
HtmlTable findings_table(const std::vector<plan::Finding>& findings);

// Writes the page through the one output writer (report/output_file.h), as --html.
void write_html(const std::string& path, const HtmlPage& page);

}  // namespace trident
