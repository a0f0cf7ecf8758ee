// Typed, located reading of the fields of a YAML document, shared by the project's file loaders
// so that they read and report alike.
//
// Every error is an InvalidArgument status whose message reads
//   FILE:LINE:COLUMN: field 'PATH': found WHAT, allowed WHAT
// with 1-based line and column of the offending node (of the enclosing map when a field is
// missing), PATH naming the field from the document root ("steps[3].all_reduce.input").
#ifndef DMALAB_COMMON_SCENARIO_YAML_FIELDS_H_
#define DMALAB_COMMON_SCENARIO_YAML_FIELDS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/core/enum_table.h"
#include "dmalab/scenario.h"
#include "dmalab/yaml_limits.h"
// yaml-cpp 0.7's inline accessors trip GCC 12's -Wdangling-pointer (a false positive in the
// library's header); silence it for the header only.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#include "yaml-cpp/yaml.h"
#pragma GCC diagnostic pop
#else
#include "yaml-cpp/yaml.h"
#endif

namespace dmalab {

// The path errors name for the document as a whole (its syntax, its size, a second document).
inline constexpr char kDocumentPath[] = "(document)";

class YamlFields {
 public:
  // `file` names the document in errors.
  explicit YamlFields(std::string file) : file_(std::move(file)) {}

  // The document's name, as given.
  const std::string& file() const { return file_; }

  // Parses `text` as one YAML document within the bounds above, before any field is read. Each
  // of these is a located error at field '(document)' or at the node's path: more than
  // kMaxYamlFileBytes, invalid YAML, a second document, nesting deeper than kMaxYamlDepth, more
  // than kMaxYamlNodes nodes with aliases expanded, an alias cycle, a key that is not a scalar.
  // `kind` ("scenario") names the input in the messages.
  absl::StatusOr<YAML::Node> ParseOneDocument(std::string_view text, std::string_view kind) const;
  // 1-based location of a node.
  SourceLoc Loc(const YAML::Node& node) const;
  // The error described in the file comment.
  absl::Status Error(const YAML::Node& node, std::string_view path, std::string_view found,
                     std::string_view allowed) const;
  // The same at `loc`: one saved earlier, or one outside the nodes (a YAML syntax error).
  absl::Status ErrorAt(const SourceLoc& loc, std::string_view path, std::string_view found,
                       std::string_view allowed) const;
  // The error for field `path` missing from `map`, located at the map.
  absl::Status Missing(const YAML::Node& map, std::string_view path,
                       std::string_view allowed) const;

  // How a node reads in an error: 'text' for a scalar, "a list", "a map", "nothing (null)".
  static std::string Describe(const YAML::Node& node);

  // Scalars. `allowed` describes the legal values for the error message.
  absl::StatusOr<std::string> String(const YAML::Node& node, std::string_view path,
                                     std::string_view allowed) const;
  // A scalar other than '' (a name, say).
  absl::StatusOr<std::string> NonEmptyString(const YAML::Node& node, std::string_view path,
                                             std::string_view allowed) const;
  absl::StatusOr<int64_t> Int(const YAML::Node& node, std::string_view path, int64_t lo,
                              int64_t hi) const;
  absl::StatusOr<uint64_t> UInt64(const YAML::Node& node, std::string_view path) const;
  absl::StatusOr<double> Double(const YAML::Node& node, std::string_view path) const;
  absl::StatusOr<bool> Bool(const YAML::Node& node, std::string_view path) const;
  // A scalar that is one of `table`'s names (common/core/enum_table.h); allowed: its list.
  template <typename E, size_t N>
  absl::StatusOr<E> Named(const YAML::Node& node, std::string_view path,
                          const EnumTable<E, N>& table) const {
    const std::string allowed = table.Allowed();
    absl::StatusOr<std::string> name = String(node, path, allowed);
    if (!name.ok()) return name.status();
    if (std::optional<E> value = table.Find(*name)) return *value;
    return Error(node, path, absl::StrCat("'", *name, "'"), allowed);
  }

  // The values a number field takes. kPositive ("a number > 0" in errors) and kNonNegative
  // ("a number >= 0") bound one side. The physical kinds bound both, so that what a model
  // computes from them stays finite and its loops end (a rate of 5e-324 GB/s made the timing
  // model loop forever, 1e308 gave infinite bandwidths): kRate, GB/s in [kMinRateGbps,
  // kMaxRateGbps]; kTime, us in [0, kMaxTimeUs]; kFraction, in [kMinFraction, 1].
  enum class Bound { kPositive, kNonNegative, kRate, kTime, kFraction };
  static constexpr double kMinRateGbps = 1e-3;  // 1 MB/s
  static constexpr double kMaxRateGbps = 1e6;   // 1 PB/s
  static constexpr double kMaxTimeUs = 1e6;     // 1 s
  static constexpr double kMinFraction = 1e-3;
  // A finite number within `bound`.
  absl::StatusOr<double> Number(const YAML::Node& node, std::string_view path, Bound bound) const;
  // Required field `key` of a checked map, read by Number.
  absl::StatusOr<double> RequiredNumber(const YAML::Node& map, std::string_view path,
                                        std::string_view key, Bound bound) const;
  // Optional field `key` of a checked map, for fields whose 0 means "none" or "unlimited": 0 when
  // absent or 0, else a number within `bound`.
  absl::StatusOr<double> OptionalNumber(const YAML::Node& map, std::string_view path,
                                        std::string_view key,
                                        Bound bound = Bound::kNonNegative) const;

  // Checks that `node` is a list; its items are the caller's to read.
  absl::Status CheckList(const YAML::Node& node, std::string_view path,
                         std::string_view allowed) const;

  // Checks that `node` is a map whose keys are all in `allowed` and appear once each; `path` is
  // the map's, "" for the document root.
  absl::Status CheckMap(const YAML::Node& node, std::string_view path,
                        const std::vector<std::string_view>& allowed) const;
  // The value of a required field of a checked map.
  absl::StatusOr<YAML::Node> Required(const YAML::Node& map, std::string_view path,
                                      std::string_view key, std::string_view allowed) const;
  // The value of an optional field, or nullopt when absent.
  static std::optional<YAML::Node> Optional(const YAML::Node& map, std::string_view key);

 private:
  std::string file_;
};

// The text of YAML file `path` (a `kind` file, "scenario", in messages): NotFound when it cannot
// be read; InvalidArgument for a directory, or for more than kMaxYamlFileBytes (read no further,
// so /dev/zero ends).
absl::StatusOr<std::string> ReadYamlFile(const std::string& path, std::string_view kind);

// "a.b" (or "b" when `base` is empty).
std::string FieldPath(std::string_view base, std::string_view key);
// "a[3]": item `index` of list `base`.
std::string IndexPath(std::string_view base, size_t index);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_YAML_FIELDS_H_
