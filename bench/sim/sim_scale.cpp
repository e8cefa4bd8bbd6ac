// How long one simulated step takes at scale: GPT-3 175B on 4096 GPUs (the source chapter's
// layout, m = 64) and on 16384 GPUs. Each phase is timed (median of repeats) and set against the
// planner's closed-form estimate of the same run, measured in the same process: the ratio says
// what playing every action costs over a formula. Target: well under a second at 4096 GPUs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "report/pipeline_svg.h"
#include "report/sim_timeline.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"

using namespace trident;
using Clock = std::chrono::steady_clock;

double median_s(int repeats, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Case {
  const char* name;
  int64_t nodes, tp, pp, dp, m, v;
  ScheduleKind schedule;
};

int main() {
  const Case cases[] = {
      {"gpt3-175b 4096 GPUs 1f1b", 512, 8, 8, 64, 64, 1, ScheduleKind::OneFOneB},
      {"gpt3-175b 4096 GPUs interleaved v=4", 512, 8, 8, 64, 64, 4, ScheduleKind::Interleaved},
      {"gpt3-175b 4096 GPUs zb-h1", 512, 8, 8, 64, 64, 1, ScheduleKind::ZeroBubbleH1},
      {"gpt3-175b 16384 GPUs 1f1b pp16", 2048, 8, 16, 128, 64, 1, ScheduleKind::OneFOneB},
      {"gpt3-175b 16384 GPUs interleaved pp16 v=3 m=256", 2048, 8, 16, 128, 256, 3, ScheduleKind::Interleaved},
  };
  fmt::print("{:<48} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}\n", "case", "costs ms", "sched ms", "sim ms",
             "svg ms", "total ms", "planner ms", "total/plan");
  bool ok = true;
  for (const Case& c : cases) {
    RunSpec run;
    run.model = model_preset("gpt3-175b");
    run.cluster = cluster_preset("dgx-a100-80g");
    run.cluster.nodes = c.nodes;
    run.layout = {c.tp, 1, c.dp, c.pp, "tp-pp-dp"};
    run.exec.global_batch_size = c.m * c.dp;
    run.exec.schedule = c.schedule;
    run.exec.virtual_stages = c.v;
    run.exec.recompute = Recompute::Selective;
    run.exec.sequence_parallel = true;
    const int repeats = 7;
    sim::PlannedCosts pc;
    PipelineSchedule sc;
    sim::SimResult r;
    const double costs_s = median_s(repeats, [&] { pc = sim::costs_from_plan(run); });
    const double sched_s = median_s(repeats, [&] { sc = build_schedule(c.schedule, c.pp, c.m, c.v); });
    const double sim_s = median_s(repeats, [&] { r = sim::simulate(sc, pc.costs); });
    size_t svg_bytes = 0;
    const double svg_s = median_s(repeats, [&] { svg_bytes = pipeline_svg(to_timeline(r, "t", "s")).size(); });
    const double planner_s = median_s(repeats, [&] { plan::estimate(run, 0); });
    const double total = costs_s + sched_s + sim_s + svg_s;
    ok = ok && total < 1.0;
    fmt::print("{:<48} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>10.3f} {:>10.1f}\n", c.name, costs_s * 1e3,
               sched_s * 1e3, sim_s * 1e3, svg_s * 1e3, total * 1e3, planner_s * 1e3, total / planner_s);
    fmt::print("{:<48} step {:.3f} s (planner {:.3f} s), bubble {:.1f}%, {} spans, svg {} kB\n", "", r.step_s,
               pc.estimate.time.step, r.bubble_share * 100, r.spans.size(), svg_bytes / 1024);
  }
  fmt::print("target: every case under 1 s end to end: {}\n", ok ? "met" : "MISSED");
  return ok ? 0 : 1;
}
