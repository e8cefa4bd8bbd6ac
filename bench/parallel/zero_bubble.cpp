// The bubble ZB-H1 saves, measured: one compute-bound pp4 pipeline (4 MPI ranks, one stage
// each) trained with 1F1B and with ZB-H1 by the one trainer, beside what the simulator predicts
// for that layout. The simulator is fed this run's own measurements: each rank times one
// micro-batch's forward, input-gradient and weight-gradient pass on its stage (all ranks at
// once, as in the pipeline's steady state), and the pipeline message time the trainer measured.
// Prints per schedule the bubble share (sum of the ranks' waits on a receive beyond the wire
// time / sum of their pipeline time; the simulator: sum of bubbles / (p x pipeline time)), the
// step time, and the ZB-H1 / 1F1B ratio of both. Needs 4 free cores to mean anything.
//
// usage: mpirun -np 4 bench_dist_zero_bubble [micro-batches (8)] [steps (4)]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/comm/mpi_world.h"
#include "runtime/nn/gpt.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/stage_split.h"
#include "schedule/schedule.h"
#include "sim/simulator.h"

using namespace trident;
using namespace trident::parallel;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int64_t kStages = 4;

RunSpec run_for(ScheduleKind schedule, int64_t micro_batches) {
  RunSpec run;
  run.model.family = ModelFamily::GPT;
  run.model.layers = 8, run.model.hidden = 256, run.model.heads = 4, run.model.kv_heads = 4;
  run.model.ffn_hidden = 1024, run.model.seq_len = 128, run.model.vocab = 256;
  run.layout = Layout{.tp = 1, .dp = 1, .pp = kStages};
  run.exec.micro_batch_size = 1, run.exec.global_batch_size = micro_batches;
  run.exec.precision = Precision::FP32, run.exec.schedule = schedule;
  return run;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// Forward, input-gradient and weight-gradient seconds of one micro-batch on this rank's stage.
struct ActionTimes {
  double forward = 0, input = 0, weight = 0;
};
ActionTimes time_actions(const RunSpec& run, int64_t stage) {
  Problems problems;
  const StageSplit split = make_stage_split(run.model, kStages, 1, {}, problems);
  problems.throw_if_any();
  auto k = kernels::make_cpu_kernels(1);
  nn::GptStage st(*k, shard_for(run.model, split, stage, 0, 1, 0),
                  {.B = 1, .T = run.model.seq_len, .split_backward = true});
  st.init_params(1);
  nn::Activations a(st);
  std::vector<int32_t> tokens(size_t(run.model.seq_len), 3), targets(size_t(run.model.seq_len), 5);
  std::vector<double> f, b, w;
  for (int rep = 0; rep < 5; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = clock_type::now();
    st.forward(a, tokens.data(), targets.data());
    auto t1 = clock_type::now();
    st.backward_input(a, tokens.data(), targets.data(), 1e-3f);
    auto t2 = clock_type::now();
    st.backward_weight(a);
    auto t3 = clock_type::now();
    f.push_back(std::chrono::duration<double>(t1 - t0).count());
    b.push_back(std::chrono::duration<double>(t2 - t1).count());
    w.push_back(std::chrono::duration<double>(t3 - t2).count());
  }
  return {median(f), median(b), median(w)};
}

struct Measured {
  double bubble_share = 0, step_s = 0, weight_s = 0;
  double message_s = 0, optimizer_s = 0;
};

// Trains `steps` steps (the first one warms up) and sums the ranks' phase times.
Measured train(const RunSpec& run, int64_t steps) {
  auto ctx = std::make_shared<comm::CommContext>();
  ctx->timeout_s = 600;
  comm::MpiWorld world_ranks(MPI_COMM_WORLD);
  ProcessGroups groups = make_process_groups(Mesh(run.layout, 8), ctx, world_ranks);
  auto data = synthetic_source(run.model.vocab, run.model.seq_len, 1);
  TrainerOptions o;
  o.kernel_threads = 1;
  DistTrainer trainer(run, groups, *data, o);
  double sums[5] = {0, 0, 0, 0, 0};  // bubble, pipeline time, step, W, optimizer
  for (int64_t s = 0; s < steps; ++s) {
    trainer.step(s);
    if (s == 0) continue;
    const PhaseTimes& t = trainer.last_times();
    sums[0] += t.bubble, sums[1] += t.total - t.optimizer - t.dp_exposed, sums[2] += t.total, sums[3] += t.weight;
    sums[4] += t.optimizer;
  }
  double total[5];
  MPI_Allreduce(sums, total, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double n = double(steps - 1), p = double(kStages);
  return {total[0] / total[1], total[2] / n / p, total[3] / n / p, trainer.pp_message_s(), total[4] / n / p};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != kStages) {
    if (rank == 0) std::fprintf(stderr, "run me on %lld ranks: mpirun -np %lld %s\n", (long long)kStages, (long long)kStages, argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int64_t m = argc > 1 ? std::max(1, std::atoi(argv[1])) : 8;
  const int64_t steps = argc > 2 ? std::max(2, std::atoi(argv[2])) : 4;

  // This rank's action times, gathered into the simulator's costs of every stage.
  const ActionTimes mine = time_actions(run_for(ScheduleKind::OneFOneB, m), rank);
  double send[3] = {mine.forward, mine.input, mine.weight}, all[3 * kStages];
  MPI_Gather(send, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  const ScheduleKind kinds[2] = {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1};
  Measured got[2];
  for (int i = 0; i < 2; ++i) got[i] = train(run_for(kinds[i], m), steps);

  if (rank == 0) {
    std::printf("pp%lld pipeline, %lld micro-batches of 1 x 128 tokens, GPT 8 layers x hidden 256 (2 per stage), fp32, "
                "1 thread per rank; means of steps 1..%lld\n",
                (long long)kStages, (long long)m, (long long)steps - 1);
    std::printf("measured per micro-batch (stage: forward / input-gradient / weight-gradient ms):");
    for (int64_t s = 0; s < kStages; ++s)
      std::printf("  %lld: %.2f / %.2f / %.2f", (long long)s, all[3 * s] * 1e3, all[3 * s + 1] * 1e3, all[3 * s + 2] * 1e3);
    std::printf("\npipeline message %.3f ms (the trainer's ping-pong), optimizer %.2f ms\n\n", got[0].message_s * 1e3,
                got[0].optimizer_s * 1e3);
    std::printf("%-7s %16s %17s %14s %15s %10s\n", "", "measured bubble", "simulated bubble", "measured step",
                "simulated step", "W share");
    double sim_bubble[2];
    for (int i = 0; i < 2; ++i) {
      sim::SimCosts costs;
      costs.blocking_sends = false;  // the trainer posts its sends and goes on
      for (int64_t s = 0; s < kStages; ++s) {
        sim::StageCost st;
        sim::ChunkCost c;
        c.forward_s = all[3 * s];
        c.backward_s = all[3 * s + 1] + all[3 * s + 2];
        c.weight_share = c.backward_s > 0 ? all[3 * s + 2] / c.backward_s : 0.5;
        st.chunks.push_back(c);
        st.p2p_s = got[i].message_s;
        st.optimizer_s = got[i].optimizer_s;
        costs.stages.push_back(st);
      }
      const sim::SimResult r = sim::simulate(build_schedule(kinds[i], kStages, m, 1), costs, {false});
      sim_bubble[i] = r.bubble_share;
      std::printf("%-7s %15.1f%% %16.1f%% %11.1f ms %12.1f ms %9.1f%%\n", to_string(kinds[i]).c_str(),
                  100 * got[i].bubble_share, 100 * r.bubble_share, got[i].step_s * 1e3, r.step_s * 1e3,
                  got[i].step_s > 0 ? 100 * got[i].weight_s / got[i].step_s : 0.0);
    }
    std::printf("\nZB-H1 / 1F1B bubble: measured %.2f, simulated %.2f (closed form for uniform stages with F = B = W: "
                "1/3; 1F1B alone (p-1)/(m+p-1) = %.1f%%)\n",
                got[1].bubble_share / got[0].bubble_share, sim_bubble[1] / sim_bubble[0],
                100.0 * double(kStages - 1) / double(m + kStages - 1));
    std::printf("ZB-H1 / 1F1B step time: measured %.2f\n", got[1].step_s / got[0].step_s);
  }
  MPI_Finalize();
  return 0;
}
