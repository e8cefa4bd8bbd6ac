// The placement probe's file and the prediction inputs taken from it (no MPI run: the numbers
// are given, the arithmetic is checked).
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/measure/placement_probe.h"

namespace trident::measure {
namespace {

PlacementProbe probe() {
  PlacementProbe p;
  p.ranks = 8, p.hosts = 2, p.ranks_per_host = 4, p.iterations = 200, p.gemm_n = 107, p.message_bytes = 8192;
  p.alone_cpu_s = 30e-6;
  p.intra = {true, 50e-6, 500e-6};
  p.inter = {true, 70e-6, 900e-6};
  return p;
}

TEST(PlacementProbe, ShareIsTheChunkAloneOverItsMeanWallTimeAndLatencyTheExchangeLessTheWire) {
  const PlacementInputs in = placement_inputs(probe(), 8192 / 10e-6, 8192 / 400e-6);
  EXPECT_DOUBLE_EQ(in.compute_share, 30e-6 / 60e-6);  // mean of 50 and 70 us
  EXPECT_NEAR(in.intra_wire_s, 10e-6, 1e-15);
  EXPECT_NEAR(in.intra_latency_s, 490e-6, 1e-12);
  EXPECT_NEAR(in.inter_wire_s, 400e-6, 1e-15);
  EXPECT_NEAR(in.inter_latency_s, 500e-6, 1e-12);
  for (const char* part : {"30.0 us (best CPU time) / its mean wall time in the probe 60.0 us", "= 0.500",
                           "inside a host latency: exchange 500.0 us - 8192 bytes", "= 490.0 us",
                           "between hosts latency: exchange 900.0 us", "(400.0 us) = 500.0 us"})
    EXPECT_NE(in.text.find(part), std::string::npos) << part << " in:\n" << in.text;
}

TEST(PlacementProbe, OneHostHasNoInterLatencyAndBoundsAreSaid) {
  PlacementProbe p = probe();
  p.inter = {};
  p.alone_cpu_s = 80e-6;       // faster in the probe than alone: a share above 1
  p.intra.exchange_s = 5e-6;   // below the wire time
  const PlacementInputs in = placement_inputs(p, 8192 / 10e-6, 1e9);
  EXPECT_DOUBLE_EQ(in.compute_share, 1.0);
  EXPECT_DOUBLE_EQ(in.intra_latency_s, 0.0);
  EXPECT_DOUBLE_EQ(in.inter_latency_s, 0.0);
  EXPECT_NE(in.text.find("(above 1: taken as 1)"), std::string::npos) << in.text;
  EXPECT_NE(in.text.find("(below 0: taken as 0)"), std::string::npos) << in.text;
  EXPECT_EQ(in.text.find("between hosts"), std::string::npos) << in.text;
}

TEST(PlacementProbe, FileRoundTripsAndAMissingKeyIsNamed) {
  const PlacementProbe p = probe_from_json(probe_json(probe()));
  EXPECT_EQ(p.ranks, 8);
  EXPECT_EQ(p.gemm_n, 107);
  EXPECT_DOUBLE_EQ(p.inter.exchange_s, 900e-6);
  nlohmann::json j = probe_json(probe());
  j["intra"].erase("exchange_s");
  try {
    probe_from_json(j);
    FAIL() << "no error for a missing key";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'exchange_s'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::measure
