// The rules a layout must follow, one row each with one code: alone (sizes, order), against the
// model (tp divides the heads, cp the sequence, ep the experts, ...), against the cluster (the
// world size) and against the batch. validate_layout and check_run walk this table, so a rule is
// checked and reported once, under one code, by every command (plan, lint, topo, simulate, train).
#pragma once

#include <cstdint>
#include <vector>

#include "core/problems.h"

namespace trident {

struct RunSpec;
struct Layout;

enum class RuleKind {
  Layout,  // the layout alone (sizes, --order): validate_layout
  Shape,   // the layout against the model and the cluster: check_run
  Batch,   // the layout against the batch sizes: check_run with check_batch
};

struct LayoutRule {
  const char* code;       // the problem's code ("tp-divides-heads"), unique in the table
  const char* dimension;  // the dimension it is about ("tp"), or "layout" for several
  RuleKind kind;
  const char* rule;       // the rule in words, for the documents
  // Adds one problem (with this code) when the rule does not hold. Layout rules read only
  // run.layout; the run's other parts are then default.
  void (*check)(const RunSpec& run, Problems& problems);
};

const std::vector<LayoutRule>& layout_rules();

// Whether sequence parallel can split the layout's rows: tp above 1 and tp x cp dividing the
// sequence (the rules sp-needs-tp and sp-divides-seq; a bad sequence length is said elsewhere).
bool sequence_parallel_fits(const Layout& layout, int64_t seq_len);
const LayoutRule* find_layout_rule(const char* code);

// Runs the rules of `kind` on the run.
void check_rules(RuleKind kind, const RunSpec& run, Problems& problems);
// The shape rules of the dimensions named (e.g. {"cp", "ep"}): for plan, which fixes some
// dimensions before it searches the others.
void check_dimension_rules(const std::vector<const char*>& dimensions, const RunSpec& run, Problems& problems);

}  // namespace trident
