// `mpirun -np N trident train ... --dp D --tp T --pp P`: the distributed training entry point.
//
// cmd_train.cpp (the engine's command) resolves the run and calls run_distributed_training when
// the layout has more than one rank or the process was started by mpirun/srun. It checks every
// size against the layout and the world before any work, trains, and has rank 0 print the
// progress and, at the end, the rehearsal report (and --report FILE as JSON).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"
#include "runtime/engine/optimizer.h"

namespace trident::parallel {

// Everything a distributed run adds to `trident train`'s options: the layout (--tp --pp --dp
// --order), the parallel execution (--schedule --virtual-stages --zero --sequence-parallel) and
// --trace-comm --report FILE --comm-timeout S --stage-layers 2,3,3 --prediction-cluster FILE --bucket-mib N.
std::vector<OptionDef> dist_train_options();

// True when the options ask for more than one rank or the process was started by mpirun/srun.
bool wants_distributed(const OptionValues& values);

// True when started by mpirun/mpiexec/srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or SLURM_NTASKS set).
bool launched_by_mpi();

struct DistTrainSettings {
  RunSpec run;                  // resolve_run(values, true): model, layout, execution
  engine::AdamWConfig adamw;
  int64_t steps = 20;
  uint64_t seed = 1337;
  std::string data_path;        // token file; empty = deterministic synthetic sequences
  std::string report_path;      // JSON rehearsal report; the table is always printed by rank 0
  std::string html_path;        // the same report as one HTML page (report/html_page.h)
  bool trace_comm = false;
  double comm_timeout_s = 300;
  std::vector<int64_t> stage_layers;  // explicit uneven pipeline split; empty = even
  std::string prediction_cluster = "trident-cluster.toml";  // what `trident bench` writes
  double bucket_mib = 4;        // DP gradient bucket
  int64_t warmup_steps = -1;    // steps left out of the report's means; -1 = min(2, steps/4)
  bool quiet = false;           // no per-step lines
  // Fault injection for the multi-rank tests (a rank dying or stalling mid-run): called on every
  // rank before each step with (step, world rank). Empty in real runs.
  std::function<void(int64_t step, int rank)> before_step;
};

// Reads the options of dist_train_options() into s.run.layout, s.run.exec and s. dp defaults to
// the launcher's world size / (tp * pp).
void read_dist_train_options(const OptionValues& values, DistTrainSettings& s, Problems& problems);

// Every size the distributed run depends on, with its fix: tp divides heads, ffn and vocab;
// pp*v within the layers; batch divisible by micro-batch x dp; the schedule's shape.
void check_dist_run(const DistTrainSettings& s, Problems& problems);

// Initialises MPI (if needed), trains, prints, finalises MPI. Returns the exit code: 0, or 2
// for bad input (printed by rank 0 before any work). A rank that fails later prints
// "rank R failed: ..." and aborts the job, so no rank is left hanging.
int run_distributed_training(const DistTrainSettings& s);

}  // namespace trident::parallel
