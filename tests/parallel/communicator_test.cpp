// The MPI communicator on 4 ranks: every collective and transfer gives the values MPI's
// definition says, groups are the Mesh's groups, and a missing peer becomes an error naming it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <thread>

#include "runtime/comm/mpi_world.h"
#include "runtime/comm/mpi_communicator.h"
#include "runtime/parallel/process_groups.h"

using namespace trident;
using namespace trident::comm;

namespace {

std::shared_ptr<CommContext> context(double timeout_s = 30) {
  auto c = std::make_shared<CommContext>();
  MPI_Comm_rank(MPI_COMM_WORLD, &c->world_rank);
  c->timeout_s = timeout_s;
  return c;
}

TEST(MpiCommunicator, all_reduce_sums_and_maxes_over_every_rank) {
  auto world = MpiCommunicator::world(context());
  const int n = world->size(), r = world->rank();
  std::vector<float> v{float(r), float(r * r), 1.0f};
  world->all_reduce(v.data(), v.size(), DType::F32, ReduceOp::Sum);
  float sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) sum += i, sq += i * i;
  EXPECT_EQ(v[0], sum);
  EXPECT_EQ(v[1], sq);
  EXPECT_EQ(v[2], float(n));
  std::vector<float> m{float(r)};
  world->all_reduce(m.data(), 1, DType::F32, ReduceOp::Max);
  EXPECT_EQ(m[0], float(n - 1));
}

TEST(MpiCommunicator, reduce_scatter_leaves_each_rank_its_summed_slice) {
  auto world = MpiCommunicator::world(context());
  const int n = world->size(), r = world->rank();
  std::vector<float> send(2 * n), recv(2);
  for (int i = 0; i < 2 * n; ++i) send[i] = float(i * 10 + r);
  world->reduce_scatter(send.data(), recv.data(), 2, DType::F32, ReduceOp::Sum);
  const float ranks_sum = float(n * (n - 1) / 2);
  EXPECT_EQ(recv[0], float(2 * r * 10 * n) + ranks_sum);
  EXPECT_EQ(recv[1], float((2 * r + 1) * 10 * n) + ranks_sum);
}

TEST(MpiCommunicator, all_gather_concatenates_in_rank_order_and_broadcast_copies_root) {
  auto world = MpiCommunicator::world(context());
  const int n = world->size(), r = world->rank();
  std::vector<int32_t> send{r, -r}, recv(2 * n);
  world->all_gather(send.data(), recv.data(), 2, DType::I32);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(recv[2 * i], i);
    EXPECT_EQ(recv[2 * i + 1], -i);
  }
  std::vector<int64_t> b{r == n - 1 ? 42 : 0};
  world->broadcast(b.data(), 1, DType::I64, n - 1);
  EXPECT_EQ(b[0], 42);
}

// Rank r sends p + 1 values r * 100 + p to rank p (none to itself when r is odd): rank r then
// holds, from each rank q in rank order, r + 1 values q * 100 + r (none from odd q to itself).
TEST(MpiCommunicator, all_to_all_v_delivers_variable_counts_in_rank_order) {
  auto world = MpiCommunicator::world(context());
  const int n = world->size(), r = world->rank();
  std::vector<size_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  std::vector<float> send;
  for (int p = 0; p < n; ++p) {
    sc[size_t(p)] = (p == r && r % 2) ? 0 : size_t(p + 1);
    rc[size_t(p)] = (p == r && r % 2) ? 0 : size_t(r + 1);
    for (size_t i = 0; i < sc[size_t(p)]; ++i) send.push_back(float(r * 100 + p));
  }
  size_t total = 0;
  for (size_t c : rc) total += c;
  std::vector<float> recv(total, -1.0f);
  world->all_to_all_v(send.data(), sc.data(), recv.data(), rc.data(), DType::F32);
  size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < rc[size_t(q)]; ++i) EXPECT_EQ(recv[at++], float(q * 100 + r)) << "from rank " << q;
  EXPECT_EQ(at, total);
}

TEST(MpiCommunicator, ring_send_recv_and_async_handles_deliver_each_neighbours_data) {
  auto world = MpiCommunicator::world(context());
  const int n = world->size(), r = world->rank();
  std::vector<float> out(100, float(r)), in(100, -1);
  auto rq = world->irecv(in.data(), in.size(), DType::F32, (r + n - 1) % n, 7);
  auto sq = world->isend(out.data(), out.size(), DType::F32, (r + 1) % n, 7);
  sq->wait();
  rq->wait();
  EXPECT_EQ(in[0], float((r + n - 1) % n));
  EXPECT_EQ(in[99], float((r + n - 1) % n));
  std::vector<float> a(1000, 1.0f);
  auto h = world->all_reduce_async(a.data(), a.size(), DType::F32, ReduceOp::Sum);
  h->wait();
  EXPECT_TRUE(h->test());
  EXPECT_EQ(a[999], float(n));
}

TEST(MpiCommunicator, a_receive_from_a_silent_peer_times_out_naming_both_ranks) {
  auto world = MpiCommunicator::world(context(0.3));
  auto patient = MpiCommunicator::world(context(30));
  if (world->size() < 2) GTEST_SKIP();
  if (world->rank() == 1) {
    float x = 0;
    try {
      world->recv(&x, 1, DType::F32, 0, 99);
      ADD_FAILURE() << "recv from a peer that never sends returned";
    } catch (const CommTimeout& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("rank 1 waited"), std::string::npos) << msg;
      EXPECT_NE(msg.find("recv 1 f32 from rank 0 tag 99"), std::string::npos) << msg;
    }
  }
  patient->barrier();
}

TEST(MpiCommunicator, trace_logs_every_operation_with_step_and_rank) {
  auto ctx = context();
  ctx->trace = true;
  ctx->step = 5;
  char* text = nullptr;
  size_t len = 0;
  ctx->trace_out = open_memstream(&text, &len);
  {
    auto world = MpiCommunicator::world(ctx);
    float x = 1;
    world->all_reduce(&x, 1, DType::F32, ReduceOp::Sum);
  }
  std::fclose(ctx->trace_out);
  std::string log(text, len);
  free(text);
  EXPECT_NE(log.find("[comm] step 5 rank " + std::to_string(ctx->world_rank) + " world["), std::string::npos) << log;
  EXPECT_NE(log.find("all_reduce 1 f32 sum"), std::string::npos) << log;
}

TEST(ProcessGroups, groups_are_the_mesh_groups_for_every_order) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  ASSERT_EQ(world_size, 4) << "this test is written for mpirun -np 4";
  for (std::string order : {"tp-dp-pp", "dp-tp-pp", "pp-dp-tp", "tp-pp-dp"}) {
    for (auto [tp, dp, pp] : {std::tuple{2, 2, 1}, {2, 1, 2}, {1, 2, 2}, {4, 1, 1}, {1, 1, 4}}) {
      Layout layout{.tp = tp, .dp = dp, .pp = pp, .order = order};
      Mesh mesh(layout, 8);
      comm::MpiWorld world_ranks(MPI_COMM_WORLD);
      auto g = parallel::make_process_groups(mesh, context(), world_ranks);
      for (auto [kind, comm] : {std::pair{Dim::TP, g.tp.get()}, {Dim::DP, g.dp.get()}, {Dim::PP, g.pp.get()}}) {
        Group expect = mesh.group_of(kind, g.world_rank);
        ASSERT_EQ(comm->size(), int(expect.ranks.size()));
        EXPECT_EQ(expect.ranks[comm->rank()], g.world_rank);
        // The sum of world ranks over the communicator is the sum over the Mesh group.
        int64_t sum = g.world_rank;
        comm->all_reduce(&sum, 1, DType::I64, ReduceOp::Sum);
        EXPECT_EQ(sum, std::accumulate(expect.ranks.begin(), expect.ranks.end(), int64_t{0}))
            << order << " " << to_string(kind);
      }
      EXPECT_EQ(g.embedding != nullptr, pp > 1 && (g.coords.pp() == 0 || g.coords.pp() == pp - 1));
    }
  }
}

// The EP and EDP communicators hold the ranks Megatron-Core's expert rank generator gives for
// tp-cp-ep-dp-pp (written out here, not taken from the Mesh): the expert grid etp-ep-edp-pp over
// each stage's tp x cp x dp ranks (cp left out), a stage-local rank e + etp (i + ep q) at expert
// tensor rank e, ep rank i, edp rank q. At etp = tp (what train runs) these are ep consecutive data
// ranks of one tp rank and every ep-th; at etp 1 the ep group folds over attention's tp ranks.
TEST(ProcessGroups, expert_groups_are_megatrons_expert_rank_generator) {
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  ASSERT_EQ(world_size, 4) << "this test is written for mpirun -np 4";
  struct Sizes { int64_t tp, cp, dp, pp, ep, etp; };
  for (Sizes z : {Sizes{1, 1, 4, 1, 2, 1}, {1, 1, 4, 1, 4, 1}, {2, 1, 2, 1, 2, 2}, {1, 1, 2, 2, 2, 1}, {1, 2, 2, 1, 2, 1},
                  {1, 2, 2, 1, 4, 1}, {1, 2, 1, 2, 2, 1}, {2, 1, 2, 1, 2, 1}, {2, 1, 2, 1, 4, 1}, {2, 2, 1, 1, 2, 1},
                  {2, 1, 1, 2, 2, 1}, {2, 2, 1, 1, 2, 2}}) {
    Layout layout{.tp = z.tp, .cp = z.cp, .dp = z.dp, .pp = z.pp, .order = "tp-cp-ep-dp-pp", .ep = z.ep, .etp = z.etp};
    comm::MpiWorld world_ranks(MPI_COMM_WORLD);
    auto g = parallel::make_process_groups(Mesh(layout, 8), context(), world_ranks);
    const int64_t r = g.world_rank, stage = z.tp * z.cp * z.dp, edp = stage / (z.ep * z.etp);
    const int64_t s = r / stage, local = r % stage, e = local % z.etp, i = local / z.etp % z.ep, q = local / (z.etp * z.ep);
    auto rank = [&](int64_t ii, int64_t qq) { return s * stage + e + z.etp * (ii + z.ep * qq); };
    std::vector<int64_t> ep_ranks, edp_ranks;
    for (int64_t ii = 0; ii < z.ep; ++ii) ep_ranks.push_back(rank(ii, q));
    for (int64_t qq = 0; qq < edp; ++qq) edp_ranks.push_back(rank(i, qq));
    for (auto [comm, expect] : {std::pair{g.ep.get(), ep_ranks}, {g.edp.get(), edp_ranks}}) {
      ASSERT_NE(comm, nullptr) << layout.describe();
      ASSERT_EQ(comm->size(), int(expect.size())) << layout.describe();
      std::vector<int64_t> got(expect.size());
      comm->all_gather(&r, got.data(), 1, DType::I64);
      EXPECT_EQ(got, expect) << layout.describe() << " rank " << r;
    }
  }
  comm::MpiWorld world_ranks(MPI_COMM_WORLD);
  auto dense = parallel::make_process_groups(Mesh(Layout{.dp = 4}, 8), context(), world_ranks);
  EXPECT_EQ(dense.ep, nullptr);
  EXPECT_EQ(&dense.expert_grads(), &dense.dense_grads());
}

TEST(ProcessGroups, a_world_size_that_does_not_match_the_layout_is_an_error_before_any_work) {
  Mesh mesh(Layout{.tp = 2, .dp = 2, .pp = 2}, 8);
  try {
    comm::MpiWorld world_ranks(MPI_COMM_WORLD);
    parallel::make_process_groups(mesh, context(), world_ranks);
    ADD_FAILURE() << "no error for 4 ranks running an 8-rank layout";
  } catch (const InputError& e) {
    std::string msg = e.problems().at(0).what + " / " + e.problems().at(0).fix;
    EXPECT_NE(msg.find("started 4 ranks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs 8"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mpirun -np 8"), std::string::npos) << msg;
  }
}

// The world (comm::World over MPI): split by colour with ranks ordered by key, a rank without a
// colour gets none, strings of different lengths gathered whole in rank order, broadcast and
// reductions of host values, and the split's communicator reduces over the split's ranks only.
TEST(MpiWorld, split_gather_broadcast_and_reduce_over_4_ranks) {
  MpiWorld world(MPI_COMM_WORLD);
  ASSERT_EQ(world.size(), 4) << "this test is written for mpirun -np 4";
  const int r = world.rank();
  // Colour r % 2, key -r: the odd ranks {3, 1} and the even ranks {2, 0}, highest first.
  auto half = world.split(r % 2, -r);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->size(), 2);
  EXPECT_EQ(half->rank(), r < 2 ? 1 : 0);
  auto only_first = world.split(r == 0 ? 0 : World::kNoColour, 0);
  EXPECT_EQ(only_first != nullptr, r == 0);
  if (only_first) EXPECT_EQ(only_first->size(), 1);

  const std::vector<std::string> texts = all_gather_strings(world, std::string(size_t(r) * 3, char('a' + r)));
  ASSERT_EQ(texts.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(texts[size_t(i)], std::string(size_t(i) * 3, char('a' + i)));

  double value = r == 2 ? 42.5 : -1;
  world.broadcast(&value, sizeof value, 2);
  EXPECT_EQ(value, 42.5);
  double sum = r + 1, max = 0;
  world.all_reduce(&sum, &sum, 1, ReduceOp::Sum);
  const double mine = r;
  world.all_reduce(&mine, &max, 1, ReduceOp::Max);
  EXPECT_EQ(sum, 10);
  EXPECT_EQ(max, 3);

  auto group = half->communicator("half", {r % 2 == 0 ? 2 : 3, r % 2}, context());
  int64_t ranks = r;
  group->all_reduce(&ranks, 1, DType::I64, ReduceOp::Sum);
  EXPECT_EQ(ranks, r % 2 == 0 ? 2 : 4);
  auto host = world.split_host(r);
  EXPECT_GE(host->size(), 1);
  world.sleeping_barrier();
}

}  // namespace
