// Ranks that disagree: every rank of `mpirun trident train` resolves its run on its own (flags,
// --config files, the environment, the token file on its node). A launcher script that passes
// another value to one rank, or a node with another copy of the data, would train a different
// model on each rank without an error. So before any work every rank hashes what it resolved
// (each setting on its own line, and the token file's contents) and the ranks compare the
// hashes with one allgather; any difference stops every rank with the setting, its values and
// the ranks that hold them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/world.h"
#include "runtime/parallel/training_loop.h"

namespace trident::parallel {

// The run as named settings ("layout.tp" -> "2", "data" -> "vocab 256, 2000 tokens x 2 bytes,
// FNV-1a 0x..."): everything that must be equal on every rank. Rank-local settings (threads,
// rank 0's output files) are left out.
std::vector<std::pair<std::string, std::string>> run_fingerprint(const TrainSettings& s);

// Compares every rank's fingerprint (one all-gather of one hash per setting; the values of the
// differing settings are gathered only when there are some). Throws the same InputError on
// every rank when they differ.
void check_ranks_agree(const std::vector<std::pair<std::string, std::string>>& fingerprint, comm::World& world);

}  // namespace trident::parallel
