// Slow ranks caught against the prediction: a stage that is slow by design (more layers, the
// embedding, the logits) is predicted slow, so only a rank slower than its own stage's prediction
// is a straggler (a sick GPU, a throttled or shared core).
//
// The rule (the first step of a run, which warms caches, is not judged):
//   ratio(r, step) = measured compute of rank r (forward + backward kernels, its optimizer
//                    excluded) / the planner's compute for r's pipeline stage (estimate():
//                    (forward + backward) x micro-batches: the stage's own layers, embedding, logits)
//   level(r)       = the median of ratio(r, .) over the last kSteps steps (a spike of a shared
//                    core is not a sick GPU; a rank slow in most of them is)
//   a rank whose level is above kFactor x the median level of all ranks is named (once); the
//   ratio's scale cancels, so only the prediction's stage-to-stage shape matters.
// Every rank sees the same gathered times, so every rank reaches the same verdict at the same
// step (what --evict-stragglers stops on).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/phase_times.h"

namespace trident::parallel {

struct StragglerRule {
  double factor = 1.5;  // kFactor
  int steps = 5;        // kSteps
  std::string text() const;
};

struct Straggler {
  int rank = 0;
  int64_t stage = 0;
  int64_t step = 0;               // the step it was named at
  double measured_s = 0;          // its compute at that step
  double predicted_s = 0;         // its stage's predicted compute
  double ratio = 0, median_ratio = 0;  // its level and the median rank's (medians over the last steps)
  std::string text() const;       // one sentence with the numbers
};

class StragglerWatch {
 public:
  StragglerWatch() = default;  // inactive: no prediction
  // predicted_s: the predicted compute seconds per step of each world rank's stage; stage_of: its stage.
  StragglerWatch(std::vector<double> predicted_s, std::vector<int64_t> stage_of, StragglerRule rule = {});
  bool active() const { return !predicted_.empty(); }
  // One step's gathered times of every rank; returns the ranks named at this step.
  std::vector<Straggler> observe(int64_t step, const std::vector<PhaseTimes>& row);
  const std::vector<double>& ratios() const { return ratios_; }  // this step's
  double median_ratio() const { return median_; }                 // this step's, over ranks
  double predicted(int rank) const { return predicted_.at(size_t(rank)); }
  const std::vector<Straggler>& named() const { return named_; }
  const StragglerRule& rule() const { return rule_; }

 private:
  std::vector<double> predicted_;
  std::vector<int64_t> stage_;
  StragglerRule rule_;
  std::vector<std::vector<double>> history_;  // per rank, the ratios of the last steps
  std::vector<bool> is_named_;
  std::vector<double> ratios_;
  double median_ = 0;
  std::vector<Straggler> named_;
};

}  // namespace trident::parallel
