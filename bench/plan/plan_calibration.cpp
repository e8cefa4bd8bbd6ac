// Calibration: the cost model's predicted iteration time against the 8 published Megatron-LM runs
// of Korthikanti et al. 2022 (Table 5; 22B to 1T on DGX A100). One set of constants for every row
// (plan::default_constants()); the target to beat is Calculon's 3.65% mean / 8.87% max error.
//
//   plan_calibration [path/to/korthikanti2022-table5.csv]
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/run_spec.h"
#include "plan/estimate.h"

using namespace trident;

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) out.push_back(cell);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : TRIDENT_CALIBRATION_CSV;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "plan_calibration: cannot read %s (pass the CSV path as the first argument)\n", path.c_str());
    return 2;
  }
  std::string line;
  std::vector<std::string> header;
  double sum_err = 0, max_err = 0;
  int rows = 0;
  fmt::print("Calibration against Korthikanti et al. 2022 Table 5 ({})\n", path);
  fmt::print("{:<12} {:>5} {:>4} {:>4} {:>3} {:>9} {:>9} {:>7}   {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}  {:>6} {:>6}\n", "run",
             "gpus", "tp", "pp", "v", "published", "predicted", "error", "compute", "tp", "pp", "bubble", "dp",
             "optim", "MFU", "pubMFU");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto cells = split(line);
    if (header.empty()) {
      header = cells;
      continue;
    }
    auto col = [&](const std::string& name) -> std::string {
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i < cells.size() ? cells[i] : "";
      return "";
    };
    RunSpec run;
    run.model.name = col("name");
    run.model.family = ModelFamily::GPT;
    run.model.layers = std::stoll(col("layers"));
    run.model.hidden = std::stoll(col("hidden"));
    run.model.heads = std::stoll(col("heads"));
    run.model.kv_heads = run.model.heads;
    run.model.ffn_hidden = 4 * run.model.hidden;
    run.model.seq_len = std::stoll(col("seq"));
    run.model.vocab = std::stoll(col("vocab"));
    run.cluster = cluster_preset("dgx-a100-80g");
    run.cluster.gpu = gpu_preset(col("gpu"));
    run.cluster.gpus_per_node = std::stoll(col("gpus_per_node"));
    const int64_t gpus = std::stoll(col("gpus"));
    run.cluster.nodes = (gpus + run.cluster.gpus_per_node - 1) / run.cluster.gpus_per_node;
    run.layout.tp = std::stoll(col("tp"));
    run.layout.pp = std::stoll(col("pp"));
    run.layout.dp = std::stoll(col("dp"));
    run.layout.order = "tp-dp-pp";
    run.exec.global_batch_size = std::stoll(col("global_batch"));
    run.exec.micro_batch_size = std::stoll(col("micro_batch"));
    run.exec.virtual_stages = std::stoll(col("virtual_stages"));
    run.exec.schedule = run.exec.virtual_stages > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
    parse_recompute(col("recompute"), run.exec.recompute);
    run.exec.sequence_parallel = col("sequence_parallel") == "1";
    const double published = std::stod(col("iteration_s"));
    const auto e = plan::estimate(run, 0);
    const double err = (e.time.step - published) / published;
    sum_err += std::fabs(err);
    max_err = std::max(max_err, std::fabs(err));
    ++rows;
    const std::string pub_mfu = col("mfu_pct");
    fmt::print("{:<12} {:>5} {:>4} {:>4} {:>3} {:>8.2f}s {:>8.2f}s {:>+6.2f}%   {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f}  {:>5.1f}% {:>6}\n",
               run.model.name, gpus, run.layout.tp, run.layout.pp, run.exec.virtual_stages, published,
               e.time.step, 100 * err, e.time.compute, e.time.tp_comm, e.time.pp_comm, e.time.bubble,
               e.time.dp_comm, e.time.optimizer, 100 * e.mfu, pub_mfu.empty() ? "-" : pub_mfu + "%");
  }
  if (rows == 0) {
    std::fprintf(stderr, "plan_calibration: no rows in %s\n", path.c_str());
    return 2;
  }
  fmt::print("\nmean |error| {:.2f}%   max |error| {:.2f}%   over {} runs  (Calculon, SC'23: 3.65% mean, 8.87% max)\n",
             100 * sum_err / rows, 100 * max_err, rows);
  const auto& c = plan::default_constants();
  fmt::print("constants: gemm_peak_efficiency {} gemm_half_dim {} hbm_efficiency {} elementwise_traffic {} "
             "nvlink_eff {} network_eff {}\n",
             c.gemm_peak_efficiency, c.gemm_half_dim, c.hbm_efficiency, c.elementwise_traffic_per_stored_byte,
             c.nvlink_efficiency, c.network_efficiency);
  return 0;
}
