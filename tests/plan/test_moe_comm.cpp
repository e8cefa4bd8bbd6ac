// The MoE step's communication terms on hand-computed cases: the hierarchical all-to-all (NVLink
// inside an NVLink domain, the network between).
#include <gtest/gtest.h>

#include <algorithm>

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

// Flex (DeepEP / HybridEP): one network copy of a token per remote NVLink domain its experts
// are in. DeepSeek-V3's shape on 8 DGX nodes (ep 64, g 8, D 8 domains): experts alone miss a
// domain with C(224, 8) / C(256, 8); node-limited routing (8 groups, 4 per token, one group per
// node) misses it with C(7, 4) / C(8, 4) = 1/2, the larger: 7 x 1/2 = 3.5 remote domains.
TEST(MoeComm, flex_dispatch_sends_one_copy_per_remote_domain) {
  ModelSpec m = model_preset("mixtral-8x22b");
  m.seq_len = 4096;
  m.experts = 256;
  m.experts_per_token = 8;
  double experts_miss = 1;
  for (int i = 0; i < 8; ++i) experts_miss *= (224.0 - i) / (256.0 - i);
  EXPECT_NEAR(flex_remote_domains(m, 64, 8), 7 * (1 - experts_miss), 1e-12);
  m.router_groups = 8;
  m.router_group_topk = 4;
  EXPECT_NEAR(flex_remote_domains(m, 64, 8), 3.5, 1e-12);
  EXPECT_DOUBLE_EQ(flex_remote_domains(m, 8, 8), 0);  // inside one domain
  const CostConstants& c = default_constants();
  const GroupLink ib = link(LinkKind::InfiniBand, 50e9, 5e-6, 8), nv = link(LinkKind::NVLink, 900e9, 3e-6, 1);
  const EpLinks el(ib, 8, nv);
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.global_batch_size = 64;
  const EpComm a2a = ep_comm_per_layer(m, e, 64, el, c, 1, 1, {});
  e.recipe.moe_dispatcher = MoeDispatcher::DeepEP;
  const EpComm flex = ep_comm_per_layer(m, e, 64, el, c, 1, 1, {});
  const double token_bytes = 4096.0 * double(m.hidden) * 2;
  EXPECT_DOUBLE_EQ(flex.remote_domains, 3.5);
  EXPECT_NEAR(flex.alltoall.network_bytes, 3.5 * token_bytes, 1e-3);
  EXPECT_NEAR(flex.alltoall.nvlink_bytes, 8 * token_bytes * 63 / 64, 1e-3);
  EXPECT_NEAR(flex.alltoall.latency_s, 7 * alltoall_latency_s(nv, c) + 7 * alltoall_latency_s(ib, c), 1e-15);
  EXPECT_NEAR(flex.alltoall_s, flex.alltoall.latency_s + std::max(flex.alltoall.nvlink_s, flex.alltoall.network_s), 1e-15);
  EXPECT_DOUBLE_EQ(a2a.alltoall.network_bytes, 8 * token_bytes * 56 / 64);  // all-to-all: every copy
  EXPECT_LT(flex.alltoall_s, a2a.alltoall_s);
  EXPECT_DOUBLE_EQ(flex.count_exchange_s, 0);  // flex derives the counts inside its dispatch
  EXPECT_GT(a2a.count_exchange_s, 0);
  // allgather: the tokens (not their k copies) all-gathered over the ep ring, reduce-scattered back.
  e.recipe.moe_dispatcher = MoeDispatcher::AllGather;
  const EpComm ag = ep_comm_per_layer(m, e, 64, el, c, 1, 1, {});
  EXPECT_NEAR(ag.alltoall_s, ring_allgather_time_s(64 * token_bytes, 64, ib, c), 1e-12);
}

// FP8 dispatch: the forward dispatch at 1 + 1/32 bytes an element, combine and backward 16-bit.
TEST(MoeComm, fp8_dispatch_halves_the_forward_dispatch_only) {
  ModelSpec m = model_preset("mixtral-8x22b");
  m.seq_len = 4096;
  const CostConstants& c = default_constants();
  const GroupLink ib = link(LinkKind::InfiniBand, 50e9, 5e-6, 8), nv = link(LinkKind::NVLink, 900e9, 3e-6, 1);
  const EpLinks el(ib, 4, nv);
  ExecutionSpec e;
  e.micro_batch_size = 1;
  e.global_batch_size = 64;
  e.recompute = Recompute::Full;
  const EpComm bf16 = ep_comm_per_layer(m, e, 16, el, c, 1, 1, {});
  e.recipe.moe_fp8_dispatch = true;
  const EpComm fp8 = ep_comm_per_layer(m, e, 16, el, c, 1, 1, {});
  EXPECT_DOUBLE_EQ(fp8.dispatch_bytes, bf16.message_bytes / 2 * (1 + 1.0 / 32));
  EXPECT_NEAR(fp8.dispatch_s, hierarchical_alltoall(fp8.dispatch_bytes, 16, el, c).total_s, 1e-15);
  EXPECT_DOUBLE_EQ(fp8.alltoall_s, bf16.alltoall_s);  // the combine stays 16-bit
  const double share = moe_layer_share(m);
  EXPECT_NEAR(fp8.forward_s, share * (fp8.dispatch_s + fp8.alltoall_s + fp8.count_exchange_s), 1e-12);
  // Backward: the gradients' two all-to-alls 16-bit, the recomputed forward's dispatch FP8 again.
  EXPECT_NEAR(fp8.backward_s, share * (3 * fp8.alltoall_s + fp8.dispatch_s + fp8.count_exchange_s), 1e-12);
  EXPECT_NEAR(bf16.backward_s, share * (4 * bf16.alltoall_s + bf16.count_exchange_s), 1e-12);
}

// --moe-ep-overlap: the all-to-alls behind the adjacent micro-batch's compute of the layer, under
// Megatron-Core's conditions; otherwise all exposed.
TEST(MoeComm, ep_overlap_hides_behind_the_other_micro_batch_where_megatron_runs_it) {
  const CostConstants& c = default_constants();
  EpComm ec;
  ec.forward_s = 2e-3;
  ec.backward_s = 3e-3;
  ExecutionSpec e;
  EXPECT_DOUBLE_EQ(ep_overlap_per_layer(ec, 4e-3, 8e-3, e, 1, c).exposed_s, 5e-3);  // off: all exposed
  e.recipe.moe_ep_overlap = true;
  const Overlapped o = ep_overlap_per_layer(ec, 4e-3, 8e-3, e, 1, c);
  EXPECT_DOUBLE_EQ(o.exposed_s, 0);
  EXPECT_NEAR(o.cost_s, c.overlap_slowdown * 5e-3, 1e-15);
  EXPECT_NEAR(ep_overlap_per_layer(ec, 1e-3, 2e-3, e, 1, c).exposed_s, 2e-3, 1e-15);  // 5 ms behind 3 ms
  EXPECT_EQ(ep_overlap_blocker(e, 1), "");
  EXPECT_NE(ep_overlap_blocker(e, 4), "");  // pp 4 in 1F1B
  EXPECT_DOUBLE_EQ(ep_overlap_per_layer(ec, 4e-3, 8e-3, e, 4, c).exposed_s, 5e-3);
  e.schedule = ScheduleKind::Interleaved;
  EXPECT_EQ(ep_overlap_blocker(e, 4), "");
  e.recompute = Recompute::Full;
  EXPECT_NE(ep_overlap_blocker(e, 4), "");
  e.recompute = Recompute::None;
  e.recipe.moe_dispatcher = MoeDispatcher::AllGather;
  EXPECT_NE(ep_overlap_blocker(e, 1), "");
}

}  // namespace
