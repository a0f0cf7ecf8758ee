#include "sim/sim_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "dmalab/device.h"

namespace dmalab {
namespace {

// Callers keep v at most kMaxBytesPerRank, so this cannot wrap.
uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes [offset, offset + n) of `content` to `out`, at any offset: whole grains straight into
// out, a grain cut by either end through a small buffer.
void Generate(const GeneratedContent& content, uint64_t offset, uint64_t n, uint8_t* out) {
  const uint64_t grain = content.grain();
  uint8_t one[64];
  while (n > 0) {
    const uint64_t head = offset % grain;
    if (head != 0 || n < grain) {
      content.Generate(offset - head, absl::MakeSpan(one, grain));
      const uint64_t take = std::min(grain - head, n);
      std::memcpy(out, one + head, take);
      offset += take;
      out += take;
      n -= take;
      continue;
    }
    const uint64_t whole = n / grain * grain;
    content.Generate(offset, absl::MakeSpan(out, whole));
    offset += whole;
    out += whole;
    n -= whole;
  }
}

// The first of a segment's lazy ranges (start -> range ending at .end) that ends after lo.
template <typename LazyMap>
auto FirstLazy(LazyMap& lazy, uint64_t lo) {
  auto it = lazy.upper_bound(lo);
  if (it != lazy.begin() && std::prev(it)->second.end > lo) --it;
  return it;
}

std::string Size(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f GiB)", bytes, bytes / 1073741824.0);
}

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

void SimMemory::InsertFree(uint64_t addr) {
  const Block& b = blocks_.at(addr);
  free_.insert({segments_.at(b.segment).pool, b.bytes, addr});
}
void SimMemory::EraseFree(uint64_t addr) {
  const Block& b = blocks_.at(addr);
  free_.erase({segments_.at(b.segment).pool, b.bytes, addr});
}

uint32_t SimMemory::PoolAt(uint64_t addr) const {
  auto it = segments_.upper_bound(addr);
  if (it == segments_.begin()) return 0;
  --it;
  return addr - it->first < it->second.bytes ? it->second.pool : 0;
}

absl::StatusOr<MemRef> SimMemory::Allocate(uint64_t bytes, std::string_view tag, uint32_t pool) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate on rank %d ('%s'): bytes is 0; must be > 0", rank_, tag));
  }
  if (bytes > kMaxBytesPerRank) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate on rank %d ('%s'): %s; a simulated rank holds at most %s; %s",
                        rank_, tag, Size(bytes), Size(kMaxBytesPerRank), Holdings()));
  }
  const uint64_t size = RoundUp(bytes, kBlockAlign);
  uint64_t addr;
  auto it = free_.lower_bound({pool, size, 0});
  if (it != free_.end() && std::get<0>(*it) == pool) {
    addr = std::get<2>(*it);
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
    if (seg_bytes > kMaxBytesPerRank - reserved_bytes_ ||
        next_segment_addr_ > std::numeric_limits<uint64_t>::max() - seg_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "allocate on rank %d ('%s'): %s needs a new segment of %s, and a simulated rank holds "
          "at most %s; %s",
          rank_, tag, Size(bytes), Size(seg_bytes), Size(kMaxBytesPerRank), Holdings()));
    }
    Segment seg{seg_bytes, pool, {}, {}, 0, {}};
    if (with_payload_) {
      absl::StatusOr<HostBlock> block = AcquireHostBlock(seg_bytes);
      if (!block.ok()) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("allocate on rank %d ('%s'): %s: %s; %s", rank_, tag, Size(bytes),
                            block.status().message(), Holdings()));
      }
      seg.data = *std::move(block);
      const uint64_t pages = seg_bytes / kFreshPage;
      seg.fresh.assign((pages + 63) / 64, ~uint64_t{0});
      if (pages % 64 != 0) seg.fresh.back() = (uint64_t{1} << (pages % 64)) - 1;
      seg.fresh_count = pages;
    }
    addr = next_segment_addr_;
    next_segment_addr_ += seg_bytes;
    reserved_bytes_ += seg_bytes;
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
  live_bytes_ += bytes;
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
  live_bounds_.fill(LiveBounds{});
  live_bytes_ -= info.bytes;
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
    // addr is at or past the segment's start; compare sizes, not ends, so nothing wraps.
    if (addr - it->first < it->second.bytes && bytes <= it->second.bytes - (addr - it->first)) {
      return absl::OkStatus();
    }
  }
  return absl::OutOfRangeError(absl::StrFormat(
      "rank %d: %d bytes at 0x%x are not inside device memory", rank_, bytes, addr));
}

absl::StatusOr<SimMemory::Segment*> SimMemory::PayloadSegment(uint64_t addr, uint64_t bytes) {
  DMALAB_RETURN_IF_ERROR(CheckRange(addr, bytes));
  if (!with_payload_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: the shadow fidelity holds no payload", rank_));
  }
  return &std::prev(segments_.upper_bound(addr))->second;
}

void SimMemory::TakeFresh(Segment& seg, uint64_t first, uint64_t last, bool fill, bool populate) {
  if (seg.fresh_count == 0 || first >= last) return;
  // One call per run of consecutive fresh pages. The pages are populated first: one system call
  // instead of a page fault per page where the host block was newly mapped (a no-op on a
  // recycled one; only a speed hint, so its failure on an old kernel changes nothing).
  uint64_t run = 0, run_pages = 0;
  const auto flush = [&] {
    if (run_pages == 0) return;
    uint8_t* at = seg.data.data() + run * kFreshPage;
    if (populate) madvise(at, run_pages * kFreshPage, MADV_POPULATE_WRITE);
    if (fill) std::memset(at, kFreshByte, run_pages * kFreshPage);
    seg.fresh_count -= run_pages;
    run_pages = 0;
  };
  for (uint64_t word = first / 64; word * 64 < last; ++word) {
    uint64_t bits = seg.fresh[word];
    if (word == first / 64) bits &= ~uint64_t{0} << (first % 64);
    if ((word + 1) * 64 > last) bits &= (uint64_t{1} << (last % 64)) - 1;
    seg.fresh[word] &= ~bits;
    while (bits != 0) {
      const uint64_t page = word * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      bits &= bits - 1;
      if (run_pages > 0 && run + run_pages == page) {
        ++run_pages;
        continue;
      }
      flush();
      run = page;
      run_pages = 1;
    }
  }
  flush();
}

void SimMemory::FillFresh(Segment& seg, uint64_t lo, uint64_t hi) {
  TakeFresh(seg, lo / kFreshPage, (hi + kFreshPage - 1) / kFreshPage, /*fill=*/true);
}

absl::StatusOr<uint8_t*> SimMemory::Bytes(uint64_t addr, uint64_t bytes) {
  DMALAB_ASSIGN_OR_RETURN(auto* seg, PayloadSegment(addr, bytes));
  const uint64_t start = std::prev(segments_.upper_bound(addr))->first;
  FillFresh(*seg, addr - start, addr - start + bytes);
  Materialize(*seg, addr - start, addr - start + bytes);
  return seg->data.data() + (addr - start);
}

void SimMemory::ClaimForOverwrite(Segment& seg, uint64_t lo, uint64_t hi, bool populate) {
  // Pages the range covers whole are claimed unfilled; the pages at its ends, covered in part,
  // keep fresh bytes beside the written ones, so they are filled first.
  const uint64_t first_whole = RoundUp(lo, kFreshPage) / kFreshPage, last_whole = hi / kFreshPage;
  if (first_whole >= last_whole) {
    FillFresh(seg, lo, hi);
  } else {
    FillFresh(seg, lo, first_whole * kFreshPage);
    FillFresh(seg, last_whole * kFreshPage, hi);
    TakeFresh(seg, first_whole, last_whole, /*fill=*/false, populate);
  }
}

absl::StatusOr<uint8_t*> SimMemory::BytesToOverwrite(uint64_t addr, uint64_t bytes) {
  DMALAB_ASSIGN_OR_RETURN(auto* seg, PayloadSegment(addr, bytes));
  const uint64_t start = std::prev(segments_.upper_bound(addr))->first;
  const uint64_t lo = addr - start, hi = lo + bytes;
  ClaimForOverwrite(*seg, lo, hi, /*populate=*/true);
  DropLazy(*seg, lo, hi);
  return seg->data.data() + lo;
}

void SimMemory::DropLazy(Segment& seg, uint64_t lo, uint64_t hi) {
  if (seg.lazy.empty() || lo >= hi) return;
  auto it = FirstLazy(seg.lazy, lo);
  while (it != seg.lazy.end() && it->first < hi) {
    const uint64_t start = it->first;
    Segment::Lazy range = std::move(it->second);
    it = seg.lazy.erase(it);
    if (start < lo) seg.lazy.emplace(start, Segment::Lazy{lo, range.content, range.offset});
    if (range.end > hi) {
      it = seg.lazy
               .emplace(hi, Segment::Lazy{range.end, std::move(range.content),
                                          range.offset + (hi - start)})
               .first;
      ++it;
    }
  }
}

void SimMemory::Materialize(Segment& seg, uint64_t lo, uint64_t hi) {
  if (seg.lazy.empty() || lo >= hi) return;
  auto it = FirstLazy(seg.lazy, lo);
  bool any = false;
  for (; it != seg.lazy.end() && it->first < hi; ++it) {
    const uint64_t from = std::max(lo, it->first), to = std::min(hi, it->second.end);
    Generate(*it->second.content, it->second.offset + (from - it->first), to - from,
             seg.data.data() + from);
    any = true;
  }
  if (any) DropLazy(seg, lo, hi);
}

absl::Status SimMemory::WriteLazy(uint64_t addr, uint64_t bytes,
                                  std::shared_ptr<const GeneratedContent> content,
                                  uint64_t offset) {
  DMALAB_ASSIGN_OR_RETURN(auto* seg, PayloadSegment(addr, bytes));
  const uint64_t start = std::prev(segments_.upper_bound(addr))->first;
  const uint64_t lo = addr - start, hi = lo + bytes;
  if (lo == hi) return absl::OkStatus();
  ClaimForOverwrite(*seg, lo, hi, /*populate=*/false);
  DropLazy(*seg, lo, hi);
  seg->lazy.emplace(lo, Segment::Lazy{hi, std::move(content), offset});
  return absl::OkStatus();
}

absl::Status SimMemory::CopyOut(uint64_t addr, uint64_t bytes, uint8_t* out) {
  DMALAB_ASSIGN_OR_RETURN(auto* seg, PayloadSegment(addr, bytes));
  const uint64_t start = std::prev(segments_.upper_bound(addr))->first;
  Segment& sg = *seg;
  const uint64_t lo = addr - start, hi = lo + bytes;
  // Written (or fresh) bytes from memory, lazy ones generated.
  const auto plain = [&](uint64_t from, uint64_t to) {
    if (from >= to) return;
    FillFresh(sg, from, to);
    std::memcpy(out + (from - lo), sg.data.data() + from, to - from);
  };
  uint64_t at = lo;
  auto it = FirstLazy(sg.lazy, lo);
  for (; it != sg.lazy.end() && it->first < hi; ++it) {
    const uint64_t from = std::max(lo, it->first), to = std::min(hi, it->second.end);
    plain(at, from);
    Generate(*it->second.content, it->second.offset + (from - it->first), to - from,
             out + (from - lo));
    at = to;
  }
  plain(at, hi);
  return absl::OkStatus();
}

std::pair<uint64_t, const SimMemory::Segment*> SimMemory::SegmentAt(uint64_t addr) const {
  auto it = std::prev(segments_.upper_bound(addr));
  return {it->first, &it->second};
}

bool SimMemory::HasLazy(uint64_t addr, uint64_t bytes) const {
  if (!with_payload_ || !CheckRange(addr, bytes).ok()) return false;
  const auto [start, seg] = SegmentAt(addr);
  if (seg->lazy.empty()) return false;
  const uint64_t lo = addr - start, hi = lo + bytes;
  auto it = FirstLazy(seg->lazy, lo);
  return it != seg->lazy.end() && it->first < hi;
}

std::optional<std::pair<std::shared_ptr<const GeneratedContent>, uint64_t>> SimMemory::WholeLazy(
    uint64_t addr, uint64_t bytes) const {
  if (!with_payload_ || bytes == 0 || !CheckRange(addr, bytes).ok()) return std::nullopt;
  const auto [start, seg] = SegmentAt(addr);
  const uint64_t lo = addr - start, hi = lo + bytes;
  auto it = seg->lazy.upper_bound(lo);
  if (it == seg->lazy.begin()) return std::nullopt;
  --it;
  if (it->second.end < hi) return std::nullopt;
  return std::make_pair(it->second.content, it->second.offset + (lo - it->first));
}

uint64_t SimMemory::fresh_pages() const {
  uint64_t pages = 0;
  for (const auto& [addr, seg] : segments_) pages += seg.fresh_count;
  return pages;
}

std::string SimMemory::Holdings() const {
  return absl::StrFormat("rank %d holds %s in %d segments (%d bytes live in %d allocations)", rank_,
                         Size(reserved_bytes_), segments_.size(), live_bytes_, live_count_);
}

const AllocationInfo* SimMemory::Find(uint64_t id) const {
  auto it = allocations_.find(id);
  return it == allocations_.end() ? nullptr : &it->second;
}

bool SimMemory::InsideLive(uint64_t id, uint64_t addr, uint64_t bytes) const {
  // A rank's ids step by the world size: spread by the top bits of id times a large odd number.
  static_assert(std::tuple_size_v<decltype(live_bounds_)> == 16);
  LiveBounds& known = live_bounds_[(id * uint64_t{0x9e3779b97f4a7c15}) >> 60];
  if (known.id != id || id == 0) {
    const AllocationInfo* a = Find(id);
    if (a == nullptr || !a->live) return false;
    known = LiveBounds{id, a->addr, a->addr + a->bytes};
  }
  return addr >= known.lo && addr <= known.hi && bytes <= known.hi - addr;
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
