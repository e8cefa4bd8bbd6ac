// trident plan: search every valid layout, rank by predicted throughput, print the best with
// breakdowns and the decision-flow rationale. Exit code: 0 a layout was found, 1 none fits,
// 2 unusable input.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/run_spec.h"
#include "plan/lint.h"
#include "plan/plan_options.h"
#include "plan/plan_report.h"
#include "plan/rationale.h"
#include "plan/search.h"

namespace trident::cli {
namespace {

struct PlanArgs {
  std::unique_ptr<CliOptions> options;
};

// Dimensions given on the command line (or in the TOML file) fix the search; the rest is searched.
plan::SearchSpace fixed_dimensions(const OptionValues& v, const ExecutionSpec& exec, Problems& p) {
  plan::SearchSpace s;
  auto positive = [&](const char* name) -> std::optional<int64_t> {
    auto x = v.get_int(name, p);
    if (x && *x <= 0) {
      p.add(fmt::format("--{} is {}, must be positive", name, *x), fmt::format("give --{} 1 or more, or leave it out to search it", name));
      return std::nullopt;
    }
    return x;
  };
  s.tp = positive("tp");
  s.pp = positive("pp");
  s.dp = positive("dp");
  if (v.has("micro-batch-size")) s.micro_batch = exec.micro_batch_size;
  if (v.has("schedule")) s.schedule = exec.schedule;
  if (v.has("virtual-stages")) s.virtual_stages = exec.virtual_stages;
  if (v.has("zero")) s.zero = exec.zero;
  if (v.has("recompute")) s.recompute = exec.recompute;
  if (v.has("sequence-parallel")) s.sequence_parallel = exec.sequence_parallel;
  if (auto o = v.get_string("order")) {
    Layout probe;
    probe.order = *o;
    validate_layout(probe, p);
    s.order = *o;
  }
  s.precision = exec.precision;
  s.grad_bits = exec.grad_bits;
  return s;
}

Runner setup_plan(CLI::App& cmd) {
  auto args = std::make_shared<PlanArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), plan::plan_options()}));
  return [args] {
    Problems p;
    OptionValues values = args->options->collect(p);
    const plan::OutputOptions out = plan::resolve_output(values, p);
    const ModelSpec model = resolve_model(values, p);
    const ClusterSpec cluster = resolve_cluster(values, p);
    const ExecutionSpec exec = resolve_execution(values, p);
    const plan::SearchSpace space = fixed_dimensions(values, exec, p);
    if (!values.has("global-batch-size"))
      p.add("no global batch size given", "give --global-batch-size (sequences per step; GPT-3 175B used 1536)");
    if (exec.global_batch_size > 0 && space.micro_batch && *space.micro_batch > exec.global_batch_size)
      p.add(fmt::format("micro-batch size ({}) is larger than the global batch ({})", *space.micro_batch,
                        exec.global_batch_size),
            "lower --micro-batch-size or raise --global-batch-size", "batch-divisibility");
    p.throw_if_any();

    const plan::SearchResult result =
        plan::search(model, cluster, exec.global_batch_size, space, out.top, out.overhead_bytes);
    std::vector<std::vector<plan::Finding>> findings;
    for (const auto& e : result.best) findings.push_back(plan::lint_run(e.run, {}, out.overhead_bytes).findings);
    std::vector<std::string> why;
    if (!result.best.empty())
      why = plan::rationale(model, cluster, exec.global_batch_size, space, result.best.front(), out.overhead_bytes);
    if (out.json) std::printf("%s\n", plan::plan_json(result, findings, why, out.per_stage).dump(2).c_str());
    else
      std::printf("%s", plan::plan_text(model, cluster, exec.global_batch_size, result, findings, why, out.per_stage).c_str());
    return result.best.empty() ? 1 : 0;
  };
}

TRIDENT_COMMAND("plan", "search layouts, rank them by predicted throughput and explain the best", setup_plan);

}  // namespace
}  // namespace trident::cli
