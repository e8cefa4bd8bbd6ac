// The planner's step is the sum of the step-time table's terms (core/step_terms.h): a cost added
// to the step without its row (and so missing from every report, the rehearsal's prediction and
// its verdict) fails here. Across schedules, ZeRO stages, cp and ep.
#include <gtest/gtest.h>

#include "core/step_terms.h"
#include "plan/estimate.h"

using namespace trident;

namespace {

RunSpec run_of(const char* model, const char* cluster, int64_t nodes, Layout L, int64_t mbs, int64_t gbs) {
  RunSpec r;
  r.model = model_preset(model);
  r.cluster = cluster_preset(cluster);
  r.cluster.nodes = nodes;
  r.layout = L;
  r.exec.micro_batch_size = mbs, r.exec.global_batch_size = gbs;
  r.exec.precision = Precision::BF16, r.exec.attention = AttentionKind::Flash, r.exec.grad_bits = 16;
  r.exec.sequence_parallel = L.tp > 1;
  return r;
}

double sum_of_terms(const plan::Estimate& e) {
  double s = 0;
  for (const StepTerm& t : step_time_terms())
    if (!t.part_of) s += e.time.*t.planned;
  return s;
}

void expect_terms_add_up(const RunSpec& r, const std::string& what) {
  const plan::Estimate e = plan::estimate(r, 0.0);
  ASSERT_GT(e.time.step, 0) << what;
  EXPECT_NEAR(sum_of_terms(e), e.time.step, 1e-9 * e.time.step) << what;
}

}  // namespace

TEST(StepTerms, planned_terms_add_up_to_the_step) {
  for (ScheduleKind sk : {ScheduleKind::OneFOneB, ScheduleKind::GPipe, ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1})
    for (int zero : {0, 1, 2, 3}) {
      RunSpec r = run_of("gpt3-175b", "dgx-a100-80g", 64, Layout{.tp = 8, .dp = 8, .pp = 8, .order = "tp-dp-pp"}, 1, 512);
      r.exec.schedule = sk, r.exec.zero = zero;
      if (sk == ScheduleKind::Interleaved) r.exec.virtual_stages = 3;
      r.exec.overlap = Overlap{true, true, true};
      expect_terms_add_up(r, "gpt3 schedule " + to_string(sk) + " zero " + std::to_string(zero));
    }
  RunSpec cp = run_of("llama3-70b", "dgx-h100", 64, Layout{.tp = 4, .cp = 2, .dp = 32, .pp = 2, .order = "tp-cp-dp-pp"}, 1, 1024);
  cp.model.seq_len = 16384;
  expect_terms_add_up(cp, "llama3-70b cp 2");
  for (int zero : {1, 3}) {
    RunSpec ep = run_of("mixtral-8x22b", "dgx-h100", 8, Layout{.tp = 1, .dp = 16, .pp = 4, .order = "tp-ep-dp-pp", .ep = 8}, 1, 256);
    ep.exec.zero = zero;
    ep.model.moe_load_imbalance = 1.3;  // an EP wait too
    expect_terms_add_up(ep, "mixtral ep 8 zero " + std::to_string(zero));
  }
  // A Python stack's host issue floor (plan/host_issue.h): Mixtral's 8 experts at micro-batch 1
  // over 2 pipeline stages, at a host cost that makes the host the floor.
  RunSpec host = run_of("mixtral-8x7b", "dgx-h100", 2, Layout{.tp = 1, .dp = 8, .pp = 2, .order = "tp-ep-dp-pp", .ep = 8}, 1, 64);
  host.model.seq_len = 512;
  apply_stack(*find_stack("megatron-core-te"), host.exec);
  host.exec.stack = "megatron-core-te";
  CostTable c = cost_table(host);
  c.host_launch_us = 200;
  const plan::Estimate e = plan::estimate(host, 0.0, c);
  EXPECT_GT(e.time.host, 0.1 * e.time.step);
  EXPECT_NEAR(sum_of_terms(e), e.time.step, 1e-9 * e.time.step);
}
