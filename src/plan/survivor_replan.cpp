#include "plan/survivor_replan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>

namespace trident::plan {

std::string to_string(BatchPolicy p) { return p == BatchPolicy::Keep ? "keep" : "scale"; }
std::string to_string(LrRule r) { return r == LrRule::Linear ? "linear" : "sqrt"; }

namespace {

// The top-level commas of a hostlist (those outside brackets).
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : text) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  parts.push_back(cur);
  return parts;
}

// Far beyond any cluster: a hostlist naming more nodes is a mistake, not a job.
constexpr int64_t kMaxNodes = 1 << 17;

}  // namespace

std::vector<OptionDef> replan_options() {
  return {
      {"gpus-left", "replan", "GPUs still working (whole nodes are used)", false, "INT", "one of the three"},
      {"lost-nodes", "replan", "the nodes that failed: names or Slurm's form (node[003,007])", false, "LIST",
       "one of the three"},
      {"nodelist", "replan", "the nodes left, in Slurm's form (node[001-004,007]: $SLURM_JOB_NODELIST)", false, "LIST",
       "one of the three"},
      {"batch", "replan",
       "global batch on the survivors: keep (the same, more accumulation) or scale (smaller by the nodes left, the "
       "learning rate by --lr-rule)",
       false, "keep|scale", "keep"},
      {"lr-rule", "replan", "with --batch scale: linear (lr x B'/B) or sqrt (lr x sqrt(B'/B))", false, "linear|sqrt",
       "linear"},
      input_path({"from-checkpoint", "replan",
                  "the last checkpoint of the run: its model, batch and layout when not given; checks that it "
                  "reshards into the new layout",
                  false, "DIR", "none"}),
      input_path({"plan-json", "replan", "the plan as `trident plan --json` printed it: its best layout and recipe",
                  false, "FILE", "none"}),
  };
}

std::vector<std::string> expand_slurm_nodelist(const std::string& text, Problems& p) {
  std::vector<std::string> names;
  const std::regex bracketed(R"(([A-Za-z0-9_.-]*)\[([0-9,\-]+)\]([A-Za-z0-9_.-]*))");
  const std::regex plain(R"([A-Za-z0-9_.-]+)");
  auto bad = [&](const std::string& part, const std::string& why) {
    p.add(fmt::format("node list '{}': '{}' {}", text, part, why),
          "give node names or Slurm's form, e.g. node[001-004,007] or node3,node7", "nodelist");
  };
  for (const std::string& part : split_top_level(text)) {
    std::smatch m;
    if (std::regex_match(part, m, plain)) {
      names.push_back(part);
      continue;
    }
    if (!std::regex_match(part, m, bracketed)) {
      bad(part, "is neither a node name nor prefix[ranges]suffix");
      return {};
    }
    const std::string prefix = m[1], ranges = m[2], suffix = m[3];
    std::stringstream in(ranges);
    for (std::string r; std::getline(in, r, ',');) {
      const auto dash = r.find('-');
      const std::string lo = r.substr(0, dash), hi = dash == std::string::npos ? lo : r.substr(dash + 1);
      if (lo.empty() || hi.empty() || lo.size() > 9 || hi.size() > 9 || hi.find('-') != std::string::npos) {
        bad(part, "has a range that is not N or N-M");
        return {};
      }
      const int64_t a = std::stoll(lo), b = std::stoll(hi);
      if (b < a || b - a >= kMaxNodes || int64_t(names.size()) + (b - a) >= kMaxNodes) {
        bad(part, fmt::format("has the range {}-{} (backwards, or more than {} nodes)", lo, hi, kMaxNodes));
        return {};
      }
      for (int64_t i = a; i <= b; ++i) names.push_back(prefix + fmt::format("{:0{}}", i, int(lo.size())) + suffix);
    }
  }
  return names;
}

Survivors survivors_from_gpus(int64_t gpus_left, const ClusterSpec& c, Problems& p) {
  Survivors s;
  const int64_t gpn = std::max<int64_t>(c.gpus_per_node, 1);
  if (gpus_left <= 0 || gpus_left >= c.world_size()) {
    p.add(fmt::format("--gpus-left {} must be between 1 and the {} GPUs of the plan less one", gpus_left, c.world_size()),
          "give the GPUs that are still working, e.g. --gpus-left " + std::to_string(std::max<int64_t>(c.world_size() - gpn, 1)),
          "replan-survivors");
    return s;
  }
  s.nodes = gpus_left / gpn;
  s.gpus = s.nodes * gpn;
  s.idle_gpus = gpus_left - s.gpus;
  s.how = fmt::format("--gpus-left {}: {} whole nodes of {} GPUs{}", gpus_left, s.nodes, gpn,
                      s.idle_gpus > 0 ? fmt::format(" ({} GPUs of a partial node left idle: a layout places whole "
                                                    "nodes)",
                                                    s.idle_gpus)
                                      : "");
  if (s.nodes == 0)
    p.add(fmt::format("--gpus-left {} is less than one node of {} GPUs", gpus_left, gpn),
          "replan needs one whole node or more", "replan-survivors");
  return s;
}

Survivors survivors_from_lost_nodes(const std::vector<std::string>& lost, const ClusterSpec& c, Problems& p) {
  Survivors s;
  const std::set<std::string> distinct(lost.begin(), lost.end());
  if (distinct.size() != lost.size())
    p.add(fmt::format("--lost-nodes names a node twice ({} names, {} distinct)", lost.size(), distinct.size()),
          "name each lost node once", "replan-survivors");
  const int64_t n = int64_t(distinct.size());
  if (n >= c.nodes) {
    p.add(fmt::format("--lost-nodes names {} nodes, but the plan has {}: none would be left", n, c.nodes),
          "name only the nodes that failed", "replan-survivors");
    return s;
  }
  s.nodes = c.nodes - n;
  s.gpus = s.nodes * c.gpus_per_node;
  s.how = fmt::format("--lost-nodes: {} of {} nodes lost, {} left", n, c.nodes, s.nodes);
  return s;
}

Survivors survivors_from_nodelist(const std::vector<std::string>& left, const ClusterSpec& c, Problems& p) {
  Survivors s;
  const std::set<std::string> distinct(left.begin(), left.end());
  const int64_t n = int64_t(distinct.size());
  if (n == 0 || n >= c.nodes) {
    p.add(fmt::format("--nodelist names {} nodes; the plan has {}: replan needs between 1 and {}", n, c.nodes, c.nodes - 1),
          "give the nodes that are left (Slurm's $SLURM_JOB_NODELIST of the new allocation)", "replan-survivors");
    return s;
  }
  s.nodes = n;
  s.gpus = n * c.gpus_per_node;
  s.how = fmt::format("--nodelist: {} nodes left of {}", n, c.nodes);
  return s;
}

SurvivorPlan replan_for_survivors(const RunSpec& original, const Survivors& survivors, BatchPolicy policy, LrRule rule,
                                  const CostConstants& cost, double overhead, int top) {
  SurvivorPlan r;
  r.original = estimate(original, overhead, cost);
  r.survivors = survivors;
  r.policy = policy;
  r.rule = rule;
  r.batch_before = original.exec.global_batch_size;
  SearchSpace space;
  space.use_stack(original.exec);
  // A written plan lists the overlaps in effect under its own schedule ("tp,dp,pp" for Megatron's
  // interleaved one); the search tries other schedules, where the stack's own rule applies again
  // (Megatron-Core overlaps pipeline sends in the interleaved schedule only).
  if (const StackPreset* stack = find_stack(original.exec.stack))
    space.settings.overlap.pp_interleaved_only = stack->overlap.pp_interleaved_only;
  // Every count of nodes from all the survivors down (at most kNodeCounts of them): an awkward
  // count (62 nodes for a batch of 1024) can be slower than a few nodes fewer, or fit no layout.
  // keep: the same batch; scale: the batch of the nodes used, lowered until a layout fits.
  constexpr int64_t kNodeCounts = 16, kBatchTries = 16;
  const int64_t lowest_nodes = std::max<int64_t>(1, survivors.nodes - kNodeCounts + 1);
  for (int64_t nodes = survivors.nodes; nodes >= lowest_nodes; --nodes) {
    ClusterSpec left = original.cluster;
    left.nodes = nodes;
    int64_t batch = policy == BatchPolicy::Keep
                        ? r.batch_before
                        : std::max<int64_t>(1, r.batch_before * nodes / std::max<int64_t>(original.cluster.nodes, 1));
    const int64_t lowest = policy == BatchPolicy::Keep ? batch : std::max<int64_t>(1, batch - kBatchTries + 1);
    for (; batch >= lowest; --batch) {
      ++r.batches_tried;
      SearchResult found = search(original.model, left, batch, space, top, overhead, cost);
      if (found.best.empty()) {
        if (r.search.best.empty()) r.search = std::move(found);  // the rejected counts, when nothing fits
        continue;
      }
      if (r.search.best.empty() || found.best.front().tokens_per_s > r.search.best.front().tokens_per_s) {
        r.search = std::move(found);
        r.batch_after = batch;
        r.nodes_used = nodes;
      }
      break;
    }
    ++r.node_counts_tried;
  }
  if (r.search.best.empty()) return r;
  r.best = r.search.best.front();
  const double ratio = double(r.batch_after) / double(r.batch_before);
  r.lr_factor = policy == BatchPolicy::Keep ? 1 : rule == LrRule::Linear ? ratio : std::sqrt(ratio);
  r.step_ratio = r.best->time.step / r.original.time.step;
  r.throughput_ratio = r.best->tokens_per_s / r.original.tokens_per_s;
  r.time_to_train_ratio = 1 / r.throughput_ratio;
  return r;
}

RunSpec survivor_run(const SurvivorPlan& plan) { return plan.best ? plan.best->run : plan.original.run; }

}  // namespace trident::plan
