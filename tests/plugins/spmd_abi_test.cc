// ABI v2 (SPMD) plugins on the simulator: the loader's version rules, the IPC error paths, a
// bootstrap that only some ranks call, what an instance leaks, raw addresses kept past their
// allocation's free (ABI v1 too), and the example plugins' verdicts and determinism.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plugin/open_collective.h"
#include "common/plugin/spmd_collective.h"
#include "common/scenario/replay.h"
#include "common/scenario/report.h"
#include "common/scenario/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Case(const std::string& name) {
  return absl::StrCat(DMALAB_TEST_PLUGINS_DIR, "/", name, ".so");
}
std::string Example(const std::string& name) {
  return absl::StrCat(DMALAB_EXAMPLES_DIR, "/", name, ".so");
}

absl::StatusOr<std::unique_ptr<Collective>> Open(Device* device, const std::string& path) {
  CollectiveParams params;
  params.max_bytes = 4096;
  return OpenCollective(device, path, params);
}

// Calls the explicit form once on 4 KiB tensors of every rank.
absl::Status CallOnce(SimDevice& device, Collective& c) {
  std::vector<MemRef> mems;
  for (int r = 0; r < device.world_size(); ++r) mems.push_back(*device.Allocate(r, 4096, "x"));
  const std::vector<TensorView> views = ContiguousViews(mems, DType::kBF16, 2048);
  return c.AllReduce(views, views);
}

TEST(SpmdAbiTest, AnOlderSmallerTableLoadsWithItsMissingFieldsAbsent) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_old_table"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->name(), "plugin:abi_v2_case");
  // graph_captured lies beyond the table: absent, so a capture's end asks nothing of it.
  EXPECT_TRUE((*c)->CaptureEnded().ok());
  EXPECT_TRUE(CallOnce(device, **c).ok());
}

TEST(SpmdAbiTest, APluginBuiltForANewerMajorVersionIsRefusedNamingBoth) {
  SimDevice device(2, 1);
  const std::string path = Case("spmd_newer_abi");
  auto c = Open(&device, path);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            absl::StrCat("plugin ", path,
                         ": it was built for plugin ABI version 3; this dmalab speaks versions 1 "
                         "and 2: use a newer dmalab, or build the plugin against this dmalab's "
                         "<dmalab/plugin.h>"));
}

TEST(SpmdAbiTest, OpeningAGarbageHandleIsTheCallersBadArgument) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_garbage_handle"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  // The plugin passes on the device's DMALAB_ERROR_BAD_ARGUMENT: bad input, not a finding.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("ipc_open_mem_handle(garbage): ipc open on rank 0: the bytes are not a "
                        "memory handle of this device: they do not start as a dmalab IPC handle"));
}

TEST(SpmdAbiTest, ClosingAMappingTwiceIsRefusedNamingTheFirstClose) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_closes_twice"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("second close: ipc close: rank 0: IPC mapping #"));
  EXPECT_THAT(s.message(), HasSubstr("was already closed by"));
}

TEST(SpmdAbiTest, ABootstrapCallOfSomeRanksOnlyIsADeadlockFindingNotAHang) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SimDevice device(3, seed);
    auto c = Open(&device, Case("spmd_bootstrap_on_rank_0"));
    ASSERT_TRUE(c.ok()) << c.status();
    const absl::Status s = CallOnce(device, **c);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    const DeviceFindings f = (*c)->TakeFindings();
    ASSERT_EQ(f.findings.size(), 1u);
    EXPECT_EQ(f.findings[0].checker, "deadlock");
    EXPECT_EQ(f.findings[0].detail,
              "deadlock: rank 0 waits in bootstrap call #2 (barrier) during all_reduce call 1 "
              "(explicit form), which rank 1 (it returned from all_reduce call 1 (explicit form)), "
              "rank 2 (it returned from all_reduce call 1 (explicit form)) never made: they "
              "returned or wait elsewhere, and no rank can progress");
    // The ranks are out of step now: later calls say so instead of running.
    EXPECT_THAT(CallOnce(device, **c).message(), HasSubstr("lost step"));
  }
}

TEST(SpmdAbiTest, MappingsNeverClosedAreALeakAtDestroyOnEveryRank) {
  SimDevice device(3, 1);
  auto c = Open(&device, Case("spmd_never_closes"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(CallOnce(device, **c).ok());
  ASSERT_TRUE((*c)->Close().ok());
  const DeviceFindings f = (*c)->TakeFindings();
  ASSERT_EQ(f.findings.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(f.findings[r].checker, "resource_leak");
    EXPECT_EQ(f.findings[r].rank, r);
    EXPECT_THAT(f.findings[r].detail,
                HasSubstr(absl::StrCat("rank ", r,
                                       " still holds after destroy: 1 allocation(s) ('registered' "
                                       "(4096 bytes)), 2 IPC mapping(s)")));
  }
}

TEST(SpmdAbiTest, AWellBehavedInstanceLeavesNothingBehind) {
  SimDevice device(4, 1);
  auto c = Open(&device, Case("spmd_well_behaved"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(CallOnce(device, **c).ok());
  ASSERT_TRUE((*c)->Close().ok());
  EXPECT_TRUE((*c)->TakeFindings().findings.empty());
  EXPECT_EQ(device.OpenMappings(0), 0);
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
}

ReplayReport ReplayText(const std::string& yaml, const std::string& collective, uint64_t seed) {
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  SimDevice device(s->world, seed);
  ReplayOptions options;
  options.collective = collective;
  options.poll_device_findings = NewFindingsPoller(device);
  absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayReport{};
}

TEST(SpmdAbiTest, AV1RawPointerKeptPastTheCallersFreeIsAUseAfterReuse) {
  // The plugin keeps rank 0's default-form result as a raw pointer (alloc_id 0); the caller
  // frees the result, `c` takes its block, and the next call writes through the pointer.
  const std::string yaml = R"(name: keeps_raw_result
world: 2
dtype: bf16
shapes: {v: [2048]}
tensors: {a: v, r: v, b: v, c: v}
steps:
  - fill: {tensor: a, kind: int, lo: 1, hi: 4}
  - fill: {tensor: b, kind: int, lo: 1, hi: 4}
  - all_reduce: {input: a, result: r}
  - release: r
  - fill: {tensor: c, kind: int, lo: 5, hi: 8}
  - retain: c
  - all_reduce: {input: a, out: b}
)";
  const ReplayReport r = ReplayText(yaml, Case("abi_keeps_raw_result"), 1);
  bool reuse = false;
  for (const ReplayFinding& f : r.findings) {
    if (f.checker != "use-after-reuse") continue;
    reuse = true;
    EXPECT_EQ(f.step_index, 7);
    EXPECT_THAT(f.detail, HasSubstr("'result' (freed by 'step 4 release"));
    EXPECT_THAT(f.detail, HasSubstr("whose bytes now belong to allocation"));
    EXPECT_THAT(f.detail, HasSubstr("'c'"));
  }
  EXPECT_TRUE(reuse) << FormatReportText(r);
  EXPECT_FALSE(r.pass());
}

TEST(SpmdAbiTest, AV1PluginWhoseAllocationsGrowEveryCallIsReportedOnceAtTheSixteenthCall) {
  const std::string yaml = R"(name: leaks_per_call
world: 2
dtype: bf16
shapes: {v: [2048]}
tensors: {a: v, b: v}
steps:
  - fill: {tensor: a, kind: int, lo: 1, hi: 4}
  - fill: {tensor: b, kind: int, lo: 1, hi: 4}
  - repeat:
      times: 40
      steps:
        - all_reduce: {input: a, out: b}
)";
  const ReplayReport r = ReplayText(yaml, Case("abi_leaks_per_call"), 1);
  std::vector<const ReplayFinding*> growth;
  for (const ReplayFinding& f : r.findings) {
    if (f.checker == "resource_growth") growth.push_back(&f);
  }
  ASSERT_EQ(growth.size(), 1u) << FormatReportText(r);
  EXPECT_EQ(growth[0]->rank, 0);
  EXPECT_EQ(growth[0]->iteration, 16);
  EXPECT_EQ(growth[0]->detail,
            "plugin:abi_case holds 16 allocations on rank 0 beyond the scenario's live tensors, "
            "more after each of the last 16 calls; a collective whose allocations grow with every "
            "call in steady state runs the device out of memory");
}

TEST(SpmdAbiTest, TheRingsAllocationsDoNotGrow) {
  const std::string yaml = R"(name: ring_steady
world: 2
dtype: bf16
shapes: {v: [2048]}
tensors: {a: v, b: v, r: v}
steps:
  - fill: {tensor: a, kind: int, lo: 1, hi: 4}
  - fill: {tensor: b, kind: int, lo: 1, hi: 4}
  - repeat:
      times: 40
      steps:
        - all_reduce: {input: a, out: b}
        - all_reduce: {input: a, result: r}
        - release: r
)";
  const ReplayReport r = ReplayText(yaml, "ring", 1);
  EXPECT_TRUE(r.pass()) << FormatReportText(r);
}

struct SpmdExample {
  std::string plugin;
  std::string scenario;
  std::string checker;  // "" for a fixed one: PASS with no finding
};

class SpmdExampleTest : public ::testing::TestWithParam<SpmdExample> {};

TEST_P(SpmdExampleTest, BugsAreCaughtByTheirCheckerAndFixesPassEverySeed) {
  const SpmdExample& e = GetParam();
  absl::StatusOr<Scenario> s = LoadScenarioFile(e.scenario);
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SimDevice device(s->world, seed);
    ReplayOptions options;
    options.collective = Example(e.plugin);
    options.poll_device_findings = NewFindingsPoller(device);
    absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
    ASSERT_TRUE(r.ok()) << r.status();
    if (e.checker.empty()) {
      EXPECT_TRUE(r->pass()) << "seed " << seed << ": " << FormatReportText(*r);
      continue;
    }
    std::set<std::string> checkers;
    for (const ReplayFinding& f : r->findings) checkers.insert(f.checker);
    EXPECT_TRUE(checkers.contains(e.checker)) << "seed " << seed << ": " << FormatReportText(*r);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Examples, SpmdExampleTest,
    ::testing::Values(
        SpmdExample{"custom_ar", "scenarios/explicit_outputs_tp3.yaml", ""},
        SpmdExample{"custom_ar", "examples/plugins/registered_input.yaml", ""},
        SpmdExample{"custom_ar", "examples/plugins/graph_shared_buffer.yaml", ""},
        SpmdExample{"custom_ar_raw_peer", "scenarios/explicit_outputs_tp3.yaml", "foreign_address"},
        SpmdExample{"registered_input_fixed", "examples/plugins/registered_input.yaml", ""},
        SpmdExample{"registered_input_fixed", "scenarios/explicit_outputs_tp3.yaml", ""},
        SpmdExample{"registered_input_cache", "examples/plugins/registered_input.yaml",
                    "stale_ipc_mapping"},
        SpmdExample{"registered_input_leak", "examples/plugins/registered_input.yaml",
                    "resource_growth"}),
    [](const auto& info) {
      std::string name = info.param.plugin + "_" + std::to_string(info.index);
      return name;
    });

TEST(SpmdAbiTest, TheSameSeedGivesTheSameReportBytes) {
  absl::StatusOr<Scenario> s = LoadScenarioFile("examples/plugins/registered_input.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  for (const char* plugin : {"custom_ar", "registered_input_cache"}) {
    std::string text[2];
    for (std::string& t : text) {
      SimDevice device(s->world, 7);
      ReplayOptions options;
      options.collective = Example(plugin);
      options.poll_device_findings = NewFindingsPoller(device);
      absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
      ASSERT_TRUE(r.ok()) << r.status();
      t = FormatReportText(*r);
    }
    EXPECT_EQ(text[0], text[1]) << plugin;
  }
}

}  // namespace
}  // namespace dmalab
