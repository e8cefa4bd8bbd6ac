#include "report/simulated_step.h"

#include <fmt/format.h>

#include "core/pipeline_bubble.h"
#include "report/sim_timeline.h"

namespace trident {

SimulatedStep simulate_step(const RunSpec& run, double overhead_bytes) {
  SimulatedStep s;
  s.micro_batches = run.exec.micro_batches(run.layout.dp);
  s.virtual_stages = run.exec.schedule == ScheduleKind::Interleaved ? run.exec.virtual_stages : 1;
  s.costs = sim::costs_from_plan(run, overhead_bytes);
  s.schedule = build_schedule(run.exec.schedule, run.layout.pp, s.micro_batches, s.virtual_stages);
  s.result = sim::simulate(s.schedule, s.costs.costs);
  s.closed_form_bubble = closed_form_bubble_share(run.exec.schedule, run.layout.pp, s.micro_batches, s.virtual_stages);
  return s;
}

std::string stage_ranks(const Mesh& mesh, int64_t s) {
  Coords c;
  c[Dim::PP] = s;
  std::vector<int64_t> ranks;
  for (int64_t t = 0; t < mesh.size(Dim::TP); ++t) {
    c[Dim::TP] = t;
    ranks.push_back(mesh.rank_of(c));
  }
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  if (ranks.back() - ranks.front() == int64_t(ranks.size()) - 1) return fmt::format("ranks {}-{}", ranks.front(), ranks.back());
  return fmt::format("ranks {},{},..", ranks[0], ranks[1]);
}

Timeline step_timeline(const RunSpec& run, const Mesh& mesh, const SimulatedStep& st) {
  const sim::SimResult& r = st.result;
  std::vector<std::string> rows;
  for (int64_t s = 0; s < run.layout.pp; ++s) rows.push_back(fmt::format("stage {}  {}", s, stage_ranks(mesh, s)));
  const int64_t v = st.virtual_stages;
  const std::string title = fmt::format("{} on {} GPUs: {}, {}{}, m = {}", run.model.name.empty() ? "model" : run.model.name,
                                        run.layout.world_size(), run.layout.describe(), to_string(run.exec.schedule),
                                        v > 1 ? fmt::format(" v={}", v) : "", st.micro_batches);
  const std::string subtitle = fmt::format(
      "simulated step {:.3f} s (planner {:.3f} s), bubble {:.1f}% (closed form {:.1f}%), exposed comm on stage {}: "
      "tp {:.3f} s, pp {:.3f} s, dp {:.3f} s",
      r.step_s, st.costs.estimate.time.step, r.bubble_share * 100, st.closed_form_bubble * 100, r.critical_stage,
      r.exposed_tp_s(), r.exposed_pp_s(), r.exposed_dp_s());
  return to_timeline(r, title, subtitle, rows);
}

}  // namespace trident
