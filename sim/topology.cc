#include "sim/topology.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/core/status_macros.h"
#include "common/scenario/yaml_fields.h"

namespace dmalab {

double LinkClass::Efficiency(double bytes) const {
  if (efficiency.empty()) return 1.0;
  if (bytes <= efficiency.front().first) return efficiency.front().second;
  if (bytes >= efficiency.back().first) return efficiency.back().second;
  for (size_t i = 1; i < efficiency.size(); ++i) {
    const auto& [b1, f1] = efficiency[i];
    if (bytes > b1) continue;
    const auto& [b0, f0] = efficiency[i - 1];
    const double t = (std::log2(bytes) - std::log2(b0)) / (std::log2(b1) - std::log2(b0));
    return f0 + t * (f1 - f0);
  }
  return efficiency.back().second;
}

const LinkClass& Topology::LinkBetween(int src, int dst) const {
  if (src == dst) return local;
  for (const PairLink& p : pairs) {
    if ((p.gpu_a == src && p.gpu_b == dst) || (p.gpu_a == dst && p.gpu_b == src)) return p.link;
  }
  return peer;
}

namespace {

// GPU `gpu`'s uplinks from the nearest to the root.
std::vector<int> Chain(const Topology& t, int gpu) {
  std::vector<int> chain;
  if (t.gpu_uplinks.empty()) return chain;
  for (int u = t.gpu_uplinks[gpu]; u >= 0; u = t.uplinks[u].parent) chain.push_back(u);
  return chain;
}

}  // namespace

std::vector<UplinkUse> RouteBetween(const Topology& t, int src, int dst) {
  std::vector<UplinkUse> uses;
  if (src == dst) return uses;
  const std::vector<int> up = Chain(t, src), down = Chain(t, dst);
  // The lowest node both GPUs are under: the copy turns around in its fabric.
  auto turn = std::find_first_of(up.begin(), up.end(), down.begin(), down.end());
  for (auto it = up.begin(); it != turn; ++it) uses.push_back({*it, UplinkUse::Kind::kUp});
  if (turn != up.end()) {
    if (t.uplinks[*turn].fabric_gbps > 0) uses.push_back({*turn, UplinkUse::Kind::kFabric});
    for (auto it = down.begin(); *it != *turn; ++it) {
      uses.push_back({*it, UplinkUse::Kind::kDown});
    }
  } else {
    for (int u : down) uses.push_back({u, UplinkUse::Kind::kDown});
  }
  return uses;
}

namespace {

constexpr int kMaxGpus = 64;
constexpr int kMaxRanks = 256;
// kRate (GB/s) and kTime (us) bound every rate and cost to a physically meaningful range, so the
// timing model's times stay finite and its loops end; kPositive for sizes.
using enum YamlFields::Bound;

absl::StatusOr<LinkClass> ParseLinkClass(const YamlFields& f, const YAML::Node& node,
                                         std::string_view path,
                                         std::vector<std::string_view> fields) {
  fields.insert(fields.end(), {"gbps", "latency_us", "efficiency"});
  DMALAB_RETURN_IF_ERROR(f.CheckMap(node, path, fields));
  LinkClass link;
  DMALAB_ASSIGN_OR_RETURN(link.gbps, f.RequiredNumber(node, path, "gbps", kRate));
  DMALAB_ASSIGN_OR_RETURN(link.latency_us, f.RequiredNumber(node, path, "latency_us", kTime));
  std::optional<YAML::Node> eff = YamlFields::Optional(node, "efficiency");
  if (!eff) return link;
  const std::string eff_path = FieldPath(path, "efficiency");
  constexpr std::string_view kPoints = "a list of [bytes, fraction] with bytes increasing";
  DMALAB_RETURN_IF_ERROR(f.CheckList(*eff, eff_path, kPoints));
  for (size_t i = 0; i < eff->size(); ++i) {
    const YAML::Node point = (*eff)[i];
    const std::string at = IndexPath(eff_path, i);
    if (!point.IsSequence() || point.size() != 2) {
      return f.Error(point, at, YamlFields::Describe(point), "a pair [bytes, fraction]");
    }
    const std::string bytes_at = IndexPath(at, 0), frac_at = IndexPath(at, 1);
    DMALAB_ASSIGN_OR_RETURN(const double bytes, f.Number(point[0], bytes_at, kPositive));
    DMALAB_ASSIGN_OR_RETURN(const double frac, f.Number(point[1], frac_at, kFraction));
    if (!link.efficiency.empty() && bytes <= link.efficiency.back().first) {
      return f.Error(point[0], bytes_at, YamlFields::Describe(point[0]), kPoints);
    }
    link.efficiency.emplace_back(bytes, frac);
  }
  return link;
}

// uplinks: a list of {name, parent, gbps, fabric_gbps}; gpu_uplinks: a name per GPU.
absl::Status ParseUplinks(const YamlFields& f, const YAML::Node& doc, Topology& t) {
  std::optional<YAML::Node> list = YamlFields::Optional(doc, "uplinks");
  std::optional<YAML::Node> attach = YamlFields::Optional(doc, "gpu_uplinks");
  if (!list && !attach) return absl::OkStatus();
  if (!list) return f.Missing(doc, "uplinks", "a list of uplinks");
  DMALAB_RETURN_IF_ERROR(f.CheckList(*list, "uplinks", "a list of uplinks"));
  std::vector<std::string> parents;
  for (size_t i = 0; i < list->size(); ++i) {
    const YAML::Node u = (*list)[i];
    const std::string path = IndexPath("uplinks", i), name_path = FieldPath(path, "name");
    DMALAB_RETURN_IF_ERROR(f.CheckMap(u, path, {"name", "parent", "gbps", "fabric_gbps"}));
    Uplink up;
    DMALAB_ASSIGN_OR_RETURN(YAML::Node name, f.Required(u, path, "name", "a non-empty name"));
    DMALAB_ASSIGN_OR_RETURN(up.name, f.NonEmptyString(name, name_path, "a non-empty name"));
    for (const Uplink& other : t.uplinks) {
      if (other.name == up.name) {
        return f.Error(name, name_path, YamlFields::Describe(name), "a new name");
      }
    }
    DMALAB_ASSIGN_OR_RETURN(up.fabric_gbps, f.OptionalNumber(u, path, "fabric_gbps", kRate));
    std::optional<YAML::Node> parent = YamlFields::Optional(u, "parent");
    parents.push_back(parent ? parent->Scalar() : "");
    if (parent) {
      DMALAB_ASSIGN_OR_RETURN(up.gbps, f.RequiredNumber(u, path, "gbps", kRate));
    } else if (std::optional<YAML::Node> gbps = YamlFields::Optional(u, "gbps")) {
      return f.Error(*gbps, FieldPath(path, "gbps"), "a link up",
                     "no gbps on a root (it has no parent); use fabric_gbps");
    }
    t.uplinks.push_back(up);
  }
  std::string names;
  for (const Uplink& u : t.uplinks)
    names += absl::StrFormat("%s%s", names.empty() ? "" : ", ", u.name);
  auto find = [&](const YAML::Node& n, const std::string& path) -> absl::StatusOr<int> {
    for (size_t j = 0; j < t.uplinks.size(); ++j) {
      if (n.IsScalar() && t.uplinks[j].name == n.Scalar()) return static_cast<int>(j);
    }
    return f.Error(n, path, YamlFields::Describe(n), absl::StrFormat("one of %s", names));
  };
  for (size_t i = 0; i < list->size(); ++i) {
    if (parents[i].empty()) continue;
    const std::string path = FieldPath(IndexPath("uplinks", i), "parent");
    const YAML::Node parent = (*list)[i]["parent"];
    DMALAB_ASSIGN_OR_RETURN(t.uplinks[i].parent, find(parent, path));
  }
  // Walking up from any node must reach a root within as many steps as there are uplinks.
  for (size_t i = 0; i < t.uplinks.size(); ++i) {
    int steps = 0;
    for (int u = static_cast<int>(i); u >= 0; u = t.uplinks[u].parent) {
      if (++steps > static_cast<int>(t.uplinks.size())) {
        const YAML::Node parent = (*list)[i]["parent"];
        return f.Error(parent, FieldPath(IndexPath("uplinks", i), "parent"),
                       YamlFields::Describe(parent), "a parent that is not a descendant");
      }
    }
  }
  const std::string allowed = absl::StrFormat("a list of %d uplink names", t.gpus);
  if (!attach) return f.Missing(doc, "gpu_uplinks", allowed);
  if (!attach->IsSequence() || static_cast<int>(attach->size()) != t.gpus) {
    const std::string found = attach->IsSequence() ? absl::StrFormat("a list of %d", attach->size())
                                                   : YamlFields::Describe(*attach);
    return f.Error(*attach, "gpu_uplinks", found, allowed);
  }
  for (int g = 0; g < t.gpus; ++g) {
    DMALAB_ASSIGN_OR_RETURN(const int u, find((*attach)[g], IndexPath("gpu_uplinks", g)));
    t.gpu_uplinks.push_back(u);
  }
  return absl::OkStatus();
}

absl::Status ParseRanks(const YamlFields& f, const YAML::Node& doc, Topology& t) {
  std::optional<YAML::Node> per = YamlFields::Optional(doc, "ranks_per_gpu");
  std::optional<YAML::Node> map = YamlFields::Optional(doc, "rank_gpus");
  if (per && map) {
    return f.Error(*map, "rank_gpus", "it beside ranks_per_gpu", "one of the two");
  }
  if (!map) {
    int n = 1;
    if (per) {
      DMALAB_ASSIGN_OR_RETURN(n, f.Int(*per, "ranks_per_gpu", 1, kMaxRanks / t.gpus));
    }
    for (int g = 0; g < t.gpus; ++g) t.rank_gpus.insert(t.rank_gpus.end(), n, g);
    return absl::OkStatus();
  }
  DMALAB_RETURN_IF_ERROR(f.CheckList(*map, "rank_gpus", "a list with one GPU per rank"));
  if (map->size() == 0 || map->size() > kMaxRanks) {
    return f.Error(*map, "rank_gpus", absl::StrFormat("a list of %d", map->size()),
                   absl::StrFormat("1..%d ranks", kMaxRanks));
  }
  for (size_t r = 0; r < map->size(); ++r) {
    DMALAB_ASSIGN_OR_RETURN(const int g,
                            f.Int((*map)[r], IndexPath("rank_gpus", r), 0, t.gpus - 1));
    t.rank_gpus.push_back(g);
  }
  return absl::OkStatus();
}

absl::Status ParseLinks(const YamlFields& f, const YAML::Node& doc, Topology& t) {
  DMALAB_ASSIGN_OR_RETURN(YAML::Node links, f.Required(doc, "", "links", "a map"));
  DMALAB_RETURN_IF_ERROR(f.CheckMap(links, "links", {"local", "peer", "pairs"}));
  constexpr std::string_view kLink = "a map with gbps, latency_us";
  DMALAB_ASSIGN_OR_RETURN(YAML::Node local, f.Required(links, "links", "local", kLink));
  DMALAB_ASSIGN_OR_RETURN(t.local, ParseLinkClass(f, local, "links.local", {}));
  std::optional<YAML::Node> peer = YamlFields::Optional(links, "peer");
  if (!peer && t.gpus > 1) return f.Missing(links, "links.peer", kLink);
  if (peer) {
    DMALAB_ASSIGN_OR_RETURN(t.peer, ParseLinkClass(f, *peer, "links.peer", {}));
  }
  std::optional<YAML::Node> pairs = YamlFields::Optional(links, "pairs");
  if (!pairs) return absl::OkStatus();
  DMALAB_RETURN_IF_ERROR(f.CheckList(*pairs, "links.pairs", "a list of pair links"));
  for (size_t i = 0; i < pairs->size(); ++i) {
    const YAML::Node p = (*pairs)[i];
    const std::string path = IndexPath("links.pairs", i);
    PairLink pl;
    DMALAB_ASSIGN_OR_RETURN(pl.link, ParseLinkClass(f, p, path, {"gpus"}));
    const std::string gpus_path = FieldPath(path, "gpus");
    DMALAB_ASSIGN_OR_RETURN(YAML::Node gpus, f.Required(p, path, "gpus", "[gpu, gpu]"));
    if (!gpus.IsSequence() || gpus.size() != 2) {
      return f.Error(gpus, gpus_path, YamlFields::Describe(gpus), "two different GPUs [a, b]");
    }
    DMALAB_ASSIGN_OR_RETURN(pl.gpu_a, f.Int(gpus[0], IndexPath(gpus_path, 0), 0, t.gpus - 1));
    DMALAB_ASSIGN_OR_RETURN(pl.gpu_b, f.Int(gpus[1], IndexPath(gpus_path, 1), 0, t.gpus - 1));
    if (pl.gpu_a == pl.gpu_b) {
      return f.Error(gpus, gpus_path, "the same GPU twice", "two different GPUs [a, b]");
    }
    t.pairs.push_back(pl);
  }
  return absl::OkStatus();
}

absl::Status ParseCosts(const YamlFields& f, const YAML::Node& doc, Topology& t) {
  DMALAB_ASSIGN_OR_RETURN(YAML::Node kernel, f.Required(doc, "", "kernel", "a map"));
  DMALAB_RETURN_IF_ERROR(
      f.CheckMap(kernel, "kernel",
                 {"launch_us", "overhead_us", "reduce_gbps", "codec_gbps", "codec_gpu_gbps",
                  "codec_encode_gbps", "codec_decode_gbps", "codec_dequantizing_add_gbps"}));
  DMALAB_ASSIGN_OR_RETURN(t.kernel_launch_us,
                          f.RequiredNumber(kernel, "kernel", "launch_us", kTime));
  DMALAB_ASSIGN_OR_RETURN(t.kernel_overhead_us,
                          f.RequiredNumber(kernel, "kernel", "overhead_us", kTime));
  DMALAB_ASSIGN_OR_RETURN(t.reduce_gbps, f.RequiredNumber(kernel, "kernel", "reduce_gbps", kRate));
  DMALAB_ASSIGN_OR_RETURN(t.codec_gbps, f.OptionalNumber(kernel, "kernel", "codec_gbps", kRate));
  for (auto [key, field] : {std::pair{"codec_gpu_gbps", &t.codec_gpu_gbps},
                            {"codec_encode_gbps", &t.codec_encode_gbps},
                            {"codec_decode_gbps", &t.codec_decode_gbps},
                            {"codec_dequantizing_add_gbps", &t.codec_dequantizing_add_gbps}}) {
    DMALAB_ASSIGN_OR_RETURN(*field, f.OptionalNumber(kernel, "kernel", key, kRate));
    if (*field > 0 && t.codec_gbps == 0) {
      // Without a codec rate coded kernels run as plain ones: this rate would mean nothing.
      return f.Error(kernel[key], absl::StrCat("kernel.", key), YamlFields::Describe(kernel[key]),
                     "it only with kernel.codec_gbps (one coded kernel's rate), which is missing");
    }
  }
  DMALAB_ASSIGN_OR_RETURN(YAML::Node flag, f.Required(doc, "", "flag", "a map"));
  DMALAB_RETURN_IF_ERROR(f.CheckMap(flag, "flag", {"latency_us"}));
  DMALAB_ASSIGN_OR_RETURN(t.flag_latency_us, f.RequiredNumber(flag, "flag", "latency_us", kTime));
  DMALAB_ASSIGN_OR_RETURN(YAML::Node host, f.Required(doc, "", "host", "a map"));
  DMALAB_RETURN_IF_ERROR(f.CheckMap(host, "host", {"copy_us", "event_us"}));
  DMALAB_ASSIGN_OR_RETURN(t.copy_launch_us, f.RequiredNumber(host, "host", "copy_us", kTime));
  DMALAB_ASSIGN_OR_RETURN(t.event_us, f.RequiredNumber(host, "host", "event_us", kTime));
  return absl::OkStatus();
}

absl::StatusOr<Topology> ParseDocument(const YamlFields& f, const YAML::Node& doc) {
  DMALAB_RETURN_IF_ERROR(
      f.CheckMap(doc, "",
                 {"name", "gpus", "ranks_per_gpu", "rank_gpus", "copy_engines", "memory_gbps",
                  "port_gbps", "links", "uplinks", "gpu_uplinks", "kernel", "flag", "host"}));
  Topology t;
  DMALAB_ASSIGN_OR_RETURN(YAML::Node name, f.Required(doc, "", "name", "a non-empty name"));
  DMALAB_ASSIGN_OR_RETURN(t.name, f.NonEmptyString(name, "name", "a non-empty name"));
  const std::string gpus_allowed = absl::StrFormat("an integer in 1..%d", kMaxGpus);
  DMALAB_ASSIGN_OR_RETURN(YAML::Node gpus, f.Required(doc, "", "gpus", gpus_allowed));
  DMALAB_ASSIGN_OR_RETURN(t.gpus, f.Int(gpus, "gpus", 1, kMaxGpus));
  DMALAB_RETURN_IF_ERROR(ParseRanks(f, doc, t));
  DMALAB_ASSIGN_OR_RETURN(YAML::Node ce,
                          f.Required(doc, "", "copy_engines", "an integer in 1..64"));
  DMALAB_ASSIGN_OR_RETURN(t.copy_engines, f.Int(ce, "copy_engines", 1, 64));
  DMALAB_ASSIGN_OR_RETURN(t.memory_gbps, f.RequiredNumber(doc, "", "memory_gbps", kRate));
  DMALAB_ASSIGN_OR_RETURN(t.port_gbps, f.OptionalNumber(doc, "", "port_gbps", kRate));
  DMALAB_RETURN_IF_ERROR(ParseLinks(f, doc, t));
  DMALAB_RETURN_IF_ERROR(ParseUplinks(f, doc, t));
  DMALAB_RETURN_IF_ERROR(ParseCosts(f, doc, t));
  return t;
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(std::string_view text, std::string_view file) {
  const YamlFields f{std::string(file)};
  DMALAB_ASSIGN_OR_RETURN(const YAML::Node doc, f.ParseOneDocument(text, "topology"));
  try {
    return ParseDocument(f, doc);
  } catch (const YAML::Exception& e) {  // not expected once the graph is checked; never a crash
    return f.ErrorAt({f.file(), e.mark.line + 1, e.mark.column + 1}, kDocumentPath,
                     absl::StrFormat("a YAML node it cannot read (%s)", e.msg),
                     "a topology as scenarios/topologies/README.md describes");
  }
}

absl::StatusOr<Topology> LoadTopologyFile(const std::string& path) {
  DMALAB_ASSIGN_OR_RETURN(const std::string text, ReadYamlFile(path, "topology"));
  return ParseTopology(text, path);
}

namespace {

// The shortest text that reads back as exactly `v`.
std::string Exact(double v) {
  char text[32];
  const std::to_chars_result r = std::to_chars(text, text + sizeof(text), v);
  return std::string(text, r.ptr);
}

// A name as a YAML scalar: plain when it is a simple word, else double-quoted.
std::string Scalar(std::string_view name) {
  const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
  if (plain) return std::string(name);
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// Writes the document line by line, each note's lines aligned in one comment column.
class YamlOut {
 public:
  explicit YamlOut(const TopologyNotes& notes) : notes_(notes) {}

  // `indent` spaces, then `text`; the note of `path` beside it.
  void Line(int indent, std::string_view text, std::string_view path = "") {
    std::string line = std::string(indent, ' ') + std::string(text);
    auto note = path.empty() ? notes_.end() : notes_.find(path);
    if (note == notes_.end()) {
      out_ += line + "\n";
      return;
    }
    constexpr size_t kColumn = 25;
    bool first = true;
    for (absl::string_view part : absl::StrSplit(note->second, '\n')) {
      if (!first) line.clear();
      line.resize(std::max(kColumn, line.size() + 1), ' ');
      absl::StrAppend(&out_, line, "# ", part, "\n");
      first = false;
    }
  }
  void Field(int indent, std::string_view path, std::string_view name, std::string_view value) {
    Line(indent, absl::StrFormat("%s: %s", name, value), path);
  }
  void Link(int indent, std::string_view path, const LinkClass& l) {
    Field(indent, absl::StrFormat("%s.gbps", path), "gbps", Exact(l.gbps));
    Field(indent, absl::StrFormat("%s.latency_us", path), "latency_us", Exact(l.latency_us));
    if (l.efficiency.empty()) return;
    std::string points;
    for (const auto& [bytes, fraction] : l.efficiency) {
      points +=
          absl::StrFormat("%s[%s, %s]", points.empty() ? "" : ", ", Exact(bytes), Exact(fraction));
    }
    Field(indent, absl::StrFormat("%s.efficiency", path), "efficiency",
          absl::StrCat("[", points, "]"));
  }
  std::string Take() { return std::move(out_); }

 private:
  const TopologyNotes& notes_;
  std::string out_;
};

// The ranks per GPU when rank_gpus is 0..0, 1..1, ... with every GPU holding as many; else 0.
int UniformRanksPerGpu(const Topology& t) {
  if (t.gpus < 1 || t.rank_gpus.empty() || t.rank_gpus.size() % t.gpus != 0) return 0;
  const size_t per = t.rank_gpus.size() / t.gpus;
  for (size_t r = 0; r < t.rank_gpus.size(); ++r) {
    if (t.rank_gpus[r] != static_cast<int>(r / per)) return 0;
  }
  return static_cast<int>(per);
}

}  // namespace

std::string TopologyYaml(const Topology& t, std::string_view header, const TopologyNotes& notes) {
  YamlOut y(notes);
  std::string text(header);
  y.Field(0, "name", "name", Scalar(t.name));
  y.Field(0, "gpus", "gpus", absl::StrCat(t.gpus));
  if (const int per = UniformRanksPerGpu(t); per > 0) {
    y.Field(0, "ranks_per_gpu", "ranks_per_gpu", absl::StrCat(per));
  } else {
    y.Field(0, "rank_gpus", "rank_gpus", absl::StrCat("[", absl::StrJoin(t.rank_gpus, ", "), "]"));
  }
  y.Field(0, "copy_engines", "copy_engines", absl::StrCat(t.copy_engines));
  y.Field(0, "memory_gbps", "memory_gbps", Exact(t.memory_gbps));
  if (t.port_gbps != 0) y.Field(0, "port_gbps", "port_gbps", Exact(t.port_gbps));
  y.Line(0, "links:", "links");
  y.Line(2, "local:", "links.local");
  y.Link(4, "links.local", t.local);
  if (t.gpus > 1 || t.peer != LinkClass{}) {
    y.Line(2, "peer:", "links.peer");
    y.Link(4, "links.peer", t.peer);
  }
  if (!t.pairs.empty()) {
    y.Line(2, "pairs:", "links.pairs");
    for (size_t i = 0; i < t.pairs.size(); ++i) {
      const PairLink& p = t.pairs[i];
      const std::string path = absl::StrFormat("links.pairs[%d]", i);
      y.Field(4, path + ".gpus", "- gpus", absl::StrFormat("[%d, %d]", p.gpu_a, p.gpu_b));
      y.Link(6, path, p.link);
    }
  }
  if (!t.uplinks.empty()) {
    y.Line(0, "uplinks:", "uplinks");
    for (size_t i = 0; i < t.uplinks.size(); ++i) {
      const Uplink& u = t.uplinks[i];
      const std::string path = absl::StrFormat("uplinks[%d]", i);
      y.Field(2, path + ".name", "- name", Scalar(u.name));
      if (u.parent >= 0) {
        y.Field(4, path + ".parent", "parent", Scalar(t.uplinks[u.parent].name));
        y.Field(4, path + ".gbps", "gbps", Exact(u.gbps));
      }
      if (u.fabric_gbps != 0)
        y.Field(4, path + ".fabric_gbps", "fabric_gbps", Exact(u.fabric_gbps));
    }
    std::vector<std::string> names;
    for (int u : t.gpu_uplinks) names.push_back(Scalar(t.uplinks[u].name));
    y.Field(0, "gpu_uplinks", "gpu_uplinks", absl::StrCat("[", absl::StrJoin(names, ", "), "]"));
  }
  y.Line(0, "kernel:", "kernel");
  y.Field(2, "kernel.launch_us", "launch_us", Exact(t.kernel_launch_us));
  y.Field(2, "kernel.overhead_us", "overhead_us", Exact(t.kernel_overhead_us));
  y.Field(2, "kernel.reduce_gbps", "reduce_gbps", Exact(t.reduce_gbps));
  if (t.codec_gbps != 0) y.Field(2, "kernel.codec_gbps", "codec_gbps", Exact(t.codec_gbps));
  for (auto [key, value] : {std::pair{"codec_gpu_gbps", t.codec_gpu_gbps},
                            {"codec_encode_gbps", t.codec_encode_gbps},
                            {"codec_decode_gbps", t.codec_decode_gbps},
                            {"codec_dequantizing_add_gbps", t.codec_dequantizing_add_gbps}}) {
    if (value != 0) y.Field(2, absl::StrCat("kernel.", key), key, Exact(value));
  }
  y.Line(0, "flag:", "flag");
  y.Field(2, "flag.latency_us", "latency_us", Exact(t.flag_latency_us));
  y.Line(0, "host:", "host");
  y.Field(2, "host.copy_us", "copy_us", Exact(t.copy_launch_us));
  y.Field(2, "host.event_us", "event_us", Exact(t.event_us));
  return text + y.Take();
}

double Topology::CodecGbps(CodedKernel kind) const {
  double rate = 0;
  switch (kind) {
    case CodedKernel::kRequantizingAdd:
      break;
    case CodedKernel::kEncode:
      rate = codec_encode_gbps;
      break;
    case CodedKernel::kDecode:
      rate = codec_decode_gbps;
      break;
    case CodedKernel::kDequantizingAdd:
      rate = codec_dequantizing_add_gbps;
      break;
  }
  return rate > 0 ? rate : codec_gbps;
}

}  // namespace dmalab
