// The inverse of resolve_run for what a plan chooses: a RunSpec's layout, batch and recipe as
// option texts ("tp" -> "8", "schedule" -> "1f1b"), plus the cluster's size. Writing them into a
// config file and resolving it again gives the same RunSpec (tested), which is how
// `trident plan --emit FILE.toml` hands its winner to lint, topo, simulate and train.
#pragma once

#include <map>
#include <string>

#include "core/run_spec.h"

namespace trident {

// Keyed by canonical option name. A setting added to Layout or ExecutionSpec belongs here too.
std::map<std::string, std::string> run_option_texts(const RunSpec& run);

}  // namespace trident
