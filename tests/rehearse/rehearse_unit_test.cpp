// `trident rehearse`'s pure parts: the rehearsal derived from a plan, the prediction's cluster
// file, and the verdict of a report (no MPI, no namespaces).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/mesh.h"
#include "core/model_spec.h"
#include "rehearse/rehearsal_link.h"
#include "rehearse/rehearsal_prediction.h"
#include "rehearse/rehearsal_shape.h"
#include "rehearse/rehearsal_verdict.h"
#include "rehearse_test_plan.h"
#include "report/rehearsal_report.h"

namespace trident::rehearse {
namespace {

TEST(RehearsalShape, CrossingOfHostsFollowsTheOrderAndTheHostSize) {
  Layout L;
  L.tp = 2, L.dp = 2, L.pp = 2, L.order = "tp-dp-pp";
  EXPECT_FALSE(crosses_hosts(L, Dim::TP, 4));
  EXPECT_FALSE(crosses_hosts(L, Dim::DP, 4));  // ranks 0 and 2, one host of 4
  EXPECT_TRUE(crosses_hosts(L, Dim::PP, 4));   // ranks 0 and 4
  EXPECT_TRUE(crosses_hosts(L, Dim::DP, 2));
  L.order = "pp-dp-tp";
  EXPECT_TRUE(crosses_hosts(L, Dim::TP, 4));
  EXPECT_FALSE(crosses_hosts(L, Dim::PP, 4));
}

TEST(RehearsalShape, TpAcrossOrderPutsTpOverHostsAndKeepsTheRest) {
  Layout L;
  L.tp = 2, L.dp = 1, L.pp = 2, L.order = "tp-dp-pp";
  const auto order = tp_across_order(L, 2);
  ASSERT_TRUE(order.has_value());
  Layout across = L;
  across.order = *order;
  EXPECT_TRUE(crosses_hosts(across, Dim::TP, 2));
  EXPECT_FALSE(crosses_hosts(across, Dim::PP, 2));  // pp 2 x tp 2 on hosts of 2: one of them stays inside
  L.tp = 1;
  EXPECT_FALSE(tp_across_order(L, 2).has_value());
}

// The plan's order names ep (at 1): the permutation that sorts first with TP across,
// cp-dp-pp-ep-tp, is one train refuses (ep not next to dp); the order chosen is one it takes.
TEST(RehearsalShape, TpAcrossOrderIsOneTrainAccepts) {
  Layout L;
  L.tp = 2, L.dp = 2, L.pp = 2, L.order = "tp-cp-ep-dp-pp";
  const auto order = tp_across_order(L, 4);
  ASSERT_TRUE(order.has_value());
  std::array<Dim, kNumDims> dims{};
  Problems p;
  EXPECT_TRUE(parse_order(*order, dims, p)) << *order << ": " << (p.empty() ? "" : p.list()[0].what);
  Layout across = L;
  across.order = *order;
  EXPECT_TRUE(crosses_hosts(across, Dim::TP, 4));
}

// The default rank count for the Llama 3 70B plan (tp 4, cp 2, dp 32 and pp 2 across nodes):
// exercising all four takes 16 ranks, so 8 is the most; on one host no crossing can be
// exercised; on 4 hosts of 2 both the plan's crossings are. The shape names what it leaves out.
TEST(RehearsalShape, DefaultRanksExerciseTheMostOfThePlanAndSayWhatNot) {
  const RunSpec plan = llama70b_plan();
  const RankChoice one = default_ranks(plan, 1, 8);
  EXPECT_EQ(one.ranks, 8);
  EXPECT_NE(one.why.find("take 16 ranks"), std::string::npos) << one.why;
  EXPECT_NE(one.why.find("--hosts 2"), std::string::npos) << one.why;
  Problems p;
  const RehearsalShape s1 = derive_rehearsal(plan, one.ranks, 1, 0.0156, 256, p);
  ASSERT_TRUE(p.empty());
  int at_one = 0;
  for (Dim d : {Dim::TP, Dim::CP, Dim::DP, Dim::PP}) at_one += s1.run.layout.size(d) == 1;
  EXPECT_EQ(at_one, 1);  // three of the four dimensions at 2
  ASSERT_FALSE(s1.not_exercised.empty());
  std::string all;
  for (const auto& x : s1.not_exercised) all += x.text + "\n";
  EXPECT_NE(all.find("across hosts"), std::string::npos) << all;  // one host: a crossing the plan has is left out
  EXPECT_NE(all.find(" 1 here"), std::string::npos) << all;

  const RankChoice four = default_ranks(plan, 4, 8);
  EXPECT_EQ(four.ranks, 8);
  const RehearsalShape s4 = derive_rehearsal(plan, four.ranks, 4, 0.0156, 256, p);
  ASSERT_TRUE(p.empty());
  ASSERT_EQ(s4.not_exercised.size(), 1u);  // only the dimension 8 ranks cannot add: no crossing differs
  EXPECT_NE(s4.not_exercised[0].text.find(" 1 here"), std::string::npos) << s4.not_exercised[0].text;
  EXPECT_FALSE(s4.not_exercised[0].crossing);
  EXPECT_TRUE(crosses_hosts(s4.run.layout, Dim::DP, 2));
  EXPECT_TRUE(crosses_hosts(s4.run.layout, Dim::PP, 2));

  // A plan 2 ranks exercise whole (tp 2 in a node): 2 is the default, and nothing is left out.
  RunSpec small = gpt3_plan();
  small.layout.tp = 2, small.layout.pp = 1, small.layout.dp = 1;
  small.cluster.nodes = 1, small.cluster.gpus_per_node = 2;
  const RankChoice two = default_ranks(small, 1, 8);
  EXPECT_EQ(two.ranks, 2) << two.why;
  EXPECT_TRUE(derive_rehearsal(small, 2, 1, 0.01, 256, p).not_exercised.empty());
}

TEST(RehearsalShape, Gpt3PlanOnTwoHostsKeepsTpInsideAndPpAcross) {
  Problems p;
  const RehearsalShape s = derive_rehearsal(gpt3_plan(), 8, 2, 128.0 / 12288, 256, p);
  ASSERT_TRUE(p.empty());
  const Layout& L = s.run.layout;
  EXPECT_EQ(L.world_size(), 8);
  EXPECT_LE(L.tp, 4);  // a host holds 4 ranks
  EXPECT_FALSE(crosses_hosts(L, Dim::TP, 4));
  EXPECT_TRUE(crosses_hosts(L, Dim::PP, 4));
  EXPECT_GT(L.tp, 1);
  EXPECT_GT(L.pp, 1);
  const ModelSpec& m = s.run.model;
  EXPECT_EQ(m.hidden % m.heads, 0);
  EXPECT_EQ(m.heads % L.tp, 0);
  EXPECT_EQ(m.head_dim() % 2, 0);
  EXPECT_EQ(m.layers % (L.pp * s.run.exec.virtual_stages), 0);
  EXPECT_EQ(m.ffn_hidden % L.tp, 0);
  EXPECT_GE(m.vocab, 256);
  EXPECT_EQ(m.hidden, 128);
  // CPU substitutions are made and named, not refused.
  EXPECT_EQ(s.run.exec.precision, Precision::FP32);
  EXPECT_EQ(s.run.exec.attention, AttentionKind::Unfused);
  EXPECT_EQ(s.run.exec.grad_bits, 32);
  EXPECT_EQ(s.run.exec.overlap, Overlap{});
  EXPECT_GE(s.substitutions.size(), 4u);
  EXPECT_TRUE(s.refusals.empty());
  // The batch is whole: global = micro-batches x micro-batch x dp.
  EXPECT_EQ(s.run.exec.global_batch_size % (s.run.exec.micro_batch_size * L.dp), 0);
  const std::string table = shape_table(s);
  for (const char* row : {"layers", "hidden", "heads", "kv-heads", "vocab", "micro-batches per pipeline", "bubble",
                          "(crosses hosts)", "(in a host)", "precision bf16 -> fp32"})
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
}

// The runtime sends each TP rank's activation as it holds it: the plan's pipeline messages are
// rehearsed as the runtime sends them, and the change is named.
TEST(RehearsalShape, PipelineSendsAreRehearsedAsTheRuntimeSendsThem) {
  auto has = [](const RehearsalShape& s, const char* what) {
    return std::any_of(s.substitutions.begin(), s.substitutions.end(),
                       [&](const std::string& x) { return x.find(what) != std::string::npos; });
  };
  RunSpec plan = gpt3_plan();
  plan.exec.sequence_parallel = false;  // Megatron-LM 2021's 1/tp shares, gathered by the receiver
  plan.exec.recipe.pipeline_sends_whole_tensor = false;
  Problems p;
  RehearsalShape s = derive_rehearsal(plan, 8, 2, 128.0 / 12288, 256, p);
  ASSERT_TRUE(p.empty());
  ASSERT_GT(s.run.layout.tp, 1);
  ASSERT_GT(s.run.layout.pp, 1);
  EXPECT_TRUE(s.run.exec.recipe.pipeline_sends_whole_tensor);
  EXPECT_TRUE(has(s, "the whole tensor from every TP rank"));
  // Under sequence parallel both settings send each TP rank's s/tp rows: nothing to change.
  plan.exec.sequence_parallel = true;
  for (bool whole : {true, false}) {
    plan.exec.recipe.pipeline_sends_whole_tensor = whole;
    s = derive_rehearsal(plan, 8, 2, 128.0 / 12288, 256, p);
    EXPECT_EQ(s.run.exec.recipe.pipeline_sends_whole_tensor, whole);
    EXPECT_FALSE(has(s, "the activation each rank holds"));
  }
  plan.exec.sequence_parallel = false;  // Megatron-Core's whole tensor: already what the runtime does
  plan.exec.recipe.pipeline_sends_whole_tensor = true;
  s = derive_rehearsal(plan, 8, 2, 128.0 / 12288, 256, p);
  EXPECT_FALSE(has(s, "the activation each rank holds"));
}

// `trident train`'s own prediction (the rehearsal report) takes the sends the runtime makes: the
// whole tensor from every TP rank without sequence parallel, whatever the recipe asked.
TEST(RehearsalPrediction, PipelineSendsAreThoseTheRuntimeMakes) {
  const std::string cluster = ::testing::TempDir() + "prediction_cluster.toml";
  std::ofstream(cluster) << "[cluster]\nnodes = 1\ngpus-per-node = 4\ngpu-memory-gib = 4\ngpu-fp32-tflops = 0.05\n"
                            "gpu-bf16-tflops = 0.05\ngpu-hbm-gbytes-per-s = 20\nintra-link = \"pcie\"\n"
                            "intra-gbytes-per-s = 5\nintra-latency-us = 1\ninter-link = \"ethernet\"\n"
                            "inter-node-gbytes-per-s = 10\ninter-latency-us = 10\n";
  RunSpec run = gpt3_plan();
  run.layout = Layout{.tp = 2, .pp = 2};
  run.exec.sequence_parallel = false;
  run.exec.recipe.pipeline_sends_whole_tensor = false;  // what a run naming no stack predicts
  std::string note;
  RunSpec r = prediction_run(run, cluster, 4, "", &note);
  EXPECT_TRUE(r.exec.recipe.pipeline_sends_whole_tensor);
  EXPECT_NE(note.find("whole tensor from every TP rank"), std::string::npos) << note;
  run.exec.sequence_parallel = true;  // each TP rank's s/tp rows either way: nothing to change
  r = prediction_run(run, cluster, 4, "", &note);
  EXPECT_FALSE(r.exec.recipe.pipeline_sends_whole_tensor);
  EXPECT_EQ(note.find("whole tensor"), std::string::npos) << note;
  std::remove(cluster.c_str());
}

TEST(RehearsalShape, GqaKeepsQueryHeadsPerKvHeadAndTpDivides) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("llama3-70b");
  r.exec.sequence_parallel = false;
  Problems p;
  const RehearsalShape s = derive_rehearsal(r, 4, 1, 1.0 / 64, 256, p);
  ASSERT_TRUE(p.empty());
  const ModelSpec& m = s.run.model;
  EXPECT_EQ(m.heads / m.kv_heads, r.model.heads / r.model.kv_heads);
  EXPECT_EQ(m.kv_heads % s.run.layout.tp, 0);
  EXPECT_EQ(m.head_dim() % 2, 0);
}

TEST(RehearsalShape, MixtureOfExpertsScalesTheExpertsWidthAndKeepsTheirCount) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("mixtral-8x22b");
  r.exec.sequence_parallel = false;
  Problems p;
  const RehearsalShape s = derive_rehearsal(r, 2, 1, 1.0 / 48, 256, p);
  ASSERT_TRUE(p.empty());
  EXPECT_EQ(s.run.model.experts, r.model.experts);
  EXPECT_EQ(s.run.model.experts_per_token, r.model.experts_per_token);
  EXPECT_LT(s.run.model.expert_ffn_hidden, r.model.expert_ffn_hidden / 20);
  EXPECT_LT(count_parameters(s.run.model).total, 50'000'000);
}

// Dense leading layers and --moe-layer-freq survive the scaling: at least the (scaled) dense
// layers, one MoE layer and the dense ones after it, so the rehearsal's model is valid.
TEST(RehearsalShape, MixtureOfExpertsKeepsItsLayerPattern) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("mixtral-8x22b");
  r.model.moe_dense_layers = 3, r.model.moe_layer_freq = 2;
  r.exec.sequence_parallel = false;
  Problems p;
  const RehearsalShape s = derive_rehearsal(r, 2, 1, 1.0 / 48, 256, p);
  ASSERT_TRUE(p.empty());
  const ModelSpec& m = s.run.model;
  EXPECT_EQ(m.moe_dense_layers, 1);
  EXPECT_EQ(m.moe_layer_freq, 2);
  EXPECT_GE(m.layers, 3);
  EXPECT_GE(m.moe_layers(), 1);
  Problems valid;
  validate_model(m, valid);
  EXPECT_TRUE(valid.empty()) << (valid.empty() ? "" : valid.list().front().what);
}

// The plan's ep stays in the rehearsal (dividing its dp x cp and the experts), with its own row,
// and the recipe trains (nothing refused).
TEST(RehearsalShape, MixtureOfExpertsKeepsExpertParallelInTheLayout) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("mixtral-8x22b");
  r.exec.sequence_parallel = false;
  r.layout = Layout{.tp = 4, .cp = 1, .dp = 4, .pp = 4, .order = "tp-cp-ep-dp-pp", .ep = 2};
  r.exec.schedule = ScheduleKind::OneFOneB, r.exec.virtual_stages = 1, r.exec.global_batch_size = 256;
  Problems p;
  const RehearsalShape s = derive_rehearsal(r, 4, 1, 1.0 / 48, 256, p);
  ASSERT_TRUE(p.empty()) << p.list().front().what;
  EXPECT_EQ(s.run.layout.ep, 2);
  EXPECT_EQ((s.run.layout.dp * s.run.layout.cp) % s.run.layout.ep, 0);
  EXPECT_EQ(s.run.model.experts % s.run.layout.ep, 0);
  const auto row = std::find_if(s.rows.begin(), s.rows.end(), [](const ShapeRow& x) { return x.what == "ep"; });
  ASSERT_NE(row, s.rows.end());
  EXPECT_EQ(row->planned.substr(0, 1), "2");
  EXPECT_EQ(row->rehearsed.substr(0, 1), "2");
  EXPECT_TRUE(s.refusals.empty()) << s.refusals.front().what;
  // The plan's experts fold over tp (etp 1 at ep 2): the runtime trains that grid as planned.
  EXPECT_EQ(s.run.layout.etp, 1);
  const auto sub = std::find_if(s.substitutions.begin(), s.substitutions.end(),
                                [](const std::string& x) { return x.rfind("expert layout etp", 0) == 0; });
  EXPECT_EQ(sub, s.substitutions.end()) << *sub;
}

// examples/mixtral-8x22b-8-dgx-h100.toml on 2 ranks: ep 2 leaves no pipeline, so the plan's
// interleaved schedule becomes 1F1B, named among the substitutions, and the recipe trains.
TEST(RehearsalShape, AnInterleavedPlanRehearsedWithoutAPipelineRuns1F1B) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("mixtral-8x22b");
  r.exec.sequence_parallel = false;
  r.layout = Layout{.tp = 1, .cp = 1, .dp = 16, .pp = 4, .order = "tp-cp-ep-dp-pp", .ep = 8};
  r.exec.schedule = ScheduleKind::Interleaved, r.exec.virtual_stages = 14, r.exec.global_batch_size = 256;
  Problems p;
  const RehearsalShape s = derive_rehearsal(r, 2, 1, 1.0 / 48, 256, p);
  ASSERT_TRUE(p.empty()) << p.list().front().what;
  EXPECT_EQ(s.run.layout.pp, 1);
  EXPECT_EQ(s.run.exec.schedule, ScheduleKind::OneFOneB);
  EXPECT_EQ(s.run.exec.virtual_stages, 1);
  EXPECT_NE(std::find(s.substitutions.begin(), s.substitutions.end(),
                      "schedule interleaved -> 1f1b (the rehearsal's pp is 1: nothing to interleave)"),
            s.substitutions.end());
  EXPECT_TRUE(s.refusals.empty()) << s.refusals.front().what;
}

TEST(RehearsalShape, BadSizesAreProblemsNamingTheFlag) {
  Problems p;
  derive_rehearsal(gpt3_plan(), 6, 4, 2.0, 256, p);
  ASSERT_EQ(p.list().size(), 2u);
  EXPECT_NE(p.list()[0].what.find("--ranks 6 over --hosts 4"), std::string::npos);
  EXPECT_NE(p.list()[1].what.find("--scale 2"), std::string::npos);
}

TEST(RehearsalLink, OverrideReplacesKeysInTheirTableAndAddsMissingOnes) {
  const std::string in = "# c\n[cluster]\nnodes = 1\ngpus-per-node = 2\n\n[cost]\nhbm_efficiency = 0.5\n";
  const std::string out = override_toml(in, {{"nodes", "2"}, {"inter-latency-us", "40"}}, {{"network_efficiency", "0.8"}});
  EXPECT_EQ(out, "# c\n[cluster]\nnodes = 2\ngpus-per-node = 2\n\ninter-latency-us = 40\n[cost]\nhbm_efficiency = 0.5\n"
                 "network_efficiency = 0.8\n");
}

// The placement probe computes between two exchanges what the run does: a layer's forward and
// backward over its TP ring steps and its EP all-to-alls. Without the all-to-alls a tp 1 MoE
// rehearsal probed a whole layer per exchange, and its peers' compute read as a 6.5 ms latency.
TEST(RehearsalLink, ProbeChunkSplitsTheLayerOverItsTpAndEpExchanges) {
  RunSpec r = gpt3_plan();
  r.model = model_preset("mixtral-8x22b");
  r.model.layers = 8, r.model.hidden = 132, r.model.heads = 6, r.model.kv_heads = 1, r.model.ffn_hidden = 352;
  r.model.expert_ffn_hidden = 352, r.model.seq_len = 96, r.model.vocab = 256;
  r.exec.sequence_parallel = false, r.exec.recompute = Recompute::Full;
  r.layout = Layout{.tp = 1, .cp = 1, .dp = 2, .pp = 4, .order = "tp-cp-ep-dp-pp", .ep = 2};
  const ProbeSize with_ep = probe_size(r);
  EXPECT_EQ(with_ep.exchanges, 6);  // dispatch + combine forward, and backward twice (full recompute repeats them)
  r.layout.ep = 1;
  const ProbeSize without = probe_size(r);
  EXPECT_EQ(without.exchanges, 1);  // tp 1, no ep: one exchange per layer
  EXPECT_NEAR(with_ep.flops * 6, without.flops, 1e-6 * without.flops);
  r.layout.tp = 2, r.layout.dp = 1;
  // tp 2: 2 forward + 4 backward collectives (full recompute repeats the forward's), 2 (tp - 1) ring steps each.
  EXPECT_EQ(probe_size(r).exchanges, (2 + 4) * 2);
}

nlohmann::json report(double compute, double tp, double predicted_compute, double predicted_tp) {
  nlohmann::json steps = nlohmann::json::array();
  for (int s = 0; s < 5; ++s) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < 2; ++r)
      ranks.push_back({{"total_s", compute + tp + (s == 4 ? 1.0 : 0.0)}, {"compute_s", compute}, {"tp_s", tp + (s == 4 ? 1.0 : 0.0)},
                       {"optimizer_s", 0.0}, {"other_s", 0.0}});
    steps.push_back({{"step", s}, {"ranks", ranks}});
  }
  return {{"warmup_steps", 1}, {"layout", {{"tp", 2}, {"cp", 1}}}, {"steps", steps},
          {"predicted", {{"step_s", predicted_compute + predicted_tp},
                         {"terms_s", {{"compute", predicted_compute}, {"tp", predicted_tp}}}}}};
}

// The CP ring's line of the text report is whole (a fixed 64-byte buffer once cut it mid-word),
// and its product is the blocks times the wire time of one.
TEST(RehearsalReport, CpRingLineIsWholeAndItsProductAddsUp) {
  RehearsalData d;
  d.run.layout.cp = 2, d.run.layout.dp = 1, d.run.layout.order = "tp-cp-dp-pp";
  d.run.exec.micro_batch_size = 1, d.run.exec.global_batch_size = 2;
  const Mesh mesh(d.run.layout, 2);
  for (int64_t r = 0; r < 2; ++r) d.ranks.push_back(RankInfo{int(r), mesh.coords_of(r), 1e6, 2e6});
  PhaseTimes t;
  t.total = 0.01, t.compute = 0.006, t.cp = 0.001, t.cp_attention = 0.002;
  d.times = {{t, t}, {t, t}};
  d.losses = {5.0, 4.9};
  d.warmup = 1;
  d.cp_blocks = 6, d.cp_block_s = 0.000456;
  d.prediction_missing = "none asked for";
  const std::string text = rehearsal_text(d);
  const std::string line = "    (rank 0 sends 6 KV blocks per step, each 0.456 ms on the wire (ring shift) = 2.74 ms, "
                           "behind 2.00 ms of ring attention blocks, in compute; a wait beyond the wire is the cp "
                           "ranks' skew)\n";
  EXPECT_NE(text.find(line), std::string::npos) << text;
}

TEST(RehearsalVerdict, MediansIgnoreAnOutlierStepAndTheSentenceNamesTheMiss) {
  // Step 4 is 1 s slower (an outlier): the median keeps 0.1 s of TP, the spread shows it.
  const Verdict v = judge_rehearsal(report(1.0, 0.1, 1.0, 0.1), 0.25);
  EXPECT_TRUE(v.holds) << v.sentence;
  EXPECT_EQ(v.steps, 4);
  for (const auto& t : v.terms)
    if (t.key == "tp") {
      EXPECT_NEAR(t.median_s, 0.1, 1e-12);
      EXPECT_NEAR(t.high_s, 1.1, 1e-12);
    }
  EXPECT_EQ(v.sentence.rfind("The prediction holds", 0), 0u);
  const Verdict miss = judge_rehearsal(report(1.0, 0.5, 1.0, 0.1), 0.25);
  EXPECT_FALSE(miss.holds);
  EXPECT_NE(miss.sentence.find("TP collectives 5.00x the prediction"), std::string::npos) << miss.sentence;
  EXPECT_EQ(miss.sentence.find("compute 1"), std::string::npos) << miss.sentence;  // compute holds
  EXPECT_NE(verdict_text(miss).find("MISSES"), std::string::npos);
  EXPECT_EQ(verdict_json(miss)["holds"], false);
}

TEST(RehearsalVerdict, TpAcrossComparesTheMeasuredFactorWithThePredictedOne) {
  // Inside: step 1.1 s (1.0 compute + 0.1 TP) as predicted. Across: TP 0.5 s measured, 0.4 s
  // predicted: step factor 1.5 / 1.1 measured against 1.4 / 1.1 predicted, within 25%.
  const Verdict inside = judge_rehearsal(report(1.0, 0.1, 1.0, 0.1), 0.25);
  const Verdict across = judge_rehearsal(report(1.0, 0.5, 1.0, 0.4), 0.25);
  const TpAcross c = compare_tp_across(inside, across, 0.25);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_NEAR(c.rows[0].measured_factor(), 5.0, 1e-9);
  EXPECT_NEAR(c.rows[0].predicted_factor(), 4.0, 1e-9);
  EXPECT_NEAR(c.rows[1].measured_factor(), 1.5 / 1.1, 1e-9);
  EXPECT_TRUE(c.holds) << c.sentence;
  EXPECT_NE(c.sentence.find("1.36x the step with TP inside them, measured; the planner predicts 1.27x"), std::string::npos)
      << c.sentence;
  const TpAcross far = compare_tp_across(inside, judge_rehearsal(report(1.0, 2.0, 1.0, 0.4), 0.25), 0.25);
  EXPECT_FALSE(far.holds) << far.sentence;
  EXPECT_NE(tp_across_text(far, "tp-dp-pp", "dp-pp-tp").find("order dp-pp-tp"), std::string::npos);
}

// ep 2: the EP all-to-all is a measured term beside its prediction, and "other" is what is left
// of the predicted step after it; ep 1: the term is marked as not in the run.
TEST(RehearsalVerdict, EpAllToAllIsMeasuredBesideItsPrediction) {
  nlohmann::json r = report(1.0, 0.1, 1.0, 0.1);
  r["layout"]["ep"] = 2;
  for (auto& s : r["steps"])
    for (auto& rank : s["ranks"]) rank["ep_alltoall_s"] = 0.3;
  r["predicted"]["terms_s"]["ep_alltoall"] = 0.2;
  r["predicted"]["step_s"] = 1.3;
  const Verdict v = judge_rehearsal(r, 0.25);
  bool seen = false;
  for (const auto& t : v.terms) {
    if (t.key == "ep") {
      seen = true;
      EXPECT_NEAR(t.median_s, 0.3, 1e-12);
      ASSERT_TRUE(t.predicted_s.has_value());
      EXPECT_NEAR(*t.predicted_s, 0.2, 1e-12);
      EXPECT_FALSE(t.holds);  // 1.5x its prediction, and 0.1 s is more than 5% of the step
      EXPECT_TRUE(t.note.empty()) << t.note;
    }
    if (t.key == "other") EXPECT_NEAR(t.predicted_s.value_or(-1), 0.0, 1e-12);  // 1.3 - 1.0 - 0.1 - 0.2
  }
  EXPECT_TRUE(seen);
  EXPECT_NE(v.sentence.find("EP all-to-all 1.50x the prediction"), std::string::npos) << v.sentence;
  for (const auto& t : judge_rehearsal(report(1.0, 0.1, 1.0, 0.1), 0.25).terms)
    if (t.key == "ep") EXPECT_EQ(t.note, "not exercised (ep 1)");
}

// A dimension at size 1 is not exercised: its terms are not judged (DP does not "hold" at dp 1,
// whatever its numbers), the JSON's holds is null, and the sentence names them.
TEST(RehearsalVerdict, ADimensionAtOneIsNotExercisedNotHolding) {
  nlohmann::json r = report(1.0, 0.1, 1.0, 0.1);
  r["layout"]["dp"] = 1;
  for (auto& s : r["steps"])
    for (auto& rank : s["ranks"]) rank["dp_exposed_s"] = 0.5;  // far from its prediction (none)
  const Verdict v = judge_rehearsal(r, 0.25);
  EXPECT_TRUE(v.holds) << v.sentence;
  bool seen = false;
  for (const auto& t : v.terms)
    if (t.key == "dp") {
      seen = true;
      EXPECT_FALSE(t.exercised);
      EXPECT_EQ(t.note, "not exercised (dp 1)");
    }
  EXPECT_TRUE(seen);
  const nlohmann::json j = verdict_json(v);
  for (const auto& t : j["terms"])
    if (t["key"] == "dp" || t["key"] == "pp" || t["key"] == "bubble") EXPECT_TRUE(t["holds"].is_null()) << t.dump();
  EXPECT_NE(v.sentence.find("every term exercised is within"), std::string::npos) << v.sentence;
  EXPECT_NE(v.sentence.find("DP exposed"), std::string::npos) << v.sentence;
  EXPECT_NE(verdict_text(v).find("not exercised (dp 1)"), std::string::npos);
  r["layout"]["dp"] = 2;  // exercised: the same numbers miss
  EXPECT_FALSE(judge_rehearsal(r, 0.25).holds);
}

TEST(RehearsalVerdict, NoPredictionNoVerdict) {
  nlohmann::json r = report(1.0, 0.1, 1.0, 0.1);
  r["predicted"] = nullptr;
  r["prediction_missing"] = "no cluster file";
  const Verdict v = judge_rehearsal(r, 0.25);
  EXPECT_FALSE(v.predicted);
  EXPECT_NE(v.sentence.find("No verdict"), std::string::npos);
}

}  // namespace
}  // namespace trident::rehearse
