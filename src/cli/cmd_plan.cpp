// trident plan: search every valid layout, rank by predicted throughput, print the best with
// breakdowns and the decision-flow rationale. Exit code: 0 a layout was found, 1 none fits,
// 2 unusable input.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "capability/rehearsal_check.h"
#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/dimensions.h"
#include "core/layout_rules.h"
#include "core/run_spec.h"
#include "plan/goodput.h"
#include "plan/lint.h"
#include "plan/plan_options.h"
#include "plan/rationale.h"
#include "plan/search.h"
#include "report/html_report.h"
#include "report/goodput_report.h"
#include "report/launch_config.h"
#include "report/output_file.h"
#include "report/plan_questions.h"
#include "report/plan_report.h"
#include "report/time_to_train.h"
#include "report/topology_report.h"

namespace trident::cli {
namespace {

struct PlanArgs {
  std::unique_ptr<CliOptions> options;
  std::string emit;
  std::string html;
  std::vector<std::string> compare;
  std::optional<double> days;
};

// --emit FILE.toml writes the winner as a config every command reads; the framework names print
// that framework's launch of it instead of the plan (slurm: an sbatch script running it).
const std::vector<std::string> kEmitFrameworks = {"megatron",      "torchtitan",       "torchtitan-toml",
                                                  "slurm",         "slurm-torchtitan", "slurm-torchtitan-toml"};
bool emit_is_file(const std::string& e) {
  return std::find(kEmitFrameworks.begin(), kEmitFrameworks.end(), e) == kEmitFrameworks.end();
}

// The framework --emit names (slurm: Megatron-LM in an sbatch script) and its launch of `run`.
std::string emitted_framework(const std::string& emit) {
  return emit.rfind("slurm", 0) == 0 ? (emit == "slurm" ? "megatron" : emit.substr(6)) : emit;
}
FrameworkLaunch framework_launch(const std::string& emit, const RunSpec& run, const LaunchCheckpoint& ckpt) {
  const std::string framework = emitted_framework(emit);
  return framework == "megatron" ? megatron_launch(run) : torchtitan_launch(run, framework == "torchtitan-toml", &ckpt);
}

// The first of the ranked candidates the framework runs as predicted (its launch refuses
// nothing), so that a refusal of the search's best does not stop the launch when a valid
// candidate follows; the first when none is (its refusals are then said).
size_t first_launchable(const std::string& emit, const std::vector<plan::Estimate>& ranked) {
  for (size_t k = 0; k < ranked.size(); ++k)
    if (framework_launch(emit, ranked[k].run, LaunchCheckpoint{}).refusals.empty()) return k;
  return 0;
}

// The launch (megatron, torchtitan[-toml], slurm[-framework]) of the run, printed; exit 2 with
// each refusal when the framework cannot express what the plan assumed. `passed_over` names the
// better candidates the framework refused, as comments of the launch.
// The launch saves at the goodput's interval into ckpt.dir (and, in an sbatch script, requeues).
int print_launch(const std::string& emit, const RunSpec& best, const std::optional<TimeToTrain>& ttt,
                 const LaunchCheckpoint& ckpt, const std::vector<std::string>& passed_over = {}) {
  FrameworkLaunch f = framework_launch(emit, best, ckpt);
  for (const std::string& line : passed_over) f.comments.push_back(line);
  if (!f.refusals.empty()) {
    Problems p;
    for (const auto& r : f.refusals.list())
      p.add(fmt::format("--emit {}: {} cannot run the planned job as predicted: {}", emit, f.version, r.what), r.fix,
            r.code);
    p.throw_if_any();
  }
  // The steps --train-tokens asks for, else a short run to try the launch.
  const int64_t iters = ttt ? int64_t(ttt->steps) : 100;
  add_checkpointing(f, ckpt, iters);
  if (emit.rfind("slurm", 0) == 0) {
    std::printf("%s", slurm_script(best, f, iters).c_str());
  } else {
    std::printf("%s", launch_text(f).c_str());
  }
  return 0;
}

// Whether `trident train` can rehearse the recipe, in one line or a short list (text and HTML).
std::string rehearsal_text(const capability::RehearsalCheck& r, const RunSpec& best) {
  if (!r.rehearsable()) {
    std::string s = "rehearsal: not rehearsable by `trident train` (the runtime's run check refuses it):\n";
    for (const auto& p : r.refusals) s += "  - " + p.what + " [" + p.code + "]\n    fix: " + p.fix + "\n";
    return s;
  }
  std::string with;
  for (const auto& x : r.substitutions) with += (with.empty() ? "" : "; ") + x;
  return fmt::format("rehearsal: every setting of this recipe trains in `trident train --config FILE` (scale the model "
                     "down with --layers/--hidden and the layout with --tp/--pp/--dp to the ranks at hand; the full "
                     "layout is {} ranks){}\n",
                     best.layout.world_size(), with.empty() ? "" : "; on CPU ranks " + with);
}

nlohmann::json rehearsal_json(const capability::RehearsalCheck& r) {
  nlohmann::json refusals = nlohmann::json::array();
  for (const auto& p : r.refusals) refusals.push_back({{"what", p.what}, {"fix", p.fix}, {"code", p.code}});
  return {{"rehearsable", r.rehearsable()}, {"substitutions", r.substitutions}, {"refusals", refusals}};
}

// Dimensions given on the command line (or in the TOML file) fix the search; the rest is searched.
plan::SearchSpace fixed_dimensions(const OptionValues& v, const ExecutionSpec& exec, Problems& p) {
  plan::SearchSpace s;
  const LayoutSizes sizes = read_layout_sizes(v, p);
  for (const auto& [dim, size] : sizes.given) s.size(dim) = size;
  if (v.has("micro-batch-size")) s.micro_batch = exec.micro_batch_size;
  if (v.has("schedule")) s.schedule = exec.schedule;
  if (v.has("virtual-stages")) s.virtual_stages = exec.virtual_stages;
  if (v.has("zero")) s.zero = exec.zero;
  if (v.has("recompute")) s.recompute = exec.recompute;
  if (v.has("sequence-parallel")) s.sequence_parallel = exec.sequence_parallel;
  if (sizes.order) {
    Layout probe;
    probe.order = *sizes.order;
    validate_layout(probe, p);
    s.order = *sizes.order;
  }
  s.use_stack(exec);
  return s;
}

// The launch --emit prints runs only its framework's schedules (those of the stack preset that
// predicts it): the search keeps to them, so that the launch never refuses the winner; a schedule
// fixed by hand outside them is refused up front.
void keep_to_framework_schedules(const std::string& emit, plan::SearchSpace& space, Problems& p) {
  const bool megatron = emit == "megatron" || emit == "slurm";
  const StackPreset* framework = find_stack(megatron ? "megatron-core-te" : "torchtitan");
  std::vector<ScheduleKind> keep;
  for (ScheduleKind k : framework->schedules)
    if (space.stack_schedules.empty() ||
        std::find(space.stack_schedules.begin(), space.stack_schedules.end(), k) != space.stack_schedules.end())
      keep.push_back(k);
  space.stack_schedules = keep;
  if (space.schedule && !framework->runs(*space.schedule)) {
    std::vector<std::string> names;
    for (ScheduleKind k : keep) names.push_back(to_string(k));
    p.add(fmt::format("--schedule {} with --emit {}: {} runs {} only", to_string(*space.schedule), emit,
                      megatron ? "Megatron-LM" : "torchtitan", fmt::join(names, " and ")),
          fmt::format("leave --schedule out (the search then picks the best of {})", fmt::join(names, " and ")),
          "emit-schedule");
  }
}

Runner setup_plan(CLI::App& cmd) {
  auto args = std::make_shared<PlanArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options(), plan::plan_options(),
                   time_to_train_options(), plan::resilience_options(), {plan::rank_by_option()},
                   launch_checkpoint_options()}));
  cmd.add_option("--emit", args->emit,
                 "write the best layout as FILE.toml (runs unchanged in lint, topo, simulate, train), or print its "
                 "launch: Megatron-LM arguments, torchtitan flags (torchtitan-toml: the TOML job file of the last "
                 "version reading one), or an sbatch script running it (slurm: Megatron-LM; slurm-torchtitan, "
                 "slurm-torchtitan-toml)")
      ->type_name("FILE.toml|megatron|torchtitan|torchtitan-toml|slurm|slurm-torchtitan|slurm-torchtitan-toml");
  cmd.add_option("--html", args->html, "write the report (candidates, memory, step time, topology, timeline) as one "
                                       "self-contained HTML page")
      ->type_name("FILE");
  cmd.add_option("--compare", args->compare,
                 "plan two or more given layouts side by side instead of the search's best: each a list of sizes "
                 "joined by '-' (e.g. --compare tp8-pp4,tp4-pp8-dp16), the rest of each searched")
      ->delimiter(',')
      ->type_name("LAYOUT,LAYOUT[,...]")
      ->default_str("none");
  cmd.add_option("--days", args->days,
                 "the fewest GPUs (whole nodes of the cluster) whose best layout trains --train-tokens in N days")
      ->type_name("NUM")
      ->default_str("none");
  return [args] {
    Problems p;
    OptionValues values = args->options->collect(p);
    const plan::OutputOptions out = plan::resolve_output(values, p);
    const ModelSpec model = resolve_model(values, p);
    const ClusterSpec cluster = resolve_cluster(values, p);
    const ExecutionSpec exec = resolve_execution(values, p, default_stack(cluster));
    check_recompute_modules(model, exec, p);
    plan::SearchSpace space = fixed_dimensions(values, exec, p);
    if (!emit_is_file(args->emit)) keep_to_framework_schedules(args->emit, space, p);
    {
      RunSpec fixed;  // cp, ep and etp against the model, before the search sets the rest
      fixed.model = model;
      fixed.layout.cp = space.size(Dim::CP).value_or(1), fixed.layout.ep = space.size(Dim::EP).value_or(1);
      fixed.layout.etp = space.size(Dim::ETP).value_or(1);
      check_dimension_rules({"cp", "ep", "etp"}, fixed, p);
    }
    const TrainBudget budget = resolve_train_budget(values, p);
    const plan::ResilienceInputs resilience = plan::resolve_resilience(values, p);
    const bool by_goodput = plan::rank_by_goodput(values, p);
    const LaunchCheckpointOptions launch_ckpt = read_launch_checkpoint(values, args->emit, emit_is_file(args->emit), p);
    if (!args->emit.empty() && emit_is_file(args->emit) &&
        (args->emit.size() < 5 || args->emit.compare(args->emit.size() - 5, 5, ".toml") != 0))
      p.add("--emit '" + args->emit + "' is neither a .toml file nor one of " + join_choices(kEmitFrameworks),
            "use --emit plan.toml, --emit megatron, --emit torchtitan or --emit slurm", "emit");
    check_outputs({{emit_is_file(args->emit) ? args->emit : "", "--emit"}, {args->html, "--html"}},
                  args->options->input_paths(values), p);
    const CostTable cost = resolve_cost(values, cluster.gpu, p);
    if (args->days && !(*args->days > 0 && *args->days < 1e6))
      p.add(fmt::format("--days {} is not a positive number of days", *args->days), "give e.g. --days 30", "option-range");
    if (args->days && !budget.train_tokens)
      p.add("--days asks for the GPUs that train --train-tokens in that time, and --train-tokens is not given",
            "add --train-tokens (e.g. 15T)", "days-without-tokens");
    if ((args->days || !args->compare.empty()) && !args->emit.empty())
      p.add("--emit writes the search's best layout, not a --compare or --days answer", "drop --emit, or run it apart",
            "plan-question");
    if (args->days && !args->compare.empty())
      p.add("--days and --compare are two questions", "ask one of them per run", "plan-question");
    if (!values.has("global-batch-size"))
      p.add("no global batch size given", "give --global-batch-size (sequences per step; GPT-3 175B used 1536)");
    if (exec.global_batch_size > 0 && space.micro_batch && *space.micro_batch > exec.global_batch_size)
      p.add(fmt::format("micro-batch size ({}) is larger than the global batch ({})", *space.micro_batch,
                        exec.global_batch_size),
            "lower --micro-batch-size or raise --global-batch-size", "batch-divisibility");
    p.throw_if_any();

    if (!args->compare.empty() || args->days) {
      std::string text;
      nlohmann::json j;
      bool answered = true;
      if (!args->compare.empty()) {
        const auto c = compare_layouts(args->compare, model, cluster, exec.global_batch_size, space, out.overhead_bytes,
                                       cost, p);
        text = compare_text(c), j = {{"compare", compare_json(c)}};
        answered = std::all_of(c.begin(), c.end(), [](const Compared& x) { return x.best.has_value(); });
      } else {
        const FewestGpus f = fewest_gpus(*args->days, budget, model, cluster, exec.global_batch_size, space,
                                         out.overhead_bytes, cost);
        text = fewest_gpus_text(f, cluster), j = {{"fewest_gpus", fewest_gpus_json(f, cluster)}};
        answered = f.nodes.has_value();
      }
      if (out.json) std::printf("%s\n", j.dump(2).c_str());
      else std::printf("%s%s", stack_line(exec, values.has("stack")).c_str(), text.c_str());
      return answered ? 0 : 1;
    }

    // Ranked by goodput: every feasible candidate (no pruning by the throughput bound), re-ranked.
    plan::SearchSpace searched_space = space;
    if (by_goodput) searched_space.prune_by_bound = false;
    plan::SearchResult result = plan::search(model, cluster, exec.global_batch_size, searched_space,
                                             by_goodput ? std::numeric_limits<int>::max() : out.top, out.overhead_bytes, cost);
    std::vector<plan::RankedByGoodput> ranked;
    if (by_goodput) {
      ranked = plan::rank_by_goodput(result.best, resilience, size_t(out.top));
      result.best.clear();
      for (const auto& r : ranked) result.best.push_back(r.estimate);
    }
    std::optional<plan::NoFitAdvice> no_fit;
    if (result.best.empty())
      no_fit = plan::advise_no_fit(result, model, cluster, exec.global_batch_size, space, out.overhead_bytes, cost);
    std::vector<std::vector<plan::Finding>> findings;
    for (const auto& e : result.best) findings.push_back(plan::lint_run(e.run, {}, out.overhead_bytes).findings);
    std::vector<std::string> why;
    if (!result.best.empty())
      why = plan::rationale(model, cluster, exec.global_batch_size, result, out.overhead_bytes);
    // The planner marks a recipe the runtime cannot rehearse (the runtime's own run check says why).
    std::optional<capability::RehearsalCheck> rehearsal;
    if (!result.best.empty()) rehearsal = capability::rehearsal_check(result.best.front().run);
    // NVIDIA's (or another vendor's) published layout for this model, GPU and GPU count, planned beside the best.
    std::vector<PublishedPlanned> published;
    if (!result.best.empty())
      published = plan_published_layouts(model, cluster, exec.global_batch_size, space, out.overhead_bytes, cost);
    std::optional<TimeToTrain> ttt;
    if (budget.train_tokens && !result.best.empty()) {
      const auto& b = result.best.front();
      ttt = time_to_train(budget, exec.global_batch_size, model.seq_len, b.time.step, b.run.layout.world_size(),
                          "planner, best layout");
    }
    std::optional<plan::Goodput> good;
    if ((budget.train_tokens || by_goodput || plan::resilience_given(values)) && !result.best.empty())
      good = plan::goodput(result.best.front().run, resilience, result.best.front().time.step, ttt ? ttt->seconds : 0);
    if (!args->html.empty()) {
      HtmlPage page;
      if (!result.best.empty()) {
        page = run_page(result.best.front().run, result.best.front(), "trident plan: " + describe_model(model));
        page.findings = findings_table(findings.front());
        if (ttt) page.summary.push_back(time_to_train_text(*ttt));
        if (good) page.summary.push_back(goodput_text(*good));
        if (by_goodput) page.summary.push_back(ranked_by_goodput_text(ranked));
        if (rehearsal) page.summary.push_back(rehearsal_text(*rehearsal, result.best.front().run));
      } else {
        page.title = "trident plan: " + describe_model(model);
        page.notes.push_back("no layout fits: see the text output for the rejected counts");
      }
      page.candidates = candidates_table(result);
      write_html(args->html, page);
    }
    if (!args->emit.empty() && !result.best.empty()) {
      const RunSpec& best = result.best.front().run;
      if (!emit_is_file(args->emit)) {
        const size_t k = first_launchable(args->emit, result.best);
        const auto& b = result.best[k];
        std::vector<std::string> passed_over;
        for (size_t i = 0; i < k; ++i) {
          const auto& r = result.best[i];
          const FrameworkLaunch refused = framework_launch(args->emit, r.run, LaunchCheckpoint{});
          passed_over.push_back(fmt::format("candidate {} ({}, {:.0f} tokens/s) passed over: {} refuses it ({})", i + 1,
                                            r.run.layout.describe(), r.tokens_per_s, refused.framework,
                                            refused.refusals.list().front().what));
        }
        if (k > 0)
          passed_over.push_back(fmt::format("this launch is candidate {} of the plan: {:.0f} tokens/s ({:.1f}% below "
                                            "the best)", k + 1, b.tokens_per_s,
                                            100 * (1 - b.tokens_per_s / result.best.front().tokens_per_s)));
        const plan::Goodput g = good && k == 0 ? *good : plan::goodput(b.run, resilience, b.time.step, ttt ? ttt->seconds : 0);
        const int64_t iters = ttt ? int64_t(ttt->steps) : 100;
        return print_launch(args->emit, b.run, ttt,
                            launch_checkpoint(launch_ckpt, g.interval_steps, g.save_s,
                                              g.goodput > 0 ? b.time.step / g.goodput : b.time.step, iters),
                            passed_over);
      }
      const auto& t = result.best.front();
      const std::vector<std::string> header = {
          fmt::format("Written by trident plan: the best of {} feasible layouts for {}.", result.feasible, best.model.name),
          fmt::format("Predicted: step {:.3f} s, {:.0f} tokens/s, MFU {:.1f}%.", t.time.step, t.tokens_per_s, 100 * t.mfu),
          "Runs unchanged in: trident lint | topo | simulate --config THIS_FILE (same predictions),",
          "and in trident train with the model and layout scaled down by flags (flags win over the file)."};
      write_output_file(args->emit, config_toml(args->options->defs(), values, best, {"json", "top", "per-stage"}, header),
                        "--emit");
    }
    if (out.json) {
      nlohmann::json j = plan_json(result, findings, why, out.per_stage, no_fit ? &*no_fit : nullptr);
      if (ttt) j["time_to_train"] = time_to_train_json(*ttt);
      if (good) j["goodput"] = goodput_json(*good);
      j["rank_by"] = by_goodput ? "goodput" : "throughput";
      if (rehearsal) j["rehearsal"] = rehearsal_json(*rehearsal);
      if (!published.empty()) j["published_layouts"] = published_json(published, result.best.front());
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", stack_line(exec, values.has("stack")).c_str());
      std::printf("%s", plan_text(model, cluster, exec.global_batch_size, result, findings, why, out.per_stage,
                                                  no_fit ? &*no_fit : nullptr).c_str());
      if (!published.empty()) std::printf("%s", published_text(published, result.best.front()).c_str());
      if (by_goodput) std::printf("\n%s", ranked_by_goodput_text(ranked).c_str());
      if (ttt) std::printf("\n%s", time_to_train_text(*ttt).c_str());
      if (good) std::printf("\n%s", goodput_text(*good).c_str());
      if (rehearsal) std::printf("\n%s", rehearsal_text(*rehearsal, result.best.front().run).c_str());
      if (!args->emit.empty() && !result.best.empty()) std::printf("\nwrote the best layout to %s\n", args->emit.c_str());
    }
    return result.best.empty() ? 1 : 0;
  };
}

TRIDENT_COMMAND("plan", "search layouts, rank them by predicted throughput and explain the best", setup_plan);

}  // namespace
}  // namespace trident::cli
