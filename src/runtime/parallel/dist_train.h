// The layout and parallel-execution options of `trident train` and the checks of a run
// against them (the training loop itself is training_loop.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "capability/train_options.h"
#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel {

// The options a distributed run adds to `trident train`'s (capability/train_options.h).
using capability::dist_train_options;

// True when started by mpirun/mpiexec/srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or SLURM_NTASKS set).
bool launched_by_mpi();
// The ranks the launcher started (1 when not started by one).
int64_t launcher_world_size();

// Reads the options of dist_train_options() into s.run.layout, s.run.exec and s. dp defaults to
// the launcher's world size / (tp * cp * pp).
void read_dist_train_options(const OptionValues& values, TrainSettings& s, Problems& problems);

// The one check of a training run, the same in one process and under mpirun (run_training runs
// it on every rank before any work): the loop's values (steps, lr, stop-at, eval batches,
// threads, timeouts), the device (known, built in, its ranks' transport), the token file
// against the model (vocabulary, enough tokens), the checkpoint to resume (same model, steps
// left), the output paths; then core's check_run (heads, ffn, layers and batch against the
// layout) and what this runtime can execute (GPT / Llama, cp on the CPU, MoE without tp / cp, no ep, ZeRO 0-3,
// fp32 — bf16 on CUDA —, the schedule's shape, the stage split), each with its fix and its code.
void check_trainable(const TrainSettings& s, Problems& problems);


}  // namespace trident::parallel
