// CachingAllocator's reuse policy, on fake segments (no GPU needed).
#include "hw/caching_allocator.h"

#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Hands out segments far apart, so that neighbouring segments never touch; optionally has a
// capacity, to test the release-and-retry path.
class FakeSegments {
 public:
  explicit FakeSegments(uint64_t capacity = ~0ull) : capacity_(capacity) {}
  CachingAllocator::SegmentAlloc Alloc() {
    return [this](uint64_t bytes) -> absl::StatusOr<uint64_t> {
      if (in_use_ + bytes > capacity_) return absl::ResourceExhaustedError("fake: out of memory");
      const uint64_t addr = next_;
      next_ += bytes + (1ull << 30);
      in_use_ += bytes;
      live_[addr] = bytes;
      return addr;
    };
  }
  CachingAllocator::SegmentFree Free() {
    return [this](uint64_t addr) {
      in_use_ -= live_.at(addr);
      live_.erase(addr);
    };
  }
  const std::map<uint64_t, uint64_t>& live() const { return live_; }

 private:
  uint64_t capacity_;
  uint64_t next_ = 1ull << 40;
  uint64_t in_use_ = 0;
  std::map<uint64_t, uint64_t> live_;
};

TEST(CachingAllocatorTest, RoundsTo512BytesWithinOneSmallSegment) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(1);
  const uint64_t b = *alloc.Allocate(513);
  const uint64_t c = *alloc.Allocate(1);
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(c, b + 1024);
  ASSERT_EQ(fake.live().size(), 1u);
  EXPECT_EQ(fake.live().begin()->second, CachingAllocator::kSmallSegmentBytes);
}

// What an IPC export needs: the segment (a cudaMalloc allocation) that holds a block.
TEST(CachingAllocatorTest, SegmentOfNamesTheSegmentThatHoldsABlock) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(1);
  const uint64_t b = *alloc.Allocate(600);
  const uint64_t big = *alloc.Allocate(30 * kMiB);
  ASSERT_EQ(fake.live().size(), 2u);
  const auto small = alloc.SegmentOf(b);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->first, a);  // the first block starts its segment
  EXPECT_EQ(small->second, CachingAllocator::kSmallSegmentBytes);
  EXPECT_EQ(alloc.SegmentOf(b + 100), small);  // an address inside a block
  const auto large = alloc.SegmentOf(big);
  ASSERT_TRUE(large.has_value());
  EXPECT_EQ(large->first, big);
  EXPECT_EQ(large->second, 30 * kMiB);  // from 10 MiB on: rounded up to 2 MiB
  EXPECT_FALSE(alloc.SegmentOf(a - 1).has_value());
  EXPECT_FALSE(alloc.SegmentOf(a + CachingAllocator::kSmallSegmentBytes).has_value());
}

TEST(CachingAllocatorTest, FreedBlockIsReusedBySameSizedRequest) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(4 * kMiB);
  ASSERT_TRUE(alloc.Free(a).ok());
  EXPECT_EQ(*alloc.Allocate(4 * kMiB), a);
  EXPECT_EQ(fake.live().size(), 1u);
}

TEST(CachingAllocatorTest, PicksTheSmallestFreeBlockThatFits) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t big = *alloc.Allocate(64 * 1024);
  const uint64_t sep1 = *alloc.Allocate(512);
  const uint64_t small = *alloc.Allocate(8 * 1024);
  const uint64_t sep2 = *alloc.Allocate(512);
  ASSERT_TRUE(alloc.Free(big).ok());
  ASSERT_TRUE(alloc.Free(small).ok());
  // 8 KiB fits both freed blocks (and the segment's tail); best fit is the 8 KiB one.
  EXPECT_EQ(*alloc.Allocate(6 * 1024), small);
  (void)sep1;
  (void)sep2;
}

TEST(CachingAllocatorTest, SegmentSizesFollowThePoolRules) {
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::SegmentBytesFor(22 * kMiB + 1), 24 * kMiB);
}

TEST(CachingAllocatorTest, LargeBlocksSplitOnlyWhenMoreThanOneMiBRemains) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  // 19.5 MiB from a 20 MiB segment: the 0.5 MiB rest stays with the block.
  ASSERT_TRUE(alloc.Allocate(19 * kMiB + kMiB / 2).ok());
  EXPECT_EQ(alloc.stats().allocated_bytes, 20 * kMiB);
  EXPECT_EQ(alloc.stats().free_blocks, 0);
  // 2 MiB from a fresh 20 MiB segment: the 18 MiB rest is split off and cached.
  const uint64_t two = *alloc.Allocate(2 * kMiB);
  EXPECT_EQ(alloc.stats().free_blocks, 1);
  EXPECT_EQ(*alloc.Allocate(3 * kMiB), two + 2 * kMiB);
}

TEST(CachingAllocatorTest, FreeMergesNeighboursOfOneSegment) {
  FakeSegments fake;
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(4096);
  const uint64_t b = *alloc.Allocate(4096);
  const uint64_t c = *alloc.Allocate(4096);
  ASSERT_TRUE(alloc.Free(a).ok());
  ASSERT_TRUE(alloc.Free(c).ok());
  ASSERT_TRUE(alloc.Free(b).ok());
  const CachingAllocator::Stats s = alloc.stats();
  EXPECT_EQ(s.free_blocks, 1);
  EXPECT_EQ(s.live_blocks, 0);
  // The whole segment is one block again.
  EXPECT_EQ(*alloc.Allocate(CachingAllocator::kSmallRequestBytes), a);
}

TEST(CachingAllocatorTest, DoubleFreeAndUnknownAddressesAreErrors) {
  FakeSegments fake;
  CachingAllocator alloc("rank 3", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(4096);
  ASSERT_TRUE(alloc.Free(a).ok());
  const absl::Status twice = alloc.Free(a);
  EXPECT_TRUE(absl::IsInvalidArgument(twice)) << twice;
  EXPECT_NE(twice.message().find("rank 3"), std::string::npos) << twice;
  EXPECT_TRUE(absl::IsInvalidArgument(alloc.Free(a + 512)));
}

TEST(CachingAllocatorTest, OutOfMemoryReleasesCachedSegmentsAndRetries) {
  FakeSegments fake(/*capacity=*/40 * kMiB);
  CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
  const uint64_t a = *alloc.Allocate(30 * kMiB);  // a 30 MiB segment
  ASSERT_TRUE(alloc.Free(a).ok());                // cached, not returned
  // 32 MiB does not fit the cached block nor the remaining capacity until the cache is released.
  EXPECT_TRUE(alloc.Allocate(32 * kMiB).ok());
  EXPECT_EQ(fake.live().size(), 1u);
  EXPECT_TRUE(absl::IsResourceExhausted(alloc.Allocate(32 * kMiB).status()));
}

TEST(CachingAllocatorTest, DestructionReturnsEverySegment) {
  FakeSegments fake;
  {
    CachingAllocator alloc("rank 0", fake.Alloc(), fake.Free());
    ASSERT_TRUE(alloc.Allocate(100).ok());
    ASSERT_TRUE(alloc.Allocate(30 * kMiB).ok());
    EXPECT_EQ(fake.live().size(), 2u);
  }
  EXPECT_TRUE(fake.live().empty());
}

}  // namespace
}  // namespace dmalab
