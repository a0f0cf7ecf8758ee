// Inputs the fuzzers found (tests/fuzz/*_fuzzer.cc), each with the behaviour the fix promises,
// and the decoder's own guarantees.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"
#include "tests/fuzz/fuzz_scenario.h"

namespace dmalab {
namespace {

TEST(FuzzScenarioTest, EmptyInputDecodesToALoadableScenario) {
  const FuzzScenario fs = DecodeFuzzScenario(nullptr, 0);
  EXPECT_TRUE(ParseScenario(fs.yaml, "fuzz.yaml").ok()) << fs.yaml;
}

TEST(FuzzScenarioTest, DecodingIsDeterministic) {
  const uint8_t bytes[] = {1, 7, 3, 9, 200, 14, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(DecodeFuzzScenario(bytes, sizeof(bytes)).yaml,
            DecodeFuzzScenario(bytes, sizeof(bytes)).yaml);
}

TEST(FuzzScenarioTest, ATypicalInputReplaysWithoutFindings) {
  const uint8_t bytes[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 4, 1};
  const FuzzScenario fs = DecodeFuzzScenario(bytes, sizeof(bytes));
  EXPECT_EQ(ReplayFuzzScenario(fs), 0) << fs.yaml;
}

// Found by scenario_loader_fuzzer (ASan stack-use-after-scope on every input): the map check
// bound a reference to `it->first`, a member of a proxy that yaml-cpp's iterator returns by
// value. Every key of every map is now checked through a copy.
TEST(FuzzRegressionTest, MapKeysAreCheckedAfterTheIteratorMoves) {
  absl::StatusOr<Scenario> s = ParseScenario(
      "world: 2\nseed: 1\ntensors: {x: [64], y: [64]}\nsteps: []\nseed: 2\n", "t.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "t.yaml:5:1: field 'seed': found it a second time (first at line 2), allowed each "
            "field once");
}

// Found by scenario_loader_fuzzer (uncaught YAML::InvalidNode, abort): a step whose value is a
// list was searched for its `label` field as if it were a map.
TEST(FuzzRegressionTest, AStepWhoseValueIsAListIsALocatedError) {
  absl::StatusOr<Scenario> s = ParseScenario(
      "world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - repeat:\n      - fill: x\n", "t.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "t.yaml:5:7: field 'steps[0].repeat': found a list, allowed a map with fields times, "
            "steps, label");
}

// Found by scenario_loader_fuzzer (timeout, memory growing to gigabytes): yaml-cpp 0.7 never ends
// on a ',' where a node should start. It reports an empty document there without reading the
// ',', again and again. The loader now sees that no document moves past the one before it and
// reports the place; tests/fuzz/corpus_loader/regression_comma_loop.yaml is the fuzzer's input.
TEST(FuzzRegressionTest, AParserThatStopsMovingIsInvalidYamlNotAHang) {
  absl::StatusOr<Scenario> s = ParseScenario(
      ",orld: 4\ntensors: {x:d: 4\ntensors: {x: [1099511627776]}\nstepsor: xhi}\n", "t.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "t.yaml:1:1: field '(document)': found invalid YAML (',' where a node should start), "
            "allowed YAML syntax");
  // The same after a first document: the second document is the error, at its first node.
  s = ParseScenario("world: 2\n---\n,\n", "t.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "t.yaml:3:1: field '(document)': found a second YAML document, allowed one document "
            "per scenario file");
}

// Found by replay_fuzzer (ASan heap-use-after-free): releasing the tensors still live at the end
// passed a key of the live map by reference and erased it before naming the tensor in a
// free-failed finding. persistent-output makes that free fail.
TEST(FuzzRegressionTest, AFailedFreeAtTheEndNamesTheTensor) {
  FuzzScenario fs;
  fs.yaml =
      "world: 2\ntensors: {x: [64], y: [64], z: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - all_reduce: {input: x, result: y}\n  - all_reduce: {input: x, result: z}\n";
  fs.faults.Add(Fault::kPersistentOutput);
  absl::StatusOr<Scenario> s = ParseScenario(fs.yaml, "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  SimDevice dev(2, 1);
  ReplayOptions options;
  options.faults = fs.faults;
  absl::StatusOr<ReplayReport> r = Replay(*s, &dev, options);
  ASSERT_TRUE(r.ok()) << r.status();
  // The pointer alias of y and z, then z's free fails on both ranks (y's freed the workspace).
  ASSERT_EQ(r->findings.size(), 3u);
  const ReplayFinding& f = r->findings[1];
  EXPECT_EQ(f.kind, ReplayFindingKind::kFreeFailed);
  ASSERT_EQ(f.storage.size(), 1u);
  EXPECT_EQ(f.storage[0].tensor, "z");
  EXPECT_EQ(f.detail.rfind("freeing 'z' (made by all_reduce at t.yaml:6:5) failed", 0), 0u)
      << f.detail;
}

// The committed corpora (seeds, regression inputs and the campaign's minimised corpus) as a
// regression suite without libFuzzer: every loader input loads or is a located error of this
// file, and every replay input replays (findings allowed) or is refused as bad input.
std::vector<std::string> CorpusFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpusTest, EveryLoaderInputLoadsOrIsALocatedError) {
  const std::vector<std::string> files = CorpusFiles("tests/fuzz/corpus_loader");
  ASSERT_GE(files.size(), 30u);
  for (const std::string& file : files) {
    absl::StatusOr<Scenario> s = ParseScenario(ReadBytes(file), "fuzz.yaml");
    if (s.ok()) continue;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_EQ(s.status().message().rfind("fuzz.yaml:", 0), 0u) << file << ": " << s.status();
  }
}

TEST(FuzzCorpusTest, EveryReplayInputRunsOrIsRefused) {
  const std::vector<std::string> files = CorpusFiles("tests/fuzz/corpus_replay");
  ASSERT_GE(files.size(), 30u);
  int ran = 0;
  for (const std::string& file : files) {
    const std::string bytes = ReadBytes(file);
    const FuzzScenario fs =
        DecodeFuzzScenario(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ran += ReplayFuzzScenario(fs) >= 0;
  }
  // Most inputs decode to scenarios that run; a corpus of only refusals would test nothing.
  EXPECT_GT(ran, static_cast<int>(files.size()) / 2);
}

}  // namespace
}  // namespace dmalab
