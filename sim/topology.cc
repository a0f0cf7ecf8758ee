#include "sim/topology.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
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

#define TOPO_RETURN_IF_ERROR(expr)            \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (0)

#define TOPO_CONCAT_INNER(a, b) a##b
#define TOPO_CONCAT(a, b) TOPO_CONCAT_INNER(a, b)
#define TOPO_ASSIGN_OR_RETURN(lhs, expr)       \
  auto TOPO_CONCAT(_v, __LINE__) = (expr);     \
  if (!TOPO_CONCAT(_v, __LINE__).ok()) {       \
    return TOPO_CONCAT(_v, __LINE__).status(); \
  }                                            \
  lhs = *std::move(TOPO_CONCAT(_v, __LINE__))

constexpr int kMaxGpus = 64;
constexpr int kMaxRanks = 256;

// Typed reading of YAML nodes with errors located at the offending node.
class Reader {
 public:
  explicit Reader(std::string_view file) : file_(file) {}

  absl::Status Error(const YAML::Node& node, std::string_view path, std::string_view found,
                     std::string_view allowed) const {
    const YAML::Mark m = node.Mark();
    const int line = m.is_null() ? 1 : m.line + 1, col = m.is_null() ? 1 : m.column + 1;
    return absl::InvalidArgumentError(absl::StrFormat("%s:%d:%d: field '%s': found %s, allowed %s",
                                                      file_, line, col, path, found, allowed));
  }

  static std::string Describe(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return absl::StrFormat("'%s'", node.Scalar());
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a map";
      default:
        return "nothing (null)";
    }
  }

  // Checks that `node` is a map whose keys are all in `allowed`, each at most once.
  absl::Status CheckMap(const YAML::Node& node, std::string_view path,
                        const std::vector<std::string_view>& allowed) const {
    std::string names;
    for (std::string_view a : allowed) {
      names += absl::StrFormat("%s%s", names.empty() ? "" : ", ", a);
    }
    if (!node.IsMap()) {
      return Error(node, path.empty() ? "(document)" : path, Describe(node),
                   absl::StrFormat("a map with fields %s", names));
    }
    std::vector<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      const std::string at = Path(path, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(it->first, at, "an unknown field", absl::StrFormat("fields %s", names));
      }
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return Error(it->first, at, "it a second time", "each field once");
      }
      seen.push_back(key);
    }
    return absl::OkStatus();
  }

  static std::optional<YAML::Node> Optional(const YAML::Node& map, std::string_view key) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
    }
    return std::nullopt;
  }

  absl::StatusOr<YAML::Node> Required(const YAML::Node& map, std::string_view path,
                                      std::string_view key, std::string_view allowed) const {
    std::optional<YAML::Node> v = Optional(map, key);
    if (!v) return Error(map, Path(path, key), "nothing (the field is missing)", allowed);
    return *v;
  }

  absl::StatusOr<std::string> Name(const YAML::Node& node, std::string_view path) const {
    if (!node.IsScalar() || node.Scalar().empty()) {
      return Error(node, path, Describe(node), "a non-empty name");
    }
    return node.Scalar();
  }

  absl::StatusOr<int> Int(const YAML::Node& node, std::string_view path, int lo, int hi) const {
    int v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v) || v < lo || v > hi) {
      return Error(node, path, Describe(node), absl::StrFormat("an integer in %d..%d", lo, hi));
    }
    return v;
  }

  // A finite number >= 0, or > 0 when `positive`.
  absl::StatusOr<double> Number(const YAML::Node& node, std::string_view path,
                                bool positive) const {
    double v = 0;
    const bool ok = node.IsScalar() && absl::SimpleAtod(node.Scalar(), &v) && std::isfinite(v) &&
                    (positive ? v > 0 : v >= 0);
    if (!ok) return Error(node, path, Describe(node), positive ? "a number > 0" : "a number >= 0");
    return v;
  }

  absl::StatusOr<double> RequiredNumber(const YAML::Node& map, std::string_view path,
                                        std::string_view key, bool positive) const {
    TOPO_ASSIGN_OR_RETURN(YAML::Node n,
                          Required(map, path, key, positive ? "a number > 0" : "a number >= 0"));
    return Number(n, Path(path, key), positive);
  }

  // An optional number >= 0, 0 when absent.
  absl::StatusOr<double> OptionalNumber(const YAML::Node& map, std::string_view path,
                                        std::string_view key) const {
    std::optional<YAML::Node> n = Optional(map, key);
    if (!n) return 0.0;
    return Number(*n, Path(path, key), /*positive=*/false);
  }

  absl::Status CheckList(const YAML::Node& node, std::string_view path,
                         std::string_view allowed) const {
    if (!node.IsSequence()) return Error(node, path, Describe(node), allowed);
    return absl::OkStatus();
  }

  static std::string Path(std::string_view base, std::string_view key) {
    return base.empty() ? std::string(key) : absl::StrFormat("%s.%s", base, key);
  }
  static std::string Index(std::string_view base, size_t i) {
    return absl::StrFormat("%s[%d]", base, i);
  }

 private:
  std::string file_;
};

absl::StatusOr<LinkClass> ParseLinkClass(const Reader& rd, const YAML::Node& node,
                                         std::string_view path,
                                         std::vector<std::string_view> fields) {
  fields.insert(fields.end(), {"gbps", "latency_us", "efficiency"});
  TOPO_RETURN_IF_ERROR(rd.CheckMap(node, path, fields));
  LinkClass link;
  TOPO_ASSIGN_OR_RETURN(link.gbps, rd.RequiredNumber(node, path, "gbps", /*positive=*/true));
  TOPO_ASSIGN_OR_RETURN(link.latency_us, rd.RequiredNumber(node, path, "latency_us", false));
  std::optional<YAML::Node> eff = Reader::Optional(node, "efficiency");
  if (!eff) return link;
  const std::string eff_path = Reader::Path(path, "efficiency");
  constexpr std::string_view kPoints = "a list of [bytes, fraction] with bytes increasing";
  TOPO_RETURN_IF_ERROR(rd.CheckList(*eff, eff_path, kPoints));
  for (size_t i = 0; i < eff->size(); ++i) {
    const YAML::Node point = (*eff)[i];
    const std::string at = Reader::Index(eff_path, i);
    if (!point.IsSequence() || point.size() != 2) {
      return rd.Error(point, at, Reader::Describe(point), "a pair [bytes, fraction]");
    }
    TOPO_ASSIGN_OR_RETURN(const double bytes, rd.Number(point[0], at + "[0]", true));
    TOPO_ASSIGN_OR_RETURN(const double frac, rd.Number(point[1], at + "[1]", true));
    if (frac > 1) return rd.Error(point[1], at + "[1]", Reader::Describe(point[1]), "0 < f <= 1");
    if (!link.efficiency.empty() && bytes <= link.efficiency.back().first) {
      return rd.Error(point[0], at + "[0]", Reader::Describe(point[0]), kPoints);
    }
    link.efficiency.emplace_back(bytes, frac);
  }
  return link;
}

// uplinks: a list of {name, parent, gbps, fabric_gbps}; gpu_uplinks: a name per GPU.
absl::Status ParseUplinks(const Reader& rd, const YAML::Node& doc, Topology& t) {
  std::optional<YAML::Node> list = Reader::Optional(doc, "uplinks");
  std::optional<YAML::Node> attach = Reader::Optional(doc, "gpu_uplinks");
  if (!list && !attach) return absl::OkStatus();
  if (!list) return rd.Error(doc, "uplinks", "nothing (the field is missing)", "a list of uplinks");
  TOPO_RETURN_IF_ERROR(rd.CheckList(*list, "uplinks", "a list of uplinks"));
  std::vector<std::string> parents;
  for (size_t i = 0; i < list->size(); ++i) {
    const YAML::Node u = (*list)[i];
    const std::string path = Reader::Index("uplinks", i);
    TOPO_RETURN_IF_ERROR(rd.CheckMap(u, path, {"name", "parent", "gbps", "fabric_gbps"}));
    Uplink up;
    TOPO_ASSIGN_OR_RETURN(YAML::Node name, rd.Required(u, path, "name", "a non-empty name"));
    TOPO_ASSIGN_OR_RETURN(up.name, rd.Name(name, Reader::Path(path, "name")));
    for (const Uplink& other : t.uplinks) {
      if (other.name == up.name) {
        return rd.Error(name, Reader::Path(path, "name"), Reader::Describe(name), "a new name");
      }
    }
    TOPO_ASSIGN_OR_RETURN(up.fabric_gbps, rd.OptionalNumber(u, path, "fabric_gbps"));
    std::optional<YAML::Node> parent = Reader::Optional(u, "parent");
    parents.push_back(parent ? parent->Scalar() : "");
    if (parent) {
      TOPO_ASSIGN_OR_RETURN(up.gbps, rd.RequiredNumber(u, path, "gbps", /*positive=*/true));
    } else if (Reader::Optional(u, "gbps")) {
      return rd.Error(*Reader::Optional(u, "gbps"), Reader::Path(path, "gbps"), "a link up",
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
    return rd.Error(n, path, Reader::Describe(n), absl::StrFormat("one of %s", names));
  };
  for (size_t i = 0; i < list->size(); ++i) {
    if (parents[i].empty()) continue;
    const std::string path = Reader::Path(Reader::Index("uplinks", i), "parent");
    const YAML::Node parent = (*list)[i]["parent"];
    TOPO_ASSIGN_OR_RETURN(t.uplinks[i].parent, find(parent, path));
  }
  // Walking up from any node must reach a root within as many steps as there are uplinks.
  for (size_t i = 0; i < t.uplinks.size(); ++i) {
    int steps = 0;
    for (int u = static_cast<int>(i); u >= 0; u = t.uplinks[u].parent) {
      if (++steps > static_cast<int>(t.uplinks.size())) {
        const YAML::Node parent = (*list)[i]["parent"];
        return rd.Error(parent, Reader::Path(Reader::Index("uplinks", i), "parent"),
                        Reader::Describe(parent), "a parent that is not a descendant");
      }
    }
  }
  const std::string allowed = absl::StrFormat("a list of %d uplink names", t.gpus);
  if (!attach) return rd.Error(doc, "gpu_uplinks", "nothing (the field is missing)", allowed);
  if (!attach->IsSequence() || static_cast<int>(attach->size()) != t.gpus) {
    const std::string found = attach->IsSequence() ? absl::StrFormat("a list of %d", attach->size())
                                                   : Reader::Describe(*attach);
    return rd.Error(*attach, "gpu_uplinks", found, allowed);
  }
  for (int g = 0; g < t.gpus; ++g) {
    TOPO_ASSIGN_OR_RETURN(const int u, find((*attach)[g], Reader::Index("gpu_uplinks", g)));
    t.gpu_uplinks.push_back(u);
  }
  return absl::OkStatus();
}

absl::Status ParseRanks(const Reader& rd, const YAML::Node& doc, Topology& t) {
  std::optional<YAML::Node> per = Reader::Optional(doc, "ranks_per_gpu");
  std::optional<YAML::Node> map = Reader::Optional(doc, "rank_gpus");
  if (per && map) {
    return rd.Error(*map, "rank_gpus", "it beside ranks_per_gpu", "one of the two");
  }
  if (!map) {
    int n = 1;
    if (per) {
      TOPO_ASSIGN_OR_RETURN(n, rd.Int(*per, "ranks_per_gpu", 1, kMaxRanks / t.gpus));
    }
    for (int g = 0; g < t.gpus; ++g) t.rank_gpus.insert(t.rank_gpus.end(), n, g);
    return absl::OkStatus();
  }
  TOPO_RETURN_IF_ERROR(rd.CheckList(*map, "rank_gpus", "a list with one GPU per rank"));
  if (map->size() == 0 || map->size() > kMaxRanks) {
    return rd.Error(*map, "rank_gpus", absl::StrFormat("a list of %d", map->size()),
                    absl::StrFormat("1..%d ranks", kMaxRanks));
  }
  for (size_t r = 0; r < map->size(); ++r) {
    TOPO_ASSIGN_OR_RETURN(const int g,
                          rd.Int((*map)[r], Reader::Index("rank_gpus", r), 0, t.gpus - 1));
    t.rank_gpus.push_back(g);
  }
  return absl::OkStatus();
}

absl::Status ParseLinks(const Reader& rd, const YAML::Node& doc, Topology& t) {
  TOPO_ASSIGN_OR_RETURN(YAML::Node links, rd.Required(doc, "", "links", "a map"));
  TOPO_RETURN_IF_ERROR(rd.CheckMap(links, "links", {"local", "peer", "pairs"}));
  constexpr std::string_view kLink = "a map with gbps, latency_us";
  TOPO_ASSIGN_OR_RETURN(YAML::Node local, rd.Required(links, "links", "local", kLink));
  TOPO_ASSIGN_OR_RETURN(t.local, ParseLinkClass(rd, local, "links.local", {}));
  std::optional<YAML::Node> peer = Reader::Optional(links, "peer");
  if (!peer && t.gpus > 1) {
    return rd.Error(links, "links.peer", "nothing (the field is missing)", kLink);
  }
  if (peer) {
    TOPO_ASSIGN_OR_RETURN(t.peer, ParseLinkClass(rd, *peer, "links.peer", {}));
  }
  std::optional<YAML::Node> pairs = Reader::Optional(links, "pairs");
  if (!pairs) return absl::OkStatus();
  TOPO_RETURN_IF_ERROR(rd.CheckList(*pairs, "links.pairs", "a list of pair links"));
  for (size_t i = 0; i < pairs->size(); ++i) {
    const YAML::Node p = (*pairs)[i];
    const std::string path = Reader::Index("links.pairs", i);
    PairLink pl;
    TOPO_ASSIGN_OR_RETURN(pl.link, ParseLinkClass(rd, p, path, {"gpus"}));
    const std::string gpus_path = Reader::Path(path, "gpus");
    TOPO_ASSIGN_OR_RETURN(YAML::Node gpus, rd.Required(p, path, "gpus", "[gpu, gpu]"));
    if (!gpus.IsSequence() || gpus.size() != 2) {
      return rd.Error(gpus, gpus_path, Reader::Describe(gpus), "two different GPUs [a, b]");
    }
    TOPO_ASSIGN_OR_RETURN(pl.gpu_a, rd.Int(gpus[0], gpus_path + "[0]", 0, t.gpus - 1));
    TOPO_ASSIGN_OR_RETURN(pl.gpu_b, rd.Int(gpus[1], gpus_path + "[1]", 0, t.gpus - 1));
    if (pl.gpu_a == pl.gpu_b) {
      return rd.Error(gpus, gpus_path, "the same GPU twice", "two different GPUs [a, b]");
    }
    t.pairs.push_back(pl);
  }
  return absl::OkStatus();
}

absl::Status ParseCosts(const Reader& rd, const YAML::Node& doc, Topology& t) {
  TOPO_ASSIGN_OR_RETURN(YAML::Node kernel, rd.Required(doc, "", "kernel", "a map"));
  TOPO_RETURN_IF_ERROR(
      rd.CheckMap(kernel, "kernel", {"launch_us", "overhead_us", "reduce_gbps", "codec_gbps"}));
  TOPO_ASSIGN_OR_RETURN(t.kernel_launch_us,
                        rd.RequiredNumber(kernel, "kernel", "launch_us", false));
  TOPO_ASSIGN_OR_RETURN(t.kernel_overhead_us,
                        rd.RequiredNumber(kernel, "kernel", "overhead_us", false));
  TOPO_ASSIGN_OR_RETURN(t.reduce_gbps, rd.RequiredNumber(kernel, "kernel", "reduce_gbps", true));
  TOPO_ASSIGN_OR_RETURN(t.codec_gbps, rd.OptionalNumber(kernel, "kernel", "codec_gbps"));
  TOPO_ASSIGN_OR_RETURN(YAML::Node flag, rd.Required(doc, "", "flag", "a map"));
  TOPO_RETURN_IF_ERROR(rd.CheckMap(flag, "flag", {"latency_us"}));
  TOPO_ASSIGN_OR_RETURN(t.flag_latency_us, rd.RequiredNumber(flag, "flag", "latency_us", false));
  TOPO_ASSIGN_OR_RETURN(YAML::Node host, rd.Required(doc, "", "host", "a map"));
  TOPO_RETURN_IF_ERROR(rd.CheckMap(host, "host", {"copy_us", "event_us"}));
  TOPO_ASSIGN_OR_RETURN(t.copy_launch_us, rd.RequiredNumber(host, "host", "copy_us", false));
  TOPO_ASSIGN_OR_RETURN(t.event_us, rd.RequiredNumber(host, "host", "event_us", false));
  return absl::OkStatus();
}

absl::StatusOr<Topology> ParseDocument(const Reader& rd, const YAML::Node& doc) {
  TOPO_RETURN_IF_ERROR(
      rd.CheckMap(doc, "",
                  {"name", "gpus", "ranks_per_gpu", "rank_gpus", "copy_engines", "memory_gbps",
                   "port_gbps", "links", "uplinks", "gpu_uplinks", "kernel", "flag", "host"}));
  Topology t;
  TOPO_ASSIGN_OR_RETURN(YAML::Node name, rd.Required(doc, "", "name", "a non-empty name"));
  TOPO_ASSIGN_OR_RETURN(t.name, rd.Name(name, "name"));
  const std::string gpus_allowed = absl::StrFormat("an integer in 1..%d", kMaxGpus);
  TOPO_ASSIGN_OR_RETURN(YAML::Node gpus, rd.Required(doc, "", "gpus", gpus_allowed));
  TOPO_ASSIGN_OR_RETURN(t.gpus, rd.Int(gpus, "gpus", 1, kMaxGpus));
  TOPO_RETURN_IF_ERROR(ParseRanks(rd, doc, t));
  TOPO_ASSIGN_OR_RETURN(YAML::Node ce, rd.Required(doc, "", "copy_engines", "an integer in 1..64"));
  TOPO_ASSIGN_OR_RETURN(t.copy_engines, rd.Int(ce, "copy_engines", 1, 64));
  TOPO_ASSIGN_OR_RETURN(t.memory_gbps, rd.RequiredNumber(doc, "", "memory_gbps", true));
  TOPO_ASSIGN_OR_RETURN(t.port_gbps, rd.OptionalNumber(doc, "", "port_gbps"));
  TOPO_RETURN_IF_ERROR(ParseLinks(rd, doc, t));
  TOPO_RETURN_IF_ERROR(ParseUplinks(rd, doc, t));
  TOPO_RETURN_IF_ERROR(ParseCosts(rd, doc, t));
  return t;
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(std::string_view text, std::string_view file) {
  const Reader rd(file);
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d:%d: %s", file, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  try {
    return ParseDocument(rd, doc);
  } catch (const YAML::Exception& e) {  // e.g. a malformed node met while indexing
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d:%d: %s", file, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

absl::StatusOr<Topology> LoadTopologyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("topology: cannot open '%s'", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseTopology(text.str(), path);
}

}  // namespace dmalab
