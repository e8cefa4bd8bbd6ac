// The rehearsal's own conditions, measured: its R ranks, placed on the emulated hosts as the run
// places them, all active at once. `trident bench` measures a link with 2 ranks on 2 cores; a
// rehearsal runs R ranks on the same cores, so a blocking exchange waits for its peer to be
// scheduled (a scheduler slice, not bytes / bandwidth) and a computing rank shares its core with
// the ranks waiting for their messages. The probe makes each rank alternate one compute chunk
// (a square sgemm of the rehearsal's FLOPs per TP exchange) with an all-gather of the
// rehearsal's TP message in a pair, through the trainer's communicator (so it waits as a TP group
// waits), first with a partner in its own host, then with one on another host, every rank at once. What the prediction's cluster takes from it (placement_inputs):
//   - each rank's compute share: the chunk's best CPU time alone (the basis of the bench's core
//     rates) over its mean wall time in the probe (both phases together);
//   - the latency of each link kind: the mean exchange time less the bytes at the link's
//     modelled bandwidth (so the planner's cost of one such exchange is the measured time).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/comm/world.h"

namespace trident::measure {

struct ProbePhase {
  bool measured = false;  // false: no partner of this kind (one host, or one rank per host)
  double compute_s = 0;   // mean over ranks of the mean wall time of one compute chunk
  double exchange_s = 0;  // mean over ranks of the mean wall time of one exchange
};

struct PlacementProbe {
  int64_t ranks = 0, hosts = 0, ranks_per_host = 0, iterations = 0, gemm_n = 0;
  double message_bytes = 0;  // sent by each rank of a pair per all-gather
  double alone_cpu_s = 0;    // one chunk alone, best CPU time (the others asleep)
  ProbePhase intra, inter;
};

// Runs the probe over `world` (every rank calls it; hosts are the world's shared-memory hosts).
PlacementProbe measure_placement(comm::World& world, double message_bytes, double chunk_flops, int64_t iterations);

nlohmann::json probe_json(const PlacementProbe& p);
PlacementProbe probe_from_json(const nlohmann::json& j);  // throws std::runtime_error naming the key

// The prediction's inputs from a probe, given the modelled bandwidth x efficiency of each link
// (the planner's per-GPU figures of the prediction's cluster).
struct PlacementInputs {
  double compute_share = 0;        // alone_cpu_s / mean of the phases' compute_s, at most 1
  double intra_latency_s = 0, inter_latency_s = 0;
  double intra_wire_s = 0, inter_wire_s = 0;  // message_bytes at the modelled rate, taken out
  std::string text;                // every input and the arithmetic, for the links text
};
PlacementInputs placement_inputs(const PlacementProbe& p, double intra_Bps, double inter_Bps);

}  // namespace trident::measure
