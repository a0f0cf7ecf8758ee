// CudaDevice basics: creation, rank mapping, allocation, copies between virtual ranks. Tests
// that need a GPU skip without one.
#include "hw/cuda_device.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

using ::dmalab::testing::ReadVector;
using ::dmalab::testing::WriteVector;

TEST(CudaDeviceTest, CreateSucceedsOrSaysThereIsNoCudaDevice) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(2, 1);
  if (device.ok()) return;
  EXPECT_TRUE(absl::IsUnavailable(device.status())) << device.status();
  EXPECT_NE(device.status().message().find("no CUDA device"), std::string::npos) << device.status();
}

TEST(CudaDeviceTest, CreateRejectsBadRankAndGpuCounts) {
  EXPECT_TRUE(absl::IsInvalidArgument(CudaDevice::Create(0, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CudaDevice::Create(2, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CudaDevice::Create(2, 3).status()));
}

TEST(CudaDeviceTest, VirtualRanksShareOneGpuWithTheirOwnComputeStreams) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 4, 1);
  EXPECT_EQ(device->world_size(), 4);
  EXPECT_EQ(device->name(), "cuda");
  EXPECT_EQ(device->num_gpus(), 1);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(device->gpu_of_rank(r), 0);
  EXPECT_NE(device->cuda_stream(device->ComputeStream(0)),
            device->cuda_stream(device->ComputeStream(1)));
  EXPECT_NE(device->cuda_stream(device->ComputeStream(0)), nullptr);
}

TEST(CudaDeviceTest, RanksSpreadEvenlyOverGpus) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 4, 2);
  EXPECT_EQ(device->gpu_of_rank(0), 0);
  EXPECT_EQ(device->gpu_of_rank(1), 0);
  EXPECT_EQ(device->gpu_of_rank(2), 1);
  EXPECT_EQ(device->gpu_of_rank(3), 1);
}

TEST(CudaDeviceTest, StreamsBeyondTheRankCapShareCudaStreamsRoundRobin) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  const StreamId send = *device->CreateStream(0, StreamKind::kCopy, "send");
  const StreamId place = *device->CreateStream(0, StreamKind::kCopy, "place");
  const StreamId flag = *device->CreateStream(0, StreamKind::kFlag, "flag");
  EXPECT_NE(device->cuda_stream(send), device->cuda_stream(place));
  // A second channel on rank 0 shares the first one's CUDA streams, kind by kind.
  EXPECT_EQ(device->cuda_stream(*device->CreateStream(0, StreamKind::kCopy, "send 2")),
            device->cuda_stream(send));
  EXPECT_EQ(device->cuda_stream(*device->CreateStream(0, StreamKind::kCopy, "place 2")),
            device->cuda_stream(place));
  EXPECT_EQ(device->cuda_stream(*device->CreateStream(0, StreamKind::kFlag, "flag 2")),
            device->cuda_stream(flag));
  // Other ranks have their own.
  EXPECT_NE(device->cuda_stream(*device->CreateStream(1, StreamKind::kFlag, "flag")),
            device->cuda_stream(flag));
}

TEST(CudaDeviceTest, WriteThenReadRoundTrips) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  absl::StatusOr<MemRef> m = device->Allocate(0, 1000, "buf");
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> data(1000);
  std::iota(data.begin(), data.end(), 0);
  ASSERT_TRUE(WriteVector(*device, *m, data).ok());
  EXPECT_EQ(*ReadVector<uint8_t>(*device, *m), data);
}

TEST(CudaDeviceTest, CopyMovesBytesBetweenVirtualRanks) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  constexpr uint64_t kBytes = 3 << 20;
  MemRef src = *device->Allocate(0, kBytes, "src");
  MemRef dst = *device->Allocate(1, kBytes, "dst");
  std::vector<uint32_t> data(kBytes / 4);
  std::iota(data.begin(), data.end(), 17u);
  ASSERT_TRUE(WriteVector(*device, src, data).ok());
  StreamId copy = *device->CreateStream(0, StreamKind::kCopy, "send");
  // Two halves, the second through a slice, as the ring copies pieces.
  ASSERT_TRUE(device->Copy(copy, dst.Slice(0, kBytes / 2), src.Slice(0, kBytes / 2), "h0").ok());
  ASSERT_TRUE(
      device->Copy(copy, dst.Slice(kBytes / 2, kBytes / 2), src.Slice(kBytes / 2, kBytes / 2), "h1")
          .ok());
  ASSERT_TRUE(device->Synchronize().ok());
  EXPECT_EQ(*ReadVector<uint32_t>(*device, dst), data);
}

TEST(CudaDeviceTest, EventsOrderWorkAcrossStreamsOfTwoRanks) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  constexpr uint64_t kBytes = 64 << 20;
  MemRef a = *device->Allocate(0, kBytes, "a");
  MemRef b = *device->Allocate(1, kBytes, "b");
  MemRef c = *device->Allocate(1, kBytes, "c");
  std::vector<uint8_t> data(kBytes, 0x5a);
  ASSERT_TRUE(WriteVector(*device, a, data).ok());
  StreamId s0 = *device->CreateStream(0, StreamKind::kCopy, "send");
  StreamId s1 = *device->CreateStream(1, StreamKind::kCopy, "place");
  EventId landed = *device->CreateEvent(0);
  ASSERT_TRUE(device->Copy(s0, b, a, "a->b").ok());
  ASSERT_TRUE(device->RecordEvent(landed, s0).ok());
  ASSERT_TRUE(device->WaitEvent(s1, landed).ok());
  ASSERT_TRUE(device->Copy(s1, c, b, "b->c").ok());
  ASSERT_TRUE(device->Synchronize().ok());
  EXPECT_EQ(*ReadVector<uint8_t>(*device, c), data);
}

TEST(CudaDeviceTest, AllocatorReusesAFreedBlockUnderAFreshId) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  MemRef first = *device->Allocate(1, 1 << 20, "first");
  ASSERT_TRUE(device->Free(first).ok());
  MemRef second = *device->Allocate(1, 1 << 20, "second");
  EXPECT_EQ(second.addr, first.addr);
  EXPECT_NE(second.alloc_id, first.alloc_id);
  EXPECT_EQ(device->allocator_stats(1).segments, 1);
  // Ranks have separate allocators even on one GPU.
  MemRef other = *device->Allocate(0, 1 << 20, "other");
  EXPECT_NE(other.addr, second.addr);
}

TEST(CudaDeviceTest, StaleViewOfAReusedBlockIsRefused) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  MemRef old = *device->Allocate(0, 4096, "old");
  ASSERT_TRUE(device->Free(old).ok());
  MemRef now = *device->Allocate(0, 4096, "now");
  MemRef dst = *device->Allocate(0, 4096, "dst");
  ASSERT_EQ(now.addr, old.addr);
  const absl::Status s = device->Copy(device->ComputeStream(0), dst, old, "stale");
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("use after free"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(device->Free(old)));
}

TEST(CudaDeviceTest, ViewOfAFreedBlockIsAUseAfterFree) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  MemRef big = *device->Allocate(0, 1 << 20, "big");
  MemRef dst = *device->Allocate(0, 4096, "dst");
  ASSERT_TRUE(device->Free(big).ok());
  const absl::Status s =
      device->Copy(device->ComputeStream(0), dst, big.Slice(8192, 4096), "after free");
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("which was freed (use after free)"), std::string::npos) << s;
}

TEST(CudaDeviceTest, OutOfBoundsViewIsRefused) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  MemRef a = *device->Allocate(0, 1000, "a");
  MemRef b = *device->Allocate(0, 8192, "b");
  const absl::Status s = device->Copy(device->ComputeStream(0), a.Slice(0, 2000) /*too long*/,
                                      b.Slice(4096, 2000), "oob");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("not inside a live allocation"), std::string::npos) << s;
}

TEST(CudaDeviceTest, ReduceWithBlockCodecNeedsBF16) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 1, 1);
  MemRef q = *device->Allocate(0, EncodedBytes(Codec::kInt8Block, DType::kBF16, 128), "q");
  MemRef out = *device->Allocate(0, 256, "out");
  const Operand terms[] = {{q, Codec::kInt8Block}};
  const absl::Status s = device->Reduce(device->ComputeStream(0), DType::kFP16,
                                        {out, Codec::kPlain}, terms, 128, "dq");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("block codecs need bf16"), std::string::npos) << s;
}

// IPC within one process: the handle of rank 1's allocation opens on rank 0 as a mapping of the
// same bytes; a copy through it reads them; a closed mapping is refused as a use after close.
TEST(CudaDeviceTest, AnIpcMappingReachesThePeersBytesUntilItIsClosed) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  ASSERT_TRUE(device->SupportsIpc());
  const MemRef peer = *device->Allocate(1, 4096, "peer");
  const MemRef mine = *device->Allocate(0, 4096, "mine");
  std::vector<uint32_t> values(1024);
  std::iota(values.begin(), values.end(), 7u);
  ASSERT_TRUE(WriteVector(*device, peer, values).ok());
  const IpcHandle h = *device->ExportMemory(peer);
  absl::StatusOr<MemRef> mapping = device->OpenMemory(0, h);
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  EXPECT_EQ(mapping->rank, 0);
  EXPECT_EQ(mapping->bytes, 4096u);
  EXPECT_NE(mapping->via_mapping, 0u);
  EXPECT_EQ(device->open_mappings(), 1);
  const StreamId s = device->ComputeStream(0);
  ASSERT_TRUE(device->Copy(s, mine, *mapping, "pull").ok());
  EXPECT_EQ(*ReadVector<uint32_t>(*device, mine), values);
  // A view inside the mapping is fine; one past its end is not.
  EXPECT_TRUE(device->Copy(s, mine.Slice(0, 8), mapping->Slice(8, 8), "inside").ok());
  MemRef past = mapping->Slice(4088, 8);
  past.bytes = 16;
  EXPECT_TRUE(absl::IsInvalidArgument(device->Copy(s, mine.Slice(0, 16), past, "past")));
  ASSERT_TRUE(device->CloseMemory(*mapping).ok());
  EXPECT_EQ(device->open_mappings(), 0);
  const absl::Status after = device->Copy(s, mine, *mapping, "after close");
  EXPECT_TRUE(absl::IsDataLoss(after)) << after;
  EXPECT_NE(after.message().find("use after close"), std::string::npos) << after;
  const absl::Status twice = device->CloseMemory(*mapping);
  EXPECT_TRUE(absl::IsInvalidArgument(twice)) << twice;
  EXPECT_NE(twice.message().find("closed already"), std::string::npos) << twice;
  IpcHandle garbage;
  EXPECT_TRUE(absl::IsInvalidArgument(device->OpenMemory(0, garbage).status()));
  // Only an allocation's start exports.
  EXPECT_TRUE(absl::IsInvalidArgument(device->ExportMemory(peer.Slice(512, 512)).status()));
  ASSERT_TRUE(device->Synchronize().ok());
}

}  // namespace
// One process maps a handle once: two opens of it share an address. A plugin, which knows the
// mapping by its address only, closes that address twice; the first close leaves the second
// mapping usable, the second closes it, a third is refused.
TEST(CudaDeviceTest, TwoOpensOfOneHandleShareAnAddressAndCloseOneAfterTheOther) {
  DMALAB_CUDA_DEVICE_OR_SKIP(device, 2, 1);
  ASSERT_TRUE(device->SupportsIpc());
  const MemRef peer = *device->Allocate(1, 4096, "peer");
  const MemRef mine = *device->Allocate(0, 4096, "mine");
  const IpcHandle h = *device->ExportMemory(peer);
  const MemRef first = *device->OpenMemory(0, h);
  const MemRef second = *device->OpenMemory(0, h);
  EXPECT_EQ(first.addr, second.addr);
  EXPECT_NE(first.via_mapping, second.via_mapping);
  EXPECT_EQ(device->open_mappings(), 2);
  // By address, as a plugin hands it back: the newest mapping's number.
  ASSERT_TRUE(device->CloseMemory(second).ok());
  EXPECT_EQ(device->open_mappings(), 1);
  const StreamId s = device->ComputeStream(0);
  const absl::Status still = device->Copy(s, mine, second, "through the other open mapping");
  EXPECT_TRUE(still.ok()) << still;
  ASSERT_TRUE(device->CloseMemory(second).ok());
  EXPECT_EQ(device->open_mappings(), 0);
  const absl::Status third = device->CloseMemory(second);
  EXPECT_TRUE(absl::IsInvalidArgument(third)) << third;
  EXPECT_NE(third.message().find("closed already"), std::string::npos) << third;
  const absl::Status after = device->Copy(s, mine, first, "after both closed");
  EXPECT_TRUE(absl::IsDataLoss(after)) << after;
  ASSERT_TRUE(device->Synchronize().ok());
}

}  // namespace dmalab
