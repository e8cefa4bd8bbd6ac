#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/chrome_trace.h"
#include "report/palette.h"
#include "report/pipeline_svg.h"
#include "report/sim_timeline.h"

namespace trident::sim {
namespace {

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

Timeline small_timeline(ScheduleKind kind = ScheduleKind::OneFOneB) {
  auto sc = build_schedule(kind, 3, 4, 1);
  auto costs = uniform_costs(3, 1, 1e-3, 2e-3, 1e-4);
  for (auto& st : costs.stages) {
    st.dp_reduce_s = 1e-3;
    st.dp_buckets = 2;
    st.optimizer_s = 5e-4;
  }
  return to_timeline(simulate(sc, costs), "test <model>", "subtitle & numbers");
}

TEST(Timeline, has_one_block_per_compute_action_and_named_rows) {
  const Timeline tl = small_timeline();
  ASSERT_EQ(tl.rows.size(), 3u);
  EXPECT_EQ(tl.rows[1], "stage 1");
  size_t f = 0, b = 0, dp = 0, opt = 0;
  for (const auto& blk : tl.blocks) {
    f += blk.kind == "F";
    b += blk.kind == "B";
    dp += blk.kind == "dp" && blk.lane == 1;
    opt += blk.kind == "opt";
  }
  EXPECT_EQ(f, 12u);
  EXPECT_EQ(b, 12u);
  EXPECT_EQ(dp, 6u);
  EXPECT_EQ(opt, 3u);
}

TEST(ChromeTrace, every_block_is_a_complete_event_on_its_stage_track) {
  const Timeline tl = small_timeline();
  const nlohmann::json j = chrome_trace_json(tl);
  size_t complete = 0, names = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_LT(e["tid"].get<int>(), 6);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") ++names;
  }
  EXPECT_EQ(complete, tl.blocks.size());
  EXPECT_EQ(names, 6u);  // 3 stages x (main, dp stream)
  // Round trip through a file, as Perfetto reads it.
  const std::string path = ::testing::TempDir() + "/trace.json";
  std::string error;
  ASSERT_TRUE(write_chrome_trace(tl, path, error)) << error;
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in)["traceEvents"].size(), j["traceEvents"].size());
  EXPECT_FALSE(write_chrome_trace(tl, "/nonexistent-dir/x.json", error));
  EXPECT_NE(error.find("cannot open"), std::string::npos);
}

TEST(PipelineSvg, draws_rows_blocks_axis_and_escapes_text) {
  const Timeline tl = small_timeline(ScheduleKind::ZeroBubbleH1);
  const std::string svg = pipeline_svg(tl);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("test &lt;model&gt;"), std::string::npos);
  EXPECT_NE(svg.find("subtitle &amp; numbers"), std::string::npos);
  // One <rect> with a tooltip per block.
  EXPECT_EQ(occurrences(svg, "<title>"), tl.blocks.size());
  EXPECT_NE(svg.find(">stage 2</text>"), std::string::npos);
  EXPECT_NE(svg.find("url(#idle)"), std::string::npos);
  // Weight-gradient blocks exist in ZB-H1 and get their own palette colour.
  const size_t w_block = svg.find("<title>W ");
  ASSERT_NE(w_block, std::string::npos);
  const std::string w_rect = svg.substr(svg.rfind("<rect", w_block), w_block - svg.rfind("<rect", w_block));
  EXPECT_NE(w_rect.find("fill=\"" + term_colour("W").fill + "\""), std::string::npos) << w_rect;
  EXPECT_NE(term_colour("W").fill, term_colour("F").fill);
  EXPECT_NE(term_colour("W").fill, term_colour("B").fill);
  // The step lasts ~20 ms: the axis is in ms.
  EXPECT_NE(svg.find(" ms</text>"), std::string::npos);
}

TEST(PipelineSvg, tick_steps_are_one_two_or_five_times_a_power_of_ten) {
  EXPECT_DOUBLE_EQ(nice_tick_step(6.947, 10), 1.0);
  EXPECT_DOUBLE_EQ(nice_tick_step(0.0217, 10), 0.005);
  EXPECT_DOUBLE_EQ(nice_tick_step(13.0, 10), 2.0);
  EXPECT_DOUBLE_EQ(nice_tick_step(100.0, 10), 10.0);
}

}  // namespace
}  // namespace trident::sim
