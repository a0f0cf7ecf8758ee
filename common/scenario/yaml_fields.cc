#include "common/scenario/yaml_fields.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/core/text_escape.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"

namespace dmalab {
namespace {

// What a number within `bound` reads as in errors.
std::string NumberAllowed(YamlFields::Bound bound) {
  switch (bound) {
    case YamlFields::Bound::kPositive:
      return "a number > 0";
    case YamlFields::Bound::kNonNegative:
      return "a number >= 0";
    case YamlFields::Bound::kRate:
      return absl::StrFormat("a rate in %g..%.0f GB/s", YamlFields::kMinRateGbps,
                             YamlFields::kMaxRateGbps);
    case YamlFields::Bound::kTime:
      return absl::StrFormat("a time in 0..%.0f us", YamlFields::kMaxTimeUs);
    case YamlFields::Bound::kFraction:
      return absl::StrFormat("a fraction in %g..1", YamlFields::kMinFraction);
  }
  return "a number";
}

bool Within(double v, YamlFields::Bound bound) {
  switch (bound) {
    case YamlFields::Bound::kPositive:
      return v > 0;
    case YamlFields::Bound::kNonNegative:
      return v >= 0;
    case YamlFields::Bound::kRate:
      return v >= YamlFields::kMinRateGbps && v <= YamlFields::kMaxRateGbps;
    case YamlFields::Bound::kTime:
      return v >= 0 && v <= YamlFields::kMaxTimeUs;
    case YamlFields::Bound::kFraction:
      return v >= YamlFields::kMinFraction && v <= 1;
  }
  return false;
}

// Checks the node graph before it is read: an alias makes a node appear again wherever it is
// used, so a small file can stand for a graph that is exponentially large (nested aliases) or
// infinite (an alias inside the node it names). Walks the graph as the loader will, counting
// every node as often as it is reached, and stops at kMaxYamlNodes, at a collection nested
// deeper than kMaxYamlDepth, or at a cycle.
class GraphCheck {
 public:
  explicit GraphCheck(const YamlFields& f) : f_(f) {}

  absl::Status Walk(const YAML::Node& node, const std::string& path) {
    // As errors name it (both sides views: a std::string result would be a dangling temporary).
    const std::string_view at =
        path.empty() ? std::string_view(kDocumentPath) : std::string_view(path);
    if (++nodes_ > kMaxYamlNodes) {
      return f_.Error(
          node, at,
          absl::StrFormat("more than %d YAML nodes once aliases are expanded", kMaxYamlNodes),
          absl::StrFormat("at most %d (every use of an alias counts its anchor's "
                          "nodes again)",
                          kMaxYamlNodes));
    }
    if (!node.IsMap() && !node.IsSequence()) return absl::OkStatus();
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth) {
      return f_.Error(node, at,
                      absl::StrFormat("lists and maps nested more than %d deep", kMaxYamlDepth),
                      absl::StrFormat("at most %d levels of nesting", kMaxYamlDepth));
    }
    for (const YAML::Node& open : open_) {
      if (open.is(node)) {
        return f_.Error(open_.back(), at,
                        "an alias to a list or map that contains the alias (a cycle)",
                        "aliases to nodes outside themselves");
      }
    }
    open_.push_back(node);
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        DMALAB_RETURN_IF_ERROR(Walk(node[i], IndexPath(path, i)));
      }
    } else {
      for (auto it = node.begin(); it != node.end(); ++it) {
        const YAML::Node key = it->first;
        const YAML::Node value = it->second;
        if (!key.IsScalar()) {
          return f_.Error(key, at, absl::StrCat("a key that is ", f_.Describe(key)),
                          "scalar keys only");
        }
        DMALAB_RETURN_IF_ERROR(Walk(value, FieldPath(path, key.Scalar())));
      }
    }
    open_.pop_back();
    return absl::OkStatus();
  }

 private:
  const YamlFields& f_;
  int64_t nodes_ = 0;
  std::vector<YAML::Node> open_;  // the collections being walked, outermost first
};
// Where a document starts and where its first node is, from the parser's events alone.
class DocumentMarks : public YAML::EventHandler {
 public:
  YAML::Mark start;  // of the document
  YAML::Mark first;  // of its first node (its root)

  void OnDocumentStart(const YAML::Mark& mark) override {
    start = mark;
    seen_node_ = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (!seen_node_) first = mark;
    seen_node_ = true;
  }
  bool seen_node_ = false;
};

// Checks that `yaml` is at most one document before any node is built. yaml-cpp 0.7 does not
// end on some invalid input (a ',' where a node should start): it reports an empty document
// there without reading the ',', again and again, and YAML::LoadAll would collect such
// documents until memory runs out (jbeder/yaml-cpp#1040; fixed upstream by #1319, after
// 0.8.0). A document that starts where the one before it started is that loop, and is reported
// as invalid YAML at that place.
absl::Status CheckOneDocument(const std::string& yaml, const YamlFields& f, std::string_view kind) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  DocumentMarks marks;
  if (!parser.HandleNextDocument(marks)) return absl::OkStatus();  // empty
  const YAML::Mark first_start = marks.start;
  if (!parser.HandleNextDocument(marks)) return absl::OkStatus();
  if (marks.start.pos == first_start.pos) {
    const size_t pos = static_cast<size_t>(std::max(marks.start.pos, 0));
    const std::string text = pos < yaml.size() ? EscapeText(yaml.substr(pos, 1)) : "the end";
    return f.ErrorAt({f.file(), marks.start.line + 1, marks.start.column + 1}, kDocumentPath,
                     absl::StrFormat("invalid YAML ('%s' where a node should start)", text),
                     "YAML syntax");
  }
  return f.ErrorAt({f.file(), marks.first.line + 1, marks.first.column + 1}, kDocumentPath,
                   "a second YAML document", absl::StrFormat("one document per %s file", kind));
}

}  // namespace

absl::StatusOr<YAML::Node> YamlFields::ParseOneDocument(std::string_view text,
                                                        std::string_view kind) const {
  const SourceLoc start{file_, 1, 1};
  if (text.size() > kMaxYamlFileBytes) {
    return ErrorAt(start, kDocumentPath, absl::StrFormat("%d bytes", text.size()),
                   absl::StrFormat("a %s of at most %d bytes", kind, kMaxYamlFileBytes));
  }
  const std::string yaml(text);
  YAML::Node root;
  try {
    DMALAB_RETURN_IF_ERROR(CheckOneDocument(yaml, *this, kind));
    root = YAML::Load(yaml);
  } catch (const YAML::DeepRecursion& e) {
    const SourceLoc loc{file_, e.mark.line + 1, e.mark.column + 1};
    return ErrorAt(loc, kDocumentPath,
                   absl::StrFormat("lists and maps nested more than %d deep", kMaxYamlDepth),
                   absl::StrFormat("at most %d levels of nesting", kMaxYamlDepth));
  } catch (const YAML::ParserException& e) {
    const SourceLoc loc{file_, e.mark.line + 1, e.mark.column + 1};
    return ErrorAt(loc, kDocumentPath, absl::StrFormat("invalid YAML (%s)", e.msg), "YAML syntax");
  }
  try {
    DMALAB_RETURN_IF_ERROR(GraphCheck(*this).Walk(root, ""));
  } catch (const YAML::Exception& e) {  // not expected; never a crash
    const SourceLoc loc{file_, e.mark.line + 1, e.mark.column + 1};
    return ErrorAt(loc, kDocumentPath, absl::StrFormat("a YAML node it cannot read (%s)", e.msg),
                   "YAML syntax");
  }
  return root;
}

absl::StatusOr<std::string> ReadYamlFile(const std::string& path, std::string_view kind) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: is a directory, allowed a %s file", path, kind));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot read the %s file", path, kind));
  }
  // Reads one byte more than the cap, so an endless input (/dev/zero, a pipe) stops there.
  std::string text(kMaxYamlFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot read the %s file", path, kind));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxYamlFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: found more than %d bytes, allowed a %s file of at most %d bytes", path,
                        kMaxYamlFileBytes, kind, kMaxYamlFileBytes));
  }
  return text;
}

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
      !Within(v, bound)) {
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
                                                  std::string_view key, Bound bound) const {
  const std::optional<YAML::Node> node = Optional(map, key);
  if (!node.has_value()) return 0.0;
  double v = 0;
  if (node->IsScalar() && absl::SimpleAtod(node->Scalar(), &v) && v == 0) return 0.0;
  absl::StatusOr<double> number = Number(*node, FieldPath(path, key), bound);
  if (!number.ok() && bound != Bound::kNonNegative) {
    return Error(*node, FieldPath(path, key), Describe(*node),
                 absl::StrCat("0 (none) or ", NumberAllowed(bound)));
  }
  return number;
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
  const std::string_view map_path = path.empty() ? kDocumentPath : path;
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
