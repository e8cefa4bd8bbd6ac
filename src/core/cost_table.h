// CostTable: the achieved-over-peak factors the step-time model applies, per GPU type, as data.
//
// The built-in values live in data/cost/builtin.toml (compiled in): a [default] table and one
// table per GPU of the catalog that differs from it ([h100-80g], ...). A user's --cost FILE has
// the same form (flat keys apply to every GPU), and single keys can be set in a config's [cost]
// table or as flags (--attention-efficiency 0.5). Later layers win: built-in default, built-in
// GPU, file, keys. Each field has a physical meaning; none is fitted per run.
#pragma once

#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/options.h"
#include "core/problems.h"

namespace trident {

struct CostTable {
  std::string gpu = "default";   // catalog key the table was built for
  std::string source = "built-in";  // where its values came from, for the report
  // False when the GPU has no table of its own in data/cost/builtin.toml and the [default]
  // (A100) values stand in for it, or its table borrows another GPU's: reports then warn
  // (calibration_warning).
  bool calibrated = true;
  // The table a GPU's own table borrows its values from (its `borrow` key: B200 takes GB200's),
  // empty when it has none.
  std::string borrowed_from;
  // GEMM efficiency curve: a large 16-bit GEMM reaches gemm_peak_efficiency of the dense peak;
  // each dimension d scales it by d / (d + gemm_half_dim) (tile and wave quantisation).
  double gemm_peak_efficiency = 0.80;
  double gemm_half_dim = 32;
  double fp8_gemm_efficiency = 0.60;  // share of the FP8 peak a large FP8 GEMM reaches (casts, scaling)
  // Fused (flash) attention: share of the 16-bit peak on the causal half of the s x s work, and
  // the backward pass's cost over the forward's (recomputes the scores: ~2.5x).
  double attention_efficiency = 0.50;
  double flash_backward_factor = 2.5;
  double hbm_efficiency = 0.80;  // share of HBM bandwidth memory-bound kernels reach
  // HBM bytes moved by the non-GEMM kernels per byte of activation a layer stores (each stored
  // tensor is written once, read again, and its producer read its input).
  double elementwise_traffic_per_stored_byte = 2.5;
  double fp8_cast_bytes_per_element = 3;  // FP8 quantisation of each GEMM input: read 2 bytes, write 1
  // Collective algorithm factors: achieved bus bandwidth over link bandwidth.
  double nvlink_efficiency = 0.70;
  double pcie_efficiency = 0.75;
  double network_efficiency = 0.90;
  // EP all-to-all: achieved rate over link bandwidth; 0 takes the link's collective share above
  // (the all-reduce's). `trident bench` measures it: on shared memory an all-to-all moves both
  // directions at once, past a one-way ping-pong and far past the all-reduce's share.
  double alltoall_efficiency = 0;
  // EP all-to-all: the fixed cost of one call per peer, microseconds (what an all-to-all that
  // moves almost nothing takes, over n-1): request set-up, matching and completion that a
  // ping-pong's latency leaves out. The planner takes the link's latency where it is larger
  // (0: always). `trident bench` measures it.
  double alltoall_latency_us = 0;
  double kernel_launch_us = 0;       // fixed cost per kernel call (plan/kernel_calls.h counts them)
  // The host's time to issue one kernel under a stack that issues from Python (PyTorch eager op
  // dispatch, the framework's module code, the launch), microseconds: a micro-batch takes at least
  // its launches x this (plan/host_issue.h); CUDA graphs issue a graph in one launch.
  double host_launch_us = 0;
  double overlap_slowdown = 0.10;    // hidden communication slows the compute it overlaps by this share of itself
  double dp_bucket_mb = 160;         // gradient bucket (Megatron: 40M fp32 elements)
  double optimizer_bytes_per_param = 0;  // 0: derived from the precision recipe

  double kernel_overhead_s() const { return kernel_launch_us * 1e-6; }
  double host_launch_s() const { return host_launch_us * 1e-6; }
  double dp_bucket_bytes() const { return dp_bucket_mb * 1e6; }
};

// One row per field, in print order: name (TOML key with '_'), member, help, and the range a
// value must lie in (a share of a peak is above 0 and at most 1: 0 would divide a time by zero,
// more than 1 is faster than the hardware). The one table of ranges: flags, config keys and
// cost files are all checked against it (cost_value_problem).
struct CostField {
  const char* name;
  double CostTable::*member;
  const char* help;
  double min, max;
  bool above_min;  // true: min itself is outside the range (0 < share)
};
const std::vector<CostField>& cost_fields();

// "above 0 and at most 1", "0 .. 100": the range of a field as the messages and --help say it.
std::string range_text(const CostField& f);
// Empty when `value` is in the field's range; else the problem's text: `shown` (the key and the
// value as the user wrote them, "--hbm-efficiency 1.0000001") and the range.
std::string cost_value_problem(const CostField& f, double value, const std::string& shown);

// The built-in table for a GPU (by catalog key or GpuSpec name); [default] for unknown GPUs.
CostTable builtin_cost(const GpuSpec& gpu);
const std::string& builtin_cost_text();  // data/cost/builtin.toml as compiled in

// Applies a cost TOML text (tables [default], [GPU-KEY], or flat keys / [cost]) for `gpu`.
void apply_cost_toml(const std::string& text, const std::string& origin, const GpuSpec& gpu, CostTable& table,
                     Problems& problems);

// --cost FILE and every field as an option of the [cost] table.
std::vector<OptionDef> cost_options();
// Built-in for the GPU, then --cost FILE, then single keys.
CostTable resolve_cost(const OptionValues& values, const GpuSpec& gpu, Problems& problems);

// Empty for a calibrated table; else the warning every report prints, naming the table used.
std::string calibration_warning(const CostTable& table);

// The one writer of a cost file: `comments` as '# ' lines, then a [cost] table of every field
// (apply_cost_toml and --cost read it back to the same values).
std::string cost_toml(const CostTable& table, const std::vector<std::string>& comments);

// "gemm_peak_efficiency 0.8, gemm_half_dim 32, ..." for reports.
std::string describe(const CostTable& table);

}  // namespace trident
