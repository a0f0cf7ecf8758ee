#include "sim/shadow_memory.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace dmalab {
namespace {

// What bytes nobody wrote hold in the simulator (sim/sim_memory.cc: kFreshByte).
constexpr uint64_t kFreshWord = ~0ull;

}  // namespace

void ShadowMemory::Split(uint64_t at) {
  auto it = pieces_.upper_bound(at);
  if (it == pieces_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Piece tail{it->second.end, it->second.origin, it->second.origin_offset + (at - it->first)};
  it->second.end = at;
  pieces_.emplace_hint(std::next(it), at, tail);
}

bool ShadowMemory::Continues(const PieceMap::const_iterator& prev,
                             const PieceMap::const_iterator& next) {
  return prev->second.end == next->first && prev->second.origin == next->second.origin &&
         prev->second.origin_offset + (next->first - prev->first) == next->second.origin_offset;
}

void ShadowMemory::MergeAround(PieceMap::iterator it) {
  if (auto next = std::next(it); next != pieces_.end() && Continues(it, next)) {
    it->second.end = next->second.end;
    it = std::prev(pieces_.erase(next));  // an erase may move entries: found again
  }
  if (it == pieces_.begin()) return;
  if (auto prev = std::prev(it); Continues(prev, it)) {
    prev->second.end = it->second.end;
    pieces_.erase(it);
  }
}

void ShadowMemory::Assign(uint64_t lo, uint64_t hi, uint64_t origin, uint64_t origin_offset) {
  if (hi <= lo) return;
  ForgetWords(lo, hi);
  // The bytes are exactly one piece already (a flag word stored again): replace it in place.
  if (auto it = pieces_.find(lo);
      origin != kUnwrittenOrigin && it != pieces_.end() && it->second.end == hi) {
    it->second.origin = origin;
    it->second.origin_offset = origin_offset;
    MergeAround(it);
    return;
  }
  Split(lo);
  Split(hi);
  pieces_.erase(pieces_.lower_bound(lo), pieces_.lower_bound(hi));
  if (origin == kUnwrittenOrigin) return;  // a gap: nothing to merge (gaps are never pieces)
  MergeAround(pieces_.emplace(lo, Piece{hi, origin, origin_offset}).first);
}

template <typename Pieces>
void ShadowMemory::Collect(uint64_t lo, uint64_t hi, Pieces& out) const {
  auto it = pieces_.upper_bound(lo);
  if (it != pieces_.begin()) --it;
  uint64_t at = lo;
  const auto emit = [&](uint64_t end, uint64_t origin, uint64_t origin_offset) {
    if (end <= at) return;
    ProvenancePiece p{at - lo, end - at, origin, origin_offset};
    ProvenancePiece* last = out.empty() ? nullptr : &out.back();
    if (last != nullptr && last->origin == origin &&
        last->origin_offset + last->bytes == origin_offset) {
      last->bytes += p.bytes;  // gaps (unwritten, origin 0) next to unwritten pieces
    } else {
      out.push_back(p);
    }
    at = end;
  };
  for (; it != pieces_.end() && it->first < hi; ++it) {
    if (it->second.end <= at) continue;
    if (it->first > at) emit(it->first, kUnwrittenOrigin, 0);
    const uint64_t start = std::max(it->first, at);
    emit(std::min(it->second.end, hi), it->second.origin,
         it->second.origin_offset + (start - it->first));
  }
  emit(hi, kUnwrittenOrigin, 0);
}

Provenance ShadowMemory::Get(uint64_t lo, uint64_t hi) const {
  Provenance out;
  Collect(lo, hi, out);
  return out;
}

void ShadowMemory::GetInto(uint64_t lo, uint64_t hi, FewPieces& out) const {
  out.clear();
  Collect(lo, hi, out);
}

void ShadowMemory::CopyFrom(const ShadowMemory& from, uint64_t src, uint64_t dst, uint64_t bytes) {
  // Read whole before anything is written: `from` may be this memory, the ranges may overlap.
  // A copy usually moves one or two pieces and no word: no heap allocation for them.
  FewPieces pieces;
  from.Collect(src, src + bytes, pieces);
  absl::InlinedVector<std::pair<uint64_t, uint64_t>, 4> words;
  for (auto it = from.words_.lower_bound(src);
       it != from.words_.end() && it->first + 8 <= src + bytes; ++it) {
    words.emplace_back(it->first - src + dst, it->second);
  }
  for (const ProvenancePiece& p : pieces) {
    Assign(dst + p.offset, dst + p.offset + p.bytes, p.origin, p.origin_offset);
  }
  for (const auto& [addr, value] : words) KeepWord(addr, value);
}

void ShadowMemory::StoreWord(uint64_t addr, uint64_t value) { KeepWord(addr, value); }

void ShadowMemory::KeepWord(uint64_t addr, uint64_t value) {
  words_[addr] = value;
  words_lo_ = std::min(words_lo_, addr);
  words_hi_ = std::max(words_hi_, addr + 8);
}

void ShadowMemory::AssignWord(uint64_t addr, uint64_t value, uint64_t origin) {
  const uint64_t end = addr + 8;
  auto word = words_.find(addr);
  auto piece = pieces_.find(addr);
  // The usual case: the word and its piece are exactly these bytes, and no other known word
  // overlaps them (words may lie anywhere a copy put them).
  const bool in_place = origin != kUnwrittenOrigin && word != words_.end() &&
                        piece != pieces_.end() && piece->second.end == end &&
                        (word == words_.begin() || std::prev(word)->first + 8 <= addr) &&
                        (std::next(word) == words_.end() || std::next(word)->first >= end);
  if (!in_place) {
    Assign(addr, end, origin, 0);
    KeepWord(addr, value);
    return;
  }
  word->second = value;
  piece->second.origin = origin;
  piece->second.origin_offset = 0;
  MergeAround(piece);  // as Assign
}

std::optional<uint64_t> ShadowMemory::LoadWord(uint64_t addr) const {
  if (auto it = words_.find(addr); it != words_.end()) return it->second;
  // Fresh when no piece overlaps the word (pieces are only ever written bytes).
  auto next = pieces_.upper_bound(addr);
  if (next != pieces_.end() && next->first < addr + 8) return std::nullopt;
  if (next != pieces_.begin() && std::prev(next)->second.end > addr) return std::nullopt;
  return kFreshWord;
}

void ShadowMemory::ForgetWords(uint64_t lo, uint64_t hi) {
  if (hi <= words_lo_ || lo >= words_hi_) return;  // no word was ever kept there
  // A word overlapping the range from below starts at most 7 bytes before it.
  auto first = words_.lower_bound(lo >= 7 ? lo - 7 : 0);
  if (first == words_.end() || first->first >= hi) return;  // none (the usual case)
  words_.erase(first, words_.lower_bound(hi));
}

}  // namespace dmalab
