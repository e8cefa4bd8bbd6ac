// GradSync on 2 ranks: buckets tile the flat buffer at layer boundaries, plain DP sums every
// element over the replicas, ZeRO-1 slices are disjoint and cover the buffer, and the
// all-gather after the sharded update gives every rank every slice; GptStage's grad-ready hook
// starts the buckets during backward.
#include <gtest/gtest.h>

#include <stdexcept>
#include <mpi.h>

#include <algorithm>
#include <set>

#include "runtime/comm/mpi_communicator.h"
#include "runtime/comm/self_communicator.h"
#include "runtime/parallel/grad_sync.h"
#include "runtime/kernels/ops.h"
#include "runtime/nn/gpt.h"

using namespace trident;

namespace {

nn::ParamLayout layout() {
  ModelSpec m;
  m.layers = 3, m.hidden = 32, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 64;
  return nn::ParamLayout(nn::Shard::whole(m));
}

std::unique_ptr<comm::MpiCommunicator> world() {
  auto ctx = std::make_shared<comm::CommContext>();
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx->world_rank);
  return comm::MpiCommunicator::world(ctx);
}

TEST(GradSync, buckets_tile_the_buffer_at_layer_boundaries_and_plain_dp_sums_every_element) {
  auto comm = world();
  nn::ParamLayout L = layout();
  auto k = kernels::make_cpu_kernels(1);
  parallel::GradSync sync(*comm, L, /*zero=*/0, /*bucket_floats=*/5000, *k);
  EXPECT_GT(sync.bucket_count(), 2u);
  std::vector<float> g(L.total(), float(comm->rank() + 1));
  sync.start_step();
  // Backward reports the top half first: those buckets start at once.
  sync.mark_ready(g.data(), L.layer(1).begin, L.total());
  sync.finish(g.data());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(g[i], 3.0f) << "element " << i;
}

TEST(GradSync, zero1_slices_are_disjoint_cover_the_buffer_and_gather_back) {
  auto comm = world();
  nn::ParamLayout L = layout();
  auto k = kernels::make_cpu_kernels(1);
  parallel::GradSync sync(*comm, L, /*zero=*/1, 5000, *k);
  ASSERT_TRUE(sync.sharded());
  ASSERT_GT(sync.bucket_count(), 2u);
  // Every element owned by exactly one rank, each piece at its own place in the shard.
  std::vector<int32_t> owners(size_t(L.total()), 0);
  int64_t pieces_floats = 0;
  for (const auto& p : sync.pieces()) {
    for (int64_t i = p.begin; i < p.end; ++i) ++owners[size_t(i)];
    EXPECT_EQ(p.shard, pieces_floats);
    pieces_floats += p.end - p.begin;
  }
  EXPECT_EQ(pieces_floats, sync.shard_floats());
  comm->all_reduce(owners.data(), owners.size(), comm::DType::I32, comm::ReduceOp::Sum);
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(owners[size_t(i)], 1) << "element " << i;

  std::vector<float> g(L.total());
  for (int64_t i = 0; i < L.total(); ++i) g[i] = float(i % 7) * float(comm->rank() + 1);
  sync.start_step();
  // The top half is final first: its buckets' reduce-scatters start before finish().
  sync.mark_ready(g.data(), L.layer(1).begin, L.total());
  EXPECT_GT(sync.launched_buckets(), 0u);
  EXPECT_LT(sync.launched_buckets(), sync.bucket_count());
  sync.finish(g.data());
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) ASSERT_EQ(g[i], float(i % 7) * 3.0f) << "element " << i;

  std::vector<float> params(L.total(), -1.0f), shard(size_t(sync.shard_floats()));
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) params[i] = float(i), shard[size_t(p.shard + i - p.begin)] = float(i);
  sync.all_gather_params(params.data());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(params[i], float(i));
  // A moment held in slices comes back whole.
  const std::vector<float> whole = sync.gather_to_host(shard.data());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(whole[size_t(i)], float(i));
}

// A held range (ZeRO-1's tied embedding) starts only in finish(), and is still summed.
TEST(GradSync, zero1_held_bucket_waits_for_finish) {
  auto comm = world();
  nn::ParamLayout L = layout();
  auto k = kernels::make_cpu_kernels(1);
  parallel::GradSync sync(*comm, L, /*zero=*/1, 5000, *k);
  sync.hold_until_finish(L.total() - 1, L.total());  // the top bucket: final first
  std::vector<float> g(L.total(), float(comm->rank() + 1));
  sync.start_step();
  sync.mark_ready(g.data(), L.layer(1).begin, L.total());
  const size_t started = sync.launched_buckets();
  sync.finish(g.data());
  parallel::GradSync free_sync(*comm, L, /*zero=*/1, 5000, *k);
  std::vector<float> g2(L.total(), 1.0f);
  free_sync.start_step();
  free_sync.mark_ready(g2.data(), L.layer(1).begin, L.total());
  EXPECT_EQ(started + 1, free_sync.launched_buckets());
  free_sync.finish(g2.data());
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) ASSERT_EQ(g[i], 3.0f) << "element " << i;
}

// ZeRO-1's weight all-gathers overlap the next forward: started together, completed bucket by
// bucket where forward reads them, whole at the end.
TEST(GradSync, zero1_weight_gathers_complete_bucket_by_bucket) {
  auto comm = world();
  nn::ParamLayout L = layout();
  auto k = kernels::make_cpu_kernels(1);
  parallel::GradSync sync(*comm, L, /*zero=*/1, 5000, *k);
  ASSERT_GT(sync.bucket_count(), 2u);
  std::vector<float> params(L.total(), -1.0f), shard(size_t(sync.shard_floats()));
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) params[i] = float(i);
  EXPECT_TRUE(sync.wait_params(params.data(), 0, L.total()).empty()) << "nothing in flight yet";
  sync.start_param_gather(params.data());
  ASSERT_TRUE(sync.gathering_params());
  // The staging buffers are busy: a whole-buffer gather refuses (on every rank, before any call).
  EXPECT_THROW(sync.gather_to_host(shard.data()), std::logic_error);
  const auto first = sync.wait_params(params.data(), 0, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].begin, 0);
  for (int64_t i = 0; i < first[0].end; ++i) ASSERT_EQ(params[i], float(i)) << "element " << i;
  int64_t stale = 0;
  for (int64_t i = first[0].end; i < L.total(); ++i) stale += params[i] != float(i);
  EXPECT_GT(stale, 0) << "the other buckets completed before forward reached them";
  EXPECT_TRUE(sync.gathering_params());
  const auto rest = sync.complete_params(params.data());
  EXPECT_EQ(rest.size(), sync.bucket_count() - 1);
  EXPECT_FALSE(sync.gathering_params());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(params[i], float(i)) << "element " << i;
}

// Experts held by one rank of their expert-data-parallel group (ep = dp): ZeRO-1 leaves their
// gradients and weights where they lie (no staging, no collective), still sums the dense ranges
// over dp, and a moment's whole buffer still comes back with both kinds.
TEST(GradSync, zero1_experts_alone_in_their_group_stay_in_place) {
  auto comm = world();
  ModelSpec m;
  m.layers = 2, m.hidden = 32, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 64, m.seq_len = 16, m.vocab = 64;
  m.experts = 4, m.experts_per_token = 2, m.expert_ffn_hidden = 48;
  nn::Shard shard = nn::Shard::whole(m);
  shard.ep_size = 2, shard.ep_rank = comm->rank();
  const nn::ParamLayout L(shard);
  ASSERT_FALSE(L.expert_ranges().empty());
  comm::SelfCommunicator alone("edp");
  auto k = kernels::make_cpu_kernels(1);
  parallel::GradSync sync(*comm, L, /*zero=*/1, 2000, *k, &alone);
  std::vector<uint8_t> expert(size_t(L.total()), 0);
  for (const auto& e : L.expert_ranges())
    for (int64_t i = e.begin; i < e.end; ++i) expert[size_t(i)] = 1;
  parallel::ModelStateBytes with_experts;
  sync.add_bytes(with_experts);
  parallel::GradSync dense_only(*comm, L, /*zero=*/1, 2000, *k);
  parallel::ModelStateBytes without;
  dense_only.add_bytes(without);
  EXPECT_LT(with_experts.staging, without.staging) << "the experts' group of one has no staging";

  std::vector<float> g(L.total());
  for (int64_t i = 0; i < L.total(); ++i) g[i] = float(i % 5) * float(comm->rank() + 1);
  sync.start_step();
  sync.finish(g.data());
  int64_t experts_seen = 0;
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) {
      const float want = expert[size_t(i)] ? float(i % 5) * float(comm->rank() + 1) : float(i % 5) * 3.0f;
      ASSERT_EQ(g[i], want) << "element " << i << (expert[size_t(i)] ? " (expert)" : " (dense)");
      experts_seen += expert[size_t(i)];
    }
  EXPECT_EQ(experts_seen, int64_t(std::count(expert.begin(), expert.end(), 1))) << "each rank owns all its experts";

  std::vector<float> params(L.total(), -1.0f), moment(size_t(sync.shard_floats()));
  for (const auto& p : sync.pieces())
    for (int64_t i = p.begin; i < p.end; ++i) params[i] = float(i), moment[size_t(p.shard + i - p.begin)] = float(i);
  sync.start_param_gather(params.data());
  sync.complete_params(params.data());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(params[i], float(i)) << "element " << i;
  const std::vector<float> whole = sync.gather_to_host(moment.data());
  for (int64_t i = 0; i < L.total(); ++i) ASSERT_EQ(whole[size_t(i)], float(i)) << "element " << i;
}

// DP overlap layer by layer: GptStage's grad-ready hook feeds GradSync during backward, so
// buckets start before backward returns (the top layer's bucket first), and the reduced
// gradients are still exactly the sum over the replicas.
TEST(GradSync, grad_ready_hook_starts_buckets_during_backward_and_sums_exactly) {
  auto comm = world();
  ModelSpec m;
  m.layers = 3, m.hidden = 32, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 64;
  auto k = kernels::make_cpu_kernels(1);
  const int64_t B = 2, T = 16;
  nn::GptStage stage(*k, nn::Shard::whole(m), {.B = B, .T = T});
  stage.init_params(3);
  nn::Activations acts(stage);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int64_t i = 0; i < B * T; ++i) tok[i] = int32_t((i * 7 + comm->rank() * 13) % 64), tgt[i] = int32_t((i * 5 + 1) % 64);
  parallel::GradSync sync(*comm, stage.layout(), 0, /*bucket_floats=*/5000, *k);
  ASSERT_GT(sync.bucket_count(), 2u);

  std::vector<int64_t> begins;
  std::vector<size_t> launched;
  stage.set_grad_ready_hook([&](int64_t b, int64_t e) {
    EXPECT_EQ(e, stage.layout().total());
    sync.mark_ready(stage.grads(), b, e);
    begins.push_back(b);
    launched.push_back(sync.launched_buckets());
  });
  stage.zero_grads();
  sync.start_step();
  stage.forward(acts, tok.data(), tgt.data());
  stage.backward(acts, tok.data(), tgt.data(), 1.0f / float(B * T));
  // head, 3 layers, embedding: five reports, each from a lower offset.
  ASSERT_EQ(begins.size(), 5u);
  for (size_t i = 1; i < begins.size(); ++i) EXPECT_LT(begins[i], begins[i - 1]);
  EXPECT_GE(launched[1], 1u) << "no bucket started after the top layer's backward";
  EXPECT_LT(launched[1], sync.bucket_count()) << "everything started at once: no layer-by-layer overlap";
  EXPECT_EQ(launched.back(), sync.bucket_count());

  sync.finish(stage.grads());
  // Expected: a twin stage's backward on the same tokens (no hook), summed over the ranks at once.
  std::vector<float> local(stage.layout().total());
  {
    nn::GptStage twin(*k, nn::Shard::whole(m), {.B = B, .T = T});
    twin.init_params(3);
    nn::Activations a2(twin);
    twin.zero_grads();
    twin.forward(a2, tok.data(), tgt.data());
    twin.backward(a2, tok.data(), tgt.data(), 1.0f / float(B * T));
    std::copy(twin.grads(), twin.grads() + twin.layout().total(), local.begin());
  }
  comm->all_reduce(local.data(), local.size(), comm::DType::F32, comm::ReduceOp::Sum);
  for (int64_t i = 0; i < stage.layout().total(); ++i) ASSERT_EQ(stage.grads()[i], local[i]) << "element " << i;
}

}  // namespace
