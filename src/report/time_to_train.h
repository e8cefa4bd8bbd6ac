// Time to train: a step time and a token budget turned into days, GPU-hours and cost.
//
//   steps     = ceil(train tokens / (global batch x sequence length))
//   seconds   = steps x step time
//   GPU-hours = seconds x GPUs / 3600
//   cost      = GPU-hours x price per GPU-hour
// Every input is printed beside the result, so the figures can be checked by hand.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/options.h"

namespace trident {

std::vector<OptionDef> time_to_train_options();  // --train-tokens --gpu-hour-cost

struct TrainBudget {
  std::optional<double> train_tokens;   // unset: no time-to-train figures
  std::optional<double> gpu_hour_cost;  // unset: no cost
  std::string currency;                 // of gpu_hour_cost ("USD"); "" when the price named none
};

// A price as given: an amount and its currency (an ISO code before or after it, or $, €, £, ¥ first).
struct Price {
  double amount = 0;
  std::string currency;  // "" when none was named
};
std::optional<Price> parse_price(const std::string& text);

TrainBudget resolve_train_budget(const OptionValues& values, Problems& problems);

struct TimeToTrain {
  double train_tokens = 0;
  double tokens_per_step = 0;  // global batch x sequence length
  double steps = 0;
  double step_s = 0;
  double gpus = 0;
  double seconds = 0;
  double days = 0;
  double gpu_hours = 0;
  std::optional<double> gpu_hour_cost, cost;
  std::string currency;  // of both
  std::string step_source;  // whose step time: "planner", "simulator"
};

TimeToTrain time_to_train(const TrainBudget& budget, int64_t global_batch, int64_t seq_len, double step_s,
                          int64_t gpus, const std::string& step_source);
std::string time_to_train_text(const TimeToTrain& t);
nlohmann::json time_to_train_json(const TimeToTrain& t);

}  // namespace trident
