// The lockstep device (common/spmd/lockstep_device.h) across real processes, without a GPU: the
// launcher starts the rank program (rank_program.cc) in its lockstep modes, whose ranks run one
// lockstep device over the socket bootstrap and a fake shared-memory device (shm_ipc_device.h).
// A rank reaching its successor's buffer proves that the handle one process exported was opened
// by another and maps the same bytes; the failure paths check that a rank that dies is named by
// the others and that a launch of the wrong size is refused. The fake device itself is checked
// first, within one process. Then ABI v2 plugins run one instance per process over it
// (common/plugin/spmd_process.h): exact sums, every rank's leaks at rank 0, a failed create.
#include <stdio.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/plugin/spmd_process.h"
#include "dmalab/device.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "dmalab/tensor.h"
#include "gtest/gtest.h"
#include "runner/launcher.h"
#include "runner/run_device.h"
#include "tests/runner/shm_ipc_device.h"

namespace dmalab {
namespace {

using Clock = std::chrono::steady_clock;

// The fake device within one process: a handle it exports opens (through /proc/<own pid>) as a
// second mapping of the same memory.
TEST(ShmIpcDeviceTest, AnExportedAllocationOpensAsTheSameBytes) {
  ShmIpcDevice dev;
  EXPECT_EQ(dev.world_size(), 1);
  EXPECT_EQ(dev.name(), "shm");
  EXPECT_TRUE(dev.SupportsIpc());
  absl::StatusOr<MemRef> a = dev.Allocate(0, 256, "a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->alloc_id, 1u);
  absl::StatusOr<MemRef> b = dev.Allocate(0, 256, "b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->alloc_id, 2u);

  std::vector<uint8_t> bytes(256);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 3);
  ASSERT_TRUE(dev.Write(*a, bytes).ok());
  absl::StatusOr<IpcHandle> h = dev.ExportMemory(*a);
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<MemRef> m = dev.OpenMemory(0, *h);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NE(m->addr, a->addr);
  EXPECT_EQ(m->bytes, 256u);
  EXPECT_GE(m->via_mapping, 1u);
  EXPECT_EQ(dev.open_mappings(), 1);

  // Through the mapping into another allocation, and back through the mapping.
  ASSERT_TRUE(dev.Copy(dev.ComputeStream(0), *b, *m, "from the mapping").ok());
  std::vector<uint8_t> got(256);
  ASSERT_TRUE(dev.Read(*b, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, bytes);
  const std::vector<uint8_t> ones(16, 1);
  ASSERT_TRUE(dev.Write(m->Slice(16, 16), ones).ok());
  std::vector<uint8_t> part(16);
  ASSERT_TRUE(dev.Read(a->Slice(16, 16), absl::MakeSpan(part)).ok());
  EXPECT_EQ(part, ones);

  EXPECT_TRUE(dev.CloseMemory(*m).ok());
  EXPECT_EQ(dev.CloseMemory(*m).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.open_mappings(), 0);
  EXPECT_TRUE(dev.Free(*a).ok());
  EXPECT_TRUE(dev.Free(*b).ok());
  EXPECT_EQ(dev.LiveAllocations(0), 0);
}

TEST(ShmIpcDeviceTest, RefusesGarbageAndRangesOutsideItsMemory) {
  ShmIpcDevice dev;
  IpcHandle garbage;
  garbage.bytes.fill(0xa5);
  EXPECT_EQ(dev.OpenMemory(0, garbage).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.OpenMemory(0, IpcHandle()).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<MemRef> a = dev.Allocate(0, 64, "a");
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<uint8_t> buf(64);
  // Past the end, on another rank, or in no allocation at all.
  EXPECT_EQ(dev.Read(MemRef{0, a->addr + 32, 64, 0, 0}, absl::MakeSpan(buf)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.Write(MemRef{1, a->addr, 64, 0, 0}, buf).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.Copy(dev.ComputeStream(0), *a, MemRef{0, 64, 64, 0, 0}, "wild").code(),
            absl::StatusCode::kInvalidArgument);
  // A reduce needs terms.
  EXPECT_EQ(dev.Reduce(dev.ComputeStream(0), DType::kBF16, Operand{*a}, {}, 0, "r").code(),
            absl::StatusCode::kInvalidArgument);

  // A handle of a freed allocation names a memfd that is gone.
  absl::StatusOr<IpcHandle> h = dev.ExportMemory(*a);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(dev.Free(*a).ok());
  EXPECT_EQ(dev.OpenMemory(0, *h).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dev.ExportMemory(*a).status().code(), absl::StatusCode::kInvalidArgument);

  // Streams and events are fresh numbers.
  absl::StatusOr<StreamId> s = dev.CreateStream(0, StreamKind::kCopy, "copy");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(*s, dev.ComputeStream(0));
  absl::StatusOr<EventId> e1 = dev.CreateEvent(0);
  absl::StatusOr<EventId> e2 = dev.CreateEvent(0);
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_NE(*e1, *e2);
  EXPECT_TRUE(dev.RecordEvent(*e1, *s).ok());
  EXPECT_TRUE(dev.WaitEvent(dev.ComputeStream(0), *e1).ok());
}

// Work is queued per stream: a flag wait holds up its own stream only, until another stream's
// signal reaches it; an event wait holds its stream until the record ran; a reduce sums in fp32.
TEST(ShmIpcDeviceTest, StreamsWaitForFlagsAndEventsAndReduce) {
  ShmIpcDevice dev;
  absl::StatusOr<MemRef> words = dev.Allocate(0, 32, "flags");    // counter, flag, expected, spare
  absl::StatusOr<MemRef> data = dev.Allocate(0, 3 * 16, "data");  // a, b, sum: 4 fp32 each
  ASSERT_TRUE(words.ok() && data.ok());
  ASSERT_TRUE(dev.Write(*words, std::vector<uint8_t>(32, 0)).ok());
  const std::vector<float> a = {1, -2, 3, 100}, b = {4, 5, -6, 0.5};
  std::vector<uint8_t> ab(32);
  std::memcpy(ab.data(), a.data(), 16);
  std::memcpy(ab.data() + 16, b.data(), 16);
  ASSERT_TRUE(dev.Write(data->Slice(0, 32), ab).ok());
  absl::StatusOr<StreamId> other = dev.CreateStream(0, StreamKind::kCopy, "other");
  ASSERT_TRUE(other.ok());
  const StreamId compute = dev.ComputeStream(0);
  // The compute stream waits for the flag, then reduces.
  ASSERT_TRUE(dev.WaitFlag(compute, words->Slice(16, 8), words->Slice(8, 8), "wait").ok());
  ASSERT_TRUE(dev.Reduce(compute, DType::kFP32, Operand{data->Slice(32, 16)},
                         {Operand{data->Slice(0, 16)}, Operand{data->Slice(16, 16)}}, 4, "sum")
                  .ok());
  absl::StatusOr<bool> idle = dev.RankIdle(0);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);  // the wait holds the reduce
  absl::StatusOr<EventId> e = dev.CreateEvent(0);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(dev.WaitEvent(*other, *e).ok());  // nothing recorded yet: it passes
  ASSERT_TRUE(dev.SignalFlag(*other, words->Slice(0, 8), words->Slice(8, 8), "signal").ok());
  ASSERT_TRUE(dev.Synchronize().ok());
  std::vector<uint8_t> sum(16);
  ASSERT_TRUE(dev.Read(data->Slice(32, 16), absl::MakeSpan(sum)).ok());
  std::vector<float> got(4);
  std::memcpy(got.data(), sum.data(), 16);
  EXPECT_EQ(got, (std::vector<float>{5, 3, -3, 100.5}));
  // A recorded event holds the waiting stream until the record ran behind a flag wait.
  ASSERT_TRUE(dev.WaitValue(compute, words->Slice(24, 8), 7, "wait 7").ok());
  ASSERT_TRUE(dev.RecordEvent(*e, compute).ok());
  ASSERT_TRUE(dev.WaitEvent(*other, *e).ok());
  ASSERT_TRUE(dev.WriteValue(*other, words->Slice(0, 8), 42, "after the event").ok());
  idle = dev.RankIdle(0);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);
  uint64_t counter = 0;
  std::memcpy(&counter, reinterpret_cast<const void*>(words->addr), 8);
  EXPECT_EQ(counter, 1u);  // the write behind the event has not run
  const uint64_t seven = 7;
  std::memcpy(reinterpret_cast<void*>(words->addr + 24), &seven, 8);  // as a peer process would
  ASSERT_TRUE(dev.Synchronize().ok());
  std::memcpy(&counter, reinterpret_cast<const void*>(words->addr), 8);
  EXPECT_EQ(counter, 42u);
}

// The local device as rank 2 of 4 (common/plugin/spmd_process.h): its ranges carry rank 2 at the
// local device's addresses; another rank's calls and ranges are refused, naming both ranks.
TEST(RankDeviceTest, PresentsTheLocalDeviceAsItsRankAndRefusesOthers) {
  ShmIpcDevice shm;
  RankDevice dev(&shm, 2, 4);
  EXPECT_EQ(dev.world_size(), 4);
  absl::StatusOr<MemRef> a = dev.Allocate(2, 64, "a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->rank, 2);
  EXPECT_EQ(shm.LiveAllocations(0), 1);
  EXPECT_EQ(dev.LiveAllocations(2), 1);
  EXPECT_EQ(dev.LiveAllocations(1), -1);
  const absl::Status other = dev.Allocate(1, 64, "b").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(),
            "allocate: rank 1; this process runs rank 2 of 4 (the others' calls are their own "
            "processes')");
  EXPECT_EQ(dev.ComputeStream(1), StreamId(-1));
  const std::vector<uint8_t> bytes(64, 9);
  ASSERT_TRUE(dev.Write(*a, bytes).ok());
  std::vector<uint8_t> got(64);
  ASSERT_TRUE(shm.Read(MemRef{0, a->addr, 64, a->alloc_id, 0}, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, bytes);
  EXPECT_EQ(dev.Copy(dev.ComputeStream(2), *a, MemRef{3, a->addr, 64, 0, 0}, "c").code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<IpcHandle> h = dev.ExportMemory(*a);
  ASSERT_TRUE(h.ok()) << h.status();
  absl::StatusOr<MemRef> m = dev.OpenMemory(2, *h);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rank, 2);
  EXPECT_TRUE(dev.CloseMemory(*m).ok());
  EXPECT_TRUE(dev.Free(*a).ok());
  EXPECT_EQ(shm.LiveAllocations(0), 0);
}

// The ranks' stderr (the launcher passes its own on) while one launch runs: fd 2 goes to a
// temporary file until Take(), which restores it and returns what was written (and passes it on
// to the real stderr, for the test's log).
class CapturedStderr {
 public:
  CapturedStderr() : file_(::tmpfile()) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    if (file_ != nullptr) ::dup2(::fileno(file_), 2);
  }
  ~CapturedStderr() { Take(); }

  std::string Take() {
    if (saved_ < 0) return text_;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
    if (file_ == nullptr) return text_;
    std::rewind(file_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) text_.append(buf, n);
    std::fclose(file_);
    file_ = nullptr;
    std::fprintf(stderr, "%s", text_.c_str());
    return text_;
  }

 private:
  FILE* file_;
  int saved_ = -1;
  std::string text_;
};

LaunchResult Launch(int world, std::vector<std::string> args) {
  LaunchOptions o;
  o.argv = {RANK_PROGRAM};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.world = world;
  o.timeout = absl::Seconds(20);
  o.kill_grace = absl::Seconds(2);
  absl::StatusOr<LaunchResult> result = LaunchRanks(o);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : LaunchResult();
}

TEST(LockstepProcessTest, PeersReachEachOthersBuffersThroughExchangedHandles) {
  const LaunchResult r = Launch(4, {"lockstep", "4"});
  EXPECT_TRUE(r.ok()) << r.failure;
  ASSERT_EQ(r.ranks.size(), 4u);
  for (const RankEnd& end : r.ranks) EXPECT_TRUE(end.ok()) << end.Describe();
}

// Rank 1 dies after the allocations; the others learn it at the first handle exchange, from the
// bootstrap, which names it. They exit (14) once the launcher ends them, so that the launcher
// names the rank that died as the first failure.
TEST(LockstepProcessTest, ARankThatDiesIsNamedByTheOthers) {
  const Clock::time_point start = Clock::now();
  CapturedStderr captured;
  const LaunchResult r = Launch(3, {"lockstep-exit", "3", "1"});
  const std::string err = captured.Take();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10);
  EXPECT_EQ(r.failure, "rank 1 exited with status 3");
  EXPECT_EQ(r.first_failure, 1);
  ASSERT_EQ(r.ranks.size(), 3u);
  for (int rank : {0, 2}) {
    EXPECT_EQ(r.ranks[rank].how, RankEnd::How::kExited) << rank << " " << r.ranks[rank].Describe();
    EXPECT_EQ(r.ranks[rank].exit_status, 14) << rank;
    // Rank 0 saw the connection close; rank 2 has rank 0's account of it.
    const std::string line = absl::StrFormat(
        "rank %d: UNAVAILABLE: rank 1 closed its connection (its process ended?) during "
        "broadcast #",
        rank);
    EXPECT_NE(err.find(line), std::string::npos) << "no \"" << line << "\" in:\n" << err;
  }
}

TEST(LockstepProcessTest, AMismatchedWorldIsRefused) {
  CapturedStderr captured;
  const LaunchResult r = Launch(2, {"lockstep", "3"});
  const std::string err = captured.Take();
  EXPECT_FALSE(r.ok());
  ASSERT_GE(r.first_failure, 0);
  ASSERT_LT(r.first_failure, 2);
  EXPECT_EQ(r.failure, absl::StrFormat("rank %d exited with status 12", r.first_failure));
  const std::string line = absl::StrFormat(
      "rank %d: launched as one of 2 processes, the program expects 3", r.first_failure);
  EXPECT_NE(err.find(line), std::string::npos) << "no \"" << line << "\" in:\n" << err;
}

// --- ABI v2 plugins, one instance per process -------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// A fresh path for the findings rank 0 writes.
std::string FindingsPath() {
  static int n = 0;
  return absl::StrFormat("%s/lockstep_process_test.%d.%d.txt", ::testing::TempDir(), ::getpid(),
                         n++);
}

// Each example plugin runs one instance per process over 2, 3 and 4 processes; every rank's
// output of every call (default form, into another tensor past the one-shot limit, in place) is
// the exact sum (the rank program compares each element) and nothing is found.
TEST(PluginProcessTest, ExamplePluginsSumExactlyOneInstancePerProcess) {
  for (const std::string plugin : {"custom_ar", "dma_ring_v2"}) {
    for (int world : {2, 3, 4}) {
      SCOPED_TRACE(absl::StrFormat("%s over %d processes", plugin, world));
      const std::string out = FindingsPath();
      const LaunchResult r =
          Launch(world, {"plugin", std::to_string(world),
                         absl::StrFormat("%s/%s.so", EXAMPLES_DIR, plugin), "6", out});
      EXPECT_TRUE(r.ok()) << r.failure;
      ASSERT_EQ(r.ranks.size(), static_cast<size_t>(world));
      for (const RankEnd& end : r.ranks) EXPECT_TRUE(end.ok()) << end.Describe();
      EXPECT_EQ(ReadFile(out), "");
    }
  }
}

// What only a rank's own host sees reaches rank 0: registered_input_leak opens its peers' inputs
// every call and closes them only at destroy, so every rank's mappings grow call after call
// (resource_growth, at the 16th growth in a row: the 16th call), each finding naming its rank.
TEST(PluginProcessTest, EveryRanksGrowthReachesRankZero) {
  const std::string out = FindingsPath();
  const LaunchResult r = Launch(
      3, {"plugin", "3", absl::StrFormat("%s/registered_input_leak.so", EXAMPLES_DIR), "20", out});
  EXPECT_TRUE(r.ok()) << r.failure;
  const std::string findings = ReadFile(out);
  std::string want;
  for (int rank = 0; rank < 3; ++rank) {
    // Every call opens the 2 peers' inputs: 32 mappings after 16 calls, plus the 4 of create
    // (the peers' registered buffers and signal areas).
    want += absl::StrFormat(
        "resource_growth %d: plugin 'registered_input_leak' rank %d holds more after each of the "
        "last 16 calls (through all_reduce call 16 (default form)): now 3 allocations, 36 IPC "
        "mappings, 0 streams, 0 events, 0 reserved ranges; a collective whose resources grow with "
        "every call in "
        "steady state overflows its tables or the device's memory\n",
        rank, rank);
  }
  EXPECT_EQ(findings, want);
}

// spmd_never_closes's destroy releases nothing: what each rank's instance still holds (its
// allocation, its mappings of the 2 peers' ones) reaches rank 0 as that rank's resource_leak.
TEST(PluginProcessTest, EveryRanksLeakReachesRankZero) {
  const std::string out = FindingsPath();
  const LaunchResult r = Launch(
      3, {"plugin", "3", absl::StrFormat("%s/spmd_never_closes.so", TEST_PLUGINS_DIR), "0", out});
  EXPECT_TRUE(r.ok()) << r.failure;
  const std::string findings = ReadFile(out);
  std::vector<std::string> lines = absl::StrSplit(findings, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << findings;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string head = absl::StrFormat(
        "resource_leak %d: plugin 'abi_v2_case' rank %d still holds after destroy: 1 "
        "allocation(s) ('registered' (4096 bytes)), 2 IPC mapping(s) ([0x",
        rank, rank);
    EXPECT_EQ(lines[rank].substr(0, head.size()), head) << lines[rank];
  }
}

// The FINDING lines and the verdict line of a report's text.
std::string Verdict(const std::string& report) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (absl::StartsWith(line, "FINDING") || absl::StrContains(line, "status=")) {
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

// The same scenario replayed in this process on the simulator, every rank's instance a thread.
std::string InProcessVerdict(const std::string& scenario_path, const std::string& plugin) {
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(scenario_path);
  EXPECT_TRUE(scenario.ok()) << scenario.status();
  if (!scenario.ok()) return "";
  absl::StatusOr<RunDevice> device = RunDevice::Make(DeviceChoice(), scenario->world, 1);
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return "";
  ReplayOptions options;
  options.collective = plugin;
  absl::StatusOr<ReplayReport> report = device->Replay(*scenario, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? Verdict(FormatReportText(*report)) : "";
}

// The replay engine drives the one-instance-per-process plugin as a --procs run does: the
// default form's results (each rank's instance's allocation) become tensors every process
// knows (LockstepDevice::Adopt), and rank 0's report holds the verdict and every rank's
// findings, as the one-process replay's does. registered_input.yaml's 48 calls (one-shot and
// two-shot, fresh inputs in freed blocks): the fixed build passes; the leak's mappings grow on
// every rank (resource_growth of ranks 0-3 at the same step).
TEST(PluginProcessTest, TheReplayEngineDrivesOneInstancePerProcess) {
  const std::string scenario = std::string(SOURCE_DIR) + "/examples/plugins/registered_input.yaml";
  for (const std::string plugin : {"registered_input_fixed", "registered_input_leak"}) {
    SCOPED_TRACE(plugin);
    const std::string path = absl::StrFormat("%s/%s.so", EXAMPLES_DIR, plugin);
    const std::string out = FindingsPath();
    const LaunchResult r = Launch(4, {"replay", "4", scenario, path, out});
    EXPECT_TRUE(r.ok()) << r.failure;
    const std::string report = ReadFile(out);
    EXPECT_NE(report.find("collective=plugin:" + plugin + " device=lockstep-shm"),
              std::string::npos)
        << report;
    const std::string verdict = Verdict(report);
    EXPECT_EQ(verdict, InProcessVerdict(scenario, path));
    if (plugin == "registered_input_fixed") {
      EXPECT_EQ(verdict,
                "pointer_alias=false  retained_mismatches=0 / 0  rank_consistent=true  "
                "status=PASS\n");
    } else {
      EXPECT_TRUE(absl::StartsWith(
          verdict, absl::StrFormat("FINDING resource_growth: step 55 all_reduce 'prefill' at "
                                   "%s:31:11, iteration 8 of 24, ranks 0-3 (4 findings, first "
                                   "shown): plugin 'registered_input_leak' rank 0 holds more "
                                   "after each of the last 16 calls",
                                   scenario)))
          << verdict;
      EXPECT_TRUE(absl::EndsWith(verdict, "status=FAIL\n")) << verdict;
    }
  }
}

// Rank 1's create fails before the handle exchange, while ranks 0 and 2 wait in its allgather:
// every process ends, rank 1 says why, and nothing hangs. The others end either by themselves
// (the bootstrap tells them; then they name rank 1) or, when the launcher sees rank 1's exit
// first, by the launcher, which ends the rest of a launch at its first failure.
TEST(PluginProcessTest, ACreateThatFailsOnOneRankEndsEveryProcessNamingIt) {
  const Clock::time_point start = Clock::now();
  CapturedStderr captured;
  const LaunchResult r = Launch(
      3, {"plugin", "3", absl::StrFormat("%s/spmd_create_fails_on_rank_1.so", TEST_PLUGINS_DIR),
          "3", FindingsPath()});
  const std::string err = captured.Take();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 15);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[1].how, RankEnd::How::kExited) << r.ranks[1].Describe();
  EXPECT_EQ(r.ranks[1].exit_status, 2);
  const std::string own =
      "rank 1: INVALID_ARGUMENT: plugin " TEST_PLUGINS_DIR
      "/spmd_create_fails_on_rank_1.so: create failed: plugin 'abi_v2_case' rank 1 failed create: "
      "rank 1 refuses to start (test case)";
  EXPECT_NE(err.find(own), std::string::npos) << "no \"" << own << "\" in:\n" << err;
  for (int rank : {0, 2}) {
    if (r.ranks[rank].killed_by_launcher && r.ranks[rank].how == RankEnd::How::kSignaled) continue;
    EXPECT_EQ(r.ranks[rank].how, RankEnd::How::kExited) << rank << " " << r.ranks[rank].Describe();
    EXPECT_EQ(r.ranks[rank].exit_status, 2) << rank;
    const std::string line = absl::StrFormat(
        "rank %d: INVALID_ARGUMENT: plugin %s/spmd_create_fails_on_rank_1.so: create failed: "
        "plugin 'abi_v2_case' rank %d failed create: allgather: ",
        rank, TEST_PLUGINS_DIR, rank);
    const size_t at = err.find(line);
    ASSERT_NE(at, std::string::npos) << "no \"" << line << "\" in:\n" << err;
    const std::string rest = err.substr(at + line.size(), err.find('\n', at) - at - line.size());
    EXPECT_NE(rest.find("rank 1"), std::string::npos) << rest;
  }
}

}  // namespace
}  // namespace dmalab
