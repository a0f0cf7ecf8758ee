#include "common/scenario/yaml_fields.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// What a number within `bound` reads as in errors.
std::string_view NumberAllowed(YamlFields::Bound bound) {
  return bound == YamlFields::Bound::kPositive ? "a number > 0" : "a number >= 0";
}

}  // namespace

std::string FieldPath(std::string_view base, std::string_view key) {
  if (base.empty()) return std::string(key);
  return absl::StrFormat("%s.%s", base, key);
}

std::string IndexPath(std::string_view base, size_t index) {
  return absl::StrFormat("%s[%d]", base, index);
}

SourceLoc YamlFields::Loc(const YAML::Node& node) const {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return SourceLoc{file_, 1, 1};
  return SourceLoc{file_, mark.line + 1, mark.column + 1};
}

absl::Status YamlFields::ErrorAt(const SourceLoc& loc, std::string_view path,
                                 std::string_view found, std::string_view allowed) const {
  return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': found %s, allowed %s",
                                                    loc.ToString(), path, found, allowed));
}

absl::Status YamlFields::Error(const YAML::Node& node, std::string_view path,
                               std::string_view found, std::string_view allowed) const {
  return ErrorAt(Loc(node), path, found, allowed);
}

absl::Status YamlFields::Missing(const YAML::Node& map, std::string_view path,
                                 std::string_view allowed) const {
  return Error(map, path, "nothing (the field is missing)", allowed);
}

std::string YamlFields::Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return absl::StrFormat("'%s'", node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing (null)";
  }
  return "?";
}

absl::StatusOr<std::string> YamlFields::String(const YAML::Node& node, std::string_view path,
                                               std::string_view allowed) const {
  if (!node.IsScalar()) return Error(node, path, Describe(node), allowed);
  return node.Scalar();
}

absl::StatusOr<std::string> YamlFields::NonEmptyString(const YAML::Node& node,
                                                       std::string_view path,
                                                       std::string_view allowed) const {
  DMALAB_ASSIGN_OR_RETURN(std::string s, String(node, path, allowed));
  if (s.empty()) return Error(node, path, Describe(node), allowed);
  return s;
}

absl::StatusOr<int64_t> YamlFields::Int(const YAML::Node& node, std::string_view path, int64_t lo,
                                        int64_t hi) const {
  const std::string allowed = absl::StrFormat("an integer in %d..%d", lo, hi);
  int64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return Error(node, path, Describe(node), allowed);
  }
  if (v < lo || v > hi) return Error(node, path, absl::StrCat(v), allowed);
  return v;
}

absl::StatusOr<uint64_t> YamlFields::UInt64(const YAML::Node& node, std::string_view path) const {
  uint64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return Error(node, path, Describe(node), "an integer in 0..18446744073709551615");
  }
  return v;
}

absl::StatusOr<double> YamlFields::Double(const YAML::Node& node, std::string_view path) const {
  double v = 0;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
    return Error(node, path, Describe(node), "a finite number");
  }
  return v;
}

absl::StatusOr<bool> YamlFields::Bool(const YAML::Node& node, std::string_view path) const {
  if (node.IsScalar() && node.Scalar() == "true") return true;
  if (node.IsScalar() && node.Scalar() == "false") return false;
  return Error(node, path, Describe(node), "true or false");
}

absl::StatusOr<double> YamlFields::Number(const YAML::Node& node, std::string_view path,
                                          Bound bound) const {
  double v = 0;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v) ||
      (bound == Bound::kPositive ? v <= 0 : v < 0)) {
    return Error(node, path, Describe(node), NumberAllowed(bound));
  }
  return v;
}

absl::StatusOr<double> YamlFields::RequiredNumber(const YAML::Node& map, std::string_view path,
                                                  std::string_view key, Bound bound) const {
  DMALAB_ASSIGN_OR_RETURN(const YAML::Node node, Required(map, path, key, NumberAllowed(bound)));
  return Number(node, FieldPath(path, key), bound);
}

absl::StatusOr<double> YamlFields::OptionalNumber(const YAML::Node& map, std::string_view path,
                                                  std::string_view key) const {
  const std::optional<YAML::Node> node = Optional(map, key);
  if (!node.has_value()) return 0.0;
  return Number(*node, FieldPath(path, key), Bound::kNonNegative);
}

absl::Status YamlFields::CheckList(const YAML::Node& node, std::string_view path,
                                   std::string_view allowed) const {
  if (!node.IsSequence()) return Error(node, path, Describe(node), allowed);
  return absl::OkStatus();
}

absl::Status YamlFields::CheckMap(const YAML::Node& node, std::string_view path,
                                  const std::vector<std::string_view>& allowed) const {
  std::string names;
  for (std::string_view a : allowed)
    absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(a));
  const std::string allowed_text = absl::StrFormat("a map with fields %s", names);
  // Errors about the map itself name the root, whose path is empty, "(document)".
  const std::string_view map_path = path.empty() ? "(document)" : path;
  if (!node.IsMap()) return Error(node, map_path, Describe(node), allowed_text);
  std::map<std::string, SourceLoc> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // A copy: it-> returns a proxy that dies at the end of the statement (fuzzer-found).
    const YAML::Node key = it->first;
    if (!key.IsScalar())
      return Error(key, map_path, absl::StrCat("a key that is ", Describe(key)), allowed_text);
    const std::string& name = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return Error(key, FieldPath(path, name), "an unknown field",
                   absl::StrFormat("fields %s", names));
    }
    auto [first, inserted] = seen.emplace(name, Loc(key));
    if (!inserted) {
      return Error(key, FieldPath(path, name),
                   absl::StrFormat("it a second time (first at line %d)", first->second.line),
                   "each field once");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> YamlFields::Required(const YAML::Node& map, std::string_view path,
                                                std::string_view key,
                                                std::string_view allowed) const {
  std::optional<YAML::Node> v = Optional(map, key);
  if (!v.has_value()) return Missing(map, FieldPath(path, key), allowed);
  return *v;
}

std::optional<YAML::Node> YamlFields::Optional(const YAML::Node& map, std::string_view key) {
  // Iterating a sequence as a map yields invalid nodes, which throw (fuzzer-found).
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  }
  return std::nullopt;
}

}  // namespace dmalab
