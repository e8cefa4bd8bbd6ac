// What `trident train --elastic` learns from a failed launch: which ranks were lost, from what the
// launcher and the ranks said on standard error. Pure text functions (tested without a run).
//   - Open MPI's mpirun: "mpirun noticed that process rank 5 with PID 123 on node n1 exited on signal 9"
//   - Slurm's srun:      "srun: error: n1: task 5: Killed" (or "... task 5: Exited with exit code 1" for
//                        a rank that ended by itself)
//   - a straggler evicted (--evict-stragglers): "trident train: evicting straggler rank 3: ..."
//   - a hung rank: its peers' own stop (training_loop.cpp), "trident train: rank 0 (...) failed:
//     communication timeout: rank 0 waited 20 s at step 3 on pp[0/2] recv ... from rank 1": the peer
//     waited on (rank 1) is lost when no rank died.
// A rank that stopped with Trident's own error (bad input, a full disk) is not lost: nothing is
// re-planned for it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::parallel {

struct LostRanks {
  std::vector<int> ranks;  // sorted, distinct
  std::string evidence;    // the lines that named them
};
LostRanks lost_ranks_from_output(const std::string& stderr_text);

// The nodes of these ranks (rank r on node r / ranks_per_node), sorted and distinct.
std::vector<int64_t> nodes_of_ranks(const std::vector<int>& ranks, int64_t ranks_per_node);

}  // namespace trident::parallel
