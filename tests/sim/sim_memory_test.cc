// The simulated allocator (sim/sim_memory.h): impossible requests are refused with a message,
// never an abort or a wrapped address; fresh bytes read as all ones however lazily they are
// filled, and whatever host block (new or recycled) backs them.
#include "sim/sim_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/host_block_pool.h"
#include "dmalab/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

constexpr uint8_t kFresh = 0xff;  // what never-written device memory reads as (design)

std::vector<uint8_t> ReadBack(SimMemory& m, uint64_t addr, uint64_t bytes) {
  absl::StatusOr<uint8_t*> p = m.Bytes(addr, bytes);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  return std::vector<uint8_t>(*p, *p + bytes);
}

TEST(SimMemoryInsideLiveTest, AViewIsInsideItsLiveAllocationUntilTheFree) {
  SimMemory m(/*rank=*/1, /*world=*/2, /*with_payload=*/false);
  absl::StatusOr<MemRef> a = m.Allocate(1000, "a");
  absl::StatusOr<MemRef> b = m.Allocate(64, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  for (int pass = 0; pass < 2; ++pass) {  // the second pass is answered from what it remembers
    EXPECT_TRUE(m.InsideLive(a->alloc_id, a->addr, 1000));
    EXPECT_TRUE(m.InsideLive(a->alloc_id, a->addr + 999, 1));
    EXPECT_TRUE(m.InsideLive(a->alloc_id, a->addr + 1000, 0));
    EXPECT_FALSE(m.InsideLive(a->alloc_id, a->addr + 999, 2));  // one byte past the end
    EXPECT_FALSE(m.InsideLive(a->alloc_id, a->addr - 1, 1));
    EXPECT_FALSE(m.InsideLive(a->alloc_id, a->addr + 8, ~uint64_t{0}));  // no wrap-around
    EXPECT_FALSE(m.InsideLive(b->alloc_id, a->addr, 8));                 // a's bytes, b's id
    EXPECT_TRUE(m.InsideLive(b->alloc_id, b->addr, 64));
  }
  EXPECT_FALSE(m.InsideLive(0, a->addr, 8));
  EXPECT_FALSE(m.InsideLive(a->alloc_id + 1, a->addr, 8));  // an id rank 1 never handed out
  ASSERT_TRUE(m.Free(*a, "test").ok());
  EXPECT_FALSE(m.InsideLive(a->alloc_id, a->addr, 8));
  EXPECT_TRUE(m.InsideLive(b->alloc_id, b->addr, 64));
}

TEST(SimMemoryLimitsTest, TwoToThe62BytesIsRefusedNamingSizeRankAndHoldings) {
  for (bool payload : {true, false}) {
    SimMemory m(/*rank=*/2, /*world=*/4, payload);
    ASSERT_TRUE(m.Allocate(4096, "small").ok());
    absl::StatusOr<MemRef> r = m.Allocate(uint64_t{1} << 62, "huge");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(r.status().message(),
              "allocate on rank 2 ('huge'): 4611686018427387904 bytes (4294967296.0 GiB); a "
              "simulated rank holds at most 549755813888 bytes (512.0 GiB); rank 2 holds "
              "2097152 bytes (0.0 GiB) in 1 segments (4096 bytes live in 1 allocations)");
  }
}

TEST(SimMemoryLimitsTest, MaxUint64BytesIsRefusedAndLaterAllocationsDoNotOverlap) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> r = m.Allocate(std::numeric_limits<uint64_t>::max(), "max");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("allocate on rank 0 ('max'): 18446744073709551615 bytes"));
  absl::StatusOr<MemRef> a = m.Allocate(4096, "a");
  absl::StatusOr<MemRef> b = m.Allocate(4096, "b");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->addr, b->addr);
  EXPECT_GE(b->addr, a->addr + 4096);
  EXPECT_EQ(m.reserved_bytes(), SimMemory::kSegmentAlign);
  EXPECT_EQ(m.live_bytes(), 8192u);
}

TEST(SimMemoryLimitsTest, EveryRequestJustPastTheLimitIsRefused) {
  for (uint64_t bytes :
       {SimMemory::kMaxBytesPerRank + 1, std::numeric_limits<uint64_t>::max() - 510,
        std::numeric_limits<uint64_t>::max() - SimMemory::kSegmentAlign + 2}) {
    SimMemory m(0, 1, /*with_payload=*/false);
    EXPECT_EQ(m.Allocate(bytes, "x").status().code(), absl::StatusCode::kResourceExhausted)
        << bytes;
    EXPECT_EQ(m.reserved_bytes(), 0u);
  }
}

TEST(SimMemoryLimitsTest, ARankHoldsAtMostTheLimitInSegments) {
  // Shadow: no payload, so half a terabyte of address space costs nothing on the host.
  SimMemory m(1, 2, /*with_payload=*/false);
  ASSERT_TRUE(m.Allocate(SimMemory::kMaxBytesPerRank, "all").ok());
  absl::StatusOr<MemRef> more = m.Allocate(512, "more");
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().message(),
            "allocate on rank 1 ('more'): 512 bytes (0.0 GiB) needs a new segment of 2097152 "
            "bytes (0.0 GiB), and a simulated rank holds at most 549755813888 bytes (512.0 "
            "GiB); rank 1 holds 549755813888 bytes (512.0 GiB) in 1 segments (549755813888 "
            "bytes live in 1 allocations)");
}

TEST(SimMemoryLimitsTest, TheDeviceRefusesTooLargeAllocationsWithoutAborting) {
  SimDevice dev(2, 1);
  EXPECT_EQ(dev.Allocate(1, uint64_t{1} << 62, "huge").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(dev.Allocate(1, std::numeric_limits<uint64_t>::max(), "max").status().code(),
            absl::StatusCode::kResourceExhausted);
  absl::StatusOr<MemRef> a = dev.Allocate(1, 4096, "a");
  absl::StatusOr<MemRef> b = dev.Allocate(1, 4096, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->addr, b->addr);
}

TEST(SimMemoryLimitsTest, RangesReachingPastTheEndOfAddressesAreOutside) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(4096, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(m.CheckRange(a->addr, SimMemory::kSegmentAlign).ok());
  EXPECT_FALSE(m.CheckRange(a->addr, SimMemory::kSegmentAlign + 1).ok());
  // addr + bytes wraps to a small number: still outside.
  EXPECT_FALSE(m.CheckRange(a->addr + 8, std::numeric_limits<uint64_t>::max() - 4).ok());
  EXPECT_EQ(m.CheckRange(a->addr - 1, 2).message(),
            absl::StrFormat("rank 0: 2 bytes at 0x%x are not inside device memory", a->addr - 1));
}

TEST(SimMemoryFreshTest, NeverWrittenBytesReadAsAllOnes) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(3 * SimMemory::kFreshPage + 100, "a");
  ASSERT_TRUE(a.ok());
  const uint64_t pages = SimMemory::kSegmentAlign / SimMemory::kFreshPage;
  EXPECT_EQ(m.fresh_pages(), pages);  // nothing filled at allocation
  EXPECT_EQ(ReadBack(m, a->addr, a->bytes), std::vector<uint8_t>(a->bytes, kFresh));
  EXPECT_EQ(m.fresh_pages(), pages - 4);  // the four pages read, filled just then
}

TEST(SimMemoryFreshTest, AnOverwriteKeepsTheFreshBytesBesideItInPartlyCoveredPages) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(4 * SimMemory::kFreshPage, "a");
  ASSERT_TRUE(a.ok());
  const uint64_t lo = 100, hi = 3 * SimMemory::kFreshPage + 7;
  absl::StatusOr<uint8_t*> w = m.BytesToOverwrite(a->addr + lo, hi - lo);
  ASSERT_TRUE(w.ok());
  std::memset(*w, 0x12, hi - lo);
  std::vector<uint8_t> want(a->bytes, kFresh);
  std::fill(want.begin() + lo, want.begin() + hi, 0x12);
  EXPECT_EQ(ReadBack(m, a->addr, a->bytes), want);
}

TEST(SimMemoryFreshTest, AWholePageOverwriteIsNotFilledFirst) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(8 * SimMemory::kFreshPage, "a");
  ASSERT_TRUE(a.ok());
  const uint64_t before = m.fresh_pages();
  // Pages 1..5 whole, and parts of pages 0 and 6.
  ASSERT_TRUE(m.BytesToOverwrite(a->addr + 10, 6 * SimMemory::kFreshPage).ok());
  EXPECT_EQ(m.fresh_pages(), before - 7);
  // Within one page: that page is filled (its other bytes stay fresh).
  ASSERT_TRUE(m.BytesToOverwrite(a->addr + 7 * SimMemory::kFreshPage + 8, 8).ok());
  EXPECT_EQ(m.fresh_pages(), before - 8);
  const std::vector<uint8_t> page7 =
      ReadBack(m, a->addr + 7 * SimMemory::kFreshPage, SimMemory::kFreshPage);
  EXPECT_EQ(page7[0], kFresh);
  EXPECT_EQ(page7[16], kFresh);
}

TEST(SimMemoryFreshTest, ARecycledHostBlockReadsFreshAgain) {
  const uint64_t bytes = 3 * SimMemory::kSegmentAlign;  // a size no other test maps
  uint64_t mapped_after_first = 0;
  {
    SimMemory m(0, 1);
    absl::StatusOr<MemRef> a = m.Allocate(bytes, "dirty");
    ASSERT_TRUE(a.ok());
    absl::StatusOr<uint8_t*> w = m.BytesToOverwrite(a->addr, bytes);
    ASSERT_TRUE(w.ok());
    std::memset(*w, 0x5a, bytes);
    mapped_after_first = GetHostBlockPoolStats().mapped_total;
  }  // the block goes back to the pool with 0x5a in every byte
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(bytes, "again");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(GetHostBlockPoolStats().mapped_total, mapped_after_first);  // recycled, not mapped
  EXPECT_EQ(ReadBack(m, a->addr, bytes), std::vector<uint8_t>(bytes, kFresh));
}

TEST(SimMemoryFreshTest, FreedAndReusedBlocksKeepTheirBytesAsACachingAllocatorDoes) {
  SimMemory m(0, 1);
  absl::StatusOr<MemRef> a = m.Allocate(1024, "a");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<uint8_t*> w = m.BytesToOverwrite(a->addr, 1024);
  ASSERT_TRUE(w.ok());
  std::memset(*w, 7, 1024);
  ASSERT_TRUE(m.Free(*a, "test").ok());
  absl::StatusOr<MemRef> b = m.Allocate(1024, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->addr, a->addr);
  EXPECT_EQ(ReadBack(m, b->addr, 1024), std::vector<uint8_t>(1024, 7));
}

// Byte i of the content is (i * 7 + 3) mod 251, produced two bytes at a time.
class CountingContent : public GeneratedContent {
 public:
  uint64_t grain() const override { return 2; }
  void Generate(uint64_t offset, absl::Span<uint8_t> out) const override {
    EXPECT_EQ(offset % 2, 0u);
    EXPECT_EQ(out.size() % 2, 0u);
    for (size_t i = 0; i < out.size(); ++i) out[i] = Byte(offset + i);
  }
  static uint8_t Byte(uint64_t i) { return static_cast<uint8_t>((i * 7 + 3) % 251); }
};

std::vector<uint8_t> Expected(uint64_t offset, uint64_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (uint64_t i = 0; i < bytes; ++i) v[i] = CountingContent::Byte(offset + i);
  return v;
}

TEST(SimMemoryLazyTest, GeneratedBytesReadAsWrittenAndAreProducedOnlyWhereRead) {
  SimMemory m(0, 1);
  const uint64_t page = SimMemory::kFreshPage;
  absl::StatusOr<MemRef> a = m.Allocate(16 * page, "a");
  ASSERT_TRUE(a.ok());
  auto content = std::make_shared<CountingContent>();
  // From byte 100 to 12 pages + 50 (odd ends), holding the content from byte 1000 on.
  const uint64_t lo = a->addr + 100, bytes = 12 * page - 50;
  ASSERT_TRUE(m.WriteLazy(lo, bytes, content, 1000).ok());
  EXPECT_TRUE(m.HasLazy(lo, 1));
  EXPECT_FALSE(m.HasLazy(a->addr, 100));
  // Copied out: the content, fresh bytes around it, nothing materialized.
  std::vector<uint8_t> out(bytes + 200);
  ASSERT_TRUE(m.CopyOut(lo - 100, out.size(), out.data()).ok());
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 100),
            std::vector<uint8_t>(100, kFresh));
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 100, out.begin() + 100 + bytes),
            Expected(1000, bytes));
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 100 + bytes, out.end()),
            std::vector<uint8_t>(100, kFresh));
  EXPECT_TRUE(m.HasLazy(lo, bytes));
  // A whole lazy piece at an odd offset.
  auto whole = m.WholeLazy(lo + 3, 5 * page);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->second, 1003u);
  EXPECT_FALSE(m.WholeLazy(lo - 1, 8).has_value());
  // An overwrite of the middle (odd bytes) keeps the lazy bytes on both sides.
  absl::StatusOr<uint8_t*> w = m.BytesToOverwrite(lo + 4 * page + 1, 2 * page + 1);
  ASSERT_TRUE(w.ok());
  std::memset(*w, 0x11, 2 * page + 1);
  std::vector<uint8_t> want = Expected(1000, bytes);
  std::fill(want.begin() + 4 * page + 1, want.begin() + 6 * page + 2, 0x11);
  ASSERT_TRUE(m.CopyOut(lo, bytes, out.data()).ok());
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + bytes), want);
  // Read in place (materialized), odd ends: the same bytes.
  EXPECT_EQ(ReadBack(m, lo + 1, 7), std::vector<uint8_t>(want.begin() + 1, want.begin() + 8));
  EXPECT_EQ(ReadBack(m, lo, bytes), want);
  EXPECT_FALSE(m.HasLazy(lo, bytes));
}

}  // namespace
}  // namespace dmalab
