// ZeRO-2 and ZeRO-3 on 4 MPI ranks: the reductions start inside backward and the gradient
// buffers stay a few units; ZeRO-3 gathers ahead of use (prefetch) with at most two units whole;
// and the model-state memory each rank allocates for ZeRO 0-3 at dp 2 and dp 4, measured
// beside plan::stage_memory's prediction for the same run (printed as a table; the terms the
// planner models within 10%, the runtime's own buffers bounded and named).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "runtime/comm/mpi_world.h"
#include "plan/memory_model.h"
#include "runtime/nn/gpt.h"
#include "runtime/nn/init.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/grad_sync.h"

using namespace trident;
using namespace trident::parallel;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// 16 thin layers: each unit (a layer, ~50k floats) is small beside the whole model (~0.8M), as
// in the models ZeRO is for.
RunSpec run_for(int64_t dp, int zero) {
  RunSpec run;
  run.model.family = ModelFamily::GPT;
  run.model.layers = 16, run.model.hidden = 64, run.model.heads = 4, run.model.kv_heads = 4;
  run.model.ffn_hidden = 256, run.model.seq_len = 16, run.model.vocab = 128;
  run.layout = Layout{.tp = 1, .dp = dp, .pp = 1};
  run.exec.global_batch_size = 8, run.exec.micro_batch_size = 2, run.exec.precision = Precision::FP32;
  run.exec.zero = zero;
  return run;
}

// Runs f on ranks [0, n) of the world with their own communicator; the others wait.
template <class F>
void on_ranks(int n, F&& f) {
  MPI_Comm base;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < n ? 0 : MPI_UNDEFINED, world_rank(), &base);
  if (world_rank() < n) {
    f(base);
    MPI_Comm_free(&base);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

std::shared_ptr<comm::CommContext> context() {
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = 120;
  return ctx;
}

TEST(Zero, zero2_reduces_units_during_backward_with_a_few_unit_buffers) {
  on_ranks(4, [](MPI_Comm base) {
    const RunSpec run = run_for(4, 2);
    comm::MpiWorld base_world(base);
    ProcessGroups g = make_process_groups(Mesh(run.layout, 4), context(), base_world);
    auto k = kernels::make_cpu_kernels(1);
    const nn::Shard shard = nn::Shard::whole(run.model);
    const nn::ParamLayout layout(shard);
    GradSync sync(*g.dp, layout, 2, 1 << 20, *k);
    ASSERT_NE(sync.units(), nullptr);
    nn::GptStage stage(*k, shard, {.B = 2, .T = 16, .storage = sync.units()});
    EXPECT_EQ(stage.grads(), nullptr) << "the stage keeps no whole gradient buffer under ZeRO-2";
    std::vector<float> host(size_t(layout.total()));
    nn::init_gpt2(layout, 1, host.data());
    k->from_host(stage.params(), host.data(), host.size());
    std::vector<int32_t> tok(32), tgt(32);
    for (int i = 0; i < 32; ++i) tok[size_t(i)] = (i * 7 + g.dp->rank()) % 128, tgt[size_t(i)] = (i * 5 + 1) % 128;
    nn::Activations acts(stage);
    sync.start_step();
    int64_t started_before_embedding = -1;
    stage.set_grad_ready_hook([&](int64_t b, int64_t e) {
      if (b == 0) started_before_embedding = sync.units()->counts().reductions;
      sync.mark_ready(nullptr, b, e);
    });
    for (int mb = 0; mb < 2; ++mb) {
      stage.forward(acts, tok.data(), tgt.data());
      stage.backward(acts, tok.data(), tgt.data(), 1.0f / 64);
    }
    sync.finish(nullptr);
    // Every layer's reduction started before backward reached the embedding (the last unit).
    EXPECT_GE(started_before_embedding, int64_t(run.model.layers)) << "unit reductions overlap backward";
    EXPECT_EQ(sync.units()->counts().reductions, 2 * int64_t(layout.units().size()));
    // Buffers: the unit being written, the embedding unit the tied head opened, kSpare in flight.
    EXPECT_LE(sync.units()->peak_grad_buffers(), size_t(2 + ZeroShards::kSpare));
    // The shard holds the sum over the 4 ranks of both micro-batches: its squares summed over
    // the ranks equal those of a plain all-reduced whole buffer.
    double sq = 0;
    for (const ShardPiece& p : sync.pieces())
      if (p.end > p.begin) sq += k->sum_squares(sync.piece_grads(nullptr, p), size_t(p.end - p.begin));
    all_reduce_f64(*g.dp, &sq, 1, comm::ReduceOp::Sum);
    // The same two micro-batches through a stage with a whole gradient buffer, all-reduced whole.
    nn::GptStage plain(*k, shard, {.B = 2, .T = 16});
    ASSERT_NE(plain.grads(), nullptr);
    k->from_host(plain.params(), host.data(), host.size());
    plain.zero_grads();
    nn::Activations plain_acts(plain);
    for (int mb = 0; mb < 2; ++mb) {
      plain.forward(plain_acts, tok.data(), tgt.data());
      plain.backward(plain_acts, tok.data(), tgt.data(), 1.0f / 64);
    }
    g.dp->all_reduce(plain.grads(), size_t(layout.total()), comm::DType::F32, comm::ReduceOp::Sum);
    const double whole = k->sum_squares(plain.grads(), size_t(layout.total()));
    ASSERT_GT(whole, 0.0);
    EXPECT_NEAR(sq, whole, 1e-5 * whole) << "the shards' squares summed over the ranks";
  });
}

TEST(Zero, zero3_prefetches_the_next_unit_and_holds_at_most_two_whole) {
  on_ranks(2, [](MPI_Comm base) {
    const RunSpec run = run_for(2, 3);
    comm::MpiWorld base_world(base);
    ProcessGroups g = make_process_groups(Mesh(run.layout, 2), context(), base_world);
    auto data = synthetic_source(128, 16, 3);
    DistTrainer t(run, g, *data, TrainerOptions{});
    EXPECT_EQ(t.chunk_params(0), nullptr) << "ZeRO-3 keeps no whole parameter buffer";
    t.step(0);  // the first pass of each kind records the order of use: gathers on demand
    const ZeroShards::Counts first = t.zero_counts(0);
    for (int s = 1; s < 3; ++s) t.step(s);
    const ZeroShards::Counts c = t.zero_counts(0);
    // From then on each pass gathers only its first unit on demand; every later unit was
    // prefetched while the one before it ran.
    const int64_t on_demand = c.gathers - first.gathers, hits = c.prefetch_hits - first.prefetch_hits;
    std::printf("[ zero-3  ] steps 1-2: %lld units gathered on demand, %lld prefetched, %lld uses found gathered\n",
                (long long)on_demand, (long long)(c.prefetches - first.prefetches), (long long)hits);
    EXPECT_GT(c.prefetches, first.prefetches);
    EXPECT_GT(hits, 4 * on_demand) << "most units must be prefetched, not gathered when asked for";
    const ModelStateBytes b = t.model_state_bytes();
    const nn::ParamLayout& L = t.chunk_layout(0);
    int64_t unit = 0;
    for (const auto& u : L.units()) unit = std::max(unit, u.size());
    EXPECT_LE(b.gathered, 2.0 * 4.0 * double(unit + 2)) << "at most two units gathered whole";
    EXPECT_GT(b.gathered, 0.0);
  });
}

// Model-state bytes per rank, measured (what the trainer allocated) beside the planner's.
TEST(Zero, model_state_memory_per_rank_matches_the_planner_for_zero_0_to_3_at_dp2_and_dp4) {
  if (world_rank() == 0)
    std::printf("[ memory  ] model states per rank, MiB: measured / planned (plan::stage_memory)\n"
                "[ memory  ] dp zero | weights       | gradients     | optimizer     | gathered      | "
                "unit grad bufs | staging\n");
  for (int64_t dp : {2, 4})
    for (int zero : {0, 1, 2, 3}) {
      on_ranks(int(dp), [&](MPI_Comm base) {
        const RunSpec run = run_for(dp, zero);
        comm::MpiWorld base_world(base);
        ProcessGroups g = make_process_groups(Mesh(run.layout, int(dp)), context(), base_world);
        auto data = synthetic_source(128, 16, 3);
        DistTrainer t(run, g, *data, TrainerOptions{});
        t.step(0);
        t.step(1);
        const ModelStateBytes got = t.model_state_bytes();
        const plan::StageMemory want = plan::stage_memory(run.model, run.exec, {.tp = 1, .pp = 1, .dp = dp})[0];
        const double mib = 1.0 / (1 << 20);
        if (g.world->rank() == 0)
          std::printf("[ memory  ] %2lld %4d | %5.2f / %5.2f | %5.2f / %5.2f | %5.2f / %5.2f | %5.2f / %5.2f | %5.2f / -  "
                      "   | %5.2f / -\n",
                      (long long)dp, zero, got.weights * mib, want.weights_bytes * mib, got.gradients * mib,
                      want.gradients_bytes * mib, got.optimizer * mib, want.optimizer_bytes * mib, got.gathered * mib,
                      want.gathered_weights_bytes * mib, got.grad_buffers * mib, got.staging * mib);
        // What the planner models: the states, sharded by dp from the stage it names on.
        EXPECT_NEAR(got.weights, want.weights_bytes, 0.10 * want.weights_bytes) << "dp " << dp << " zero " << zero;
        EXPECT_NEAR(got.gradients, want.gradients_bytes, 0.10 * want.gradients_bytes) << "dp " << dp << " zero " << zero;
        EXPECT_NEAR(got.optimizer, want.optimizer_bytes, 0.10 * want.optimizer_bytes) << "dp " << dp << " zero " << zero;
        // ZeRO-3's two whole units (the one in use and the prefetched one): the planner's two layers.
        if (zero == 3) EXPECT_NEAR(got.gathered, want.gathered_weights_bytes, 0.10 * want.gathered_weights_bytes);
        else EXPECT_EQ(got.gathered, 0.0);
        // The runtime's own terms, which the planner leaves out: ZeRO-2/3's unit gradient buffers
        // (at most 2 + kSpare units, each with its reduce-scatter piece) and the staging copies
        // (ZeRO-1: the padded whole buffer and one slice; ZeRO-2: one unit and one piece).
        const double unit = 4.0 * double(t.chunk_layout(0).layer(0).end - t.chunk_layout(0).layer(0).begin + 16);
        if (zero >= 2) EXPECT_LE(got.grad_buffers, (2 + ZeroShards::kSpare) * unit * (1.0 + 1.0 / double(dp)) + 4096);
        else EXPECT_EQ(got.grad_buffers, 0.0);
        if (zero == 1) EXPECT_NEAR(got.staging, want.weights_bytes * (1.0 + 1.0 / double(dp)), 0.1 * want.weights_bytes);
      });
    }
}

}  // namespace
