// One table per enum: the single source of its values' names, of its parser, of the "allowed"
// list its errors and the command line's help print, and of what the Python binding takes.
//
//   inline constexpr auto kDTypes = MakeEnumTable<DType>(
//       {{DType::kBF16, "bf16"}, {DType::kFP16, "fp16"}, {DType::kFP32, "fp32"}},
//       "dtype '{name}' is not known; allowed: {allowed}");
//   kDTypes.Name(DType::kFP16)  // "fp16"
//   kDTypes.Parse("int8")       // "dtype 'int8' is not known; allowed: bf16, fp16, fp32"
//
// A value may have several names: Name gives its first, Find and Parse take each. An entry that
// is not `listed` (an old spelling still read) is left out of Allowed and Names.
#ifndef DMALAB_COMMON_CORE_ENUM_TABLE_H_
#define DMALAB_COMMON_CORE_ENUM_TABLE_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace dmalab {

// One name of an enum value.
template <typename E>
struct EnumName {
  E value;
  std::string_view name;
  bool listed = true;  // named by Allowed and Names
};

// Parse's error when a table gives none: "'{name}' is not known; allowed: {allowed}".
inline constexpr std::string_view kEnumNotKnown = "'{name}' is not known; allowed: {allowed}";

template <typename E, size_t N>
class EnumTable {
 public:
  // `unknown` is Parse's error: "{name}" stands for the text parsed, "{allowed}" for Allowed().
  constexpr EnumTable(const std::array<EnumName<E>, N>& entries,
                      std::string_view unknown = kEnumNotKnown)
      : entries_(entries), unknown_(unknown) {}

  // The first name of `value`; `unknown` for a value the table does not name.
  constexpr std::string_view Name(E value, std::string_view unknown = "?") const {
    for (const EnumName<E>& e : entries_) {
      if (e.value == value) return e.name;
    }
    return unknown;
  }

  // The value that `name` names (listed or not), or nullopt.
  constexpr std::optional<E> Find(std::string_view name) const {
    for (const EnumName<E>& e : entries_) {
      if (e.name == name) return e.value;
    }
    return std::nullopt;
  }

  // Find, with the table's error for a name it does not know.
  absl::StatusOr<E> Parse(std::string_view name) const {
    if (std::optional<E> value = Find(name)) return *value;
    const std::string allowed = Allowed();
    return absl::InvalidArgumentError(absl::StrReplaceAll(
        absl::string_view(unknown_.data(), unknown_.size()),
        {{"{name}", absl::string_view(name.data(), name.size())}, {"{allowed}", allowed}}));
  }

  // The listed names in table order, joined by `sep`: "bf16, fp16, fp32".
  std::string Allowed(std::string_view sep = ", ") const {
    std::string out;
    for (const EnumName<E>& e : entries_) {
      if (!e.listed) continue;
      if (!out.empty()) out += sep;
      out += e.name;
    }
    return out;
  }

  // The listed names in table order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const EnumName<E>& e : entries_) {
      if (e.listed) names.emplace_back(e.name);
    }
    return names;
  }

  // Every entry, aliases and unlisted names included, in table order.
  constexpr auto begin() const { return entries_.begin(); }
  constexpr auto end() const { return entries_.end(); }
  static constexpr size_t size() { return N; }

 private:
  std::array<EnumName<E>, N> entries_;
  std::string_view unknown_;
};

// A table of E from a braced list of entries, N deduced:
//   MakeEnumTable<Phase>({{Phase::kEntry, "entry"}, {Phase::kExit, "exit"}})
template <typename E, size_t N>
constexpr EnumTable<E, N> MakeEnumTable(const EnumName<E> (&entries)[N],
                                        std::string_view unknown = kEnumNotKnown) {
  return EnumTable<E, N>(std::to_array(entries), unknown);
}

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_ENUM_TABLE_H_
