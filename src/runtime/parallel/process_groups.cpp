#include "runtime/parallel/process_groups.h"

#include <algorithm>
#include <vector>

#include "runtime/comm/self_communicator.h"

namespace trident::parallel {

namespace {

std::unique_ptr<comm::MpiCommunicator> split(MPI_Comm base, const Mesh& mesh, Dim kind, int world_rank,
                                             const std::shared_ptr<comm::CommContext>& context) {
  Group g = mesh.group_of(kind, world_rank);
  MPI_Comm out;
  MPI_Comm_split(base, static_cast<int>(g.index), static_cast<int>(mesh.coord_in(kind, world_rank)), &out);
  std::vector<int> ranks(g.ranks.begin(), g.ranks.end());
  return std::make_unique<comm::MpiCommunicator>(out, to_string(kind), ranks, context);
}

}  // namespace

ProcessGroups make_process_groups(const Mesh& mesh, std::shared_ptr<comm::CommContext> context, MPI_Comm base,
                                  const GroupWrap& wrap) {
  int world_size = 1, world_rank = 0;
  MPI_Comm_size(base, &world_size);
  MPI_Comm_rank(base, &world_rank);
  if (world_size != mesh.world_size()) {
    Problems p;
    p.add("mpirun started " + std::to_string(world_size) + " ranks but the layout " + mesh.layout().describe() +
              " needs " + std::to_string(mesh.world_size()),
          "run mpirun -np " + std::to_string(mesh.world_size()) + ", or change --dp/--tp/--cp/--pp so their product is " +
              std::to_string(world_size),
          "world-size-matches-layout");
    p.throw_if_any();
  }
  context->world_rank = world_rank;
  ProcessGroups g;
  g.context = context;
  g.world_rank = world_rank;
  g.coords = mesh.coords_of(world_rank);
  if (base == MPI_COMM_WORLD) {
    g.world = comm::MpiCommunicator::world(context);
  } else {
    MPI_Comm dup;
    MPI_Comm_dup(base, &dup);
    std::vector<int> ranks(world_size);
    for (int i = 0; i < world_size; ++i) ranks[i] = i;
    g.world = std::make_unique<comm::MpiCommunicator>(dup, "world", ranks, context);
  }
  // The device's communicator of a group (the MPI one itself without a wrap).
  auto adopt = [&wrap](std::unique_ptr<comm::MpiCommunicator> mpi) -> std::unique_ptr<comm::Communicator> {
    if (wrap) return wrap(std::move(mpi));
    return mpi;
  };
  g.tp = adopt(split(base, mesh, Dim::TP, world_rank, context));
  g.dp = adopt(split(base, mesh, Dim::DP, world_rank, context));
  g.pp = adopt(split(base, mesh, Dim::PP, world_rank, context));
  g.cp = adopt(split(base, mesh, Dim::CP, world_rank, context));
  if (mesh.size(Dim::CP) > 1) g.dcp = adopt(split(base, mesh, Dim::DCP, world_rank, context));
  if (mesh.size(Dim::EP) > 1) {
    g.ep = adopt(split(base, mesh, Dim::EP, world_rank, context));
    g.edp = adopt(split(base, mesh, Dim::EDP, world_rank, context));
  }
  if (mesh.size(Dim::ETP) > 1) g.etp = adopt(split(base, mesh, Dim::ETP, world_rank, context));

  // Embedding group: the first and last stage of each pipeline. Every rank takes part in the
  // split (MPI requires it); middle stages pass MPI_UNDEFINED.
  const int64_t pp = mesh.size(Dim::PP);
  const bool member = pp > 1 && (g.coords.pp() == 0 || g.coords.pp() == pp - 1);
  const int64_t index = mesh.group_index_of(Dim::PP, world_rank);
  MPI_Comm emb;
  MPI_Comm_split(base, member ? static_cast<int>(index) : MPI_UNDEFINED,
                 static_cast<int>(g.coords.pp()), &emb);
  if (member) {
    Group pg = mesh.group_of(Dim::PP, world_rank);
    std::vector<int> ranks{static_cast<int>(pg.ranks.front()), static_cast<int>(pg.ranks.back())};
    g.embedding = adopt(std::make_unique<comm::MpiCommunicator>(emb, "embedding", ranks, context));
  }
  return g;
}

ProcessGroups make_single_process_groups(std::shared_ptr<comm::CommContext> context) {
  ProcessGroups g;
  context->world_rank = 0;
  g.context = context;
  g.world = std::make_unique<comm::SelfCommunicator>("world");
  g.tp = std::make_unique<comm::SelfCommunicator>("tp");
  g.dp = std::make_unique<comm::SelfCommunicator>("dp");
  g.pp = std::make_unique<comm::SelfCommunicator>("pp");
  g.cp = std::make_unique<comm::SelfCommunicator>("cp");
  return g;
}

void all_reduce_f64(comm::Communicator& group, double* values, size_t count, comm::ReduceOp op) {
  if (group.size() == 1 || count == 0) return;
  if (auto* mpi = dynamic_cast<comm::MpiCommunicator*>(&group)) return mpi->all_reduce_f64(values, count, op);
  const size_t n = size_t(group.size());
  std::vector<double> all(n * count);
  group.all_gather(values, all.data(), count * sizeof(double), comm::DType::U8);
  for (size_t i = 0; i < count; ++i) {
    double acc = all[i];
    for (size_t r = 1; r < n; ++r) {
      const double x = all[r * count + i];
      acc = op == comm::ReduceOp::Sum ? acc + x : op == comm::ReduceOp::Max ? std::max(acc, x) : std::min(acc, x);
    }
    values[i] = acc;
  }
}

}  // namespace trident::parallel
