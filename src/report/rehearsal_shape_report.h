// The plan beside its rehearsal (runtime/parallel/rehearsal_shape.h derives it): the table of what
// was scaled and why, and the stack settings CPU ranks replace, as text and an HTML section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problems.h"
#include "core/run_spec.h"
#include "report/html_page.h"

namespace trident {

struct ShapeRow {
  std::string what, planned, rehearsed, why;
};

struct RehearsalShape {
  RunSpec run;                    // the rehearsal (model, layout, execution) as train runs it
  int64_t hosts = 1, ranks_per_host = 1;
  std::vector<ShapeRow> rows;     // the table: plan beside rehearsal, and why
  std::vector<std::string> substitutions;  // stack settings the CPU ranks replace
  std::vector<Problem> refusals;  // what train would still refuse (not rehearsable)
};

std::string shape_table(const RehearsalShape& shape);
HtmlSection shape_section(const RehearsalShape& shape);

}  // namespace trident
