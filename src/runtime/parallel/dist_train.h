// The layout and parallel-execution options of `trident train` and the checks of a run
// against them (the training loop itself is training_loop.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel {

// Everything a distributed run adds to `trident train`'s options: the layout (--tp --pp --dp
// --order), the parallel execution (--schedule --virtual-stages --zero --sequence-parallel) and
// --trace-comm --report FILE --comm-timeout S --stage-layers 2,3,3 --prediction-cluster FILE --bucket-mib N.
std::vector<OptionDef> dist_train_options();

// True when started by mpirun/mpiexec/srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or SLURM_NTASKS set).
bool launched_by_mpi();

// Reads the options of dist_train_options() into s.run.layout, s.run.exec and s. dp defaults to
// the launcher's world size / (tp * pp).
void read_dist_train_options(const OptionValues& values, TrainSettings& s, Problems& problems);

// Every size the distributed run depends on, with its fix: tp divides heads, ffn and vocab;
// pp*v within the layers; batch divisible by micro-batch x dp; the schedule's shape.
void check_dist_run(const TrainSettings& s, Problems& problems);


}  // namespace trident::parallel
