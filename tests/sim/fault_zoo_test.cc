// The fault injections of the bug zoo (include/dmalab/faults.h), each caught by the checker that
// owns its invariant, and silent without the fault.
#include <string>

#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

struct ReplayRun {
  ReplayReport report;
  FindingLog device;  // the simulator's own checkers
};

// Replays YAML text on a SimDevice with `seed`.
ReplayRun ReplayText(const std::string& yaml, FaultSet faults, uint64_t seed = 1) {
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  SimDevice dev(s->world, seed);
  ReplayOptions options;
  options.faults = faults;
  absl::StatusOr<ReplayReport> r = Replay(*s, &dev, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return ReplayRun{*r, dev.findings()};
}

std::string InPlaceThenAdd(int world) {
  return "world: " + std::to_string(world) + R"(
tensors: {x: [8, 384], r: [8, 384]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - fill: {tensor: r, kind: int, lo: -8, hi: 8, seed: 2}
  - all_reduce: {input: x, in_place: true}
  - add: {dst: x, a: x, b: r}
  - all_reduce: {input: x, in_place: true}
)";
}

constexpr char kOutOfPlace[] = R"(world: 4
tensors: {x: [8, 512], y: [8, 512]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - all_reduce: {input: x, result: y}
  - release: y
  - all_reduce: {input: x, result: y}
)";

constexpr char kOutFreedAndReplaced[] = R"(world: 2
tensors: {x: [4, 256], y1: [4, 256], y2: [4, 256]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - fill: {tensor: y1, kind: int, lo: 0, hi: 0}
  - all_reduce: {input: x, out: y1}
  - release: y1
  - fill: {tensor: y2, kind: int, lo: 0, hi: 0}
  - all_reduce: {input: x, out: y2}
)";

constexpr char kCompressed[] = R"(world: 4
wire: i8
tensors: {x: [4, 512], y: [4, 512]}
steps:
  - fill: {tensor: x, kind: random, seed: 1}
  - all_reduce: {input: x, result: y}
)";

TEST(FaultZooTest, EveryFaultNameParsesBackToItself) {
  for (Fault f : AllFaults()) {
    absl::StatusOr<FaultSet> set = FaultSet::Parse(FaultName(f));
    ASSERT_TRUE(set.ok()) << FaultName(f);
    EXPECT_EQ(set->ToString(), FaultName(f));
  }
}

TEST(FaultZooTest, InPlaceDefaultPlanIsTheOutOfPlacePlan) {
  for (int world : {2, 3, 4, 7}) {
    RingPlanRequest req;
    req.world = world;
    req.elems = world * 8 * 1024;
    req.max_bytes = req.elems * 2;
    const std::string out_of_place = PlanRing(req)->ToString();
    req.in_place = true;
    EXPECT_EQ(PlanRing(req)->ToString(), out_of_place) << "world " << world;
  }
}

// A replay reads every result back, and that host synchronization would order the caller's
// next step after everything; a model does not synchronize, so the caller here does not either.
FindingLog InPlaceThenAddWithoutSync(FaultSet faults, uint64_t seed) {
  constexpr int kWorld = 3;
  constexpr int64_t kElems = kWorld * 8 * 128;
  SimDevice dev(kWorld, seed);
  DmaAllReduceOptions options;
  options.max_bytes = kElems * 2;
  options.faults = faults;
  std::unique_ptr<DmaAllReduce> ar = *DmaAllReduce::Create(&dev, options);
  std::vector<TensorView> x;
  for (int r = 0; r < kWorld; ++r) {
    const MemRef mem = *dev.Allocate(r, kElems * 2, "x");
    EXPECT_TRUE(dev.Write(mem, std::vector<uint8_t>(kElems * 2, 0)).ok());
    x.push_back(TensorView{mem, DType::kBF16, {kElems}, true});
  }
  EXPECT_TRUE(ar->AllReduce(x, x).ok());
  for (int r = 0; r < kWorld; ++r) {
    const Operand op{x[r].mem};
    EXPECT_TRUE(
        dev.Reduce(dev.ComputeStream(r), DType::kBF16, op, {op, op}, kElems, "caller add").ok());
  }
  EXPECT_TRUE(dev.Synchronize().ok());
  return dev.findings();
}

TEST(FaultZooTest, EarlyReturnRacesTheCallersNextWriteWithTheOwnSendCopy) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const FindingLog faulty = InPlaceThenAddWithoutSync(FaultSet().Add(Fault::kEarlyReturn), seed);
    ASSERT_GE(faulty.Count(FindingKind::kRace), 1) << "seed " << seed;
    EXPECT_THAT(faulty.findings()[0].message, HasSubstr("ag.k0.p0 copy"));
    EXPECT_THAT(faulty.findings()[0].message, HasSubstr("caller add'"));
    EXPECT_TRUE(InPlaceThenAddWithoutSync({}, seed).empty()) << "seed " << seed;
  }
}

TEST(FaultZooTest, FlagReadyNotConsumedRacesTheAllGatherWithTheReduceScatterRead) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const ReplayRun run =
        ReplayText(kOutOfPlace, FaultSet().Add(Fault::kFlagReadyNotConsumed), seed);
    ASSERT_GE(run.device.Count(FindingKind::kRace), 1) << "seed " << seed;
    EXPECT_THAT(run.device.findings()[0].message, HasSubstr("rs.k0.p0 reduce"));
    EXPECT_THAT(run.device.findings()[0].message, HasSubstr("ag.k0.p0 copy"));
    EXPECT_TRUE(ReplayText(kOutOfPlace, {}, seed).report.pass()) << "seed " << seed;
  }
}

TEST(FaultZooTest, GraphOutputFreedWritesTheReusedBlockOfTheFreedOutput) {
  const ReplayRun run = ReplayText(kOutFreedAndReplaced, FaultSet().Add(Fault::kGraphOutputFreed));
  EXPECT_GE(run.device.Count(FindingKind::kUseAfterReuse), 1) << run.device.ToString();
  EXPECT_THAT(run.device.findings()[0].message, HasSubstr("now belong to allocation"));
  EXPECT_TRUE(ReplayText(kOutFreedAndReplaced, {}).report.pass());
}

TEST(FaultZooTest, InplaceAliasRingBreaksAtThreeRanksAndNotAtTwo) {
  const FaultSet fault = FaultSet().Add(Fault::kInplaceAliasRing);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const ReplayRun three = ReplayText(InPlaceThenAdd(3), fault, seed);
    ASSERT_GE(three.device.Count(FindingKind::kRace), 1) << "seed " << seed;
    EXPECT_THAT(three.device.findings()[0].message, HasSubstr("ag.k1.p0 copy"));
    const ReplayRun two = ReplayText(InPlaceThenAdd(2), fault, seed);
    EXPECT_TRUE(two.report.pass()) << "seed " << seed << "\n" << two.device.ToString();
  }
  // Out of place the fault changes nothing.
  EXPECT_TRUE(ReplayText(kOutOfPlace, fault).report.pass());
}

TEST(FaultZooTest, OwnerKeepsPrequantMakesRanksDifferByARounding) {
  const ReplayRun run = ReplayText(kCompressed, FaultSet().Add(Fault::kOwnerKeepsPrequant));
  EXPECT_FALSE(run.report.rank_consistent);
  ASSERT_FALSE(run.report.findings.empty());
  EXPECT_EQ(run.report.findings[0].kind, ReplayFindingKind::kRankInconsistent);
  EXPECT_TRUE(run.device.empty()) << run.device.ToString();
  const ReplayRun clean = ReplayText(kCompressed, {});
  EXPECT_TRUE(clean.report.pass());
  EXPECT_TRUE(clean.report.rank_consistent);
}

}  // namespace
}  // namespace dmalab
