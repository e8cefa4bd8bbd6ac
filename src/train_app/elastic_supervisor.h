// `trident train --elastic`: this process is the supervisor. It starts the ranks with the
// launcher (Open MPI's mpirun, or srun under Slurm: no launcher of Trident's own) as its child,
// waits for them, and when ranks die or hang (the others stop: mpirun ends them, or their own
// communication time-out names the peer they waited on) it
//   1. names the lost ranks and their nodes (elastic_failure.h: what the launcher said),
//   2. re-plans on the nodes left with `trident replan`'s function (plan::replan_for_survivors,
//      --batch keep: the same global batch and data order),
//   3. relaunches with --resume on the last checkpoint, which reshards into the new layout,
// until the run ends or no layout fits what is left. Each event (lost ranks, the step the run
// failed after, the checkpoint's step, the lost steps, the time lost split into lost work,
// detection and restart) is printed, written as a line {"event": "elastic_restart", ...} to the
// metrics file between the attempts' step lines, and added to the JSON report ("elastic").
// The launcher is watched by launch_supervisor.h, so a SIGKILL of this process leaves no rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/options.h"
#include "runtime/parallel/training_loop.h"

namespace trident::train_app {

using parallel::TrainSettings;

struct ElasticSetup {
  std::vector<OptionDef> defs;        // train's options: the ranks' config file is written from them
  OptionValues values;                // as the user gave them
  TrainSettings settings;             // resolved: the run, checkpoint, metrics and report paths
  int64_t ranks_per_node = 1;         // a node is what a failure takes away
  std::vector<std::string> launcher;  // "mpirun" (+ its options) or "srun"
  // The replan's GPU: the prediction cluster's (`trident bench`'s file, the one train predicts
  // with; its [cost] too), read by read_elastic_options.
  GpuSpec gpu;
};

// The launcher, rank count, ranks per node from the options and the environment (Slurm's when
// SLURM_JOB_ID is set), the prediction cluster; problems for a value that cannot work.
void read_elastic_options(const OptionValues& values, ElasticSetup& setup, Problems& problems);

// Runs the elastic loop; returns the exit code of `trident train` (0 when the last attempt
// finished, the ranks' code for bad input, 1 when a failure cannot be recovered).
int run_elastic(const ElasticSetup& setup);

}  // namespace trident::train_app
