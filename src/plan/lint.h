// Lint: check a proposed run for the source chapter's pitfalls before launch. Each finding has a
// severity, a stable code, a message with the numbers that triggered it, and a fix.
//
// Codes: the layout rules' codes (core/layout_rules.h: world-size, tp-divides-heads, ...; shape
// errors from core's check_run), vocab-padded, uneven-stages, tp-crosses-nodes, out-of-memory,
// too-few-microbatches, activations-in-flight, group-topology-mismatch, stage-too-thin,
// interleaved-microbatches, slower-than-recipe, execution-defaults; with context / expert
// parallel cp-crosses-domain, ep-alltoall-slow.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/run_spec.h"
#include "plan/estimate.h"

namespace trident::plan {

enum class Severity { Error, Warning, Info };
std::string to_string(Severity s);  // "error", "warning", "info"

struct Finding {
  Severity severity = Severity::Info;
  std::string code;
  std::string message;
  std::string fix;
};

struct LintResult {
  RunSpec run;                       // what was checked
  std::optional<Estimate> estimate;  // absent when shape errors make the run impossible to estimate
  std::vector<Finding> findings;     // errors first, then warnings, then info
  bool has_errors() const;
};

// The codes check_run reports that lint turns into error findings (others are unusable input).
bool is_shape_code(const std::string& code);

// Lints a resolved run. shape_problems: the check_run problems (and world-size) already found;
// when there are any, the estimate is skipped and only they and the layout-free checks are reported.
LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead_bytes);
LintResult lint_run(const RunSpec& run, const std::vector<Problem>& shape_problems, double overhead_bytes,
                    const CostConstants& c);

// Resolves the options like resolve_run, but turns shape problems into findings instead of
// throwing; unusable input (unknown names, non-numbers, non-positive sizes) still throws InputError.
// Settings the values leave out take the runtime's defaults (ExecutionSpec, or the --stack
// preset), the same as train and simulate; an info finding "execution-defaults" lists them.
LintResult lint_options(const OptionValues& values, double overhead_bytes);
// That finding (empty when every setting was given).
std::vector<Finding> defaults_used(const OptionValues& values, const RunSpec& run);

}  // namespace trident::plan
