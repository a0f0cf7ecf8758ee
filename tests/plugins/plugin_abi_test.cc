// The plugin ABI's error paths (common/plugin/plugin_collective.cc), each with a tiny module
// from abi_plugins.c that breaks the ABI one way: every failure to load is an InvalidArgument
// naming the file (exit status 2 in tools), a plugin's failing call and a broken ownership
// promise are collective_error findings (exit status 1) naming the plugin and its message, never
// a crash.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/plugin/open_collective.h"
#include "common/plugin/plugin_collective.h"
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "measure/device_timer.h"
#include "measure/sweep.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Case(const std::string& name) {
  return absl::StrCat(DMALAB_TEST_PLUGINS_DIR, "/abi_", name, ".so");
}

absl::Status LoadError(const std::string& path) {
  SimDevice device(2, 1);
  PluginConfig config;
  config.path = path;
  config.max_bytes = 4096;
  absl::StatusOr<std::unique_ptr<PluginCollective>> p = PluginCollective::Load(&device, config);
  return p.status();
}

TEST(PluginAbiTest, APluginBuiltAgainstAnotherAbiVersionIsRefusedNamingBoth) {
  const std::string path = Case("other_abi");
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("plugin ", path,
                                      ": it was built against plugin ABI version 2; this dmalab "
                                      "speaks version 1: rebuild it against this dmalab's "
                                      "<dmalab/plugin.h>"));
}

TEST(PluginAbiTest, ALibraryWithoutTheEntrySymbolIsNotAPlugin) {
  const std::string path = Case("no_entry");
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("plugin ", path,
                                      ": it does not export dmalab_plugin_entry: not a dmalab "
                                      "plugin (include <dmalab/plugin.h> and define "
                                      "dmalab_plugin_entry_v2, or v1's dmalab_plugin_entry)"));
}

TEST(PluginAbiTest, AnEntryReturningNullRefusesThisAbiVersion) {
  const std::string path = Case("entry_returns_null");
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            absl::StrCat("plugin ", path,
                         ": dmalab_plugin_entry(1) returned NULL: the plugin refuses plugin ABI "
                         "version 1, which this dmalab speaks (rebuild it against this dmalab's "
                         "<dmalab/plugin.h>)"));
}

TEST(PluginAbiTest, ANullEntryPointInTheTableIsNamed) {
  const std::string path = Case("null_entry_point");
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            absl::StrCat("plugin ", path,
                         ": its dmalab_plugin table has no all_reduce_into (NULL); every field is "
                         "required"));
}

TEST(PluginAbiTest, AFailedCreateGivesThePluginsMessage) {
  const std::string path = Case("create_fails");
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("plugin ", path,
                                      ": create failed: no device memory for the 2 GiB "
                                      "workspace"));
}

TEST(PluginAbiTest, ANonexistentPathCannotBeLoaded) {
  const std::string path = "/nonexistent/dir/plugin.so";
  const absl::Status s = LoadError(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("plugin ", path, ": cannot load it: ", path,
                                      ": cannot open shared object file: No such file or "
                                      "directory"));
}

TEST(PluginAbiTest, AFileThatIsNotASharedLibraryCannotBeLoaded) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "dmalab_plugin_abi_test_not_elf.so").string();
  std::ofstream(path) << "not a shared library\n";
  const absl::Status s = LoadError(path);
  std::remove(path.c_str());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith(absl::StrCat("plugin ", path, ": cannot load it: ", path, ": ")));
}

// A collective spec that is neither the ring nor a path.
TEST(PluginAbiTest, AnUnknownCollectiveNameListsWhatIsAllowed) {
  SimDevice device(2, 1);
  CollectiveParams params;
  params.max_bytes = 4096;
  auto c = OpenCollective(&device, "nccl", params);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "collective is 'nccl'; allowed: ring (the built-in DMA ring), or the path of a "
            "plugin's shared library (containing '/' or ending in .so)");
}

constexpr char kOneCall[] = R"(world: 2
tensors: {x: [4, 256], y: [4, 256]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - fill: {tensor: y, kind: int, lo: 0, hi: 0}
  - all_reduce: {input: x, out: y, label: layer0}
  - all_reduce: {input: x, out: y, label: layer1}
)";

absl::StatusOr<ReplayReport> ReplayWith(const std::string& collective, const std::string& yaml) {
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  SimDevice device(s->world, 1);
  ReplayOptions options;
  options.collective = collective;
  options.poll_device_findings = NewFindingsPoller(device);
  return Replay(*s, &device, options);
}

TEST(PluginAbiTest, AReplayWithAPluginThatDoesNotLoadIsBadInputNamingTheScenario) {
  const std::string path = Case("null_entry_point");
  absl::StatusOr<ReplayReport> r = ReplayWith(path, kOneCall);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("t.yaml: plugin ", path,
                         ": its dmalab_plugin table has no all_reduce_into (NULL); every field is "
                         "required"));
}

// A plugin's call that returns an error is the collective under test failing (issue 22): a
// collective_error finding naming the plugin and its message, the replay stopped there (FAIL,
// exit status 1), not bad input.
ReplayFinding OnlyFinding(const absl::StatusOr<ReplayReport>& r) {
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->findings.size() != 1) {
    ADD_FAILURE() << "expected exactly one finding";
    return ReplayFinding{};
  }
  EXPECT_EQ(r->findings_total, 1);
  EXPECT_FALSE(r->pass());
  return r->findings[0];
}

TEST(PluginAbiTest, AFailingCallIsACollectiveErrorFindingNamingThePluginAndItsMessage) {
  absl::StatusOr<ReplayReport> r = ReplayWith(Case("all_reduce_fails"), kOneCall);
  const ReplayFinding f = OnlyFinding(r);
  EXPECT_EQ(f.kind, ReplayFindingKind::kCollectiveError);
  EXPECT_EQ(f.step_index, 3);  // the first all_reduce; the second never ran
  EXPECT_EQ(f.detail,
            "all_reduce 'layer0' at t.yaml:6:5: plugin 'abi_case' failed all_reduce call 1 "
            "(explicit form): dtype 0 (bf16) is not supported; this all-reduce takes fp32 only");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->all_reduces.empty());
}

TEST(PluginAbiTest, AFailingDefaultFormCallIsACollectiveErrorFindingToo) {
  const ReplayFinding f = OnlyFinding(ReplayWith(Case("all_reduce_fails"), R"(world: 2
tensors: {x: [4, 256], y: [4, 256]}
steps:
  - fill: {tensor: x, kind: int, lo: -8, hi: 8, seed: 1}
  - all_reduce: {input: x, result: y}
)"));
  EXPECT_EQ(f.kind, ReplayFindingKind::kCollectiveError);
  EXPECT_EQ(f.detail,
            "all_reduce at t.yaml:5:5: plugin 'abi_case' failed all_reduce call 1 (default "
            "form): the default form is not implemented");
}

// The ring refusing a call's arguments stays bad input: its rules are documented.
TEST(PluginAbiTest, OnlyTheRingRefusingACallIsBadInput) {
  const absl::Status refused = absl::InvalidArgumentError("x");
  EXPECT_TRUE(IsCollectiveCallBadInput(refused, "ring"));
  EXPECT_FALSE(IsCollectiveCallBadInput(refused, Case("all_reduce_fails")));
  EXPECT_FALSE(IsCollectiveCallBadInput(absl::DeadlineExceededError("x"), "ring"));
  EXPECT_EQ(CollectiveCallFailureKind(refused, Case("all_reduce_fails")),
            ReplayFindingKind::kCollectiveError);
  EXPECT_EQ(CollectiveCallFailureKind(absl::AbortedError("x"), "ring"),
            ReplayFindingKind::kCollectiveError);
  EXPECT_EQ(CollectiveCallFailureKind(absl::DeadlineExceededError("x"), "ring"),
            ReplayFindingKind::kDeviceError);
}

// Freeing the caller's input: refused (the input survives), reported as a collective_error
// finding against the plugin; the replay stops there (FAIL, exit status 1), no crash.
TEST(PluginAbiTest, FreeingMemoryThePluginDoesNotOwnIsACollectiveErrorFinding) {
  absl::StatusOr<ReplayReport> r = ReplayWith(Case("frees_input"), kOneCall);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->pass());
  EXPECT_EQ(r->collective, "plugin:abi_case");
  ASSERT_EQ(r->findings_total, 1);
  const ReplayFinding& f = r->findings[0];
  EXPECT_EQ(f.kind, ReplayFindingKind::kCollectiveError);
  EXPECT_EQ(ReplayFindingKindName(f.kind), "collective_error");
  EXPECT_EQ(f.step_index, 3);  // the first all_reduce; the second never ran
  EXPECT_THAT(f.detail, StartsWith("all_reduce 'layer0' at t.yaml:6:5: plugin 'abi_case' broke "
                                   "the ABI's ownership rule in all_reduce call 1 (explicit "
                                   "form): free of rank 0 address 0x"));
  EXPECT_THAT(f.detail, ContainsRegex("address 0x[0-9a-f]+ \\(2048 bytes\\) refused: the plugin "
                                      "does not own it \\(it frees only allocations it made and "
                                      "has not handed over as default-form results\\)$"));
  EXPECT_TRUE(r->all_reduces.empty());
}

// dmalab sweep over a plugin: a failure while the collective runs is marked as the collective's
// (exit status 1 unless the call refused its arguments), naming the size and the phase; a plugin
// that cannot be created is the sweep unable to run (exit status 2), unmarked.
absl::Status SweepWith(const std::string& path) {
  SimDevice device(2, 1);
  SweepOptions o;
  o.min_bytes = 64 << 10;
  o.max_bytes = 128 << 10;
  o.iters = 1;
  o.warmup = 1;
  o.collective = path;
  return RunSweep(device, WallClock(), o).status();
}

TEST(PluginAbiTest, ASweepMarksABrokenCallAsTheCollectivesFailureAtItsSizeAndPhase) {
  const absl::Status s = SweepWith(Case("frees_input"));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(IsCollectiveFailure(s));
  EXPECT_FALSE(IsRejectedArguments(s));
  EXPECT_THAT(std::string(s.message()),
              StartsWith("the all-reduce of 64 KiB (out of place) failed: plugin "
                         "'abi_case' broke the ABI's ownership rule in all_reduce "
                         "call 1 (explicit form): free of rank 0 address 0x"));
}

TEST(PluginAbiTest, ASweepKeepsARefusedCallRejectedArguments) {
  const absl::Status s = SweepWith(Case("all_reduce_fails"));
  EXPECT_TRUE(IsCollectiveFailure(s));
  EXPECT_TRUE(IsRejectedArguments(s));
  EXPECT_EQ(s.message(),
            "the all-reduce of 64 KiB (out of place) failed: plugin 'abi_case' failed all_reduce "
            "call 1 (explicit form): dtype 0 (bf16) is not supported; this all-reduce takes fp32 "
            "only");
}

TEST(PluginAbiTest, ASweepWhosePluginCannotBeCreatedIsNotTheCollectivesFailure) {
  const absl::Status s = SweepWith(Case("create_fails"));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(IsCollectiveFailure(s));
  EXPECT_FALSE(IsCollectiveFailure(SweepWith(Case("no_entry"))));
}

}  // namespace
}  // namespace dmalab
