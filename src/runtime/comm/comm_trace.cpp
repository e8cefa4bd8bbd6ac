#include "runtime/comm/comm_trace.h"

namespace trident::comm {

void CommContext::log(const std::string& line) {
  std::lock_guard<std::mutex> lock(trace_mutex);
  std::fprintf(trace_out, "[comm] step %lld rank %d %s\n", static_cast<long long>(step), world_rank, line.c_str());
  std::fflush(trace_out);
}

}  // namespace trident::comm
