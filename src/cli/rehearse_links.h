// The links of a rehearsal, measured: `trident bench` on this machine (or the --bench file), the
// emulated hosts with their shaped link and its measurement, the placement probe, and the
// prediction's cluster file made from them (rehearse/rehearsal_link.h holds the planning side:
// what is measured, the rates, the file's keys). It starts processes and hosts, so it lives with
// the command, above both the rehearsal library and the runtime's measuring room.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_spec.h"
#include "rehearse/rehearsal_shape.h"
#include "runtime/measure/emulated_hosts.h"

namespace trident::cli {

struct RehearsalLinks {
  std::unique_ptr<measure::EmulatedHosts> hosts;  // null with one host
  std::string cluster_file;                       // the prediction's cluster
  std::string text;                               // what was measured and shaped
  nlohmann::json json;
};

// mpirun's command line for np ranks placed by `placement` running trident with `args`.
using LauncherLine = std::function<std::vector<std::string>(int64_t np, const std::vector<std::string>& placement,
                                                            const std::vector<std::string>& args)>;

// Measures and shapes as rehearse/rehearsal_link.h says; writes dir/prediction-cluster.toml.
// link_Bps > 0 sets the shaped bandwidth. Throws std::runtime_error when a measurement fails.
// Refuses (InputError) a bench file or a link that check_bench_file or check_link_time refuse.
RehearsalLinks prepare_links(const RunSpec& plan, const RehearsalShape& shape, const std::string& bench_file,
                             const std::string& dir, double link_Bps, int64_t steps, int64_t runs,
                             const LauncherLine& launcher);

}  // namespace trident::cli
