// Time to train with failures (plan/goodput.h) against hand computations.
#include <gtest/gtest.h>

#include <cmath>

#include "core/cluster_spec.h"
#include "plan/goodput.h"

using namespace trident;
using namespace trident::plan;

namespace {

// 100 GPUs whose job fails every 5000 s: rate per GPU-second 1 / (5000 x 100), per 1000 GPU-days
// 1000 x 86400 / 500000 = 172.8.
ResilienceInputs hand_inputs() {
  ResilienceInputs in;
  in.failures_per_1000_gpu_days = 172.8;
  in.storage_Bps = 100e9;      // 1000 GB / 100 GB/s = 10 s
  in.storage_node_Bps = 5e9;   // 10 GB / 5 GB/s = 2 s
  in.startup_s = 600;
  return in;
}

CheckpointSize hand_checkpoint() {
  CheckpointSize c;
  c.total_bytes = 1000e9;
  c.node_bytes = 10e9;
  return c;
}

RunSpec run_of(const std::string& model, int64_t tp, int64_t pp, int64_t dp, int zero) {
  RunSpec r;
  r.model = model_preset(model);
  r.cluster = cluster_preset("dgx-h100");
  r.layout.tp = tp, r.layout.pp = pp, r.layout.dp = dp;
  r.cluster.nodes = std::max<int64_t>(1, tp * pp * dp / 8);
  r.exec.global_batch_size = 64;
  r.exec.zero = zero;
  return r;
}

}  // namespace

TEST(Goodput, every_term_of_a_hand_computed_case) {
  const Goodput g = goodput(hand_checkpoint(), hand_inputs(), 100, 13, 10.0, 86400.0);
  EXPECT_NEAR(g.mtbf_s, 5000, 1e-6);
  EXPECT_NEAR(g.save_aggregate_s, 10, 1e-9);
  EXPECT_NEAR(g.save_node_s, 2, 1e-9);
  EXPECT_NEAR(g.save_s, 10, 1e-9);  // the slower limit wins
  EXPECT_NEAR(g.load_s, 10, 1e-9);
  EXPECT_NEAR(g.young_interval_s, std::sqrt(2.0 * 10 * 5000), 1e-6);  // 316.2 s
  EXPECT_EQ(g.interval_steps, 32);                                      // 316.2 / 10 rounded
  EXPECT_NEAR(g.interval_s, 320, 1e-9);
  EXPECT_NEAR(g.restart_s, 610, 1e-9);
  EXPECT_NEAR(g.lost_per_failure_s, 610 + (320 + 10) / 2.0, 1e-9);  // 775
  EXPECT_NEAR(g.failure_share, 775.0 / 5000, 1e-12);
  EXPECT_NEAR(g.save_overhead, 10.0 / 320, 1e-12);
  EXPECT_NEAR(g.goodput, (1 - 0.155) / (1 + 0.03125), 1e-12);  // 0.81939
  EXPECT_NEAR(g.wall_s, 86400 * 1.03125 / 0.845, 1e-6);        // 105443.8 s
  EXPECT_NEAR(g.days, 1.22041, 1e-5);
  EXPECT_NEAR(g.expected_failures, g.wall_s / 5000, 1e-9);  // 21.09
  EXPECT_LE(g.failures_low, 21);
  EXPECT_GE(g.failures_high, 22);
  EXPECT_NEAR(g.days_low, (86400 * 1.03125 + g.failures_low * 775.0) / 86400, 1e-12);
  EXPECT_LT(g.days_low, g.days);
  EXPECT_GT(g.days_high, g.days);
}

TEST(Goodput, the_node_limit_wins_when_a_node_is_slower_than_its_share) {
  ResilienceInputs in = hand_inputs();
  in.storage_node_Bps = 0.5e9;  // 10 GB / 0.5 GB/s = 20 s > 10 s
  const Goodput g = goodput(hand_checkpoint(), in, 100, 13, 10.0, 0);
  EXPECT_NEAR(g.save_s, 20, 1e-9);
}

TEST(Goodput, failures_faster_than_recovery_never_finish) {
  ResilienceInputs in = hand_inputs();
  in.startup_s = 6000;  // longer than the MTBF of 5000 s
  const Goodput g = goodput(hand_checkpoint(), in, 100, 13, 10.0, 86400.0);
  EXPECT_FALSE(g.feasible);
  EXPECT_EQ(g.goodput, 0);
  EXPECT_FALSE(std::isfinite(g.days));
}

TEST(Goodput, no_failures_no_loss) {
  ResilienceInputs in = hand_inputs();
  in.failures_per_1000_gpu_days = 0;
  const Goodput g = goodput(hand_checkpoint(), in, 100, 13, 10.0, 86400.0);
  EXPECT_EQ(g.interval_steps, 0);
  EXPECT_NEAR(g.goodput, 1, 1e-12);
  EXPECT_NEAR(g.days, 1, 1e-12);
}

TEST(Goodput, llama3_default_rate_is_419_in_54_days_on_16384_gpus) {
  EXPECT_NEAR(ResilienceInputs{}.failures_per_1000_gpu_days, 419.0 / (54 * 16384) * 1000, 1e-12);  // 0.4736
  // MTBF of the whole 16,384-GPU job: 54 days / 419 = 3.09 h.
  const Goodput g = goodput(hand_checkpoint(), ResilienceInputs{}, 16384, 2048, 1.0, 0);
  EXPECT_NEAR(g.mtbf_s, 54.0 * 86400 / 419, 1e-6);
}

TEST(Goodput, poisson_quantiles_from_the_table) {
  // Poisson(1): P(0) = 0.368 >= 0.05; P(<=2) = 0.920, P(<=3) = 0.981.
  EXPECT_EQ(poisson_quantile(1, 0.05), 0);
  EXPECT_EQ(poisson_quantile(1, 0.95), 3);
  // Poisson(10): P(<=4) = 0.029, P(<=5) = 0.067; P(<=14) = 0.917, P(<=15) = 0.951.
  EXPECT_EQ(poisson_quantile(10, 0.05), 5);
  EXPECT_EQ(poisson_quantile(10, 0.95), 15);
  EXPECT_EQ(poisson_quantile(0, 0.95), 0);
  // Large means: about mean +- 1.645 sqrt(mean).
  EXPECT_NEAR(double(poisson_quantile(10000, 0.95)), 10000 + 1.645 * 100, 2);
}

TEST(Goodput, checkpoint_holds_each_parameter_once_whatever_the_layout) {
  // Llama 3 8B (untied embeddings): every layout writes params x (2 weights + 12 optimizer) bytes,
  // within the memory model's own extras: the vocabulary padded to 128 x tp and the norms on every
  // tp rank (0.1% at tp 8).
  const double params = double(count_parameters(model_preset("llama3-8b")).total);
  for (auto [tp, pp, dp, zero] : {std::tuple{1, 1, 8, 1}, {2, 1, 4, 0}, {2, 2, 2, 1}, {1, 4, 2, 3}, {8, 1, 1, 1}}) {
    const CheckpointSize c = checkpoint_size(run_of("llama3-8b", tp, pp, dp, zero));
    EXPECT_NEAR(c.total_bytes, params * 14, params * 14 * 2e-3) << tp << " " << pp << " " << dp << " zero " << zero;
    EXPECT_EQ(c.bytes_per_param, 14);
    EXPECT_NEAR(c.node_bytes, 8 * c.bytes_per_rank, 1);
  }
  // One stage, tp 2, dp 4: each rank writes a quarter of its tp shard's half.
  const CheckpointSize c = checkpoint_size(run_of("llama3-8b", 2, 1, 4, 1));
  EXPECT_NEAR(c.bytes_per_rank, params / 2 / 4 * 14, params / 8 * 14 * 1e-4);
}

TEST(Goodput, ranking_by_goodput_orders_by_effective_tokens_per_second) {
  // Two candidates: the faster one writes a much larger checkpoint per node (slow storage), so it loses.
  Estimate fast, slow;
  fast.run = run_of("llama3-8b", 8, 1, 1, 0);  // one node writes everything
  slow.run = run_of("llama3-8b", 1, 1, 8, 1);
  slow.run.cluster.gpus_per_node = 1;  // 8 nodes, each writes an eighth
  slow.run.cluster.nodes = 8;
  fast.time.step = slow.time.step = 1;
  fast.tokens_per_s = 1.01e6;
  slow.tokens_per_s = 1.00e6;
  ResilienceInputs in;
  in.storage_node_Bps = 0.1e9;  // 112 GB / 0.1 GB/s = 1124 s for one node; 140 s for eight
  in.failures_per_1000_gpu_days = 1000;
  const auto ranked = rank_by_goodput({fast, slow}, in, 2);
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].estimate.tokens_per_s, 1.00e6);
  EXPECT_GT(ranked[0].goodput.goodput, ranked[1].goodput.goodput);
  EXPECT_NEAR(ranked[0].effective_tokens_per_s, 1.00e6 * ranked[0].goodput.goodput, 1e-6);
  EXPECT_EQ(rank_by_goodput({fast, slow}, in, 1).size(), 1u);
}
