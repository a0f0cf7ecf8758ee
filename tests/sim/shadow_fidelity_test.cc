// SimDevice in the shadow fidelity (no payload, provenance only): what it refuses, what the ring
// all-reduce leaves in it, and that its checkers report what the values fidelity reports.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/ring/dma_all_reduce.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

TEST(ShadowFidelityTest, FidelityNamesParseBack) {
  EXPECT_EQ(*ParseFidelity("values"), Fidelity::kValues);
  EXPECT_EQ(*ParseFidelity("shadow"), Fidelity::kShadow);
  absl::StatusOr<Fidelity> bad = ParseFidelity("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "fidelity is 'fast'; allowed: values, shadow");
}

TEST(ShadowFidelityTest, ReadIsRefusedAndProvenanceIsKept) {
  SimDevice dev(1, 1, Fidelity::kShadow);
  EXPECT_FALSE(dev.HoldsValues());
  absl::StatusOr<MemRef> mem = dev.Allocate(0, 1024, "x");
  ASSERT_TRUE(mem.ok());
  std::vector<uint8_t> out(1024);
  absl::Status read = dev.Read(*mem, absl::MakeSpan(out));
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(read.message(), HasSubstr("the shadow fidelity keeps no values"));
  ASSERT_TRUE(dev.WriteShadow(mem->Slice(0, 512), 42).ok());
  absl::StatusOr<Provenance> p = dev.ReadProvenance(*mem);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].bytes, 512u);
  EXPECT_NE((*p)[0].origin, kUnwrittenOrigin);
  EXPECT_EQ((*p)[1], (ProvenancePiece{512, 512, kUnwrittenOrigin, 0}));
}

TEST(ShadowFidelityTest, ValuesDeviceRefusesShadowCalls) {
  SimDevice dev(1, 1);
  absl::StatusOr<MemRef> mem = dev.Allocate(0, 64, "x");
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(dev.WriteShadow(*mem, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dev.ReadProvenance(*mem).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShadowFidelityTest, EqualContentsGiveEqualProvenanceOnEveryRank) {
  SimDevice dev(2, 1, Fidelity::kShadow);
  std::vector<MemRef> m;
  for (int r = 0; r < 2; ++r) m.push_back(*dev.Allocate(r, 4096, "x"));
  ASSERT_TRUE(dev.WriteShadow(m[0], 7).ok());
  ASSERT_TRUE(dev.WriteShadow(m[1], 7).ok());
  EXPECT_EQ(*dev.ReadProvenance(m[0]), *dev.ReadProvenance(m[1]));
  ASSERT_TRUE(dev.Write(m[1].Slice(0, 16), std::vector<uint8_t>(16, 0)).ok());
  EXPECT_NE(*dev.ReadProvenance(m[0]), *dev.ReadProvenance(m[1]));
}

// The ring gives every rank the owner's result, so every rank's output has rank 0's provenance,
// whatever the wire mode, world size and schedule; and the output is the reduction's own.
TEST(ShadowFidelityTest, EveryRankGetsTheSameProvenanceInEveryWireMode) {
  for (WireMode wire : {WireMode::kNative, WireMode::kI8, WireMode::kI8Ring, WireMode::kI8A2A,
                        WireMode::kE4M3, WireMode::kE4M3Ring, WireMode::kE4M3A2A}) {
    for (int world : {2, 3, 4, 8}) {
      const int64_t elems = world * 128 * 6;
      std::vector<uint64_t> digests;
      for (uint64_t seed : {1, 2, 3}) {
        SCOPED_TRACE(
            absl::StrFormat("wire %s, world %d, seed %d", WireModeName(wire), world, seed));
        SimDevice dev(world, seed, Fidelity::kShadow);
        DmaAllReduceOptions options;
        options.max_bytes = elems * 2;
        options.wire = wire;
        auto ar = DmaAllReduce::Create(&dev, options);
        ASSERT_TRUE(ar.ok()) << ar.status();
        std::vector<TensorView> in;
        for (int r = 0; r < world; ++r) {
          MemRef mem = *dev.Allocate(r, elems * 2, "input");
          ASSERT_TRUE(dev.WriteShadow(mem, 100 + r).ok());
          in.push_back(TensorView{mem, DType::kBF16, {elems}, true});
        }
        auto out = (*ar)->AllReduce(in);
        ASSERT_TRUE(out.ok()) << out.status();
        const Provenance p0 = *dev.ReadProvenance((*out)[0].mem);
        for (int r = 1; r < world; ++r) {
          EXPECT_EQ(*dev.ReadProvenance((*out)[r].mem), p0) << "rank " << r;
        }
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(CountChangedElems(*dev.ReadProvenance(in[r].mem), p0, 2), elems);
        }
        EXPECT_TRUE(dev.findings().empty()) << dev.findings().ToString();
        digests.push_back(ProvenanceDigest(p0));
      }
      EXPECT_EQ(digests[0], digests[1]);
      EXPECT_EQ(digests[0], digests[2]);
    }
  }
}

// The founding incident at a small geometry (4 ranks, 64 x 256 bf16).
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

ReplayReport MustReplay(std::string_view faults, Fidelity fidelity, uint64_t seed) {
  auto scenario = ParseScenario(kIncident, "incident.yaml");
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  SimDevice device(scenario->world, seed, fidelity);
  ReplayOptions options;
  options.faults = *FaultSet::Parse(faults);
  options.poll_device_findings = NewFindingsPoller(device);
  auto report = Replay(*scenario, &device, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return *report;
}

TEST(ShadowFidelityTest, TheFoundingIncidentGivesTheValuesVerdicts) {
  const ReplayReport bad = MustReplay("persistent-output", Fidelity::kShadow, 1);
  EXPECT_EQ(SummaryLine(bad),
            "pointer_alias=true  retained_mismatches=16,384 / 16,384  rank_consistent=true  "
            "status=FAIL");
  const ReplayReport good = MustReplay("none", Fidelity::kShadow, 1);
  EXPECT_EQ(SummaryLine(good),
            "pointer_alias=false  retained_mismatches=0 / 16,384  rank_consistent=true  "
            "status=PASS");
  EXPECT_EQ(good.fidelity, "shadow");
  EXPECT_THAT(FormatReportText(good), HasSubstr("hash=provenance:"));
  // The fault changes lifetimes, not what is computed: the same provenance with and without.
  ASSERT_EQ(bad.all_reduces.size(), 2u);
  ASSERT_EQ(good.all_reduces.size(), 2u);
  EXPECT_EQ(bad.all_reduces[1].hash, good.all_reduces[1].hash);
}

TEST(ShadowFidelityTest, SameSeedSameReportAndSeedsDoNotChangeProvenance) {
  const ReplayReport a = MustReplay("persistent-output", Fidelity::kShadow, 3);
  const ReplayReport b = MustReplay("persistent-output", Fidelity::kShadow, 3);
  EXPECT_EQ(FormatReportText(a) + FormatReportJson(a), FormatReportText(b) + FormatReportJson(b));
  const ReplayReport c = MustReplay("none", Fidelity::kShadow, 4);
  const ReplayReport d = MustReplay("none", Fidelity::kShadow, 5);
  ASSERT_EQ(c.all_reduces.size(), 2u);
  EXPECT_EQ(c.all_reduces[0].hash, d.all_reduces[0].hash);
  EXPECT_EQ(c.all_reduces[1].hash, d.all_reduces[1].hash);
  EXPECT_NE(c.all_reduces[0].hash, c.all_reduces[1].hash);
}

// The race, lifetime and deadlock checkers see the same accesses in both fidelities, and one seed
// makes the same scheduling choices: the findings are the same, word for word, but for the checks
// only values can make (wrong_sum, non_finite: the numbers a race left behind).
TEST(ShadowFidelityTest, CheckersReportWhatTheValuesFidelityReports) {
  for (std::string_view fault :
       {"drop-copy-wait", "flag-ready-not-consumed", "persistent-output"}) {
    for (uint64_t seed : {1, 2}) {
      SCOPED_TRACE(absl::StrFormat("%s seed %d", fault, seed));
      const ReplayReport values = MustReplay(fault, Fidelity::kValues, seed);
      const ReplayReport shadow = MustReplay(fault, Fidelity::kShadow, seed);
      EXPECT_FALSE(values.pass());
      EXPECT_EQ(SummaryLine(shadow), SummaryLine(values));
      ASSERT_LT(values.findings_total, 64);  // every finding kept: the lists compare whole
      std::vector<ReplayFinding> common;
      for (const ReplayFinding& f : values.findings) {
        if (f.kind != ReplayFindingKind::kWrongSum && f.kind != ReplayFindingKind::kNonFinite) {
          common.push_back(f);
        }
      }
      ASSERT_EQ(shadow.findings.size(), common.size());
      for (size_t i = 0; i < common.size(); ++i) {
        EXPECT_EQ(shadow.findings[i].kind, common[i].kind);
        if (common[i].kind == ReplayFindingKind::kDeviceChecker) {
          EXPECT_EQ(shadow.findings[i].detail, common[i].detail);
        }
      }
    }
  }
}

// A flag word that data overwrote has no value the shadow knows: the wait that reads it is
// reported, and (reading 0) never satisfied, which the deadlock checker reports too.
TEST(ShadowFidelityTest, AFlagOverwrittenByDataIsReportedNotGuessed) {
  SimDevice dev(1, 1, Fidelity::kShadow);
  MemRef words = *dev.Allocate(0, 16, "flags");  // expected at 0, flag at 8
  MemRef data = *dev.Allocate(0, 8, "data");
  ASSERT_TRUE(dev.Write(words, std::vector<uint8_t>(16, 0)).ok());
  ASSERT_TRUE(dev.WriteShadow(data, 9).ok());
  StreamId s = *dev.CreateStream(0, StreamKind::kFlag, "flag");
  ASSERT_TRUE(dev.Copy(s, words.Slice(8, 8), data, "data over the flag").ok());
  ASSERT_TRUE(dev.WaitFlag(s, words.Slice(0, 8), words.Slice(8, 8), "wait").ok());
  EXPECT_FALSE(dev.Synchronize().ok());
  EXPECT_EQ(dev.findings().Count(FindingKind::kShadowUnknownWord), 1);
  EXPECT_EQ(dev.findings().Count(FindingKind::kDeadlock), 1);
  EXPECT_THAT(dev.findings().findings()[0].message,
              HasSubstr("of allocation #1 'flags' (+8) is read as a flag but was last written by "
                        "a kernel or a large host write"));
}

}  // namespace
}  // namespace dmalab
