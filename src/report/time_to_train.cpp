#include "report/time_to_train.h"

#include <fmt/format.h>

#include <cmath>

namespace trident {

std::vector<OptionDef> time_to_train_options() {
  return {
      {"train-tokens", "training", "tokens to train on (e.g. 300e9): prints days, GPU-hours and cost", false, "NUM",
       "none"},
      {"gpu-hour-cost", "training", "price of one GPU-hour, for the cost of --train-tokens", false, "NUM", "none"},
  };
}

TrainBudget resolve_train_budget(const OptionValues& v, Problems& p) {
  TrainBudget b;
  if (auto x = v.get_double("train-tokens", p)) {
    if (!(*x > 0) || !std::isfinite(*x))
      p.add(fmt::format("--train-tokens {} must be a positive number of tokens", *x), "give e.g. --train-tokens 300e9");
    else b.train_tokens = *x;
  }
  if (auto x = v.get_double("gpu-hour-cost", p)) {
    if (!(*x >= 0) || !std::isfinite(*x))
      p.add(fmt::format("--gpu-hour-cost {} must not be negative", *x), "give a price such as --gpu-hour-cost 2.5");
    else b.gpu_hour_cost = *x;
  }
  if (b.gpu_hour_cost && !v.has("train-tokens"))
    p.add("--gpu-hour-cost was given without --train-tokens", "add --train-tokens N (tokens to train on)");
  return b;
}

TimeToTrain time_to_train(const TrainBudget& b, int64_t global_batch, int64_t seq_len, double step_s, int64_t gpus,
                          const std::string& source) {
  TimeToTrain t;
  t.train_tokens = b.train_tokens.value_or(0);
  t.tokens_per_step = double(global_batch) * double(seq_len);
  t.steps = t.tokens_per_step > 0 ? std::ceil(t.train_tokens / t.tokens_per_step) : 0;
  t.step_s = step_s;
  t.gpus = double(gpus);
  t.seconds = t.steps * step_s;
  t.days = t.seconds / 86400.0;
  t.gpu_hours = t.seconds * t.gpus / 3600.0;
  t.gpu_hour_cost = b.gpu_hour_cost;
  if (b.gpu_hour_cost) t.cost = t.gpu_hours * *b.gpu_hour_cost;
  t.step_source = source;
  return t;
}

std::string time_to_train_text(const TimeToTrain& t) {
  std::string s = fmt::format(
      "time to train {:.4g} tokens: {:.1f} days, {:.4g} GPU-hours{}\n"
      "  = {:.0f} steps (ceil({:.4g} tokens / {:.0f} tokens per step: global batch x seq len))\n"
      "    x {:.3f} s per step ({}) = {:.4g} s; x {:.0f} GPUs / 3600 = {:.4g} GPU-hours{}\n",
      t.train_tokens, t.days, t.gpu_hours, t.cost ? fmt::format(", cost {:.4g}", *t.cost) : "", t.steps,
      t.train_tokens, t.tokens_per_step, t.step_s, t.step_source, t.seconds, t.gpus, t.gpu_hours,
      t.cost ? fmt::format("; x {:.4g} per GPU-hour = {:.4g}", *t.gpu_hour_cost, *t.cost) : "");
  return s;
}

nlohmann::json time_to_train_json(const TimeToTrain& t) {
  nlohmann::json j = {{"train_tokens", t.train_tokens}, {"tokens_per_step", t.tokens_per_step},
                      {"steps", t.steps},               {"step_s", t.step_s},
                      {"step_source", t.step_source},   {"gpus", t.gpus},
                      {"seconds", t.seconds},           {"days", t.days},
                      {"gpu_hours", t.gpu_hours}};
  j["gpu_hour_cost"] = t.gpu_hour_cost ? nlohmann::json(*t.gpu_hour_cost) : nlohmann::json(nullptr);
  j["cost"] = t.cost ? nlohmann::json(*t.cost) : nlohmann::json(nullptr);
  return j;
}

}  // namespace trident
