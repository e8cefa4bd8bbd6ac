// DeepSeek-V3's router in the host routing (runtime/nn/moe_routing.h): sigmoid scores, the top-k
// on score + expert bias, normalised and scaled weights, their backward, and the bias update rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/nn/moe_routing.h"

using namespace trident::nn;

namespace {
MoeOptions deepseek(double scaling) {
  MoeOptions o;
  o.sigmoid = true, o.expert_bias = true, o.topk_scaling = scaling, o.normalise = true, o.drop = false;
  o.aux_coeff = 0.05, o.z_coeff = 0.01;
  return o;
}
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

// Megatron-Core's get_updated_expert_bias by hand: load {5, 1, 3, 3} of 12 over 4 experts (mean 3):
// expert 0 above the mean moves down, 1 below moves up, 2 and 3 at the mean stay.
TEST(MoeRouter, expert_bias_moves_by_the_rate_towards_the_mean_load) {
  std::vector<float> bias = {0.1f, -0.2f, 0.05f, 0.0f};
  update_expert_bias(bias.data(), {5, 1, 3, 3}, 0.01);
  EXPECT_EQ(bias[0], 0.1f - 0.01f);
  EXPECT_EQ(bias[1], -0.2f + 0.01f);
  EXPECT_EQ(bias[2], 0.05f);
  EXPECT_EQ(bias[3], 0.0f);
  // A load one above the mean of 7 / 2 = 3.5 (4 against 3): each moves by the rate, whatever the gap.
  std::vector<float> two = {0.0f, 0.0f};
  update_expert_bias(two.data(), {4, 3}, 1e-3);
  EXPECT_EQ(two[0], -0.001f);
  EXPECT_EQ(two[1], 0.001f);
}

// Logits {2, 1, 0, -1}: sigmoid scores .881, .731, .5, .269. The bias +0.9 on expert 3 puts it
// first (1.169), so the top-2 is {3, 0}; the weights are the scores (not score + bias) over their
// sum, times 2.5.
TEST(MoeRouter, sigmoid_scores_choose_on_score_plus_bias_and_weigh_by_the_score) {
  const std::vector<float> logits = {2, 1, 0, -1}, bias = {0, 0, 0, 0.9f};
  const MoeRouting r = route_tokens(logits.data(), 1, 4, 2, deepseek(2.5), bias.data());
  ASSERT_EQ(r.expert[0], 3);
  ASSERT_EQ(r.expert[1], 0);
  const double s3 = sigmoid(-1), s0 = sigmoid(2);
  EXPECT_NEAR(r.weight[0], 2.5 * s3 / (s3 + s0), 1e-6);
  EXPECT_NEAR(r.weight[1], 2.5 * s0 / (s3 + s0), 1e-6);
  EXPECT_NEAR(r.probs[1], sigmoid(1), 1e-7);
  // Without the bias the two best scores win; one choice (k 1) keeps its score unnormalised.
  const std::vector<float> none(4, 0.0f);
  EXPECT_EQ(route_tokens(logits.data(), 1, 4, 2, deepseek(1.0), none.data()).expert[1], 1);
  EXPECT_NEAR(route_tokens(logits.data(), 1, 4, 1, deepseek(1.0), bias.data()).weight[0], s3, 1e-6);
}

// route_backward for sigmoid scores against central differences of the objective it differentiates:
// sum over assignments of dweight x weight + aux_weight x (load-balancing loss + z-loss).
TEST(MoeRouter, sigmoid_backward_matches_finite_differences) {
  const int64_t N = 5, E = 6, k = 2;
  const MoeOptions o = deepseek(2.5);
  std::vector<float> logits(static_cast<size_t>(N * E)), bias(static_cast<size_t>(E)), dweight(static_cast<size_t>(N * k));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(1.7 * double(i) + 0.3));
  for (size_t e = 0; e < bias.size(); ++e) bias[e] = 0.05f * float(e % 3);
  for (size_t i = 0; i < dweight.size(); ++i) dweight[i] = float(std::cos(0.9 * double(i)));
  const double aux_weight = 3.0;
  auto objective = [&](const std::vector<float>& x) {
    const MoeRouting r = route_tokens(x.data(), N, E, k, o, bias.data());
    double f = aux_weight * (r.aux_loss + r.z_loss);
    for (size_t i = 0; i < dweight.size(); ++i) f += double(dweight[i]) * r.weight[i];
    return f;
  };
  const MoeRouting r = route_tokens(logits.data(), N, E, k, o, bias.data());
  std::vector<float> dlogits(size_t(N * E));
  route_backward(r, dweight.data(), aux_weight, o, dlogits.data());
  const float h = 1e-2f;
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<float> up = logits, down = logits;
    up[i] += h, down[i] -= h;
    ASSERT_EQ(route_tokens(up.data(), N, E, k, o, bias.data()).expert, r.expert) << "the step changed the choice";
    const double numeric = (objective(up) - objective(down)) / (double(up[i]) - double(down[i]));
    EXPECT_NEAR(dlogits[i], numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << i;
  }
}

// Group-limited routing by hand: 8 experts in 4 groups, top-4 in the best 2 groups, each group
// scored by its top 4 / 2 = 2 scores summed. Expert 0 scores highest, but its group {0, 1} sums
// 0.9 + 0.0 = 0.9 below groups {4, 5} (0.5 + 0.5) and {6, 7} (0.46 + 0.46): the token takes 4..7.
TEST(MoeRouter, group_limited_routing_chooses_within_the_best_groups_by_their_top_scores_summed) {
  std::vector<float> sel = {0.9f, 0.0f, 0.3f, 0.3f, 0.5f, 0.5f, 0.46f, 0.46f};
  limit_to_groups(sel, 4, 2, 4);
  const float out = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(sel, (std::vector<float>{out, out, out, out, 0.5f, 0.5f, 0.46f, 0.46f}));
  // Through the routing: logits whose sigmoid orders the experts as above, no bias.
  MoeOptions o = deepseek(1.0);
  o.expert_bias = false, o.groups = 4, o.group_topk = 2;
  std::vector<float> logits = {3.0f, -3.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.8f, 0.8f};
  const MoeRouting r = score_tokens(logits.data(), 1, 8, 4, o, nullptr);
  std::vector<int32_t> chosen(r.expert.begin(), r.expert.end());
  std::sort(chosen.begin(), chosen.end());
  EXPECT_EQ(chosen, (std::vector<int32_t>{4, 5, 6, 7}));
  o.groups = 0;  // without the groups: expert 0 and the best three others
  const MoeRouting plain = score_tokens(logits.data(), 1, 8, 4, o, nullptr);
  EXPECT_EQ(plain.expert[0], 0);
}
