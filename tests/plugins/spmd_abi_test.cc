// ABI v2 (SPMD) plugins on the simulator: the loader's version rules, the IPC error paths, a
// bootstrap that only some ranks call, what an instance leaks, raw addresses kept past their
// allocation's free (ABI v1 too), and the example plugins' verdicts and determinism.
#include <cstddef>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/plugin/open_collective.h"
#include "common/plugin/spmd_collective.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
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

// --- Deferred peer mappings (reserve_address, ipc_open_mem_handle_at, release_address) ----------

TEST(SpmdAbiTest, TheDeviceTableGrewByTrailingFieldsOnly) {
  // The first v2 table: 8 bytes of sizes, the context, 4 ints, then 28 function pointers.
  constexpr size_t kFirstV2TableBytes = 8 + 8 + 4 * 4 + 28 * 8;
  EXPECT_EQ(offsetof(dmalab_rank_api, native_device) + sizeof(void*), kFirstV2TableBytes);
  EXPECT_EQ(offsetof(dmalab_rank_api, reserve_address), kFirstV2TableBytes);
  dmalab_rank_api older{};
  older.struct_size = kFirstV2TableBytes;
  EXPECT_FALSE(DMALAB_HAS_FIELD(&older, dmalab_rank_api, reserve_address));
  older.struct_size = sizeof(dmalab_rank_api);
  EXPECT_TRUE(DMALAB_HAS_FIELD(&older, dmalab_rank_api, release_address));
}

TEST(SpmdAbiTest, APluginBuiltAgainstTheFirstV2HeaderLoadsAndWorks) {
  SimDevice device(3, 1);
  auto c = Open(&device, Case("spmd_old_rank_api"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(CallOnce(device, **c).ok());
  ASSERT_TRUE((*c)->Close().ok());
  EXPECT_TRUE((*c)->TakeFindings().findings.empty());
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
}

TEST(SpmdAbiTest, OpeningAHandleAtARangeThatIsNotReservedIsTheCallersBadArgument) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_open_at_unreserved"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("ipc_open_mem_handle_at(allocation): ipc open at: rank 0: 0x"));
  EXPECT_THAT(s.message(), HasSubstr(" is not a range this rank reserved (reserve_address)"));
}

TEST(SpmdAbiTest, OpeningAHandleAtATooSmallRangeIsRefusedNamingBothSizes) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_open_at_too_small"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ipc_open_mem_handle_at(1 KiB range): ipc open at: rank 0: "
                                     "reserved range #"));
  EXPECT_THAT(s.message(), HasSubstr(" of rank 0 is 1024 bytes; the handle's allocation is 4096 "
                                     "bytes and does not fit"));
  // The plugin released its range after the refusal: nothing leaks.
  ASSERT_TRUE((*c)->Close().ok());
  EXPECT_TRUE((*c)->TakeFindings().findings.empty());
}

TEST(SpmdAbiTest, ReleasingARangeTwiceIsRefusedNamingTheFirstRelease) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_releases_twice"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("second release: release_address: rank 0: reserved range #"));
  EXPECT_THAT(s.message(), HasSubstr("was already released by"));
}

TEST(SpmdAbiTest, ARangeStillReservedAtDestroyIsALeakOnEveryRank) {
  SimDevice device(3, 1);
  auto c = Open(&device, Case("spmd_keeps_reservation"));
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
                                       " still holds after destroy: 1 reserved address range(s) "
                                       "([0x")));
  }
}

TEST(SpmdAbiTest, WorkOnARangeWhoseMappingWasClosedIsAnUnmappedAddressFinding) {
  SimDevice device(2, 1);
  auto c = Open(&device, Case("spmd_use_after_unmap"));
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = CallOnce(device, **c);
  // The copy while mapped went through; the one after the close did not.
  EXPECT_THAT(s.message(), HasSubstr("copy after unmap: rank 0 reached [0x"));
  ASSERT_GE(device.findings().Count(FindingKind::kUnmappedAddress), 1);
  const Finding& f = device.findings().findings().front();
  EXPECT_EQ(f.kind, FindingKind::kUnmappedAddress);
  EXPECT_THAT(f.message, HasSubstr("(copy src, 4096 bytes) in its reserved range #"));
  EXPECT_THAT(f.message, HasSubstr("where nothing is mapped: its IPC mapping #"));
  EXPECT_THAT(f.message, HasSubstr(" was closed by '"));
}

TEST(SpmdAbiTest, ACapturedGraphResolvesAReservedRangeAtEveryLaunch) {
  SimDevice device(2, 1);
  const MemRef peer = *device.Allocate(1, 4096, "peer input");
  const MemRef dst = *device.Allocate(0, 4096, "out");
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE(device.Write(peer, bytes).ok());
  const absl::StatusOr<IpcHandle> handle = device.ExportMemory(peer);
  ASSERT_TRUE(handle.ok()) << handle.status();
  const absl::StatusOr<MemRef> range = device.ReserveAddress(0, 8192);
  ASSERT_TRUE(range.ok()) << range.status();
  const MemRef src = range->Slice(0, 4096);
  // Outside a capture, nothing mapped is refused at once.
  EXPECT_EQ(device.Copy(device.ComputeStream(0), dst, src, "eager").code(),
            absl::StatusCode::kFailedPrecondition);
  device.ClearFindings();
  // Captured while nothing is mapped there: the graph names the address only.
  const absl::StatusOr<GraphId> graph = device.CaptureGraph(
      [&] { return device.Copy(device.ComputeStream(0), dst, src, "read peer"); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
  // Launched before the mapping: unmapped.
  EXPECT_EQ(device.LaunchGraph(*graph).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(device.findings().Count(FindingKind::kUnmappedAddress), 1);
  EXPECT_THAT(device.findings().findings()[0].message,
              HasSubstr("where nothing is mapped: no mapping was ever placed in it"));
  EXPECT_THAT(device.findings().findings()[0].message, HasSubstr("graph 0: read peer"));
  device.ClearFindings();
  // Mapped after the capture: the launch reads the peer's bytes.
  const absl::StatusOr<MemRef> mapping = device.OpenMemoryAt(0, *handle, *range);
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  EXPECT_EQ(mapping->addr, range->addr);
  EXPECT_EQ(mapping->bytes, 4096u);
  // A second mapping in the same range is refused while the first is open.
  EXPECT_THAT(device.OpenMemoryAt(0, *handle, *range).status().message(),
              HasSubstr("already holds IPC mapping #"));
  ASSERT_TRUE(device.LaunchGraph(*graph).ok());
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(device.Read(dst, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, bytes);
  EXPECT_TRUE(device.findings().empty()) << device.findings().ToString();
  // Closed: the range is unmapped again.
  ASSERT_TRUE(device.CloseMemory(*mapping).ok());
  EXPECT_EQ(device.LaunchGraph(*graph).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(device.findings().Count(FindingKind::kUnmappedAddress), 1);
  EXPECT_THAT(device.findings().findings()[0].message, HasSubstr("its IPC mapping #"));
  device.ClearFindings();
  // Released: refused, then a second release names the first.
  ASSERT_TRUE(device.ReleaseAddress(*range).ok());
  EXPECT_EQ(device.LaunchGraph(*graph).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(device.findings().findings()[0].message, HasSubstr("the range was released by"));
  const absl::Status twice = device.ReleaseAddress(*range);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("was already released by"));
  // Past the end of the reservation, and a window address nobody reserved.
  const absl::StatusOr<MemRef> live = device.ReserveAddress(0, 8192);
  ASSERT_TRUE(live.ok()) << live.status();
  const absl::Status past =
      device.Copy(device.ComputeStream(0), dst, live->Slice(6144, 4096), "past");
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("reaches past the end of reserved range #"));
  ASSERT_TRUE(device.ReleaseAddress(*live).ok());
  EXPECT_EQ(device.OpenMemoryAt(0, *handle, MemRef{0, range->addr + (uint64_t{4} << 30), 4096, 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// A device without deferred mappings, as the CUDA backend: custom_ar's captured calls take the
// eager copy path, and the graph still gives exact sums.
class SimDeviceWithoutReservations : public SimDevice {
 public:
  using SimDevice::SimDevice;
  absl::StatusOr<MemRef> ReserveAddress(int /*rank*/, uint64_t /*bytes*/) override {
    return absl::UnimplementedError("no address reservations here");
  }
};

TEST(SpmdAbiTest, CustomArCapturesItsEagerPathWhereTheDeviceCannotReserve) {
  absl::StatusOr<Scenario> s = LoadScenarioFile("examples/plugins/custom_ar.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SimDeviceWithoutReservations device(s->world, seed);
    ReplayOptions options;
    options.collective = Example("custom_ar");
    options.poll_device_findings = NewFindingsPoller(device);
    absl::StatusOr<ReplayReport> r = Replay(*s, &device, options);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->pass()) << "seed " << seed << ": " << FormatReportText(*r);
    // Every launch checked its three captured outputs.
    int captured_checks = 0;
    for (const AllReduceRecord& rec : r->all_reduces) {
      captured_checks += absl::StrContains(rec.step, "launch_graph") ? 1 : 0;
    }
    EXPECT_EQ(captured_checks, 9);
    // And the graph-count bug has nothing to miscount on this path: it passes too.
    SimDeviceWithoutReservations other(s->world, seed);
    options.collective = Example("custom_ar_graph_count");
    options.poll_device_findings = NewFindingsPoller(other);
    absl::StatusOr<ReplayReport> bug = Replay(*s, &other, options);
    ASSERT_TRUE(bug.ok()) << bug.status();
    EXPECT_TRUE(bug->pass()) << "seed " << seed << ": " << FormatReportText(*bug);
  }
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
        SpmdExample{"custom_ar", "examples/plugins/custom_ar.yaml", ""},
        SpmdExample{"custom_ar_graph_count", "examples/plugins/custom_ar.yaml", "unmapped_address"},
        SpmdExample{"custom_ar", "examples/plugins/custom_ar_graph_pool.yaml", ""},
        SpmdExample{"custom_ar_graph_output", "examples/plugins/custom_ar_graph_pool.yaml",
                    "use-after-reuse"},
        SpmdExample{"custom_ar_raw_peer", "scenarios/explicit_outputs_tp3.yaml", "foreign_address"},
        SpmdExample{"registered_input_fixed", "examples/plugins/registered_input.yaml", ""},
        SpmdExample{"registered_input_fixed", "scenarios/explicit_outputs_tp3.yaml", ""},
        SpmdExample{"registered_input_cache", "examples/plugins/registered_input.yaml",
                    "stale_ipc_mapping"},
        SpmdExample{"registered_input_leak", "examples/plugins/registered_input.yaml",
                    "resource_growth"},
        // Rank 1 alone reallocates its input (steps with ranks:).
        SpmdExample{"registered_input_fixed", "examples/plugins/registered_input_divergent.yaml",
                    ""},
        SpmdExample{"custom_ar", "examples/plugins/registered_input_divergent.yaml", ""},
        SpmdExample{"dma_ring_v2", "examples/plugins/registered_input_divergent.yaml", ""},
        SpmdExample{"registered_input_cache", "examples/plugins/registered_input_divergent.yaml",
                    "stale_ipc_mapping"}),
    [](const auto& info) {
      std::string name = info.param.plugin + "_" + std::to_string(info.index);
      return name;
    });

TEST(SpmdAbiTest, TheSameSeedGivesTheSameReportBytes) {
  for (const auto& [file, plugin] : std::vector<std::pair<std::string, std::string>>{
           {"examples/plugins/registered_input.yaml", "custom_ar"},
           {"examples/plugins/registered_input.yaml", "registered_input_cache"},
           {"examples/plugins/registered_input_divergent.yaml", "registered_input_cache"},
           {"examples/plugins/custom_ar.yaml", "custom_ar"},
           {"examples/plugins/custom_ar.yaml", "custom_ar_graph_count"},
           {"examples/plugins/custom_ar_graph_pool.yaml", "custom_ar_graph_output"}}) {
    absl::StatusOr<Scenario> s = LoadScenarioFile(file);
    ASSERT_TRUE(s.ok()) << s.status();
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
