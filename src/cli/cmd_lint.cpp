// trident lint: check a proposed layout for the source chapter's pitfalls before launch.
// Exit code: 0 no errors (warnings allowed), 1 error findings, 2 unusable input.
#include <cstdio>
#include <memory>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "plan/lint.h"
#include "plan/plan_options.h"
#include "report/html_report.h"
#include "report/plan_report.h"
#include "report/time_to_train.h"
#include "report/topology_report.h"

namespace trident::cli {
namespace {

struct LintArgs {
  std::unique_ptr<CliOptions> options;
  std::string html;
};

Runner setup_lint(CLI::App& cmd) {
  auto args = std::make_shared<LintArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options(), plan::plan_options(),
                   time_to_train_options()}));
  cmd.add_option("--html", args->html, "write the findings, memory, step time, topology and timeline as one "
                                       "self-contained HTML page")
      ->type_name("FILE");
  return [args] {
    Problems problems;
    OptionValues values = args->options->collect(problems);
    const plan::OutputOptions out = plan::resolve_output(values, problems);
    const TrainBudget budget = resolve_train_budget(values, problems);
    check_outputs({{args->html, "--html"}}, args->options->input_paths(values), problems);
    problems.throw_if_any();
    plan::LintResult result = plan::lint_options(values, out.overhead_bytes);
    const RunSpec& run = result.run;
    std::optional<TimeToTrain> ttt;
    if (budget.train_tokens && result.estimate && result.estimate->time.step > 0)
      ttt = time_to_train(budget, run.exec.global_batch_size, run.model.seq_len, result.estimate->time.step,
                          run.layout.world_size(), "planner");
    if (!args->html.empty()) {
      HtmlPage page;
      const std::string title = "trident lint: " + describe_model(run.model);
      if (result.estimate) page = run_page(run, *result.estimate, title);
      else {
        page.title = title;
        page.notes.push_back("the layout's shape errors leave nothing to estimate: see the findings");
      }
      page.findings = findings_table(result.findings);
      if (ttt) page.summary.push_back(time_to_train_text(*ttt));
      write_html(args->html, page);
    }
    if (out.json) {
      nlohmann::json j = lint_json(run, result, out.per_stage);
      if (ttt) j["time_to_train"] = time_to_train_json(*ttt);
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", stack_line(run.exec, values.has("stack")).c_str());
      std::printf("%s", lint_text(run, result, out.per_stage).c_str());
      if (ttt) std::printf("\n%s", time_to_train_text(*ttt).c_str());
    }
    return result.has_errors() ? 1 : 0;
  };
}

TRIDENT_COMMAND("lint", "check a layout for pitfalls (TP across nodes, out of memory, bubbles, ...)", setup_lint);

}  // namespace
}  // namespace trident::cli
