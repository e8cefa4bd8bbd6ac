// Expert parallelism in the stage model, on 4 MPI ranks: rank r of an EP group of ep ranks holds
// experts [r E/ep, (r+1) E/ep) and routes its own micro-batch; the tokens travel to their
// experts' ranks and back by all-to-all. Against one process that holds every expert and runs
// every rank's micro-batch: each rank's loss, the dense gradients summed over the group and each
// rank's expert gradients agree (GPT and Llama, no dropping and dropping at capacity factor 1:
// the capacity is each micro-batch's, so the same assignments are dropped).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/comm/mpi_communicator.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/init.h"

using namespace trident;

namespace {

ModelSpec model(bool llama) {
  ModelSpec m;
  m.family = llama ? ModelFamily::Llama : ModelFamily::GPT;
  m.layers = 2, m.hidden = 32, m.heads = 2, m.kv_heads = 2, m.ffn_hidden = 64, m.seq_len = 16, m.vocab = 64;
  m.experts = 8, m.experts_per_token = 2, m.expert_ffn_hidden = 24, m.moe_dense_layers = 0;
  return m;
}

constexpr int64_t kB = 2;

void batch(const ModelSpec& m, int64_t micro, std::vector<int32_t>& tok, std::vector<int32_t>& tgt) {
  const int64_t N = kB * m.seq_len;
  tok.resize(size_t(N)), tgt.resize(size_t(N));
  for (int64_t i = 0; i < N; ++i) {
    tok[size_t(i)] = int32_t(nn::mix64(uint64_t(micro * 1000 + i)) % uint64_t(m.vocab));
    tgt[size_t(i)] = int32_t(nn::mix64(uint64_t(micro * 1000 + i) + 77) % uint64_t(m.vocab));
  }
}

// Logical (name, row, col) -> gradient of a stage's shard.
std::map<std::tuple<std::string, int64_t, int64_t>, float> logical_grads(nn::GptStage& g) {
  std::map<std::tuple<std::string, int64_t, int64_t>, float> out;
  for (const auto& t : g.layout().tensors())
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) {
        const auto gi = g.layout().global(t, r, c);
        out[{gi.name, gi.row, gi.col}] = g.grads()[t.offset + r * t.cols + c];
      }
  return out;
}

void check_ep(bool llama, bool drop, int ep) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ASSERT_EQ(world % ep, 0);
  MPI_Comm group;
  MPI_Comm_split(MPI_COMM_WORLD, rank / ep, rank % ep, &group);
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->world_rank = rank;
  ctx->timeout_s = 60;
  std::vector<int> ranks(static_cast<size_t>(ep));
  for (int i = 0; i < ep; ++i) ranks[size_t(i)] = rank / ep * ep + i;
  comm::MpiCommunicator ep_comm(group, "ep", ranks, ctx);
  const int me = ep_comm.rank();
  const ModelSpec m = model(llama);
  auto k = kernels::make_cpu_kernels(1);
  const int64_t N = kB * m.seq_len;
  const float dloss = 1.0f / float(ep * N);
  nn::MoeOptions o;
  o.drop = drop, o.normalise = !llama, o.aux_coeff = 0.05, o.z_coeff = 0.01;

  nn::Shard shard = nn::Shard::whole(m);
  shard.moe = o;
  shard.ep_size = ep, shard.ep_rank = me;
  nn::GptStage g(*k, shard, {.B = kB, .T = m.seq_len});
  g.set_expert_group(&ep_comm);
  g.init_params(5);
  nn::Activations a(g);
  std::vector<int32_t> tok, tgt;
  batch(m, rank, tok, tgt);  // each rank its own micro-batch
  g.zero_grads();
  g.forward(a, tok.data(), tgt.data());
  const double loss = g.loss_sum(a) + g.moe_aux_loss(a) * double(N);
  g.backward(a, tok.data(), tgt.data(), dloss);
  auto got = logical_grads(g);

  // One process: every expert, the group's micro-batches in turn.
  nn::Shard whole = nn::Shard::whole(m);
  whole.moe = o;
  nn::GptStage ref(*k, whole, {.B = kB, .T = m.seq_len});
  ref.init_params(5);
  nn::Activations ra(ref);
  ref.zero_grads();
  double ref_loss = 0;
  for (int q = 0; q < ep; ++q) {
    batch(m, rank / ep * ep + q, tok, tgt);
    ref.forward(ra, tok.data(), tgt.data());
    if (q == me) ref_loss = ref.loss_sum(ra) + ref.moe_aux_loss(ra) * double(N);
    ref.backward(ra, tok.data(), tgt.data(), dloss);
  }
  auto want = logical_grads(ref);
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss)) << "rank " << rank;

  // Dense gradients are partial per rank (each its micro-batch): summed over the group.
  std::vector<std::tuple<std::string, int64_t, int64_t>> dense;
  std::vector<float> dense_vals;
  for (const auto& [key, v] : got)
    if (std::get<0>(key).find(".experts.") == std::string::npos) dense.push_back(key), dense_vals.push_back(v);
  ep_comm.all_reduce(dense_vals.data(), dense_vals.size(), comm::DType::F32, comm::ReduceOp::Sum);
  float scale = 0;
  for (const auto& [key, v] : want) scale = std::max(scale, std::abs(v));
  const float tol = 1e-5f * scale;
  int bad = 0;
  for (size_t i = 0; i < dense.size(); ++i)
    if (std::abs(dense_vals[i] - want[dense[i]]) > tol && bad++ < 5)
      ADD_FAILURE() << std::get<0>(dense[i]) << " [" << std::get<1>(dense[i]) << "," << std::get<2>(dense[i])
                    << "]: " << dense_vals[i] << " vs " << want[dense[i]];
  // Expert gradients are whole on the rank holding the expert (every token routed to it came).
  int64_t experts_checked = 0;
  for (const auto& [key, v] : got)
    if (std::get<0>(key).find(".experts.") != std::string::npos) {
      ++experts_checked;
      if (std::abs(v - want[key]) > tol && bad++ < 10)
        ADD_FAILURE() << std::get<0>(key) << " [" << std::get<1>(key) << "]: " << v << " vs " << want[key];
    }
  EXPECT_GT(experts_checked, 0);
  EXPECT_EQ(bad, 0) << "llama " << llama << " drop " << drop << " ep " << ep;
}

TEST(ExpertParallel, gpt_ep2_and_ep4_match_one_process_without_dropping) {
  check_ep(false, false, 2);
  check_ep(false, false, 4);
}

TEST(ExpertParallel, llama_ep4_matches_one_process_without_dropping) { check_ep(true, false, 4); }

TEST(ExpertParallel, dropping_at_capacity_drops_the_same_assignments_as_one_process) {
  check_ep(false, true, 2);
  check_ep(true, true, 4);
}

}  // namespace
