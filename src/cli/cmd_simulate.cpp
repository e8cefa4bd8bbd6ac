// trident simulate: play one training step of a layout on the full cluster with the planner's
// cost model, using the very schedule the runtime executes; print the step time beside the
// planner's, the bubble, the exposed communication per group, and draw the timeline.
// Exit code: 0 done, 2 unusable input (with every problem and its fix).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_options.h"
#include "cli/command.h"
#include "core/recipe_settings.h"
#include "core/run_spec.h"
#include "core/units.h"
#include "plan/plan_options.h"
#include "report/chrome_trace.h"
#include "report/html_report.h"
#include "report/pipeline_svg.h"
#include "report/plan_report.h"
#include "report/sim_timeline.h"
#include "report/simulated_step.h"
#include "report/time_to_train.h"
#include "report/goodput_report.h"
#include "plan/goodput.h"
#include "report/topology_report.h"
#include "schedule/schedule.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"

namespace trident::cli {
namespace {

struct SimulateArgs {
  std::unique_ptr<CliOptions> options;
  bool json = false;
  std::string trace_path;
  std::string svg_path;
  std::string html_path;
  bool show_schedule = false;
};

std::string ms(double s) { return fmt::format("{:.2f} ms", s * 1e3); }

// --overhead-gib, as plan and lint take it: the same memory in all three.
std::vector<OptionDef> overhead_option() {
  std::vector<OptionDef> out;
  for (const auto& d : plan::plan_options())
    if (d.name == "overhead-gib") out.push_back(d);
  return out;
}

nlohmann::json memory_json(const plan::Estimate& e) {
  const plan::StageMemory& pm = e.peak_memory();
  return {{"stage", pm.stage},
          {"total_gib", gib(pm.total_bytes())},
          {"capacity_gib", gib(e.capacity_bytes)},
          {"fits", e.fits},
          {"weights_gib", gib(pm.weights_bytes)},
          {"gradients_gib", gib(pm.gradients_bytes)},
          {"optimizer_gib", gib(pm.optimizer_bytes)},
          {"activations_gib", gib(pm.activations_bytes)},
          {"gathered_weights_gib", gib(pm.gathered_weights_bytes)},
          {"overhead_gib", gib(pm.overhead_bytes)}};
}

// MFU of the simulated step (the planner's is of its own step time).
plan::Mfu simulated_mfu(const RunSpec& run, const sim::SimResult& r) {
  return plan::mfu_of(run.model, run.exec.global_batch_size, r.step_s,
                      double(run.layout.world_size()) * plan::peak_flops(run.cluster.gpu, run.exec.precision));
}

nlohmann::json to_json(const RunSpec& run, const sim::PlannedCosts& pc, const sim::SimResult& r, double closed_form) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& st : r.stages)
    stages.push_back({{"stage", st.stage},
                      {"busy_s", st.busy_s},
                      {"idle_s", st.idle_s},
                      {"compute_s", st.compute_s},
                      {"bubble_s", st.bubble_s},
                      {"end_s", st.end_s},
                      {"exposed_comm_s", {{"tp", st.exposed_tp_s}, {"pp", st.exposed_pp_s}, {"dp", st.exposed_dp_s},
                                                          {"cp", st.exposed_cp_s}, {"ep", st.exposed_ep_s}}},
                      {"host_wait_s", st.host_wait_s}});
  json inputs = json::array();
  for (size_t s = 0; s < pc.costs.stages.size(); ++s) {
    const auto& sc = pc.costs.stages[s];
    json chunks = json::array();
    for (const auto& c : sc.chunks)
      chunks.push_back({{"forward_s", c.forward_s},
                        {"backward_s", c.backward_s},
                        {"backward_input_s", c.backward_input_s()},
                        {"backward_weight_s", c.backward_weight_s()},
                        {"tp_forward_s", c.tp_forward_s},
                        {"tp_backward_s", c.tp_backward_s},
                        {"cp_forward_s", c.cp_forward_s},
                        {"cp_backward_s", c.cp_backward_s},
                        {"ep_forward_s", c.ep_forward_s},
                        {"ep_backward_s", c.ep_backward_s},
                        {"host_forward_s", c.host_forward_s},
                        {"host_backward_s", c.host_backward_s}});
    inputs.push_back({{"stage", s},
                      {"layers", pc.estimate.stages[s].layers},
                      {"chunks", chunks},
                      {"p2p_to_next_s", sc.p2p_s},
                      {"dp_reduce_s", sc.dp_reduce_s},
                      {"dp_buckets", sc.dp_buckets},
                      {"embedding_sync_s", sc.embedding_sync_s},
                      {"optimizer_s", sc.optimizer_s},
                      {"dp_after_optimizer_s", sc.dp_after_optimizer_s}});
    if (sc.dp_reduce_each_backward_s > 0)  // ZeRO-2 only, so other runs' JSON stays as it was
      inputs.back()["dp_reduce_each_backward_s"] = sc.dp_reduce_each_backward_s;
  }
  nlohmann::json j = {{"step_s", r.step_s},
          {"bubble_share", r.bubble_share},
          {"closed_form_bubble_share", closed_form},
          {"pipeline_s", r.pipeline_s},
          {"critical_stage", r.critical_stage},
          {"stages", stages},
          {"exposed_comm_s", {{"tp", r.exposed_tp_s()}, {"pp", r.exposed_pp_s()}, {"dp", r.exposed_dp_s()},
                              {"cp", r.exposed_cp_s()}, {"ep", r.exposed_ep_s()}}},
          {"host_wait_s", r.host_wait_s()},
          {"planner_step_s", pc.estimate.time.step},
          {"memory", memory_json(pc.estimate)},
          {"schedule", to_string(run.exec.schedule)},
          {"attention", to_string(run.exec.attention)},
          {"overlap", to_string(overlap_in_effect(run.exec.overlap, run.exec.schedule))},
          {"precision", to_string(run.exec.precision)},
          {"grad_bits", run.exec.grad_bits},
          {"stack", run.exec.stack},
          {"recipe", recipe_json(run.exec.recipe)},
          {"cost_table", cost_json(pc.estimate.cost)},
          {"micro_batches", pc.micro_batches},
          {"virtual_stages", pc.virtual_stages},
          {"layout", run.layout.describe()},
          {"world", run.layout.world_size()},
          {"inputs", inputs}};
  j.update(plan::mfu_json(simulated_mfu(run, r)));
  return j;
}

std::string to_text(const RunSpec& run, const Mesh& mesh, const sim::PlannedCosts& pc, const sim::SimResult& r,
                    double closed_form) {
  std::string s;
  const auto& x = run.exec;
  s += fmt::format("Simulated step of {}\n", describe_model(run.model));
  s += fmt::format("  on {} GPUs, {}, schedule {}{}, m = {} micro-batches of {} per pipeline\n", run.layout.world_size(),
                   run.layout.describe(), to_string(x.schedule),
                   pc.virtual_stages > 1 ? fmt::format(" (v = {})", pc.virtual_stages) : "", pc.micro_batches,
                   x.micro_batch_size);
  s += fmt::format("  {} attention, overlap {}, {}, {}-bit grads, ZeRO {}{}{}{}\n", to_string(x.attention), overlap_text(x.overlap, x.schedule),
                   to_string(x.precision), x.grad_bits, x.zero, x.sequence_parallel ? ", sequence parallel" : "",
                   recipe_text(x, run.layout.tp, run.layout.cp, run.layout.pp),
                   x.stack.empty() ? "" : ", stack " + x.stack);
  s += "  (one pipeline simulated: every DP replica and TP rank of a stage runs the same program)\n\n";
  const double planner = pc.estimate.time.step;
  const plan::StageMemory& pm = pc.estimate.peak_memory();
  s += fmt::format("  memory        stage {} (most loaded) {:.1f} GiB per GPU of {:.1f} GiB: {} (weights {:.1f} + gradients "
                   "{:.1f} + optimizer {:.1f} + activations {:.1f} + overhead {:.1f} GiB)\n",
                   pm.stage, gib(pm.total_bytes()), gib(pc.estimate.capacity_bytes),
                   pc.estimate.fits ? "fits" : "DOES NOT FIT: the run would stop out of memory", gib(pm.weights_bytes),
                   gib(pm.gradients_bytes), gib(pm.optimizer_bytes), gib(pm.activations_bytes + pm.gathered_weights_bytes),
                   gib(pm.overhead_bytes));
  s += fmt::format("  step time     simulator {:.3f} s   planner {:.3f} s   ({:+.1f}%)\n", r.step_s, planner,
                   planner > 0 ? (r.step_s / planner - 1) * 100 : 0.0);
  s += "  throughput    " + plan::mfu_text(simulated_mfu(run, r)) + " of the simulated step\n";
  s += fmt::format("  pipeline      {:.3f} s until the last backward; bubble share {:.1f}% (closed form {:.1f}%{})\n",
                   r.pipeline_s, r.bubble_share * 100, closed_form * 100,
                   run.exec.schedule == ScheduleKind::ZeroBubbleH1 ? ", which assumes F = B = W" : "");
  s += fmt::format("  exposed comm  on stage {} (ends last): tp {:.3f} s, pp {:.3f} s, dp {:.3f} s{}\n\n", r.critical_stage,
                   r.exposed_tp_s(), r.exposed_pp_s(), r.exposed_dp_s(),
                   run.layout.cp > 1 || run.layout.ep > 1
                       ? fmt::format(", cp ring {:.3f} s, ep all-to-all {:.3f} s", r.exposed_cp_s(), r.exposed_ep_s())
                       : "");
  s += "  stage  ranks (replica 0)   layers   busy s   idle s  bubble s    tp s    pp s    dp s    end s\n";
  for (const auto& st : r.stages)
    s += fmt::format("  {:>5}  {:<18} {:>6} {:>8.3f} {:>8.3f} {:>9.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>8.3f}\n", st.stage,
                     stage_ranks(mesh, st.stage), pc.estimate.stages[st.stage].layers, st.busy_s, st.idle_s,
                     st.bubble_s, st.exposed_tp_s, st.exposed_pp_s, st.exposed_dp_s, st.end_s);
  s += "\n  inputs per micro-batch (planner's cost model; F and B include their TP collectives, after overlap):\n";
  for (size_t i = 0; i < pc.costs.stages.size(); ++i) {
    const auto& sc = pc.costs.stages[i];
    std::string chunks;
    for (size_t c = 0; c < sc.chunks.size(); ++c) {
      const auto& cc = sc.chunks[c];
      chunks += fmt::format("{}F {} B {} (W {}, TP {}{}{})", c ? "; " : "", ms(cc.forward_s), ms(cc.backward_s),
                            ms(cc.backward_weight_s()), ms(cc.tp_forward_s + cc.tp_backward_s),
                            cc.dp_forward_s + cc.dp_backward_s > 0
                                ? ", ZeRO-3 DP " + ms(cc.dp_forward_s + cc.dp_backward_s)
                                : std::string(),
                            cc.host_forward_s + cc.host_backward_s > 0
                                ? ", host wait " + ms(cc.host_forward_s + cc.host_backward_s)
                                : std::string());
    }
    bool per_layer_dp = false;  // ZeRO-3: gradients leave layer by layer, no reduction after backward
    for (const auto& cc : sc.chunks) per_layer_dp = per_layer_dp || cc.dp_forward_s + cc.dp_backward_s > 0;
    const std::string dp = per_layer_dp && sc.dp_reduce_s <= 0
                               ? std::string("DP reduce-scatter per layer (the ZeRO-3 DP above)")
                           : sc.dp_reduce_each_backward_s > 0  // ZeRO-2: a reduce-scatter per micro-batch
                               ? fmt::format("DP reduce-scatter {} after each of the {} backwards, in {} buckets",
                                             ms(sc.dp_reduce_each_backward_s), pc.micro_batches, sc.dp_buckets)
                               : fmt::format("DP reduce {} in {} buckets", ms(sc.dp_reduce_s), sc.dp_buckets);
    s += fmt::format("    stage {}: {} | {}, optimizer {}{}{}\n", i, chunks, dp, ms(sc.optimizer_s),
                     sc.embedding_sync_s > 0 ? ", embedding sync " + ms(sc.embedding_sync_s) : "",
                     sc.dp_after_optimizer_s > 0 ? ", weight all-gather " + ms(sc.dp_after_optimizer_s) : "");
  }
  for (const auto& b : pc.boundaries) {
    const plan::PpComm& m = b.message;
    // Without sequence parallel the receiver all-gathers the 1/tp shares before it can go on.
    const std::string gather =
        m.gather_s > 0 ? fmt::format(" + the receiver's all-gather of {:.1f} MB {} = {}", m.activation_bytes / 1e6,
                                     ms(m.gather_s), ms(m.message_s))
                       : "";
    s += fmt::format("    stage {} -> {}: {:.1f} MB per message over {} ({:.0f} GB/s): {}{}\n", b.from_stage, b.to_stage,
                     m.message_bytes / 1e6, to_string(b.link.kind), b.link.bandwidth_Bps / 1e9, ms(m.wire_s), gather);
  }
  // ZeRO-3's per-layer traffic is inside the stage times (the pipeline); the rest of DP after it.
  const plan::Estimate& est = pc.estimate;
  const double zero3_s = double(est.micro_batches) * est.stages[est.pipeline.slowest_stage].zero3_s;
  const double dp_after = est.time.dp_comm - zero3_s > 1e-9 * est.time.step ? est.time.dp_comm - zero3_s : 0.0;
  s += fmt::format("\n  planner: pipeline {:.4g} s (bubble {:.4g} s) + exposed DP {:.4g} s + optimizer {:.4g} s = {:.4g} s.\n",
                   est.pipeline.total_s, est.pipeline.bubble_s, dp_after, est.time.optimizer,
                   est.time.step);
  if (zero3_s > 0)
    s += fmt::format("  ZeRO-3: the layers' weight all-gathers and gradient reduce-scatters, {:.4g} s on the critical\n"
                     "  path (m x the slowest stage's, hidden share with its slowdown), are inside the pipeline.\n",
                     zero3_s);
  s += "  It paces every stage by the slowest and uses the closed-form bubble; the simulator plays the\n"
       "  schedule action by action, with each stage's own costs and DP buckets against its last backwards.\n";
  s += "  " + cost_text(pc.estimate.cost);
  return s;
}

Runner setup_simulate(CLI::App& cmd) {
  auto args = std::make_shared<SimulateArgs>();
  args->options = std::make_unique<CliOptions>(
      cmd, concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options(),
                   time_to_train_options(), overhead_option(), plan::resilience_options()}));
  cmd.add_flag("--json", args->json, "print JSON instead of the table");
  cmd.add_option("--trace", args->trace_path, "write a Chrome trace (open in ui.perfetto.dev) to FILE.json")
      ->type_name("FILE");
  cmd.add_option("--svg", args->svg_path, "draw the pipeline timeline to FILE.svg")->type_name("FILE");
  cmd.add_option("--html", args->html_path, "write the report as one self-contained HTML page to FILE.html")
      ->type_name("FILE");
  cmd.add_flag("--show-schedule", args->show_schedule, "also print each stage's list of compute actions");
  return [args] {
    Problems problems;
    OptionValues values = args->options->collect(problems);
    if (!values.has("global-batch-size"))
      problems.add("no global batch size given",
                   "give --global-batch-size (sequences per step; GPT-3 175B used 1536)", "batch-missing");
    const TrainBudget budget = resolve_train_budget(values, problems);
    const plan::ResilienceInputs resilience = plan::resolve_resilience(values, problems);
    check_outputs({{args->trace_path, "--trace"}, {args->svg_path, "--svg"}, {args->html_path, "--html"}},
                  args->options->input_paths(values), problems);
    const plan::OutputOptions out = plan::resolve_output(values, problems);  // --overhead-gib
    problems.throw_if_any();
    const RunSpec run = resolve_run(values, /*check_batch=*/true);
    const int64_t m = run.exec.micro_batches(run.layout.dp);
    const int64_t v = run.exec.schedule == ScheduleKind::Interleaved ? run.exec.virtual_stages : 1;
    Problems shape;
    check_schedule_shape(run.exec.schedule, run.layout.pp, m, v, shape);
    if (!shape.empty() && run.exec.schedule == ScheduleKind::Interleaved && run.layout.pp > 1 && m % run.layout.pp != 0) {
      // Say it in the user's terms too: the global batch that gives a valid m.
      const int64_t per_mb = run.exec.micro_batch_size * run.layout.dp;
      const int64_t lo = (m / run.layout.pp) * run.layout.pp, hi = lo + run.layout.pp;
      shape.add(fmt::format("m = global batch {} / (micro-batch {} x dp {}) = {}", run.exec.global_batch_size,
                            run.exec.micro_batch_size, run.layout.dp, m),
                lo > 0 ? fmt::format("use --global-batch-size {} (m = {}) or {} (m = {})", lo * per_mb, lo, hi * per_mb, hi)
                       : fmt::format("use --global-batch-size {} (m = {})", hi * per_mb, hi),
                "schedule-interleaved-m");
    }
    shape.throw_if_any();

    const Mesh mesh(run.layout, run.cluster.gpus_per_node);
    const SimulatedStep step = simulate_step(run, out.overhead_bytes);
    const sim::PlannedCosts& pc = step.costs;
    const PipelineSchedule& schedule = step.schedule;
    const sim::SimResult& r = step.result;
    const double closed = step.closed_form_bubble;

    std::optional<TimeToTrain> ttt;
    if (budget.train_tokens)
      ttt = time_to_train(budget, run.exec.global_batch_size, run.model.seq_len, r.step_s, run.layout.world_size(),
                          "simulator");
    std::optional<plan::Goodput> good;
    if (budget.train_tokens || plan::resilience_given(values))
      good = plan::goodput(run, resilience, r.step_s, ttt ? ttt->seconds : 0);
    if (!args->trace_path.empty() || !args->svg_path.empty() || !args->html_path.empty()) {
      const Timeline tl = step_timeline(run, mesh, step);
      std::string error;
      if (!args->trace_path.empty() && !write_chrome_trace(tl, args->trace_path, error))
        throw InputError({{error, "give a writable path to --trace", "output-path"}});
      if (!args->svg_path.empty() && !write_pipeline_svg(tl, args->svg_path, error))
        throw InputError({{error, "give a writable path to --svg", "output-path"}});
      if (!args->html_path.empty()) {
        HtmlPage page = run_page(run, pc.estimate, "trident simulate: " + describe_model(run.model), &step);
        if (ttt) page.summary.push_back(time_to_train_text(*ttt));
        if (good) page.summary.push_back(goodput_text(*good));
        write_html(args->html_path, page);
      }
    }
    if (args->json) {
      nlohmann::json j = to_json(run, pc, r, closed);
      if (ttt) j["time_to_train"] = time_to_train_json(*ttt);
      if (good) j["goodput"] = goodput_json(*good);
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s", stack_line(run.exec, values.has("stack")).c_str());
      std::printf("%s", to_text(run, mesh, pc, r, closed).c_str());
      if (ttt) std::printf("\n%s", time_to_train_text(*ttt).c_str());
      if (good) std::printf("\n%s", goodput_text(*good).c_str());
    }
    if (args->show_schedule && !args->json) std::printf("\nschedule (compute actions per stage):\n%s", format_schedule(schedule).c_str());
    return 0;
  };
}

TRIDENT_COMMAND("simulate", "play one training step of a layout on the full cluster; print and draw its timeline",
                setup_simulate);

}  // namespace
}  // namespace trident::cli
