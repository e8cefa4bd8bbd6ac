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

}  // namespace trident
