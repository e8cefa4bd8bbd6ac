// Megatron-Core's --pipeline-model-parallel-layout as --pipeline-layout reads it: the repeats
// expanded, each chunk's decoder layers, MTP modules, embedding and loss, syntax problems named,
// and the layout held against the run (core/pipeline_layout.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/pipeline_layout.h"

namespace trident {
namespace {

bool any_names(const Problems& p, const std::string& text) {
  for (const Problem& x : p.list())
    if (x.what.find(text) != std::string::npos) return true;
  return false;
}

TEST(PipelineLayout, reads_the_deepseek_v3_recipe_layout_chunk_by_chunk) {
  Problems p;
  // Megatron-Bridge 26.04.01's DeepSeek-V3 layout (data/published_runs R0091): 16 chunks.
  const PipelineLayout l = parse_pipeline_layout("Et*4|(t*4|)*14tmL", p);
  ASSERT_TRUE(p.empty());
  std::vector<int64_t> decoders(15, 4);
  decoders.push_back(1);
  EXPECT_EQ(l.decoders, decoders);
  EXPECT_EQ(l.chunks(), 16);
  EXPECT_TRUE(l.first_is_embedding);
  EXPECT_EQ(l.embedding.front(), 1);
  EXPECT_EQ(l.mtp.back(), 1);
  EXPECT_EQ(l.loss.back(), 1);
  Problems fits;
  check_pipeline_layout(l, 61, 1, 16, 1, "code", fits);
  check_pipeline_layout(l, 61, 1, 8, 2, "code", fits);
  EXPECT_TRUE(fits.empty()) << fits.list().front().what;
}

TEST(PipelineLayout, commas_and_spaces_are_ignored_as_megatron_ignores_them) {
  Problems p;
  // Megatron-Core's docstring example: 3 + 29 x 2 = 61 layers, the MTP module in a chunk of its own.
  const PipelineLayout l = parse_pipeline_layout("Ettt|(tt|)*29,m|L", p);
  ASSERT_TRUE(p.empty());
  EXPECT_EQ(l.chunks(), 32);
  EXPECT_EQ(l.mtp[30], 1);
  // The planner costs the MTP module on the last chunk: a layout placing it elsewhere is refused.
  Problems placed;
  check_pipeline_layout(l, 61, 1, 32, 1, "code", placed);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_TRUE(any_names(placed, "outside the last chunk"));
}

TEST(PipelineLayout, every_syntax_problem_names_what_is_wrong) {
  for (const auto& [text, named] : std::vector<std::pair<std::string, std::string>>{
           {"Et*|tL", "'*' at position 2"}, {"E(tt|L", "'(' at position 1 is never closed"},
           {"Ett)|L", "')' at position 3"}, {"Etx|L", "'x' at position 2 is no layout symbol"}}) {
    Problems p;
    const PipelineLayout l = parse_pipeline_layout(text, p);
    EXPECT_TRUE(l.empty()) << text;
    ASSERT_EQ(p.size(), 1u) << text;
    EXPECT_TRUE(any_names(p, named)) << text << ": " << p.list().front().what;
    EXPECT_EQ(p.list().front().code, "pipeline-layout");
  }
}

TEST(PipelineLayout, a_layout_against_another_run_reports_every_mismatch_together) {
  Problems syntax;
  const PipelineLayout l = parse_pipeline_layout("tt|Et|t", syntax);
  ASSERT_TRUE(syntax.empty());
  Problems p;
  check_pipeline_layout(l, 8, 1, 4, 1, "pipeline-layout-matches", p);
  // 3 chunks for 4 stages, 4 layers for 8, E not first, no L, no MTP module.
  EXPECT_EQ(p.size(), 5u);
  EXPECT_TRUE(any_names(p, "has 3 chunks, but pp 4 x virtual stages 1 = 4"));
  EXPECT_TRUE(any_names(p, "places 4 decoder layers (t), but the model has 8"));
  EXPECT_TRUE(any_names(p, "must start with the embedding"));
  EXPECT_TRUE(any_names(p, "must place the loss (L) once, in the last chunk"));
  EXPECT_TRUE(any_names(p, "places 0 MTP modules (m)"));
  for (const Problem& x : p.list()) EXPECT_EQ(x.code, "pipeline-layout-matches");
}

// A nesting deeper than the parser's bound is refused by name (500000 '(' crashed it by recursion).
TEST(PipelineLayout, groups_nested_too_deep_are_refused_not_recursed) {
  Problems p;
  parse_pipeline_layout(std::string(500000, '(') + "t" + std::string(500000, ')'), p);
  EXPECT_TRUE(any_names(p, "nests groups deeper than 32")) << (p.empty() ? "" : p.list().front().what);
  Problems ok;
  parse_pipeline_layout(std::string(32, '(') + "t" + std::string(32, ')'), ok);
  EXPECT_TRUE(ok.empty()) << ok.list().front().what;
}

}  // namespace
}  // namespace trident
