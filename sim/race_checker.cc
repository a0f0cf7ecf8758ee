#include "sim/race_checker.h"

#include <algorithm>
#include <iterator>

namespace dmalab {
namespace {

bool Ordered(const Access& earlier, const Access& now, const VectorClock& vc) {
  return earlier.timeline == now.timeline || vc.HasSeen(earlier.timeline, earlier.clock);
}

}  // namespace

void RaceChecker::Split(SegmentMap& m, uint64_t at) {
  auto it = m.upper_bound(at);
  if (it == m.begin()) return;
  --it;
  if (it->first < at && at < it->second.end) {
    Segment tail = it->second;
    it->second.end = at;
    m.emplace(at, std::move(tail));
  }
}

void RaceChecker::Carve(SegmentMap& m, uint64_t lo, uint64_t hi) {
  Split(m, lo);
  Split(m, hi);
  // Fill gaps with empty segments; found first, inserted after (an insert moves a B-tree's
  // entries, so no iterator survives it).
  absl::InlinedVector<std::pair<uint64_t, uint64_t>, 4> gaps;
  uint64_t cursor = lo;
  for (auto it = m.lower_bound(lo); it != m.end() && it->first < hi; ++it) {
    if (it->first > cursor) gaps.emplace_back(cursor, it->first);
    cursor = it->second.end;
  }
  if (cursor < hi) gaps.emplace_back(cursor, hi);
  for (const auto& [from, to] : gaps) m.try_emplace(from).first->second.end = to;
}

std::optional<Conflict> RaceChecker::Read(int rank, uint64_t lo, uint64_t hi, const Access& a,
                                          const VectorClock& vc) {
  if (lo >= hi) return std::nullopt;
  SegmentMap& m = ranks_[rank];
  // Usually the bytes are exactly one segment already (a buffer read as it was written).
  auto it = m.find(lo);
  if (it == m.end() || it->second.end != hi) {
    Carve(m, lo, hi);
    it = m.lower_bound(lo);
  }
  std::optional<Conflict> found;
  for (; it != m.end() && it->first < hi; ++it) {
    Segment& s = it->second;
    if (!found && s.has_write && !Ordered(s.write, a, vc)) {
      found = Conflict{s.write, true, it->first, s.end};
    }
    auto same = std::find_if(s.reads.begin(), s.reads.end(),
                             [&](const Access& r) { return r.timeline == a.timeline; });
    if (same != s.reads.end()) {
      *same = a;
    } else {
      s.reads.push_back(a);
    }
  }
  return found;
}

std::optional<Conflict> RaceChecker::Write(int rank, uint64_t lo, uint64_t hi, const Access& a,
                                           const VectorClock& vc) {
  if (lo >= hi) return std::nullopt;
  SegmentMap& m = ranks_[rank];
  auto first = m.find(lo);
  if (first == m.end() || first->second.end != hi) {  // else the bytes are exactly one segment
    // Bytes in no segment were never accessed: only the segments need splitting, not the gaps.
    Split(m, lo);
    Split(m, hi);
    first = m.lower_bound(lo);
  }
  std::optional<Conflict> found;
  auto it = first;
  for (; it != m.end() && it->first < hi; ++it) {
    const Segment& s = it->second;
    if (found) continue;
    if (s.has_write && !Ordered(s.write, a, vc)) {
      found = Conflict{s.write, true, it->first, s.end};
      continue;
    }
    for (const Access& r : s.reads) {
      if (!Ordered(r, a, vc)) {
        found = Conflict{r, false, it->first, s.end};
        break;
      }
    }
  }
  // The write supersedes every earlier access to these bytes: one segment remains.
  // Reused in place when it is one segment starting at lo, else made anew.
  if (first == it || first->first != lo || std::next(first) != it) {
    first = m.try_emplace(m.erase(first, it), lo);
  }
  Segment& s = first->second;
  s.end = hi;
  s.has_write = true;
  s.write = a;
  s.reads.clear();
  return found;
}

}  // namespace dmalab
