// The step-time term table (core/step_terms.h) is complete and consistent: its terms add up to
// the step, measured (PhaseTimes::other) and planned (plan/estimate.h), so a term added to either
// side without its row fails here; and each row's names and colour are its own.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/run_spec.h"
#include "core/step_terms.h"
#include "report/palette.h"

namespace trident {
namespace {

bool is(const char* a, const char* b) { return a && b && std::string(a) == b; }

TEST(StepTerms, KeysNamesAndColoursAreEachRowsOwn) {
  std::set<std::string> keys, share_keys, phase_keys, plan_keys, fills;
  for (const StepTerm& t : step_time_terms()) {
    EXPECT_TRUE(keys.insert(t.key).second) << t.key;
    EXPECT_TRUE(share_keys.insert(t.share_key).second) << t.share_key;
    EXPECT_TRUE(phase_keys.insert(t.phase_key).second) << t.phase_key;
    if (t.plan_key) EXPECT_TRUE(plan_keys.insert(t.plan_key).second) << t.plan_key;
    if (t.fill) EXPECT_TRUE(fills.insert(t.fill).second) << t.key << " shares its colour";
    ASSERT_NE(t.measured, nullptr) << t.key;
    EXPECT_EQ(step_time_term(t.key), &t);
    EXPECT_EQ(step_time_term_by_share_key(t.share_key), &t);
    if (t.fill) EXPECT_EQ(term_colour(t.share_key).fill, t.fill) << t.key;  // the palette's colour is the row's
  }
  for (const StepTerm& t : step_time_terms()) {
    // A term of the step is planned and drawn; a detail names the term it is part of.
    if (!t.part_of) {
      EXPECT_NE(t.planned, nullptr) << t.key;
      EXPECT_NE(t.fill, nullptr) << t.key;
      EXPECT_NE(t.step_label, nullptr) << t.key << " has no name in the planner's step line";
    } else {
      ASSERT_NE(step_time_term(t.part_of), nullptr) << t.key;
      EXPECT_EQ(step_time_term(t.part_of)->part_of, nullptr) << t.key;
    }
    if (t.timed_inside) EXPECT_EQ(step_time_term(t.timed_inside)->part_of, nullptr) << t.key;
  }
}

// What the runtime leaves unexplained is the step less every term it times apart: a term
// measured but missing from PhaseTimes::other() (or from the table) is counted twice.
TEST(StepTerms, MeasuredTermsAndOtherAddUpToTheStep) {
  PhaseTimes t;
  double listed = 0, x = 1;
  for (const StepTerm& term : step_time_terms()) {
    t.*term.measured = x;
    // A detail is inside its term, a term timed inside another is in that one's phase.
    if (!term.part_of && !term.timed_inside) listed += x;
    x *= 2;  // powers of two: any term missing or counted twice shows
  }
  t.total = listed + 1024 * x;
  EXPECT_DOUBLE_EQ(t.other(), 1024 * x);
}

// The planner's step is its listed terms: every term of the step with seconds in it is listed
// (so plan's step line, --compare and the HTML bars add up to the step); at 0, a term is listed
// where the run has it (cp > 1 lists CP) and not where it does not.
TEST(StepTerms, PlannedTermsAddUpToTheStep) {
  RunSpec run;
  TimeBreakdown t;
  double x = 1, sum = 0;
  for (const StepTerm& term : step_time_terms())
    if (term.planned && !term.part_of) t.*term.planned = x, sum += x, x *= 2;
  t.step = sum;
  double listed = 0;
  for (const PlannedTerm& p : planned_step_terms(run, t)) listed += p.seconds;
  EXPECT_DOUBLE_EQ(listed, t.step);
  TimeBreakdown zero;
  auto lists = [&](const char* key) {
    for (const PlannedTerm& p : planned_step_terms(run, zero))
      if (std::string(p.term->key) == key) return true;
    return false;
  };
  EXPECT_TRUE(lists("compute"));
  EXPECT_FALSE(lists("cp"));
  run.layout.cp = 2;
  EXPECT_TRUE(lists("cp"));
  EXPECT_FALSE(lists("ep"));
}

}  // namespace
}  // namespace trident
