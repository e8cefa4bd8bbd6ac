#include <gtest/gtest.h>

#include "core/options.h"

using namespace trident;

namespace {
OptionValues standard() {
  return OptionValues(concat({model_options(), cluster_options(), layout_options(), execution_options()}));
}
}  // namespace

TEST(Options, toml_sections_and_top_level_keys_are_read) {
  OptionValues v = standard();
  Problems p;
  v.load_toml_text("model = \"gpt3-175b\"\n[layout]\ntp = 8\norder = \"tp-pp-dp\"\n[training]\nsequence_parallel = true\n",
                   "run.toml", p);
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(*v.get_string("model"), "gpt3-175b");
  EXPECT_EQ(*v.get_int("tp", p), 8);
  EXPECT_EQ(*v.get_string("order"), "tp-pp-dp");
  EXPECT_TRUE(*v.get_bool("sequence-parallel", p));
}

TEST(Options, flags_set_before_the_file_win) {
  OptionValues v = standard();
  Problems p;
  v.set("tp", "4", "--tp");
  v.load_toml_text("[layout]\ntp = 8\n", "run.toml", p);
  EXPECT_EQ(*v.get_int("tp", p), 4);
}

TEST(Options, unknown_keys_tables_and_misplaced_keys_are_all_reported) {
  OptionValues v = standard();
  Problems p;
  v.load_toml_text("colour = 3\n[layout]\nlayers = 4\n[gizmo]\nx = 1\n", "bad.toml", p);
  ASSERT_EQ(p.size(), 3u);
  std::string all;
  for (const auto& problem : p.list()) all += problem.what + "\n";
  EXPECT_NE(all.find("unknown key 'colour'"), std::string::npos) << all;
  EXPECT_NE(all.find("belongs in [model]"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown table [gizmo]"), std::string::npos) << all;
}

TEST(Options, malformed_toml_names_line_and_column) {
  OptionValues v = standard();
  Problems p;
  v.load_toml_text("[layout]\ntp = = 8\n", "broken.toml", p);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p.list()[0].what.find("broken.toml at line 2"), std::string::npos) << p.list()[0].what;
}

TEST(Options, non_numbers_are_reported_with_their_source) {
  OptionValues v = standard();
  Problems p;
  v.set("tp", "eight", "job.toml");
  EXPECT_FALSE(v.get_int("tp", p).has_value());
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p.list()[0].what.find("'eight' (from job.toml)"), std::string::npos) << p.list()[0].what;
}

TEST(Options, missing_file_is_a_problem_not_a_crash) {
  OptionValues v = standard();
  Problems p;
  v.load_toml_file("/nonexistent/trident.toml", p);
  EXPECT_EQ(p.size(), 1u);
}
