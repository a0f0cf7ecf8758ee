#include "dmalab/provenance.h"

#include <algorithm>
#include <cstring>

#include "absl/types/span.h"
#include "common/core/hash.h"

namespace dmalab {
namespace {

// The origin byte that buffer byte `at` (inside `p`) holds.
uint64_t OriginByte(const ProvenancePiece& p, uint64_t at) {
  return p.origin_offset + (at - p.offset);
}

}  // namespace

int64_t CountChangedElems(const Provenance& a, const Provenance& b, int elem_bytes,
                          int64_t* first) {
  const uint64_t eb = static_cast<uint64_t>(elem_bytes);
  int64_t changed = 0;
  int64_t lowest = -1;
  int64_t next_uncounted = 0;  // elements below it are counted already
  size_t i = 0, j = 0;
  uint64_t at = 0;
  while (i < a.size() && j < b.size()) {
    const ProvenancePiece& pa = a[i];
    const ProvenancePiece& pb = b[j];
    const uint64_t end = std::min(pa.offset + pa.bytes, pb.offset + pb.bytes);
    // Unwritten bytes all hold the fresh-memory pattern, wherever they are.
    const bool same = pa.origin == pb.origin &&
                      (pa.origin == kUnwrittenOrigin || OriginByte(pa, at) == OriginByte(pb, at));
    if (!same) {
      const int64_t lo = std::max<int64_t>(static_cast<int64_t>(at / eb), next_uncounted);
      const int64_t hi = static_cast<int64_t>((end + eb - 1) / eb);
      if (hi > lo) {
        changed += hi - lo;
        if (lowest < 0) lowest = lo;
        next_uncounted = hi;
      }
    }
    at = end;
    if (at == pa.offset + pa.bytes) ++i;
    if (at == pb.offset + pb.bytes) ++j;
  }
  if (first != nullptr) *first = lowest;
  return changed;
}

uint64_t ProvenanceDigest(const Provenance& provenance) {
  std::vector<uint64_t> words;
  words.reserve(provenance.size() * 4);
  for (const ProvenancePiece& p : provenance) {
    words.insert(words.end(), {p.offset, p.bytes, p.origin, p.origin_offset});
  }
  return Xxh64(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(words.data()),
                                   words.size() * sizeof(uint64_t)));
}

uint64_t MakeOrigin(absl::Span<const uint64_t> values) {
  const uint64_t h = Xxh64(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(values.data()),
                                               values.size() * sizeof(uint64_t)),
                           /*seed=*/0x5ead0f1e1dull);
  return h == kUnwrittenOrigin ? 1 : h;
}

}  // namespace dmalab
