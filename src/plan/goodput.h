// Time to train with failures: how much of a long run is lost to failures, restarts and saves,
// and the checkpoint interval that loses least (docs/resilience.md has the sources).
//
//   checkpoint bytes per rank = (stage's dense params / (dp x cp) + its routed expert params / edp)
//                               x (saved weight bytes + optimizer bytes per param)
//        (each replica group writes its shard once, spread over its ranks: Megatron-Core's fully
//         parallel save; the saved weights are the persistent copy, without an FP8 cache)
//   save (= load) time = max(all ranks' bytes / aggregate storage bandwidth,
//                            most loaded node's bytes / a node's storage bandwidth)
//   job MTBF M = 1 / (failure rate per GPU x GPUs)
//   interval tau = sqrt(2 x save time x M) (Young 1974), rounded to whole steps
//   restart R = start-up + load; each failure also loses half an interval and its save: (tau + save) / 2
//   wall W = T (1 + save / tau) / (1 - (R + (tau + save) / 2) / M); goodput = T / W
//   days for n failures = (T (1 + save / tau) + n (R + (tau + save) / 2)) / 86400; n ~ Poisson(W / M)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/failure_rate.h"
#include "core/young_daly.h"
#include "core/options.h"
#include "core/run_spec.h"
#include "plan/estimate.h"

namespace trident::plan {

// --failures-per-1000-gpu-days --storage-gbytes-per-s --storage-node-gbytes-per-s --restart-startup-s
std::vector<OptionDef> resilience_options();

// Llama 3 (section 3.3.1): Tectonic sustains 2 TB/s (7 TB/s peak) for the checkpoint writes.
inline constexpr double kLlama3StorageGBps = 2000;
// A node's storage network: two 200 Gb/s ports (a DGX's storage NICs) = 50 GB/s.
inline constexpr double kDefaultNodeStorageGBps = 50;
// Start-up after a failure: PyTorch's default collective timeout (10 minutes) detects a hang;
// rescheduling and process start come on top in practice. An assumption, not a measurement.
inline constexpr double kDefaultRestartStartupS = 600;

struct ResilienceInputs {
  double failures_per_1000_gpu_days = kLlama3FailuresPer1000GpuDays;
  std::string failure_source = "Llama 3 paper: 419 unexpected interruptions / (54 days x 16384 H100s)";
  double storage_Bps = kLlama3StorageGBps * 1e9;           // aggregate, every node together
  std::string storage_source = "Llama 3 paper: Tectonic's sustained 2 TB/s";
  double storage_node_Bps = kDefaultNodeStorageGBps * 1e9;  // one node's link to the storage
  double startup_s = kDefaultRestartStartupS;
};
ResilienceInputs resolve_resilience(const OptionValues& values, Problems& problems);

struct CheckpointSize {
  int64_t stage = 0;                 // the stage whose ranks write most
  double dense_params = 0;           // its dense params per tp rank (before the dp x cp split)
  double expert_params = 0;          // its routed expert params per ep rank (before the edp split)
  double replicas = 1, expert_replicas = 1;  // dp x cp, and edp = dp x cp / ep
  double bytes_per_param = 0;        // saved weights + optimizer states
  double weight_bytes_per_param = 0, optimizer_bytes_per_param = 0;
  double bytes_per_rank = 0;         // that stage's ranks (the most any rank writes)
  double total_bytes = 0;            // every rank: sum over stages of bytes per rank x ranks per stage
  double node_bytes = 0;             // GPUs per node x bytes per rank (the most loaded node)
};
CheckpointSize checkpoint_size(const RunSpec& run);

struct Goodput {
  ResilienceInputs in;
  CheckpointSize ckpt;
  int64_t gpus = 0, nodes = 0;
  double save_aggregate_s = 0, save_node_s = 0, save_s = 0;  // save_s = the larger
  double load_s = 0;
  double mtbf_s = 0;                  // of the whole job
  double young_interval_s = 0;        // sqrt(2 x save x MTBF)
  double step_s = 0;
  int64_t interval_steps = 0;         // rounded to whole steps, at least 1
  double interval_s = 0;              // interval_steps x step_s
  double restart_s = 0;               // start-up + load
  double lost_per_failure_s = 0;      // restart + (interval + save) / 2
  double ideal_s = 0;                 // the run without failures or saves
  double save_overhead = 0;           // save / interval
  double failure_share = 0;           // lost per failure / MTBF
  bool feasible = true;               // failure_share < 1: the run advances at all
  double wall_s = 0;
  double goodput = 0;                 // ideal / wall
  double expected_failures = 0;       // wall / MTBF
  int64_t failures_low = 0, failures_high = 0;  // 5% and 95% quantiles of Poisson(expected)
  double days_ideal = 0, days = 0, days_low = 0, days_high = 0;
};

// ideal_s: the time to train without failures (steps x step time); 0 when no budget is given,
// and then only the interval and goodput are meaningful (they do not depend on it).
Goodput goodput(const CheckpointSize& ckpt, const ResilienceInputs& in, int64_t gpus, int64_t nodes, double step_s,
                double ideal_s);
Goodput goodput(const RunSpec& run, const ResilienceInputs& in, double step_s, double ideal_s);

// job_mtbf_s, young_daly_interval_s, interval_in_steps: core/young_daly.h (train's auto interval uses them too).
using trident::interval_in_steps;
using trident::job_mtbf_s;
using trident::young_daly_interval_s;

// Smallest k with P(Poisson(mean) <= k) >= q.
int64_t poisson_quantile(double mean, double q);

// The nodes a layout occupies: its GPUs over the GPUs of a node, rounded up.
int64_t nodes_of(const RunSpec& run);


// --rank-by throughput|goodput (plan): goodput ranks by tokens/s x goodput, the tokens a layout
// trains per second of wall time once failures, restarts and saves are paid.
OptionDef rank_by_option();
// Whether --rank-by goodput was given (a problem for any other value than the two).
bool rank_by_goodput(const OptionValues& values, Problems& problems);
// Whether any option of resilience_options() was given: then plan and simulate print the goodput.
bool resilience_given(const OptionValues& values);

// Candidates re-ranked by tokens/s x goodput (ties: the throughput ranking's order), the first `top` kept.
struct RankedByGoodput {
  Estimate estimate;
  Goodput goodput;
  double effective_tokens_per_s = 0;
};
std::vector<RankedByGoodput> rank_by_goodput(const std::vector<Estimate>& candidates, const ResilienceInputs& in,
                                             size_t top);

}  // namespace trident::plan
