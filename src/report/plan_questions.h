// Two questions plan answers beside "which layout is best":
//   --compare L1,L2,...  given layouts side by side, each with the best recipe the search finds
//                         for it (the dimensions a layout names fixed, the rest searched);
//   --days N              the fewest GPUs (whole nodes) that train --train-tokens in N days.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plan/published_layouts.h"
#include "plan/search.h"
#include "report/time_to_train.h"

namespace trident {

// "tp8-pp4-dp16" (dimension names followed by sizes, joined by '-' or 'x'): the sizes it fixes.
// Problems name the text and the form.
std::optional<plan::SearchSpace> parse_compared_layout(const std::string& text, const plan::SearchSpace& base,
                                                       Problems& problems);

struct Compared {
  std::string asked;                  // the layout as given
  std::optional<plan::Estimate> best;  // empty: nothing fits with it
  std::string why_not;                // the rule that rejected most of its candidates
};
std::vector<Compared> compare_layouts(const std::vector<std::string>& layouts, const ModelSpec& model,
                                      const ClusterSpec& cluster, int64_t global_batch, const plan::SearchSpace& base,
                                      double overhead, const plan::CostConstants& cost, Problems& problems);
std::string compare_text(const std::vector<Compared>& c);
nlohmann::json compare_json(const std::vector<Compared>& c);

// The layouts vendors published for this model on this GPU and GPU count (plan/published_layouts.h),
// each planned with its published sizes, virtual stages, micro-batch and ZeRO fixed and the rest
// searched, beside the search's best: what it would run at, and term by term why the best differs.
struct PublishedPlanned {
  plan::PublishedLayout published;
  Compared planned;
};
std::vector<PublishedPlanned> plan_published_layouts(const ModelSpec& model, const ClusterSpec& cluster,
                                                     int64_t global_batch, const plan::SearchSpace& base,
                                                     double overhead, const plan::CostConstants& cost);
std::string published_text(const std::vector<PublishedPlanned>& p, const plan::Estimate& best);
nlohmann::json published_json(const std::vector<PublishedPlanned>& p, const plan::Estimate& best);

// --days: node counts doubled from 1 until the plan's best trains the budget in `days`, then
// bisected between the last count that did not and the first that did. Each count tried is
// kept (with its days) so the answer can be checked.
struct FewestGpus {
  double days = 0;
  std::vector<std::pair<int64_t, std::optional<double>>> tried;  // nodes -> days (empty: no layout fits)
  std::optional<int64_t> nodes;                                   // the answer, empty when none up to the cap
  std::optional<plan::Estimate> best;
  std::optional<TimeToTrain> time;
};
FewestGpus fewest_gpus(double days, const TrainBudget& budget, const ModelSpec& model, const ClusterSpec& cluster,
                       int64_t global_batch, const plan::SearchSpace& space, double overhead, const plan::CostConstants& cost);
std::string fewest_gpus_text(const FewestGpus& f, const ClusterSpec& cluster);
nlohmann::json fewest_gpus_json(const FewestGpus& f, const ClusterSpec& cluster);

}  // namespace trident
