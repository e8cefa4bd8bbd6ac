// Group links: for each kind of group of a Mesh on a cluster, the link its slowest group uses, the
// most members it has in one NVLink domain and how many of its groups leave their domain.
//
// Computed from the sizes alone, never by walking the ranks: a group of stride s and size n is
// {r + j s}, and whether it crosses a boundary of b GPUs, and how many members share a domain,
// depends only on r mod b; the group starts' residues repeat with a period of at most b, so each
// distinct residue is evaluated once and counted with its multiplicity. The search evaluates
// hundreds of layouts, so this keeps its cost independent of the number of GPUs.
#pragma once

#include <cstdint>

#include "core/cluster_spec.h"
#include "core/mesh.h"

namespace trident::plan {

// The slowest group of one kind: its link and the most members it has on one node.
struct DimLink {
  GroupLink link;
  int64_t members_per_node = 1;  // largest number of the group's GPUs sharing a node (NVLink domain)
  int64_t groups_crossing_domains = 0;  // groups that leave their NVLink domain (a node, unless it spans hosts)
  // Of the groups that leave their domain, the fewest members one of them has in one domain: the
  // NVLink peers (+ 1) of the rank that sends most over the network (an all-to-all waits for it).
  // Progression groups only (0 when none crosses, or for a DCP group that is not a progression).
  int64_t fewest_members_in_domain = 0;
  int64_t groups = 0;
};
// The link is the first group (lowest rank; for DCP the lowest group index) that leaves its
// domain, else group 0.
DimLink dim_link(const Mesh& mesh, Dim dim, const ClusterSpec& cluster);

struct Links {
  DimLink tp, pp, dp;
  DimLink cp, ep, etp;  // default (size 1) when the layout has no cp / ep / etp
  DimLink dcp;      // dense gradients: dp x cp (= dp without cp)
  DimLink edp;      // expert gradients: the expert grid's tp x cp x dp / (ep x etp)
  GroupLink embedding;  // first <-> last stage of pipeline 0 (tied embedding sync)
};
Links mesh_links(const Mesh& mesh, const ClusterSpec& cluster);

// TP groups that leave their node (or NVLink domain): lint's error tp-crosses-nodes, which the
// search therefore never ranks (a plan is a layout its own lint passes).
inline bool tp_crosses_domains(int64_t tp, const GroupLink& tp_link) { return tp > 1 && tp_link.crosses_domains(); }

}  // namespace trident::plan
