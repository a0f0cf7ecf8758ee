// dmalab sweep on the simulator: nccl-tests' bandwidth arithmetic, the correctness counts, the
// CSV format, size parsing, and the speed of light as a lower bound of the ring's time.
#include "measure/sweep.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/ring/ring_planner.h"
#include "gtest/gtest.h"
#include "measure/host_cost.h"
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

// Forwards to the simulator, breaking one way: once the ring has enqueued a reduce kernel, every
// Synchronize reports the device lost (as a GPU's sticky error would); or every Read fails.
class BreakingDevice : public HostCostDevice {
 public:
  enum class Break { kSynchronizeAfterAReduce, kRead };
  BreakingDevice(Device& inner, DeviceClock clock, Break how)
      : HostCostDevice(inner, std::move(clock)), how_(how) {}
  absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                      absl::Span<const Operand> terms, int64_t elems,
                      std::string_view label) override {
    reduced_ = true;
    return HostCostDevice::Reduce(stream, dtype, dst, terms, elems, label);
  }
  absl::Status Synchronize() override {
    if (how_ == Break::kSynchronizeAfterAReduce && reduced_) {
      return absl::InternalError("device lost");
    }
    return HostCostDevice::Synchronize();
  }
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override {
    if (how_ == Break::kRead) return absl::UnavailableError("read failed");
    return HostCostDevice::Read(src, bytes);
  }

 private:
  Break how_;
  bool reduced_ = false;
};

// A device error while the ring runs is the collective's failure (dmalab sweep: exit 1), named
// with the size and the phase; an error of the sweep's own reading back is not (exit 2).
TEST_F(SweepTest, ADeviceErrorWhileTheRingRunsIsMarkedTheCollectivesFailure) {
  BreakingDevice lost(device_, Clock(), BreakingDevice::Break::kSynchronizeAfterAReduce);
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(lost, Clock(), Small());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(IsCollectiveFailure(rows.status()));
  EXPECT_EQ(rows.status().message(), "the all-reduce of 64 KiB (out of place) failed: device lost");

  BreakingDevice unreadable(device_, Clock(), BreakingDevice::Break::kRead);
  rows = RunSweep(unreadable, Clock(), Small());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(IsCollectiveFailure(rows.status()));
  EXPECT_EQ(rows.status().message(), "read failed");
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

// The plan's peer copies at 1 MiB over 4 ranks: chunks of 256 KiB (one piece: under 512 KiB a
// piece is not split), 2(W-1) = 6 hops. A native wire sends each chunk as bf16; i8_ring sends
// every hop as int8 blocks, 128 bytes of values plus a 4-byte fp32 scale per 128 elements; i8
// reduces in bf16 and sends only the all-gather's 3 hops as blocks.
TEST_F(SweepTest, SpeedOfLightCopiesTheBytesThePlanSends) {
  constexpr uint64_t kChunk = (1 << 20) / kWorld;                   // 262144 bytes
  constexpr uint64_t kEncoded = kChunk / 2 + kChunk / 2 / 128 * 4;  // 131072 + 4096
  const auto copies = [](WireMode wire) {
    RingPlanRequest request;
    request.world = kWorld;
    request.elems = (1 << 20) / 2;
    request.wire = wire;
    request.max_bytes = 1 << 20;
    absl::StatusOr<RingPlan> plan = PlanRing(request);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? PeerCopyBytes(*plan) : std::vector<std::vector<uint64_t>>{};
  };
  using Copies = std::vector<std::vector<uint64_t>>;
  EXPECT_EQ(copies(WireMode::kNative), Copies(kWorld, std::vector<uint64_t>(6, kChunk)));
  EXPECT_EQ(copies(WireMode::kI8Ring), Copies(kWorld, std::vector<uint64_t>(6, kEncoded)));
  EXPECT_EQ(copies(WireMode::kI8),
            Copies(kWorld, {kChunk, kChunk, kChunk, kEncoded, kEncoded, kEncoded}));
}

// On a GPU with engines and memory to spare and free host calls, each rank's 6 copies run back
// to back on its stream while the ranks run side by side: a round takes 6 x (latency + bytes /
// rate) = 6 x (4 us + bytes / 400 GB/s).
TEST(SpeedOfLightTest, RoundTimeOnTheSimulatorIsSixCopiesOfTheSentBytes) {
  const Topology roomy = *ParseTopology(R"(name: roomy
gpus: 1
ranks_per_gpu: 4
copy_engines: 8
memory_gbps: 100000
links:
  local: {gbps: 400, latency_us: 4}
kernel: {launch_us: 0, overhead_us: 2, reduce_gbps: 800}
flag: {latency_us: 1}
host: {copy_us: 0, event_us: 0}
)",
                                        "roomy.yaml");
  SimDevice device(kWorld, /*seed=*/3);
  ASSERT_TRUE(device.SetTopology(&roomy).ok());
  absl::StatusOr<std::unique_ptr<SpeedOfLight>> sol = SpeedOfLight::Create(&device, 1 << 20);
  ASSERT_TRUE(sol.ok()) << sol.status();
  const DeviceClock clock = [&device] { return device.now_us(); };
  for (const auto& [wire, us] : {std::pair{WireMode::kNative, 6 * (4 + 262144 / 400e3)},
                                 std::pair{WireMode::kI8Ring, 6 * (4 + 135168 / 400e3)}}) {
    RingPlanRequest request;
    request.world = kWorld;
    request.elems = (1 << 20) / 2;
    request.wire = wire;
    request.max_bytes = 1 << 20;
    absl::StatusOr<RingPlan> plan = PlanRing(request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const int64_t before = device.ops_executed();
    absl::StatusOr<double> round = (*sol)->MeasureUs(*plan, clock, /*warmup=*/1, /*iters=*/3);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_NEAR(*round, us, 1e-9) << WireModeName(wire);
    EXPECT_EQ(device.ops_executed() - before, 4 * 6 * kWorld);  // 1 + 3 rounds of 24 copies
  }
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
  EXPECT_EQ((*sol)->Enqueue({{1}, {1}, {1}, {(1 << 20) + 1}}).message(),
            "speed of light: rank 3 has a copy of 1048577 bytes; must be in [1, 1048576]");
  EXPECT_EQ((*sol)->Enqueue({{1}}).message(),
            "speed of light: 1 ranks' copies for a device of 4 ranks");
}

// Timed like the ring: eagerly, a round of 24 copies costs the host 24 x 10 us and the host sets
// the pace (the last copy, enqueued at 3 x 240 us, still runs 4 + 262144 / 400e3 us); with
// graphs, each round is one launch (1 us, kernel.launch_us) and the device sets the pace, 6
// copies per stream after the first launch.
TEST(SpeedOfLightTest, WithGraphsTheRoundIsReplayedAsTheRingsGraphCacheIs) {
  const Topology hosty = *ParseTopology(R"(name: hosty
gpus: 1
ranks_per_gpu: 4
copy_engines: 8
memory_gbps: 100000
links:
  local: {gbps: 400, latency_us: 4}
kernel: {launch_us: 1, overhead_us: 2, reduce_gbps: 800}
flag: {latency_us: 1}
host: {copy_us: 10, event_us: 0}
)",
                                        "hosty.yaml");
  RingPlanRequest request;
  request.world = kWorld;
  request.elems = (1 << 20) / 2;
  request.max_bytes = 1 << 20;
  absl::StatusOr<RingPlan> plan = PlanRing(request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double copy_us = 4 + 262144 / 400e3;
  for (const bool graphs : {false, true}) {
    SimDevice device(kWorld, /*seed=*/5);
    ASSERT_TRUE(device.SetTopology(&hosty).ok());
    absl::StatusOr<std::unique_ptr<SpeedOfLight>> sol =
        SpeedOfLight::Create(&device, 1 << 20, graphs);
    ASSERT_TRUE(sol.ok()) << sol.status();
    absl::StatusOr<double> round = (*sol)->MeasureUs(
        *plan, [&device] { return device.now_us(); }, /*warmup=*/1,
        /*iters=*/3);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_NEAR(*round, graphs ? (1 + 3 * 6 * copy_us) / 3 : (3 * 240 + copy_us) / 3, 1e-9)
        << (graphs ? "graphs" : "eager");
    EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
  }
}

// A compressed wire moves fewer bytes than bf16: its speed of light counts what it sends, so the
// ring stays below 100% of it (counting bf16 bytes had put i8_ring at 163%).
TEST_F(SweepTest, CompressedWireStaysBelowItsSpeedOfLight) {
  SweepOptions o = Small();
  o.max_bytes = 4 << 20;
  o.wire = WireMode::kI8Ring;
  o.check = false;
  absl::StatusOr<std::vector<SweepRow>> rows = RunSweep(device_, Clock(), o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const SweepRow& r : *rows) {
    EXPECT_LE(r.sol_us, r.out_of_place.time_us) << r.bytes << " bytes";
    EXPECT_LE(r.pct_sol, 100.0) << r.bytes << " bytes";
  }
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
            "sol_busbw_gbps,pct_sol,backend,ranks,pieces,gpus,graph");
  EXPECT_EQ(lines[1],
            "1048576,524288,bf16,bf16,100,10.48576,15.72864,0,,200,5.24288,7.86432,,,50,31.45728,"
            "50,sim,4,2,1,0");
  EXPECT_EQ(lines[2], lines[1]);
  EXPECT_EQ(lines[3], "");
}

// The report tests' row: 1 MiB of bf16, checked out of place (0 wrong), unchecked in place.
SweepRow ReportRow() {
  SweepRow row;
  row.bytes = 1 << 20;
  row.count = 1 << 19;
  row.out_of_place = {100, 10.48576, 15.72864, 0, std::nullopt};
  row.in_place = {200, 5.24288, 7.86432, std::nullopt, std::nullopt};
  row.sol_us = 50;
  row.sol_busbw_gbps = 31.45728;
  row.pct_sol = 50;
  return row;
}

SweepContext ReportContext() {
  SweepContext c;
  c.backend = "sim";
  c.device = "sim";
  c.topology = "t.yaml";
  c.ranks = 4;
  c.gpus = 1;
  c.devices = {{0, 4242, "gpuhost", 0, "0000:9a:00", "NVIDIA H200"}};
  c.args = {"dmalab", "sweep"};
  c.start_time = "2025-01-31 12:00:00";
  c.end_time = "2025-01-31 12:00:05";
  return c;
}

// nccl-tests' cells: 2 decimals while the whole part leaves room, then 1, then 0, then an
// exponent.
TEST(SweepReportTest, NumbersNarrowTheirDecimalsAsNcclTestsDoes) {
  EXPECT_EQ(NcclNumber(0.5, 7), "   0.50");
  EXPECT_EQ(NcclNumber(100, 7), " 100.00");
  EXPECT_EQ(NcclNumber(12345.678, 7), "12345.7");
  EXPECT_EQ(NcclNumber(123456.7, 7), " 123457");
  EXPECT_EQ(NcclNumber(1234567, 7), "1234567");
  EXPECT_EQ(NcclNumber(12345678, 7), "1.2e+07");
  EXPECT_EQ(NcclNumber(5.24288, 6), "  5.24");
  EXPECT_EQ(NcclNumber(1234.5, 6), "1234.5");
  EXPECT_EQ(NcclNumber(0, 6), "  0.00");
}

// size count type redop root, then time algbw busbw #wrong twice (nccl-tests' widths), then
// wire, #round twice, sol, %sol.
TEST(SweepReportTest, TableRowIsNcclTestsRowThenDmalabColumns) {
  EXPECT_EQ(SweepTableRow(ReportRow()),
            std::string("     1048576        524288  bfloat16     sum      -1") +
                "   100.00   10.49   15.73       0" + "   200.00    5.24    7.86    N/A" +
                "       bf16        -        -      50.00    50.0\n");
  SweepRow fp32 = ReportRow();
  fp32.dtype = DType::kFP32;
  fp32.wire = WireMode::kNative;
  fp32.out_of_place.wrong = 12;
  fp32.in_place.rounded = 3;
  const std::string line = SweepTableRow(fp32);
  EXPECT_EQ(line.substr(26, 10), "     float") << line;
  EXPECT_EQ(line.substr(77, 8), "      12") << line;
  EXPECT_EQ(line.substr(line.size() - 37), "       -        3      50.00    50.0\n") << line;
}

TEST(SweepReportTest, HeaderHasNcclTestsLinesAndColumns) {
  SweepContext c = ReportContext();
  const std::string header = SweepTableHeader(c);
  EXPECT_NE(header.find("\n# Collective test starting: dmalab_sweep\n# nThread 1 nGpus 4 minBytes "
                        "1048576 maxBytes 16777216 step: 2(factor) warmup iters: 5 iters: 20 agg "
                        "iters: 1 validation: 1 graph: 0 unalign: 0\n#\n# Using devices\n"
                        "#  Rank  0 Group  0 Pid   4242 on    gpuhost device  0 [0000:9a:00] "
                        "NVIDIA H200\n#\n"),
            std::string::npos)
      << header;
  // nccl-tests reads its rank lines back with this pattern (util.cu, parseRankInfo).
  const size_t at = header.find("#  Rank");
  int rank = -1, group = -1, pid = -1, device = -1, end = 0;
  char host[64] = "", hex[32] = "", info[64] = "";
  ASSERT_EQ(std::sscanf(header.c_str() + at,
                        "#  Rank %d Group %d Pid %d on %63s device %d "
                        "[%31[^]]] %63[^\n]\n%n",
                        &rank, &group, &pid, host, &device, hex, info, &end),
            7);
  EXPECT_EQ(std::string(host) + " " + hex + " " + info, "gpuhost 0000:9a:00 NVIDIA H200");
  EXPECT_EQ(pid, 4242);
  // The column line: nccl-tests' names, then dmalab's.
  const std::vector<std::string> lines = absl::StrSplit(header, '\n');
  std::vector<std::string> names;
  for (const std::string& l : lines) {
    if (l.rfind("#       size", 0) == 0) names = absl::StrSplit(l, ' ', absl::SkipEmpty());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"#", "size", "count", "type", "redop", "root", "time",
                                             "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                                             "#wrong", "wire", "#round", "#round", "sol", "%sol"}));
}

TEST(SweepReportTest, TrailerHasOutOfBoundsAndAverageBusBandwidth) {
  const SweepContext c = ReportContext();
  // busbw over both rows and both modes: (15.72864 + 7.86432) / 2.
  EXPECT_EQ(SweepTableFooter(c, {ReportRow(), ReportRow()}),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 11.7965 \n#\n"
            "# Collective test concluded: dmalab_sweep\n");
  SweepRow bad = ReportRow();
  bad.out_of_place.wrong = 2;
  bad.in_place.wrong = 1;
  EXPECT_EQ(SweepTableFooter(c, {bad}).substr(0, 38), "# Out of bounds values : 3 FAILED\n# Av");
  EXPECT_DOUBLE_EQ(AverageBusBandwidth({}), 0);
}

TEST(SweepReportTest, NcclJsonIsNcclTestsVersionTwoWithDmalabKeys) {
  EXPECT_EQ(SweepNcclJson(ReportContext(), {ReportRow()}),
            "{\"version\":2,\"start_time\":\"2025-01-31 12:00:00\",\"args\":[\"dmalab\",\"sweep\"],"
            "\"env\":[],\"nccl_version\":0,\"config\":{\"nthreads\":1,\"ngpus\":4,"
            "\"minimum_bytes\":1048576,\"maximum_bytes\":16777216,\"step_factor\":2,"
            "\"warmup_iters\":5,\"iterations\":20,\"aggregated_iterations\":1,\"validation\":1,"
            "\"graph\":0,\"blocking_collectives\":\"false\",\"per_iter_timing\":\"false\","
            "\"parallel_init\":\"false\",\"devices\":[{\"rank\":0,\"group\":0,\"pid\":4242,"
            "\"hostname\":\"gpuhost\",\"device\":0,\"device_hex\":\"0000:9a:00\","
            "\"device_info\":\"NVIDIA H200\"}]},\"dmalab\":{\"backend\":\"sim\",\"device\":\"sim\","
            "\"topology\":\"t.yaml\",\"ranks\":4,\"gpus\":1,\"dtype\":\"bf16\",\"wire\":\"bf16\","
            "\"pieces\":2},\"results\":[{\"size\":1048576,\"count\":524288,\"type\":\"bfloat16\","
            "\"redop\":\"sum\",\"root\":\"    -1\",\"out_of_place\":{\"time\":100.000000,"
            "\"alg_bw\":10.485760,\"bus_bw\":15.728640,\"nwrong\":0.000000},\"in_place\":{"
            "\"time\":200.000000,\"alg_bw\":5.242880,\"bus_bw\":7.864320,\"nwrong\":null},"
            "\"actual_iterations\":20,\"experiment_name\":\"\",\"dmalab\":{\"wire\":\"bf16\","
            "\"out_of_place_rounded\":null,\"in_place_rounded\":null,\"sol_us\":50.000000,"
            "\"sol_bus_bw\":31.457280,\"pct_sol\":50.000000}}],\"out_of_bounds\":{\"count\":0,"
            "\"okay\":\"true\"},\"average_bus_bandwidth\":{\"bandwidth\":11.796480,"
            "\"okay\":\"unchecked\"},\"errors\":[],\"end_time\":\"2025-01-31 12:00:05\"}\n");
}

}  // namespace
}  // namespace dmalab
