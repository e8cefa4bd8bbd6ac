// The plan beside its rehearsal (rehearse/rehearsal_shape.h derives it): the table of what
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

// A part of the plan's parallelism the rehearsal does not exercise: a dimension at 1 here, or
// one whose groups cross hosts in the plan and not here (or here and not in the plan).
struct NotExercised {
  Dim dim = Dim::DP;
  bool crossing = false;  // the dimension runs here, its crossing of hosts differs
  std::string text;       // "DP (the plan's dp 32, across nodes): dp 1 here"
};

struct RehearsalShape {
  RunSpec run;                    // the rehearsal (model, layout, execution) as train runs it
  int64_t hosts = 1, ranks_per_host = 1;
  std::vector<ShapeRow> rows;     // the table: plan beside rehearsal, and why
  std::vector<std::string> substitutions;  // stack settings the CPU ranks replace
  std::vector<Problem> refusals;  // what train would still refuse (not rehearsable)
  // What of the plan's parallelism the rehearsal leaves out: "DP (the plan's dp 32, across
  // nodes): dp 1 here", "PP across hosts (...): its groups stay in a host here".
  std::vector<NotExercised> not_exercised;
  std::string ranks_why;  // how the rank count was chosen ("--ranks" when given)
};

std::string shape_table(const RehearsalShape& shape);
HtmlSection shape_section(const RehearsalShape& shape);

}  // namespace trident
