// Device-independent checks on all-reduce results: storage aliasing among live results and
// bit-identity across ranks. Both the simulator's tests and the replay engine use them, on
// any Device.
#ifndef DMALAB_COMMON_CORE_RESULT_CHECKS_H_
#define DMALAB_COMMON_CORE_RESULT_CHECKS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"
#include "dmalab/tensor.h"

namespace dmalab {

// A result the caller still holds, named for reports.
struct LiveResult {
  std::string name;
  TensorView view;
};

// Two live results whose storage shares bytes on one rank.
struct ResultAlias {
  std::string first, second;
  int rank = 0;
  uint64_t lo = 0, hi = 0;  // the shared bytes
  std::string ToString() const;
};

// Every pair of live results whose byte intervals overlap on the same rank (never compares
// start addresses alone), in input order.
std::vector<ResultAlias> FindResultAliases(absl::Span<const LiveResult> live);

// The pairs (i, j), i < j, of `ranges` that share bytes on one rank, ordered by i then j (the
// order of comparing each range with every later one). Sorted by address and swept: O(n log n)
// plus the pairs found.
std::vector<std::pair<size_t, size_t>> OverlappingPairs(absl::Span<const MemRef> ranges);

// Reads each rank's tensor back and reports the ranks whose bytes differ from rank 0's
// (empty: all ranks bit-identical).
absl::StatusOr<std::vector<int>> RanksDifferingFromRank0(Device& device,
                                                         absl::Span<const TensorView> per_rank);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_RESULT_CHECKS_H_
