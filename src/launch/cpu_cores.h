// The cores this process may run on (sched_getaffinity; all of the machine's when unknown).
#pragma once

#include <cstdint>

namespace trident::launch {

int64_t affinity_cores();

}  // namespace trident::launch
