// A caching allocator of one rank's device memory, modelled on PyTorch's CUDA caching
// allocator: freed blocks stay cached and are reused, which is what turns an output-lifetime
// bug into silent corruption on real hardware too.
//
// Sizes round up to 512 bytes. Requests up to 1 MiB come from 2 MiB segments (small pool),
// larger ones from 20 MiB segments, or segments rounded up to 2 MiB from 10 MiB on (large
// pool). A request takes the smallest cached free block of its pool that fits (best fit, lowest
// address among equals) and splits off the rest when it is at least 512 bytes (small pool) or
// more than 1 MiB (large pool). Freed blocks merge with free neighbours of the same segment.
// New segments come from an injected function (cudaMalloc on hardware, a fake in tests); when
// it fails, fully free cached segments are released and the request is tried once more.
// Not thread-safe.
#ifndef DMALAB_HW_CACHING_ALLOCATOR_H_
#define DMALAB_HW_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmalab {

class CachingAllocator {
 public:
  // Returns the address of a fresh segment of `bytes` bytes, or an error.
  using SegmentAlloc = std::function<absl::StatusOr<uint64_t>(uint64_t bytes)>;
  // Returns a segment (by its address) to the system.
  using SegmentFree = std::function<void(uint64_t addr)>;

  static constexpr uint64_t kMinBlockBytes = 512;
  static constexpr uint64_t kSmallRequestBytes = 1ull << 20;
  static constexpr uint64_t kSmallSegmentBytes = 2ull << 20;
  static constexpr uint64_t kLargeSegmentBytes = 20ull << 20;
  static constexpr uint64_t kMinLargeAllocBytes = 10ull << 20;
  static constexpr uint64_t kLargeRoundBytes = 2ull << 20;

  struct Stats {
    int64_t segments = 0;
    uint64_t reserved_bytes = 0;   // sum of segment sizes
    uint64_t allocated_bytes = 0;  // sum of live (rounded) block sizes
    int64_t live_blocks = 0;
    int64_t free_blocks = 0;
  };

  // `name` prefixes error messages ("rank 2").
  CachingAllocator(std::string name, SegmentAlloc segment_alloc, SegmentFree segment_free);
  // Returns every segment, live blocks included.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The rounded size a request of `bytes` occupies (at least 512).
  static uint64_t RoundedBytes(uint64_t bytes);
  // The size of the segment a fresh request of `rounded` bytes maps.
  static uint64_t SegmentBytesFor(uint64_t rounded);

  // Returns the address of a block of at least `bytes` bytes.
  absl::StatusOr<uint64_t> Allocate(uint64_t bytes);
  // Returns the live block that starts at `addr` to the cache.
  absl::Status Free(uint64_t addr);
  // Returns cached segments that hold no live block to the system.
  void ReleaseCachedSegments();

  Stats stats() const;

  // The segment (address, bytes) that holds `addr`, when one does: what an IPC handle exports
  // for a block (CUDA exports whole cudaMalloc allocations).
  std::optional<std::pair<uint64_t, uint64_t>> SegmentOf(uint64_t addr) const;

 private:
  struct Block {
    uint64_t addr = 0;
    uint64_t bytes = 0;
    int64_t segment = 0;  // blocks merge only within one segment
    bool small_pool = false;
    bool live = false;
  };
  using FreeKey = std::pair<uint64_t, uint64_t>;  // (bytes, addr): best fit, then lowest address

  std::set<FreeKey>& PoolOf(bool small_pool) { return small_pool ? small_free_ : large_free_; }
  absl::StatusOr<Block*> NewSegment(uint64_t rounded, bool small_pool);
  Block* TakeBestFit(uint64_t rounded, bool small_pool);
  void SplitIfWorthIt(Block* block, uint64_t rounded);
  // The block just before or after `it` when it belongs to the same segment and is free.
  Block* FreeNeighbour(std::map<uint64_t, std::unique_ptr<Block>>::iterator it, bool after);

  std::string name_;
  SegmentAlloc segment_alloc_;
  SegmentFree segment_free_;
  std::map<uint64_t, std::unique_ptr<Block>> blocks_;  // every block, by address
  std::map<uint64_t, uint64_t> segments_;              // segment address -> bytes
  std::set<FreeKey> small_free_;
  std::set<FreeKey> large_free_;
  int64_t next_segment_ = 1;
};

}  // namespace dmalab

#endif  // DMALAB_HW_CACHING_ALLOCATOR_H_
