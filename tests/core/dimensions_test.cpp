// The dimension table and the layout rules: every dimension reaches the flags, the order and
// every layout a report writes; every rule fires once, under its own code; the documents list
// them all.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/dimensions.h"
#include "core/layout_rules.h"
#include "core/run_spec.h"

using namespace trident;

namespace {

// Every dimension at a size of its own, so a report that drops or swaps one is seen.
Layout all_distinct() {
  Layout l{.tp = 2, .cp = 5, .dp = 4, .pp = 3, .order = "tp-cp-ep-dp-pp", .ep = 10, .etp = 6};
  return l;
}

int count_code(const Problems& p, const std::string& code) {
  int n = 0;
  for (const Problem& x : p.list()) n += x.code == code;
  return n;
}

std::string listed(const Problems& p) {
  std::string s;
  for (const Problem& x : p.list()) s += "  [" + x.code + "] " + x.what + "\n";
  return s;
}

// A run every rule passes: GPT-3 175B on 16 DGX A100 nodes, tp 8 x pp 8 x dp 2.
RunSpec good_run() {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  for (auto [k, val] : std::vector<std::pair<std::string, std::string>>{
           {"model", "gpt3-175b"}, {"cluster", "dgx-a100-80g"}, {"nodes", "16"}, {"tp", "8"}, {"pp", "8"},
           {"dp", "2"}, {"global-batch-size", "16"}})
    v.set(k, val, "--" + k);
  return resolve_run(v, true);
}

}  // namespace

TEST(Dimensions, each_dimension_has_a_flag_an_order_token_and_a_json_key) {
  const auto options = layout_options();
  const Layout l = all_distinct();
  const auto json = layout_json(l);
  const auto texts = layout_option_texts(l);
  for (const Dimension& d : dimensions()) {
    bool flag = false;
    for (const OptionDef& o : options) flag = flag || o.name == d.name;
    EXPECT_TRUE(flag) << "no --" << d.name;
    EXPECT_EQ(json.at(d.name).get<int64_t>(), l.*d.size) << d.name;
    EXPECT_EQ(texts.at(d.name), std::to_string(l.*d.size)) << d.name;
    EXPECT_EQ(find_dimension(d.name), &d);
    EXPECT_EQ(l.size(d.dim), l.*d.size) << d.name;
  }
  EXPECT_EQ(json.at("order"), l.order);
  EXPECT_EQ(find_dimension("edp"), nullptr);
}

TEST(Dimensions, every_layout_text_names_every_dimension_above_one) {
  const Layout l = all_distinct();
  for (const std::string& text : {l.describe(), layout_sizes_text(l)})
    for (const Dimension& d : dimensions())
      EXPECT_NE(text.find(std::string(d.name) + " " + std::to_string(l.*d.size)), std::string::npos)
          << d.name << " missing in '" << text << "'";
  // The texts keep their published form.
  EXPECT_EQ(l.describe(), "tp 2 x pp 3 x dp 4 x cp 5, ep 10, etp 6 (order tp-cp-ep-dp-pp)");
  EXPECT_EQ(layout_sizes_text(Layout{.tp = 8, .dp = 64, .pp = 8}), "tp 8 pp 8 dp 64");
}

TEST(Dimensions, the_json_reads_back_as_the_same_layout) {
  const Layout l = all_distinct();
  const Layout back = layout_from_json(layout_json(l));
  for (const Dimension& d : dimensions()) EXPECT_EQ(back.*d.size, l.*d.size) << d.name;
  EXPECT_EQ(back.order, l.order);
}

TEST(Dimensions, one_reader_gives_the_given_sizes_and_leaves_the_rest_unset) {
  OptionValues v(layout_options());
  v.set("tp", "4", "--tp");
  v.set("ep", "2", "--ep");
  Problems p;
  const LayoutSizes s = read_layout_sizes(v, p);
  EXPECT_TRUE(p.empty()) << listed(p);
  EXPECT_EQ(s.get(Dim::TP), 4);
  EXPECT_EQ(s.get(Dim::EP), 2);
  EXPECT_FALSE(s.get(Dim::DP).has_value());
  Layout l;
  apply_layout_sizes(s, l);
  EXPECT_EQ(l.order, "tp-cp-ep-dp-pp");  // the default order with ep
  v.set("cp", "x", "--cp");
  Problems bad;
  read_layout_sizes(v, bad);
  EXPECT_EQ(bad.size(), 1u) << listed(bad);
}

TEST(LayoutRules, each_code_is_unique_and_names_a_dimension) {
  std::set<std::string> codes;
  for (const LayoutRule& r : layout_rules()) {
    EXPECT_TRUE(codes.insert(r.code).second) << "code " << r.code << " used twice";
    EXPECT_TRUE(std::string(r.dimension) == "layout" || find_dimension(r.dimension)) << r.code;
    EXPECT_NE(r.check, nullptr) << r.code;
  }
}

// Each rule broken once: the problem is reported exactly once, under the rule's code.
TEST(LayoutRules, each_rule_fires_once_under_its_own_code) {
  ASSERT_NO_THROW(good_run());
  std::map<std::string, RunSpec> broken;
  auto with = [&](const char* code, auto change) {
    RunSpec r = good_run();
    change(r);
    broken[code] = r;
  };
  with("dimension-positive", [](RunSpec& r) { r.layout.tp = 0; });
  with("order-malformed", [](RunSpec& r) { r.layout.order = "tp-dp-pp-xx"; });
  with("order-omits-dimension", [](RunSpec& r) { r.layout.cp = 2, r.layout.dp = 1, r.layout.order = "tp-dp-pp"; });
  // ep 3 x etp 1 does not divide tp 8 x dp 2 (Megatron's rule; ep-needs-experts fires too).
  with("expert-grid-divides-ranks", [](RunSpec& r) { r.layout.ep = 3, r.layout.order = "tp-ep-dp-pp"; });
  // tp 8, pp 8 before dp: the expert grid (etp 1) would put pp at stride 1, attention at 8.
  with("expert-grid-keeps-stages", [](RunSpec& r) {
    r.model = model_preset("mixtral-8x7b");
    r.layout.order = "tp-pp-dp";
  });
  with("etp-needs-experts", [](RunSpec& r) { r.layout.etp = 2; });
  with("etp-divides-expert-ffn", [](RunSpec& r) {
    r.model = model_preset("mixtral-8x7b");
    r.model.expert_ffn_hidden = 14335;
    r.layout.etp = 2;
  });
  with("world-size", [](RunSpec& r) { r.layout.dp = 3; });
  with("tp-divides-heads", [](RunSpec& r) { r.model.heads = r.model.kv_heads = 90; });
  with("tp-divides-kv-heads", [](RunSpec& r) { r.model.kv_heads = 6; });
  with("tp-divides-ffn", [](RunSpec& r) { r.model.ffn_hidden = 49151; });
  with("tp-divides-expert-ffn", [](RunSpec& r) {
    r.model = model_preset("mixtral-8x7b");
    r.model.expert_ffn_hidden = 14335;
    r.model.shared_experts = 1;
  });
  with("pp-exceeds-layers", [](RunSpec& r) { r.model.layers = 4; });
  with("pipeline-layout-matches", [](RunSpec& r) {  // pp 8's chunks, one layer short of GPT-3's 96
    Problems syntax;
    r.exec.pipeline_layout = parse_pipeline_layout("Et*12|(t*12|)*6t*11L", syntax);
  });
  with("cp-divides-sequence", [](RunSpec& r) {
    r.layout.cp = 2, r.layout.dp = 1, r.layout.order = "tp-cp-dp-pp";
    r.model.seq_len = 2050;
  });
  with("sp-needs-tp", [](RunSpec& r) { r.layout.tp = 1, r.layout.dp = 16, r.exec.sequence_parallel = true; });
  with("sp-divides-seq", [](RunSpec& r) { r.exec.sequence_parallel = true, r.model.seq_len = 2052; });
  with("ep-needs-experts", [](RunSpec& r) { r.layout.ep = 2, r.layout.order = "tp-ep-dp-pp"; });
  with("ep-divides-experts", [](RunSpec& r) {
    r.model = model_preset("mixtral-8x7b");
    r.model.experts = 6;
    r.layout.ep = 4, r.layout.order = "tp-ep-dp-pp";
  });
  with("batch-divisibility", [](RunSpec& r) { r.exec.global_batch_size = 15; });
  for (const LayoutRule& rule : layout_rules()) {
    ASSERT_TRUE(broken.count(rule.code)) << "no broken case for " << rule.code << ": add one";
    const RunSpec& r = broken.at(rule.code);
    Problems p;
    validate_layout(r.layout, p);
    check_run(r, true, p);
    EXPECT_EQ(count_code(p, rule.code), 1) << rule.code << ":\n" << listed(p);
    Problems good;
    rule.check(good_run(), good);
    EXPECT_TRUE(good.empty()) << rule.code << " fires on the good run:\n" << listed(good);
  }
}

// Routed experts are split over etp, not tp: an expert width tp does not divide is no problem
// at etp 1 without shared experts (those alone are split over tp).
TEST(LayoutRules, routed_experts_whole_on_each_tp_rank_need_no_divisible_width) {
  RunSpec r = good_run();
  r.model = model_preset("mixtral-8x7b");
  r.model.expert_ffn_hidden = 14335;
  Problems p;
  check_run(r, true, p);
  EXPECT_EQ(count_code(p, "tp-divides-expert-ffn"), 0) << listed(p);
}

// One bad --seq-len through the whole resolution is said once.
TEST(LayoutRules, a_bad_sequence_is_reported_once_by_resolve_run) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
  for (auto [k, val] : std::vector<std::pair<std::string, std::string>>{
           {"model", "gpt3-175b"}, {"nodes", "16"}, {"tp", "8"}, {"pp", "4"}, {"cp", "2"}, {"seq-len", "2050"}})
    v.set(k, val, "--" + k);
  try {
    resolve_run(v, false);
    FAIL() << "a sequence 2 x cp does not divide was accepted";
  } catch (const InputError& e) {
    int n = 0;
    for (const Problem& p : e.problems()) n += p.code == "cp-divides-sequence";
    EXPECT_EQ(n, 1);
  }
}

TEST(LayoutRules, the_architecture_document_lists_every_dimension_and_rule) {
  std::ifstream in(std::string(TRIDENT_SOURCE_DIR) + "/docs/architecture.md");
  ASSERT_TRUE(in) << "docs/architecture.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const LayoutRule& r : layout_rules())
    EXPECT_NE(doc.find(std::string("`") + r.code + "`"), std::string::npos) << r.code << " not in docs/architecture.md";
  for (const Dimension& d : dimensions())
    EXPECT_NE(doc.find(std::string("| `") + d.name + "`"), std::string::npos)
        << d.name << " has no row in docs/architecture.md's dimension table";
}
