// Layout-independent checkpoints: a run saved under one layout continues under any other.
// 3D -> same layout gives bit-identical losses; 3D -> another layout, 3D -> one process and
// one process -> 3D stay within 1e-5 relative of the uninterrupted run; a Llama saved with its
// kv heads replicated over tp 4 continues on tp 2 (kv heads split) and in one process; a
// context-parallel run continues under another cp layout and in one process. Runs on 8 MPI ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include "runtime/comm/mpi_world.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/checkpointing.h"
#include "runtime/parallel/dist_trainer.h"

using namespace trident;
using namespace trident::parallel;

namespace {

constexpr int64_t kSteps = 8, kSaveAt = 4;

struct Case {
  Layout layout;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int zero = 0;
  int64_t virtual_stages = 1;
  bool llama = false;
};

RunSpec run_for(const Case& c) {
  RunSpec run;
  run.model.family = ModelFamily::GPT;
  run.model.layers = 4, run.model.hidden = 32, run.model.heads = 4, run.model.kv_heads = 4;
  run.model.ffn_hidden = 128, run.model.seq_len = 16, run.model.vocab = 64;
  if (c.llama) run.model.family = ModelFamily::Llama, run.model.kv_heads = 2, run.model.ffn_hidden = 96;
  run.layout = c.layout;
  run.exec.global_batch_size = 8, run.exec.micro_batch_size = 2, run.exec.precision = Precision::FP32;
  run.exec.schedule = c.schedule, run.exec.zero = c.zero, run.exec.virtual_stages = c.virtual_stages;
  return run;
}

TrainerOptions options() {
  TrainerOptions o;
  o.adamw.lr = 3e-3, o.adamw.min_lr = 3e-4, o.adamw.warmup_steps = 2, o.adamw.decay_steps = kSteps;
  o.seed = 42;
  o.bucket_floats = 4096;
  return o;
}

// A trainer on the whole world (8 ranks) or, for a one-process layout, on this process alone.
struct Session {
  ProcessGroups groups;
  std::unique_ptr<BatchSource> data;
  std::unique_ptr<DistTrainer> trainer;
  explicit Session(const Case& c) {
    auto ctx = std::make_shared<comm::CommContext>();
    ctx->timeout_s = 120;
    RunSpec run = run_for(c);
    comm::MpiWorld world_ranks(MPI_COMM_WORLD);
    groups = run.layout.world_size() == 1 ? make_single_process_groups(ctx) : make_process_groups(Mesh(run.layout, 8), ctx, world_ranks);
    data = synthetic_source(64, 16, 7);
    trainer = std::make_unique<DistTrainer>(run, groups, *data, options());
  }
  std::vector<double> train(int64_t from, int64_t to) {
    std::vector<double> out;
    for (int64_t s = from; s < to; ++s) out.push_back(trainer->step(s));
    return out;
  }
  void save(const std::string& dir, int64_t step) { save_checkpoint(*trainer, groups, dir, {{"step", step}}, 1.0); }
  void load(const std::string& dir) { load_checkpoint(*trainer, checkpoint::CheckpointReader(dir)); }
};

int rank();

const Case k3d{Layout{.tp = 2, .dp = 2, .pp = 2}, ScheduleKind::OneFOneB, 1};

const std::vector<double>& uninterrupted() {
  static std::vector<double> losses = Session(k3d).train(0, kSteps);
  return losses;
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The 3D run saved at step kSaveAt, once for every test.
const std::string& saved_3d() {
  static const std::string dir = [] {
    const std::string d = "resume_test_3d.ckpt";
    Session s(k3d);
    s.train(0, kSaveAt);
    s.save(d, kSaveAt);
    return d;
  }();
  return dir;
}

void expect_near(const std::vector<double>& got, const char* what, const std::vector<double>& want = uninterrupted()) {
  ASSERT_EQ(got.size(), size_t(kSteps - kSaveAt));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[kSaveAt + i], 1e-5 * std::abs(want[kSaveAt + i])) << what << " step " << kSaveAt + i;
    worst = std::max(worst, std::abs(got[i] - want[kSaveAt + i]) / std::abs(want[kSaveAt + i]));
  }
  if (rank() == 0) std::printf("[ resume  ] %-30s max relative loss error: %.2e\n", what, worst);
}

TEST(CheckpointResume, three_d_to_the_same_layout_is_bit_identical) {
  Session s(k3d);
  s.load(saved_3d());
  const auto got = s.train(kSaveAt, kSteps);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], uninterrupted()[kSaveAt + i]) << "step " << kSaveAt + i;
}

TEST(CheckpointResume, three_d_to_tp4_pp2_interleaved_stays_within_1e5) {
  Session s({Layout{.tp = 4, .dp = 1, .pp = 2}, ScheduleKind::Interleaved, 0, 2});
  s.load(saved_3d());
  expect_near(s.train(kSaveAt, kSteps), "3D -> tp4 pp2 interleaved");
}

TEST(CheckpointResume, three_d_to_dp4_pp2_gpipe_zero1_stays_within_1e5) {
  Session s({Layout{.tp = 1, .dp = 4, .pp = 2}, ScheduleKind::GPipe, 1});
  s.load(saved_3d());
  expect_near(s.train(kSaveAt, kSteps), "3D -> dp4 pp2 gpipe zero1");
}

TEST(CheckpointResume, three_d_to_one_process_stays_within_1e5) {
  saved_3d();
  Session s({Layout{}});
  s.load(saved_3d());
  expect_near(s.train(kSaveAt, kSteps), "3D -> one process");
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CheckpointResume, one_process_to_three_d_stays_within_1e5) {
  const std::string dir = "resume_test_one.ckpt";
  if (rank() == 0) {
    Session one({Layout{}});
    one.train(0, kSaveAt);
    one.save(dir, kSaveAt);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  Session s(k3d);
  s.load(dir);
  expect_near(s.train(kSaveAt, kSteps), "one process -> 3D");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::filesystem::remove_all(dir), std::filesystem::remove_all(saved_3d());
}

// Context parallel shards no weight: a cp run's checkpoint (ZeRO-1 moments sharded over dp x cp,
// written by cp rank 0) continues under another cp layout and in one process.
TEST(CheckpointResume, cp2_tp2_dp2_zero1_to_cp4_pp2_and_to_one_process_stays_within_1e5) {
  const Case cp{Layout{.tp = 2, .cp = 2, .dp = 2, .pp = 1, .order = "tp-cp-ep-dp-pp"}, ScheduleKind::OneFOneB, 1};
  const std::string dir = "resume_test_cp.ckpt";
  {
    Session s(cp);
    s.train(0, kSaveAt);
    s.save(dir, kSaveAt);
  }
  {
    Session s({Layout{.tp = 1, .cp = 4, .dp = 1, .pp = 2, .order = "tp-cp-ep-dp-pp"}});
    s.load(dir);
    expect_near(s.train(kSaveAt, kSteps), "cp2xtp2xdp2 zero1 -> cp4xpp2");
  }
  Session one({Layout{}});
  one.load(dir);
  expect_near(one.train(kSaveAt, kSteps), "cp2xtp2xdp2 zero1 -> one process");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::filesystem::remove_all(dir);
}

// Sharded ZeRO-2 / ZeRO-3 state (moments, gradient-free parameters in ZeRO-3's shards) is saved
// as whole logical tensors and cut back into shards on load: the same layout resumes bit for
// bit, another ZeRO stage and layout within 1e-5.
TEST(CheckpointResume, zero2_and_zero3_resume_bit_identically_and_load_under_another_layout) {
  const Case zero2{Layout{.tp = 1, .dp = 4, .pp = 2}, ScheduleKind::OneFOneB, 2};
  const Case zero3{Layout{.tp = 2, .dp = 2, .pp = 2}, ScheduleKind::OneFOneB, 3};
  const std::vector<double> want = Session(zero2).train(0, kSteps);
  const std::vector<double> want3 = Session(zero3).train(0, kSteps);
  const std::string dir2 = "resume_test_zero2.ckpt", dir3 = "resume_test_zero3.ckpt";
  {
    Session s(zero2);
    s.train(0, kSaveAt);
    s.save(dir2, kSaveAt);
  }
  {
    Session s(zero3);
    s.train(0, kSaveAt);
    s.save(dir3, kSaveAt);
  }
  for (const auto& [c, dir, ref, what] : {std::tuple{zero2, dir2, &want, "zero2 dp4xpp2"},
                                          std::tuple{zero3, dir3, &want3, "zero3 dp2xtp2xpp2"}}) {
    Session s(c);
    s.load(dir);
    const auto got = s.train(kSaveAt, kSteps);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], (*ref)[kSaveAt + i]) << what << " step " << kSaveAt + i;
  }
  {
    Session s(zero3);
    s.load(dir2);
    expect_near(s.train(kSaveAt, kSteps), "zero2 dp4xpp2 -> zero3 3D", want);
  }
  {
    Session s({Layout{.tp = 2, .dp = 4, .pp = 1}, ScheduleKind::OneFOneB, 1});
    s.load(dir3);
    expect_near(s.train(kSaveAt, kSteps), "zero3 3D -> dp4xtp2 zero1", want3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::filesystem::remove_all(dir2), std::filesystem::remove_all(dir3);
}

TEST(CheckpointResume, llama_tp4_pp2_replicated_kv_to_3d_and_to_one_process_stays_within_1e5) {
  const Case saved{Layout{.tp = 4, .dp = 1, .pp = 2}, ScheduleKind::OneFOneB, 0, 1, true};
  const Case other{Layout{.tp = 2, .dp = 2, .pp = 2}, ScheduleKind::OneFOneB, 1, 1, true};
  const std::vector<double> want = Session(other).train(0, kSteps);
  const std::string dir = "resume_test_llama.ckpt";
  {
    Session s(saved);
    s.train(0, kSaveAt);
    s.save(dir, kSaveAt);
  }
  {
    Session s(other);
    s.load(dir);
    expect_near(s.train(kSaveAt, kSteps), "llama tp4xpp2 -> dp2xtp2xpp2", want);
  }
  Session one({Layout{}, ScheduleKind::OneFOneB, 0, 1, true});
  one.load(dir);
  expect_near(one.train(kSaveAt, kSteps), "llama tp4xpp2 -> one process", want);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
