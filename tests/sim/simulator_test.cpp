#include <gtest/gtest.h>

#include "core/pipeline_bubble.h"
#include "sim/simulator.h"

namespace trident::sim {
namespace {

SimResult run(ScheduleKind kind, int64_t p, int64_t m, int64_t v, double f = 1.0, double b = 2.0, double p2p = 0) {
  auto sc = build_schedule(kind, p, m, v);
  auto costs = uniform_costs(p, v, f, b, p2p);
  return simulate(sc, costs);
}

TEST(Simulator, one_f_one_b_bubble_matches_closed_form_for_uniform_stages) {
  for (int64_t p : {2, 4, 8, 16})
    for (int64_t m : {1, 3, 8, 32, 64}) {
      auto r = run(ScheduleKind::OneFOneB, p, m, 1);
      const double expect = closed_form_bubble_share(ScheduleKind::OneFOneB, p, m, 1);
      EXPECT_NEAR(r.bubble_share, expect, 0.01 * expect + 1e-12) << "p=" << p << " m=" << m;
      EXPECT_NEAR(r.step_s, double(m + p - 1) * 3.0, 1e-9) << "p=" << p << " m=" << m;
    }
}

TEST(Simulator, gpipe_bubble_matches_closed_form) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {1, 4, 16}) {
      auto r = run(ScheduleKind::GPipe, p, m, 1);
      const double expect = closed_form_bubble_share(ScheduleKind::GPipe, p, m, 1);
      EXPECT_NEAR(r.bubble_share, expect, 0.01 * expect + 1e-12) << "p=" << p << " m=" << m;
    }
}

TEST(Simulator, interleaved_bubble_matches_closed_form) {
  for (int64_t p : {2, 4, 8})
    for (int64_t v : {2, 3, 4})
      for (int64_t mult : {2, 4, 8}) {
        const int64_t m = p * mult;
        // Each chunk holds 1/v of the stage's layers.
        auto sc = build_schedule(ScheduleKind::Interleaved, p, m, v);
        auto r = simulate(sc, uniform_costs(p, v, 1.0 / double(v), 2.0 / double(v)));
        const double expect = closed_form_bubble_share(ScheduleKind::Interleaved, p, m, v);
        EXPECT_NEAR(r.bubble_share, expect, 0.01 * expect) << "p=" << p << " m=" << m << " v=" << v;
      }
}

TEST(Simulator, interleaving_shrinks_the_bubble_of_one_f_one_b) {
  auto plain = run(ScheduleKind::OneFOneB, 8, 16, 1);
  auto sc = build_schedule(ScheduleKind::Interleaved, 8, 16, 4);
  auto inter = simulate(sc, uniform_costs(8, 4, 0.25, 0.5));
  EXPECT_LT(inter.bubble_share, plain.bubble_share * 0.5);
  EXPECT_LT(inter.step_s, plain.step_s);
}

TEST(Simulator, zero_bubble_h1_has_a_smaller_bubble_than_one_f_one_b) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {4, 8, 32}) {
      auto one = run(ScheduleKind::OneFOneB, p, m, 1);
      auto zb = run(ScheduleKind::ZeroBubbleH1, p, m, 1);
      EXPECT_LT(zb.bubble_share, one.bubble_share) << "p=" << p << " m=" << m;
      EXPECT_LT(zb.step_s, one.step_s) << "p=" << p << " m=" << m;
      // Same total work on every stage.
      for (int64_t s = 0; s < p; ++s) EXPECT_NEAR(zb.stages[s].compute_s, one.stages[s].compute_s, 1e-9);
    }
}

TEST(Simulator, zero_bubble_h1_reaches_a_third_of_the_one_f_one_b_bubble_when_f_b_w_are_equal) {
  // F = B(input) = W = 1: 1F1B's bubble is (p-1)(F+B+W) = 3(p-1); ZB-H1's is (p-1)(F+B-W) = p-1.
  const int64_t p = 4, m = 16;
  auto zb = run(ScheduleKind::ZeroBubbleH1, p, m, 1, 1.0, 2.0);
  auto one = run(ScheduleKind::OneFOneB, p, m, 1, 1.0, 2.0);
  const double one_bubble = one.step_s - 3.0 * m, zb_bubble = zb.step_s - 3.0 * m;
  EXPECT_NEAR(one_bubble, 3.0 * (p - 1), 1e-9);
  EXPECT_LE(zb_bubble, 1.0 * (p - 1) + 1e-9) << "zb step " << zb.step_s;
}

TEST(Simulator, uneven_stage_paces_the_pipeline) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 4, 16, 1);
  auto costs = uniform_costs(4, 1, 1.0, 2.0);
  costs.stages[2].chunks[0].forward_s = 1.5;
  costs.stages[2].chunks[0].backward_s = 3.0;
  auto r = simulate(sc, costs);
  // The slow stage's work alone is 16 x 4.5 = 72 s; the step is longer than that and longer than uniform.
  EXPECT_GT(r.step_s, 72.0);
  EXPECT_GT(r.step_s, double(16 + 3) * 3.0);
  EXPECT_LT(r.stages[2].bubble_s, r.stages[0].bubble_s);
}

TEST(Simulator, pipeline_messages_show_up_as_exposed_pp_comm) {
  auto free_comm = run(ScheduleKind::OneFOneB, 4, 8, 1, 1.0, 2.0, 0.0);
  auto slow_comm = run(ScheduleKind::OneFOneB, 4, 8, 1, 1.0, 2.0, 0.1);
  EXPECT_GT(slow_comm.step_s, free_comm.step_s);
  EXPECT_GT(slow_comm.exposed_pp_s(), 0.0);
  EXPECT_EQ(free_comm.exposed_pp_s(), 0.0);
  // Blocking sends: stage 1 sends 8 activations and 8 gradients, each 0.1 s.
  EXPECT_GE(slow_comm.stages[1].exposed_pp_s, 1.6 - 1e-9);
}

TEST(Simulator, dp_reduction_hides_behind_the_last_backwards_until_it_is_too_long) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 2, 4, 1);
  auto costs = uniform_costs(2, 1, 1.0, 2.0);
  for (auto& st : costs.stages) {
    st.dp_reduce_s = 0.8;  // shorter than the last backward (2 s)
    st.dp_buckets = 4;
    st.optimizer_s = 0.5;
  }
  auto r = simulate(sc, costs);
  const double pipeline = (4 + 1) * 3.0;
  // Only the last bucket (0.2 s) sticks out past the last backward.
  EXPECT_NEAR(r.step_s, pipeline + 0.2 + 0.5, 1e-9);
  EXPECT_NEAR(r.stages[0].exposed_dp_s, 0.2, 1e-9);
  for (auto& st : costs.stages) st.dp_reduce_s = 8.0;
  auto r2 = simulate(sc, costs);
  // Buckets become ready over the last backward (2 s): 8 s of reduction ends 8 - 2 + 0.5 + ... past it.
  EXPECT_GT(r2.stages[0].exposed_dp_s, 6.0);
  EXPECT_NEAR(r2.step_s, r.step_s - 0.2 + r2.stages[0].exposed_dp_s, 1e-9);
}

TEST(Simulator, tied_embedding_sync_waits_for_first_and_last_stage) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 3, 3, 1);
  auto costs = uniform_costs(3, 1, 1.0, 2.0);
  costs.stages[0].embedding_sync_s = costs.stages[2].embedding_sync_s = 0.25;
  auto r = simulate(sc, costs);
  auto base = simulate(sc, uniform_costs(3, 1, 1.0, 2.0));
  EXPECT_NEAR(r.step_s, base.step_s + 0.25, 1e-9);
  // Stage 2 finishes its backwards first, then waits for stage 0 to sync.
  EXPECT_GT(r.stages[2].exposed_dp_s, 0.25);
  EXPECT_NEAR(r.stages[1].exposed_dp_s, 0.0, 1e-12);
}

TEST(Simulator, busy_plus_idle_is_the_step_on_every_stage) {
  auto r = run(ScheduleKind::Interleaved, 4, 8, 2, 0.5, 1.0, 0.05);
  for (const auto& st : r.stages) {
    EXPECT_NEAR(st.busy_s + st.idle_s, r.step_s, 1e-9);
    EXPECT_NEAR(st.busy_s, 16 * 1.5, 1e-9);
  }
}

TEST(Simulator, costs_that_do_not_match_the_schedule_are_an_input_error) {
  auto sc = build_schedule(ScheduleKind::Interleaved, 4, 8, 2);
  EXPECT_THROW(simulate(sc, uniform_costs(4, 1, 1, 2)), InputError);
  EXPECT_THROW(simulate(sc, uniform_costs(3, 2, 1, 2)), InputError);
}

}  // namespace
}  // namespace trident::sim
