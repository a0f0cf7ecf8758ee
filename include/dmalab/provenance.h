// Provenance: where each byte of a buffer came from, the currency of the simulator's shadow
// fidelity (docs/design.md section 6). A shadow device keeps no payload; for every byte it knows
// the origin that produced it (a host write of given contents, a kernel of given inputs) and the
// byte's offset within that origin's output. Origins are derived from contents, never from
// addresses, ranks or scheduling, so two buffers with equal provenance hold equal bits on any
// values device, and one seed gives the same provenance every run.
//
// The converse does not hold: two different computations (a + b and b + a on exact integers)
// may give equal bits. Comparisons of provenance therefore count an element as changed when its
// provenance differs, which bounds from above what a values comparison would count.
#ifndef DMALAB_PROVENANCE_H_
#define DMALAB_PROVENANCE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace dmalab {

// Origin 0: bytes nobody wrote since the memory was first handed out.
inline constexpr uint64_t kUnwrittenOrigin = 0;

// Bytes [offset, offset + bytes) of a buffer hold bytes [origin_offset, origin_offset + bytes)
// of `origin`'s output.
struct ProvenancePiece {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t origin = kUnwrittenOrigin;
  uint64_t origin_offset = 0;

  bool operator==(const ProvenancePiece&) const = default;
};

// The provenance of a whole buffer: pieces in offset order covering [0, size) without gaps,
// adjacent pieces never continuing one another (so equal buffers have equal piece lists).
using Provenance = std::vector<ProvenancePiece>;

// Elements (of `elem_bytes` bytes) that differ in provenance between two buffers of the same
// size: an element counts when any of its bytes differs. `first` (optional) gets the lowest such
// element, -1 when none.
int64_t CountChangedElems(const Provenance& a, const Provenance& b, int elem_bytes,
                          int64_t* first = nullptr);

// A digest of a buffer's provenance; equal provenance gives equal digests.
uint64_t ProvenanceDigest(const Provenance& provenance);

// Mixes `values` into one origin, never kUnwrittenOrigin: origins of host data and of kernels
// are made with it from what determines their bytes.
uint64_t MakeOrigin(absl::Span<const uint64_t> values);

}  // namespace dmalab

#endif  // DMALAB_PROVENANCE_H_
