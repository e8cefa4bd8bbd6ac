// The trainer in one process (a world of one, no MPI — how `trident train` runs without
// mpirun): loss falls on a learnable task, gradient accumulation equals one big batch, and a
// checkpoint save/load continues with bit-identical losses.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>

#include <cmath>
#include <filesystem>

#include "runtime/comm/world.h"
#include "runtime/parallel/batch_source.h"
#include "runtime/parallel/checkpointing.h"
#include "runtime/parallel/dist_trainer.h"

using namespace trident;
using namespace trident::parallel;

namespace {

RunSpec tiny(int64_t micro, int64_t global) {
  RunSpec r;
  r.model.family = ModelFamily::GPT;
  r.model.layers = 2, r.model.hidden = 32, r.model.heads = 2, r.model.kv_heads = 2;
  r.model.ffn_hidden = 128, r.model.seq_len = 16, r.model.vocab = 17;
  r.exec.micro_batch_size = micro, r.exec.global_batch_size = global, r.exec.precision = Precision::FP32;
  return r;
}

TrainerOptions options() {
  TrainerOptions o;
  o.adamw.lr = 1e-2, o.adamw.min_lr = 1e-3, o.adamw.warmup_steps = 2, o.adamw.decay_steps = 40;
  o.seed = 9;
  o.kernel_threads = 2;
  return o;
}

struct OneProcessRun {
  ProcessGroups groups = make_single_process_groups(std::make_shared<comm::CommContext>());
  std::unique_ptr<BatchSource> data = synthetic_source(17, 16, 3);
  DistTrainer trainer;
  OneProcessRun(int64_t micro, int64_t global) : trainer(tiny(micro, global), groups, *data, options()) {}
};

TEST(OneProcessTrainer, loss_falls_on_a_learnable_sequence) {
  OneProcessRun r(4, 4);
  const double first = r.trainer.step(0);
  double last = first;
  for (int i = 1; i < 40; ++i) last = r.trainer.step(i);
  EXPECT_GT(first, 2.5);  // about ln 17
  EXPECT_LT(last, 0.5 * first);
  const double val = r.trainer.evaluate(*r.data, 2);
  EXPECT_TRUE(std::isfinite(val));
  EXPECT_LT(val, 0.6 * first);
}

TEST(OneProcessTrainer, gradient_accumulation_equals_the_large_batch) {
  OneProcessRun big(4, 4), acc(2, 4);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(big.trainer.step(i), acc.trainer.step(i), 1e-5);
}

TEST(OneProcessTrainer, resume_from_checkpoint_gives_bit_identical_losses) {
  OneProcessRun straight(4, 4);
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) want.push_back(straight.trainer.step(i));

  const auto dir = (std::filesystem::temp_directory_path() / ("trident_resume_" + std::to_string(::getpid()))).string();
  {
    OneProcessRun first(4, 4);
    for (int i = 0; i < 4; ++i) first.trainer.step(i);
    save_checkpoint(first.trainer, first.groups, dir, {{"step", 4}}, 1.0);
  }
  OneProcessRun resumed(4, 4);
  load_checkpoint(resumed.trainer, checkpoint::CheckpointReader(dir));
  for (int i = 4; i < 8; ++i) EXPECT_EQ(resumed.trainer.step(i), want[size_t(i)]) << "step " << i;
  std::filesystem::remove_all(dir);
}

TEST(OneProcessTrainer, a_non_finite_loss_never_overwrites_a_good_checkpoint) {
  const auto dir = (std::filesystem::temp_directory_path() / ("trident_nan_" + std::to_string(::getpid()))).string();
  OneProcessRun r(4, 4);
  r.trainer.step(0);
  save_checkpoint(r.trainer, r.groups, dir, {{"step", 1}}, 2.0);
  EXPECT_THROW(save_checkpoint(r.trainer, r.groups, dir, {{"step", 2}}, NAN), SaveRefused);
  EXPECT_EQ(checkpoint::CheckpointReader(dir).meta()["step"], 1);
  std::filesystem::remove_all(dir);
}

std::string temp_dir(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))).string();
}

// A save in the background holds the state at its start although training goes on meanwhile
// (start() returns once it has left the trainer's buffers), and completes durable and in place: resuming from it gives the same losses.
TEST(OneProcessTrainer, a_background_save_holds_the_state_at_its_start_while_training_goes_on) {
  OneProcessRun straight(4, 4);
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) want.push_back(straight.trainer.step(i));

  const auto dir = temp_dir("trident_bg_save");
  {
    OneProcessRun first(4, 4);
    for (int i = 0; i < 4; ++i) first.trainer.step(i);
    AsyncSaver saver(first.trainer, first.groups, dir);
    saver.start({{"step", 4}}, 1.0);
    EXPECT_TRUE(saver.in_flight());
    for (int i = 4; i < 8; ++i) EXPECT_EQ(first.trainer.step(i), want[size_t(i)]) << "step " << i;  // the save does not disturb it
    EXPECT_FALSE(std::filesystem::exists(dir));  // not in place before complete()
    saver.complete();
    EXPECT_FALSE(saver.in_flight());
    EXPECT_FALSE(std::filesystem::exists(checkpoint::temporary_dir(dir)));
  }
  OneProcessRun resumed(4, 4);
  const checkpoint::CheckpointReader reader(dir);
  EXPECT_EQ(reader.meta()["step"], 4);
  load_checkpoint(resumed.trainer, reader);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(resumed.trainer.step(i), want[size_t(i)]) << "step " << i;
  std::filesystem::remove_all(dir);
}

// The state is taken by start(): whatever the trainer's buffers hold afterwards (here
// overwritten at once, before the writer thread can have synced them) is not in the checkpoint.
TEST(OneProcessTrainer, a_background_save_writes_the_state_of_its_start) {
  const auto dir = temp_dir("trident_bg_snapshot");
  OneProcessRun r(4, 4);
  r.trainer.step(0);
  const std::vector<float> params = r.trainer.whole_params(0), m = r.trainer.whole_moment(0, 0);
  AsyncSaver saver(r.trainer, r.groups, dir);
  saver.start({{"step", 1}}, 2.0);
  const int64_t n = r.trainer.chunk_layout(0).total();
  for (int which = -1; which < 2; ++which) std::fill(r.trainer.host_whole(0, which), r.trainer.host_whole(0, which) + n, 7.0f);
  saver.complete();
  OneProcessRun loaded(4, 4);
  load_checkpoint(loaded.trainer, checkpoint::CheckpointReader(dir));
  EXPECT_EQ(loaded.trainer.whole_params(0), params);
  EXPECT_EQ(loaded.trainer.whole_moment(0, 0), m);
  std::filesystem::remove_all(dir);
}

// A run that ends (an error elsewhere) with a save in flight: the saver's destructor joins the
// writer and removes the unfinished DIR.saving; the previous checkpoint stays in place.
TEST(OneProcessTrainer, a_background_save_never_completed_leaves_the_previous_checkpoint) {
  const auto dir = temp_dir("trident_bg_abandoned");
  OneProcessRun r(4, 4);
  r.trainer.step(0);
  save_checkpoint(r.trainer, r.groups, dir, {{"step", 1}}, 2.0);
  r.trainer.step(1);
  {
    AsyncSaver saver(r.trainer, r.groups, dir);
    saver.start({{"step", 2}}, 2.0);
  }
  EXPECT_EQ(checkpoint::CheckpointReader(dir).meta()["step"], 1);
  EXPECT_FALSE(std::filesystem::exists(checkpoint::temporary_dir(dir)));
  std::filesystem::remove_all(dir);
}

// A background write that fails (a full disk: here a file-size limit, EFBIG) is reported when
// the save completes, naming the shard; the previous checkpoint stays and no DIR.saving is left.
TEST(OneProcessTrainer, a_failing_background_write_is_reported_and_the_previous_checkpoint_kept) {
  const auto dir = temp_dir("trident_bg_full");
  OneProcessRun r(4, 4);
  r.trainer.step(0);
  save_checkpoint(r.trainer, r.groups, dir, {{"step", 1}}, 2.0);
  r.trainer.step(1);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 16 * 1024;  // the marker fits, the shard does not
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string what;
  {
    AsyncSaver saver(r.trainer, r.groups, dir);
    saver.start({{"step", 2}}, 2.0);
    try {
      saver.complete();
    } catch (const InputError& e) {
      what = e.problems().empty() ? e.what() : e.problems().front().what;
    }
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, previous);
  EXPECT_NE(what.find("shard-00000.bin"), std::string::npos) << what;
  EXPECT_NE(what.find("File too large"), std::string::npos) << what;
  EXPECT_EQ(checkpoint::CheckpointReader(dir).meta()["step"], 1);
  EXPECT_FALSE(std::filesystem::exists(checkpoint::temporary_dir(dir)));
  std::filesystem::remove_all(dir);
}

}  // namespace

// A world of one process (how `trident train` runs without mpirun): its splits are worlds of
// one (none without a colour), gathers copy, reductions keep the value, and it has no peer.
TEST(SelfWorld, is_a_world_of_one_without_mpi) {
  comm::SelfWorld world;
  EXPECT_EQ(world.rank(), 0);
  EXPECT_EQ(world.size(), 1);
  EXPECT_EQ(world.split(comm::World::kNoColour, 0), nullptr);
  ASSERT_NE(world.split(3, 0), nullptr);
  EXPECT_EQ(world.split_host(0)->size(), 1);
  EXPECT_EQ(comm::all_gather_strings(world, "abc"), std::vector<std::string>{"abc"});
  double x = 2.5, y = 0;
  world.all_reduce(&x, &y, 1, comm::ReduceOp::Sum);
  EXPECT_EQ(y, 2.5);
  EXPECT_THROW(world.send(&x, sizeof x, 1), std::logic_error);
  EXPECT_EQ(world.communicator("tp", {0}, nullptr)->size(), 1);
}
