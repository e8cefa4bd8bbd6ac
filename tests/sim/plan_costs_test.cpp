#include <gtest/gtest.h>

#include <cstdio>

#include "core/cluster_spec.h"
#include "core/execution_spec.h"
#include "core/model_spec.h"
#include "plan/mixture_of_experts.h"
#include "sim/plan_costs.h"
#include "sim/simulator.h"
#include "../common/test_run.h"

namespace trident::sim {
namespace {

RunSpec gpt3_4096(ScheduleKind kind = ScheduleKind::OneFOneB, int64_t v = 1, int64_t batch = 1536) {
  RunSpec run = tests::run_on(model_preset("gpt3-175b"), "dgx-a100-80g", 512, 8, 8, 64, "tp-pp-dp");
  run.exec.global_batch_size = batch;
  run.exec.micro_batch_size = 1;
  run.exec.schedule = kind;
  run.exec.virtual_stages = v;
  run.exec.recompute = Recompute::Selective;
  run.exec.sequence_parallel = true;
  return run;
}

SimResult play(const PlannedCosts& pc, const RunSpec& run) {
  auto sc = build_schedule(run.exec.schedule, run.layout.pp, pc.micro_batches, pc.virtual_stages);
  return simulate(sc, pc.costs);
}

// Mixtral 8x22B with ep 8 across two nodes: the all-to-alls are communication on the ep group,
// inside each chunk, and the simulator reports m times the stage's share as exposed ep time.
TEST(PlanCosts, ep_alltoalls_are_played_as_communication_on_their_group) {
  RunSpec run;
  run.model = model_preset("mixtral-8x22b");
  run.model.seq_len = 4096;
  run.cluster = cluster_preset("dgx-h100");
  run.cluster.nodes = 8;
  run.layout = Layout{2, 1, 8, 4, "tp-cp-ep-dp-pp", 8};
  run.exec.global_batch_size = 64;
  run.exec.micro_batch_size = 1;
  run.exec.recompute = Recompute::Full;
  run.exec.sequence_parallel = true;
  run.exec.zero = 1;
  const PlannedCosts pc = costs_from_plan(run);
  const SimResult r = play(pc, run);
  const auto& st = pc.estimate.stages[r.critical_stage];
  const auto& cc = pc.costs.stages[r.critical_stage].chunks[0];
  EXPECT_GT(st.ep_comm_s, 0);
  EXPECT_NEAR(cc.ep_forward_s + cc.ep_backward_s, st.ep_comm_s, 1e-9);
  EXPECT_NEAR(r.exposed_ep_s(), double(pc.micro_batches) * st.ep_comm_s, 1e-6);
  EXPECT_DOUBLE_EQ(r.exposed_cp_s(), 0);
  // Close to the planner's step, as for dense layouts.
  EXPECT_NEAR(r.step_s / pc.estimate.time.step, 1.0, 0.1);
}

// ep 64 over 8 DGX nodes: the all-to-all is hierarchical (NVLink inside the node, the network
// between), and the simulator plays the planner's term.
TEST(PlanCosts, hierarchical_ep_alltoalls_agree_with_the_planner) {
  RunSpec run;
  run.model = model_preset("mixtral-8x22b");
  run.model.seq_len = 4096;
  run.model.experts = 64;
  run.cluster = cluster_preset("dgx-h100");
  run.cluster.nodes = 8;
  run.layout = Layout{1, 1, 64, 1, "tp-cp-ep-dp-pp", 64};
  run.exec.global_batch_size = 256;
  run.exec.micro_batch_size = 1;
  run.exec.recompute = Recompute::Full;
  run.exec.zero = 1;
  const PlannedCosts pc = costs_from_plan(run);
  ASSERT_EQ(pc.estimate.ep_alltoall.alltoall.g, 8);
  EXPECT_GT(pc.estimate.ep_alltoall.alltoall.nvlink_bytes, 0);
  const SimResult r = play(pc, run);
  const auto& st = pc.estimate.stages[0];
  const auto& cc = pc.costs.stages[0].chunks[0];
  EXPECT_NEAR(cc.ep_forward_s + cc.ep_backward_s, st.ep_comm_s + st.ep_wait_s, 1e-9);
  EXPECT_NEAR(r.exposed_ep_s(), pc.estimate.time.ep_comm + pc.estimate.time.ep_wait, 1e-6);
  EXPECT_NEAR(r.step_s / pc.estimate.time.step, 1.0, 0.03);
}

TEST(PlanCosts, chunk_costs_add_up_to_the_planners_stage_times) {
  for (int64_t v : {1, 2, 3}) {
    const RunSpec run = gpt3_4096(v > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB, v);
    const PlannedCosts pc = costs_from_plan(run);
    ASSERT_EQ(pc.costs.stages.size(), 8u);
    for (size_t s = 0; s < 8; ++s) {
      const auto& st = pc.estimate.stages[s];
      double f = 0, b = 0, tp = 0;
      for (const auto& c : pc.costs.stages[s].chunks) {
        f += c.forward_s;
        b += c.backward_s;
        tp += c.tp_forward_s + c.tp_backward_s;
        EXPECT_GT(c.weight_share, 0.2);
        EXPECT_LT(c.weight_share, 0.6);
      }
      EXPECT_NEAR(f + b, st.compute_forward_s + st.compute_backward_s + st.tp_comm_s, 1e-9) << "v=" << v << " s=" << s;
      EXPECT_NEAR(tp, st.tp_comm_s, 1e-9);
    }
  }
}

TEST(PlanCosts, one_stage_keeps_both_embedding_and_logits_in_its_chunk) {
  RunSpec run = gpt3_4096();
  run.model = model_preset("gpt2-small");
  run.cluster.nodes = 1;
  run.layout = {1, 1, 8, 1, "tp-dp-pp"};
  run.exec.global_batch_size = 16;
  const PlannedCosts pc = costs_from_plan(run);
  const auto& st = pc.estimate.stages[0];
  const auto& c = pc.costs.stages[0].chunks[0];
  EXPECT_NEAR(c.forward_s + c.backward_s, st.total_s(), 1e-12);
  const SimResult r = play(pc, run);
  EXPECT_NEAR(r.pipeline_s, pc.estimate.pipeline.total_s, 1e-9);  // no bubble, nothing to disagree on
}

TEST(PlanCosts, pipeline_boundaries_use_the_link_the_mesh_gives) {
  // tp-pp-dp with 8 GPUs per node: each stage is a whole node, so every boundary crosses nodes.
  const PlannedCosts inter = costs_from_plan(gpt3_4096());
  ASSERT_EQ(inter.boundaries.size(), 7u);
  for (const auto& b : inter.boundaries) EXPECT_TRUE(b.link.crosses_nodes());
  // tp 2 x pp 4 on one 8-GPU node: every boundary stays on NVLink and is faster.
  RunSpec small = gpt3_4096();
  small.model = model_preset("gpt2-small");
  small.cluster.nodes = 1;
  small.layout = {2, 1, 1, 4, "tp-pp-dp"};
  small.exec.global_batch_size = 16;
  const PlannedCosts intra = costs_from_plan(small);
  ASSERT_EQ(intra.boundaries.size(), 3u);
  for (const auto& b : intra.boundaries) {
    EXPECT_FALSE(b.link.crosses_nodes());
    EXPECT_GT(b.link.bandwidth_Bps, inter.boundaries[0].link.bandwidth_Bps);
  }
}

TEST(PlanCosts, simulator_agrees_with_planner_for_even_stages_and_one_f_one_b) {
  const RunSpec run = gpt3_4096();
  const PlannedCosts pc = costs_from_plan(run);
  const SimResult r = play(pc, run);
  EXPECT_NEAR(r.step_s, pc.estimate.time.step, 0.03 * pc.estimate.time.step);
}

TEST(PlanCosts, uneven_stages_the_simulator_sees_the_faster_stages_the_planner_paces_by_the_slowest) {
  // 96 layers on 7 stages: 13-14 layers each. The planner paces every stage by the slowest; the
  // simulator plays each stage's own work, so the 13-layer stages leave slack: its step is
  // below the same schedule played with every stage at the slowest stage's costs (which is the
  // planner's step), yet at least the slowest stage's own work.
  RunSpec run = gpt3_4096();
  run.layout.pp = 7;
  run.layout.dp = 1;
  run.cluster.nodes = 7;
  run.exec.global_batch_size = 21;
  const PlannedCosts pc = costs_from_plan(run);
  const SimResult r = play(pc, run);
  size_t worst = 0;
  for (size_t i = 0; i < r.stages.size(); ++i)
    if (r.stages[i].compute_s > r.stages[worst].compute_s) worst = i;
  PlannedCosts paced = pc;
  for (auto& st : paced.costs.stages) st = pc.costs.stages[worst];
  const SimResult rp = play(paced, run);
  std::printf("[ uneven  ] simulated %.4f s, every stage at the slowest's costs %.4f s, planner %.4f s\n", r.step_s,
              rp.step_s, pc.estimate.time.step);
  EXPECT_GT(r.step_s, r.stages[worst].compute_s);
  EXPECT_GT(r.bubble_share, 0.0);
  EXPECT_LT(r.step_s, rp.step_s) << "the faster stages' slack is not seen";
  EXPECT_LT(r.step_s, pc.estimate.time.step);
  EXPECT_NEAR(rp.step_s, pc.estimate.time.step, 0.03 * pc.estimate.time.step);
}

TEST(PlanCosts, distributed_optimizer_gathers_after_the_step) {
  RunSpec run = gpt3_4096();
  run.exec.zero = 1;
  const PlannedCosts pc = costs_from_plan(run);
  for (const auto& st : pc.costs.stages) {
    EXPECT_GT(st.dp_after_optimizer_s, 0.0);
    EXPECT_GT(st.dp_reduce_s, 0.0);
  }
  const RunSpec plain = gpt3_4096();
  const PlannedCosts pc0 = costs_from_plan(plain);
  EXPECT_EQ(pc0.costs.stages[0].dp_after_optimizer_s, 0.0);
  EXPECT_LT(pc.costs.stages[0].optimizer_s, pc0.costs.stages[0].optimizer_s / 32);  // sharded over dp 64
}

TEST(PlanCosts, zb_h1_beats_one_f_one_b_on_gpt3_with_planner_costs) {
  const RunSpec one = gpt3_4096(ScheduleKind::OneFOneB);
  const RunSpec zb = gpt3_4096(ScheduleKind::ZeroBubbleH1);
  const SimResult r1 = play(costs_from_plan(one), one);
  const SimResult rz = play(costs_from_plan(zb), zb);
  EXPECT_LT(rz.bubble_share, r1.bubble_share);
  EXPECT_LT(rz.pipeline_s, r1.pipeline_s);
}

// Several recipes with overlapped TP, PP and DP and ZeRO-3 / FSDP (with and without pipeline
// stages): the simulator plays the same overlap and per-layer ZeRO-3 the planner charges, so
// both give the same step time. The simulator plays the schedule action by action, the planner
// uses the closed-form bubble: they may differ by a little, never by a recipe's mechanism.
TEST(PlanCosts, plan_and_simulate_agree_on_step_time_across_recipes) {
  struct Recipe {
    const char* name;
    RunSpec run;
  };
  std::vector<Recipe> recipes;
  recipes.push_back({"megatron-2021 gpt3-175b 1f1b", gpt3_4096()});
  {
    RunSpec r = gpt3_4096(ScheduleKind::Interleaved, 3);
    apply_stack(*find_stack("megatron-core-te"), r.exec);  // flash, overlap tp,dp,pp, ZeRO 1, bf16 grads
    recipes.push_back({"megatron-core-te gpt3-175b interleaved", r});
  }
  {
    RunSpec r;  // NeMo's GPT-3 175B recipe on 128 H100
    r.model = model_preset("gpt3-175b");
    r.cluster = cluster_preset("dgx-h100");
    r.cluster.nodes = 16;
    r.layout = {};
    r.layout.tp = 4, r.layout.pp = 8, r.layout.dp = 4;
    r.exec.global_batch_size = 256;
    r.exec.schedule = ScheduleKind::Interleaved;
    r.exec.virtual_stages = 12;
    r.exec.sequence_parallel = true;
    apply_stack(*find_stack("megatron-core-te"), r.exec);
    recipes.push_back({"nemo gpt3-175b h100", r});
  }
  {
    RunSpec r;  // BLOOM 176B as Megatron-DeepSpeed ran it: tp 4 x pp 12 x dp 8 on 384 A100, whole-tensor sends
    r.model = {"bloom-176b", ModelFamily::GPT, 70, 14336, 112, 112, 4 * 14336, 2048, 250880};
    r.cluster = cluster_preset("dgx-a100-80g");
    r.cluster.nodes = 48;
    r.layout = {};
    r.layout.tp = 4, r.layout.pp = 12, r.layout.dp = 8;
    r.exec.global_batch_size = 2048;
    r.exec.micro_batch_size = 2;
    r.exec.recompute = Recompute::Full;
    apply_stack(*find_stack("deepspeed"), r.exec);  // 1F1B, TP not overlapped, ZeRO 1, whole-tensor sends
    r.exec.attention = AttentionKind::Unfused;
    recipes.push_back({"deepspeed bloom-176b 1f1b", r});
  }
  {
    RunSpec r;  // FSDP without model parallelism: 64 replicas of Llama 2 7B
    r.model = model_preset("llama2-7b");
    r.cluster = cluster_preset("dgx-h100");
    r.cluster.nodes = 8;
    r.layout = {};
    r.layout.dp = 64;
    r.exec.global_batch_size = 128;
    r.exec.micro_batch_size = 2;
    apply_stack(*find_stack("torchtitan"), r.exec);  // flash, overlap dp, ZeRO 3
    recipes.push_back({"torchtitan fsdp llama2-7b", r});
  }
  {
    RunSpec r;  // FSDP with pipeline stages (torchtitan's 3D): Llama 3 70B, tp 8 x pp 4 x dp 4
    r.model = model_preset("llama3-70b");
    r.cluster = cluster_preset("dgx-h100");
    r.cluster.nodes = 16;
    r.layout = {};
    r.layout.tp = 8, r.layout.pp = 4, r.layout.dp = 4;
    r.exec.global_batch_size = 64;
    r.exec.sequence_parallel = true;
    apply_stack(*find_stack("torchtitan"), r.exec);
    recipes.push_back({"torchtitan fsdp+pp llama3-70b", r});
  }
  for (const auto& [name, run] : recipes) {
    const PlannedCosts pc = costs_from_plan(run);
    const SimResult r = play(pc, run);
    const double plan_s = pc.estimate.time.step;
    EXPECT_NEAR(r.step_s / plan_s, 1.0, 0.03) << name << ": simulated " << r.step_s << " s, planned " << plan_s << " s";
  }
}

// ZeRO-3 on a slow network: the per-layer traffic cannot hide behind layers that short, so the
// step is network-bound, in the simulator as in the planner (and mostly exposed DP time).
TEST(PlanCosts, zero3_on_a_slow_network_is_network_bound_in_the_simulator) {
  RunSpec run;
  run.model = model_preset("gpt3-1.3b");
  run.cluster = cluster_preset("gigabit-ethernet");
  run.cluster.nodes = 4;
  run.layout = {};
  run.layout.dp = run.cluster.nodes * run.cluster.gpus_per_node;
  run.exec.global_batch_size = run.layout.dp;
  run.exec.zero = 3;
  const PlannedCosts pc = costs_from_plan(run);
  const SimResult r = play(pc, run);
  const auto& st = pc.estimate.stages[0];
  EXPECT_GT(r.exposed_dp_s(), 0.5 * r.step_s);
  EXPECT_GT(r.stages[0].exposed_layer_dp_s, 3 * (st.compute_forward_s + st.compute_backward_s));
  EXPECT_EQ(pc.costs.stages[0].dp_reduce_s, 0.0);  // nothing left for the end of the step
  EXPECT_NEAR(r.step_s / pc.estimate.time.step, 1.0, 0.03);
}

// --overlap tp and pp hide traffic in the simulator too: a shorter step than the same recipe
// with both exposed, longer than with the traffic free.
TEST(PlanCosts, tp_and_pp_overlap_shorten_the_simulated_step) {
  RunSpec exposed = gpt3_4096();
  RunSpec hidden = exposed;
  hidden.exec.overlap.tp = hidden.exec.overlap.pp = true;
  const SimResult re = play(costs_from_plan(exposed), exposed);
  const PlannedCosts ph = costs_from_plan(hidden);
  const SimResult rh = play(ph, hidden);
  EXPECT_FALSE(ph.costs.blocking_sends);
  EXPECT_LT(rh.step_s, re.step_s);
  EXPECT_LT(rh.exposed_tp_s(), 0.5 * re.exposed_tp_s());
  EXPECT_GT(rh.exposed_tp_s(), 0.0);  // the hidden part still slows the GEMMs
}

// A stack that does not overlap DP (--overlap without dp, or --dp-after-pipeline-flush with pp >
// 1) reduces every bucket after the stage's last backward: all of the reduction is exposed.
TEST(PlanCosts, a_reduction_without_overlap_starts_after_the_pipeline) {
  RunSpec behind = gpt3_4096();
  const SimResult rb = play(costs_from_plan(behind), behind);
  for (int way = 0; way < 2; ++way) {
    RunSpec after = behind;
    if (way == 0) after.exec.overlap.dp = false;
    else after.exec.recipe.dp_after_pipeline_flush = true;
    const PlannedCosts pa = costs_from_plan(after);
    const SimResult ra = play(pa, after);
    for (size_t s = 0; s < pa.costs.stages.size(); ++s) {
      const StageCost& c = pa.costs.stages[s];
      EXPECT_FALSE(c.dp_overlapped) << way;
      ASSERT_GT(c.dp_reduce_s, 0) << way;
      // Past the pipeline: the whole reduction, then the embedding sync on the first and last stage.
      EXPECT_GE(ra.stages[s].exposed_dp_s, c.dp_reduce_s - 1e-12) << way << " stage " << s;
    }
    EXPECT_GT(ra.step_s, rb.step_s) << way;
    EXPECT_GT(ra.exposed_dp_s(), rb.exposed_dp_s()) << way;  // behind, the last backward hid some of it
    EXPECT_NEAR(ra.step_s / pa.estimate.time.step, 1.0, 0.03) << way;
  }
}

}  // namespace
}  // namespace trident::sim
