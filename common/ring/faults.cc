#include "dmalab/faults.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ring/enum_names.h"

namespace dmalab {

std::string_view FaultName(Fault f) { return kFaults.Name(f); }

const std::vector<Fault>& AllFaults() {
  static const std::vector<Fault> kAll = [] {
    std::vector<Fault> all;
    for (const EnumName<Fault>& e : kFaults) all.push_back(e.value);
    return all;
  }();
  return kAll;
}

absl::StatusOr<FaultSet> FaultSet::Parse(std::string_view names) {
  FaultSet set;
  if (names.empty() || names == "none") return set;
  for (size_t start = 0; start <= names.size();) {
    size_t comma = names.find(',', start);
    if (comma == std::string_view::npos) comma = names.size();
    const absl::StatusOr<Fault> f = kFaults.Parse(names.substr(start, comma - start));
    if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("inject: ", f.status().message()));
    set.Add(*f);
    start = comma + 1;
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
