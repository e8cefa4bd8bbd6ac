#include "core/suggest.h"

#include <gtest/gtest.h>

namespace trident {

TEST(Suggest, TyposFindTheirName) {
  const std::vector<std::string> names = {"model", "nodes", "global-batch-size", "micro-batch-size", "tp"};
  EXPECT_EQ(closest_choice("modle", names), "model");          // two letters swapped: one edit
  EXPECT_EQ(closest_choice("nodess", names), "nodes");
  EXPECT_EQ(closest_choice("global-bach-size", names), "global-batch-size");
  EXPECT_EQ(closest_choice("global", names), "global-batch-size");  // a prefix of one name only
  EXPECT_EQ(closest_choice("MODEL", names), "model");          // case does not count
}

TEST(Suggest, FarWordsGetNothing) {
  const std::vector<std::string> names = {"model", "nodes", "tp"};
  EXPECT_EQ(closest_choice("zebra", names), std::nullopt);
  EXPECT_EQ(closest_choice("", names), std::nullopt);
  EXPECT_EQ(did_you_mean("zebra", names), "");
  EXPECT_EQ(did_you_mean("tq", names, "--"), "did you mean '--tp'? ");
}

// The edits allowed grow with the word (a third of it, 1 to 3): two changed letters of a
// two-letter word are another word, four of a long one are not a typo.
TEST(Suggest, EditsAllowedFollowTheLength) {
  EXPECT_EQ(closest_choice("xy", {"tp"}), std::nullopt);
  EXPECT_EQ(closest_choice("xp", {"tp"}), "tp");
  EXPECT_EQ(closest_choice("global-xxxxh-size", {"global-batch-size"}), std::nullopt);
  EXPECT_EQ(closest_choice("global-xxxch-size", {"global-batch-size"}), "global-batch-size");
}

// A prefix names a choice only when it is the prefix of that one alone, and 3 letters or more.
TEST(Suggest, PrefixOfOneChoiceOnly) {
  const std::vector<std::string> names = {"global-batch-size", "global-seed", "micro-batch-size"};
  EXPECT_EQ(closest_choice("global", names), std::nullopt);
  EXPECT_EQ(closest_choice("micro", names), "micro-batch-size");
  EXPECT_EQ(closest_choice("mi", {"micro-batch-size"}), std::nullopt);
}

}  // namespace trident
