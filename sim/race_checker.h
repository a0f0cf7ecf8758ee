// Happens-before race detection on byte intervals.
//
// Every simulated operation's reads and writes are recorded per rank as byte intervals with
// the accessing timeline (stream) and its vector-clock component. An access conflicts with an
// earlier one on overlapping bytes when at least one writes and the earlier one did not happen
// before the current timeline's clock. Keys are byte intervals, never start addresses.
#ifndef DMALAB_SIM_RACE_CHECKER_H_
#define DMALAB_SIM_RACE_CHECKER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"
#include "sim/vector_clock.h"

namespace dmalab {

// One access: who (timeline), when (its clock component), which operation (an index the
// caller resolves to a label).
struct Access {
  int timeline = -1;
  uint32_t clock = 0;
  int64_t op = -1;
};

struct Conflict {
  Access earlier;
  bool earlier_is_write = false;
  uint64_t lo = 0, hi = 0;  // the overlapping bytes of the first conflicting interval
};

class RaceChecker {
 public:
  explicit RaceChecker(int ranks) : ranks_(ranks) {}

  // Records a read of [lo, hi) on `rank` by `a`, whose timeline clock is `vc`; returns the
  // first conflicting earlier write, if any.
  std::optional<Conflict> Read(int rank, uint64_t lo, uint64_t hi, const Access& a,
                               const VectorClock& vc);
  // Records a write; returns the first conflicting earlier read or write, if any.
  std::optional<Conflict> Write(int rank, uint64_t lo, uint64_t hi, const Access& a,
                                const VectorClock& vc);

 private:
  struct Segment {
    uint64_t end = 0;
    bool has_write = false;
    Access write;
    // At most one per timeline: the latest. Usually one or two (a copy engine and a kernel).
    absl::InlinedVector<Access, 2> reads;
  };
  // A B-tree: lookups touch a few cache lines instead of a node per level.
  using SegmentMap = absl::btree_map<uint64_t, Segment>;
  // Cuts the segment that straddles `at`, if any, so that a segment starts there.
  static void Split(SegmentMap& m, uint64_t at);
  // Makes segments start at lo and hi and cover [lo, hi) without gaps.
  static void Carve(SegmentMap& m, uint64_t lo, uint64_t hi);

  std::vector<SegmentMap> ranks_;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_RACE_CHECKER_H_
