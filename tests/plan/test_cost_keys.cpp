// The cost table's keys against the prediction: every key the table prints (describe, --help,
// the [cost] table) moves the predicted step of some run when its value moves, and a value
// outside the key's range is refused with key, value and range, never turned into a NaN step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cost_table.h"
#include "core/run_spec.h"
#include "plan/estimate.h"

using namespace trident;

namespace {

OptionValues options(const std::vector<std::pair<std::string, std::string>>& kv) {
  OptionValues v(concat({model_options(), cluster_options(), layout_options(), execution_options(), cost_options()}));
  for (const auto& [k, x] : kv) v.set(k, x, "--" + k);
  return v;
}

// Runs that between them use every term of the step-time model: FP8 with flash attention and
// overlapped TP / DP across InfiniBand nodes; ZeRO-1 with a fixed optimizer traffic; a PCIe box;
// a mixture of experts over ep 8; the PCIe box's small model at micro-batch 1 is host-bound.
std::vector<RunSpec> runs() {
  const std::vector<std::pair<std::string, std::string>> base = {
      {"model", "gpt3-1.3b"}, {"global-batch-size", "64"}, {"micro-batch-size", "1"}};
  auto with = [&](std::vector<std::pair<std::string, std::string>> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return resolve_run(options(more), true);
  };
  return {
      // Micro-batches of 8: the GPU's work, not the host's issue (plan/host_issue.h), paces it.
      with({{"cluster", "dgx-h100"}, {"nodes", "2"}, {"tp", "2"}, {"pp", "2"}, {"dp", "4"}, {"precision", "fp8"},
            {"attention", "flash"}, {"overlap", "all"}, {"micro-batch-size", "8"}}),
      with({{"cluster", "dgx-a100-80g"}, {"nodes", "2"}, {"tp", "8"}, {"dp", "2"}, {"zero", "1"},
            {"optimizer-bytes-per-param", "20"}}),
      with({{"cluster", "dgx-a100-80g"}, {"nodes", "1"}, {"tp", "2"}, {"dp", "4"}, {"kernel-launch-us", "5"}}),
      with({{"cluster", "pcie-a100-40g"}, {"nodes", "1"}, {"dp", "8"}, {"model", "gpt3-125m"}}),
      // Expert parallel: the EP all-to-all (alltoall_efficiency).
      with({{"cluster", "dgx-h100"}, {"nodes", "2"}, {"dp", "16"}, {"ep", "8"}, {"model", "mixtral-8x7b"}}),
  };
}

double step_s(const RunSpec& r, const CostTable& c) { return plan::estimate(r, 0, c).time.step; }

}  // namespace

TEST(CostKeys, every_printed_key_changes_the_predicted_step) {
  const std::vector<RunSpec> all = runs();
  for (const CostField& f : cost_fields()) {
    bool moves = false;
    for (const RunSpec& r : all) {
      CostTable c = cost_table(r);
      const double before = step_s(r, c);
      ASSERT_TRUE(std::isfinite(before) && before > 0) << f.name;
      // Halved (or, from 0, set to a tenth of its range's top): still inside the range.
      c.*(f.member) = c.*(f.member) > 0 ? c.*(f.member) / 2 : f.max / 10;
      const double after = step_s(r, c);
      ASSERT_TRUE(std::isfinite(after) && after > 0) << f.name;
      moves = moves || std::abs(after - before) > 1e-9 * before;
    }
    EXPECT_TRUE(moves) << "cost key " << f.name << " is printed but changes no predicted step";
  }
}

TEST(CostKeys, a_value_outside_its_range_is_refused_naming_key_value_and_range) {
  const GpuSpec gpu = gpu_preset("a100-80g");
  for (const CostField& f : cost_fields()) {
    std::string flag = f.name;
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    std::vector<double> bad = {f.max * 2, -1};
    if (f.above_min) bad.push_back(f.min);  // 0: a share that divides a time by zero
    for (double v : bad) {
      Problems p;
      resolve_cost(options({{flag, fmt::format("{:g}", v)}}), gpu, p);
      ASSERT_EQ(p.size(), 1u) << flag << " " << v;
      const std::string what = p.list()[0].what;
      EXPECT_NE(what.find("--" + flag + " " + fmt::format("{:g}", v)), std::string::npos) << what;
      EXPECT_NE(what.find(range_text(f)), std::string::npos) << what;
      EXPECT_EQ(p.list()[0].code, "cost-range");
      // The same key in a cost file.
      Problems q;
      CostTable t;
      apply_cost_toml(fmt::format("[default]\n{} = {:g}\n", f.name, v), "c.toml", gpu, t, q);
      ASSERT_EQ(q.size(), 1u) << f.name << " " << v;
      EXPECT_NE(q.list()[0].what.find(std::string("'") + f.name + "'"), std::string::npos) << q.list()[0].what;
      EXPECT_NE(q.list()[0].what.find(range_text(f)), std::string::npos) << q.list()[0].what;
    }
    // The ends of the range are inside it.
    Problems ok;
    resolve_cost(options({{flag, fmt::format("{:g}", f.max)}}), gpu, ok);
    EXPECT_TRUE(ok.empty()) << flag;
  }
}
