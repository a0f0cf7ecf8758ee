#include "common/replay_checks.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace dmalab {

int64_t CountChangedElems(absl::Span<const uint8_t> a, absl::Span<const uint8_t> b, int elem_bytes,
                          int64_t* first) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0) return 0;
  const int64_t elems = static_cast<int64_t>(std::min(a.size(), b.size())) / elem_bytes;
  int64_t changed = 0;
  for (int64_t i = 0; i < elems; ++i) {
    if (std::memcmp(a.data() + i * elem_bytes, b.data() + i * elem_bytes, elem_bytes) != 0) {
      if (changed == 0 && first != nullptr) *first = i;
      ++changed;
    }
  }
  return changed;
}

std::vector<std::pair<size_t, size_t>> FindOverlaps(absl::Span<const NamedStorage> storage) {
  std::vector<size_t> order(storage.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const MemRef& a = storage[x].mem;
    const MemRef& b = storage[y].mem;
    return a.rank != b.rank ? a.rank < b.rank : a.addr != b.addr ? a.addr < b.addr : x < y;
  });
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < order.size(); ++i) {
    const MemRef& a = storage[order[i]].mem;
    // Later entries start at or after a.addr; they overlap a while they start before a.end().
    for (size_t j = i + 1; j < order.size(); ++j) {
      const MemRef& b = storage[order[j]].mem;
      if (b.rank != a.rank || b.addr >= a.end()) break;
      if (a.Overlaps(b))
        pairs.emplace_back(std::min(order[i], order[j]), std::max(order[i], order[j]));
    }
  }
  return pairs;
}

}  // namespace dmalab
