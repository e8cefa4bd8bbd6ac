#include <gtest/gtest.h>

#include <algorithm>

#include "schedule/schedule.h"

namespace trident {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

int64_t count(const PipelineSchedule& sc, int64_t stage, ActionKind k) {
  return std::count_if(sc.programs[stage].begin(), sc.programs[stage].end(), [&](const Action& a) { return a.kind == k; });
}

TEST(Schedule, every_schedule_validates_for_many_shapes) {
  int checked = 0;
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1})
    for (int64_t p = 1; p <= 9; ++p)
      for (int64_t m = 1; m <= 20; ++m) {
        auto sc = build_schedule(kind, p, m, 1);
        auto errors = validate_schedule(sc);
        EXPECT_TRUE(errors.empty()) << to_string(kind) << " p=" << p << " m=" << m << "\n" << join(errors);
        ++checked;
      }
  for (int64_t p = 2; p <= 8; ++p)
    for (int64_t v = 2; v <= 5; ++v)
      for (int64_t m = p; m <= 4 * p; m += p) {
        auto sc = build_schedule(ScheduleKind::Interleaved, p, m, v);
        auto errors = validate_schedule(sc);
        EXPECT_TRUE(errors.empty()) << "interleaved p=" << p << " m=" << m << " v=" << v << "\n" << join(errors);
        ++checked;
      }
  EXPECT_GT(checked, 600);
}

TEST(Schedule, stage_counts_match_micro_batches_and_chunks) {
  auto sc = build_schedule(ScheduleKind::Interleaved, 4, 8, 3);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(count(sc, s, ActionKind::Forward), 24);
    EXPECT_EQ(count(sc, s, ActionKind::Backward), 24);
  }
  // Only virtual stage 0 (stage 0, chunk 0) skips receiving activations: 8 of its 24 forwards.
  EXPECT_EQ(count(sc, 0, ActionKind::RecvActivation), 16);
  EXPECT_EQ(count(sc, 3, ActionKind::SendActivation), 16);
  auto zb = build_schedule(ScheduleKind::ZeroBubbleH1, 4, 8, 1);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(count(zb, s, ActionKind::BackwardInput), 8);
    EXPECT_EQ(count(zb, s, ActionKind::BackwardWeight), 8);
    EXPECT_EQ(count(zb, s, ActionKind::Backward), 0);
  }
}

TEST(Schedule, one_f_one_b_warmup_is_p_minus_stage_minus_one) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 4, 8, 1);
  for (int64_t s = 0; s < 4; ++s) {
    int64_t forwards_before_first_backward = 0;
    for (const Action& a : sc.programs[s]) {
      if (a.kind == ActionKind::Backward) break;
      if (a.kind == ActionKind::Forward) ++forwards_before_first_backward;
    }
    EXPECT_EQ(forwards_before_first_backward, 4 - s) << "stage " << s;  // warm-up + the first steady forward
  }
}

TEST(Schedule, gpipe_runs_all_forwards_before_any_backward) {
  auto sc = build_schedule(ScheduleKind::GPipe, 3, 5, 1);
  for (const auto& prog : sc.programs) {
    auto first_b = std::find_if(prog.begin(), prog.end(), [](const Action& a) { return a.kind == ActionKind::Backward; });
    EXPECT_EQ(std::count_if(prog.begin(), first_b, [](const Action& a) { return a.kind == ActionKind::Forward; }), 5);
  }
}

TEST(Schedule, interleaved_follows_megatron_chunk_order) {
  // p=2, v=2: virtual micro-batches 0..3 of the first group are (mb0,c0) (mb1,c0) (mb0,c1) (mb1,c1).
  auto sc = build_schedule(ScheduleKind::Interleaved, 2, 4, 2);
  std::vector<std::pair<int, int>> forwards;
  for (const Action& a : sc.programs[0])
    if (a.kind == ActionKind::Forward) forwards.push_back({a.micro_batch, a.chunk});
  std::vector<std::pair<int, int>> expect{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  EXPECT_EQ(forwards, expect);
  // Stage 1's last chunk sends nothing forward; stage 1 chunk 0 sends to stage 0 chunk 1.
  for (const Action& a : sc.programs[1])
    if (a.kind == ActionKind::SendActivation) {
      EXPECT_EQ(a.chunk, 0);
      EXPECT_EQ(a.peer, 0);
      EXPECT_EQ(a.peer_chunk, 1);
    }
}

TEST(Schedule, message_tags_agree_between_sender_and_receiver_and_are_unique) {
  auto sc = build_schedule(ScheduleKind::Interleaved, 4, 8, 2);
  std::map<int32_t, int> sends, recvs;
  for (int64_t s = 0; s < 4; ++s)
    for (const Action& a : sc.programs[s]) {
      if (is_send(a.kind)) ++sends[message_tag(a, s, 4, 2)];
      if (is_recv(a.kind)) ++recvs[message_tag(a, s, 4, 2)];
    }
  EXPECT_EQ(sends, recvs);
  for (auto& [tag, n] : sends) EXPECT_EQ(n, 1) << tag;
}

TEST(Schedule, interleaved_with_m_not_multiple_of_p_names_nearest_valid_settings) {
  try {
    build_schedule(ScheduleKind::Interleaved, 4, 10, 2);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].what.find("multiple"), std::string::npos);
    EXPECT_NE(e.problems()[0].fix.find("8 or 12"), std::string::npos) << e.problems()[0].fix;
    EXPECT_EQ(e.problems()[0].code, "schedule-interleaved-m");
  }
}

TEST(Schedule, bad_shapes_report_every_problem) {
  Problems problems;
  check_schedule_shape(ScheduleKind::Interleaved, 1, 3, 1, problems);
  EXPECT_EQ(problems.size(), 2u);  // pp 1 and v 1 (m % 1 == 0 holds)
  Problems p2;
  check_schedule_shape(ScheduleKind::OneFOneB, 4, 0, 2, p2);
  EXPECT_EQ(p2.size(), 1u);  // m = 0 stops further checks
  Problems p3;
  check_schedule_shape(ScheduleKind::GPipe, 4, 8, 2, p3);
  EXPECT_EQ(p3.size(), 1u);
  EXPECT_THROW(build_schedule(ScheduleKind::OneFOneB, 4, 8, 3), InputError);
}

TEST(Validate, detects_a_receive_moved_after_its_forward) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 3, 4, 1);
  auto& prog = sc.programs[1];
  auto it = std::find_if(prog.begin(), prog.end(), [](const Action& a) { return a.kind == ActionKind::RecvActivation; });
  std::iter_swap(it, it + 1);
  auto errors = validate_schedule(sc);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(join(errors).find("received after forward"), std::string::npos) << join(errors);
}

TEST(Validate, detects_a_missing_send) {
  auto sc = build_schedule(ScheduleKind::GPipe, 3, 4, 1);
  auto& prog = sc.programs[0];
  prog.erase(std::find_if(prog.begin(), prog.end(), [](const Action& a) { return a.kind == ActionKind::SendActivation; }));
  auto errors = validate_schedule(sc);
  EXPECT_NE(join(errors).find("never sent"), std::string::npos) << join(errors);
  EXPECT_NE(join(errors).find("differ"), std::string::npos) << join(errors);
}

TEST(Validate, detects_a_deadlock_from_waiting_for_a_gradient_too_early) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 2, 2, 1);
  auto& prog = sc.programs[0];
  auto it = std::find_if(prog.begin(), prog.end(), [](const Action& a) { return a.kind == ActionKind::RecvGradient; });
  Action recv = *it;
  prog.erase(it);
  prog.insert(prog.begin(), recv);  // wait for mb 0's gradient before sending its activation
  auto errors = validate_schedule(sc);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(join(errors).find("deadlock"), std::string::npos) << join(errors);
}

TEST(Validate, detects_swapped_receive_order_on_a_channel) {
  auto sc = build_schedule(ScheduleKind::GPipe, 2, 3, 1);
  auto& prog = sc.programs[1];
  // Swap the micro-batch of the first two activation receives and their forwards.
  std::vector<size_t> recv_idx;
  for (size_t i = 0; i < prog.size(); ++i)
    if (prog[i].kind == ActionKind::RecvActivation) recv_idx.push_back(i);
  std::swap(prog[recv_idx[0]].micro_batch, prog[recv_idx[1]].micro_batch);
  std::swap(prog[recv_idx[0] + 1].micro_batch, prog[recv_idx[1] + 1].micro_batch);
  auto errors = validate_schedule(sc);
  EXPECT_NE(join(errors).find("differ in number or order"), std::string::npos) << join(errors);
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

TEST(Schedule, in_flight_micro_batches_match_the_memory_model) {
  // formulas.md: GPipe holds m on every stage; 1F1B and ZB-H1 min(m, p - s).
  for (int64_t p : {1, 2, 4, 8})
    for (int64_t m : {1, 3, 8, 16})
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(peak_in_flight(build_schedule(ScheduleKind::GPipe, p, m, 1), s), m);
        EXPECT_EQ(peak_in_flight(build_schedule(ScheduleKind::OneFOneB, p, m, 1), s), std::min(m, p - s));
        EXPECT_EQ(peak_in_flight(build_schedule(ScheduleKind::ZeroBubbleH1, p, m, 1), s), std::min(m, p - s));
      }
  // Interleaved (Megatron): stage 0 holds (p-1)*2 + (v-1)*p + 1 chunks = p*v*(1 + (p-1)/(p*v)) + ... at most m*v.
  for (int64_t p : {2, 4, 8})
    for (int64_t v : {2, 4}) {
      const int64_t m = 2 * p;
      EXPECT_EQ(peak_in_flight(build_schedule(ScheduleKind::Interleaved, p, m, v), 0),
                std::min(m * v, (p - 1) * 2 + (v - 1) * p + 1));
    }
}

TEST(Schedule, format_lists_compute_in_order) {
  auto sc = build_schedule(ScheduleKind::OneFOneB, 2, 3, 1);
  EXPECT_EQ(format_schedule(sc), "stage 0: F0 F1 B0 F2 B1 B2\nstage 1: F0 B0 F1 B1 F2 B2\n");
  auto il = build_schedule(ScheduleKind::Interleaved, 2, 2, 2);
  EXPECT_NE(format_schedule(il).find("F1.1"), std::string::npos);
  EXPECT_NE(format_schedule(sc, false).find("send-act0.0->1.0"), std::string::npos);
}

}  // namespace
}  // namespace trident
