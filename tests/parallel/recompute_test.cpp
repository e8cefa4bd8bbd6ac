// Activation recomputation (--recompute selective|full): the same losses as keeping every
// activation, bit for bit on the CPU (one process and tp2 x pp2 with sequence parallelism), and
// each rank's activation memory (its micro-batch slots and recompute scratch, from the stage's
// buffer plan) beside the planner's prediction for its stage (plan::stage_memory). Runs on 4 MPI ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "runtime/comm/mpi_world.h"
#include "plan/memory_model.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"

using namespace trident;
using namespace trident::parallel;

namespace {

constexpr int64_t kSteps = 6;

ModelSpec model(bool llama) {
  ModelSpec m;
  m.family = llama ? ModelFamily::Llama : ModelFamily::GPT;
  m.layers = 4, m.hidden = 128, m.heads = 4, m.kv_heads = llama ? 2 : 4, m.ffn_hidden = llama ? 256 : 512;
  m.seq_len = 32, m.vocab = 128;
  return m;
}

RunSpec run_for(bool llama, Layout layout, Recompute recompute, bool sp,
                ScheduleKind schedule = ScheduleKind::OneFOneB) {
  RunSpec run;
  run.model = model(llama);
  run.layout = layout;
  run.exec.global_batch_size = 8, run.exec.micro_batch_size = 2, run.exec.precision = Precision::FP32;
  run.exec.recompute = recompute;
  run.exec.sequence_parallel = sp;
  run.exec.schedule = schedule;
  return run;
}

TrainerOptions options() {
  TrainerOptions o;
  o.adamw.lr = 3e-3, o.adamw.min_lr = 3e-4, o.adamw.warmup_steps = 2, o.adamw.decay_steps = kSteps;
  o.seed = 11;
  return o;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;  // per chunk, host copy after the last step
  ActivationMemory memory;
  int64_t stage = 0;
};

// Trains `steps` steps on ranks 0..w-1 of the world (w = 1: a world of one, no MPI); other
// ranks return {}.
Run train(const RunSpec& run, int64_t steps = kSteps) {
  Run out;
  const int w = int(run.layout.world_size());
  MPI_Comm base = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank() < w ? 0 : MPI_UNDEFINED, world_rank(), &base);
  if (base != MPI_COMM_NULL) {
    auto ctx = std::make_shared<comm::CommContext>();
    ctx->timeout_s = 120;
    comm::MpiWorld base_world(base);
    ProcessGroups g = w == 1 ? make_single_process_groups(ctx) : make_process_groups(Mesh(run.layout, 8), ctx, base_world);
    auto data = synthetic_source(run.model.vocab, run.model.seq_len, 3);
    DistTrainer t(run, g, *data, options());
    for (int64_t s = 0; s < steps; ++s) out.losses.push_back(t.step(s));
    for (int64_t c = 0; c < t.chunks(); ++c) {
      const float* p = t.chunk_params(c);
      out.params.emplace_back(p, p + t.chunk_layout(c).total());
    }
    out.memory = t.activation_memory();
    out.stage = g.coords.pp();
    MPI_Comm_free(&base);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return out;
}

void expect_bit_identical(bool llama, Layout layout, bool sp, const char* what) {
  const Run none = train(run_for(llama, layout, Recompute::None, sp));
  for (Recompute r : {Recompute::Selective, Recompute::Full}) {
    const Run got = train(run_for(llama, layout, r, sp));
    ASSERT_EQ(got.losses.size(), none.losses.size());
    for (size_t s = 0; s < got.losses.size(); ++s)
      EXPECT_EQ(got.losses[s], none.losses[s]) << what << " recompute " << to_string(r) << " step " << s;
    ASSERT_EQ(got.params.size(), none.params.size());
    for (size_t c = 0; c < got.params.size(); ++c)
      EXPECT_EQ(std::memcmp(got.params[c].data(), none.params[c].data(), got.params[c].size() * sizeof(float)), 0)
          << what << " recompute " << to_string(r) << ": final parameters of chunk " << c << " differ";
    if (!got.losses.empty()) EXPECT_LT(got.losses.back(), got.losses.front()) << what << ": the loss did not fall";
  }
}

TEST(Recompute, one_process_gpt_is_bit_identical_to_keeping_every_activation) {
  expect_bit_identical(false, Layout{}, false, "gpt one process");
}
TEST(Recompute, one_process_llama_is_bit_identical_to_keeping_every_activation) {
  expect_bit_identical(true, Layout{}, false, "llama one process");
}
TEST(Recompute, tp2_pp2_sequence_parallel_llama_is_bit_identical) {
  expect_bit_identical(true, Layout{.tp = 2, .dp = 1, .pp = 2}, true, "llama tp2xpp2 sp");
}
TEST(Recompute, dp2_pp2_gpt_is_bit_identical) {
  expect_bit_identical(false, Layout{.tp = 1, .dp = 2, .pp = 2}, false, "gpt dp2xpp2");
}

// Measured activation memory of every rank against the planner's activations of its stage,
// within 10%, except where the runtime and the planner's recipe differ by a known term (the
// tolerance given for that recipe, the term named where it is called). Without full
// recomputation the measure is the micro-batches' slots: the runtime's gradient scratch is a
// fixed working set the planner leaves to its overhead line (0.03-0.09 MiB here, up to 10% of
// this 128-wide model's activations). With it, slots and scratch: the scratch then holds the
// layer being recomputed, which the planner counts (a whole layer's activations).
void expect_memory_as_planned(bool llama, Layout layout, bool sp, double none_tolerance = 0.10,
                              double full_tolerance = 0.10, ScheduleKind schedule = ScheduleKind::OneFOneB) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
    if (schedule == ScheduleKind::ZeroBubbleH1 && r == Recompute::Full) continue;  // refused by the run check
    const double tolerance = r == Recompute::None ? none_tolerance : r == Recompute::Full ? full_tolerance : 0.10;
    const RunSpec run = run_for(llama, layout, r, sp, schedule);
    const Run got = train(run, 0);  // the buffers are planned at construction
    const auto planned = plan::stage_memory(run.model, run.exec, plan::MemoryInputs{layout.tp, layout.pp, layout.dp, 0});
    if (world_rank() < int(layout.world_size())) {
      const double want = planned.at(size_t(got.stage)).activations_bytes;
      const double measured = r == Recompute::Full ? got.memory.total() : got.memory.slot_bytes;
      const double ratio = measured / want;
      std::printf("[ memory  ] %-5s %-22s %-5s recompute %-9s rank %d stage %lld: %lld slots %.3f MiB + scratch "
                  "%.3f MiB = %.3f MiB, planner %.3f MiB, measured (%s) / planner %.3f\n",
                  llama ? "llama" : "gpt", layout.describe().c_str(), to_string(schedule).c_str(), to_string(r).c_str(),
                  world_rank(),
                  (long long)got.stage, (long long)got.memory.slots, got.memory.slot_bytes / 1048576.0,
                  got.memory.scratch_bytes / 1048576.0, got.memory.total() / 1048576.0, want / 1048576.0,
                  r == Recompute::Full ? "slots + scratch" : "slots", ratio);
      EXPECT_NEAR(ratio, 1.0, tolerance) << to_string(r) << " rank " << world_rank();
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Llama, full recomputation: the scratch recomputing a layer also holds its q and kv before RoPE
// (forward only; A + KV per token, 11% of a layer here), which the planner's whole layer leaves
// out: up to 16% above it in one process (14.5% measured). With pp > 1 each micro-batch also
// keeps the stage's output until its send completes (the next stage's input, which the planner
// counts there): up to 22% (21.2% measured at tp 2 x pp 2). Without full recomputation the
// slots are within 4% (the runtime keeps the same regions the planner counts: a fused SwiGLU's
// gate, up and product, the kv heads repeated for unfused attention).
TEST(Recompute, llama_activation_memory_is_the_planners_within_10_percent_or_22_with_full_recompute) {
  expect_memory_as_planned(true, Layout{}, false, 0.10, 0.16);
  expect_memory_as_planned(true, Layout{.tp = 1, .dp = 1, .pp = 2}, false, 0.10, 0.22);
  expect_memory_as_planned(true, Layout{.tp = 2, .dp = 1, .pp = 2}, true, 0.10, 0.22);
}
// ZB-H1 holds each micro-batch's slot until its deferred weight gradient: every stage of pp4
// keeps 4 slots (1F1B's last stage keeps 1), each with the two output gradients W needs (and the
// logits on the last stage), and the planner counts the same.
TEST(Recompute, zb_h1_activation_memory_is_the_planners_within_10_percent) {
  expect_memory_as_planned(true, Layout{.tp = 1, .dp = 1, .pp = 4}, false, 0.10, 0.10, ScheduleKind::ZeroBubbleH1);
  expect_memory_as_planned(false, Layout{.tp = 1, .dp = 1, .pp = 4}, false, 0.10, 0.10, ScheduleKind::ZeroBubbleH1);
}
// GPT without recomputation: the planner's GPT (Megatron's) keeps two dropout masks per layer and
// the attention scores as softmax output, dropout mask and dropout output (5 a s^2 b); the
// runtime has no dropout and keeps the causal half of the probabilities: up to 12% below here
// (11.3% measured in one process; the recomputation recipes within 10%).
TEST(Recompute, gpt_activation_memory_is_the_planners_within_10_percent_or_12_without_recompute) {
  expect_memory_as_planned(false, Layout{}, false, 0.12);
  expect_memory_as_planned(false, Layout{.tp = 1, .dp = 1, .pp = 2}, false, 0.12);
  expect_memory_as_planned(false, Layout{.tp = 2, .dp = 1, .pp = 2}, true, 0.12);
}

}  // namespace
