#include "dmalab/faults.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dmalab {

std::string_view FaultName(Fault f) {
  switch (f) {
    case Fault::kPersistentOutput:
      return "persistent-output";
    case Fault::kDropCopyWait:
      return "drop-copy-wait";
    case Fault::kSkipEndHandshake:
      return "skip-end-handshake";
    case Fault::kEarlyReturn:
      return "early-return";
    case Fault::kFlagReadyNotConsumed:
      return "flag-ready-not-consumed";
    case Fault::kGraphOutputFreed:
      return "graph-output-freed";
    case Fault::kInplaceAliasRing:
      return "inplace-alias-ring";
    case Fault::kOwnerKeepsPrequant:
      return "owner-keeps-prequant";
  }
  return "?";
}

const std::vector<Fault>& AllFaults() {
  static const std::vector<Fault> kAll = {Fault::kPersistentOutput,     Fault::kDropCopyWait,
                                          Fault::kSkipEndHandshake,     Fault::kEarlyReturn,
                                          Fault::kFlagReadyNotConsumed, Fault::kGraphOutputFreed,
                                          Fault::kInplaceAliasRing,     Fault::kOwnerKeepsPrequant};
  return kAll;
}

absl::StatusOr<FaultSet> FaultSet::Parse(std::string_view names) {
  FaultSet set;
  if (names.empty() || names == "none") return set;
  for (size_t start = 0; start <= names.size();) {
    size_t comma = names.find(',', start);
    if (comma == std::string_view::npos) comma = names.size();
    const std::string_view name = names.substr(start, comma - start);
    start = comma + 1;
    bool found = false;
    for (Fault f : AllFaults()) {
      if (name == FaultName(f)) {
        set.Add(f);
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> allowed;
      for (Fault f : AllFaults()) allowed.emplace_back(FaultName(f));
      return absl::InvalidArgumentError(absl::StrFormat(
          "inject: fault '%s' is not known; allowed: %s", name, absl::StrJoin(allowed, ", ")));
    }
  }
  return set;
}

std::string FaultSet::ToString() const {
  std::vector<std::string> names;
  for (Fault f : AllFaults()) {
    if (Has(f)) names.emplace_back(FaultName(f));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

}  // namespace dmalab
