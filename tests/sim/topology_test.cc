// The topology loader: routes through switches, and errors located at the offending node with
// the field, what was found and what is allowed. The writer: what it writes reads back equal.
#include "sim/topology.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr char kValid[] = R"(name: t
gpus: 4
copy_engines: 2
memory_gbps: 1000
links:
  local: {gbps: 500, latency_us: 2}
  peer: {gbps: 50, latency_us: 5}
uplinks:
  - {name: sw0, parent: rc, gbps: 50}
  - {name: sw1, parent: rc, gbps: 50}
  - {name: rc, fabric_gbps: 80}
gpu_uplinks: [sw0, sw0, sw1, sw1]
kernel: {launch_us: 1, overhead_us: 3, reduce_gbps: 500}
flag: {latency_us: 1.5}
host: {copy_us: 2, event_us: 1}
)";

// kValid with `from` replaced by `to`; the error message, or "parsed".
std::string ErrorWith(const std::string& from, const std::string& to) {
  const std::string text = absl::StrReplaceAll(kValid, {{from, to}});
  EXPECT_NE(text, kValid) << "'" << from << "' is not in the document";
  absl::StatusOr<Topology> t = ParseTopology(text, "t.yaml");
  return t.ok() ? "parsed" : std::string(t.status().message());
}

TEST(TopologyTest, ValidDocumentParses) {
  absl::StatusOr<Topology> t = ParseTopology(kValid, "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "t");
  EXPECT_EQ(t->rank_gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t->gpu_uplinks, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(t->uplinks[0].parent, 2);
  EXPECT_EQ(t->uplinks[2].parent, -1);
  EXPECT_DOUBLE_EQ(t->uplinks[2].fabric_gbps, 80);
  EXPECT_DOUBLE_EQ(t->flag_latency_us, 1.5);
  EXPECT_DOUBLE_EQ(t->codec_gbps, 0);  // optional: coded kernels run as plain ones
}

TEST(TopologyTest, CodecRateIsOptionalAndNonNegative) {
  const std::string with_rate =
      absl::StrReplaceAll(kValid, {{"reduce_gbps: 500}", "reduce_gbps: 500, codec_gbps: 120}"}});
  absl::StatusOr<Topology> t = ParseTopology(with_rate, "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->codec_gbps, 120);
  EXPECT_EQ(ErrorWith("reduce_gbps: 500}", "reduce_gbps: 500, codec_gbps: -1}"),
            "t.yaml:13:70: field 'kernel.codec_gbps': found '-1', allowed 0 (none) or a rate in "
            "0.001..1000000 GB/s");
}

TEST(TopologyTest, TheGpusCodecRateIsOptionalAndOnlyBesideTheKernelsOwn) {
  absl::StatusOr<Topology> t = ParseTopology(
      absl::StrReplaceAll(kValid, {{"reduce_gbps: 500}",
                                    "reduce_gbps: 500, codec_gbps: 120, codec_gpu_gbps: 200}"}}),
      "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->codec_gpu_gbps, 200);
  // Per kind, each defaulting to codec_gbps (the requantizing add's).
  EXPECT_DOUBLE_EQ(t->CodecGbps(CodedKernel::kEncode), 120);
  t = ParseTopology(absl::StrReplaceAll(kValid, {{"reduce_gbps: 500}",
                                                  "reduce_gbps: 500, codec_gbps: 120, "
                                                  "codec_encode_gbps: 300, codec_decode_gbps: "
                                                  "400, codec_dequantizing_add_gbps: 150}"}}),
                    "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->CodecGbps(CodedKernel::kRequantizingAdd), 120);
  EXPECT_DOUBLE_EQ(t->CodecGbps(CodedKernel::kEncode), 300);
  EXPECT_DOUBLE_EQ(t->CodecGbps(CodedKernel::kDecode), 400);
  EXPECT_DOUBLE_EQ(t->CodecGbps(CodedKernel::kDequantizingAdd), 150);
  // It writes back what it read.
  absl::StatusOr<Topology> again = ParseTopology(TopologyYaml(*t), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_DOUBLE_EQ(again->codec_decode_gbps, 400);
  EXPECT_EQ(ErrorWith("reduce_gbps: 500}", "reduce_gbps: 500, codec_decode_gbps: 400}"),
            "t.yaml:13:77: field 'kernel.codec_decode_gbps': found '400', allowed it only with "
            "kernel.codec_gbps (one coded kernel's rate), which is missing");
  EXPECT_EQ(ErrorWith("reduce_gbps: 500}", "reduce_gbps: 500, codec_gpu_gbps: 200}"),
            "t.yaml:13:74: field 'kernel.codec_gpu_gbps': found '200', allowed it only with "
            "kernel.codec_gbps (one coded kernel's rate), which is missing");
  EXPECT_EQ(ErrorWith("reduce_gbps: 500}", "reduce_gbps: 500, codec_gbps: 1, codec_gpu_gbps: -2}"),
            "t.yaml:13:89: field 'kernel.codec_gpu_gbps': found '-2', allowed 0 (none) or a rate "
            "in 0.001..1000000 GB/s");
}

TEST(TopologyTest, RouteClimbsTurnsInTheLowestCommonNodeAndDescends) {
  const Topology t = *ParseTopology(kValid, "t.yaml");
  using K = UplinkUse::Kind;
  const std::vector<UplinkUse> across = RouteBetween(t, 1, 2);
  ASSERT_EQ(across.size(), 3u);
  EXPECT_EQ(across[0].uplink, 0);
  EXPECT_EQ(across[0].kind, K::kUp);
  EXPECT_EQ(across[1].uplink, 2);
  EXPECT_EQ(across[1].kind, K::kFabric);
  EXPECT_EQ(across[2].uplink, 1);
  EXPECT_EQ(across[2].kind, K::kDown);
  EXPECT_TRUE(RouteBetween(t, 0, 1).empty());  // sw0 has no fabric limit
  EXPECT_TRUE(RouteBetween(t, 3, 3).empty());
}

TEST(TopologyTest, VirtualRanksShareAGpu) {
  absl::StatusOr<Topology> t = ParseTopology(
      absl::StrReplaceAll(kValid, {{"gpus: 4\n", "gpus: 4\nrank_gpus: [0, 0, 3]\n"}}), "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank_gpus, (std::vector<int>{0, 0, 3}));
  t = ParseTopology(absl::StrReplaceAll(kValid, {{"gpus: 4\n", "gpus: 4\nranks_per_gpu: 2\n"}}),
                    "t.yaml");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank_gpus, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST(TopologyTest, UnknownFieldIsNamedWithTheAllowedOnes) {
  EXPECT_EQ(ErrorWith("copy_engines: 2", "copy_engine: 2"),
            "t.yaml:3:1: field 'copy_engine': found an unknown field, allowed fields name, gpus, "
            "ranks_per_gpu, rank_gpus, copy_engines, memory_gbps, port_gbps, links, uplinks, "
            "gpu_uplinks, kernel, flag, host");
}

TEST(TopologyTest, RepeatedFieldNamesItsFirstLine) {
  EXPECT_EQ(ErrorWith("copy_engines: 2\n", "copy_engines: 2\ncopy_engines: 3\n"),
            "t.yaml:4:1: field 'copy_engines': found it a second time (first at line 3), allowed "
            "each field once");
}

TEST(TopologyTest, KeyMustBeAName) {
  EXPECT_EQ(ErrorWith("  local:", "  [k]: 1\n  local:"),
            "t.yaml:6:3: field 'links': found a key that is a list, allowed scalar keys only");
}

TEST(TopologyTest, NameMustNotBeEmpty) {
  EXPECT_EQ(ErrorWith("name: t\n", "name: ''\n"),
            "t.yaml:1:7: field 'name': found '', allowed a non-empty name");
  EXPECT_EQ(ErrorWith("{name: rc,", "{name: sw0,"),
            "t.yaml:11:12: field 'uplinks[2].name': found 'sw0', allowed a new name");
}

TEST(TopologyTest, BadNumberIsLocatedAtTheValue) {
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: fast"),
            "t.yaml:4:14: field 'memory_gbps': found 'fast', allowed a rate in 0.001..1000000 "
            "GB/s");
  EXPECT_EQ(ErrorWith("latency_us: 5}", "latency_us: -5}"),
            "t.yaml:7:32: field 'links.peer.latency_us': found '-5', allowed a time in "
            "0..1000000 us");
  EXPECT_EQ(ErrorWith("gpus: 4", "gpus: 0"),
            "t.yaml:2:7: field 'gpus': found 0, allowed an integer in 1..64");
}

// Issue 25, item 5: a rate of 5e-324 GB/s made the timing model loop forever, 1e308 gave
// infinite or NaN times that still passed. Every rate, cost and efficiency must be physically
// meaningful, each refused at its place.
TEST(TopologyTest, ValuesOutsidePhysicalRangesAreLocatedErrors) {
  const std::string rate = "allowed a rate in 0.001..1000000 GB/s";
  const std::string time = "allowed a time in 0..1000000 us";
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: 5e-324"),
            "t.yaml:4:14: field 'memory_gbps': found '5e-324', " + rate);
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: 1e308"),
            "t.yaml:4:14: field 'memory_gbps': found '1e308', " + rate);
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: 1.1e6"),
            "t.yaml:4:14: field 'memory_gbps': found '1.1e6', " + rate);
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: 0.0009"),
            "t.yaml:4:14: field 'memory_gbps': found '0.0009', " + rate);
  EXPECT_EQ(ErrorWith("peer: {gbps: 50,", "peer: {gbps: 1e-320,"),
            "t.yaml:7:16: field 'links.peer.gbps': found '1e-320', " + rate);
  EXPECT_EQ(ErrorWith("latency_us: 5}", "latency_us: 1e7}"),
            "t.yaml:7:32: field 'links.peer.latency_us': found '1e7', " + time);
  EXPECT_EQ(ErrorWith("{name: sw1, parent: rc, gbps: 50}", "{name: sw1, parent: rc, gbps: 1e9}"),
            "t.yaml:10:35: field 'uplinks[1].gbps': found '1e9', " + rate);
  EXPECT_EQ(ErrorWith("fabric_gbps: 80", "fabric_gbps: 4e-324"),
            "t.yaml:11:29: field 'uplinks[2].fabric_gbps': found '4e-324', allowed 0 (none) or a "
            "rate in 0.001..1000000 GB/s");
  EXPECT_EQ(ErrorWith("overhead_us: 3", "overhead_us: 2e6"),
            "t.yaml:13:37: field 'kernel.overhead_us': found '2e6', " + time);
  EXPECT_EQ(ErrorWith("reduce_gbps: 500", "reduce_gbps: 1e300"),
            "t.yaml:13:53: field 'kernel.reduce_gbps': found '1e300', " + rate);
  EXPECT_EQ(ErrorWith("latency_us: 1.5", "latency_us: 1e100"),
            "t.yaml:14:20: field 'flag.latency_us': found '1e100', " + time);
  EXPECT_EQ(ErrorWith("event_us: 1}", "event_us: 1e9}"),
            "t.yaml:15:30: field 'host.event_us': found '1e9', " + time);
  EXPECT_EQ(ErrorWith("local: {gbps: 500, latency_us: 2}",
                      "local: {gbps: 500, latency_us: 2, efficiency: [[4096, 1e-300]]}"),
            "t.yaml:6:57: field 'links.local.efficiency[0][1]': found '1e-300', allowed a "
            "fraction in 0.001..1");
  // The bounds themselves, and 0 for an optional rate (none), are allowed.
  EXPECT_EQ(ErrorWith("memory_gbps: 1000", "memory_gbps: 1e6\nport_gbps: 0"), "parsed");
  EXPECT_EQ(ErrorWith("peer: {gbps: 50, latency_us: 5}", "peer: {gbps: 0.001, latency_us: 1e6}"),
            "parsed");
}

TEST(TopologyTest, MissingFieldIsLocatedAtItsMap) {
  EXPECT_EQ(ErrorWith("  peer: {gbps: 50, latency_us: 5}\n", ""),
            "t.yaml:6:3: field 'links.peer': found nothing (the field is missing), allowed a map "
            "with gbps, latency_us");
  EXPECT_EQ(ErrorWith("flag: {latency_us: 1.5}\n", ""),
            "t.yaml:1:1: field 'flag': found nothing (the field is missing), allowed a map");
}

TEST(TopologyTest, UnknownUplinkNameListsTheKnownOnes) {
  EXPECT_EQ(ErrorWith("[sw0, sw0, sw1, sw1]", "[sw0, sw0, sw9, sw1]"),
            "t.yaml:12:25: field 'gpu_uplinks[2]': found 'sw9', allowed one of sw0, sw1, rc");
  EXPECT_EQ(ErrorWith("[sw0, sw0, sw1, sw1]", "[sw0, sw0, sw1]"),
            "t.yaml:12:14: field 'gpu_uplinks': found a list of 3, allowed a list of 4 uplink "
            "names");
}

TEST(TopologyTest, UplinkCycleIsRejected) {
  EXPECT_EQ(ErrorWith("{name: rc, fabric_gbps: 80}", "{name: rc, parent: sw0, gbps: 50}"),
            "t.yaml:9:25: field 'uplinks[0].parent': found 'rc', allowed a parent that is not a "
            "descendant");
}

TEST(TopologyTest, RankOnAMissingGpuIsRejected) {
  EXPECT_EQ(ErrorWith("gpus: 4\n", "gpus: 4\nrank_gpus: [0, 4]\n"),
            "t.yaml:3:16: field 'rank_gpus[1]': found 4, allowed an integer in 0..3");
}

TEST(TopologyTest, EfficiencyPointsMustGrowInBytes) {
  EXPECT_EQ(ErrorWith("{gbps: 500, latency_us: 2}",
                      "{gbps: 500, latency_us: 2, efficiency: [[4096, 0.5], [1024, 0.9]]}"),
            "t.yaml:6:64: field 'links.local.efficiency[1][0]': found '1024', allowed a list of "
            "[bytes, fraction] with bytes increasing");
}

TEST(TopologyTest, YamlSyntaxErrorIsLocated) {
  EXPECT_EQ(ErrorWith("gpus: 4", "gpus: [4"),
            "t.yaml:3:13: field '(document)': found invalid YAML (end of sequence flow not found), "
            "allowed YAML syntax");
}

TEST(TopologyTest, DocumentMustBeAMap) {
  absl::StatusOr<Topology> t = ParseTopology("- 1\n", "t.yaml");
  EXPECT_EQ(t.status().message(),
            "t.yaml:1:1: field '(document)': found a list, allowed a map with fields name, gpus, "
            "ranks_per_gpu, rank_gpus, copy_engines, memory_gbps, port_gbps, links, uplinks, "
            "gpu_uplinks, kernel, flag, host");
}

TEST(TopologyTest, MissingFileIsNamed) {
  const absl::Status missing = LoadTopologyFile("no/such.yaml").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "no/such.yaml: cannot read the topology file");
}

// A topology is read within the bounds of every YAML input, like a scenario: an endless file
// stops at the size cap, a directory is named as such, a second document, an alias cycle and
// the parser's endless loop on a ',' are located errors.
TEST(TopologyTest, HostileFilesAreLocatedErrors) {
  EXPECT_EQ(LoadTopologyFile("/dev/zero").status().message(),
            "/dev/zero: found more than 4194304 bytes, allowed a topology file of at most 4194304 "
            "bytes");
  EXPECT_EQ(LoadTopologyFile("scenarios/topologies").status().message(),
            "scenarios/topologies: is a directory, allowed a topology file");
  // kValid is 15 lines; `name: b` is line 17.
  EXPECT_EQ(ParseTopology(std::string(kValid) + "---\nname: b\n", "t.yaml").status().message(),
            "t.yaml:17:1: field '(document)': found a second YAML document, allowed one document "
            "per topology file");
  EXPECT_EQ(ParseTopology("name: a\nlinks: &l\n  - *l\n", "t.yaml").status().message(),
            "t.yaml:2:8: field 'links[0]': found an alias to a list or map that contains the alias "
            "(a cycle), allowed aliases to nodes outside themselves");
  EXPECT_EQ(ParseTopology(",\n", "t.yaml").status().message(),
            "t.yaml:1:1: field '(document)': found invalid YAML (',' where a node should start), "
            "allowed YAML syntax");
}

TEST(TopologyWriterTest, EveryShippedTopologyReadsBackEqual) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("scenarios/topologies")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    absl::StatusOr<Topology> t = LoadTopologyFile(entry.path().string());
    ASSERT_TRUE(t.ok()) << t.status();
    const std::string yaml = TopologyYaml(*t);
    absl::StatusOr<Topology> back = ParseTopology(yaml, "written.yaml");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
    EXPECT_TRUE(*back == *t) << entry.path() << " written as\n" << yaml;
  }
  EXPECT_EQ(files, 4);
}

TEST(TopologyWriterTest, WritesTheFormatWithNotesAndExactNumbers) {
  Topology t;
  t.name = "two gpus";
  t.gpus = 2;
  t.rank_gpus = {1, 0, 1};
  t.copy_engines = 3;
  t.memory_gbps = 4800.5;
  t.local = {2400, 8.25, {{4096, 0.25}, {1 << 20, 1}}};
  t.peer = {450, 0.1, {}};
  t.pairs = {{0, 1, {300, 2, {}}}};
  t.uplinks = {{"sw0", 1, 64, 0}, {"rc", -1, 0, 128}};
  t.gpu_uplinks = {0, 0};
  t.kernel_launch_us = 4.4;
  t.kernel_overhead_us = 3;
  t.reduce_gbps = 1e-3;
  t.flag_latency_us = 1.0 / 3;
  t.copy_launch_us = 4.9;
  t.event_us = 0;
  const std::string yaml =
      TopologyYaml(t, "# header\n", {{"memory_gbps", "one\ntwo"}, {"links.peer.gbps", "p"}});
  EXPECT_EQ(yaml,
            "# header\n"
            "name: \"two gpus\"\n"
            "gpus: 2\n"
            "rank_gpus: [1, 0, 1]\n"
            "copy_engines: 3\n"
            "memory_gbps: 4800.5      # one\n"
            "                         # two\n"
            "links:\n"
            "  local:\n"
            "    gbps: 2400\n"
            "    latency_us: 8.25\n"
            "    efficiency: [[4096, 0.25], [1048576, 1]]\n"
            "  peer:\n"
            "    gbps: 450            # p\n"
            "    latency_us: 0.1\n"
            "  pairs:\n"
            "    - gpus: [0, 1]\n"
            "      gbps: 300\n"
            "      latency_us: 2\n"
            "uplinks:\n"
            "  - name: sw0\n"
            "    parent: rc\n"
            "    gbps: 64\n"
            "  - name: rc\n"
            "    fabric_gbps: 128\n"
            "gpu_uplinks: [sw0, sw0]\n"
            "kernel:\n"
            "  launch_us: 4.4\n"
            "  overhead_us: 3\n"
            "  reduce_gbps: 0.001\n"
            "flag:\n"
            "  latency_us: 0.3333333333333333\n"
            "host:\n"
            "  copy_us: 4.9\n"
            "  event_us: 0\n");
  absl::StatusOr<Topology> back = ParseTopology(yaml, "written.yaml");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == t);
}

}  // namespace
}  // namespace dmalab
