// Floating-point and integer option values, and silent acceptance in config files: every option
// of the one table is range-checked in one place (OptionValues::get_int / get_double).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/options.h"
#include "core/run_spec.h"

using namespace trident;

namespace {

OptionValues with(const std::string& name, const std::string& value) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options(),
                         {{"comm-timeout", "distributed", "seconds", false, "NUM", "300", 0.001, 86400}}}));
  v.set(name, value, "--" + name);
  return v;
}

}  // namespace

TEST(OptionRange, nan_inf_and_negative_reals_are_refused_with_the_range) {
  for (const char* bad : {"nan", "inf", "-inf", "-1", "1e400"}) {
    Problems p;
    EXPECT_FALSE(with("gpu-memory-gib", bad).get_double("gpu-memory-gib", p)) << bad;
    ASSERT_EQ(p.size(), 1u) << bad;
  }
  Problems p;
  EXPECT_FALSE(with("comm-timeout", "nan").get_double("comm-timeout", p));  // must not disable stall detection
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p.list()[0].fix.find("0.001 to 86400"), std::string::npos) << p.list()[0].fix;
  Problems ok;
  EXPECT_EQ(*with("comm-timeout", "60").get_double("comm-timeout", ok), 60);
  EXPECT_TRUE(ok.empty());
}

TEST(OptionRange, integers_must_fit_an_int_and_divisors_are_positive) {
  Problems p;
  EXPECT_FALSE(with("tp", "2147483648").get_int("tp", p));
  EXPECT_FALSE(with("gpus-per-node", "0").get_int("gpus-per-node", p));
  EXPECT_FALSE(with("nodes", "-1").get_int("nodes", p));
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NE(p.list()[0].what.find("2147483648"), std::string::npos);
  EXPECT_NE(p.list()[1].fix.find("from 1 to"), std::string::npos) << p.list()[1].fix;
  // The whole run is refused with exit-code-2 problems, not a division by zero.
  EXPECT_THROW(resolve_run(with("gpus-per-node", "0"), true), InputError);
}

TEST(ConfigFile, a_directory_a_device_and_keys_set_twice_are_errors) {
  OptionValues v(concat({execution_options()}));
  Problems p;
  v.load_toml_file(std::filesystem::temp_directory_path().string(), p);
  v.load_toml_file("/dev/zero", p);  // would never end if read
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p.list()[0].what.find("directory"), std::string::npos);
  EXPECT_NE(p.list()[1].what.find("is a character device, not a regular file"), std::string::npos) << p.list()[1].what;
  Problems q;
  v.load_toml_text("global_batch_size = 8\nglobal-batch-size = 16\n[training]\nglobal-batch-size = 32\n", "a.toml", q);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_NE(q.list()[0].what.find("a second time"), std::string::npos) << q.list()[0].what;
}

// --cost went through its own reader, which read /dev/zero for ever and took a directory as an
// empty table (exit 0): it now reads through the same checked reader as --config.
TEST(ConfigFile, a_cost_table_that_is_a_device_or_a_directory_is_refused) {
  for (const std::string path : {std::string("/dev/zero"), std::filesystem::temp_directory_path().string()}) {
    OptionValues v(concat({cost_options()}));
    v.set("cost", path, "--cost");
    Problems p;
    resolve_cost(v, gpu_preset("a100-80g"), p);
    ASSERT_EQ(p.size(), 1u) << path;
    EXPECT_EQ(p.list()[0].code, "cost-file");
    EXPECT_NE(p.list()[0].what.find("cost table '" + path + "' is a"), std::string::npos) << p.list()[0].what;
    EXPECT_NE(p.list()[0].fix.find("--cost"), std::string::npos) << p.list()[0].fix;
  }
}
