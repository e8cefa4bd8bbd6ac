// The links of a rehearsal and the cluster file its prediction is made on: the planning side
// (what to measure, at what rate, what the prediction's cluster file says). The measuring itself,
// which starts the benches and the emulated hosts, is cli/rehearse_links.h.
//
// This machine is measured by `trident bench` (the --bench file, or a 2-rank run into the
// rehearsal's folder). One host: that file is the prediction's cluster as it is. Emulated hosts:
// the link of each host is shaped to the plan's ratio of inside-host to between-host bandwidth
// per GPU, applied to this machine's shared-memory bandwidth per rank (at most 0.1 GB/s per
// host, below what the bridge and TCP carry unshaped here, so the shaping is what limits), then
// measured by `trident bench` with one rank in each of two hosts; the prediction's cluster is the
// machine's file with the hosts as nodes, the measured link as the network between them (its
// ping-pong bandwidth, its all-reduce share as network_efficiency). Latency and compute are not
// those of 2 ranks on 2 cores: the rehearsal's R ranks share the cores, so the placement probe
// (placement_probe.h) measures them with every rank placed as the run places it, all active at
// once, and the cluster takes each link kind's latency and each rank's compute share from it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/options.h"
#include "core/problems.h"
#include "core/run_spec.h"
#include "rehearse/rehearsal_shape.h"

namespace trident::rehearse {

// The placement probe's sizes for `run`: the bytes a rank exchanges with its peer (the TP ring
// step's message), and the FLOPs computed between two exchanges (3 x a layer's forward over the
// layer's exchanges: TP ring steps and EP all-to-alls).
struct ProbeSize {
  double bytes = 0, flops = 0;
  int64_t exchanges = 0;
};
ProbeSize probe_size(const RunSpec& run);

// The rate each emulated host's link is capped at: below the ~0.2 GB/s the bridge and TCP
// carried unshaped here.
constexpr double kLinkCapBps = 0.1e9;
// The messages of the link measurement (bench --mpi-mib), MiB.
constexpr double kBenchMib = 2;

// A bench file's values, read by the loaders plan uses; bench_number() one of them, or a
// std::runtime_error naming the file and the key.
OptionValues bench_values(const std::string& path);
double bench_number(const OptionValues& v, const char* key, const std::string& file);

// How the rehearsed step calls its EP all-to-alls, for the bench to time them so (0: no ep).
struct EpCalls {
  double send_bytes = 0, working_set = 0, first_working_set = 0;
  int64_t per_step = 0;
};
EpCalls ep_calls(const RunSpec& run);

// The bench file the rehearsal's links and prediction are made from (--bench, or the one it
// measured): every measurement they take from it present, as `trident bench` writes it, and the
// cluster and cost tables it makes in range (as plan checks a cluster file). Adds a problem
// naming the file and each key missing or out of range.
void check_bench_file(const std::string& path, const std::string& flag, Problems& problems);

// The longest the rehearsal's training runs may take, together, on their predicted step.
constexpr double kRehearsalLimitS = 600;

// The rate each emulated host's link is shaped to: link_Bps when given, else the plan's ratio
// of inside-node to between-node bandwidth per GPU applied to the machine's shared memory per
// rank (`shm_Bps`, the bench file's), at most 0.1 GB/s.
struct LinkRate {
  double ratio = 0, target_Bps = 0, rate_Bps = 0;
};
LinkRate link_rate(const RunSpec& plan, const RehearsalShape& shape, double shm_Bps, double link_Bps);

// Adds a problem when, on the link link_rate() shapes (link_Bps: --link-gbytes-per-s, 0 for the
// default) from the bench file `machine`, the planner predicts `runs` runs of `steps` steps of the
// rehearsal (`cores` cores), with the link measurement before them, to take longer than
// kRehearsalLimitS: such a link is refused before
// anything is shaped, naming the slowest rate that finishes in time. One host: nothing to check.
void check_link_time(const RunSpec& plan, const RehearsalShape& shape, const std::string& machine, double link_Bps,
                     int64_t steps, int64_t runs, int64_t cores, Problems& problems);

// A file's whole text (a bench or cluster file); std::runtime_error naming it when unreadable.
std::string read_text_file(const std::string& path);

// The cluster file of the prediction: `machine` (bench's TOML) with these [cluster] and [cost]
// keys set (replaced where present, added where not).
std::string override_toml(const std::string& machine, const std::vector<std::pair<std::string, std::string>>& cluster,
                          const std::vector<std::pair<std::string, std::string>>& cost);

}  // namespace trident::rehearse
