// Expert parallelism trains a small Mixtral-shaped model (8 experts, top-2, every layer a MoE
// layer; GPT and Llama) to one process's losses (within 1e-5 relative over 20 steps, fp32), with
// the same routing every step (tokens per expert; with dropping at capacity factor 1 the same
// assignments dropped) and the same final parameters, each expert's on the rank that holds it.
// ep is carved from the data-parallel ranks: "ep 2" is dp 2 with the experts split over both,
// "ep 2 x dp 2" is dp 4 whose expert gradients reduce over the 2 ranks holding the same experts.
// Runs on 4 MPI ranks; a layout of w ranks uses ranks 0..w-1, the others wait.
#include <gtest/gtest.h>

#include "equivalence_harness.h"

using namespace trident;
using namespace trident::parallel::testing;

namespace {

Case moe(std::string name, int64_t dp, int64_t ep, int64_t pp, bool drop = false, bool llama = false) {
  Case c{std::move(name), Layout{.tp = 1, .cp = 1, .dp = dp, .pp = pp, .order = "tp-cp-ep-dp-pp", .ep = ep}};
  c.experts = 8, c.drop = drop, c.llama = llama;
  return c;
}

TEST(MoeEquivalence, dp2_ep1_drop_matches_single_process) { expect_same_as_single_process(moe("moe dp2 ep1 drop", 2, 1, 1, true)); }
TEST(MoeEquivalence, ep2_matches_single_process) { expect_same_as_single_process(moe("moe ep2", 2, 2, 1)); }
TEST(MoeEquivalence, ep4_matches_single_process) { expect_same_as_single_process(moe("moe ep4", 4, 4, 1)); }
TEST(MoeEquivalence, ep2_pp2_matches_single_process) { expect_same_as_single_process(moe("moe ep2xpp2", 2, 2, 2)); }
TEST(MoeEquivalence, ep2_dp2_matches_single_process) { expect_same_as_single_process(moe("moe ep2xdp2", 4, 2, 1)); }
TEST(MoeEquivalence, ep4_drop_matches_single_process) { expect_same_as_single_process(moe("moe ep4 drop", 4, 4, 1, true)); }
TEST(MoeEquivalence, llama_ep2_dp2_drop_matches_single_process) {
  expect_same_as_single_process(moe("moe llama ep2xdp2 drop", 4, 2, 1, true, true));
}
TEST(MoeEquivalence, llama_ep2_pp2_matches_single_process) {
  expect_same_as_single_process(moe("moe llama ep2xpp2", 2, 2, 2, false, true));
}

}  // namespace
