#include "sim/sim_memory.h"

#include <cstring>
#include <iterator>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Fresh device memory holds garbage; all-ones bytes are NaN in every float type, so reading
// memory nobody wrote is loud rather than plausible.
constexpr uint8_t kFreshByte = 0xff;

}  // namespace

SimMemory::SimMemory(int rank, int world, bool with_payload)
    : rank_(rank),
      world_(world),
      with_payload_(with_payload),
      next_id_(static_cast<uint64_t>(rank) + 1),
      next_segment_addr_(RankBase(rank)) {}

int SimMemory::RankOfAddress(uint64_t addr, int world) {
  if (addr < kBaseAddress) return -1;
  const uint64_t rank = (addr - kBaseAddress) / kRankSpan;
  return rank < static_cast<uint64_t>(world) ? static_cast<int>(rank) : -1;
}

void SimMemory::InsertFree(uint64_t addr) { free_.insert({blocks_.at(addr).bytes, addr}); }
void SimMemory::EraseFree(uint64_t addr) { free_.erase({blocks_.at(addr).bytes, addr}); }

absl::StatusOr<MemRef> SimMemory::Allocate(uint64_t bytes, std::string_view tag) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate on rank %d ('%s'): bytes is 0; must be > 0", rank_, tag));
  }
  const uint64_t size = RoundUp(bytes, kBlockAlign);
  uint64_t addr;
  auto it = free_.lower_bound({size, 0});
  if (it != free_.end()) {
    addr = it->second;
    free_.erase(it);
    Block& b = blocks_.at(addr);
    if (b.bytes > size) {  // split: the tail stays free
      const uint64_t tail = addr + size;
      blocks_[tail] = Block{b.bytes - size, b.segment, 0};
      b.bytes = size;
      InsertFree(tail);
    }
  } else {
    const uint64_t seg_bytes = RoundUp(size, kSegmentAlign);
    addr = next_segment_addr_;
    next_segment_addr_ += seg_bytes;
    Segment seg{seg_bytes, nullptr};
    if (with_payload_) {
      seg.data = std::make_unique<uint8_t[]>(seg_bytes);
      std::memset(seg.data.get(), kFreshByte, seg_bytes);
    }
    segments_.emplace(addr, std::move(seg));
    blocks_[addr] = Block{size, addr, 0};
    if (seg_bytes > size) {
      blocks_[addr + size] = Block{seg_bytes - size, addr, 0};
      InsertFree(addr + size);
    }
  }
  const uint64_t id = next_id_;
  next_id_ += world_;
  blocks_.at(addr).alloc_id = id;
  allocations_[id] = AllocationInfo{id, rank_, addr, bytes, std::string(tag), true, ""};
  ++live_count_;
  return MemRef{rank_, addr, bytes, id};
}

absl::Status SimMemory::Free(const MemRef& m, std::string_view context) {
  auto bit = blocks_.find(m.addr);
  if (m.rank != rank_ || bit == blocks_.end() || bit->second.alloc_id == 0 ||
      bit->second.alloc_id != m.alloc_id) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "free on rank %d: 0x%x (allocation #%d) is not a live allocation of this rank", rank_,
        m.addr, m.alloc_id));
  }
  AllocationInfo& info = allocations_.at(m.alloc_id);
  info.live = false;
  --live_count_;
  info.freed_by = std::string(context);
  if (freed_ring_.size() < kFreedRecordsKept) {
    freed_ring_.push_back(m.alloc_id);
  } else {
    allocations_.erase(freed_ring_[freed_next_]);
    dropped_.push_back(freed_ring_[freed_next_]);
    freed_ring_[freed_next_] = m.alloc_id;
    freed_next_ = (freed_next_ + 1) % kFreedRecordsKept;
  }
  bit->second.alloc_id = 0;
  // Coalesce with free neighbours of the same segment.
  auto next = std::next(bit);
  if (next != blocks_.end() && next->second.alloc_id == 0 &&
      next->second.segment == bit->second.segment) {
    EraseFree(next->first);
    bit->second.bytes += next->second.bytes;
    blocks_.erase(next);
  }
  if (bit != blocks_.begin()) {
    auto prev = std::prev(bit);
    if (prev->second.alloc_id == 0 && prev->second.segment == bit->second.segment) {
      EraseFree(prev->first);
      prev->second.bytes += bit->second.bytes;
      blocks_.erase(bit);
      bit = prev;
    }
  }
  InsertFree(bit->first);
  return absl::OkStatus();
}

absl::Status SimMemory::CheckRange(uint64_t addr, uint64_t bytes) const {
  auto it = segments_.upper_bound(addr);
  if (it != segments_.begin()) {
    --it;
    if (addr >= it->first && addr + bytes <= it->first + it->second.bytes) {
      return absl::OkStatus();
    }
  }
  return absl::OutOfRangeError(absl::StrFormat("rank %d: [0x%x, 0x%x) is not inside device memory",
                                               rank_, addr, addr + bytes));
}

absl::StatusOr<uint8_t*> SimMemory::Bytes(uint64_t addr, uint64_t bytes) {
  if (absl::Status s = CheckRange(addr, bytes); !s.ok()) return s;
  if (!with_payload_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: the shadow fidelity holds no payload", rank_));
  }
  auto it = std::prev(segments_.upper_bound(addr));
  return it->second.data.get() + (addr - it->first);
}

const AllocationInfo* SimMemory::Find(uint64_t id) const {
  auto it = allocations_.find(id);
  return it == allocations_.end() ? nullptr : &it->second;
}

bool SimMemory::FreedLongAgo(uint64_t id) const {
  const uint64_t first = static_cast<uint64_t>(rank_) + 1;
  return id >= first && id < next_id_ && (id - first) % static_cast<uint64_t>(world_) == 0 &&
         allocations_.count(id) == 0;
}

const AllocationInfo* SimMemory::LiveAt(uint64_t addr) const {
  auto it = blocks_.upper_bound(addr);
  if (it == blocks_.begin()) return nullptr;
  --it;
  if (addr >= it->first + it->second.bytes || it->second.alloc_id == 0) return nullptr;
  return Find(it->second.alloc_id);
}

}  // namespace dmalab
