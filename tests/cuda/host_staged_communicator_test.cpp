// HostStagedCommunicator on real MPI ranks (no GPU needed: the "device" copies are memcpy that
// count their bytes). Every operation must give MPI's own result, go through the copies, deliver
// asynchronous results only on completion, and sum bf16 in fp32 (which MPI cannot do itself).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/comm/host_staged_communicator.h"
#include "runtime/comm/mpi_communicator.h"

using namespace trident;
using comm::DType;
using comm::ReduceOp;

namespace {

struct Staged {
  size_t to_host_bytes = 0, to_device_bytes = 0;
  std::unique_ptr<comm::HostStagedCommunicator> c;
  Staged() {
    auto world = comm::MpiCommunicator::world(std::make_shared<comm::CommContext>());
    c = std::make_unique<comm::HostStagedCommunicator>(
        std::move(world),
        [this](void* d, const void* s, size_t n) { std::memcpy(d, s, n), to_host_bytes += n; },
        [this](void* d, const void* s, size_t n) { std::memcpy(d, s, n), to_device_bytes += n; });
  }
};

uint16_t bf16(float f) {  // exact for the small integers used here
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return uint16_t(b >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

TEST(HostStagedCommunicator, all_reduce_f32_and_bf16_sum_through_the_copies) {
  Staged s;
  const int n = s.c->size(), r = s.c->rank();
  std::vector<float> x(5, float(r + 1));
  s.c->all_reduce(x.data(), x.size(), DType::F32, ReduceOp::Sum);
  for (float v : x) EXPECT_EQ(v, float(n * (n + 1) / 2));
  EXPECT_EQ(s.to_host_bytes, 20u);
  EXPECT_EQ(s.to_device_bytes, 20u);
  std::vector<uint16_t> h(7, bf16(float(r + 1)));
  s.c->all_reduce(h.data(), h.size(), DType::BF16, ReduceOp::Sum);
  for (uint16_t v : h) EXPECT_EQ(from_bf16(v), float(n * (n + 1) / 2));
  std::vector<uint16_t> m(3, bf16(float(r)));
  s.c->all_reduce(m.data(), m.size(), DType::BF16, ReduceOp::Max);
  for (uint16_t v : m) EXPECT_EQ(from_bf16(v), float(n - 1));
}

TEST(HostStagedCommunicator, reduce_scatter_all_gather_broadcast_match_mpi) {
  Staged s;
  const int n = s.c->size(), r = s.c->rank();
  std::vector<uint16_t> send(size_t(2 * n)), recv(2);
  for (int i = 0; i < 2 * n; ++i) send[size_t(i)] = bf16(float(i));
  s.c->reduce_scatter(send.data(), recv.data(), 2, DType::BF16, ReduceOp::Sum);
  EXPECT_EQ(from_bf16(recv[0]), float(n * 2 * r));
  EXPECT_EQ(from_bf16(recv[1]), float(n * (2 * r + 1)));
  std::vector<float> mine{float(r), float(10 * r)}, all(size_t(2 * n));
  s.c->all_gather(mine.data(), all.data(), 2, DType::F32);
  for (int i = 0; i < n; ++i) EXPECT_EQ(all[size_t(2 * i + 1)], float(10 * i));
  std::vector<int32_t> b(4, r == 0 ? 42 : -1);
  s.c->broadcast(b.data(), b.size(), DType::I32, 0);
  for (int32_t v : b) EXPECT_EQ(v, 42);
}

TEST(HostStagedCommunicator, async_receive_delivers_on_completion_only) {
  Staged s;
  const int n = s.c->size(), r = s.c->rank();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> out(6, float(r)), in(6, -1.0f);
  auto rq = s.c->irecv(in.data(), in.size(), DType::F32, prev, 3);
  auto sq = s.c->isend(out.data(), out.size(), DType::F32, next, 3);
  out.assign(6, 99.0f);  // the send works on its host copy: changing the buffer now is safe
  sq->wait();
  rq->wait();
  EXPECT_TRUE(rq->test());
  for (float v : in) EXPECT_EQ(v, float(prev));
  std::vector<float> x(3, 1.0f);
  auto ar = s.c->all_reduce_async(x.data(), x.size(), DType::F32, ReduceOp::Sum);
  ar->wait();
  for (float v : x) EXPECT_EQ(v, float(n));
}
