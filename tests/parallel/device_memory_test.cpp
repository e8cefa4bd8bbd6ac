// Everything the trainer hands a DP or PP communicator is memory from the kernels' allocator
// (NCCL needs device memory; a host vector would crash it on a GPU). On the CPU both are host
// memory, so the kernels here remember their allocations and a recording communicator checks
// every buffer it is given against them.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/parallel/dist_trainer.h"
#include "runtime/parallel/grad_sync.h"

using namespace trident;

namespace {

// CPU kernels that remember which ranges they allocated.
class TrackingKernels : public kernels::CpuKernels {
 public:
  TrackingKernels() : CpuKernels(1) {}
  float* alloc(size_t count) override {
    float* p = CpuKernels::alloc(count);
    live_[p] = count;
    return p;
  }
  void free(float* p, size_t count) override {
    live_.erase(p);
    CpuKernels::free(p, count);
  }
  bool owns(const void* p, size_t bytes) const {
    const char* c = static_cast<const char*>(p);
    for (const auto& [base, n] : live_) {
      const char* b = reinterpret_cast<const char*>(base);
      if (c >= b && c + bytes <= b + n * sizeof(float)) return true;
    }
    return false;
  }

 private:
  std::map<float*, size_t> live_;
};

// A group of `size` ranks seen from rank `rank`: the other ranks contribute zeros, a receive
// gets zeros. Every buffer is checked; `foreign` lists the operations given other memory.
class RecordingCommunicator : public comm::Communicator {
 public:
  RecordingCommunicator(const TrackingKernels& k, std::string name, int size, int rank)
      : k_(k), name_(std::move(name)), size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  void all_reduce(void* b, size_t n, comm::DType t, comm::ReduceOp) override { see("all_reduce", b, n, t); }
  void reduce_scatter(const void* s, void* r, size_t n, comm::DType t, comm::ReduceOp) override {
    see("reduce_scatter send", s, n * size_t(size_), t), see("reduce_scatter recv", r, n, t);
    std::memcpy(r, static_cast<const char*>(s) + size_t(rank_) * n * comm::dtype_size(t), n * comm::dtype_size(t));
  }
  void all_gather(const void* s, void* r, size_t n, comm::DType t) override {
    see("all_gather send", s, n, t), see("all_gather recv", r, n * size_t(size_), t);
    const size_t bytes = n * comm::dtype_size(t);
    std::memset(r, 0, bytes * size_t(size_));
    std::memcpy(static_cast<char*>(r) + size_t(rank_) * bytes, s, bytes);
  }
  void broadcast(void* b, size_t n, comm::DType t, int) override { see("broadcast", b, n, t); }
  void all_to_all_v(const void* s, const size_t* sc, void* r, const size_t* rc, comm::DType t) override {
    size_t sent = 0, received = 0;
    for (int p = 0; p < size_; ++p) sent += sc[p], received += rc[p];
    see("all_to_all_v send", s, sent, t), see("all_to_all_v recv", r, received, t);
  }
  void barrier() override {}
  void send(const void* b, size_t n, comm::DType t, int, int) override { see("send", b, n, t); }
  void recv(void* b, size_t n, comm::DType t, int, int) override {
    see("recv", b, n, t);
    std::memset(b, 0, n * comm::dtype_size(t));
  }
  comm::RequestPtr all_reduce_async(void* b, size_t n, comm::DType t, comm::ReduceOp op) override {
    all_reduce(b, n, t, op);
    return done();
  }
  comm::RequestPtr reduce_scatter_async(const void* s, void* r, size_t n, comm::DType t, comm::ReduceOp op) override {
    reduce_scatter(s, r, n, t, op);
    return done();
  }
  comm::RequestPtr all_gather_async(const void* s, void* r, size_t n, comm::DType t) override {
    all_gather(s, r, n, t);
    return done();
  }
  comm::RequestPtr isend(const void* b, size_t n, comm::DType t, int peer, int tag) override {
    send(b, n, t, peer, tag);
    return done();
  }
  comm::RequestPtr irecv(void* b, size_t n, comm::DType t, int peer, int tag) override {
    recv(b, n, t, peer, tag);
    return done();
  }

  int calls = 0;
  std::vector<std::string> foreign;

 private:
  struct Done : comm::Request {
    void wait() override {}
    bool test() override { return true; }
  };
  static comm::RequestPtr done() { return std::make_unique<Done>(); }
  void see(const char* op, const void* p, size_t n, comm::DType t) {
    ++calls;
    if (n > 0 && !k_.owns(p, n * comm::dtype_size(t))) foreign.push_back(name_ + " " + op);
  }
  const TrackingKernels& k_;
  std::string name_;
  int size_, rank_;
};

ModelSpec tiny() {
  ModelSpec m;
  m.layers = 2, m.hidden = 32, m.heads = 4, m.kv_heads = 4, m.ffn_hidden = 128, m.seq_len = 16, m.vocab = 64;
  return m;
}

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "; ";
  return s;
}

}  // namespace

TEST(DeviceMemory, zero1_reduce_scatter_gather_and_moment_gather_use_allocator_memory_only) {
  TrackingKernels k;
  const std::vector<float> host(64);
  ASSERT_FALSE(k.owns(host.data(), 4)) << "the check cannot tell host vectors from allocator memory";
  const nn::ParamLayout L(nn::Shard::whole(tiny()));
  RecordingCommunicator dp(k, "dp", 2, 0);
  parallel::GradSync sync(dp, L, /*zero=*/1, 4096, k);
  ASSERT_TRUE(sync.sharded());
  float* grads = k.alloc(size_t(L.total()));
  for (int64_t i = 0; i < L.total(); ++i) grads[i] = float(i % 5);
  sync.start_step();
  sync.finish(grads);
  sync.all_gather_params(grads);
  float* shard = k.alloc(size_t(sync.shard_floats()));
  for (const auto& p : sync.pieces()) k.copy(shard + p.shard, grads + p.begin, size_t(p.end - p.begin));
  const std::vector<float> whole = sync.gather_to_host(shard);
  k.free(shard, size_t(sync.shard_floats()));
  EXPECT_EQ(int64_t(whole.size()), L.total());
  EXPECT_EQ(whole[3], 3.0f);  // rank 0's slice comes back; the other (zero) rank's is zeros
  EXPECT_GE(dp.calls, 6);
  EXPECT_TRUE(dp.foreign.empty()) << "host memory handed to the communicator: " << list(dp.foreign);
  k.free(grads, size_t(L.total()));
}

// Building a pp 2 trainer measures the wire time of one pipeline message (ping-pong with the
// next stage, then the slowest over the stages): all of it through allocator memory.
TEST(DeviceMemory, pipeline_message_probe_uses_allocator_memory_only) {
  TrackingKernels k;
  RunSpec run;
  run.model = tiny();
  run.layout = Layout{.tp = 1, .dp = 1, .pp = 2};
  run.exec.global_batch_size = 4, run.exec.micro_batch_size = 2, run.exec.precision = Precision::FP32;
  parallel::ProcessGroups g = parallel::make_single_process_groups(std::make_shared<comm::CommContext>());
  auto pp = std::make_unique<RecordingCommunicator>(k, "pp", 2, 0);
  RecordingCommunicator* seen = pp.get();
  g.pp = std::move(pp);
  auto data = parallel::synthetic_source(run.model.vocab, run.model.seq_len, 1);
  parallel::TrainerOptions o;
  o.kernels = &k;
  parallel::DistTrainer trainer(run, g, *data, o);
  EXPECT_GE(seen->calls, 11);  // 5 round trips and the max over the stages
  EXPECT_TRUE(seen->foreign.empty()) << "host memory handed to the communicator: " << list(seen->foreign);
}
