// How OpenMP threads wait between parallel loops. libgomp spins (about 300,000 turns) before it
// sleeps; where a node's ranks x threads (with the load other processes put on the machine)
// exceed its cores, the spinning takes the cores the working threads need: two spinning
// threads on a busy 2-core machine turned a 3 s run into 60 s. libgomp reads OMP_WAIT_POLICY
// once, as it loads: `trident` sets it for `train` before it loads the runtime library.
#pragma once

#include <cstdint>
#include <string>

namespace trident::launch {

struct WaitChoice {
  bool passive = false;
  std::string why;  // "2 ranks x 2 threads + load 7.9 > 2 cores"
};

// Passive when ranks of 2 threads or more, x threads, + load exceed the cores (load: the 1-minute
// load average of the other processes, 0 when unknown).
WaitChoice openmp_wait(int64_t node_ranks, int64_t threads, double load, int64_t cores);

// Called before the runtime library (and so libgomp) loads: for `trident train` without
// OMP_WAIT_POLICY or GOMP_SPINCOUNT set, and oversubscribed as above, sets OMP_WAIT_POLICY=passive
// (and the reason, for openmp_wait_note). Changes nothing otherwise.
void wait_passively_when_oversubscribed(int argc, char** argv);

// The start-up table's words for the policy in force ("" when none was set).
std::string openmp_wait_note();

}  // namespace trident::launch
