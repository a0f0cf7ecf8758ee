#include "dmalab/replay.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/hash.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/fill.h"
#include "common/scenario/replay_checks.h"
#include "common/scenario/replay_expectations.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

// The founding incident at a small geometry: 4 ranks, 64 x 256 bf16. Integer fills make the two
// results differ in every element: embedding sums lie in [4, 64], o_proj sums in [-64, -4].
constexpr char kIncident[] = R"(world: 4
shapes: {hidden: [64, 256]}
tensors: {embed_partial: hidden, attn_partial: hidden, residual: hidden, attn_out: hidden}
steps:
  - fill: {tensor: embed_partial, kind: int, lo: 1, hi: 16, seed: 1}
  - fill: {tensor: attn_partial, kind: int, lo: -16, hi: -1, seed: 2}
  - all_reduce: {input: embed_partial, result: residual, label: embedding}
  - retain: residual
  - all_reduce: {input: attn_partial, result: attn_out, label: o_proj}
  - expect_unchanged: residual
  - unretain: residual
  - release: attn_out
  - release: residual
)";

ReplayReport MustReplay(const std::string& yaml, std::string_view faults, uint64_t sim_seed = 1) {
  auto scenario = ParseScenario(yaml, "incident.yaml");
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(scenario->world, sim_seed);
  ReplayOptions options;
  options.faults = *FaultSet::Parse(faults);
  options.poll_device_findings = NewFindingsPoller(device);
  auto report = Replay(*scenario, &device, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

TEST(ReplayTest, FreshDefaultOutputsKeepTheRetainedResidual) {
  const ReplayReport r = MustReplay(kIncident, "none");
  EXPECT_EQ(SummaryLine(r),
            "pointer_alias=false  retained_mismatches=0 / 16,384  rank_consistent=true  "
            "status=PASS");
  EXPECT_TRUE(r.findings.empty());
  ASSERT_EQ(r.all_reduces.size(), 2u);
  EXPECT_EQ(r.steps_executed, 9);
}

TEST(ReplayTest, PersistentOutputOverwritesTheRetainedResidual) {
  const ReplayReport r = MustReplay(kIncident, "persistent-output");
  EXPECT_EQ(SummaryLine(r),
            "pointer_alias=true  retained_mismatches=16,384 / 16,384  rank_consistent=true  "
            "status=FAIL");
  EXPECT_EQ(r.retained_mismatches_by_rank, (std::vector<int64_t>(4, 16384)));
  // The first findings: rank by rank, the residual changed at the o_proj step (step 5).
  ASSERT_GE(r.findings.size(), 5u);
  for (int rank = 0; rank < 4; ++rank) {
    const ReplayFinding& f = r.findings[rank];
    EXPECT_EQ(f.kind, ReplayFindingKind::kRetainedMismatch);
    EXPECT_EQ(f.step_index, 5);
    EXPECT_EQ(f.rank, rank);
    EXPECT_EQ(f.elems, 16384);
    ASSERT_EQ(f.storage.size(), 1u);
    EXPECT_EQ(f.storage[0].tensor, "residual");
    EXPECT_EQ(f.storage[0].mem.rank, rank);
  }
  const ReplayFinding& alias = r.findings[4];
  EXPECT_EQ(alias.kind, ReplayFindingKind::kPointerAlias);
  EXPECT_EQ(alias.step_index, 5);
  EXPECT_THAT(alias.detail, HasSubstr("on rank(s) 0,1,2,3"));
  ASSERT_EQ(alias.storage.size(), 2u);
  EXPECT_EQ(alias.storage[0].tensor, "attn_out");
  EXPECT_EQ(alias.storage[1].tensor, "residual");
  EXPECT_EQ(alias.storage[0].mem.addr, alias.storage[1].mem.addr);
}

TEST(ReplayTest, TheFaultChangesLifetimesNotNumerics) {
  const ReplayReport fixed = MustReplay(kIncident, "none");
  const ReplayReport broken = MustReplay(kIncident, "persistent-output");
  ASSERT_EQ(fixed.all_reduces.size(), broken.all_reduces.size());
  for (size_t i = 0; i < fixed.all_reduces.size(); ++i) {
    EXPECT_EQ(fixed.all_reduces[i].hash, broken.all_reduces[i].hash) << i;
  }
  EXPECT_NE(fixed.all_reduces[0].hash, fixed.all_reduces[1].hash);
}

TEST(ReplayTest, SameSeedGivesTheSameReportByteForByte) {
  EXPECT_EQ(FormatReportText(MustReplay(kIncident, "persistent-output", 7)),
            FormatReportText(MustReplay(kIncident, "persistent-output", 7)));
  // The scheduler's seed changes interleavings, never results.
  EXPECT_EQ(MustReplay(kIncident, "none", 1).all_reduces[1].hash,
            MustReplay(kIncident, "none", 99).all_reduces[1].hash);
}

TEST(ReplayTest, AllReduceOfIntegerFillsIsTheExactSum) {
  // Rank r's element i is FillElements' value; the sum over ranks is exact in bf16.
  const std::string yaml = R"(world: 2
tensors: {x: [16], y: [16]}
steps:
  - fill: {tensor: x, kind: int, lo: -100, hi: 100, seed: 5}
  - all_reduce: {input: x, result: y}
)";
  auto scenario = ParseScenario(yaml, "sum.yaml");
  ASSERT_TRUE(scenario.ok());
  std::vector<uint8_t> expected(32), r0(32), r1(32);
  FillElements(DType::kBF16, FillKind::kInt, -100, 100, FillKey(0, 5, 0), absl::MakeSpan(r0));
  FillElements(DType::kBF16, FillKind::kInt, -100, 100, FillKey(0, 5, 1), absl::MakeSpan(r1));
  for (int i = 0; i < 16; ++i) {
    StoreFromFloat(
        DType::kBF16, expected.data(), i,
        LoadAsFloat(DType::kBF16, r0.data(), i) + LoadAsFloat(DType::kBF16, r1.data(), i));
  }
  const ReplayReport r = MustReplay(yaml, "none");
  ASSERT_EQ(r.all_reduces.size(), 1u);
  EXPECT_EQ(r.all_reduces[0].hash, Xxh64(expected));
}

TEST(ReplayTest, FreeingAnAliasedResultLetsTheWorkspaceBeReused) {
  // Under the fault, releasing attn_out (step 8) frees the workspace itself, since the view
  // starts at its byte 0; releasing residual (step 9) then fails. The fill at step 10 gets the
  // freed block, and the all-reduce at step 11 writes into it: the simulator's lifetime checker
  // reports use after reuse, and the new result aliases the filled tensor.
  const std::string yaml = std::string(kIncident) + R"(  - fill: {tensor: attn_out, seed: 3}
  - all_reduce: {input: embed_partial, result: residual, label: layer1}
)";
  const ReplayReport r = MustReplay(yaml, "persistent-output");
  EXPECT_FALSE(r.pass());
  std::map<std::pair<ReplayFindingKind, int64_t>, int> counts;  // (kind, step) -> findings
  for (const ReplayFinding& f : r.findings) ++counts[{f.kind, f.step_index}];
  EXPECT_EQ((counts[{ReplayFindingKind::kFreeFailed, 9}]), 4);
  EXPECT_EQ((counts[{ReplayFindingKind::kPointerAlias, 11}]), 1);
  EXPECT_GE((counts[{ReplayFindingKind::kDeviceChecker, 11}]), 4);
  for (const ReplayFinding& f : r.findings) {
    if (f.kind != ReplayFindingKind::kDeviceChecker) continue;
    // Typed: the checker, the rank whose memory it is, and the allocation the operation used.
    EXPECT_EQ(f.checker, "use-after-reuse");
    EXPECT_THAT(f.detail, HasSubstr("freed by 'step 8 release at incident.yaml:12:5'"));
    ASSERT_EQ(f.storage.size(), 1u);
    EXPECT_EQ(f.storage[0].tensor, "all_reduce persistent workspace (fault)");
    EXPECT_EQ(f.storage[0].mem.rank, f.rank);
    EXPECT_THAT(f.detail,
                HasSubstr(absl::StrFormat("rank %d bytes [0x%x, 0x%x)", f.rank,
                                          f.storage[0].mem.addr, f.storage[0].mem.end())));
    ASSERT_EQ(f.ops.size(), 1u);  // a stream of that rank, or the host reading back
    if (f.ops[0].rank >= 0) {
      EXPECT_EQ(f.ops[0].rank, f.rank);
    } else {
      EXPECT_EQ(f.ops[0].label, "host");
    }
  }
  // Without the fault the same file is clean, the simulator's checkers included.
  EXPECT_TRUE(MustReplay(yaml, "none").pass());
}

// A simulator on which the tensor tagged `tag` holds given bf16 bits at given elements of given
// ranks when the replay first reads it, as though the collective had written them there. It
// reads outputs in pieces (the simulator's ReadPieces) or, with `pieces` false, whole (Device's
// ReadPieces, through Read, as a device that cannot copy in pieces), and records the largest copy
// of the tensor the host is handed. With `fail_rank` set, that rank's view of the tensor points
// outside the device's memory, as a wrong view would, so its read fails.
class PatchedReadDevice : public SimDevice {
 public:
  struct Patch {
    int rank = 0;
    int64_t index = 0;
    uint16_t bits = 0;
  };
  PatchedReadDevice(int world, std::string tag, std::vector<Patch> patches, bool pieces,
                    int fail_rank = -1)
      : SimDevice(world, 1),
        tag_(std::move(tag)),
        patches_(std::move(patches)),
        pieces_(pieces),
        fail_rank_(fail_rank),
        of_(world) {}

  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override {
    absl::StatusOr<MemRef> mem = SimDevice::Allocate(rank, bytes, tag);
    if (mem.ok() && tag == tag_) of_[rank] = *mem;
    return mem;
  }
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override {
    if (!src.Overlaps(of_[src.rank])) return SimDevice::Read(src, bytes);
    if (absl::Status s = PatchOnce(); !s.ok()) return s;
    largest_copy_ = std::max<uint64_t>(largest_copy_, bytes.size());
    return SimDevice::Read(Redirected(src), bytes);
  }
  uint64_t largest_copy() const { return largest_copy_; }

 protected:
  absl::Status ReadPiecesChecked(absl::Span<const MemRef> srcs, uint64_t bytes,
                                 uint64_t piece_bytes, PieceConsumer consume) override {
    // Whole: Device's own way, through Read (above).
    if (!pieces_) return Device::ReadPiecesChecked(srcs, bytes, piece_bytes, consume);
    if (absl::Status s = PatchOnce(); !s.ok()) return s;
    std::vector<MemRef> redirected;
    for (const MemRef& src : srcs) redirected.push_back(Redirected(src));
    return SimDevice::ReadPiecesChecked(
        redirected, bytes, piece_bytes,
        [&](uint64_t offset, absl::Span<const absl::Span<const uint8_t>> pieces) {
          for (absl::Span<const uint8_t> p : pieces) {
            largest_copy_ = std::max<uint64_t>(largest_copy_, p.size());
          }
          return consume(offset, pieces);
        });
  }

 private:
  absl::Status PatchOnce() {
    if (patched_) return absl::OkStatus();
    patched_ = true;
    for (const Patch& p : patches_) {
      uint8_t bits[2];
      std::memcpy(bits, &p.bits, 2);
      const MemRef at = of_[p.rank].Slice(2 * static_cast<uint64_t>(p.index), 2);
      if (absl::Status s = SimDevice::Write(at, bits); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Far past every allocation of the rank (2^36 bytes on), yet in its address space.
  MemRef Redirected(const MemRef& src) const {
    if (src.rank != fail_rank_ || !src.Overlaps(of_[src.rank])) return src;
    MemRef wrong = src;
    wrong.addr += uint64_t{1} << 36;
    wrong.alloc_id = 0;
    return wrong;
  }

  std::string tag_;
  std::vector<Patch> patches_;
  bool pieces_;
  int fail_rank_;
  std::vector<MemRef> of_;  // by rank
  bool patched_ = false;
  uint64_t largest_copy_ = 0;
};

using FindingRow = std::tuple<ReplayFindingKind, int, int64_t, std::string>;

std::vector<FindingRow> Rows(const ReplayReport& r) {
  std::vector<FindingRow> rows;
  for (const ReplayFinding& f : r.findings) rows.emplace_back(f.kind, f.rank, f.elems, f.detail);
  return rows;
}

// x filled with integers in [x_lo, x_hi], y with y_fill, then all_reduce x into y (out form):
// `elems` bf16 elements on `world` ranks, fill seed `seed`.
Scenario OutFormScenario(int world, int64_t elems, int x_lo, int x_hi, int y_fill, int seed = 0) {
  const std::string yaml = absl::StrFormat(R"(world: %d
seed: %d
tensors: {x: [%d], y: [%d]}
steps:
  - fill: {tensor: x, kind: int, lo: %d, hi: %d, seed: 1}
  - fill: {tensor: y, kind: int, lo: %d, hi: %d, seed: 2}
  - all_reduce: {input: x, out: y}
)",
                                           world, seed, elems, elems, x_lo, x_hi, y_fill, y_fill);
  absl::StatusOr<Scenario> scenario = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  return *std::move(scenario);
}

// The replay on `device`, its checkers polled after every step as `dmalab replay` polls them.
absl::StatusOr<ReplayReport> ReplayPolled(const Scenario& scenario, SimDevice& device) {
  ReplayOptions options;
  options.poll_device_findings = NewFindingsPoller(device);
  return Replay(scenario, &device, options);
}

// Outputs larger than the replay's check piece (kCheckPieceBytes): 3 whole pieces and 96
// elements (counts are multiples of world * 8). Wrong and inconsistent values at piece
// boundaries and at the last element are counted, and the first of them named, as over the whole
// output, on a device that reads in pieces as on one that reads whole ranges; the hash is the
// whole output's; the host is handed no copy of the output larger than a piece.
TEST(ReplayTest, ValuesBeyondTheFirstCheckPieceAreCountedAndLocatedExactly) {
  constexpr int64_t kPiece = static_cast<int64_t>(kCheckPieceBytes / 2);  // bf16 elements
  constexpr int64_t kElems = 3 * kPiece + 96;
  constexpr int64_t kLast = kElems - 1;
  const Scenario scenario = OutFormScenario(4, kElems, 1, 16, 0, /*seed=*/5);
  // The exact sums, from every rank's fill (sums of integers in [1, 16]: in [4, 64]).
  std::vector<float> want(kElems, 0.0f);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<uint8_t> fill(2 * kElems);
    FillElements(DType::kBF16, FillKind::kInt, 1, 16, FillKey(5, FillStepSeed(1, {}), rank),
                 absl::MakeSpan(fill));
    for (int64_t i = 0; i < kElems; ++i) want[i] += LoadAsFloat(DType::kBF16, fill.data(), i);
  }
  constexpr uint16_t kPlus1000 = 0x447a;  // bf16 1000 and -1000: never a sum here
  constexpr uint16_t kMinus1000 = 0xc47a;
  constexpr uint16_t kNaN = 0x7fc0;
  std::vector<PatchedReadDevice::Patch> patches = {
      // Rank 2: the first element of the second piece, one inside the third, the last one.
      {2, kPiece, kPlus1000},
      {2, 2 * kPiece + 37, kPlus1000},
      {2, kLast, kPlus1000},
      // Rank 3: NaN at the last element (the short last piece).
      {3, kLast, kNaN},
  };
  // Every rank: the same wrong value at the last element of the second piece.
  for (int rank = 0; rank < 4; ++rank) patches.push_back({rank, 2 * kPiece - 1, kMinus1000});
  const auto wrong_sum = [&](int rank, int64_t count, int64_t first, float value) {
    return FindingRow(
        ReplayFindingKind::kWrongSum, rank, count,
        absl::StrFormat("output 'y' differs from the exact sum of the ranks' integer inputs in %d "
                        "of %d elements; first at %d: %g, exact %g",
                        count, kElems, first, value, want[first]));
  };
  const std::vector<FindingRow> expected = {
      {ReplayFindingKind::kRankInconsistent, 2, 3,
       absl::StrFormat("output 'y' differs from rank 0's in 3 of %d elements (first at %d)", kElems,
                       kPiece)},
      {ReplayFindingKind::kRankInconsistent, 3, 1,
       absl::StrFormat("output 'y' differs from rank 0's in 1 of %d elements (first at %d)", kElems,
                       kLast)},
      wrong_sum(0, 1, 2 * kPiece - 1, -1000),
      wrong_sum(1, 1, 2 * kPiece - 1, -1000),
      wrong_sum(2, 4, kPiece, 1000),
      wrong_sum(3, 2, 2 * kPiece - 1, -1000),
      {ReplayFindingKind::kNonFinite, 3, 1,
       absl::StrFormat("output 'y' holds 1 non-finite elements (NaN or infinity) of %d, from "
                       "finite inputs; first at %d: nan",
                       kElems, kLast)},
  };
  // Rank 0's bytes: the sums with its one patch.
  std::vector<uint8_t> rank0(2 * kElems);
  for (int64_t i = 0; i < kElems; ++i) StoreFromFloat(DType::kBF16, rank0.data(), i, want[i]);
  StoreFromFloat(DType::kBF16, rank0.data(), 2 * kPiece - 1, -1000);

  for (bool pieces : {true, false}) {
    SCOPED_TRACE(pieces ? "read in pieces" : "read whole");
    PatchedReadDevice device(4, "y", patches, pieces);
    absl::StatusOr<ReplayReport> r = ReplayPolled(scenario, device);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(device.largest_copy(), pieces ? kCheckPieceBytes : 2 * kElems);
    EXPECT_EQ(Rows(*r), expected);
    EXPECT_FALSE(r->rank_consistent);
    ASSERT_EQ(r->all_reduces.size(), 1u);
    EXPECT_EQ(r->all_reduces[0].hash, Xxh64(rank0));
  }
}

// Rank consistency compares bits: a -0 where rank 0 holds 0 is an inconsistency, though equal
// to the exact sum 0 (no wrong_sum), in a later piece and in a short last piece.
TEST(ReplayTest, MinusZeroInALaterCheckPieceIsInconsistentButNotAWrongSum) {
  constexpr int64_t kPiece = static_cast<int64_t>(kCheckPieceBytes / 2);
  constexpr int64_t kElems = 2 * kPiece + 16;
  const Scenario scenario = OutFormScenario(2, kElems, 0, 0, 7);
  constexpr uint16_t kMinusZero = 0x8000;
  PatchedReadDevice device(2, "y", {{1, kPiece + 3, kMinusZero}, {1, kElems - 1, kMinusZero}},
                           /*pieces=*/true);
  absl::StatusOr<ReplayReport> r = ReplayPolled(scenario, device);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<FindingRow> expected = {
      {ReplayFindingKind::kRankInconsistent, 1, 2,
       absl::StrFormat("output 'y' differs from rank 0's in 2 of %d elements (first at %d)", kElems,
                       kPiece + 3)}};
  EXPECT_EQ(Rows(*r), expected);
  ASSERT_EQ(r->all_reduces.size(), 1u);
  EXPECT_EQ(r->all_reduces[0].hash, Xxh64(std::vector<uint8_t>(2 * kElems, 0)));
}

// A read that fails on rank 2 ends the replay with a device error, after the ranks read before
// it are checked for consistency (rank 1 here), as reading rank by rank does; whether the device
// reads in pieces changes nothing, the failing read's error included.
TEST(ReplayTest, AFailedOutputReadReportsTheRanksBeforeItThenTheDeviceError) {
  constexpr int64_t kPiece = static_cast<int64_t>(kCheckPieceBytes / 2);
  constexpr int64_t kElems = 2 * kPiece;
  const Scenario scenario = OutFormScenario(4, kElems, 1, 2, 0);
  std::vector<std::vector<FindingRow>> rows;
  for (bool pieces : {true, false}) {
    PatchedReadDevice device(4, "y", {{1, kPiece + 1, 0x447a}}, pieces, /*fail_rank=*/2);
    absl::StatusOr<ReplayReport> r = ReplayPolled(scenario, device);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->all_reduces.empty());
    rows.push_back(Rows(*r));
  }
  ASSERT_EQ(rows[0].size(), 2u);
  EXPECT_EQ(rows[0][0],
            FindingRow(ReplayFindingKind::kRankInconsistent, 1, 1,
                       absl::StrFormat(
                           "output 'y' differs from rank 0's in 1 of %d elements (first at %d)",
                           kElems, kPiece + 1)));
  EXPECT_EQ(std::get<0>(rows[0][1]), ReplayFindingKind::kDeviceError);
  EXPECT_THAT(
      std::get<3>(rows[0][1]),
      ::testing::MatchesRegex(absl::StrFormat(
          "read src: rank 2: %d bytes at 0x[0-9a-f]+ are not inside device memory", 2 * kElems)));
  EXPECT_EQ(rows[0], rows[1]);
}

TEST(ReplayTest, ExpectEqualReportsEachDifferingRank) {
  const ReplayReport r = MustReplay(R"(world: 2
tensors: {a: [64], b: [64]}
steps:
  - fill: {tensor: a, kind: int, lo: 0, hi: 3, seed: 1}
  - fill: {tensor: b, kind: int, lo: 10, hi: 13, seed: 1}
  - expect_equal: {a: a, b: b}
)",
                                    "none");
  EXPECT_FALSE(r.pass());
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[1].kind, ReplayFindingKind::kExpectEqual);
  EXPECT_EQ(r.findings[1].rank, 1);
  EXPECT_EQ(r.findings[1].elems, 64);
  EXPECT_EQ(r.findings[1].step_index, 3);
}

// Issue 15, item 11: total work is bounded before anything runs, with overflow-safe counts.
TEST(ReplayTest, WorkBeyondTheStepBoundIsRefusedBeforeRunning) {
  auto scenario = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: [{repeat: {times: "
      "1000000, steps: [{all_reduce: {input: x, in_place: true}}]}}]}}]}\n",
      "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(2, 1);
  auto report = Replay(*scenario, &device, ReplayOptions{});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "t.yaml: found 1000000000000000001 steps with repeats expanded (every repeat "
            "iteration counting as one step at least), allowed at most 10000000 steps in one "
            "replay (ReplayOptions::max_steps; reduce the repeat counts)");
  EXPECT_EQ(device.ops_executed(), 0);
  // One more level: 10^24 steps saturate the count.
  auto deeper = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: [{repeat: {times: "
      "1000000, steps: [{repeat: {times: 1000000, steps: [{fill: {tensor: x}}]}}]}}]}}]}\n",
      "t.yaml");
  ASSERT_TRUE(deeper.ok()) << deeper.status();
  ReplayOptions options;
  options.max_steps = 5;
  EXPECT_EQ(Replay(*deeper, &device, options).status().message(),
            "t.yaml: found more than 2^63 steps with repeats expanded (every repeat iteration "
            "counting as one step at least), allowed at most 5 steps in one replay "
            "(ReplayOptions::max_steps; reduce the repeat counts)");
}

// Issue 25, item 4: the bound counts work, not listed steps. Three repeats of 10^6 around an
// empty body list no step at all but loop 10^18 times: refused before running, like any other
// work past the bound.
TEST(ReplayTest, NestedRepeatsAroundAnEmptyBodyCountTheProductOfTheirCounts) {
  auto scenario = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: [{repeat: {times: "
      "1000000, steps: []}}]}}]}\n",
      "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  EXPECT_EQ(scenario->ExpandedStepCount(), 1);
  EXPECT_EQ(scenario->ExpandedWork(), 1000000000000000001);
  SimDevice device(2, 1);
  auto report = Replay(*scenario, &device, ReplayOptions{});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "t.yaml: found 1000000000000000001 steps with repeats expanded (every repeat "
            "iteration counting as one step at least), allowed at most 10000000 steps in one "
            "replay (ReplayOptions::max_steps; reduce the repeat counts)");
  EXPECT_EQ(device.ops_executed(), 0);
  // Within the bound an empty body costs its iterations: 3 x 4 of them, one fill.
  auto small = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 3, steps: [{repeat: {times: 4, steps: []}}]}\n",
      "t.yaml");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->ExpandedWork(), 13);
  ReplayOptions options;
  options.max_steps = 12;
  EXPECT_EQ(Replay(*small, &device, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.max_steps = 13;
  auto ran = Replay(*small, &device, options);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->steps_executed, 1);
}

TEST(ReplayTest, ProgressCountsEveryStepOfTheExpandedTotal) {
  auto scenario = ParseScenario(
      "world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 3, steps: [{all_reduce: {input: x, result: y}}, {release: y}]}\n",
      "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(2, 1);
  ReplayOptions options;
  std::vector<std::pair<int64_t, int64_t>> calls;
  options.progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  auto report = Replay(*scenario, &device, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<std::pair<int64_t, int64_t>> want;
  for (int64_t i = 0; i <= 7; ++i) want.emplace_back(i, 7);
  EXPECT_EQ(calls, want);
}

// Issue 15, item 3: the memory a values replay needs is computed from the scenario and checked
// before anything is allocated.
TEST(ReplayTest, MemoryNeedIsCheckedBeforeAllocating) {
  // x and y live together (2 x 2 GiB per rank) with s (1 KiB), which is retained.
  auto scenario = ParseScenario(
      "world: 4\ntensors: {x: [1073741824], y: [1073741824], s: [512]}\nsteps:\n"
      "  - fill: {tensor: s}\n  - retain: s\n  - fill: {tensor: x}\n"
      "  - all_reduce: {input: x, result: y}\n  - release: y\n  - release: x\n",
      "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  ReplayOptions options;
  const ReplayMemoryNeed need = EstimateReplayMemory(*scenario, options);
  EXPECT_EQ(need.world, 4);
  EXPECT_EQ(need.tensor_bytes_per_rank, 2 * (uint64_t{2} << 30) + 1024);
  DmaAllReduceOptions ar;
  ar.max_bytes = uint64_t{2} << 30;
  EXPECT_EQ(need.workspace_bytes_per_rank, DmaAllReduce::WorkspaceBytesPerRank(4, ar));
  EXPECT_GT(need.workspace_bytes_per_rank, 0u);
  // The snapshot of s on every rank, two read buffers of the largest tensor and its exact values
  // (8 bytes per element).
  EXPECT_EQ(need.host_bytes, 4 * 1024 + 2 * (uint64_t{2} << 30) + 8 * (uint64_t{1} << 30));
  EXPECT_EQ(need.Total(), 4 * need.PerRank() + need.host_bytes);

  SimDevice device(4, 1);
  options.max_memory_bytes = uint64_t{1} << 30;
  auto report = Replay(*scenario, &device, options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(report.status().message(),
            absl::StrFormat("t.yaml: the replay needs %d bytes (%.1f GiB: 4 ranks x (%d bytes of "
                            "live tensors at the peak + %d of all-reduce workspace) + %d on the "
                            "host for retained snapshots and buffers), more than the limit of "
                            "1073741824 bytes (1.0 GiB)",
                            need.Total(), need.Total() / 1073741824.0, need.tensor_bytes_per_rank,
                            need.workspace_bytes_per_rank, need.host_bytes));
  EXPECT_EQ(device.ops_executed(), 0);
  // The persistent-output fault's workspace counts too.
  options.faults.Add(Fault::kPersistentOutput);
  EXPECT_EQ(EstimateReplayMemory(*scenario, options).workspace_bytes_per_rank,
            need.workspace_bytes_per_rank + (uint64_t{2} << 30));
}

// Issue 15, item 4: a long run keeps a bounded report.
TEST(ReplayTest, AllReduceRecordsAreBoundedAndCounted) {
  auto scenario = ParseScenario(
      "world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 25, steps: [{all_reduce: {input: x, in_place: true}}]}\n",
      "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(2, 1, Fidelity::kShadow);
  ReplayOptions options;
  options.max_all_reduce_records = 10;
  auto report = Replay(*scenario, &device, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->all_reduces.size(), 10u);
  EXPECT_EQ(report->all_reduces_total, 25);
  EXPECT_EQ(report->all_reduces.back().step_index, 11);
}

// Issue 15, item 14: on the GPU a flag wait that times out (or any device error) while the
// collective under test runs surfaces at its next call. That is a finding of the code under test
// (FAIL, exit 1, summary printed), not bad input. Here a simulator whose 7th flag wait fails as
// CudaDevice's timed-out wait does.
class TimingOutDevice : public SimDevice {
 public:
  TimingOutDevice(int world, int fail_at) : SimDevice(world, 1), fail_at_(fail_at) {}
  absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                        std::string_view label) override {
    if (++waits_ >= fail_at_) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "rank 1 stream flag: wait '%s' timed out after 10 s: flag=3 expected=4", label));
    }
    return SimDevice::WaitFlag(stream, expected, flag, label);
  }

 private:
  int fail_at_;
  int waits_ = 0;
};

TEST(ReplayTest, ADeviceErrorOfTheCollectiveIsAFindingNotBadInput) {
  // W=3 decode: every default result is released before the next all-reduce.
  auto scenario = ParseScenario(
      "world: 3\ntensors: {h: [48], o: [48]}\nsteps:\n  - fill: {tensor: h, kind: int}\n"
      "  - repeat: {times: 4, steps: [{all_reduce: {input: h, result: o}}, {release: o}]}\n",
      "decode.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  TimingOutDevice device(3, 7);
  ReplayOptions options;
  options.faults.Add(Fault::kPersistentOutput);
  auto report = Replay(*scenario, &device, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->pass());
  ASSERT_FALSE(report->findings.empty());
  const ReplayFinding& f = report->findings.back();
  EXPECT_EQ(f.kind, ReplayFindingKind::kDeviceError);
  EXPECT_THAT(f.detail, ::testing::StartsWith("all_reduce at decode.yaml:5:33: all_reduce: rank "));
  EXPECT_THAT(f.detail, HasSubstr("timed out after 10 s: flag=3 expected=4"));
  // The replay stopped at that call: fewer than the 9 steps ran.
  EXPECT_LT(report->steps_executed, 9);
  const std::string text = FormatReportText(*report);
  EXPECT_THAT(text, HasSubstr("FINDING device_error: step "));
  EXPECT_THAT(text, ::testing::EndsWith("status=FAIL\n"));
  // Arguments the call rejects stay bad input.
  EXPECT_TRUE(IsRejectedArguments(absl::InvalidArgumentError("x")));
  EXPECT_TRUE(IsRejectedArguments(absl::FailedPreconditionError("x")));
  EXPECT_FALSE(IsRejectedArguments(absl::DeadlineExceededError("x")));
  EXPECT_FALSE(IsRejectedArguments(absl::InternalError("x")));
  EXPECT_FALSE(IsRejectedArguments(absl::UnavailableError("x")));
}

TEST(ReplayTest, WorldMismatchIsBadInput) {
  auto scenario = ParseScenario(kIncident, "incident.yaml");
  ASSERT_TRUE(scenario.ok());
  SimDevice device(2, 1);
  auto report = Replay(*scenario, &device, ReplayOptions{});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report.status().message(),
            "incident.yaml: world 4 does not match the device's 2 ranks");
}

TEST(ReplayTest, CompressedWireRejectionNamesTheStep) {
  auto report = [] {
    auto scenario = ParseScenario(R"(world: 2
wire: i8
tensors: {x: [16]}
steps:
  - fill: {tensor: x}
  - all_reduce: {input: x, in_place: true}
)",
                                  "wire.yaml");
    SimDevice device(2, 1);
    return Replay(*scenario, &device, ReplayOptions{});
  }();
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("all_reduce at wire.yaml:6:5: "));
}

// Every shipped scenario, under every fault set it states a verdict for, meets that verdict, in
// both fidelities: the shadow's provenance comparisons must give the values' verdicts.
class ShippedScenarioTest : public ::testing::TestWithParam<std::tuple<std::string, Fidelity>> {};

TEST_P(ShippedScenarioTest, MeetsItsExpectations) {
  const auto& [name, fidelity] = GetParam();
  auto scenario = LoadScenarioFile("scenarios/" + name + ".yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  ASSERT_FALSE(scenario->expect.empty());
  for (const Expectation& expect : scenario->expect) {
    SimDevice device(scenario->world, 1, fidelity);
    ReplayOptions options;
    options.faults = *FaultSet::Parse(expect.faults);
    options.poll_device_findings = NewFindingsPoller(device);
    EXPECT_EQ(FindExpectation(*scenario, options.faults), &expect);
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    auto report = Replay(*scenario, &device, options);
    const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->fidelity, FidelityName(fidelity));
    std::cout << name << " (" << FidelityName(fidelity) << ") faults=" << expect.faults << ": "
              << SummaryLine(*report)
              << absl::StrFormat("  (%.1f s wall, %.1f s cpu, %d all-reduces)", seconds,
                                 cpu_seconds, report->all_reduces.size())
              << "\n";
    const std::vector<std::string> diffs = CompareWithExpectation(expect, *report);
    EXPECT_TRUE(diffs.empty()) << expect.faults << ": " << absl::StrJoin(diffs, "; ") << "\n"
                               << FormatReportText(*report);
  }
}

// Every *.yaml directly in scenarios/ (topologies live in a subfolder), so a new file is
// tested without editing this list.
std::vector<std::string> ShippedScenarios() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("scenarios")) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, ShippedScenarioTest,
    ::testing::Combine(::testing::ValuesIn(ShippedScenarios()),
                       ::testing::Values(Fidelity::kValues, Fidelity::kShadow)),
    [](const ::testing::TestParamInfo<std::tuple<std::string, Fidelity>>& info) {
      return absl::StrCat(std::get<0>(info.param), "_",
                          std::string(FidelityName(std::get<1>(info.param))));
    });

// Grouping (tests/cli/grouped_findings_tp2.yaml states why): the fresh result inside the repeat
// aliases the retained one in every iteration (one finding per iteration, naming rank 0) and
// overwrites it in the first iteration on both ranks; each is one distinct finding whose ranks
// and iterations are exact. Progress is reported after every executed step.
TEST(ReplayTest, FindingsGroupByStepAndSignatureWithTheirRanksAndIterations) {
  absl::StatusOr<Scenario> scenario = LoadScenarioFile("tests/cli/grouped_findings_tp2.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(scenario->world, 1);
  ReplayOptions options;
  options.faults = *FaultSet::Parse("persistent-output");
  options.poll_device_findings = NewFindingsPoller(device);
  std::vector<std::pair<int64_t, int64_t>> progress;
  options.progress = [&](int64_t done, int64_t total) { progress.emplace_back(done, total); };
  absl::StatusOr<ReplayReport> r = Replay(*scenario, &device, options);
  ASSERT_TRUE(r.ok()) << r.status();
  // (0, total) first, then after each of 4 steps before the repeat and 3 iterations of 2.
  ASSERT_EQ(progress.size(), 11u);
  EXPECT_EQ(progress.front(), (std::pair<int64_t, int64_t>{0, 10}));
  EXPECT_EQ(progress[1], (std::pair<int64_t, int64_t>{1, 10}));
  EXPECT_EQ(progress.back(), (std::pair<int64_t, int64_t>{10, 10}));
  const FindingGroup* alias = nullptr;
  const FindingGroup* retained = nullptr;
  int64_t counted = 0;
  for (const FindingGroup& g : r->groups) {
    counted += g.count;
    if (g.first.checker == "pointer_alias") alias = &g;
    if (g.first.checker == "retained_mismatch") retained = &g;
    // Device findings are typed: a checker name, never the catch-all kind's.
    EXPECT_NE(g.first.checker, "device_checker");
    if (g.first.kind == ReplayFindingKind::kDeviceChecker) {
      EXPECT_FALSE(g.first.storage.empty());
      EXPECT_EQ(g.first.storage[0].mem.rank, g.first.rank);
    }
  }
  EXPECT_EQ(counted, r->findings_total);
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->count, 3);
  EXPECT_EQ(alias->ranks, (std::vector<int>{0}));
  EXPECT_EQ(alias->iteration_ranges, (std::vector<std::pair<int64_t, int64_t>>{{1, 3}}));
  EXPECT_EQ(alias->first.iterations, 3);
  EXPECT_EQ(alias->first.step_index, 5);
  EXPECT_EQ(alias->first.step_id, "steps[4].repeat.steps[0]");
  ASSERT_NE(retained, nullptr);
  EXPECT_EQ(retained->count, 2);
  EXPECT_EQ(retained->ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(retained->iteration_ranges, (std::vector<std::pair<int64_t, int64_t>>{{1, 1}}));
  EXPECT_EQ(retained->first.elems, 128);
}

// Steps with ranks: run on those ranks' hosts only. Rank 1 alone refills x with another seed:
// the all-reduce's output is rank 1's new integers plus the other ranks' first ones (computed
// here from the fill formula per rank), and the exact-sum check holds the replay to it.
TEST(ReplayTest, AFillOnSomeRanksChangesOnlyTheirContents) {
  constexpr char kYaml[] = R"(world: 4
seed: 5
tensors: {x: [256], y: [256]}
steps:
  - fill: {tensor: x, kind: int, lo: -4, hi: 4, seed: 1}
  - fill: {tensor: x, kind: int, lo: 10, hi: 20, seed: 2, ranks: [1]}
  - all_reduce: {input: x, result: y}
)";
  auto scenario = ParseScenario(kYaml, "t.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(4, 1);
  ReplayOptions options;
  options.poll_device_findings = NewFindingsPoller(device);
  std::vector<float> got;
  options.inspect_at_end = [&](const std::string& name, const std::vector<TensorView>& views) {
    if (name != "y") return absl::OkStatus();
    std::vector<uint8_t> bytes(views[2].bytes());
    if (absl::Status s = device.Read(views[2].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
        !s.ok()) {
      return s;
    }
    for (int64_t i = 0; i < 256; ++i) got.push_back(LoadAsFloat(DType::kBF16, bytes.data(), i));
    return absl::OkStatus();
  };
  absl::StatusOr<ReplayReport> r = Replay(*scenario, &device, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->pass()) << FormatReportText(*r);
  std::vector<float> want(256, 0.0f);
  for (int rank = 0; rank < 4; ++rank) {
    const bool refilled = rank == 1;
    std::vector<uint8_t> fill(512);
    FillElements(DType::kBF16, FillKind::kInt, refilled ? 10 : -4, refilled ? 20 : 4,
                 FillKey(5, FillStepSeed(refilled ? 2 : 1, {}), rank), absl::MakeSpan(fill));
    for (int64_t i = 0; i < 256; ++i) want[i] += LoadAsFloat(DType::kBF16, fill.data(), i);
  }
  EXPECT_EQ(got, want);
  // Rank 1's terms are in [10, 20], the others' in [-4, 4]: every sum is at least -2.
  EXPECT_GE(*std::min_element(want.begin(), want.end()), -2.0f);
}

// A release on some ranks frees only their storage: reallocated behind a spacer, x moves on
// rank 1 and keeps its address on the other ranks.
TEST(ReplayTest, AReleaseOnSomeRanksMovesOnlyTheirStorage) {
  const std::string head = R"(world: 4
tensors: {x: [256], pad: [256]}
steps:
  - fill: {tensor: x}
)";
  auto addresses = [](const std::string& yaml) {
    auto scenario = ParseScenario(yaml, "t.yaml");
    EXPECT_TRUE(scenario.ok()) << scenario.status();
    SimDevice device(4, 1);
    ReplayOptions options;
    std::vector<uint64_t> addr;
    options.inspect_at_end = [&](const std::string& name, const std::vector<TensorView>& views) {
      if (name == "x") {
        for (const TensorView& v : views) addr.push_back(v.mem.addr);
      }
      return absl::OkStatus();
    };
    absl::StatusOr<ReplayReport> r = Replay(*scenario, &device, options);
    EXPECT_TRUE(r.ok() && r->pass()) << (r.ok() ? FormatReportText(*r) : r.status().ToString());
    return addr;
  };
  const std::vector<uint64_t> same = addresses(head);
  const std::vector<uint64_t> moved =
      addresses(head +
                "  - release: {tensor: x, ranks: [1]}\n  - fill: {tensor: pad, ranks: [1]}\n"
                "  - fill: {tensor: x, ranks: [1]}\n  - release: {tensor: pad, ranks: [1]}\n");
  ASSERT_EQ(same.size(), 4u);
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved[0], same[0]);
  EXPECT_NE(moved[1], same[1]);
  EXPECT_EQ(moved[2], same[2]);
  EXPECT_EQ(moved[3], same[3]);
}

}  // namespace
}  // namespace dmalab
