#include "runtime/parallel/process_groups.h"

#include <algorithm>
#include <vector>

#include "runtime/comm/self_communicator.h"

namespace trident::parallel {

ProcessGroups make_process_groups(const Mesh& mesh, std::shared_ptr<comm::CommContext> context, comm::World& base,
                                  const GroupWrap& wrap) {
  const int world_size = base.size(), world_rank = base.rank();
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
  std::vector<int> all(world_size);
  for (int i = 0; i < world_size; ++i) all[i] = i;
  g.world = base.communicator("world", all, context);
  // A group's communicator over its world (the device's, with a wrap).
  auto adopt = [&](comm::World& group, const std::string& name, std::vector<int> ranks) {
    auto host = group.communicator(name, std::move(ranks), context);
    return wrap ? wrap(std::move(host), group) : std::move(host);
  };
  auto split = [&](Dim kind) {
    Group grp = mesh.group_of(kind, world_rank);
    auto group = base.split(static_cast<int>(grp.index), static_cast<int>(mesh.coord_in(kind, world_rank)));
    return adopt(*group, to_string(kind), std::vector<int>(grp.ranks.begin(), grp.ranks.end()));
  };
  g.tp = split(Dim::TP);
  g.dp = split(Dim::DP);
  g.pp = split(Dim::PP);
  g.cp = split(Dim::CP);
  if (mesh.size(Dim::CP) > 1) g.dcp = split(Dim::DCP);
  if (mesh.size(Dim::EP) > 1) {
    g.ep = split(Dim::EP);
    g.edp = split(Dim::EDP);
  }
  if (mesh.size(Dim::ETP) > 1) g.etp = split(Dim::ETP);

  // Embedding group: the first and last stage of each pipeline. Every rank takes part in the
  // split (MPI requires it); middle stages give no colour.
  const int64_t pp = mesh.size(Dim::PP);
  const bool member = pp > 1 && (g.coords.pp() == 0 || g.coords.pp() == pp - 1);
  const int64_t index = mesh.group_index_of(Dim::PP, world_rank);
  auto emb = base.split(member ? static_cast<int>(index) : comm::World::kNoColour, static_cast<int>(g.coords.pp()));
  if (member) {
    Group pg = mesh.group_of(Dim::PP, world_rank);
    g.embedding = adopt(*emb, "embedding", {static_cast<int>(pg.ranks.front()), static_cast<int>(pg.ranks.back())});
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

}  // namespace trident::parallel
