// dmalab sweep on the simulator: nccl-tests' bandwidth arithmetic, the correctness counts, the
// CSV format, size parsing, and the speed of light as a lower bound of the ring's time.
#include "measure/sweep.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "measure/speed_of_light.h"
#include "measure/sweep_report.h"
#include "sim/sim_device.h"
#include "sim/topology.h"

namespace dmalab {
namespace {

constexpr int kWorld = 4;

// One GPU of 4 virtual ranks, small enough that a sweep of a few hundred KiB runs in a blink.
constexpr char kTopology[] = R"(name: test_gpu
gpus: 1
ranks_per_gpu: 4
copy_engines: 2
memory_gbps: 1000
links:
  local: {gbps: 400, latency_us: 4}
kernel: {launch_us: 1, overhead_us: 2, reduce_gbps: 800}
flag: {latency_us: 1}
host: {copy_us: 1, event_us: 0.5}
)";

class SweepTest : public testing::Test {
 protected:
  SweepTest() : topology_(*ParseTopology(kTopology, "test.yaml")), device_(kWorld, /*seed=*/7) {
    EXPECT_TRUE(device_.SetTopology(&topology_).ok());
  }
  DeviceClock Clock() {
    return [this] { return device_.now_us(); };
  }
  SweepOptions Small() {
    SweepOptions o;
    o.min_bytes = 64 << 10;
    o.max_bytes = 256 << 10;
    o.factor = 2;
    o.iters = 2;
    o.warmup = 1;
    return o;
  }

  Topology topology_;
  SimDevice device_;
};

TEST_F(SweepTest, BusBandwidthIsAlgorithmBandwidthTimesTwoWMinusOneOverW) {
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), Small());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  for (const SweepRow& r : *rows) {
    for (const SweepTiming* t : {&r.out_of_place, &r.in_place}) {
      ASSERT_GT(t->time_us, 0);
      EXPECT_DOUBLE_EQ(t->algbw_gbps, static_cast<double>(r.bytes) / (t->time_us * 1e3));
      EXPECT_DOUBLE_EQ(t->busbw_gbps, t->algbw_gbps * 2.0 * (kWorld - 1) / kWorld);
    }
    EXPECT_DOUBLE_EQ(r.sol_busbw_gbps,
                     static_cast<double>(r.bytes) / (r.sol_us * 1e3) * 2.0 * (kWorld - 1) / kWorld);
    EXPECT_DOUBLE_EQ(r.pct_sol, r.sol_us / r.out_of_place.time_us * 100.0);
  }
  EXPECT_TRUE(device_.findings().empty()) << device_.findings().ToString();
}

TEST_F(SweepTest, NativeWireHasNoWrongElementsAndNoRoundingColumn) {
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), Small());
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const SweepRow& r : *rows) {
    EXPECT_EQ(r.out_of_place.wrong, 0);
    EXPECT_EQ(r.in_place.wrong, 0);
    EXPECT_FALSE(r.out_of_place.rounded.has_value());
    EXPECT_FALSE(r.in_place.rounded.has_value());
  }
}

TEST_F(SweepTest, CompressedWireCountsRoundingApartFromWrongElements) {
  SweepOptions o = Small();
  o.wire = WireMode::kI8;
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const SweepRow& r : *rows) {
    EXPECT_EQ(r.out_of_place.wrong, 0);  // every rank holds rank 0's bytes
    ASSERT_TRUE(r.out_of_place.rounded.has_value());
    EXPECT_GT(*r.out_of_place.rounded, 0);  // int8 blocks cannot carry every integer sum
    EXPECT_EQ(r.in_place.wrong, 0);
  }
}

TEST_F(SweepTest, WithoutTheCheckNothingIsCounted) {
  SweepOptions o = Small();
  o.check = false;
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_FALSE(rows->front().out_of_place.wrong.has_value());
  EXPECT_FALSE(rows->front().in_place.wrong.has_value());
}

TEST_F(SweepTest, SpeedOfLightIsAtMostTheRingTime) {
  SweepOptions o = Small();
  o.max_bytes = 4 << 20;  // past kMinPieceBytes per piece: the ring runs 2 pieces too
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const SweepRow& r : *rows) {
    EXPECT_GT(r.sol_us, 0);
    EXPECT_LE(r.sol_us, r.out_of_place.time_us) << r.bytes << " bytes";
    EXPECT_LE(r.sol_us, r.in_place.time_us) << r.bytes << " bytes";
    EXPECT_LE(r.pct_sol, 100.0);
  }
}

TEST_F(SweepTest, SpeedOfLightIssuesTwoWMinusOneChunkCopiesPerRank) {
  absl::StatusOr<std::unique_ptr<SpeedOfLight>> sol = SpeedOfLight::Create(&device_, 1 << 20);
  ASSERT_TRUE(sol.ok()) << sol.status();
  ASSERT_TRUE(device_.Synchronize().ok());
  const int64_t before = device_.ops_executed();
  ASSERT_TRUE((*sol)->Enqueue(1 << 20).ok());
  ASSERT_TRUE(device_.Synchronize().ok());
  EXPECT_EQ(device_.ops_executed() - before, 2 * (kWorld - 1) * kWorld);
  EXPECT_EQ((*sol)->Enqueue(1000002).message(),
            "speed of light: size is 1000002 bytes; must be a positive multiple of the world "
            "size 4, at most 1048576");
}

// The timing model sees the same ops in both fidelities, so the shadow predicts the same times
// (without moving a byte); it cannot check results.
TEST_F(SweepTest, ShadowFidelityPredictsTheSameTimes) {
  SweepOptions o = Small();
  o.max_bytes = 4 << 20;
  o.check = false;
  absl::StatusOr<std::vector<SweepRow>> values = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(values.ok()) << values.status();
  SimDevice shadow(kWorld, /*seed=*/7, Fidelity::kShadow);
  ASSERT_TRUE(shadow.SetTopology(&topology_).ok());
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(
      shadow, [&shadow] { return shadow.now_us(); }, o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), values->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    EXPECT_EQ((*rows)[i].out_of_place.time_us, (*values)[i].out_of_place.time_us);
    EXPECT_EQ((*rows)[i].in_place.time_us, (*values)[i].in_place.time_us);
    EXPECT_EQ((*rows)[i].sol_us, (*values)[i].sol_us);
  }
  EXPECT_TRUE(shadow.findings().empty()) << shadow.findings().ToString();
  o.check = true;
  EXPECT_EQ(RunSweep(
                shadow, [&shadow] { return shadow.now_us(); }, o)
                .status()
                .message(),
            "sweep: -c 1 compares results with the exact sum, but device 'sim' runs in the shadow "
            "fidelity and keeps no values; use -c 0 (times only)");
}

TEST_F(SweepTest, GraphReplaysOnTheSimulatorGiveExactSums) {
  SweepOptions o = Small();
  o.graph = true;
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_FALSE(rows->empty());
  for (const SweepRow& row : *rows) {
    EXPECT_EQ(row.out_of_place.wrong, std::optional<int64_t>(0)) << row.bytes;
    EXPECT_EQ(row.in_place.wrong, std::optional<int64_t>(0)) << row.bytes;
  }
  EXPECT_TRUE(device_.findings().empty()) << device_.findings().ToString();
}

TEST(SweepSizesTest, CountsRoundDownToTheRingGranuleAndSkipRepeats) {
  SweepOptions o;
  o.min_bytes = 100;
  o.max_bytes = 1000;
  o.factor = 2;
  // bf16, 4 ranks: multiples of 32 elements; 100 B = 50 -> 32, 200 -> 96, 400 -> 192, 800 -> 384.
  EXPECT_EQ(*SweepCounts(o, 4), (std::vector<int64_t>{32, 96, 192, 384}));
  o.min_bytes = 64;
  o.max_bytes = 127;
  EXPECT_EQ(*SweepCounts(o, 4), (std::vector<int64_t>{32}));
  o.wire = WireMode::kI8;  // compressed: multiples of 4 * 128 elements
  o.min_bytes = 1024;
  o.max_bytes = 4096;
  EXPECT_EQ(*SweepCounts(o, 4), (std::vector<int64_t>{512, 1024, 2048}));
}

TEST(SweepSizesTest, BadRangesAreNamed) {
  SweepOptions o;
  o.min_bytes = 2048;
  o.max_bytes = 1024;
  EXPECT_EQ(SweepCounts(o, 4).status().message(),
            "sweep: -b is 2048 bytes and -e 1024; need 0 < b <= e");
  o.max_bytes = 4096;
  o.factor = 1;
  EXPECT_EQ(SweepCounts(o, 4).status().message(), "sweep: -f is 1; must be >= 2");
  o.factor = 2;
  o.min_bytes = 2;
  o.max_bytes = 8;
  EXPECT_EQ(SweepCounts(o, 4).status().message(),
            "sweep: no size in [2, 8] bytes holds a multiple of 32 bf16 elements");
}

TEST(SweepReportTest, CsvHasTheDocumentedHeaderAndOneLinePerRow) {
  SweepContext context;
  context.backend = "sim";
  context.ranks = 4;
  SweepRow row;
  row.bytes = 1 << 20;
  row.count = 1 << 19;
  row.out_of_place = {100, 10.48576, 15.72864, 0, std::nullopt};
  row.in_place = {200, 5.24288, 7.86432, std::nullopt, std::nullopt};
  row.sol_us = 50;
  row.sol_busbw_gbps = 31.45728;
  row.pct_sol = 50;
  const std::string csv = SweepCsv(context, {row, row});
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n');
  ASSERT_EQ(lines.size(), 4u);  // header, two rows, the empty string after the last newline
  EXPECT_EQ(lines[0],
            "size_bytes,count,type,wire,oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,"
            "oop_rounded,ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,ip_rounded,sol_us,"
            "sol_busbw_gbps,pct_sol,backend,ranks,pieces");
  EXPECT_EQ(lines[1],
            "1048576,524288,bf16,bf16,100,10.48576,15.72864,0,,200,5.24288,7.86432,,,50,31.45728,"
            "50,sim,4,2");
  EXPECT_EQ(lines[2], lines[1]);
  EXPECT_EQ(lines[3], "");
}

TEST(SweepReportTest, TableRowShowsUncheckedCountsAsNotAvailable) {
  SweepRow row;
  row.bytes = 4096;
  row.count = 2048;
  const std::string line = SweepTableRow(row);
  EXPECT_NE(line.find("N/A"), std::string::npos) << line;
}

}  // namespace
}  // namespace dmalab
