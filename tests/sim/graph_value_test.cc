// Graphs and immediate-value flags on the simulator: a launch re-issues exactly the captured
// operations (addresses and values included), and every checker watches the replays.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Bytes(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

std::vector<uint8_t> ReadBytes(SimDevice& d, const MemRef& m) {
  std::vector<uint8_t> out(m.bytes);
  EXPECT_TRUE(d.Read(m, absl::MakeSpan(out)).ok());
  return out;
}

uint64_t ReadWord(SimDevice& d, const MemRef& m) {
  uint64_t v = 0;
  std::vector<uint8_t> b = ReadBytes(d, m);
  std::memcpy(&v, b.data(), 8);
  return v;
}

TEST(SimGraphTest, ALaunchReplaysTheCapturedCopyOnTheNewContents) {
  SimDevice d(2, /*seed=*/1);
  MemRef src = *d.Allocate(0, 64, "src");
  MemRef dst = *d.Allocate(1, 64, "dst");
  ASSERT_TRUE(d.Write(dst, Bytes(64, 0)).ok());
  const StreamId s0 = d.ComputeStream(0);
  absl::StatusOr<GraphId> g = d.CaptureGraph([&] { return d.Copy(s0, dst, src, "send"); });
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ReadBytes(d, dst), Bytes(64, 0));  // capturing runs nothing
  for (uint8_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(d.Write(src, Bytes(64, round)).ok());
    ASSERT_TRUE(d.LaunchGraph(*g).ok());
    EXPECT_EQ(ReadBytes(d, dst), Bytes(64, round));
  }
  EXPECT_TRUE(d.findings().empty()) << d.findings().ToString();
}

TEST(SimGraphTest, DeviceCountersAdvanceOnEveryReplayAndOrderIt) {
  // signal_flag / wait_flag keep their counters in device memory: each replay waits for its
  // own signal, and nothing races.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimDevice d(2, seed);
    MemRef words0 = *d.Allocate(0, 16, "words0");
    MemRef words1 = *d.Allocate(1, 16, "words1");
    ASSERT_TRUE(d.Write(words0, Bytes(16, 0)).ok());
    ASSERT_TRUE(d.Write(words1, Bytes(16, 0)).ok());
    MemRef src = *d.Allocate(0, 64, "src");
    MemRef landing = *d.Allocate(1, 64, "landing");
    MemRef out = *d.Allocate(1, 64, "out");
    const StreamId s0 = d.ComputeStream(0), s1 = d.ComputeStream(1);
    absl::StatusOr<GraphId> g = d.CaptureGraph([&]() -> absl::Status {
      if (absl::Status s = d.Copy(s0, landing, src, "send"); !s.ok()) return s;
      if (absl::Status s = d.SignalFlag(s0, words0.Slice(0, 8), words1.Slice(0, 8), "ready");
          !s.ok()) {
        return s;
      }
      if (absl::Status s = d.WaitFlag(s1, words1.Slice(8, 8), words1.Slice(0, 8), "wait");
          !s.ok()) {
        return s;
      }
      return d.Copy(s1, out, landing, "take");
    });
    ASSERT_TRUE(g.ok()) << g.status();
    for (uint8_t round = 1; round <= 3; ++round) {
      ASSERT_TRUE(d.Write(src, Bytes(64, round)).ok());
      ASSERT_TRUE(d.LaunchGraph(*g).ok());
      EXPECT_EQ(ReadBytes(d, out), Bytes(64, round)) << "seed " << seed;
    }
    EXPECT_EQ(ReadWord(d, words1.Slice(0, 8)), 3u);
    EXPECT_TRUE(d.findings().empty()) << "seed " << seed << ": " << d.findings().ToString();
  }
}

TEST(SimGraphTest, AValueBakedIntoAGraphLetsTheSecondReplayReadTooEarly) {
  // The same exchange with a host-side epoch: the captured wait is for value 1 in every replay,
  // which the first replay's store already satisfies. Where the scheduler runs the second
  // replay's take before its store, the race checker sees the take unordered with the send
  // (where the store runs first, the acquire orders them and that interleaving is correct).
  int caught = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimDevice d(2, seed);
    MemRef flag = *d.Allocate(1, 8, "flag");
    ASSERT_TRUE(d.Write(flag, Bytes(8, 0)).ok());
    MemRef src = *d.Allocate(0, 64, "src");
    MemRef landing = *d.Allocate(1, 64, "landing");
    MemRef out = *d.Allocate(1, 64, "out");
    const StreamId s0 = d.ComputeStream(0), s1 = d.ComputeStream(1);
    uint64_t epoch = 0;
    absl::StatusOr<GraphId> g = d.CaptureGraph([&]() -> absl::Status {
      ++epoch;
      if (absl::Status s = d.Copy(s0, landing, src, "send"); !s.ok()) return s;
      if (absl::Status s = d.WriteValue(s0, flag, epoch, "ready epoch"); !s.ok()) return s;
      if (absl::Status s = d.WaitValue(s1, flag, epoch, "wait epoch"); !s.ok()) return s;
      return d.Copy(s1, out, landing, "take");
    });
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(d.LaunchGraph(*g).ok());
    ASSERT_TRUE(d.Synchronize().ok());
    EXPECT_TRUE(d.findings().empty()) << "seed " << seed << ": " << d.findings().ToString();
    ASSERT_TRUE(d.LaunchGraph(*g).ok());
    ASSERT_TRUE(d.Synchronize().ok());
    if (d.findings().empty()) continue;
    ++caught;
    ASSERT_EQ(d.findings().Count(FindingKind::kRace), 1) << d.findings().ToString();
    EXPECT_THAT(d.findings().findings()[0].message, HasSubstr("graph 0: send"));
    EXPECT_THAT(d.findings().findings()[0].message, HasSubstr("graph 0: take"));
  }
  EXPECT_GT(caught, 0);
}

TEST(SimDeviceIdsTest, ARangeNamingAnAllocationIdTheRankNeverHandedOutIsRefused) {
  SimDevice d(2, /*seed=*/1);
  const MemRef a = *d.Allocate(0, 64, "a");
  const MemRef b = *d.Allocate(1, 64, "b");
  const MemRef c = *d.Allocate(0, 64, "c");
  MemRef made_up = a;
  made_up.alloc_id = 999;
  absl::Status s = d.Copy(d.ComputeStream(0), made_up, c, "copy");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("names allocation #999, which rank 0 never handed out"));
  // Another rank's id on this rank's bytes is refused alike.
  MemRef other = a;
  other.alloc_id = b.alloc_id;
  EXPECT_EQ(d.Copy(d.ComputeStream(0), other, c, "copy").code(),
            absl::StatusCode::kInvalidArgument);
  // The id it was given, or none, is accepted.
  MemRef raw = a;
  raw.alloc_id = 0;
  EXPECT_TRUE(d.Copy(d.ComputeStream(0), raw, c, "copy").ok());
  EXPECT_TRUE(d.Synchronize().ok());
}

TEST(SimGraphTest, ALaunchAfterItsBufferWasFreedIsAUseAfterFree) {
  SimDevice d(2, /*seed=*/1);
  MemRef src = *d.Allocate(0, 64, "src");
  MemRef dst = *d.Allocate(1, 64, "dst");
  absl::StatusOr<GraphId> g =
      d.CaptureGraph([&] { return d.Copy(d.ComputeStream(0), dst, src, "send"); });
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(d.Free(dst).ok());
  ASSERT_TRUE(d.Synchronize().ok());  // the free has run before the launch
  ASSERT_TRUE(d.LaunchGraph(*g).ok());
  ASSERT_TRUE(d.Synchronize().ok());
  EXPECT_EQ(d.findings().Count(FindingKind::kUseAfterFree), 1) << d.findings().ToString();
  EXPECT_THAT(d.findings().findings()[0].message, HasSubstr("graph 0: send"));
}

TEST(SimGraphTest, AllocationsWhileCapturingComeFromTheGraphsPrivatePool) {
  SimDevice d(2, /*seed=*/1);
  MemRef in = *d.Allocate(0, 4096, "in");
  ASSERT_TRUE(d.Write(in, Bytes(4096, 5)).ok());
  const StreamId s0 = d.ComputeStream(0);
  MemRef first, second;
  absl::StatusOr<GraphId> g = d.CaptureGraph([&]() -> absl::Status {
    absl::StatusOr<MemRef> a = d.Allocate(0, 4096, "first");
    if (!a.ok()) return a.status();
    first = *a;
    if (absl::Status s = d.Copy(s0, first, in, "to first"); !s.ok()) return s;
    // Freed inside the capture: its block goes back to the graph's pool at once...
    if (absl::Status s = d.Free(first); !s.ok()) return s;
    absl::StatusOr<MemRef> b = d.Allocate(0, 4096, "second");
    if (!b.ok()) return b.status();
    second = *b;
    // ...and the next allocation of the capture takes it.
    return d.Copy(s0, second, in, "to second");
  });
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(second.addr, first.addr);
  EXPECT_NE(second.alloc_id, first.alloc_id);
  // The graph keeps its pool: a block freed outside the capture is not handed to anyone else.
  ASSERT_TRUE(d.Free(second).ok());
  ASSERT_TRUE(d.Synchronize().ok());
  const MemRef other = *d.Allocate(0, 4096, "after the capture");
  EXPECT_NE(other.addr, first.addr);
  // Replays use the pool's block in the capture's order: no use after free or reuse.
  ASSERT_TRUE(d.LaunchGraph(*g).ok());
  ASSERT_TRUE(d.LaunchGraph(*g).ok());
  ASSERT_TRUE(d.Synchronize().ok());
  EXPECT_TRUE(d.findings().empty()) << d.findings().ToString();
}

TEST(SimGraphTest, CaptureRefusesOutsideFreesHostAccessAndOutsideEvents) {
  SimDevice d(2, /*seed=*/1);
  MemRef m = *d.Allocate(0, 64, "m");
  const EventId outside = *d.CreateEvent(0);
  ASSERT_TRUE(d.RecordEvent(outside, d.ComputeStream(0)).ok());
  auto error_of = [&](const std::function<absl::Status()>& body) {
    absl::StatusOr<GraphId> g = d.CaptureGraph(body);
    return g.ok() ? std::string("ok") : std::string(g.status().message());
  };
  EXPECT_EQ(error_of([&] { return d.Free(m); }),
            absl::StrFormat("free: rank 0 address 0x%x during graph capture: only memory "
                            "allocated in this capture (the graph's private pool) may be freed "
                            "while capturing; free the rest before or after the capture",
                            m.addr));
  EXPECT_THAT(error_of([&] { return d.Write(m, Bytes(64, 1)); }),
              HasSubstr("write during graph capture"));
  EXPECT_THAT(error_of([&] { return d.Synchronize(); }),
              HasSubstr("synchronize during graph capture"));
  EXPECT_EQ(error_of([&] { return d.WaitEvent(d.ComputeStream(1), outside); }),
            "wait on event 0 during graph capture: the event was not recorded in this capture (a "
            "graph can only depend on work it contains)");
  EXPECT_EQ(d.LaunchGraph(GraphId(7)).message(),
            "launch graph: graph 7 does not exist (0 captured)");
  // After the refusals the device works as before.
  ASSERT_TRUE(d.Write(m, Bytes(64, 9)).ok());
  EXPECT_EQ(ReadBytes(d, m), Bytes(64, 9));
}

}  // namespace
}  // namespace dmalab
