// The zoo as a library (zoo/zoo.h), without the command line: which rows the zoo holds for the
// ring and for a plugin, on the simulator and on GPUs; what a tiny run of the ring's faults on the
// simulator finds; that a plugin whose every call fails at world size 2 fails those rows with
// collective_error while every other row runs and passes; that --jobs does not change the report;
// and how the report names the regimes of failing size rows.
#include "zoo/zoo.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dmalab/faults.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kMtp[] = "scenarios/mtp_fused_residual_tp4.yaml";
constexpr char kExplicit[] = "scenarios/explicit_outputs_tp3.yaml";
constexpr char kInPlaceFile[] = "tests/zoo/inplace_then_add_tp3.yaml";
constexpr char kGraph[] = "tests/zoo/graph_output_freed_tp2.yaml";
constexpr char kPrequant[] = "tests/zoo/owner_keeps_prequant_i8_tp4.yaml";
constexpr char kApi[] = "api:in_place_then_add_tp3";

const std::vector<std::string>& ZooFiles() {
  static const std::vector<std::string> kFiles = {kMtp,   kExplicit, kInPlaceFile,
                                                  kGraph, kPrequant, kApi};
  return kFiles;
}

// The example plugins: (bug, fix, scenario), as docs/cli.md's bug zoo lists them.
const std::vector<std::tuple<std::string, std::string, std::string>>& Examples() {
  static const std::vector<std::tuple<std::string, std::string, std::string>> kAll = {
      {"persistent_workspace", "fresh_output", "examples/plugins/persistent_workspace.yaml"},
      {"symmetric_scratch", "symmetric_scratch_fixed", "examples/plugins/symmetric_scratch.yaml"},
      {"graph_shared_buffer", "graph_shared_buffer_fixed",
       "examples/plugins/graph_shared_buffer.yaml"},
      {"baked_flag", "baked_flag_fixed", "examples/plugins/baked_flag.yaml"},
      {"shape_overlap", "shape_overlap_fixed", "examples/plugins/shape_overlap.yaml"},
      {"small_message_spacing", "small_message_spacing_fixed",
       "examples/plugins/small_message_spacing.yaml"},
      {"ready_unordered", "ready_unordered_fixed", "examples/plugins/ready_unordered.yaml"},
      {"custom_ar_graph_count", "custom_ar", "examples/plugins/custom_ar.yaml"},
      {"custom_ar_graph_output", "custom_ar", "examples/plugins/custom_ar_graph_pool.yaml"},
  };
  return kAll;
}

// The size family's files: worlds 2, 3, 4, 8, each with its five regimes in this order.
std::vector<std::string> SizeFiles() {
  std::vector<std::string> files;
  for (int w : {2, 3, 4, 8}) {
    for (const char* regime : {"decode", "decode_graph", "batch", "prefill", "thresholds"}) {
      files.push_back(absl::StrCat("sizes/w", w, "_", regime, ".yaml"));
    }
  }
  return files;
}

std::vector<std::string> Scenarios(const std::vector<ZooCleanRow>& rows) {
  std::vector<std::string> out;
  for (const ZooCleanRow& row : rows) out.push_back(row.scenario);
  return out;
}

// (fault, scenario, benign) of each fault row.
std::vector<std::tuple<std::string, std::string, bool>> FaultCases(const ZooReport& report) {
  std::vector<std::tuple<std::string, std::string, bool>> out;
  for (const ZooRow& row : report.faults) {
    out.emplace_back(std::string(FaultName(row.fault)), row.scenario, row.benign);
  }
  return out;
}

std::vector<std::tuple<std::string, std::string, std::string>> PluginCases(
    const ZooReport& report) {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const ZooPluginRow& row : report.plugins)
    out.emplace_back(row.plugin, row.fixed, row.scenario);
  return out;
}

ZooOptions Tiny() {
  ZooOptions o;
  o.root = SOURCE_DIR;
  o.seeds = 1;
  o.size_seeds = 0;
  o.jobs = 1;
  return o;
}

TEST(ZooTableTest, TheRingOnTheSimulatorHoldsEveryFaultCaseTheZooScenariosAndTheSizeFamily) {
  ZooOptions o;  // the ring, the simulator, one run of each size regime, no example plugins
  const ZooReport table = ZooTable(o);
  EXPECT_THAT(FaultCases(table),
              ElementsAre(std::tuple("persistent-output", kMtp, false),
                          std::tuple("drop-copy-wait", kMtp, false),
                          std::tuple("drop-copy-wait", kExplicit, false),
                          std::tuple("skip-end-handshake", kExplicit, true),
                          std::tuple("early-return", kApi, false),
                          std::tuple("flag-ready-not-consumed", kMtp, false),
                          std::tuple("flag-ready-not-consumed", kExplicit, false),
                          std::tuple("graph-output-freed", kGraph, false),
                          std::tuple("inplace-alias-ring", kExplicit, false),
                          std::tuple("inplace-alias-ring", kInPlaceFile, false),
                          std::tuple("owner-keeps-prequant", kPrequant, false)));
  EXPECT_TRUE(table.plugins.empty());
  EXPECT_THAT(Scenarios(table.clean), ElementsAreArray(ZooFiles()));
  EXPECT_THAT(Scenarios(table.sizes), ElementsAreArray(SizeFiles()));
  for (const ZooCleanRow& row : table.clean) {
    EXPECT_EQ(row.skipped, "") << row.scenario;
    EXPECT_EQ(row.regime, "") << row.scenario;
  }
  // Each size row says what its regime covers, starting with the regime's name.
  for (size_t k = 0; k < table.sizes.size(); ++k) {
    const std::string name = SizeFiles()[k].substr(SizeFiles()[k].find('_') + 1);
    EXPECT_THAT(table.sizes[k].regime,
                StartsWith(absl::StrCat(name.substr(0, name.size() - 5), ": ")))
        << table.sizes[k].scenario;
  }
  // Nothing has run.
  for (const ZooRow& row : table.faults) EXPECT_EQ(row.seeds_run, 0);
  EXPECT_FALSE(table.pass());  // a non-benign fault not (yet) detected
  o.size_seeds = 0;
  EXPECT_TRUE(ZooTable(o).sizes.empty());
}

TEST(ZooTableTest, WithTheExamplePluginsTheRingAlsoRunsEachBugAndItsFix) {
  ZooOptions o;
  o.plugins_dir = "/any/where";
  const ZooReport sim = ZooTable(o);
  EXPECT_THAT(PluginCases(sim), ElementsAreArray(Examples()));
  for (const ZooPluginRow& row : sim.plugins) EXPECT_TRUE(row.bug_required) << row.plugin;
  EXPECT_EQ(sim.faults.size(), 11u);
  EXPECT_THAT(Scenarios(sim.clean), ElementsAreArray(ZooFiles()));
}

TEST(ZooTableTest, OnGpusTheRingLeavesOutTheFaultsAndTheApiCaseAndOnlyJudgesTheFixes) {
  ZooOptions o;
  o.backend = "hw";
  o.plugins_dir = "/any/where";
  const ZooReport hw = ZooTable(o);
  EXPECT_TRUE(hw.faults.empty());
  EXPECT_THAT(PluginCases(hw), ElementsAreArray(Examples()));
  for (const ZooPluginRow& row : hw.plugins) EXPECT_FALSE(row.bug_required) << row.plugin;
  ASSERT_THAT(Scenarios(hw.clean), ElementsAreArray(ZooFiles()));
  for (const ZooCleanRow& row : hw.clean) {
    EXPECT_EQ(row.skipped, row.scenario == kApi ? "the API case runs on the simulator only" : "")
        << row.scenario;
  }
  EXPECT_THAT(Scenarios(hw.sizes), ElementsAreArray(SizeFiles()));
}

TEST(ZooTableTest, APluginUnderTestRunsOnEveryZooAndExampleScenarioWithoutFaultsOrExamples) {
  ZooOptions o;
  o.collective = "/some/where/mine.so";
  o.plugins_dir = "/any/where";  // the example plugins test the examples: left out
  o.size_seeds = 0;
  const ZooReport table = ZooTable(o);
  EXPECT_TRUE(table.faults.empty());
  EXPECT_TRUE(table.plugins.empty());
  std::vector<std::string> files = ZooFiles();
  for (const auto& [bug, fix, scenario] : Examples()) files.push_back(scenario);
  EXPECT_THAT(Scenarios(table.clean), ElementsAreArray(files));
  EXPECT_TRUE(table.sizes.empty());
}

TEST(ZooRunTest, ATinyRunOfTheRingOnTheSimulatorCatchesEveryFaultAtItsFirstSeed) {
  ZooOptions o = Tiny();
  absl::StatusOr<ZooReport> report = RunZoo(o);
  ASSERT_TRUE(report.ok()) << report.status();
  // The checkers docs/cli.md's bug zoo names for each fault and scenario.
  const std::vector<std::string> checkers = {
      "free_failed,pointer_alias,retained_mismatch",
      "non_finite,race",
      "expect_equal,non_finite,race,wrong_sum",
      "",  // skip-end-handshake: benign, silent
      "race",
      "race",
      "race,wrong_sum",
      "use-after-reuse",
      "expect_equal,race,rank_inconsistent,wrong_sum",
      "race,rank_inconsistent,wrong_sum",
      "rank_inconsistent",
  };
  ASSERT_EQ(report->faults.size(), checkers.size());
  for (size_t k = 0; k < checkers.size(); ++k) {
    const ZooRow& row = report->faults[k];
    SCOPED_TRACE(absl::StrCat(std::string(FaultName(row.fault)), " ", row.scenario));
    EXPECT_EQ(row.detected, !row.benign);
    EXPECT_EQ(row.checkers, checkers[k]);
    EXPECT_EQ(row.first_seed, row.benign ? 0u : 1u);
    EXPECT_EQ(row.seeds_run, 1);
  }
  ASSERT_THAT(Scenarios(report->clean), ElementsAreArray(ZooFiles()));
  for (const ZooCleanRow& row : report->clean) {
    EXPECT_EQ(row.seeds_run, 1) << row.scenario;
    EXPECT_EQ(row.failing_runs, 0) << row.scenario;
  }
  EXPECT_TRUE(report->pass());
  const std::string text = FormatZooReport(*report, o);
  EXPECT_THAT(text, StartsWith("# dmalab zoo: every fault injection on the simulator (values "
                               "fidelity), seeds 1..1\n"));
  EXPECT_THAT(text,
              HasSubstr("\nfaults detected 10/10 (rows), false positives 0 in 6 clean runs, "));
  EXPECT_THAT(text, testing::EndsWith(" s, status=PASS\n"));
}

TEST(ZooRunTest, AFailingPluginCallIsACollectiveErrorOfItsRowsAndTheOtherRowsRun) {
  ZooOptions o = Tiny();
  o.collective = TEST_PLUGINS_DIR "/abi_fails_at_world_2.so";
  absl::StatusOr<ZooReport> report = RunZoo(o);
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<std::string> files = ZooFiles();
  for (const auto& [bug, fix, scenario] : Examples()) files.push_back(scenario);
  ASSERT_THAT(Scenarios(report->clean), ElementsAreArray(files));
  for (const ZooCleanRow& row : report->clean) {
    SCOPED_TRACE(row.scenario);
    if (row.scenario == kPrequant) {  // an i8 wire is the ring's option
      EXPECT_EQ(row.skipped, "wire i8 is the ring's option");
      EXPECT_EQ(row.seeds_run, 0);
    } else if (row.scenario == kGraph) {  // the one scenario of world size 2
      EXPECT_EQ(row.seeds_run, 1);
      EXPECT_EQ(row.failing_runs, 1);
      EXPECT_EQ(row.first_failing_seed, 1u);
      EXPECT_EQ(row.checkers, "collective_error");
      EXPECT_EQ(row.first_step,
                absl::StrCat("all_reduce 'captured' at ", SOURCE_DIR, "/", kGraph, ":17:5"));
    } else {
      EXPECT_EQ(row.skipped, "");
      EXPECT_EQ(row.seeds_run, 1);
      EXPECT_EQ(row.failing_runs, 0);
      EXPECT_EQ(row.checkers, "");
    }
  }
  EXPECT_FALSE(report->pass());
  EXPECT_THAT(FormatZooReport(*report, o), HasSubstr("\nfailing runs 1 in 14, "));
}

// The report with its times zeroed: what must not depend on the number of jobs.
std::string Untimed(ZooReport report, const ZooOptions& o) {
  report.seconds = 0;
  for (std::vector<ZooCleanRow>* rows : {&report.clean, &report.sizes}) {
    for (ZooCleanRow& row : *rows) row.seconds = 0;
  }
  return FormatZooReport(report, o) + FormatZooJson(report, o);
}

TEST(ZooRunTest, TheReportIsTheSameForOneAndTwoJobs) {
  ZooOptions o = Tiny();
  o.seeds = 2;
  o.plugins_dir = EXAMPLES_DIR;  // the example plugins run in worker processes
  absl::StatusOr<ZooReport> one = RunZoo(o);
  ASSERT_TRUE(one.ok()) << one.status();
  o.jobs = 2;
  absl::StatusOr<ZooReport> two = RunZoo(o);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_TRUE(one->pass());
  ASSERT_EQ(one->plugins.size(), Examples().size());
  for (const ZooPluginRow& row : one->plugins) {
    EXPECT_TRUE(row.detected) << row.plugin;
    EXPECT_EQ(row.first_seed, 1u) << row.plugin;
    EXPECT_EQ(row.fixed_seeds_run, 2) << row.plugin;
  }
  EXPECT_EQ(Untimed(*one, o), Untimed(*two, o));
}

TEST(ZooRunTest, AZooScenarioThatDoesNotLoadIsAnErrorNamingIt) {
  ZooOptions o = Tiny();
  o.root = "/nonexistent";
  absl::StatusOr<ZooReport> report = RunZoo(o);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(std::string(report.status().message()),
              HasSubstr("/nonexistent/" + std::string(kMtp)));
}

TEST(ZooFormatTest, FailingSizeRowsNameEachRegimeOnceAndTheirFirstFailingStep) {
  ZooOptions o;
  o.collective = "./mine.so";
  o.seeds = 1;
  ZooReport report;
  const auto add = [&](const std::string& file, const std::string& regime, int failing,
                       const std::string& step) {
    ZooCleanRow& row = report.sizes.emplace_back();
    row.scenario = file;
    row.regime = regime;
    row.seeds_run = 1;
    row.failing_runs = failing;
    row.seconds = 0.5;
    if (failing > 0) {
      row.first_failing_seed = 1;
      row.checkers = "collective_error";
      row.first_step = step;
    }
  };
  add("sizes/w2_decode.yaml", "decode: small", 1, "all_reduce 't1' at sizes/w2_decode.yaml:3:5");
  add("sizes/w2_batch.yaml", "batch: larger", 1, "all_reduce 't32' at sizes/w2_batch.yaml:9:5");
  add("sizes/w3_decode.yaml", "decode: small", 0, "");
  EXPECT_FALSE(report.pass());
  const std::string header =
      "scenario                                      seeds  failing first_failing checker       "
      "                                seconds\n";
  EXPECT_EQ(FormatZooReport(report, o),
            "# dmalab zoo: collective ./mine.so on the simulator (values fidelity), seeds 1..1, "
            "over every zoo scenario, every example plugin's scenario and the size regimes, no "
            "fault injected\n"
            "# (the ring's fault injections and the example plugins are left out: they test the "
            "ring and the examples)\n" +
                header +
                "\n# size regimes (generated scenarios, common/scenario/size_family.h; "
                "--write-sizes=DIR writes them), no fault injected\n"
                "#   decode: small\n"
                "#   batch: larger\n" +
                header +
                "sizes/w2_decode.yaml                              1        1            1 "
                "collective_error                                  0.5\n"
                "    first failure: all_reduce 't1' at sizes/w2_decode.yaml:3:5\n"
                "sizes/w2_batch.yaml                               1        1            1 "
                "collective_error                                  0.5\n"
                "    first failure: all_reduce 't32' at sizes/w2_batch.yaml:9:5\n"
                "sizes/w3_decode.yaml                              1        0            - -     "
                "                                            0.5\n"
                "\nfailing runs 2 in 3, 0.0 s, status=FAIL\n");
}

}  // namespace
}  // namespace dmalab
