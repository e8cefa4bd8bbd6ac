// No silent borrowing: a GPU without a table of its own in data/cost/builtin.toml is estimated
// with the [default] (A100) values, and every report says so, naming the table.
#include <gtest/gtest.h>

#include "core/cost_table.h"
#include "report/plan_report.h"

using namespace trident;

TEST(CostCalibration, a_gpu_without_a_table_of_its_own_is_warned_about_naming_the_table) {
  for (const char* key : {"a100-80g", "a100-40g", "a100-pcie-40g", "h100-80g", "h200-141g", "gb200-186g"})
    EXPECT_TRUE(builtin_cost(gpu_preset(key)).calibrated) << key;
  // No published B200 run is fitted: it borrows GB200's table (the same Blackwell GPU) and says so.
  const CostTable b200 = builtin_cost(gpu_preset("b200-180g")), gb200 = builtin_cost(gpu_preset("gb200-186g"));
  EXPECT_FALSE(b200.calibrated);
  EXPECT_EQ(b200.borrowed_from, "gb200-186g");
  for (const auto& f : cost_fields()) EXPECT_EQ(b200.*(f.member), gb200.*(f.member)) << f.name;
  EXPECT_NE(cost_text(b200).find("warning: no calibrated cost table for GPU b200-180g: its times use the [gb200-186g] "
                                 "table of data/cost/builtin.toml, borrowed"),
            std::string::npos)
      << cost_text(b200);
  EXPECT_EQ(cost_json(b200)["borrowed_from"], "gb200-186g");
  GpuSpec custom{"MyAccel-96GB", 96e9, 500e12, 50e12, 3e12};
  const CostTable t = builtin_cost(custom);
  EXPECT_FALSE(t.calibrated);
  const std::string text = cost_text(t);
  EXPECT_NE(text.find("warning: no calibrated cost table for GPU MyAccel-96GB"), std::string::npos) << text;
  EXPECT_NE(text.find("[default] table of data/cost/builtin.toml"), std::string::npos) << text;
  EXPECT_EQ(cost_json(t)["calibrated"], false);
  EXPECT_NE(cost_json(t)["warning"].get<std::string>().find("MyAccel-96GB"), std::string::npos);
  EXPECT_EQ(cost_text(builtin_cost(gpu_preset("a100-80g"))).find("warning"), std::string::npos);
}

// A cost file's `borrow` must name another GPU's table of the same file that borrows none.
TEST(CostCalibration, a_borrow_that_names_no_table_of_the_file_is_refused_naming_it) {
  for (const char* text : {"[b200-180g]\nborrow = \"h100-80g\"\n", "[b200-180g]\nborrow = \"b200-180g\"\n",
                           "[b200-180g]\nborrow = 3\n",
                           "[b200-180g]\nborrow = \"h100-80g\"\n[h100-80g]\nborrow = \"a100-80g\"\n[a100-80g]\n"}) {
    CostTable t;
    Problems p;
    apply_cost_toml(text, "mine.toml", gpu_preset("b200-180g"), t, p);
    ASSERT_FALSE(p.empty()) << text;
    EXPECT_NE(p.list()[0].what.find("borrow in [b200-180g] of mine.toml"), std::string::npos) << text << p.list()[0].what;
  }
  CostTable t;
  Problems p;
  apply_cost_toml("[b200-180g]\nborrow = \"h100-80g\"\nhbm_efficiency = 0.7\n[h100-80g]\ngemm_peak_efficiency = 0.6\n",
                  "mine.toml", gpu_preset("b200-180g"), t, p);
  EXPECT_TRUE(p.empty()) << (p.empty() ? "" : p.list()[0].what);
  EXPECT_EQ(t.gemm_peak_efficiency, 0.6);  // borrowed
  EXPECT_EQ(t.hbm_efficiency, 0.7);        // its own key over it
  EXPECT_EQ(t.borrowed_from, "h100-80g");
}
