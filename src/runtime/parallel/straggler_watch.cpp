// Slow ranks caught against the prediction (see straggler_watch.h).
#include "runtime/parallel/straggler_watch.h"

#include <algorithm>

#include <fmt/format.h>

namespace trident::parallel {

std::string StragglerRule::text() const {
  return fmt::format("a rank whose compute over its stage's predicted compute (median of its last {} steps) is "
                     "above {:g} x the median rank's",
                     steps, factor);
}

std::string Straggler::text() const {
  return fmt::format("rank {} (stage {}) is a straggler from step {}: compute {:.2f} ms against its stage's predicted "
                     "{:.2f} ms; its ratio (median of its last steps) {:.2f} = {:.2f} x the median rank's {:.2f}",
                     rank, stage, step, measured_s * 1e3, predicted_s * 1e3, ratio,
                     median_ratio > 0 ? ratio / median_ratio : 0.0, median_ratio);
}

StragglerWatch::StragglerWatch(std::vector<double> predicted_s, std::vector<int64_t> stage_of, StragglerRule rule)
    : predicted_(std::move(predicted_s)), stage_(std::move(stage_of)), rule_(rule) {
  history_.assign(predicted_.size(), {});
  is_named_.assign(predicted_.size(), false);
}

namespace {
double median_of(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}
}  // namespace

std::vector<Straggler> StragglerWatch::observe(int64_t step, const std::vector<PhaseTimes>& row) {
  std::vector<Straggler> now;
  if (!active() || row.size() != predicted_.size()) return now;
  ratios_.assign(row.size(), 0);
  std::vector<double> levels(row.size());
  for (size_t r = 0; r < row.size(); ++r) {
    ratios_[r] = predicted_[r] > 0 ? std::max(0.0, row[r].compute - row[r].optimizer) / predicted_[r] : 0;
    history_[r].push_back(ratios_[r]);
    if (int(history_[r].size()) > rule_.steps) history_[r].erase(history_[r].begin());
    levels[r] = median_of(history_[r]);
  }
  median_ = median_of(ratios_);
  if (int(history_[0].size()) < rule_.steps) return now;  // judged once kSteps steps are in
  const double typical = median_of(levels);
  for (size_t r = 0; r < row.size(); ++r) {
    if (is_named_[r] || !(typical > 0 && levels[r] > rule_.factor * typical)) continue;
    is_named_[r] = true;
    Straggler s{int(r), stage_[r], step, std::max(0.0, row[r].compute - row[r].optimizer), predicted_[r], levels[r],
                typical};
    named_.push_back(s);
    now.push_back(s);
  }
  return now;
}

}  // namespace trident::parallel
