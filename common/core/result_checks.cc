#include "common/core/result_checks.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

std::string ResultAlias::ToString() const {
  return absl::StrFormat("'%s' and '%s' share rank %d bytes [0x%x, 0x%x) (%d bytes)", first, second,
                         rank, lo, hi, hi - lo);
}

std::vector<std::pair<size_t, size_t>> OverlappingPairs(absl::Span<const MemRef> ranges) {
  std::vector<size_t> order;  // the non-empty ranges by rank, then start
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].bytes > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(ranges[a].rank, ranges[a].addr) < std::pair(ranges[b].rank, ranges[b].addr);
  });
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t k = 0; k < order.size(); ++k) {
    const MemRef& a = ranges[order[k]];
    // Every later range that starts before this one ends, on its rank, overlaps it.
    for (size_t l = k + 1; l < order.size(); ++l) {
      const MemRef& b = ranges[order[l]];
      if (b.rank != a.rank || b.addr >= a.end()) break;
      pairs.emplace_back(std::min(order[k], order[l]), std::max(order[k], order[l]));
    }
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

std::vector<ResultAlias> FindResultAliases(absl::Span<const LiveResult> live) {
  std::vector<MemRef> ranges;
  ranges.reserve(live.size());
  for (const LiveResult& r : live) ranges.push_back(r.view.mem.Slice(0, r.view.bytes()));
  std::vector<ResultAlias> out;
  for (const auto& [i, j] : OverlappingPairs(ranges)) {
    const MemRef &a = ranges[i], &b = ranges[j];
    out.push_back(ResultAlias{live[i].name, live[j].name, a.rank, std::max(a.addr, b.addr),
                              std::min(a.end(), b.end())});
  }
  return out;
}

absl::StatusOr<std::vector<int>> RanksDifferingFromRank0(Device& device,
                                                         absl::Span<const TensorView> per_rank) {
  std::vector<int> differing;
  if (per_rank.empty()) return differing;
  std::vector<uint8_t> first(per_rank[0].bytes()), other;
  DMALAB_RETURN_IF_ERROR(
      device.Read(per_rank[0].mem.Slice(0, first.size()), absl::MakeSpan(first)));
  for (size_t r = 1; r < per_rank.size(); ++r) {
    other.resize(per_rank[r].bytes());
    DMALAB_RETURN_IF_ERROR(
        device.Read(per_rank[r].mem.Slice(0, other.size()), absl::MakeSpan(other)));
    if (other != first) differing.push_back(static_cast<int>(r));
  }
  return differing;
}

}  // namespace dmalab
