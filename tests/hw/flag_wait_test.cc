// SignalFlag / WaitFlag across virtual ranks, and the bounded wait that fails with the rank,
// stream, label and flag values instead of hanging.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

// One rank's flag words: counter (sends), flag (stored by a peer), expected (waits).
struct FlagWords {
  MemRef slab, counter, flag, expected;
};

FlagWords MakeFlagWords(CudaDevice& device, int rank) {
  FlagWords w;
  w.slab = *device.Allocate(rank, 24, "flags");
  EXPECT_TRUE(WriteVector(device, w.slab, std::vector<uint64_t>(3, 0)).ok());
  w.counter = w.slab.Slice(0, 8);
  w.flag = w.slab.Slice(8, 8);
  w.expected = w.slab.Slice(16, 8);
  return w;
}

uint64_t ReadWord(CudaDevice& device, const MemRef& m) {
  return (*ReadVector<uint64_t>(device, m))[0];
}

TEST(FlagWaitTest, WaitEnqueuedBeforeItsSignalSeesThePayloadOfEveryRound) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  FlagWords w0 = MakeFlagWords(*device, 0);
  FlagWords w1 = MakeFlagWords(*device, 1);
  constexpr uint64_t kBytes = 8 << 20;
  MemRef src = *device->Allocate(0, kBytes, "src");
  MemRef landing = *device->Allocate(1, kBytes, "landing");
  MemRef out = *device->Allocate(1, kBytes, "out");
  StreamId send = *device->CreateStream(0, StreamKind::kCopy, "send");
  StreamId flag0 = *device->CreateStream(0, StreamKind::kFlag, "flag");
  StreamId flag1 = *device->CreateStream(1, StreamKind::kFlag, "flag");
  StreamId place = *device->CreateStream(1, StreamKind::kCopy, "place");
  EventId sent = *device->CreateEvent(0);
  EventId arrived = *device->CreateEvent(1);
  for (uint8_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(WriteVector(*device, src, std::vector<uint8_t>(kBytes, round)).ok());
    // The receiver's side first: its wait kernel spins until the sender's signal arrives.
    ASSERT_TRUE(device->WaitFlag(flag1, w1.expected, w1.flag, "rs.k0.p0 wait").ok());
    ASSERT_TRUE(device->RecordEvent(arrived, flag1).ok());
    ASSERT_TRUE(device->WaitEvent(place, arrived).ok());
    ASSERT_TRUE(device->Copy(place, out, landing, "place").ok());
    // The sender: copy to the peer, then signal.
    ASSERT_TRUE(device->Copy(send, landing, src, "send").ok());
    ASSERT_TRUE(device->RecordEvent(sent, send).ok());
    ASSERT_TRUE(device->WaitEvent(flag0, sent).ok());
    ASSERT_TRUE(device->SignalFlag(flag0, w0.counter, w1.flag, "rs.k0.p0 signal").ok());
    const absl::Status s = device->Synchronize();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(*ReadVector<uint8_t>(*device, out), std::vector<uint8_t>(kBytes, round));
    EXPECT_EQ(ReadWord(*device, w0.counter), round);
    EXPECT_EQ(ReadWord(*device, w1.flag), round);
    EXPECT_EQ(ReadWord(*device, w1.expected), round);
  }
}

// An in-process SPMD collective's rank threads: while rank 0 waits for a flag that rank 1's host
// thread has yet to signal, rank 1 is idle and its host copies go through without waiting for
// rank 0 (a device-wide wait here would only end at the flag wait's timeout).
TEST(FlagWaitTest, ARankWaitingForAPeerDoesNotBlockThePeersHostAccess) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  FlagWords w0 = MakeFlagWords(*device, 0);
  FlagWords w1 = MakeFlagWords(*device, 1);
  StreamId flag0 = *device->CreateStream(0, StreamKind::kFlag, "flag");
  StreamId flag1 = *device->CreateStream(1, StreamKind::kFlag, "flag");
  MemRef data = *device->Allocate(1, 64, "data");
  ASSERT_TRUE(device->WaitFlag(flag0, w0.expected, w0.flag, "barrier wait").ok());
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<bool> idle0 = device->RankIdle(0);
  ASSERT_TRUE(idle0.ok()) << idle0.status();
  EXPECT_FALSE(*idle0);
  absl::StatusOr<bool> idle1 = device->RankIdle(1);
  ASSERT_TRUE(idle1.ok()) << idle1.status();
  EXPECT_TRUE(*idle1);
  std::vector<uint8_t> bytes(64);
  for (int i = 0; i < 64; ++i) bytes[i] = static_cast<uint8_t>(3 * i + 1);
  ASSERT_TRUE(device->WriteRank(data, bytes).ok());
  std::vector<uint8_t> back(64, 0);
  ASSERT_TRUE(device->ReadRank(data, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, bytes);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  // Rank 1's host thread signals; rank 0's wait completes.
  ASSERT_TRUE(device->SignalFlag(flag1, w1.counter, w0.flag, "barrier signal").ok());
  const absl::Status s = device->Synchronize();
  ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<bool> idle0_after = device->RankIdle(0);
  ASSERT_TRUE(idle0_after.ok()) << idle0_after.status();
  EXPECT_TRUE(*idle0_after);
}

TEST(FlagWaitTest, WaitThatIsNeverSignalledFailsWithRankLabelAndFlagValue) {
  CudaDeviceOptions options;
  options.flag_wait_timeout_ns = 200'000'000;  // 200 ms
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 3, 1, options);
  FlagWords w2 = MakeFlagWords(*device, 2);
  StreamId flag2 = *device->CreateStream(2, StreamKind::kFlag, "flag");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(device->WaitFlag(flag2, w2.expected, w2.flag, "rs.k1.p0 wait").ok());
  const absl::Status s = device->Synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(
      s.message().find(
          "rank 2 stream flag: wait 'rs.k1.p0 wait' timed out after 200 ms: flag=0 expected=1"),
      std::string::npos)
      << s;
  EXPECT_LT(seconds, 5.0);
  // Reported once; the device is usable afterwards.
  EXPECT_TRUE(device->Synchronize().ok());
}

TEST(FlagWaitTest, OtherWaitsGiveUpSoonAfterTheFirstTimeout) {
  CudaDeviceOptions options;
  options.flag_wait_timeout_ns = 200'000'000;
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1, options);
  FlagWords w0 = MakeFlagWords(*device, 0);
  FlagWords w1 = MakeFlagWords(*device, 1);
  StreamId flag0 = *device->CreateStream(0, StreamKind::kFlag, "flag");
  StreamId flag1 = *device->CreateStream(1, StreamKind::kFlag, "flag");
  const auto start = std::chrono::steady_clock::now();
  // Ten waits in a row on each rank: without the abort word they would take 10 x 200 ms each.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(device->WaitFlag(flag0, w0.expected, w0.flag, "ag.k0 wait").ok());
    ASSERT_TRUE(device->WaitFlag(flag1, w1.expected, w1.flag, "ag.k1 wait").ok());
  }
  const absl::Status s = device->Synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("timed out after 200 ms"), std::string::npos) << s;
  EXPECT_LT(seconds, 1.5) << s;
}

}  // namespace
}  // namespace dmalab
