// The simulated memory of one rank: a 64-bit address space, a caching allocator that reuses
// freed blocks (as PyTorch's does: 512-byte rounding, best fit, splitting, coalescing), the
// bytes themselves (values fidelity), and the history of every allocation for reports.
#ifndef DMALAB_SIM_SIM_MEMORY_H_
#define DMALAB_SIM_SIM_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/tensor.h"

namespace dmalab {

// What the allocator knows of one allocation, live or freed.
struct AllocationInfo {
  uint64_t id = 0;
  int rank = 0;
  uint64_t addr = 0;
  uint64_t bytes = 0;  // as requested
  std::string tag;
  bool live = true;
  std::string freed_by;  // the context that freed it
};

class SimMemory {
 public:
  // Allocation ids are unique across ranks: rank r hands out ids r+1, r+1+world, ...
  // Without payload (the shadow fidelity) segments hold no bytes and Bytes() fails.
  SimMemory(int rank, int world, bool with_payload = true);

  // Allocates `bytes` (rounded up to 512) reusing a freed block when one fits.
  absl::StatusOr<MemRef> Allocate(uint64_t bytes, std::string_view tag);
  // Returns the block to the free pool (it may be handed out again at once).
  absl::Status Free(const MemRef& allocation, std::string_view context);

  // An error when [addr, addr + bytes) is not inside one segment of this rank.
  absl::Status CheckRange(uint64_t addr, uint64_t bytes) const;
  // Host pointer to [addr, addr + bytes), or an error when the range is not inside one
  // segment of this rank or the memory holds no payload.
  absl::StatusOr<uint8_t*> Bytes(uint64_t addr, uint64_t bytes);

  // The allocation `id` of this rank, live or freed; null for an id this rank never handed
  // out, and for one freed so long ago that its record was dropped (FreedLongAgo).
  const AllocationInfo* Find(uint64_t id) const;
  // Whether `id` is an allocation of this rank whose record was dropped: only the records of
  // the last kFreedRecordsKept frees are kept, so memory stays flat in the number of calls.
  bool FreedLongAgo(uint64_t id) const;
  // Ids whose records were dropped since the last call.
  std::vector<uint64_t> TakeDroppedIds() { return std::exchange(dropped_, {}); }
  static constexpr size_t kFreedRecordsKept = size_t{1} << 16;
  // Allocations handed out and not freed.
  int64_t LiveCount() const { return live_count_; }
  // The live allocation whose block covers addr, if any.
  const AllocationInfo* LiveAt(uint64_t addr) const;

  static constexpr uint64_t kBlockAlign = 512;
  static constexpr uint64_t kSegmentAlign = 2ull << 20;
  static constexpr uint64_t kBaseAddress = 0x7f0000000000ull;
  // Each rank's addresses lie in its own terabyte from RankBase(rank), as each GPU's do in a
  // unified address space: an address of one rank is never valid on another, so a raw peer
  // address used as one's own is caught (foreign_address). Allocations grow from the base; IPC
  // mappings a rank opens lie in the upper half (kMappingWindowOffset).
  static constexpr uint64_t kRankSpan = uint64_t{1} << 40;
  static constexpr uint64_t kMappingWindowOffset = kRankSpan / 2;
  static constexpr uint64_t RankBase(int rank) {
    return kBaseAddress + static_cast<uint64_t>(rank) * kRankSpan;
  }
  // The rank whose address space holds addr, or -1 when none of `world` ranks' does.
  static int RankOfAddress(uint64_t addr, int world);

 private:
  struct Segment {
    uint64_t bytes;
    std::unique_ptr<uint8_t[]> data;  // null without payload
  };
  struct Block {
    uint64_t bytes;
    uint64_t segment;   // start address of its segment
    uint64_t alloc_id;  // 0 when free
  };
  void InsertFree(uint64_t addr);
  void EraseFree(uint64_t addr);

  int rank_;
  int world_;
  bool with_payload_;
  uint64_t next_id_;
  uint64_t next_segment_addr_;
  std::map<uint64_t, Segment> segments_;            // by start address
  std::map<uint64_t, Block> blocks_;                // by start address
  std::set<std::pair<uint64_t, uint64_t>> free_;    // (bytes, addr), best fit
  std::map<uint64_t, AllocationInfo> allocations_;  // by id: live, and the last freed ones
  // The freed ids whose records are kept: a ring, oldest at freed_next_ once full.
  std::vector<uint64_t> freed_ring_;
  size_t freed_next_ = 0;
  std::vector<uint64_t> dropped_;
  int64_t live_count_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_SIM_MEMORY_H_
