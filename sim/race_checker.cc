#include "sim/race_checker.h"

#include <algorithm>
#include <iterator>

namespace dmalab {
namespace {

bool Ordered(const Access& earlier, const Access& now, const VectorClock& vc) {
  return earlier.timeline == now.timeline || vc.HasSeen(earlier.timeline, earlier.clock);
}

}  // namespace

void RaceChecker::Carve(SegmentMap& m, uint64_t lo, uint64_t hi) {
  // Split a segment that straddles `at`.
  auto split = [&m](uint64_t at) {
    auto it = m.upper_bound(at);
    if (it == m.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      Segment tail = it->second;
      it->second.end = at;
      m.emplace(at, std::move(tail));
    }
  };
  split(lo);
  split(hi);
  // Fill gaps with empty segments.
  uint64_t cursor = lo;
  auto it = m.lower_bound(lo);
  while (cursor < hi) {
    if (it == m.end() || it->first >= hi) {
      m.emplace_hint(it, cursor, Segment{hi, false, {}, {}});
      break;
    }
    if (it->first > cursor) m.emplace_hint(it, cursor, Segment{it->first, false, {}, {}});
    cursor = it->second.end;
    ++it;
  }
}

std::optional<Conflict> RaceChecker::Read(int rank, uint64_t lo, uint64_t hi, const Access& a,
                                          const VectorClock& vc) {
  if (lo >= hi) return std::nullopt;
  SegmentMap& m = ranks_[rank];
  Carve(m, lo, hi);
  std::optional<Conflict> found;
  for (auto it = m.lower_bound(lo); it != m.end() && it->first < hi; ++it) {
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
  Carve(m, lo, hi);
  std::optional<Conflict> found;
  auto first = m.lower_bound(lo);
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
  m.erase(first, it);
  m.emplace(lo, Segment{hi, true, a, {}});
  return found;
}

}  // namespace dmalab
