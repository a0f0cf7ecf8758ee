// The invariants the replay engine checks, as small pure functions over bytes and intervals.
#ifndef DMALAB_COMMON_REPLAY_CHECKS_H_
#define DMALAB_COMMON_REPLAY_CHECKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/tensor.h"

namespace dmalab {

// Number of `elem_bytes`-byte elements whose bits differ between a and b (same size). When any
// differ, *first is the index of the first one.
int64_t CountChangedElems(absl::Span<const uint8_t> a, absl::Span<const uint8_t> b, int elem_bytes,
                          int64_t* first);

// A tensor's storage on one rank.
struct NamedStorage {
  std::string tensor;
  MemRef mem;
};

// Every pair (i, j), i < j, of entries whose byte intervals overlap on the same rank (by
// interval, so a view into the middle of another tensor counts), ordered by rank and address.
std::vector<std::pair<size_t, size_t>> FindOverlaps(absl::Span<const NamedStorage> storage);

}  // namespace dmalab

#endif  // DMALAB_COMMON_REPLAY_CHECKS_H_
