// The simulated memory of one rank: a 64-bit address space, a caching allocator that reuses
// freed blocks (as PyTorch's does: 512-byte rounding, best fit, splitting, coalescing), the
// bytes themselves (values fidelity), and the history of every allocation for reports.
//
// Fresh memory reads as all-ones bytes (kFreshByte), but is not filled when a segment is made:
// each segment records which of its pages were never written, and a read fills those pages just
// before it (Bytes); a write that covers whole pages claims them unfilled (BytesToOverwrite). Most
// bytes are written before anything reads them, so most are never filled, and untouched pages
// cost no host memory.
//
// Generated content (Device::WriteGenerated, a seeded fill) is lazy: the range records what it
// holds and its bytes are produced only when read. A read through Bytes materializes the piece
// it reads; CopyOut generates it into the reader's buffer instead, so a fill that is only ever
// copied or reduced from never costs host memory; a write over it forgets it.
#ifndef DMALAB_SIM_SIM_MEMORY_H_
#define DMALAB_SIM_SIM_MEMORY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "common/core/host_block_pool.h"
#include "dmalab/tensor.h"

namespace dmalab {

class GeneratedContent;  // include/dmalab/device.h

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

  // Allocates `bytes` (rounded up to 512) reusing a freed block when one fits. Fails, naming
  // the size, the rank and what the rank holds, when bytes is 0, when the rank would hold more
  // than kMaxBytesPerRank, or when the host cannot back a new segment; never aborts.
  // `pool` 0 is the device's; another is a graph's private pool (SimDevice::CaptureGraph): its
  // segments serve only its allocations, and its freed blocks go back to it, never to another
  // pool, as a CUDA graph's private memory pool keeps its blocks for the graph's lifetime.
  absl::StatusOr<MemRef> Allocate(uint64_t bytes, std::string_view tag, uint32_t pool = 0);
  // The pool of the segment holding addr (0 outside any segment).
  uint32_t PoolAt(uint64_t addr) const;
  // Returns the block to the free pool (it may be handed out again at once).
  absl::Status Free(const MemRef& allocation, std::string_view context);

  // An error when [addr, addr + bytes) is not inside one segment of this rank.
  absl::Status CheckRange(uint64_t addr, uint64_t bytes) const;
  // Host pointer to [addr, addr + bytes), to read (or read and write), or an error when the
  // range is not inside one segment of this rank or the memory holds no payload. Bytes never
  // written read as kFreshByte.
  absl::StatusOr<uint8_t*> Bytes(uint64_t addr, uint64_t bytes);
  // As Bytes, for a caller that writes every byte of the range before it reads any: the range's
  // fresh bytes are not filled (those of a page it covers only in part are).
  absl::StatusOr<uint8_t*> BytesToOverwrite(uint64_t addr, uint64_t bytes);

  // Makes [addr, addr + bytes) hold bytes [offset, offset + bytes) of `content`, produced only
  // when read; as BytesToOverwrite, an error when the range is not in one segment with payload.
  absl::Status WriteLazy(uint64_t addr, uint64_t bytes,
                         std::shared_ptr<const GeneratedContent> content, uint64_t offset);
  // Copies [addr, addr + bytes) to `out` (outside this memory), as memcpy from Bytes would, but
  // generating lazy bytes into `out` rather than materializing them here.
  absl::Status CopyOut(uint64_t addr, uint64_t bytes, uint8_t* out);
  // Whether any byte of [addr, addr + bytes) is lazy (the range in one segment).
  bool HasLazy(uint64_t addr, uint64_t bytes) const;
  // When every byte of [addr, addr + bytes) is lazy from one content, contiguously: the content
  // and the offset of addr's byte in it.
  std::optional<std::pair<std::shared_ptr<const GeneratedContent>, uint64_t>> WholeLazy(
      uint64_t addr, uint64_t bytes) const;

  // The allocation `id` of this rank, live or freed; null for an id this rank never handed
  // out, and for one freed so long ago that its record was dropped (FreedLongAgo).
  const AllocationInfo* Find(uint64_t id) const;
  // Whether [addr, addr + bytes) lies inside live allocation `id` of this rank (then it also
  // lies inside device memory: CheckRange holds). The question the simulator asks of every view
  // an operation names, so the last answers are remembered (by id, until a free).
  bool InsideLive(uint64_t id, uint64_t addr, uint64_t bytes) const;
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
  // Reserved ranges (sim/address_reservations.h) lie in the top quarter; mappings below it.
  static constexpr uint64_t kReservationWindowOffset = kRankSpan / 4 * 3;
  static constexpr uint64_t RankBase(int rank) {
    return kBaseAddress + static_cast<uint64_t>(rank) * kRankSpan;
  }
  // The rank whose address space holds addr, or -1 when none of `world` ranks' does.
  static int RankOfAddress(uint64_t addr, int world);
  // The most one rank holds in segments: the lower half of its terabyte (512 GiB, more than any
  // GPU has), so that allocations never reach its mapping window and any request beyond it is
  // refused before address arithmetic could wrap.
  static constexpr uint64_t kMaxBytesPerRank = kMappingWindowOffset;
  // What never-written bytes read as: all-ones bytes are NaN in every float type, so reading
  // memory nobody wrote is loud rather than plausible.
  static constexpr uint8_t kFreshByte = 0xff;
  // The granularity of the fresh-byte bookkeeping.
  static constexpr uint64_t kFreshPage = 4096;

  // Bytes held in segments (free and allocated blocks), and in live allocations as requested.
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t live_bytes() const { return live_bytes_; }
  // Pages of the segments that were never written, so never filled (values fidelity).
  uint64_t fresh_pages() const;

 private:
  struct Segment {
    uint64_t bytes;
    uint32_t pool = 0;
    HostBlock data;  // empty without payload
    // Bit p set: page p was never written and holds no fresh bytes yet (values fidelity).
    std::vector<uint64_t> fresh;
    uint64_t fresh_count = 0;
    // Lazy ranges by start offset in the segment: [start, end) holds the content's bytes from
    // `offset` on. Disjoint. Their pages are not fresh, and are populated only when read.
    struct Lazy {
      uint64_t end;
      std::shared_ptr<const GeneratedContent> content;
      uint64_t offset;
    };
    std::map<uint64_t, Lazy> lazy;
  };
  // Marks the fresh pages among pages [first, last) written, filling them when `fill`; the pages
  // are populated first unless `populate` is false.
  static void TakeFresh(Segment& seg, uint64_t first, uint64_t last, bool fill,
                        bool populate = true);
  // Forgets the lazy bytes among [lo, hi) (offsets in the segment), keeping the rest of each range.
  static void DropLazy(Segment& seg, uint64_t lo, uint64_t hi);
  // Produces the lazy bytes among [lo, hi) in place, and forgets them as lazy.
  static void Materialize(Segment& seg, uint64_t lo, uint64_t hi);
  // Fills the partial pages at the ends of [lo, hi) if fresh, claims its whole pages (filled
  // never; populated when `populate`): for a range about to be written whole.
  static void ClaimForOverwrite(Segment& seg, uint64_t lo, uint64_t hi, bool populate);
  // The segment holding addr (CheckRange passed) and its start.
  std::pair<uint64_t, const Segment*> SegmentAt(uint64_t addr) const;
  // Fills the fresh pages among bytes [lo, hi) (offsets in the segment) and marks them written.
  static void FillFresh(Segment& seg, uint64_t lo, uint64_t hi);
  // The segment holding [addr, addr + bytes) with its payload, or why there is none.
  absl::StatusOr<Segment*> PayloadSegment(uint64_t addr, uint64_t bytes);
  // "rank R holds N bytes in M segments (L bytes live in K allocations)", for errors.
  std::string Holdings() const;
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
  uint64_t reserved_bytes_ = 0;
  uint64_t live_bytes_ = 0;
  std::map<uint64_t, Segment> segments_;                     // by start address
  std::map<uint64_t, Block> blocks_;                         // by start address
  std::set<std::tuple<uint32_t, uint64_t, uint64_t>> free_;  // (pool, bytes, addr), best fit
  // By id: live, and the last freed ones. Hashed (looked up on every access by the lifetime
  // checker); node-based, so the pointers Find returns stay valid across inserts.
  absl::node_hash_map<uint64_t, AllocationInfo> allocations_;
  // The freed ids whose records are kept: a ring, oldest at freed_next_ once full.
  std::vector<uint64_t> freed_ring_;
  size_t freed_next_ = 0;
  std::vector<uint64_t> dropped_;
  int64_t live_count_ = 0;
  // InsideLive's last answers: live allocations' bounds, by a hash of the id. Emptied by every
  // free.
  struct LiveBounds {
    uint64_t id = 0, lo = 0, hi = 0;
  };
  mutable std::array<LiveBounds, 16> live_bounds_{};
};

}  // namespace dmalab

#endif  // DMALAB_SIM_SIM_MEMORY_H_
