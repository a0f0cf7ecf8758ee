// CUDA-graph capture of work on several ranks' streams, and replay with new input contents.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/core/dtype.h"
#include "gtest/gtest.h"
#include "hw/cuda_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

std::vector<uint16_t> BF16Values(int64_t n, float scale) {
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = FloatToBF16(scale * static_cast<float>(i % 97));
  return v;
}

TEST(GraphTest, ReplayOfCopyThenReduceUsesTheNewInputContents) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  constexpr int64_t kElems = 1 << 20;
  constexpr uint64_t kBytes = kElems * 2;
  MemRef in0 = *device->Allocate(0, kBytes, "in0");
  MemRef in1 = *device->Allocate(1, kBytes, "in1");
  MemRef landing = *device->Allocate(1, kBytes, "landing");
  MemRef out = *device->Allocate(1, kBytes, "out");
  MemRef flags0 = *device->Allocate(0, 8, "counter");
  MemRef flags1 = *device->Allocate(1, 16, "flag+expected");
  ASSERT_TRUE(WriteVector(*device, flags0, std::vector<uint64_t>{0}).ok());
  ASSERT_TRUE(WriteVector(*device, flags1, std::vector<uint64_t>{0, 0}).ok());
  StreamId send = *device->CreateStream(0, StreamKind::kCopy, "send");
  StreamId flag0 = *device->CreateStream(0, StreamKind::kFlag, "flag");
  StreamId flag1 = *device->CreateStream(1, StreamKind::kFlag, "flag");
  EventId sent = *device->CreateEvent(0);
  EventId arrived = *device->CreateEvent(1);
  const StreamId compute1 = device->ComputeStream(1);

  bool capturing_inside = false;
  absl::StatusOr<CudaGraph> graph = device->Capture([&]() -> absl::Status {
    capturing_inside = device->IsCapturing(compute1);
    if (absl::Status s = device->Copy(send, landing, in0, "send"); !s.ok()) return s;
    if (absl::Status s = device->RecordEvent(sent, send); !s.ok()) return s;
    if (absl::Status s = device->WaitEvent(flag0, sent); !s.ok()) return s;
    if (absl::Status s = device->SignalFlag(flag0, flags0, flags1.Slice(0, 8), "signal"); !s.ok())
      return s;
    if (absl::Status s = device->WaitFlag(flag1, flags1.Slice(8, 8), flags1.Slice(0, 8), "wait");
        !s.ok())
      return s;
    if (absl::Status s = device->RecordEvent(arrived, flag1); !s.ok()) return s;
    if (absl::Status s = device->WaitEvent(compute1, arrived); !s.ok()) return s;
    const Operand terms[] = {{landing}, {in1}};
    return device->Reduce(compute1, DType::kBF16, {out}, terms, kElems, "add");
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(capturing_inside);
  EXPECT_FALSE(device->IsCapturing(compute1));
  EXPECT_GT(graph->num_nodes(), 0u);

  for (int replay = 1; replay <= 3; ++replay) {
    const std::vector<uint16_t> a = BF16Values(kElems, 0.5f * replay);
    const std::vector<uint16_t> b = BF16Values(kElems, -0.25f * replay);
    ASSERT_TRUE(WriteVector(*device, in0, a).ok());
    ASSERT_TRUE(WriteVector(*device, in1, b).ok());
    ASSERT_TRUE(device->Replay(*graph).ok());
    const absl::Status s = device->Synchronize();
    ASSERT_TRUE(s.ok()) << s;
    const std::vector<uint16_t> got = *ReadVector<uint16_t>(*device, out);
    for (int64_t i = 0; i < kElems; ++i) {
      const uint16_t want = FloatToBF16(BF16ToFloat(a[i]) + BF16ToFloat(b[i]));
      ASSERT_EQ(got[i], want) << "replay " << replay << " element " << i;
    }
    // Monotonic device-side counters: the replay bumped them without host patching.
    EXPECT_EQ((*ReadVector<uint64_t>(*device, flags1))[0], static_cast<uint64_t>(replay));
    EXPECT_EQ((*ReadVector<uint64_t>(*device, flags1))[1], static_cast<uint64_t>(replay));
  }
}

TEST(GraphTest, AllocationDuringCaptureIsRefusedAndCaptureEndsCleanly) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  MemRef a = *device->Allocate(1, 4096, "a");
  MemRef b = *device->Allocate(1, 4096, "b");
  absl::StatusOr<CudaGraph> graph = device->Capture([&]() -> absl::Status {
    if (absl::Status s = device->Copy(device->ComputeStream(1), b, a, "copy"); !s.ok()) return s;
    return device->Allocate(1, 4096, "fresh").status();
  });
  EXPECT_TRUE(absl::IsFailedPrecondition(graph.status())) << graph.status();
  EXPECT_NE(graph.status().message().find("graph capture"), std::string::npos) << graph.status();
  // Streams are back to normal.
  EXPECT_FALSE(device->IsCapturing(device->ComputeStream(1)));
  EXPECT_TRUE(device->Allocate(1, 4096, "after").ok());
  EXPECT_TRUE(device->Synchronize().ok());
}

}  // namespace
}  // namespace dmalab
