#include "common/replay_checks.h"

#include <algorithm>
#include <cstring>

namespace dmalab {

namespace {

// Typed loop: compiles to vector compares, unlike a memcmp per element.
template <typename Word>
int64_t CountChangedWords(const uint8_t* a, const uint8_t* b, int64_t elems, int64_t* first) {
  int64_t changed = 0;
  int64_t first_changed = -1;
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < elems; start += kBlock) {
    const int64_t n = std::min(kBlock, elems - start);
    if (std::memcmp(a + start * sizeof(Word), b + start * sizeof(Word), n * sizeof(Word)) == 0) {
      continue;
    }
    for (int64_t i = start; i < start + n; ++i) {
      Word x, y;
      std::memcpy(&x, a + i * sizeof(Word), sizeof(Word));
      std::memcpy(&y, b + i * sizeof(Word), sizeof(Word));
      if (x != y && first_changed < 0) first_changed = i;
      changed += x != y;
    }
  }
  if (first_changed >= 0 && first != nullptr) *first = first_changed;
  return changed;
}

}  // namespace

int64_t CountChangedElems(absl::Span<const uint8_t> a, absl::Span<const uint8_t> b, int elem_bytes,
                          int64_t* first) {
  const int64_t elems = static_cast<int64_t>(std::min(a.size(), b.size())) / elem_bytes;
  switch (elem_bytes) {
    case 2:
      return CountChangedWords<uint16_t>(a.data(), b.data(), elems, first);
    case 4:
      return CountChangedWords<uint32_t>(a.data(), b.data(), elems, first);
    default: {
      int64_t changed = 0;
      for (int64_t i = 0; i < elems; ++i) {
        if (std::memcmp(a.data() + i * elem_bytes, b.data() + i * elem_bytes, elem_bytes) != 0) {
          if (changed == 0 && first != nullptr) *first = i;
          ++changed;
        }
      }
      return changed;
    }
  }
}

}  // namespace dmalab
