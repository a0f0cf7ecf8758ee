#include "sim/finding.h"

#include "absl/strings/str_format.h"
#include "common/core/enum_table.h"

namespace dmalab {

namespace {

constexpr auto kFindingKinds =
    MakeEnumTable<FindingKind>({{FindingKind::kRace, "race"},
                                {FindingKind::kUseAfterFree, "use-after-free"},
                                {FindingKind::kUseAfterReuse, "use-after-reuse"},
                                {FindingKind::kOutOfBounds, "out-of-bounds"},
                                {FindingKind::kDeadlock, "deadlock"},
                                {FindingKind::kShadowUnknownWord, "shadow-unknown-word"},
                                {FindingKind::kForeignAddress, "foreign_address"},
                                {FindingKind::kStaleIpcMapping, "stale_ipc_mapping"},
                                {FindingKind::kUnmappedAddress, "unmapped_address"}});

}  // namespace

std::string_view FindingKindName(FindingKind kind) { return kFindingKinds.Name(kind); }

DeviceFinding Finding::ToDeviceFinding() const {
  return DeviceFinding{std::string(FindingKindName(kind)), rank, mem, alloc_tag, ops, message};
}

void FindingLog::Add(Finding finding) {
  if (counts_[static_cast<int>(finding.kind)]++ < kLimitPerKind) {
    findings_.push_back(std::move(finding));
  }
}

int64_t FindingLog::total() const {
  int64_t n = 0;
  for (int c : counts_) n += c;
  return n;
}

void FindingLog::Clear() {
  findings_.clear();
  for (int& c : counts_) c = 0;
}

std::string FindingLog::ToString() const {
  std::string out;
  int printed[kKinds] = {};
  for (const Finding& f : findings_) {
    if (printed[static_cast<int>(f.kind)]++ >= kPrintPerKind) continue;
    absl::StrAppendFormat(&out, "%s: %s\n", FindingKindName(f.kind), f.message);
  }
  for (int k = 0; k < kKinds; ++k) {
    if (counts_[k] > kPrintPerKind) {
      absl::StrAppendFormat(&out, "%s: %d more not shown\n",
                            FindingKindName(static_cast<FindingKind>(k)),
                            counts_[k] - kPrintPerKind);
    }
  }
  return out;
}

}  // namespace dmalab
