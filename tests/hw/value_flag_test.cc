// The immediate-value flags (WriteValue / WaitValue) and the native handles that plugins use,
// on CudaDevice; the simulator's side is tests/sim/graph_value_test.cc.
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

TEST(ValueFlagTest, WaitForAValueSeesThePayloadStoredBeforeIt) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  constexpr uint64_t kBytes = 4 << 20;
  MemRef flag = *device->Allocate(1, 8, "flag");
  ASSERT_TRUE(WriteVector(*device, flag, std::vector<uint64_t>{0}).ok());
  MemRef src = *device->Allocate(0, kBytes, "src");
  MemRef landing = *device->Allocate(1, kBytes, "landing");
  MemRef out = *device->Allocate(1, kBytes, "out");
  StreamId send = *device->CreateStream(0, StreamKind::kCopy, "send");
  StreamId flag0 = *device->CreateStream(0, StreamKind::kFlag, "flag");
  EventId sent = *device->CreateEvent(0);
  for (uint64_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(WriteVector(*device, src, std::vector<uint8_t>(kBytes, uint8_t(round))).ok());
    // The receiver waits first, for this round's value; the sender copies, then stores it.
    ASSERT_TRUE(device->WaitValue(device->ComputeStream(1), flag, round, "wait round").ok());
    ASSERT_TRUE(device->Copy(device->ComputeStream(1), out, landing, "take").ok());
    ASSERT_TRUE(device->Copy(send, landing, src, "send").ok());
    ASSERT_TRUE(device->RecordEvent(sent, send).ok());
    ASSERT_TRUE(device->WaitEvent(flag0, sent).ok());
    ASSERT_TRUE(device->WriteValue(flag0, flag, round, "store round").ok());
    const absl::Status s = device->Synchronize();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(*ReadVector<uint8_t>(*device, out), std::vector<uint8_t>(kBytes, uint8_t(round)));
    EXPECT_EQ((*ReadVector<uint64_t>(*device, flag))[0], round);
  }
}

TEST(ValueFlagTest, AValueNeverStoredTimesOutNamingTheWait) {
  CudaDeviceOptions options;
  options.flag_wait_timeout_ns = 200'000'000;  // 200 ms
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1, options);
  MemRef flag = *device->Allocate(1, 8, "flag");
  ASSERT_TRUE(WriteVector(*device, flag, std::vector<uint64_t>{5}).ok());
  ASSERT_TRUE(device->WaitValue(device->ComputeStream(1), flag, 6, "epoch 6").ok());
  const absl::Status s = device->Synchronize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("epoch 6"), std::string::npos) << s;
}

TEST(ValueFlagTest, NativeHandlesAreTheStreamsAndPointersBehindTheIds) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  const StreamId s = device->ComputeStream(1);
  EXPECT_EQ(device->NativeStream(s), static_cast<void*>(device->cuda_stream(s)));
  MemRef m = *device->Allocate(1, 256, "buf");
  EXPECT_EQ(device->NativePointer(m.Slice(64, 8)),
            reinterpret_cast<void*>(static_cast<uintptr_t>(m.addr + 64)));
  EXPECT_EQ(device->NativeDeviceOrdinal(1), device->gpu_of_rank(1));
  EXPECT_EQ(device->NativeDeviceOrdinal(2), -1);
}

}  // namespace
}  // namespace dmalab
