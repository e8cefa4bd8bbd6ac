// Search and rationale on the source chapter's case and on a small model.
#include <gtest/gtest.h>

#include <set>

#include "core/units.h"
#include "plan/plan_options.h"
#include "plan/rationale.h"
#include "plan/search.h"

using namespace trident;
using namespace trident::plan;

namespace {
ClusterSpec dgx(int64_t nodes) {
  ClusterSpec c = cluster_preset("dgx-a100-80g");
  c.nodes = nodes;
  return c;
}
const double kOverhead = kDefaultOverheadGiB * kGiB;
}  // namespace

TEST(Search, gpt3_175b_recommendation_fits_memory_and_keeps_tp_inside_a_node) {
  auto r = search(model_preset("gpt3-175b"), dgx(512), 1536, {}, 5, kOverhead);
  ASSERT_FALSE(r.best.empty());
  for (const auto& e : r.best) {
    EXPECT_TRUE(e.fits);
    EXPECT_LE(e.peak_memory().total_bytes(), 80 * kGiB);
    EXPECT_LE(e.run.layout.tp, 8);
    EXPECT_FALSE(e.links.tp.link.crosses_nodes());
    EXPECT_EQ(e.run.layout.world_size(), 4096);
  }
  for (size_t i = 1; i < r.best.size(); ++i) EXPECT_GE(r.best[i - 1].tokens_per_s, r.best[i].tokens_per_s);
  EXPECT_GT(r.rejected["out of memory"], 0);
  EXPECT_GT(r.feasible, 0);
}

TEST(Search, step_breakdown_adds_up_to_the_step) {
  auto r = search(model_preset("gpt3-175b"), dgx(512), 1536, {}, 1, kOverhead);
  ASSERT_FALSE(r.best.empty());
  const auto& t = r.best.front().time;
  EXPECT_NEAR(t.compute + t.tp_comm + t.pp_comm + t.bubble + t.dp_comm + t.optimizer, t.step, 1e-9 * t.step);
}

TEST(Search, fixed_dimensions_are_respected) {
  SearchSpace s;
  s.size(Dim::TP) = 4;
  s.recompute = Recompute::Full;
  auto r = search(model_preset("gpt3-175b"), dgx(512), 1536, s, 3, kOverhead);
  ASSERT_FALSE(r.best.empty());
  for (const auto& e : r.best) {
    EXPECT_EQ(e.run.layout.tp, 4);
    EXPECT_EQ(e.run.exec.recompute, Recompute::Full);
  }
}

TEST(Search, small_model_on_one_node_gets_plain_data_parallel) {
  auto r = search(model_preset("gpt2-small"), dgx(1), 64, {}, 1, kOverhead);
  ASSERT_FALSE(r.best.empty());
  EXPECT_EQ(r.best.front().run.layout.tp, 1);
  EXPECT_EQ(r.best.front().run.layout.pp, 1);
  auto why = rationale(model_preset("gpt2-small"), dgx(1), 64, {}, r.best.front(), kOverhead);
  ASSERT_GE(why.size(), 5u);
  EXPECT_NE(why[0].find("Yes"), std::string::npos) << why[0];
  EXPECT_NE(why.back().find("agrees"), std::string::npos) << why.back();
}

TEST(Search, rationale_for_gpt3_walks_the_decision_flow_with_numbers) {
  auto r = search(model_preset("gpt3-175b"), dgx(512), 1536, {}, 1, kOverhead);
  ASSERT_FALSE(r.best.empty());
  auto why = rationale(model_preset("gpt3-175b"), dgx(512), 1536, {}, r.best.front(), kOverhead);
  ASSERT_GE(why.size(), 6u);
  EXPECT_NE(why[0].find("2927.0 GiB"), std::string::npos) << why[0];  // 174.6 B x 18 B
  EXPECT_NE(why[0].find(": no"), std::string::npos) << why[0];
  EXPECT_NE(why[1].find("TP stops at 8"), std::string::npos) << why[1];
  EXPECT_NE(why[3].find("3D"), std::string::npos);
  EXPECT_NE(why.back().find("Rule of thumb"), std::string::npos);
}

TEST(Search, nothing_fits_gives_no_candidates_and_counts_the_reason) {
  auto r = search(model_preset("gpt3-175b"), dgx(1), 8, {}, 3, kOverhead);
  EXPECT_TRUE(r.best.empty());
  EXPECT_GT(r.rejected["out of memory"], 0);
}

TEST(Search, an_asked_for_interleaved_schedule_may_split_layers_unevenly) {
  // Llama 3 405B's 126 layers over pp 16 x v 2 = 32 chunks: not equal, but lint accepts it (an
  // info note), so plan must find it when the schedule is asked for; unasked it stays even.
  SearchSpace asked;
  for (auto [d, n] : {std::pair{Dim::TP, 8}, {Dim::PP, 16}, {Dim::CP, 1}, {Dim::EP, 1}}) asked.size(d) = n;
  asked.schedule = ScheduleKind::Interleaved;
  asked.virtual_stages = 2;
  ClusterSpec c = cluster_preset("dgx-h100");
  c.nodes = 128;
  const auto r = search(model_preset("llama3-405b"), c, 2048, asked, 3, kOverhead);
  ASSERT_FALSE(r.best.empty());
  for (const auto& e : r.best) {
    EXPECT_EQ(e.run.exec.schedule, ScheduleKind::Interleaved);
    EXPECT_EQ(e.run.exec.virtual_stages, 2);
    EXPECT_NE(e.run.model.layers % (e.run.layout.pp * 2), 0);
  }
  SearchSpace unasked = asked;
  unasked.schedule.reset();
  unasked.virtual_stages.reset();
  for (const auto& e : search(model_preset("llama3-405b"), c, 2048, unasked, 50, kOverhead).best)
    if (e.run.exec.schedule == ScheduleKind::Interleaved)
      EXPECT_EQ(e.run.model.layers % (e.run.layout.pp * e.run.exec.virtual_stages), 0);
}

// The rationale answered from the winner's search says word for word what it says searching
// again, across the decision flow's branches (plain DP, PP+DP rule, TP+PP, cp, ep, fixed dims).
TEST(Rationale, from_the_search_result_matches_searching_again) {
  struct Case {
    ModelSpec model;
    ClusterSpec cluster;
    int64_t batch;
    SearchSpace space;
  };
  std::vector<Case> cases;
  cases.push_back({model_preset("gpt2-small"), dgx(1), 64, {}});
  cases.push_back({model_preset("gpt3-13b"), dgx(8), 512, {}});
  cases.push_back({model_preset("gpt3-175b"), dgx(64), 1536, {}});
  SearchSpace fixed;
  fixed.size(Dim::TP) = 4;
  fixed.zero = 1;
  cases.push_back({model_preset("gpt3-175b"), dgx(64), 1536, fixed});
  ClusterSpec h100 = cluster_preset("dgx-h100");
  h100.nodes = 8;
  SearchSpace flash;
  flash.settings.attention = AttentionKind::Flash;
  ModelSpec mix = model_preset("mixtral-8x7b");
  mix.seq_len = 4096;
  cases.push_back({mix, h100, 128, flash});
  ModelSpec longseq = model_preset("llama3-8b");
  longseq.seq_len = 131072;
  cases.push_back({longseq, h100, 16, flash});
  SearchSpace cp_given = flash;
  cp_given.size(Dim::CP) = 4;
  cases.push_back({longseq, h100, 16, cp_given});
  for (const Case& c : cases) {
    const SearchResult r = search(c.model, c.cluster, c.batch, c.space, 3, kOverhead);
    ASSERT_FALSE(r.best.empty()) << c.model.name;
    const auto searched_again = rationale(c.model, c.cluster, c.batch, c.space, r.best.front(), kOverhead);
    const auto from_result = rationale(c.model, c.cluster, c.batch, r, kOverhead);
    EXPECT_EQ(from_result, searched_again) << c.model.name;
  }
}

// The bound the search prunes by is below every estimate it stands for: GPT-3 13B on 64 A100s,
// 4 per node (tp 8 crosses nodes), every tp, pp, micro-batch, schedule, ZeRO stage and recompute
// (sequence parallel on with tp), each on its own TP link.
TEST(Search, step_time_bound_never_exceeds_the_estimate) {
  const ModelSpec m = model_preset("gpt3-13b");
  ClusterSpec cl = dgx(16);
  cl.gpus_per_node = 4;
  int checked = 0;
  for (int64_t tp : {1, 2, 4, 8})
    for (int64_t pp : {1, 2, 4, 8}) {
      const int64_t dp = cl.world_size() / (tp * pp);
      for (int64_t b : {1, 4})
        for (auto [kind, v] : {std::pair{ScheduleKind::OneFOneB, int64_t(1)}, {ScheduleKind::ZeroBubbleH1, int64_t(1)},
                               {ScheduleKind::Interleaved, int64_t(2)}})
          for (int zero : {0, 1, 3})
            for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
              if (pp == 1 && kind != ScheduleKind::OneFOneB) continue;
              RunSpec run;
              run.model = m;
              run.cluster = cl;
              run.layout = Layout{tp, 1, dp, pp, "tp-dp-pp"};
              run.exec.global_batch_size = 512;
              run.exec.micro_batch_size = b;
              run.exec.schedule = kind;
              run.exec.virtual_stages = v;
              run.exec.zero = zero;
              run.exec.recompute = rc;
              run.exec.sequence_parallel = tp > 1;
              const Estimate e = estimate(run, kOverhead);
              const double bound = step_time_lower_bound(m, run.exec, tp, pp, 1, 1, e.micro_batches, {e.links.tp.link},
                                                         cl.gpu, e.cost);
              EXPECT_GT(bound, 0);
              EXPECT_LE(bound, e.time.step) << run.layout.describe() << " b " << b << " " << to_string(kind) << " zero "
                                            << zero << " " << to_string(rc);
              ++checked;
            }
    }
  EXPECT_EQ(checked, 720);
}

namespace {
// A candidate's layout (with its order) and every searched setting.
std::string recipe_key(const Estimate& e) {
  const ExecutionSpec& x = e.run.exec;
  return e.run.layout.describe() + " b " + std::to_string(x.micro_batch_size) + " " + to_string(x.schedule) + " v " +
         std::to_string(x.virtual_stages) + " zero " + std::to_string(x.zero) + " " + to_string(x.recompute) +
         (x.sequence_parallel ? " sp" : "");
}
}  // namespace

// Pruning by that bound skips estimates but keeps what a full search finds: the best layouts
// (with their other orders) and the best at every tp and pp, which the rationale asks about.
TEST(Search, pruning_by_the_bound_keeps_the_best_and_every_shape_best) {
  struct Case {
    ModelSpec model;
    ClusterSpec cluster;
    int64_t batch;
  };
  ClusterSpec h100 = cluster_preset("dgx-h100");
  h100.nodes = 512;
  ClusterSpec h100_small = h100;
  h100_small.nodes = 128;
  ClusterSpec h100_8 = h100;
  h100_8.nodes = 8;  // examples/mixtral-8x22b-8-dgx-h100.toml
  const Case cases[] = {{model_preset("gpt3-175b"), dgx(64), 1536},
                        {model_preset("llama3-405b"), h100, 2048},
                        {model_preset("mixtral-8x22b"), h100_small, 512},
                        {model_preset("mixtral-8x22b"), h100_8, 256}};
  for (const Case& c : cases) {
    SearchSpace full;
    full.prune_by_bound = false;
    const SearchResult all = search(c.model, c.cluster, c.batch, full, 5, kOverhead);
    const SearchResult pruned = search(c.model, c.cluster, c.batch, SearchSpace{}, 5, kOverhead);
    EXPECT_LT(pruned.estimated, all.estimated) << c.model.name;
    ASSERT_EQ(pruned.best.size(), all.best.size()) << c.model.name;
    for (size_t i = 0; i < all.best.size(); ++i) {
      EXPECT_EQ(recipe_key(pruned.best[i]), recipe_key(all.best[i])) << c.model.name << " #" << i;
      EXPECT_EQ(pruned.best[i].tokens_per_s, all.best[i].tokens_per_s);
      EXPECT_EQ(pruned.best[i].other_orders, all.best[i].other_orders) << c.model.name << " #" << i;
    }
    // Every tp and pp (and either alone, and neither) answered from the pruned search as from the
    // full one.
    std::set<std::pair<int64_t, int64_t>> tp_pp;
    for (const auto& [shape, e] : all.best_per_shape) tp_pp.insert({shape[0], shape[1]});
    EXPECT_GE(tp_pp.size(), 5u) << c.model.name;
    auto answer = [](const SearchResult& r, std::optional<int64_t> tp, std::optional<int64_t> pp,
                     bool plain = false) {
      SearchSpace q = r.space;
      q.size(Dim::TP) = tp;
      q.size(Dim::PP) = pp;
      if (plain) q.size(Dim::CP) = 1, q.size(Dim::EP) = 1;  // the rationale's steps 1-4
      const auto known = best_within(r, q);
      EXPECT_TRUE(known.has_value());
      return known && *known ? recipe_key(**known) + " " + std::to_string((*known)->tokens_per_s) : "none";
    };
    for (const auto& [tp, pp] : tp_pp) {
      EXPECT_EQ(answer(pruned, tp, pp), answer(all, tp, pp)) << c.model.name;
      EXPECT_EQ(answer(pruned, tp, std::nullopt), answer(all, tp, std::nullopt)) << c.model.name;
      EXPECT_EQ(answer(pruned, std::nullopt, pp), answer(all, std::nullopt, pp)) << c.model.name;
      EXPECT_EQ(answer(pruned, tp, pp, true), answer(all, tp, pp, true)) << c.model.name;
      EXPECT_EQ(answer(pruned, tp, std::nullopt, true), answer(all, tp, std::nullopt, true)) << c.model.name;
    }
    // One cp or ep above 1 the search did not fix is not answered from the pruned search: searched again.
    SearchSpace one_cp = pruned.space;
    one_cp.size(Dim::CP) = 2;
    EXPECT_FALSE(best_within(pruned, one_cp).has_value());
  }
}

// The search prunes by the rule table: with a sequence tp does not divide, sequence parallel is
// refused (sp-divides-seq) and the layout is ranked with it off, as lint and train check it; and
// every candidate it keeps passes check_run.
TEST(Search, keeps_only_layouts_the_rule_table_accepts_sequence_parallel_included) {
  ModelSpec m = model_preset("gpt3-1.3b");
  m.seq_len = 2052;  // divisible by 2 and 4, not by 8
  SearchSpace s;
  s.size(Dim::TP) = 8;
  auto r = search(m, dgx(2), 64, s, 5, kOverhead);
  ASSERT_FALSE(r.best.empty());
  for (const auto& e : r.best) {
    EXPECT_FALSE(e.run.exec.sequence_parallel) << "tp 8 does not divide 2052";
    Problems p;
    check_run(e.run, true, p);
    EXPECT_TRUE(p.empty()) << p.list()[0].code << ": " << p.list()[0].what;
    EXPECT_EQ(sequence_parallel_by_default(e.run.layout, m.seq_len), e.run.exec.sequence_parallel);
  }
  EXPECT_GT(r.rejected["sequence parallel: tp is 1, or tp x cp does not divide the sequence"], 0);
  s.size(Dim::TP) = 4;  // 4 divides it: on, as lint's default
  auto four = search(m, dgx(2), 64, s, 1, kOverhead);
  ASSERT_FALSE(four.best.empty());
  EXPECT_TRUE(four.best.front().run.exec.sequence_parallel);
}
