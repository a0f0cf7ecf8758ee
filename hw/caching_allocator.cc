#include "hw/caching_allocator.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

CachingAllocator::CachingAllocator(std::string name, SegmentAlloc segment_alloc,
                                   SegmentFree segment_free)
    : name_(std::move(name)),
      segment_alloc_(std::move(segment_alloc)),
      segment_free_(std::move(segment_free)) {}

CachingAllocator::~CachingAllocator() {
  for (const auto& [addr, bytes] : segments_) segment_free_(addr);
}

uint64_t CachingAllocator::RoundedBytes(uint64_t bytes) {
  if (bytes < kMinBlockBytes) return kMinBlockBytes;
  return (bytes + kMinBlockBytes - 1) / kMinBlockBytes * kMinBlockBytes;
}

uint64_t CachingAllocator::SegmentBytesFor(uint64_t rounded) {
  if (rounded <= kSmallRequestBytes) return kSmallSegmentBytes;
  if (rounded < kMinLargeAllocBytes) return kLargeSegmentBytes;
  return (rounded + kLargeRoundBytes - 1) / kLargeRoundBytes * kLargeRoundBytes;
}

absl::StatusOr<uint64_t> CachingAllocator::Allocate(uint64_t bytes) {
  const uint64_t rounded = RoundedBytes(bytes);
  if (rounded < bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: allocate %d bytes: size overflows", name_, bytes));
  }
  const bool small_pool = rounded <= kSmallRequestBytes;
  Block* block = TakeBestFit(rounded, small_pool);
  if (block == nullptr) {
    DMALAB_ASSIGN_OR_RETURN(block, NewSegment(rounded, small_pool));
  }
  SplitIfWorthIt(block, rounded);
  block->live = true;
  return block->addr;
}

CachingAllocator::Block* CachingAllocator::TakeBestFit(uint64_t rounded, bool small_pool) {
  std::set<FreeKey>& pool = PoolOf(small_pool);
  auto it = pool.lower_bound(FreeKey{rounded, 0});
  if (it == pool.end()) return nullptr;
  Block* block = blocks_.at(it->second).get();
  pool.erase(it);
  return block;
}

absl::StatusOr<CachingAllocator::Block*> CachingAllocator::NewSegment(uint64_t rounded,
                                                                      bool small_pool) {
  const uint64_t segment_bytes = SegmentBytesFor(rounded);
  absl::StatusOr<uint64_t> addr = segment_alloc_(segment_bytes);
  if (!addr.ok() && absl::IsResourceExhausted(addr.status())) {
    ReleaseCachedSegments();
    addr = segment_alloc_(segment_bytes);
  }
  if (!addr.ok()) {
    return Prefixed(absl::StrFormat("%s: allocate %d bytes (segment of %d bytes): ", name_, rounded,
                                    segment_bytes),
                    addr.status());
  }
  segments_[*addr] = segment_bytes;
  auto block = std::make_unique<Block>();
  block->addr = *addr;
  block->bytes = segment_bytes;
  block->segment = next_segment_++;
  block->small_pool = small_pool;
  Block* raw = block.get();
  blocks_[*addr] = std::move(block);
  return raw;
}

void CachingAllocator::SplitIfWorthIt(Block* block, uint64_t rounded) {
  const uint64_t rest = block->bytes - rounded;
  const bool split = block->small_pool ? rest >= kMinBlockBytes : rest > kSmallRequestBytes;
  if (!split) return;
  auto tail = std::make_unique<Block>();
  tail->addr = block->addr + rounded;
  tail->bytes = rest;
  tail->segment = block->segment;
  tail->small_pool = block->small_pool;
  PoolOf(tail->small_pool).insert(FreeKey{tail->bytes, tail->addr});
  blocks_[tail->addr] = std::move(tail);
  block->bytes = rounded;
}

CachingAllocator::Block* CachingAllocator::FreeNeighbour(
    std::map<uint64_t, std::unique_ptr<Block>>::iterator it, bool after) {
  const int64_t segment = it->second->segment;
  if (after) {
    ++it;
    if (it == blocks_.end()) return nullptr;
  } else {
    if (it == blocks_.begin()) return nullptr;
    --it;
  }
  Block* b = it->second.get();
  return (b->segment == segment && !b->live) ? b : nullptr;
}

absl::Status CachingAllocator::Free(uint64_t addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end() || !it->second->live) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: free of address 0x%x, which is not the start of a live block", name_, addr));
  }
  Block* block = it->second.get();
  block->live = false;
  std::set<FreeKey>& pool = PoolOf(block->small_pool);
  if (Block* next = FreeNeighbour(it, /*after=*/true); next != nullptr) {
    pool.erase(FreeKey{next->bytes, next->addr});
    const uint64_t next_addr = next->addr;
    block->bytes += next->bytes;
    blocks_.erase(next_addr);
  }
  if (Block* prev = FreeNeighbour(it, /*after=*/false); prev != nullptr) {
    pool.erase(FreeKey{prev->bytes, prev->addr});
    prev->bytes += block->bytes;
    blocks_.erase(it);
    block = prev;
  }
  pool.insert(FreeKey{block->bytes, block->addr});
  return absl::OkStatus();
}

void CachingAllocator::ReleaseCachedSegments() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    auto block = blocks_.find(it->first);
    Block* b = block->second.get();
    if (b->live || b->bytes != it->second) {
      ++it;
      continue;
    }
    PoolOf(b->small_pool).erase(FreeKey{b->bytes, b->addr});
    blocks_.erase(block);
    segment_free_(it->first);
    it = segments_.erase(it);
  }
}

std::optional<std::pair<uint64_t, uint64_t>> CachingAllocator::SegmentOf(uint64_t addr) const {
  auto it = segments_.upper_bound(addr);
  if (it == segments_.begin()) return std::nullopt;
  --it;
  if (addr >= it->first + it->second) return std::nullopt;
  return *it;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  Stats s;
  s.segments = static_cast<int64_t>(segments_.size());
  for (const auto& [addr, bytes] : segments_) s.reserved_bytes += bytes;
  for (const auto& [addr, block] : blocks_) {
    if (block->live) {
      s.allocated_bytes += block->bytes;
      ++s.live_blocks;
    } else {
      ++s.free_blocks;
    }
  }
  return s;
}

}  // namespace dmalab
