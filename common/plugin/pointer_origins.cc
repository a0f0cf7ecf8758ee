#include "common/plugin/pointer_origins.h"

#include <iterator>

namespace dmalab {

void PointerOrigins::Handed(const MemRef& m) {
  if ((m.alloc_id == 0 && m.via_mapping == 0) || m.bytes == 0) return;
  const std::pair<int, uint64_t> lo{m.rank, m.addr};
  // Trim or drop the ranges that overlap [addr, end).
  auto it = ranges_.lower_bound(lo);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->first.first == m.rank && prev->second.end > m.addr) {
      const Range tail = prev->second;
      prev->second.end = m.addr;
      if (tail.end > m.end()) ranges_[{m.rank, m.end()}] = tail;
    }
  }
  it = ranges_.lower_bound(lo);
  while (it != ranges_.end() && it->first.first == m.rank && it->first.second < m.end()) {
    if (it->second.end > m.end()) ranges_[{m.rank, m.end()}] = it->second;
    it = ranges_.erase(it);
  }
  ranges_[lo] = Range{m.end(), m.alloc_id, m.via_mapping};
}

MemRef PointerOrigins::Resolve(MemRef m) const {
  if (m.alloc_id != 0 || m.via_mapping != 0) return m;
  auto it = ranges_.upper_bound({m.rank, m.addr});
  if (it == ranges_.begin()) return m;
  --it;
  if (it->first.first == m.rank && it->first.second <= m.addr && m.end() <= it->second.end) {
    m.alloc_id = it->second.alloc_id;
    m.via_mapping = it->second.via_mapping;
  }
  return m;
}

}  // namespace dmalab
