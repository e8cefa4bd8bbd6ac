// DistTrainer's routing statistics: zeroed for the step, counted after each forward, the EP rows
// and load imbalance, summed over the world.
#include "runtime/parallel/dist_trainer.h"

#include "runtime/parallel/dist_trainer_impl.h"

namespace trident::parallel {

void DistTrainer::Impl::start_routing(RoutingStats& r) const {
  r = RoutingStats{};
  const nn::Shard whole = nn::Shard::whole(run.model);
  if (!run.model.is_moe()) return;
  for (int64_t l = 0; l < run.model.layers + run.model.mtp_layers; ++l)  // the MTP layers' routers too
    if (whole.moe_layer(l)) r.layers.push_back(l);
  r.tokens_per_expert.assign(r.layers.size(), std::vector<int64_t>(size_t(run.model.experts), 0));
  r.dropped.assign(r.layers.size(), 0);
  r.dropped_ids.assign(r.layers.size(), 0);
  r.closest_tie.assign(r.layers.size(), std::numeric_limits<double>::infinity());
}

// Micro-batch mb of this replica holds sequences dp_rank B/dp + mb b onward (cp 1: whole ones),
// so its token t is token (first sequence) T + t of the global batch (under cp: its position).
void DistTrainer::Impl::count_routing(RoutingStats& r, const Chunk& ch, nn::Activations& acts, int64_t mb) const {
  if (r.empty() || groups.coords.tp() != 0) return;  // tp ranks route the same tokens
  const nn::Shard& s = ch.stage->shard();
  const int64_t first_token = (dp_rank * (B / dp) + mb * b) * T;
  for (int64_t i = 0; i < s.num_layers() + s.mtp_count(); ++i) {
    const nn::MoeRouting* route = acts.routing(i);
    if (!route) continue;
    const size_t at = size_t(std::find(r.layers.begin(), r.layers.end(), s.first_layer + i) - r.layers.begin());
    for (int64_t e = 0; e < route->E; ++e) r.tokens_per_expert[at][size_t(e)] += route->routed[size_t(e)];
    r.dropped[at] += route->dropped;
    if (route->k < route->E) {  // the gap between each token's last chosen score and the best one left out
      std::vector<float> row(size_t(route->E));
      for (int64_t t = 0; t < route->N; ++t) {
        std::copy_n(route->probs.begin() + t * route->E, route->E, row.begin());
        for (size_t e = 0; e < route->bias.size(); ++e) row[e] += route->bias[e];  // chosen on score + bias
        std::nth_element(row.begin(), row.begin() + route->k, row.end(), std::greater<float>());
        const float left_out = row[size_t(route->k)];
        const float last_chosen = *std::min_element(row.begin(), row.begin() + route->k);
        r.closest_tie[at] = std::min(r.closest_tie[at], double(last_chosen) - double(left_out));
      }
    }
    // An assignment's identity: its token in the global batch (under cp local row j of a
    // sequence is its position context.position(j)) and its place j among the token's k.
    const int64_t k = route->k, local = context.local();
    for (int64_t a = 0; a < int64_t(route->pos.size()); ++a) {
      if (route->pos[size_t(a)] != nn::kDropped) continue;
      const int64_t t = a / k, token = first_token + (t / local) * T + context.position(t % local);
      r.dropped_ids[at] += int64_t(nn::mix64(uint64_t(token * k + a % k)) >> 32);
    }
  }
}

void DistTrainer::Impl::count_ep_rows(const Chunk& ch, nn::Activations& acts) {
  if (!ep) return;
  for (int64_t i = 0; i < ch.stage->shard().num_layers() + ch.stage->shard().mtp_count(); ++i)
    if (const nn::MoeRouting* route = acts.routing(i)) {
      double rows = 0;
      for (size_t n : route->recv_rows) rows += double(n);
      ep_rows.push_back(rows);
    }
}

// Every ep rank makes the same dispatches in the same order (the same schedule over the same
// layers): dispatch i's rows, gathered over the group, give its most loaded rank and the mean.
// Called at ep > 1 only (every rank of the world has an EP group then).
void DistTrainer::Impl::ep_load_imbalance(RoutingStats& r) {
  comm::Communicator& e = *groups.ep;
  const std::vector<double> all = all_gather_same_calls(*k, e, ep_rows, "dispatches");
  std::vector<double> sums = {0, 0};  // most loaded, mean
  const size_t n = ep_rows.size();
  for (size_t i = 0; i < n; ++i) {
    double most = 0, total = 0;
    for (int q = 0; q < e.size(); ++q) most = std::max(most, all[size_t(q) * n + i]), total += all[size_t(q) * n + i];
    sums[0] += most, sums[1] += total / e.size();
  }
  ep_rows.clear();
  all_reduce_f64(*groups.world, sums.data(), sums.size(), comm::ReduceOp::Sum);
  r.ep_load_imbalance = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

void DistTrainer::Impl::sum_routing(RoutingStats& r) const {
  if (r.empty()) return;
  std::vector<int64_t> all;
  for (const auto& row : r.tokens_per_expert) all.insert(all.end(), row.begin(), row.end());
  all.insert(all.end(), r.dropped.begin(), r.dropped.end());
  all.insert(all.end(), r.dropped_ids.begin(), r.dropped_ids.end());
  groups.world->all_reduce(all.data(), all.size(), comm::DType::I64, comm::ReduceOp::Sum);
  size_t at = 0;
  for (auto& row : r.tokens_per_expert)
    for (auto& x : row) x = all[at++];
  for (auto& x : r.dropped) x = all[at++];
  for (auto& x : r.dropped_ids) x = all[at++];
  all_reduce_f64(*groups.world, r.closest_tie.data(), r.closest_tie.size(), comm::ReduceOp::Min);
}

}  // namespace trident::parallel
