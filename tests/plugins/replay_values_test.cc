// The replay's value checks (common/scenario/known_values.h) against collectives that write wrong
// values the same way on every rank, which rank consistency cannot see: every output of exact
// integer inputs is checked against the exact sum (wrong_sum), every output from finite inputs
// for NaN and infinity (non_finite), in a captured graph's launches too, with no expect_equal in
// the scenario. The ring and a correct plugin pass the same scenarios.
#include <string>

#include "absl/strings/str_cat.h"
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

std::string TestPlugin(const std::string& name) {
  return absl::StrCat(DMALAB_TEST_PLUGINS_DIR, "/abi_", name, ".so");
}

ReplayReport ReplayText(const std::string& yaml, const std::string& collective) {
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  SimDevice device(s->world, 1);
  ReplayOptions options;
  options.collective = collective;
  options.poll_device_findings = NewFindingsPoller(device);
  absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayReport{};
}

// An eager call, then the same call captured once and launched twice with fresh integer inputs.
constexpr char kGraph[] = R"(world: 4
tensors: {x: [8, 256], y: [8, 256]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - fill: {tensor: y, kind: int, lo: 0, hi: 0}
  - all_reduce: {input: x, out: y, label: eager}
  - capture_graph:
      name: g
      steps:
        - all_reduce: {input: x, out: y, label: captured}
  - repeat:
      times: 2
      steps:
        - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 2}
        - launch_graph: g
)";

int Count(const ReplayReport& r, ReplayFindingKind kind) {
  int n = 0;
  for (const ReplayFinding& f : r.findings) n += f.kind == kind;
  return n;
}

TEST(ReplayValuesTest, CapturedCallsThatWriteTheSameWrongSumOnEveryRankAreWrongSum) {
  const ReplayReport r = ReplayText(kGraph, TestPlugin("graph_wrong_sum"));
  EXPECT_FALSE(r.pass());
  EXPECT_TRUE(r.rank_consistent);  // the same wrong values everywhere
  EXPECT_EQ(Count(r, ReplayFindingKind::kRankInconsistent), 0);
  EXPECT_EQ(Count(r, ReplayFindingKind::kNonFinite), 0);
  // Both launches, every rank; the eager call is right.
  EXPECT_EQ(Count(r, ReplayFindingKind::kWrongSum), 8);
  EXPECT_EQ(r.findings_total, 8);
  const ReplayFinding& f = r.findings.front();
  EXPECT_EQ(f.kind, ReplayFindingKind::kWrongSum);
  EXPECT_EQ(f.rank, 0);
  EXPECT_THAT(f.step, HasSubstr("launch_graph 'g' at t.yaml:15:11 [iteration 1/2]"));
  EXPECT_THAT(f.detail, HasSubstr("output 'y' differs from the exact sum of the ranks' integer "
                                  "inputs in "));
  EXPECT_EQ(f.of_elems, 2048);
}

TEST(ReplayValuesTest, CapturedCallsThatWriteNaNOnEveryRankAreNonFinite) {
  const ReplayReport r = ReplayText(kGraph, TestPlugin("graph_nan"));
  EXPECT_FALSE(r.pass());
  EXPECT_TRUE(r.rank_consistent);
  EXPECT_EQ(Count(r, ReplayFindingKind::kNonFinite), 8);
  EXPECT_EQ(Count(r, ReplayFindingKind::kWrongSum), 8);  // NaN is not the exact sum either
  for (const ReplayFinding& f : r.findings) {
    if (f.kind != ReplayFindingKind::kNonFinite) continue;
    EXPECT_EQ(f.elems, 2048);
    EXPECT_THAT(f.detail, HasSubstr("output 'y' holds 2048 non-finite elements (NaN or infinity) "
                                    "of 2048, from finite inputs; first at 0: "));
  }
}

// Random (non-integer) inputs: no exact sum is known, but the NaN is still found.
TEST(ReplayValuesTest, NaNFromRandomFiniteInputsIsNonFiniteWithoutAnExactSum) {
  std::string yaml = kGraph;
  for (size_t at = yaml.find("kind: int, lo: -8, hi: 8"); at != std::string::npos;
       at = yaml.find("kind: int, lo: -8, hi: 8")) {
    yaml.replace(at, 24, "kind: random, lo: -1, hi: 1");
  }
  const ReplayReport r = ReplayText(yaml, TestPlugin("graph_nan"));
  EXPECT_EQ(Count(r, ReplayFindingKind::kNonFinite), 8);
  EXPECT_EQ(Count(r, ReplayFindingKind::kWrongSum), 0);
  EXPECT_TRUE(ReplayText(yaml, TestPlugin("graph_wrong_sum")).pass());  // wrong, but unknowable
}

TEST(ReplayValuesTest, TheRingAndACorrectPluginPassTheSameScenario) {
  EXPECT_TRUE(ReplayText(kGraph, "ring").pass());
  EXPECT_TRUE(ReplayText(kGraph, TestPlugin("fails_at_world_2")).pass());  // correct at 4 ranks
}

// A wrong output is reported where it is made, not again where it is used: the wrong y feeds an
// add and a later all-reduce, whose own sums are right.
TEST(ReplayValuesTest, AWrongOutputIsNotBlamedOnTheCallsThatReadIt) {
  const std::string yaml = std::string(kGraph) +
                           "  - add: {dst: x, a: x, b: y, label: residual}\n"
                           "  - all_reduce: {input: x, in_place: true, label: after}\n";
  const ReplayReport r = ReplayText(yaml, TestPlugin("graph_wrong_sum"));
  EXPECT_EQ(Count(r, ReplayFindingKind::kWrongSum), 8);  // the launches only
  for (const ReplayFinding& f : r.findings) EXPECT_THAT(f.step, HasSubstr("launch_graph"));
}

}  // namespace
}  // namespace dmalab
