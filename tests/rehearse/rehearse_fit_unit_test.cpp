// The rehearsal's self-calibration fit: measurements made by the planner itself with known
// efficiencies are recovered from a different starting table, the fitted table predicts a layout
// it was not fitted on, a measurement the model cannot meet is refused, and the [cost] file the
// fit writes reads back to the same values.
#include <gtest/gtest.h>

#include "core/model_spec.h"
#include "plan/cost_model.h"
#include "rehearse/rehearsal_fit.h"
#include "rehearse/rehearsal_replan.h"
#include "rehearse/rehearsal_shape.h"
#include "rehearse_test_plan.h"

namespace trident::rehearse {
namespace {

// A 4-rank rehearsal of the GPT-3 plan on 2 hosts of 2 (tp 2 inside a host, pp 2 across), as
// prediction_run leaves it: CPU "GPUs", shared memory inside a host (pcie), Ethernet between.
RunSpec rehearsal_run(const CostTable& cost) {
  const RunSpec plan = gpt3_plan();
  Problems p;
  RunSpec r = derive_rehearsal(plan, 4, 2, 128.0 / 12288, 256, p).run;
  EXPECT_TRUE(p.empty());
  r.cluster.nodes = 2, r.cluster.gpus_per_node = 2;
  r.cluster.gpu.fp32_flops = r.cluster.gpu.bf16_flops = 40e9;
  r.cluster.gpu.hbm_Bps = 10e9;
  r.cluster.intra.kind = LinkKind::PCIe, r.cluster.intra.bandwidth_Bps = 2e9, r.cluster.intra.latency_s = 2e-6;
  r.cluster.inter.kind = LinkKind::Ethernet, r.cluster.inter.bandwidth_Bps = 0.1e9, r.cluster.inter.latency_s = 50e-6;
  r.cost = cost;
  return r;
}

CostTable start_table() {
  CostTable c;
  c.gemm_peak_efficiency = 0.8, c.hbm_efficiency = 0.8, c.pcie_efficiency = 0.75, c.network_efficiency = 0.9;
  c.kernel_launch_us = 0.5;
  return c;
}

CostTable known_table() {
  CostTable c = start_table();
  c.gemm_peak_efficiency = 0.37, c.hbm_efficiency = 0.41, c.pcie_efficiency = 0.23, c.network_efficiency = 0.52;
  return c;
}

// The planner's own terms as the "measurement" (the verdict keys fit_cost reads).
std::map<std::string, double> measured_by_planner(const RunSpec& r) {
  const Prediction p = prediction_of(r);
  std::map<std::string, double> m;
  for (const char* k : {"compute", "tp", "cp", "pp", "bubble", "dp", "optimizer"}) m[k] = predicted_term(p, k);
  return m;
}

const FitStep* step_of(const CostFit& f, const std::string& field) {
  for (const auto& s : f.steps)
    if (s.field == field) return &s;
  return nullptr;
}

TEST(RehearsalFit, RecoversKnownEfficienciesFromAnotherStartingTable) {
  const CostFit f = fit_cost(rehearsal_run(start_table()), measured_by_planner(rehearsal_run(known_table())));
  const CostTable k = known_table();
  for (auto [field, member] : {std::pair{"hbm_efficiency", &CostTable::hbm_efficiency},
                               std::pair{"gemm_peak_efficiency", &CostTable::gemm_peak_efficiency},
                               std::pair{"pcie_efficiency", &CostTable::pcie_efficiency},
                               std::pair{"network_efficiency", &CostTable::network_efficiency}}) {
    const FitStep* s = step_of(f, field);
    ASSERT_NE(s, nullptr) << field;
    EXPECT_TRUE(s->fitted) << field << ": " << s->note;
    EXPECT_NEAR(f.after.*member, k.*member, 1e-6 * k.*member) << field;
    // The printed rule gives the printed value: after = before x S / (M - F).
    EXPECT_NEAR(s->after, s->before * s->scaling_s / (s->measured_s - s->fixed_s), 1e-12) << field;
    EXPECT_NEAR(s->predicted_s, s->scaling_s + s->fixed_s, 1e-15) << field;
  }
  EXPECT_EQ(step_of(f, "pcie_efficiency")->terms, std::vector<std::string>{"tp"});  // TP inside a host
  // PP's sends and the tied embedding's sync (first and last stage) cross the hosts; TP does not.
  EXPECT_EQ(step_of(f, "network_efficiency")->terms, (std::vector<std::string>{"pp", "dp"}));
  EXPECT_EQ(f.after.kernel_launch_us, start_table().kernel_launch_us);  // not identified: kept
}

TEST(RehearsalFit, FittedTablePredictsALayoutItWasNotFittedOn) {
  const CostFit f = fit_cost(rehearsal_run(start_table()), measured_by_planner(rehearsal_run(known_table())));
  RunSpec across = rehearsal_run(f.after), truth = rehearsal_run(known_table());
  const auto order = tp_across_order(across.layout, 2);
  ASSERT_TRUE(order.has_value());
  across.layout.order = truth.layout.order = *order;  // TP over the Ethernet link: only PP's sends fitted it
  const Prediction p = prediction_of(across), t = prediction_of(truth);
  EXPECT_NEAR(p.time.tp_comm, t.time.tp_comm, 1e-9 * t.time.tp_comm);
  EXPECT_NEAR(p.step_s, t.step_s, 1e-9 * t.step_s);
  EXPECT_GT(p.time.tp_comm, prediction_of(rehearsal_run(known_table())).time.tp_comm);  // slower than TP inside a host
}

TEST(RehearsalFit, MeasurementBelowWhatTheValueCannotChangeIsNotFitted) {
  const RunSpec r = rehearsal_run(start_table());
  auto m = measured_by_planner(r);
  m["pp"] = m["dp"] = 0;  // faster than the link's latency alone
  const CostFit f = fit_cost(r, m);
  const FitStep* s = step_of(f, "network_efficiency");
  EXPECT_FALSE(s->fitted);
  EXPECT_NE(s->note.find("not fitted"), std::string::npos) << s->note;
  EXPECT_EQ(f.after.network_efficiency, start_table().network_efficiency);
  EXPECT_NE(fit_text(f).find("not fitted"), std::string::npos);
}

TEST(RehearsalFit, ValueAboveItsRangeIsClampedAndSaysSo) {
  const RunSpec r = rehearsal_run(start_table());
  auto m = measured_by_planner(r);
  m["tp"] *= 0.5;  // twice as fast as at 0.75 of the link: 1.5 of it
  const CostFit f = fit_cost(r, m);
  const FitStep* s = step_of(f, "pcie_efficiency");
  EXPECT_TRUE(s->fitted);
  EXPECT_EQ(s->after, 1.0);
  EXPECT_NE(s->note.find("clamped to 1"), std::string::npos) << s->note;
}

// Ranks that share cores wait for their peer to be scheduled: the TP term is then almost all
// latency, and a share fitted to it would stand for that wait. The latency is fitted instead (and
// recovered), the share kept with the reason, and the fitted latency listed for the cluster file.
TEST(RehearsalFit, LatencyBoundTermFitsTheLinkLatencyNotItsShare) {
  RunSpec start = rehearsal_run(start_table()), truth = rehearsal_run(start_table());
  start.cluster.intra.latency_s = 300e-6, truth.cluster.intra.latency_s = 450e-6;
  const CostFit f = fit_cost(start, measured_by_planner(truth));
  const FitStep* s = step_of(f, "intra-latency-us");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->fitted) << s->note;
  EXPECT_TRUE(s->latency);
  EXPECT_EQ(s->terms, std::vector<std::string>{"tp"});
  EXPECT_NEAR(s->after, 450.0, 1e-6 * 450);
  EXPECT_NEAR(s->after, s->before * (s->measured_s - s->fixed_s) / s->scaling_s, 1e-9);  // the printed rule
  EXPECT_EQ(step_of(f, "pcie_efficiency"), nullptr);
  EXPECT_EQ(f.after.pcie_efficiency, start_table().pcie_efficiency);
  bool kept = false;
  for (const auto& [field, why] : f.kept) kept |= field == "pcie_efficiency" && why.find("latency-bound") != std::string::npos;
  EXPECT_TRUE(kept);
  ASSERT_EQ(f.cluster_after.size(), 1u);
  EXPECT_EQ(f.cluster_after[0].first, "intra-latency-us");
  EXPECT_NEAR(f.cluster_after[0].second, 450.0, 1e-6 * 450);
  // A bandwidth-bound link still fits its share (the known-efficiencies case above): at 2 us no latency is fitted.
  EXPECT_EQ(step_of(fit_cost(rehearsal_run(start_table()), measured_by_planner(rehearsal_run(known_table()))),
                    "intra-latency-us"),
            nullptr);
}

TEST(CostToml, ReadsBackToTheSameValues) {
  CostTable t = known_table();
  t.gemm_half_dim = 17.123456789, t.kernel_launch_us = 0.0123;
  Problems p;
  CostTable back;
  apply_cost_toml(cost_toml(t, {"a comment", "another"}), "fitted.toml", cluster_preset("dgx-a100-80g").gpu, back, p);
  ASSERT_TRUE(p.empty());
  for (const auto& f : cost_fields()) EXPECT_EQ(back.*(f.member), t.*(f.member)) << f.name;
}

// Back to the plan: a link share goes back only once it came closer out of sample, as its ratio.
TEST(RehearsalReplan, OnlyAShareThatHeldOutOfSampleGoesBackAsItsRatio) {
  const CostFit f = fit_cost(rehearsal_run(start_table()), measured_by_planner(rehearsal_run(known_table())));
  RunSpec plan;  // a full-scale plan: NVLink inside a node, InfiniBand between
  plan.model = model_preset("gpt3-175b");
  plan.cluster = cluster_preset("dgx-a100-80g");
  plan.cluster.nodes = 64;
  plan.layout.tp = 8, plan.layout.pp = 8, plan.layout.dp = 8, plan.layout.order = "tp-dp-pp";
  plan.exec.micro_batch_size = 1, plan.exec.global_batch_size = 256, plan.exec.virtual_stages = 1;
  plan.exec.schedule = ScheduleKind::OneFOneB, plan.exec.precision = Precision::BF16;
  plan.cost = builtin_cost(plan.cluster.gpu);
  LinkCheck held{"network_efficiency", "other layout", {"tp"}, 1.0, 0.5, 0.9};  // closer: goes back
  LinkCheck missed{"pcie_efficiency", "other layout", {"pp"}, 1.0, 0.9, 0.5};   // farther: stays
  const Replan r = replan(plan, f, {held, missed}, 0);
  ASSERT_EQ(r.transfers.size(), 2u);
  const LinkTransfer& inside = r.transfers[0];
  const LinkTransfer& between = r.transfers[1];
  EXPECT_EQ(inside.plan_field, "nvlink_efficiency");
  EXPECT_FALSE(inside.applied);
  EXPECT_EQ(r.after.nvlink_efficiency, r.before.nvlink_efficiency);
  EXPECT_NE(inside.note.find("not closer"), std::string::npos) << inside.note;
  EXPECT_EQ(between.plan_field, "network_efficiency");
  EXPECT_TRUE(between.applied) << between.note;
  const double ratio = known_table().network_efficiency / start_table().network_efficiency;
  EXPECT_NEAR(between.ratio(), ratio, 1e-9);
  EXPECT_NEAR(r.after.network_efficiency, r.before.network_efficiency * ratio, 1e-9);
  ASSERT_TRUE(r.plan_before && r.plan_after && r.best_before && r.best_after);
  EXPECT_GT(r.plan_after->time.step, r.plan_before->time.step);  // a slower network, a slower step
  EXPECT_EQ(r.plan_after->peak_memory().total_bytes(), r.plan_before->peak_memory().total_bytes());
  EXPECT_NE(replan_text(r).find(r.sentence), std::string::npos);
  const Replan none = replan(plan, f, {}, 0);  // nothing tested out of sample: nothing goes back
  EXPECT_FALSE(none.transfers[0].applied || none.transfers[1].applied);
  EXPECT_NE(none.sentence.find("Nothing goes back to the plan"), std::string::npos) << none.sentence;
}

}  // namespace
}  // namespace trident::rehearse
