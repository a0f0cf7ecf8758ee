#include "dmalab/device_finding.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dmalab {
namespace {

// `text` with every number after '#' replaced by 'N' ("all_reduce#12" -> "all_reduce#N").
std::string WithoutCallNumbers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] != '#' || i + 1 >= text.size() || text[i + 1] < '0' || text[i + 1] > '9') continue;
    out += 'N';
    while (i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9') ++i;
  }
  return out;
}

}  // namespace

std::string DeviceFindingSignature(const DeviceFinding& f) {
  // Sorted: which of two racing operations ran first depends on the schedule.
  std::vector<std::string> ops;
  for (const FindingOp& op : f.ops) {
    ops.push_back(absl::StrFormat("%s %s %s%s", op.rank < 0 ? "host" : "device", op.stream,
                                  WithoutCallNumbers(op.label),
                                  op.access.empty() ? "" : " " + op.access));
  }
  std::sort(ops.begin(), ops.end());
  return absl::StrFormat("%s|%s|%s", f.checker, f.alloc_tag, absl::StrJoin(ops, "|"));
}

}  // namespace dmalab
