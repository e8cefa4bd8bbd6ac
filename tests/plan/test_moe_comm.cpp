// The MoE step's communication terms on hand-computed cases: the hierarchical all-to-all (NVLink
// inside an NVLink domain, the network between).
#include <gtest/gtest.h>

#include "core/cluster_spec.h"
#include "core/mesh.h"
#include "plan/dim_link.h"
#include "plan/mixture_of_experts.h"

using namespace trident;
using namespace trident::plan;

namespace {

GroupLink link(LinkKind kind, double bw, double latency, int nodes) {
  GroupLink l;
  l.kind = kind;
  l.bandwidth_Bps = bw;
  l.latency_s = latency;
  l.nodes = l.domains = nodes;
  return l;
}

// ep 64 over 8 DGX nodes: 7 of a rank's 63 peers on NVLink, 56 on the network, both at once.
TEST(MoeComm, hierarchical_alltoall_by_hand) {
  const CostConstants& c = default_constants();
  const GroupLink ib = link(LinkKind::InfiniBand, 50e9, 5e-6, 8), nv = link(LinkKind::NVLink, 900e9, 3e-6, 1);
  const double S = 64e6;
  const AlltoallTime a = hierarchical_alltoall(S, 64, EpLinks(ib, 8, nv), c);
  EXPECT_EQ(a.g, 8);
  EXPECT_DOUBLE_EQ(a.nvlink_bytes, 7.0 / 64 * S);
  EXPECT_DOUBLE_EQ(a.network_bytes, 56.0 / 64 * S);
  EXPECT_NEAR(a.nvlink_s, 7.0 / 64 * S / (900e9 * c.nvlink_efficiency), 1e-15);
  EXPECT_NEAR(a.network_s, 56.0 / 64 * S / (50e9 * c.network_efficiency), 1e-15);
  EXPECT_NEAR(a.latency_s, 7 * alltoall_latency_s(nv, c) + 56 * alltoall_latency_s(ib, c), 1e-15);
  EXPECT_NEAR(a.total_s, a.latency_s + a.network_s, 1e-15);  // the network is the slower part
  // The old charge: all 63/64 of it at the network's rate.
  EXPECT_LT(a.total_s, alltoall_time_s(S, 64, ib, c));
  // Inside one domain (g = n) or without a domain link: the one-link all-to-all.
  EXPECT_NEAR(hierarchical_alltoall(S, 8, EpLinks(nv), c).total_s, alltoall_time_s(S, 8, nv, c), 1e-15);
  EXPECT_NEAR(hierarchical_alltoall(S, 8, EpLinks(ib, 8, nv), c).total_s, alltoall_time_s(S, 8, ib, c), 1e-15);
  EXPECT_NEAR(hierarchical_alltoall(S, 64, EpLinks(ib), c).total_s, alltoall_time_s(S, 64, ib, c), 1e-15);
  // One member per domain: everything on the network.
  const AlltoallTime one = hierarchical_alltoall(S, 4, EpLinks(ib, 1, nv), c);
  EXPECT_DOUBLE_EQ(one.nvlink_bytes, 0);
  EXPECT_NEAR(one.total_s, alltoall_time_s(S, 4, ib, c), 1e-15);
}

// The links the planner gives the ep group: its members in one domain from the mesh (g), NVLink
// from the cluster, and the per-layer all-to-all built on them.
TEST(MoeComm, ep_links_from_the_mesh_and_the_layer_term) {
  ClusterSpec cl = cluster_preset("dgx-h100");
  cl.nodes = 8;
  const Mesh mesh(Layout{1, 1, 64, 1, "tp-cp-ep-dp-pp", 64}, cl.gpus_per_node);
  const Links links = mesh_links(mesh, cl);
  const EpLinks el = ep_links(links.ep, cl);
  EXPECT_EQ(el.members_in_domain, 8);
  EXPECT_EQ(el.domain_link.kind, LinkKind::NVLink);
  EXPECT_DOUBLE_EQ(el.domain_link.bandwidth_Bps, cl.intra.bandwidth_Bps);
  EXPECT_EQ(el.link.kind, cl.inter.kind);
  ModelSpec m = model_preset("mixtral-8x22b");
  m.seq_len = 4096;
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.global_batch_size = 64;
  const EpComm ec = ep_comm_per_layer(m, e, 64, el, default_constants(), 1, 1, {});
  EXPECT_NEAR(ec.alltoall_s, hierarchical_alltoall(ec.message_bytes, 64, el, default_constants()).total_s, 1e-15);
  EXPECT_GT(ec.alltoall.nvlink_bytes, 0);
  EXPECT_LT(ec.alltoall_s, alltoall_time_s(ec.message_bytes, 64, el.link, default_constants()));
  // A group inside one node: one link, no network part.
  const Mesh small(Layout{1, 1, 8, 1, "tp-cp-ep-dp-pp", 8}, cl.gpus_per_node);
  const EpLinks inside = ep_links(mesh_links(small, cl).ep, cl);
  EXPECT_EQ(inside.members_in_domain, 0);
  EXPECT_EQ(inside.link.kind, LinkKind::NVLink);
}

// An NVL72 rack of 72 GPUs (18 hosts of 4) and ep 32 groups of consecutive ranks: the groups
// tile the racks unevenly, and the group 64..95 has only 8 members in the first rack: those 8
// ranks send 24/32 of their bytes over the network, and the all-to-all waits for them.
TEST(MoeComm, uneven_tiling_takes_the_rank_with_the_fewest_nvlink_peers) {
  ClusterSpec cl = cluster_preset("gb200-nvl72");
  cl.nodes = 64;
  ASSERT_EQ(cl.gpus_per_nvlink_domain(), 72);
  const Mesh mesh(Layout{1, 1, 256, 1, "tp-cp-ep-dp-pp", 32}, cl.gpus_per_node);
  const DimLink ep = mesh_links(mesh, cl).ep;
  EXPECT_EQ(ep.members_per_node, 32);  // groups 0..31 and 32..63 sit in the first rack
  EXPECT_EQ(ep.fewest_members_in_domain, 8);
  const EpLinks el = ep_links(ep, cl);
  EXPECT_EQ(el.members_in_domain, 8);
  const AlltoallTime a = hierarchical_alltoall(32e6, 32, el, default_constants());
  EXPECT_DOUBLE_EQ(a.network_bytes, 24.0 / 32 * 32e6);
  // In racks of 64 GPUs (16 hosts) every group stays in its rack: NVLink only.
  cl.hosts_per_nvlink_domain = 16;
  const DimLink even = mesh_links(mesh, cl).ep;
  EXPECT_EQ(even.fewest_members_in_domain, 0);
  EXPECT_EQ(ep_links(even, cl).link.kind, LinkKind::NVLink);
  // DGX nodes of 8 and ep 64: every rank has 8 members in its node.
  ClusterSpec dgx = cluster_preset("dgx-b200");
  dgx.nodes = 32;
  const DimLink ep64 = mesh_links(mesh, dgx).ep;
  const Mesh mesh64(Layout{1, 1, 256, 1, "tp-cp-ep-dp-pp", 64}, dgx.gpus_per_node);
  EXPECT_EQ(mesh_links(mesh64, dgx).ep.fewest_members_in_domain, 8);
  EXPECT_EQ(ep64.fewest_members_in_domain, 8);
}

}  // namespace
