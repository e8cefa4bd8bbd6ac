// No silent borrowing: a GPU without a table of its own in data/cost/builtin.toml is estimated
// with the [default] (A100) values, and every report says so, naming the table.
#include <gtest/gtest.h>

#include "core/cost_table.h"
#include "report/plan_report.h"

using namespace trident;

TEST(CostCalibration, a_gpu_without_a_table_of_its_own_is_warned_about_naming_the_table) {
  for (const char* key : {"a100-80g", "a100-40g", "a100-pcie-40g", "h100-80g", "h200-141g", "gb200-186g"})
    EXPECT_TRUE(builtin_cost(gpu_preset(key)).calibrated) << key;
  // No published B200 run is fitted: it borrows a table and says so.
  EXPECT_FALSE(builtin_cost(gpu_preset("b200-180g")).calibrated);
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
