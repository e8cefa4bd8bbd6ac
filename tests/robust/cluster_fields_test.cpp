// Silent acceptance in [cluster] tables: a field a config leaves out is never filled from a
// preset it is not. A custom cluster (GPU fields without a preset, as `trident bench` writes
// one) must give every field and is named custom, not "dgx-a100-80g"; a link whose kind a
// config changes from its preset's must bring its own bandwidth and latency.
#include <gtest/gtest.h>

#include "core/options.h"
#include "core/run_spec.h"

using namespace trident;

namespace {

using KV = std::vector<std::pair<std::string, std::string>>;

std::pair<ClusterSpec, std::string> resolve(const KV& kv) {
  OptionValues v(cluster_options());
  for (const auto& [k, x] : kv) v.set(k, x, "[cluster]");
  Problems p;
  ClusterSpec c = resolve_cluster(v, p);
  std::string text;
  for (const auto& x : p.list()) text += x.code + ": " + x.what + " | " + x.fix + "\n";
  return {c, text};
}

// What `trident bench` writes: this machine's cores as GPUs, with every field.
const KV kBench = {{"nodes", "1"}, {"gpus-per-node", "2"}, {"gpu-memory-gib", "11.5"}, {"gpu-fp32-tflops", "0.02"},
                   {"gpu-bf16-tflops", "0.02"}, {"gpu-hbm-gbytes-per-s", "9.5"}, {"intra-link", "pcie"},
                   {"intra-gbytes-per-s", "5.2"}, {"intra-latency-us", "0.4"}, {"inter-link", "ethernet"},
                   {"inter-node-gbytes-per-s", "10.4"}, {"inter-latency-us", "0.4"}};

}  // namespace

TEST(ClusterFields, a_bench_file_is_a_custom_cluster_not_a_dgx) {
  const auto [c, problems] = resolve(kBench);
  EXPECT_EQ(problems, "");
  EXPECT_EQ(c.name, "custom");
  EXPECT_EQ(c.gpu.name, "custom GPU");
  EXPECT_EQ(c.describe().find("dgx"), std::string::npos) << c.describe();
  EXPECT_EQ(c.describe().find("A100"), std::string::npos) << c.describe();
  EXPECT_EQ(c.inter.kind, LinkKind::Ethernet);
}

TEST(ClusterFields, a_custom_cluster_missing_a_field_is_refused_naming_each) {
  KV partial;
  for (const auto& kv : kBench)
    if (kv.first != "inter-node-gbytes-per-s" && kv.first != "inter-latency-us" && kv.first != "gpu-hbm-gbytes-per-s")
      partial.push_back(kv);
  const auto [c, problems] = resolve(partial);
  EXPECT_NE(problems.find("cluster-missing-field: a custom cluster"), std::string::npos) << problems;
  for (const char* key : {"gpu-hbm-gbytes-per-s", "inter-node-gbytes-per-s", "inter-latency-us"})
    EXPECT_NE(problems.find(key), std::string::npos) << key << " not named:\n" << problems;
  // A named GPU needs only the links.
  const auto [g, links] = resolve({{"gpu", "h100-80g"}, {"intra-link", "nvlink"}, {"intra-gbytes-per-s", "450"}});
  EXPECT_NE(links.find("intra-latency-us, inter-link, inter-node-gbytes-per-s, inter-latency-us"), std::string::npos)
      << links;
  EXPECT_EQ(links.find("gpu-memory-gib"), std::string::npos) << links;
}

TEST(ClusterFields, a_link_of_another_kind_than_its_presets_brings_its_own_bandwidth) {
  // dgx-a100-80g's network is InfiniBand: Ethernet links without their bandwidth would keep IB's.
  const auto [c, problems] = resolve({{"cluster", "dgx-a100-80g"}, {"inter-link", "ethernet"}});
  EXPECT_NE(problems.find("cluster-missing-field: --inter-link ethernet replaces the InfiniBand of dgx-a100-80g"),
            std::string::npos)
      << problems;
  EXPECT_NE(problems.find("inter-node-gbytes-per-s and inter-latency-us are not given"), std::string::npos) << problems;
  // The same without a preset: the default cluster is a preset too.
  EXPECT_NE(resolve({{"intra-link", "pcie"}, {"intra-gbytes-per-s", "32"}}).second.find("intra-latency-us is not given"),
            std::string::npos);
  // The preset's own kind keeps the preset's figures; another kind with both figures is fine.
  EXPECT_EQ(resolve({{"cluster", "dgx-a100-80g"}, {"inter-link", "infiniband"}}).second, "");
  EXPECT_EQ(resolve({{"cluster", "dgx-a100-80g"}, {"inter-link", "ethernet"}, {"inter-node-gbytes-per-s", "50"},
                     {"inter-latency-us", "10"}}).second, "");
}
