// Which ranks a failed launch lost (see elastic_failure.h).
#include "runtime/parallel/elastic_failure.h"

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

namespace trident::parallel {

LostRanks lost_ranks_from_output(const std::string& text) {
  static const std::regex mpirun_died(R"(process rank ([0-9]+) with PID [0-9]+ on node \S+ exited on signal)");
  static const std::regex srun_died(R"(srun: error: \S+: tasks? ([0-9]+): (Killed|Segmentation|Aborted|Bus error|Terminated))");
  static const std::regex evicted(R"(evicting straggler rank ([0-9]+))");
  static const std::regex waited_on(R"(failed: communication timeout: rank [0-9]+ waited .* (from|to) rank ([0-9]+))");
  std::set<int> died, hung;
  std::string died_lines, hung_lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, mpirun_died) || std::regex_search(line, m, srun_died) ||
        std::regex_search(line, m, evicted)) {
      died.insert(std::stoi(m[1]));
      died_lines += line + "\n";
    } else if (std::regex_search(line, m, waited_on)) {
      hung.insert(std::stoi(m[2]));
      hung_lines += line + "\n";
    }
  }
  // A rank that died explains its peers' time-outs; only when none died is the peer waited on lost.
  LostRanks r;
  const std::set<int>& lost = died.empty() ? hung : died;
  r.ranks.assign(lost.begin(), lost.end());
  r.evidence = died.empty() ? hung_lines : died_lines;
  return r;
}

std::vector<int64_t> nodes_of_ranks(const std::vector<int>& ranks, int64_t ranks_per_node) {
  std::set<int64_t> nodes;
  for (int r : ranks) nodes.insert(r / std::max<int64_t>(ranks_per_node, 1));
  return {nodes.begin(), nodes.end()};
}

}  // namespace trident::parallel
