#include "common/core/result_checks.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

std::string ResultAlias::ToString() const {
  return absl::StrFormat("'%s' and '%s' share rank %d bytes [0x%x, 0x%x) (%d bytes)", first, second,
                         rank, lo, hi, hi - lo);
}

std::vector<ResultAlias> FindResultAliases(absl::Span<const LiveResult> live) {
  std::vector<ResultAlias> out;
  for (size_t i = 0; i < live.size(); ++i) {
    const MemRef a = live[i].view.mem.Slice(0, live[i].view.bytes());
    for (size_t j = i + 1; j < live.size(); ++j) {
      const MemRef b = live[j].view.mem.Slice(0, live[j].view.bytes());
      if (!a.Overlaps(b)) continue;
      out.push_back(ResultAlias{live[i].name, live[j].name, a.rank, std::max(a.addr, b.addr),
                                std::min(a.end(), b.end())});
    }
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
