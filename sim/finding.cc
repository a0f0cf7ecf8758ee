#include "sim/finding.h"

#include "absl/strings/str_format.h"

namespace dmalab {

std::string_view FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kRace:
      return "race";
    case FindingKind::kUseAfterFree:
      return "use-after-free";
    case FindingKind::kUseAfterReuse:
      return "use-after-reuse";
    case FindingKind::kOutOfBounds:
      return "out-of-bounds";
    case FindingKind::kDeadlock:
      return "deadlock";
    case FindingKind::kShadowUnknownWord:
      return "shadow-unknown-word";
  }
  return "?";
}

void FindingLog::Add(FindingKind kind, std::string message) {
  if (counts_[static_cast<int>(kind)]++ < kLimitPerKind) {
    findings_.push_back(Finding{kind, std::move(message)});
  }
}

void FindingLog::Clear() {
  findings_.clear();
  for (int& c : counts_) c = 0;
}

std::string FindingLog::ToString() const {
  std::string out;
  for (const Finding& f : findings_) {
    absl::StrAppendFormat(&out, "%s: %s\n", FindingKindName(f.kind), f.message);
  }
  for (int k = 0; k < 5; ++k) {
    if (counts_[k] > kLimitPerKind) {
      absl::StrAppendFormat(&out, "%s: %d more not shown\n",
                            FindingKindName(static_cast<FindingKind>(k)),
                            counts_[k] - kLimitPerKind);
    }
  }
  return out;
}

}  // namespace dmalab
