// trident lint: check a proposed layout for the source chapter's pitfalls before launch.
// Exit code: 0 no errors (warnings allowed), 1 error findings, 2 unusable input.
#include <cstdio>
#include <memory>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "plan/lint.h"
#include "plan/plan_options.h"
#include "plan/plan_report.h"

namespace trident::cli {
namespace {

struct LintArgs {
  std::unique_ptr<CliOptions> options;
};

Runner setup_lint(CLI::App& cmd) {
  auto args = std::make_shared<LintArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), plan::plan_options()}));
  return [args] {
    Problems problems;
    OptionValues values = args->options->collect(problems);
    const plan::OutputOptions out = plan::resolve_output(values, problems);
    problems.throw_if_any();
    plan::LintResult result = plan::lint_options(values, out.overhead_bytes);
    const RunSpec& run = result.run;
    if (out.json) std::printf("%s\n", plan::lint_json(run, result, out.per_stage).dump(2).c_str());
    else std::printf("%s", plan::lint_text(run, result, out.per_stage).c_str());
    return result.has_errors() ? 1 : 0;
  };
}

TRIDENT_COMMAND("lint", "check a layout for pitfalls (TP across nodes, out of memory, bubbles, ...)", setup_lint);

}  // namespace
}  // namespace trident::cli
