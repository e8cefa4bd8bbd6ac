#include <gtest/gtest.h>

#include "core/cluster_spec.h"
#include "core/units.h"

using namespace trident;

TEST(ClusterSpec, every_preset_is_valid) {
  for (const auto& name : cluster_preset_names()) {
    Problems p;
    validate_cluster(cluster_preset(name), p);
    EXPECT_TRUE(p.empty()) << name;
  }
}

TEST(ClusterSpec, dgx_a100_gives_each_gpu_one_hdr_nic) {
  ClusterSpec c = cluster_preset("dgx-a100-80g");
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.intra.kind, LinkKind::NVLink);
  EXPECT_DOUBLE_EQ(c.intra.bandwidth_Bps, 300e9);
  EXPECT_EQ(c.inter.kind, LinkKind::InfiniBand);
  EXPECT_DOUBLE_EQ(c.inter_bandwidth_per_gpu_Bps(), 25e9);  // 200 Gb/s
  EXPECT_DOUBLE_EQ(c.gpu.bf16_flops, 312e12);
}

TEST(ClusterSpec, pcie_and_ethernet_presets_have_no_nvlink) {
  EXPECT_EQ(cluster_preset("pcie-a100-40g").intra.kind, LinkKind::PCIe);
  ClusterSpec slow = cluster_preset("gigabit-ethernet");
  EXPECT_EQ(slow.intra.kind, LinkKind::PCIe);
  EXPECT_EQ(slow.inter.kind, LinkKind::Ethernet);
  EXPECT_DOUBLE_EQ(slow.inter.bandwidth_Bps, 0.125e9);  // 1 Gb/s
}

TEST(ClusterSpec, unknown_preset_is_an_input_error) { EXPECT_THROW(cluster_preset("dgx-z"), InputError); }

TEST(ClusterSpec, nvl72_rack_is_one_nvlink_domain_of_18_hosts) {
  ClusterSpec c = cluster_preset("gb200-nvl72");
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.hosts_per_nvlink_domain, 18);
  EXPECT_EQ(c.gpus_per_nvlink_domain(), 72);
  EXPECT_DOUBLE_EQ(c.intra.bandwidth_Bps, 900e9);
  EXPECT_DOUBLE_EQ(c.inter_bandwidth_per_gpu_Bps(), 50e9);  // one 400 Gb/s NIC per GPU
  EXPECT_DOUBLE_EQ(c.gpu.bf16_flops, 2.5e15);
  ClusterSpec b = cluster_preset("dgx-b200");
  EXPECT_EQ(b.hosts_per_nvlink_domain, 1);
  EXPECT_DOUBLE_EQ(b.gpu.memory_bytes, 180e9);
  EXPECT_DOUBLE_EQ(b.gpu.bf16_flops, 2.25e15);
  // The presets from before keep one host per domain.
  for (const auto& name : {"dgx-a100-80g", "dgx-h100", "hgx-h200", "pcie-a100-40g"})
    EXPECT_EQ(cluster_preset(name).hosts_per_nvlink_domain, 1) << name;
}
