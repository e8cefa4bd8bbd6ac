// The resource check's decisions on given figures (the machine's own are in resources_test.sh):
// GPU memory (no GPU is needed: the device's report is handed in), threads against the cores,
// and the disk for a checkpoint.
#include <gtest/gtest.h>

#include "runtime/parallel/resource_check.h"
#include "train_app/planning.h"

using namespace trident;
using namespace trident::parallel;

namespace {

TrainSettings small_run() {
  TrainSettings s;
  s.planning = train_app::planning();
  auto& m = s.run.model;
  m.layers = 2, m.hidden = 1024, m.heads = 8, m.kv_heads = 8, m.ffn_hidden = 4096, m.seq_len = 128, m.vocab = 256;
  s.run.exec.global_batch_size = 4, s.run.exec.micro_batch_size = 4, s.run.exec.precision = Precision::FP32;
  return s;
}

std::string codes(const Problems& p) {
  std::string out;
  for (const auto& x : p.list()) out += x.code + ": " + x.what + "\n";
  return out;
}

comm::SelfWorld one_process;  // the figures of one process (no MPI)

}  // namespace

TEST(Resources, a_gpu_with_less_free_memory_than_a_rank_needs_is_refused_before_any_allocation) {
  TrainSettings s = small_run();
  s.device = "cuda";
  const double need = rank_memory(s, 0, Precision::FP32).total();  // ~ 2 x 12.6 M parameters x 16 bytes + activations
  ASSERT_GT(need, 100e6);
  s.device_memory = [&] { return DeviceMemory{need / 2, 1}; };
  Problems p;
  check_resources(s, gather_resources(s, one_process, 0), p);
  const std::string text = codes(p);
  EXPECT_NE(text.find("gpu-memory: rank 0 needs"), std::string::npos) << text;
  EXPECT_NE(text.find("(cudaMemGetInfo)"), std::string::npos) << text;
  EXPECT_EQ(text.find("host-memory"), std::string::npos) << "GPU ranks keep their tensors on the GPU:\n" << text;
  // Two ranks sharing the GPU need twice the memory; enough for both: no problem.
  s.device_memory = [&] { return DeviceMemory{need * 1.5, 2}; };
  Problems shared;
  check_resources(s, gather_resources(s, one_process, 0), shared);
  EXPECT_NE(codes(shared).find("2 ranks on its GPU"), std::string::npos) << codes(shared);
  s.device_memory = [&] { return DeviceMemory{need * 2.5, 2}; };
  Problems room;
  check_resources(s, gather_resources(s, one_process, 0), room);
  EXPECT_EQ(codes(room), "");
}

TEST(Resources, the_node_sum_of_its_ranks_is_compared_with_what_it_has) {
  TrainSettings s = small_run();
  ResourceView v;
  v.largest = rank_memory(s, 0, Precision::FP32);
  v.node_ranks = 4;
  v.node_need = 4 * v.largest.total();
  v.memory_available = 3 * v.largest.total();  // three ranks would fit, four do not
  v.memory_source = "/proc/meminfo MemAvailable";
  Problems p;
  check_resources(s, v, p);
  EXPECT_NE(codes(p).find("host-memory: the run needs"), std::string::npos) << codes(p);
  EXPECT_NE(codes(p).find("(4 ranks there"), std::string::npos) << codes(p);
  v.memory_available = 5 * v.largest.total();
  Problems fits;
  check_resources(s, v, fits);
  EXPECT_EQ(codes(fits), "");
}

TEST(Resources, threads_beyond_the_cores_are_capped_saying_why) {
  TrainSettings s = small_run();
  s.threads = 64, s.threads_given = true;
  ThreadChoice one = choose_threads(s, 1, 8, 8);
  EXPECT_EQ(one.threads, 8);
  EXPECT_NE(one.note.find("--threads 64 capped to 8 per rank"), std::string::npos) << one.note;
  s.threads = 4;
  ThreadChoice four_ranks = choose_threads(s, 4, 8, 8);  // 4 ranks x 4 threads on 8 cores
  EXPECT_EQ(four_ranks.threads, 2);
  EXPECT_NE(four_ranks.note.find("4 ranks on this node share its 8 cores"), std::string::npos) << four_ranks.note;
  ThreadChoice pinned = choose_threads(s, 4, 2, 8);  // a launcher pinned the rank to 2 cores
  EXPECT_EQ(pinned.threads, 2);
  EXPECT_NE(pinned.note.find("pinned to 2 of the 8 cores"), std::string::npos) << pinned.note;
  s.threads_given = false;
  ThreadChoice crowded = choose_threads(s, 8, 2, 2);  // more ranks than cores: one thread each, said so
  EXPECT_EQ(crowded.threads, 1);
  EXPECT_NE(crowded.note.find("oversubscribed"), std::string::npos) << crowded.note;
  s.threads = 2, s.threads_given = true;
  EXPECT_EQ(choose_threads(s, 1, 8, 8).threads, 2);
}

TEST(Resources, a_checkpoint_larger_than_its_disk_is_refused_with_both_sizes) {
  TrainSettings s = small_run();
  s.checkpoint_path = "/tmp/ckpt";
  ResourceView v;
  v.disk_free = 1e6;
  v.disk_folder = "/tmp";
  Problems p;
  check_resources(s, v, p);
  EXPECT_NE(codes(p).find("checkpoint-disk: the checkpoint '/tmp/ckpt' takes"), std::string::npos) << codes(p);
  EXPECT_NE(codes(p).find("has 0.95 MiB free (1000000 bytes, statvfs)"), std::string::npos) << codes(p);
}
