// Element-wise comparison of tensor bytes for the replay engine's retained-value, rank and
// equality checks. (Storage aliasing is common/core/result_checks.h.)
#ifndef DMALAB_COMMON_SCENARIO_REPLAY_CHECKS_H_
#define DMALAB_COMMON_SCENARIO_REPLAY_CHECKS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace dmalab {

// Bytes of an all-reduce output that the replay reads from every rank and checks at a time
// (Device::ReadPieces), a multiple of every dtype's size: small enough that the host memory the
// check needs does not grow with the tensor (on virtual machines a fresh host page costs far more
// than a copy into a warm one) and that a piece of each of a few ranks stays in a core's cache.
inline constexpr uint64_t kCheckPieceBytes = uint64_t{256} << 10;

// Number of `elem_bytes`-byte elements whose bits differ between a and b (same size). When any
// differ, *first is the index of the first one.
int64_t CountChangedElems(absl::Span<const uint8_t> a, absl::Span<const uint8_t> b, int elem_bytes,
                          int64_t* first);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_REPLAY_CHECKS_H_
