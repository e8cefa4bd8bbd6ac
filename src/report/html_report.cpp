#include "report/html_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/step_terms.h"
#include "core/dimensions.h"
#include "core/topology.h"
#include "core/units.h"
#include "report/output_file.h"
#include "report/pipeline_svg.h"
#include "report/topology_report.h"

namespace trident {

namespace {

std::string gib_text(double bytes) { return fmt::format("{:.1f}", bytes / kGiB); }

std::string layout_text(const plan::Estimate& e) {
  const RunSpec& r = e.run;
  std::string s = fmt::format("{} ({}), b {}, {}", layout_sizes_text(r.layout), r.layout.order,
                              r.exec.micro_batch_size, to_string(r.exec.schedule));
  if (r.exec.schedule == ScheduleKind::Interleaved) s += fmt::format(" v {}", r.exec.virtual_stages);
  s += fmt::format(", ZeRO {}, recompute {}{}", r.exec.zero, to_string(r.exec.recompute),
                   r.exec.sequence_parallel ? ", sp" : "");
  return s;
}

}  // namespace

HtmlTable candidates_table(const plan::SearchResult& result) {
  HtmlTable t;
  t.caption = fmt::format("best {} of {} feasible layouts ({} combinations considered)", result.best.size(),
                          result.feasible, result.enumerated);
  t.header = {"#", "layout", "step s", "tokens/s", "MFU", "memory GiB (most loaded stage)", "capacity GiB", "m"};
  for (size_t i = 0; i < result.best.size(); ++i) {
    const auto& e = result.best[i];
    t.rows.push_back({std::to_string(i + 1) + " " + layout_text(e), "", fmt::format("{:.3f}", e.time.step),
                      fmt::format("{:.0f}", e.tokens_per_s), fmt::format("{:.1f}%", 100 * e.mfu),
                      gib_text(e.peak_memory().total_bytes()), gib_text(e.capacity_bytes), std::to_string(e.micro_batches)});
    t.rows.back().erase(t.rows.back().begin() + 1);  // the layout sits in the first column
  }
  t.header.erase(t.header.begin() + 1);
  t.header[0] = "# layout";
  return t;
}

HtmlPage run_page(const RunSpec& run, const plan::Estimate& e, const std::string& title, const SimulatedStep* step) {
  HtmlPage p;
  p.title = title;
  p.summary.push_back("model: " + describe_model(run.model));
  p.summary.push_back(fmt::format("cluster: {} nodes x {} GPUs ({}), {} GPUs in all", run.cluster.nodes,
                                  run.cluster.gpus_per_node, run.cluster.name, run.cluster.world_size()));
  p.summary.push_back("layout: " + layout_text(e) + fmt::format(", global batch {}, m = {} micro-batches per pipeline",
                                                                 run.exec.global_batch_size, e.micro_batches));
  p.summary.push_back(fmt::format("predicted: step {:.3f} s, {:.0f} tokens/s, MFU {:.1f}%, {} GiB on the most loaded GPU "
                                  "of {} GiB: {}",
                                  e.time.step, e.tokens_per_s, 100 * e.mfu, gib_text(e.peak_memory().total_bytes()),
                                  gib_text(e.capacity_bytes), e.fits ? "fits" : "DOES NOT FIT"));

  HtmlBars mem;
  mem.unit = "GiB";
  mem.limit = e.capacity_bytes / kGiB;
  mem.limit_label = fmt::format("capacity {} GiB", gib_text(e.capacity_bytes));
  mem.caption = "per GPU of each stage: weights, gradients, optimizer states, activations of the micro-batches in "
                "flight, and the fixed overhead (context, buffers, fragmentation)";
  for (const auto& sm : e.memory)
    mem.bars.push_back({fmt::format("stage {} ({} layers)", sm.stage, sm.layers),
                        {{"weights", sm.weights_bytes / kGiB},
                         {"gradients", sm.gradients_bytes / kGiB},
                         {"optimizer", sm.optimizer_bytes / kGiB},
                         {"activations", sm.activations_bytes / kGiB},
                         {"overhead", sm.overhead_bytes / kGiB}}});
  p.memory = mem;

  const auto& t = e.time;
  HtmlBars tb;
  tb.unit = "s";
  tb.caption = fmt::format("planner: the slowest stage's m x (forward + backward) plus the pipeline's fill and drain, "
                           "exposed DP reduction and optimizer = {:.3f} s", t.step);
  // Every term of the step (core/step_terms), keyed as the palette colours them.
  tb.bars.push_back({"planner step", {}});
  for (const PlannedTerm& p : planned_step_terms(run, t)) tb.bars.back().parts.push_back({p.term->key, p.seconds});
  HtmlTable tt;
  tt.header = {"part", "seconds", "share"};
  for (const auto& [name, v] : tb.bars.front().parts)
    tt.rows.push_back({name, fmt::format("{:.4f}", v), fmt::format("{:.1f}%", t.step > 0 ? 100 * v / t.step : 0.0)});
  tt.rows.push_back({"step", fmt::format("{:.4f}", t.step), "100%"});

  const Mesh mesh(run.layout, run.cluster.gpus_per_node);
  std::optional<SimulatedStep> own;
  if (!step) {
    try {
      own = simulate_step(run);
      step = &*own;
    } catch (const std::exception& ex) {
      p.notes.push_back(std::string("no timeline: ") + ex.what());
    }
  }
  if (step) {
    const auto& r = step->result;
    // The stage that ends last: its compute (TP collectives taken out), exposed communication,
    // bubble and optimizer; what is left of its step is waiting not explained by those.
    const auto& cs = r.stages[size_t(r.critical_stage)];
    std::vector<std::pair<std::string, double>> parts = {{"compute", cs.compute_s - cs.exposed_tp_s},
                                                         {"tp", cs.exposed_tp_s},
                                                         {"pp", cs.exposed_pp_s},
                                                         {"bubble", cs.bubble_s},
                                                         {"dp", cs.exposed_dp_s},
                                                         {"optimizer", cs.optimizer_s}};
    double sum = 0;
    for (const auto& x : parts) sum += x.second;
    if (r.step_s - sum > 1e-9 * r.step_s) parts.push_back({"other", r.step_s - sum});
    tb.bars.push_back({"simulated stage " + std::to_string(r.critical_stage), parts});
    tt.rows.push_back({"simulated step (critical stage " + std::to_string(r.critical_stage) + ")",
                       fmt::format("{:.4f}", r.step_s), fmt::format("{:+.1f}% vs planner", t.step > 0 ? 100 * (r.step_s / t.step - 1) : 0.0)});
    Timeline tl = step_timeline(run, mesh, *step);
    // Thin blocks (interleaved schedules, many micro-batches) are unreadable over the whole step:
    // add a window the reader zooms and moves, opening on the first micro-batches filling the pipeline.
    if (const double to = zoom_window_end(tl); to > 0) {
      p.timeline_zoom_to_s = to;
      p.timeline_zoom_caption = fmt::format(
          "A window on the {:.3f} s step, opening on 0 - {:.3f} s: the pipeline filling, until the last stage has run "
          "its first {} forward and backward blocks. Zoom and move it with the sliders or by dragging; hover a block "
          "for its micro-batch and chunk",
          tl.end_s(), to, kZoomBlocks);
    }
    p.timeline = tl;
  }
  p.time_breakdown = tb;
  p.time_table = tt;

  const TopologyTable topo = build_topology(mesh, run.cluster, false, run.model.is_moe());
  HtmlTable tp;
  tp.header = {"group", "size", "groups", "link", "GB/s per GPU", "nodes per group", "example GPUs"};
  for (const auto& row : topo.rows) {
    std::string example;
    if (!row.examples.empty()) example = format_ranks(row.examples.front().group.ranks);
    tp.rows.push_back({to_string(row.kind), std::to_string(row.group_size), std::to_string(row.groups),
                       to_string(row.link), fmt::format("{:.0f}", row.bandwidth_Bps / 1e9),
                       row.min_nodes == row.max_nodes ? std::to_string(row.min_nodes)
                                                      : fmt::format("{}-{}", row.min_nodes, row.max_nodes),
                       example});
  }
  p.topology = tp;
  return p;
}

HtmlTable findings_table(const std::vector<plan::Finding>& findings) {
  HtmlTable t;
  t.header = {"severity", "code", "finding", "fix"};
  for (const auto& f : findings) t.rows.push_back({to_string(f.severity), f.code, f.message, f.fix});
  if (findings.empty()) t.caption = "no findings";
  return t;
}

void write_html(const std::string& path, const HtmlPage& page) { write_output_file(path, html_page(page), "--html"); }

}  // namespace trident
