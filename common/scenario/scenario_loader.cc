#include "dmalab/scenario_loader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/enum_names.h"
#include "common/core/status_macros.h"
#include "common/ring/enum_names.h"
#include "common/scenario/enum_names.h"
#include "common/scenario/fill.h"
#include "common/scenario/scenario_lifetimes.h"
#include "common/scenario/yaml_fields.h"
#include "dmalab/faults.h"

namespace dmalab {
namespace {

constexpr int64_t kMaxElems = int64_t{1} << 40;

class Loader {
 public:
  explicit Loader(std::string file) : f_(std::move(file)) {}

  absl::StatusOr<Scenario> Load(const YAML::Node& root);

 private:
  absl::StatusOr<std::vector<int64_t>> Shape(const YAML::Node& node, std::string_view path) const;
  absl::Status Tensors(const YAML::Node& node);
  absl::StatusOr<std::vector<Step>> Steps(const YAML::Node& node, std::string_view path) const;
  absl::StatusOr<Step> OneStep(const YAML::Node& node, std::string_view path) const;
  absl::Status StepFields(const YAML::Node& value, std::string_view path, Step* step) const;
  // The optional `ranks:` of a host-side step (fill, add, release).
  absl::Status Ranks(const YAML::Node& map, std::string_view path, Step* step) const;
  absl::Status TensorName(const YAML::Node& map, std::string_view path, std::string_view key,
                          std::string* name, Step* step) const;
  absl::Status TensorNameValue(const YAML::Node& node, std::string_view path, std::string_view key,
                               std::string* name, Step* step) const;
  std::string TensorNamesAllowed() const;
  absl::Status SameType(const Step& step, std::string_view key_a, std::string_view key_b) const;
  absl::Status GraphName(const YAML::Node& map, std::string_view path, Step* step) const;
  absl::Status Fill(const YAML::Node& map, std::string_view path, Step* step) const;
  absl::Status AllReduce(const YAML::Node& map, std::string_view path, Step* step) const;
  absl::Status Expectations(const YAML::Node& node);

  YamlFields f_;
  Scenario s_;
};

absl::StatusOr<Scenario> Loader::Load(const YAML::Node& root) {
  s_.file = f_.file();
  DMALAB_RETURN_IF_ERROR(f_.CheckMap(root, "",
                                     {"name", "description", "world", "dtype", "wire", "seed",
                                      "topology", "shapes", "tensors", "steps", "expect"}));
  if (auto n = f_.Optional(root, "name")) {
    DMALAB_ASSIGN_OR_RETURN(auto name, f_.String(*n, "name", "a string"));
    s_.name = name;
  }
  if (auto n = f_.Optional(root, "description")) {
    DMALAB_ASSIGN_OR_RETURN(auto text, f_.String(*n, "description", "a string"));
    s_.description = text;
  }
  DMALAB_ASSIGN_OR_RETURN(auto world_node, f_.Required(root, "", "world", "an integer in 2..16"));
  DMALAB_ASSIGN_OR_RETURN(auto world, f_.Int(world_node, "world", 2, 16));
  s_.world = static_cast<int>(world);
  if (auto n = f_.Optional(root, "dtype")) {
    DMALAB_ASSIGN_OR_RETURN(s_.dtype, f_.Named(*n, "dtype", kDTypes));
  }
  if (auto n = f_.Optional(root, "wire")) {
    DMALAB_ASSIGN_OR_RETURN(s_.wire, f_.Named(*n, "wire", kWireModes));
  }
  if (auto n = f_.Optional(root, "seed")) {
    DMALAB_ASSIGN_OR_RETURN(auto seed, f_.UInt64(*n, "seed"));
    s_.seed = seed;
  }
  if (auto n = f_.Optional(root, "topology")) {
    DMALAB_ASSIGN_OR_RETURN(auto path, f_.String(*n, "topology", "a file name"));
    s_.topology = path;
  }
  if (auto n = f_.Optional(root, "shapes")) {
    if (!n->IsMap()) return f_.Error(*n, "shapes", f_.Describe(*n), "a map from names to shapes");
    for (auto it = n->begin(); it != n->end(); ++it) {
      const std::string path = FieldPath("shapes", it->first.Scalar());
      if (s_.shapes.count(it->first.Scalar()) > 0) {
        return f_.Error(it->first, "shapes",
                        absl::StrFormat("duplicate name '%s'", it->first.Scalar()),
                        "each name once");
      }
      DMALAB_ASSIGN_OR_RETURN(auto shape, Shape(it->second, path));
      s_.shapes[it->first.Scalar()] = shape;
    }
  }
  DMALAB_ASSIGN_OR_RETURN(auto tensors,
                          f_.Required(root, "", "tensors", "a map from names to shapes"));
  DMALAB_RETURN_IF_ERROR(Tensors(tensors));
  DMALAB_ASSIGN_OR_RETURN(auto steps_node, f_.Required(root, "", "steps", "a list of steps"));
  DMALAB_ASSIGN_OR_RETURN(auto steps, Steps(steps_node, "steps"));
  s_.steps = std::move(steps);
  if (auto n = f_.Optional(root, "expect")) DMALAB_RETURN_IF_ERROR(Expectations(*n));
  DMALAB_RETURN_IF_ERROR(CheckLifetimes(s_));
  return std::move(s_);
}

// A list of positive integers, or the name of an entry of `shapes:`.
absl::StatusOr<std::vector<int64_t>> Loader::Shape(const YAML::Node& node,
                                                   std::string_view path) const {
  constexpr std::string_view kAllowed = "a list of positive integers or a name under 'shapes'";
  if (node.IsScalar()) {
    auto it = s_.shapes.find(node.Scalar());
    if (it == s_.shapes.end()) {
      return f_.Error(node, path, absl::StrFormat("'%s' (not a shape name)", node.Scalar()),
                      kAllowed);
    }
    return it->second;
  }
  if (!node.IsSequence() || node.size() == 0)
    return f_.Error(node, path, f_.Describe(node), kAllowed);
  std::vector<int64_t> shape;
  int64_t elems = 1;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string dim_path = IndexPath(path, i);
    int64_t d = 0;
    if (!node[i].IsScalar() || !absl::SimpleAtoi(node[i].Scalar(), &d)) {
      return f_.Error(node[i], dim_path, f_.Describe(node[i]), "a positive integer");
    }
    if (d <= 0) {
      return f_.Error(node[i], dim_path, absl::StrFormat("size %d", d), "a positive integer");
    }
    if (d > kMaxElems / elems) {
      return f_.Error(node[i], dim_path, absl::StrFormat("size %d", d),
                      "at most 2^40 elements per tensor");
    }
    elems *= d;
    shape.push_back(d);
  }
  return shape;
}

absl::Status Loader::Tensors(const YAML::Node& node) {
  if (!node.IsMap() || node.size() == 0) {
    return f_.Error(node, "tensors", f_.Describe(node), "a map from names to shapes");
  }
  const int64_t quantum = int64_t{8} * s_.world;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string name = it->first.Scalar();
    const std::string path = FieldPath("tensors", name);
    if (const TensorDecl* first = s_.FindTensor(name)) {
      return f_.Error(
          it->first, "tensors",
          absl::StrFormat("duplicate name '%s' (first at line %d)", name, first->loc.line),
          "each name once");
    }
    TensorDecl t{name, {}, s_.dtype, f_.Loc(it->first)};
    YAML::Node shape_node = it->second;
    if (it->second.IsMap()) {
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(it->second, path, {"shape", "dtype"}));
      DMALAB_ASSIGN_OR_RETURN(auto sn,
                              f_.Required(it->second, path, "shape",
                                          "a list of positive integers or a name under 'shapes'"));
      shape_node.reset(sn);  // rebinds; operator= would overwrite the tree
      if (auto d = f_.Optional(it->second, "dtype")) {
        DMALAB_ASSIGN_OR_RETURN(t.dtype, f_.Named(*d, FieldPath(path, "dtype"), kDTypes));
      }
    }
    DMALAB_ASSIGN_OR_RETURN(auto shape, Shape(shape_node, path));
    t.shape = shape;
    if (t.elems() % quantum != 0) {
      return f_.Error(shape_node, path,
                      absl::StrFormat("shape %s (%d elements)", ShapeString(t.shape), t.elems()),
                      absl::StrFormat("an element count divisible by world*8 = %d", quantum));
    }
    s_.tensors[name] = std::move(t);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Step>> Loader::Steps(const YAML::Node& node,
                                                std::string_view path) const {
  DMALAB_RETURN_IF_ERROR(f_.CheckList(node, path, "a list of steps"));
  std::vector<Step> steps;
  for (size_t i = 0; i < node.size(); ++i) {
    DMALAB_ASSIGN_OR_RETURN(auto step, OneStep(node[i], IndexPath(path, i)));
    steps.push_back(std::move(step));
  }
  return steps;
}

absl::StatusOr<Step> Loader::OneStep(const YAML::Node& node, std::string_view path) const {
  const std::string allowed = absl::StrCat("a map with one of the keys ", kStepKinds.Allowed());
  if (!node.IsMap() || node.size() != 1) return f_.Error(node, path, f_.Describe(node), allowed);
  const YAML::Node key = node.begin()->first;
  const YAML::Node value = node.begin()->second;
  const std::string kind = key.IsScalar() ? key.Scalar() : "";
  Step step;
  step.loc = f_.Loc(key);
  step.path = std::string(path);
  const std::optional<StepKind> known = kStepKinds.Find(kind);
  if (!known) {
    return f_.Error(key, path, absl::StrFormat("step %s", f_.Describe(key)), kStepKinds.Allowed());
  }
  step.kind = *known;
  DMALAB_RETURN_IF_ERROR(StepFields(value, FieldPath(path, kind), &step));
  return step;
}

std::string Loader::TensorNamesAllowed() const {
  std::vector<std::string> names;
  for (const auto& [n, t] : s_.tensors) names.push_back(n);
  return absl::StrCat("a tensor declared under 'tensors': ", absl::StrJoin(names, ", "));
}

absl::Status Loader::TensorName(const YAML::Node& map, std::string_view path, std::string_view key,
                                std::string* name, Step* step) const {
  DMALAB_ASSIGN_OR_RETURN(auto node, f_.Required(map, path, key, TensorNamesAllowed()));
  return TensorNameValue(node, path, key, name, step);
}

absl::Status Loader::TensorNameValue(const YAML::Node& node, std::string_view path,
                                     std::string_view key, std::string* name, Step* step) const {
  const std::string allowed = TensorNamesAllowed();
  const std::string field = FieldPath(path, key);
  DMALAB_ASSIGN_OR_RETURN(auto value, f_.String(node, field, allowed));
  if (s_.FindTensor(value) == nullptr) {
    return f_.Error(node, field, absl::StrFormat("unknown tensor '%s'", value), allowed);
  }
  *name = value;
  step->sources[std::string(key)] = FieldSource{field, f_.Loc(node)};
  return absl::OkStatus();
}

// The tensors named by fields key_a and key_b have the same shape and dtype.
absl::Status Loader::SameType(const Step& step, std::string_view key_a,
                              std::string_view key_b) const {
  const FieldSource& sa = step.sources.at(std::string(key_a));
  const FieldSource& sb = step.sources.at(std::string(key_b));
  auto name_of = [&](std::string_view key) -> const std::string& {
    if (key == "a") return step.a;
    if (key == "b") return step.b;
    if (key == "dst") return step.dst;
    if (key == "out") return step.out;
    if (key == "result") return step.result;
    return step.input;
  };
  const TensorDecl& a = *s_.FindTensor(name_of(key_a));
  const TensorDecl& b = *s_.FindTensor(name_of(key_b));
  if (a.shape == b.shape && a.dtype == b.dtype) return absl::OkStatus();
  return f_.ErrorAt(
      sb.loc, sb.path,
      absl::StrFormat("'%s' of %s %s", b.name, DTypeName(b.dtype), ShapeString(b.shape)),
      absl::StrFormat("a tensor of %s %s like '%s' (field '%s')", DTypeName(a.dtype),
                      ShapeString(a.shape), a.name, sa.path));
}

absl::Status Loader::StepFields(const YAML::Node& value, std::string_view path, Step* step) const {
  // Single-tensor steps accept a bare name: `- retain: residual`.
  const bool single = step->kind == StepKind::kRetain || step->kind == StepKind::kUnretain ||
                      step->kind == StepKind::kRelease || step->kind == StepKind::kExpectUnchanged;
  if (single && value.IsScalar())
    return TensorNameValue(value, path, "tensor", &step->tensor, step);
  if (auto label = f_.Optional(value, "label"); label && value.IsMap()) {
    DMALAB_ASSIGN_OR_RETURN(auto text, f_.String(*label, FieldPath(path, "label"), "a string"));
    step->label = text;
  }
  switch (step->kind) {
    case StepKind::kRelease:
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"tensor", "ranks", "label"}));
      DMALAB_RETURN_IF_ERROR(Ranks(value, path, step));
      return TensorName(value, path, "tensor", &step->tensor, step);
    case StepKind::kRetain:
    case StepKind::kUnretain:
    case StepKind::kExpectUnchanged:
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"tensor", "label"}));
      return TensorName(value, path, "tensor", &step->tensor, step);
    case StepKind::kFill:
      return Fill(value, path, step);
    case StepKind::kAllReduce:
      return AllReduce(value, path, step);
    case StepKind::kAdd:
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"dst", "a", "b", "ranks", "label"}));
      DMALAB_RETURN_IF_ERROR(Ranks(value, path, step));
      DMALAB_RETURN_IF_ERROR(TensorName(value, path, "dst", &step->dst, step));
      DMALAB_RETURN_IF_ERROR(TensorName(value, path, "a", &step->a, step));
      DMALAB_RETURN_IF_ERROR(TensorName(value, path, "b", &step->b, step));
      DMALAB_RETURN_IF_ERROR(SameType(*step, "dst", "a"));
      return SameType(*step, "dst", "b");
    case StepKind::kExpectEqual:
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"a", "b", "label"}));
      DMALAB_RETURN_IF_ERROR(TensorName(value, path, "a", &step->a, step));
      DMALAB_RETURN_IF_ERROR(TensorName(value, path, "b", &step->b, step));
      return SameType(*step, "a", "b");
    case StepKind::kRepeat: {
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"times", "steps", "label"}));
      DMALAB_ASSIGN_OR_RETURN(auto times_node,
                              f_.Required(value, path, "times", "an integer in 1..1000000"));
      DMALAB_ASSIGN_OR_RETURN(auto times, f_.Int(times_node, FieldPath(path, "times"), 1, 1000000));
      step->times = times;
      DMALAB_ASSIGN_OR_RETURN(auto body_node, f_.Required(value, path, "steps", "a list of steps"));
      DMALAB_ASSIGN_OR_RETURN(auto body, Steps(body_node, FieldPath(path, "steps")));
      step->body = std::move(body);
      return absl::OkStatus();
    }
    case StepKind::kCaptureGraph: {
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"name", "steps", "label"}));
      DMALAB_RETURN_IF_ERROR(GraphName(value, path, step));
      DMALAB_ASSIGN_OR_RETURN(auto body_node, f_.Required(value, path, "steps", "a list of steps"));
      const std::string body_path = FieldPath(path, "steps");
      DMALAB_ASSIGN_OR_RETURN(auto body, Steps(body_node, body_path));
      for (size_t i = 0; i < body.size(); ++i) {
        const Step& b = body[i];
        const bool capturable = b.kind == StepKind::kAllReduce || b.kind == StepKind::kAdd ||
                                b.kind == StepKind::kRelease;
        if (!capturable) {
          return f_.ErrorAt(
              b.loc, b.path, absl::StrFormat("a %s step", StepKindName(b.kind)),
              "all_reduce (a fresh result: comes from the graph's private pool), add with a live "
              "dst, and release of a tensor made in this capture (a graph replays device work: no "
              "host access)");
        }
      }
      step->body = std::move(body);
      return absl::OkStatus();
    }
    case StepKind::kLaunchGraph:
      if (value.IsScalar()) {
        DMALAB_ASSIGN_OR_RETURN(auto name, f_.String(value, path, "a graph name"));
        step->graph = name;
        step->sources["name"] = FieldSource{std::string(path), f_.Loc(value)};
        return absl::OkStatus();
      }
      DMALAB_RETURN_IF_ERROR(f_.CheckMap(value, path, {"name", "label"}));
      return GraphName(value, path, step);
  }
  return absl::OkStatus();
}

absl::Status Loader::Ranks(const YAML::Node& map, std::string_view path, Step* step) const {
  std::optional<YAML::Node> node = f_.Optional(map, "ranks");
  if (!node) return absl::OkStatus();
  const std::string field = FieldPath(path, "ranks");
  const std::string allowed =
      absl::StrFormat("a non-empty list of distinct ranks in 0..%d", s_.world - 1);
  DMALAB_RETURN_IF_ERROR(f_.CheckList(*node, field, allowed));
  if (node->size() == 0) return f_.Error(*node, field, "an empty list", allowed);
  std::vector<bool> seen(s_.world, false);
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node item = (*node)[i];
    const std::string item_path = absl::StrFormat("%s[%d]", field, i);
    DMALAB_ASSIGN_OR_RETURN(auto rank, f_.Int(item, item_path, 0, s_.world - 1));
    if (seen[rank]) {
      return f_.Error(item, item_path, absl::StrFormat("rank %d a second time", rank), allowed);
    }
    seen[rank] = true;
  }
  for (int r = 0; r < s_.world; ++r) {
    if (seen[r]) step->ranks.push_back(r);
  }
  step->sources["ranks"] = FieldSource{field, f_.Loc(*node)};
  return absl::OkStatus();
}

absl::Status Loader::GraphName(const YAML::Node& map, std::string_view path, Step* step) const {
  DMALAB_ASSIGN_OR_RETURN(auto node, f_.Required(map, path, "name", "a graph name"));
  const std::string field = FieldPath(path, "name");
  DMALAB_ASSIGN_OR_RETURN(auto name, f_.String(node, field, "a graph name"));
  step->graph = name;
  step->sources["name"] = FieldSource{field, f_.Loc(node)};
  return absl::OkStatus();
}

absl::Status Loader::Fill(const YAML::Node& map, std::string_view path, Step* step) const {
  DMALAB_RETURN_IF_ERROR(
      f_.CheckMap(map, path, {"tensor", "kind", "seed", "lo", "hi", "ranks", "label"}));
  DMALAB_RETURN_IF_ERROR(Ranks(map, path, step));
  DMALAB_RETURN_IF_ERROR(TensorName(map, path, "tensor", &step->tensor, step));
  if (auto n = f_.Optional(map, "kind")) {
    DMALAB_ASSIGN_OR_RETURN(step->fill_kind, f_.Named(*n, FieldPath(path, "kind"), kFillKinds));
  }
  if (auto n = f_.Optional(map, "seed")) {
    DMALAB_ASSIGN_OR_RETURN(auto seed, f_.UInt64(*n, FieldPath(path, "seed")));
    step->seed = seed;
  }
  const DType dtype = s_.FindTensor(step->tensor)->dtype;
  const int64_t limit = ExactIntegerLimit(dtype);
  for (std::string_view key : {"lo", "hi"}) {
    auto n = f_.Optional(map, key);
    if (!n) continue;
    double v = 0;
    if (step->fill_kind == FillKind::kInt) {
      DMALAB_ASSIGN_OR_RETURN(auto i, f_.Int(*n, FieldPath(path, key), -limit, limit));
      v = static_cast<double>(i);
    } else {
      DMALAB_ASSIGN_OR_RETURN(auto d, f_.Double(*n, FieldPath(path, key)));
      v = d;
    }
    (key == "lo" ? step->lo : step->hi) = v;
  }
  const bool ordered =
      step->fill_kind == FillKind::kInt ? step->lo <= step->hi : step->lo < step->hi;
  if (!ordered) {
    const YAML::Node at = f_.Optional(map, "hi").value_or(map);
    return f_.Error(at, FieldPath(path, "hi"),
                    absl::StrFormat("hi %g with lo %g", step->hi, step->lo),
                    step->fill_kind == FillKind::kInt ? "hi >= lo" : "hi > lo");
  }
  return absl::OkStatus();
}

absl::Status Loader::AllReduce(const YAML::Node& map, std::string_view path, Step* step) const {
  DMALAB_RETURN_IF_ERROR(f_.CheckMap(map, path, {"input", "result", "out", "in_place", "label"}));
  DMALAB_RETURN_IF_ERROR(TensorName(map, path, "input", &step->input, step));
  bool in_place = false;
  if (auto n = f_.Optional(map, "in_place")) {
    DMALAB_ASSIGN_OR_RETURN(auto b, f_.Bool(*n, FieldPath(path, "in_place")));
    in_place = b;
  }
  const bool has_out = f_.Optional(map, "out").has_value();
  const bool has_result = f_.Optional(map, "result").has_value();
  if (has_out + has_result + in_place != 1) {
    return f_.Error(
        map, path,
        absl::StrFormat("%d of result, out, in_place: true", has_out + has_result + in_place),
        "exactly one of result (default form), out (explicit form), in_place: true");
  }
  if (in_place) {
    step->form = AllReduceForm::kInPlace;
    return absl::OkStatus();
  }
  if (has_out) {
    step->form = AllReduceForm::kOut;
    DMALAB_RETURN_IF_ERROR(TensorName(map, path, "out", &step->out, step));
    return SameType(*step, "input", "out");
  }
  step->form = AllReduceForm::kDefault;
  DMALAB_RETURN_IF_ERROR(TensorName(map, path, "result", &step->result, step));
  return SameType(*step, "input", "result");
}

absl::Status Loader::Expectations(const YAML::Node& node) {
  DMALAB_RETURN_IF_ERROR(f_.CheckList(node, "expect", "a list of verdicts"));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string path = IndexPath("expect", i);
    const YAML::Node& e = node[i];
    DMALAB_RETURN_IF_ERROR(f_.CheckMap(
        e, path, {"faults", "status", "pointer_alias", "retained_mismatches", "rank_consistent"}));
    Expectation x;
    x.loc = f_.Loc(e);
    if (auto n = f_.Optional(e, "faults")) {
      DMALAB_ASSIGN_OR_RETURN(auto faults, f_.String(*n, FieldPath(path, "faults"), "fault names"));
      auto set = FaultSet::Parse(faults);
      if (!set.ok()) {
        return f_.Error(*n, FieldPath(path, "faults"), absl::StrCat("'", faults, "'"),
                        absl::StrCat("none or a comma-separated list of ", kFaults.Allowed()));
      }
      x.faults = set->ToString();
    }
    DMALAB_ASSIGN_OR_RETURN(auto status_node, f_.Required(e, path, "status", "PASS, FAIL"));
    DMALAB_ASSIGN_OR_RETURN(auto status,
                            f_.String(status_node, FieldPath(path, "status"), "PASS, FAIL"));
    if (status != "PASS" && status != "FAIL") {
      return f_.Error(status_node, FieldPath(path, "status"), absl::StrCat("'", status, "'"),
                      "PASS, FAIL");
    }
    x.pass = status == "PASS";
    if (auto n = f_.Optional(e, "pointer_alias")) {
      DMALAB_ASSIGN_OR_RETURN(auto b, f_.Bool(*n, FieldPath(path, "pointer_alias")));
      x.pointer_alias = b;
    }
    if (auto n = f_.Optional(e, "rank_consistent")) {
      DMALAB_ASSIGN_OR_RETURN(auto b, f_.Bool(*n, FieldPath(path, "rank_consistent")));
      x.rank_consistent = b;
    }
    if (auto n = f_.Optional(e, "retained_mismatches")) {
      DMALAB_ASSIGN_OR_RETURN(auto v,
                              f_.Int(*n, FieldPath(path, "retained_mismatches"), 0, kMaxElems));
      x.retained_mismatches = v;
    }
    for (const Expectation& other : s_.expect) {
      if (other.faults == x.faults) {
        return f_.Error(e, path, absl::StrFormat("a second verdict for faults '%s'", x.faults),
                        "one verdict per fault set");
      }
    }
    s_.expect.push_back(std::move(x));
  }
  return absl::OkStatus();
}

std::string BaseName(std::string_view path) {
  std::string_view name = path.substr(
      path.find_last_of('/') == std::string_view::npos ? 0 : path.find_last_of('/') + 1);
  const size_t dot = name.rfind('.');
  return std::string(dot == std::string_view::npos ? name : name.substr(0, dot));
}

}  // namespace

absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, std::string_view file_name) {
  const YamlFields f{std::string(file_name)};
  DMALAB_ASSIGN_OR_RETURN(const YAML::Node root, f.ParseOneDocument(yaml, "scenario"));
  try {
    Loader loader{std::string(file_name)};
    auto scenario = loader.Load(root);
    if (scenario.ok() && scenario->name.empty()) scenario->name = BaseName(file_name);
    return scenario;
  } catch (const YAML::Exception& e) {  // not expected once the graph is checked; never a crash
    const SourceLoc loc{std::string(file_name), e.mark.line + 1, e.mark.column + 1};
    return f.ErrorAt(loc, kDocumentPath, absl::StrFormat("a YAML node it cannot read (%s)", e.msg),
                     "a scenario as scenarios/README.md describes");
  }
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  DMALAB_ASSIGN_OR_RETURN(const std::string text, ReadYamlFile(path, "scenario"));
  return ParseScenario(text, path);
}

}  // namespace dmalab
