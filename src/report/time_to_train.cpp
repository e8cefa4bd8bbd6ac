#include "report/time_to_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/count_text.h"

namespace trident {

std::vector<OptionDef> time_to_train_options() {
  return {
      {"train-tokens", "training", "tokens to train on (e.g. 15T, 300B, 1.5e13): prints days, GPU-hours and cost",
       false, "NUM", "none"},
      {"gpu-hour-cost", "training",
       "price of one GPU-hour with its currency (e.g. '2.5 USD', '$2.5', '2.1 EUR'), for the cost of --train-tokens",
       false, "PRICE", "none"},
  };
}

TrainBudget resolve_train_budget(const OptionValues& v, Problems& p) {
  TrainBudget b;
  if (auto s = v.get_string("train-tokens")) {
    const std::optional<double> x = parse_count(*s);
    if (!x || !(*x > 0))
      p.add(fmt::format("--train-tokens '{}' is not a positive number of tokens", *s),
            "give e.g. --train-tokens 15T, 300B or 1.5e13");
    else b.train_tokens = *x;
  }
  if (auto s = v.get_string("gpu-hour-cost")) {
    const std::optional<Price> x = parse_price(*s);
    if (!x || !(x->amount >= 0))
      p.add(fmt::format("--gpu-hour-cost '{}' is not a price (a non-negative number and its currency)", *s),
            "give a price such as --gpu-hour-cost '2.5 USD' (or $2.5, 2.1 EUR)");
    else b.gpu_hour_cost = x->amount, b.currency = x->currency;
  }
  if (b.gpu_hour_cost && !v.has("train-tokens"))
    p.add("--gpu-hour-cost was given without --train-tokens", "add --train-tokens N (tokens to train on)");
  return b;
}

std::optional<Price> parse_price(const std::string& text) {
  // "2.5 USD", "USD 2.5", "2.5USD", "$2.5", "2.5 EUR", "€2.1", "2.5" (no currency).
  static const std::pair<const char*, const char*> kSymbols[] = {{"$", "USD"}, {"\u20ac", "EUR"}, {"\u00a3", "GBP"},
                                                                 {"\u00a5", "JPY"}};
  std::string t = text, currency;
  auto strip = [&] {
    while (!t.empty() && t.front() == ' ') t.erase(0, 1);
    while (!t.empty() && t.back() == ' ') t.pop_back();
  };
  strip();
  for (const auto& [symbol, code] : kSymbols)
    if (t.rfind(symbol, 0) == 0) t.erase(0, std::string(symbol).size()), currency = code;
  strip();
  // A currency code of three capital letters, before or after the number.
  auto code_at = [&](size_t at) {
    return at + 3 <= t.size() && std::all_of(t.begin() + at, t.begin() + at + 3, [](char c) { return c >= 'A' && c <= 'Z'; });
  };
  if (currency.empty() && t.size() > 3 && code_at(t.size() - 3)) currency = t.substr(t.size() - 3), t.resize(t.size() - 3);
  else if (currency.empty() && t.size() > 3 && code_at(0)) currency = t.substr(0, 3), t.erase(0, 3);
  strip();
  const std::optional<double> amount = parse_count(t);
  if (!amount || t.find_first_of("KMBGTP") != std::string::npos) return std::nullopt;
  return Price{*amount, currency};
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
  t.currency = b.currency;
  if (b.gpu_hour_cost) t.cost = t.gpu_hours * *b.gpu_hour_cost;
  t.step_source = source;
  return t;
}

std::string time_to_train_text(const TimeToTrain& t) {
  // A cost always says its currency, or that the price named none.
  const std::string cur = t.currency.empty() ? " (no currency given)" : " " + t.currency;
  std::string s = fmt::format(
      "time to train {:.4g} tokens: {:.1f} days, {:.4g} GPU-hours{}\n"
      "  = {:.0f} steps (ceil({:.4g} tokens / {:.0f} tokens per step: global batch x seq len))\n"
      "    x {:.3f} s per step ({}) = {:.4g} s; x {:.0f} GPUs / 3600 = {:.4g} GPU-hours{}\n",
      t.train_tokens, t.days, t.gpu_hours, t.cost ? fmt::format(", cost {:.4g}{}", *t.cost, cur) : "", t.steps,
      t.train_tokens, t.tokens_per_step, t.step_s, t.step_source, t.seconds, t.gpus, t.gpu_hours,
      t.cost ? fmt::format("; x {:.4g}{} per GPU-hour = {:.4g}{}", *t.gpu_hour_cost, cur, *t.cost, cur) : "");
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
  j["currency"] = t.cost && !t.currency.empty() ? nlohmann::json(t.currency) : nlohmann::json(nullptr);
  return j;
}

}  // namespace trident
