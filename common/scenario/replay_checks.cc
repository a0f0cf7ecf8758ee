#include "common/scenario/replay_checks.h"

#include <algorithm>
#include <cstring>

namespace dmalab {

namespace {

// Typed loop: compiles to vector compares, unlike a memcmp per element.
template <typename Word>
int64_t CountChangedWords(const uint8_t* a, const uint8_t* b, int64_t elems, int64_t* first) {
  int64_t changed = 0;
  constexpr int64_t kBlock = 4096;
  for (int64_t start = 0; start < elems; start += kBlock) {
    const int64_t n = std::min(kBlock, elems - start);
    const uint8_t* pa = a + start * sizeof(Word);
    const uint8_t* pb = b + start * sizeof(Word);
    if (std::memcmp(pa, pb, n * sizeof(Word)) == 0) continue;
    if (changed == 0 && first != nullptr) {
      int64_t i = 0;
      while (std::memcmp(pa + i * sizeof(Word), pb + i * sizeof(Word), sizeof(Word)) == 0) ++i;
      *first = start + i;
    }
    // Branch-free so it compiles to vector compares.
    int64_t block_changed = 0;
    for (int64_t i = 0; i < n; ++i) {
      Word x, y;
      std::memcpy(&x, pa + i * sizeof(Word), sizeof(Word));
      std::memcpy(&y, pb + i * sizeof(Word), sizeof(Word));
      block_changed += x != y;
    }
    changed += block_changed;
  }
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
