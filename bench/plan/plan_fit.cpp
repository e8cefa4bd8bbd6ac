// Fits the cost table's efficiencies to the published runs in data/calibration/ and prints the
// fitted table (the TOML of data/cost/builtin.toml) with every row's error, per source.
//
// Only named mechanisms are fitted, one value per GPU type for all its rows marked fitted (column
// `fitted` = 1; the held-out rows are printed, never fitted to), never per row:
// by default each GPU's large-GEMM efficiency (16-bit, and FP8 where rows use it). The others
// keep their physical values from the built-in table; add more with --fit GPU:KEY.
// Method: coordinate descent with a shrinking step on the mean |error| plus the excess of the
// worst row over 4% (so no row is traded away for the mean).
//
//   plan_fit [--fit GPU:KEY ...] [FOLDER-OR-CSV ...]
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "calibration_rows.h"
#include "plan/estimate.h"

using namespace trident;

namespace {

struct Param {
  std::string gpu;  // catalog key
  const CostField* field;
};

const CostField* field_named(const std::string& key) {
  for (const auto& f : cost_fields())
    if (key == f.name) return &f;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<std::string> paths, fits;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--fit" && i + 1 < argc) fits.push_back(argv[++i]);
    else paths.push_back(a);
  }
  if (paths.empty()) paths.push_back(TRIDENT_CALIBRATION_DIR);
  const std::vector<calibration::Row> rows = calibration::read_rows_of(paths);
  if (rows.empty()) {
    fmt::print(stderr, "plan_fit: no rows\n");
    return 2;
  }
  // One table per GPU type present, starting from the built-in one.
  std::map<std::string, CostTable> tables;
  std::map<std::string, std::set<std::string>> precisions;
  for (const auto& r : rows) {
    const CostTable t = builtin_cost(r.run.cluster.gpu);
    tables.emplace(t.gpu, t);
    if (r.fitted) precisions[t.gpu].insert(to_string(r.run.exec.precision));  // what the fitted rows run
  }
  std::vector<Param> params;
  if (fits.empty()) {
    for (const auto& [gpu, p] : precisions) {
      params.push_back({gpu, field_named("gemm_peak_efficiency")});
      if (p.count("fp8")) params.push_back({gpu, field_named("fp8_gemm_efficiency")});
    }
  } else {
    for (const auto& f : fits) {
      const auto colon = f.find(':');
      const CostField* field = colon == std::string::npos ? nullptr : field_named(f.substr(colon + 1));
      if (!field || !tables.count(f.substr(0, colon))) {
        fmt::print(stderr, "plan_fit: --fit {} is not GPU:KEY for a GPU of the rows and a cost key\n", f);
        return 2;
      }
      params.push_back({f.substr(0, colon), field});
    }
  }
  auto errors = [&]() {
    std::vector<double> out;
    for (const auto& r : rows) {
      RunSpec run = r.run;
      run.cost = tables.at(builtin_cost(run.cluster.gpu).gpu);
      out.push_back((plan::estimate(run, 0).time.step - r.published_s) / r.published_s);
    }
    return out;
  };
  // Held-out rows stay predictions: only the rows marked fitted enter the objective.
  size_t n_fitted = 0;
  for (const auto& r : rows) n_fitted += r.fitted;
  if (n_fitted == 0) {
    fmt::print(stderr, "plan_fit: no row is marked fitted (column fitted = 1): nothing to fit to\n");
    return 2;
  }
  auto objective = [&]() {
    double sum = 0, worst = 0;
    const auto e = errors();
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].fitted) continue;
      sum += std::fabs(e[i]);
      worst = std::max(worst, std::fabs(e[i]));
    }
    return sum / double(n_fitted) + std::max(0.0, worst - 0.04);
  };
  const auto before = errors();
  double best = objective();
  for (double step = 0.05; step > 1e-4; step /= 2) {
    bool moved = true;
    while (moved) {
      moved = false;
      for (const auto& p : params) {
        double& value = tables.at(p.gpu).*(p.field->member);
        for (double dir : {+1.0, -1.0}) {
          const double old = value;
          value = old * (1 + dir * step);
          const double f = objective();
          if (f < best - 1e-9) {
            best = f;
            moved = true;
            break;
          }
          value = old;
        }
      }
    }
  }
  const auto after = errors();
  fmt::print("Fitted: ");
  for (const auto& p : params) fmt::print("{}:{} = {:.4f}   ", p.gpu, p.field->name, tables.at(p.gpu).*(p.field->member));
  fmt::print("\n\nper row (error before with the built-in table -> after the fit):\n");
  std::map<std::string, std::vector<double>> by_before, by_after;
  for (size_t i = 0; i < rows.size(); ++i) {
    fmt::print("  {:<24} {:<26} {:>8.3f}s  {:+6.2f}% -> {:+6.2f}%  {}\n", rows[i].source, rows[i].name,
               rows[i].published_s, 100 * before[i], 100 * after[i], rows[i].fitted ? "fitted" : "held out");
    const std::string group = rows[i].source + " " + to_string(rows[i].run.exec.precision);  // per source and precision
    by_before[group].push_back(std::fabs(before[i]));
    by_after[group].push_back(std::fabs(after[i]));
  }
  fmt::print("\nper source and precision: mean / max |error|, built-in -> fitted\n");
  for (const auto& [source, v] : by_after) {
    auto stats = [](const std::vector<double>& x) {
      double s = 0, m = 0;
      for (double e : x) s += e, m = std::max(m, e);
      return std::pair{100 * s / double(x.size()), 100 * m};
    };
    const auto [mb, xb] = stats(by_before[source]);
    const auto [ma, xa] = stats(v);
    fmt::print("  {:<30} {:5.2f}% / {:5.2f}%  ->  {:5.2f}% / {:5.2f}%\n", source, mb, xb, ma, xa);
  }
  fmt::print("\nfitted table (paste the changed keys into data/cost/builtin.toml):\n");
  for (const auto& [gpu, t] : tables) {
    // A GPU's table only where the fit changed a key of it (an A100 row held out fits none).
    std::string keys;
    for (const auto& p : params)
      if (p.gpu == gpu) keys += fmt::format("{} = {:.3f}\n", p.field->name, t.*(p.field->member));
    if (!keys.empty()) fmt::print("[{}]\n{}", gpu, keys);
  }
  return 0;
} catch (const InputError& e) {
  fmt::print(stderr, "plan_fit: {}\n", e.what());
  return 2;
}
