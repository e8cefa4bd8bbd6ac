// ProcessGroups: this rank's communicators for every parallel dimension, built from the Mesh.
//
// The groups are exactly Mesh::group_of(kind, rank) — the same sets `trident topo` prints —
// split from the run's world (comm::World::split: colour = group index, key = the rank's
// coordinate in that dimension, so group rank i is coordinate i), each made into the world's
// communicator. Owned by the trainer and passed down explicitly: there is no process-group
// global. A one-process run is a world of one: make_single_process_groups builds every group
// without MPI (no mpirun needed).
#pragma once

#include <functional>
#include <memory>

#include "core/mesh.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/world.h"

namespace trident::parallel {

struct ProcessGroups {
  std::shared_ptr<comm::CommContext> context;
  Coords coords;      // this rank's (tp, cp, dp, pp) coordinates
  int world_rank = 0;
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<comm::Communicator> tp;
  std::unique_ptr<comm::Communicator> dp;
  std::unique_ptr<comm::Communicator> pp;
  std::unique_ptr<comm::Communicator> cp;
  // The dense gradients' group, dp x cp (Megatron's data-parallel group with context parallel:
  // the cp ranks hold partial gradients of the same weights); null when cp == 1 (then dp).
  std::unique_ptr<comm::Communicator> dcp;
  // First and last pipeline stage of the same (tp, dp) position, for the tied embedding's
  // gradient; null on middle stages and when pp == 1.
  std::unique_ptr<comm::Communicator> embedding;
  // Expert parallel (ep > 1, else both null): the EP group dispatches tokens to the ranks of
  // their experts (all-to-all); the EDP group (expert data parallel: the ranks holding the same
  // experts) reduces the experts' gradients. Both carved from the dp x cp ranks as Megatron's
  // expert rank generator does (Mesh::group_of(Dim::EP / Dim::EDP)).
  std::unique_ptr<comm::Communicator> ep;
  std::unique_ptr<comm::Communicator> edp;
  // Expert tensor parallel (etp > 1, else null): the ranks holding slices of the same experts
  // (Mesh::group_of(Dim::ETP)).
  std::unique_ptr<comm::Communicator> etp;

  bool first_stage() const { return coords.pp() == 0; }
  bool last_stage() const { return pp && coords.pp() == pp->size() - 1; }
  comm::Communicator& dense_grads() const { return dcp ? *dcp : *dp; }
  // The experts' gradients' group: EDP, or the dense one without expert parallelism.
  comm::Communicator& expert_grads() const { return edp ? *edp : dense_grads(); }
};

// What a device's ranks talk through: each group's host communicator and its world in (the world
// for a collective start-up such as NCCL's id broadcast), the group's communicator out (on CUDA:
// NCCL, or MPI staged through host memory; runtime/cuda/gpu_groups.h).
using GroupWrap =
    std::function<std::unique_ptr<comm::Communicator>(std::unique_ptr<comm::Communicator> host, comm::World& group)>;

// Collective over `base` (the run's world; tests pass a sub-world). Throws InputError (before
// any work) when base's size is not the layout's tp * cp * dp * pp, naming both and the fix. Mesh
// ranks are base's ranks. wrap (when set) turns the tp, cp, dp, dp x cp, pp, embedding, ep, edp
// and etp groups into the device's communicators; world stays on the host (host scalars).
ProcessGroups make_process_groups(const Mesh& mesh, std::shared_ptr<comm::CommContext> context, comm::World& base,
                                  const GroupWrap& wrap = {});

// A world of one (tp = cp = dp = pp = 1), every group a SelfCommunicator: MPI is never touched.
ProcessGroups make_single_process_groups(std::shared_ptr<comm::CommContext> context);

// In-place all-reduce of doubles over any group (runtime/comm/world.h).
using comm::all_reduce_f64;

}  // namespace trident::parallel
