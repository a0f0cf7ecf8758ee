#include "tools/zoo.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/core/json_writer.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/replay.h"
#include "common/scenario/report.h"
#include "common/scenario/scenario_loader.h"
#include "sim/sim_device.h"
#include "tools/ordered_parallel.h"
#include "tools/progress.h"
#include "tools/sim_replay.h"

namespace dmalab {
namespace {

constexpr char kMtp[] = "scenarios/mtp_fused_residual_tp4.yaml";
constexpr char kExplicit[] = "scenarios/explicit_outputs_tp3.yaml";
constexpr char kInPlaceThenAddFile[] = "tests/zoo/inplace_then_add_tp3.yaml";
constexpr char kGraphOutput[] = "tests/zoo/graph_output_freed_tp2.yaml";
constexpr char kPrequant[] = "tests/zoo/owner_keeps_prequant_i8_tp4.yaml";
// Not a file: a replay reads every all-reduce's output back (rank consistency), and that host
// synchronization orders everything before the next step, so early-return needs a caller that
// does not synchronize. RunInPlaceThenAdd is that caller.
constexpr char kInPlaceThenAdd[] = "api:in_place_then_add_tp3";

// Which scenarios show which fault. A benign fault is one this ring is immune to by
// construction: with one scratch area per step, the ring's own dependency chain orders every
// write of call n+1 after the successor's reads of call n, so the end handshake is defence in
// depth (SimCheckersTest.SkipEndHandshakeIsCoveredByTheRingsOwnOrderingWithPerStepScratch);
// the zoo checks that it stays silent.
struct ZooCase {
  Fault fault;
  std::vector<std::string> scenarios;
  bool benign = false;
};

const std::vector<ZooCase>& Catalog() {
  static const std::vector<ZooCase> kCases = {
      {Fault::kPersistentOutput, {kMtp}},
      {Fault::kDropCopyWait, {kMtp, kExplicit}},
      {Fault::kSkipEndHandshake, {kExplicit}, /*benign=*/true},
      {Fault::kEarlyReturn, {kInPlaceThenAdd}},
      {Fault::kFlagReadyNotConsumed, {kMtp, kExplicit}},
      {Fault::kGraphOutputFreed, {kGraphOutput}},
      {Fault::kInplaceAliasRing, {kExplicit, kInPlaceThenAddFile}},
      {Fault::kOwnerKeepsPrequant, {kPrequant}},
  };
  return kCases;
}

// W=3: an in-place all-reduce, then the caller adds into the reduced tensor on each rank's
// compute stream without synchronizing; the checker names of what the simulator found.
absl::StatusOr<std::set<std::string>> RunInPlaceThenAdd(const std::string& collective,
                                                        const FaultSet& faults, uint64_t seed,
                                                        Fidelity fidelity) {
  constexpr int kWorld = 3;
  constexpr int64_t kElems = kWorld * 8 * 128;
  SimDevice dev(kWorld, seed, fidelity);
  CollectiveParams params;
  params.max_bytes = kElems * 2;
  params.faults = faults;
  absl::StatusOr<std::unique_ptr<Collective>> ar = OpenCollective(&dev, collective, params);
  if (!ar.ok()) return ar.status();
  std::vector<TensorView> x;
  for (int r = 0; r < kWorld; ++r) {
    absl::StatusOr<MemRef> mem = dev.Allocate(r, kElems * 2, "x");
    if (!mem.ok()) return mem.status();
    if (absl::Status s = dev.Write(*mem, std::vector<uint8_t>(kElems * 2, 0)); !s.ok()) return s;
    x.push_back(TensorView{*mem, DType::kBF16, {kElems}, true});
  }
  if (absl::Status s = (*ar)->AllReduce(x, x); !s.ok()) {
    if (IsRejectedArguments(s)) return s;
    return std::set<std::string>{absl::IsAborted(s) ? "collective_error" : "device_error"};
  }
  for (int r = 0; r < kWorld; ++r) {
    const Operand op{x[r].mem};
    if (absl::Status s = dev.Reduce(dev.ComputeStream(r), DType::kBF16, op, {op, op}, kElems,
                                    "caller's add into x");
        !s.ok()) {
      return s;
    }
  }
  (void)dev.Synchronize();  // a deadlock is a finding like any other
  std::set<std::string> checkers;
  for (const Finding& f : dev.findings().findings()) {
    checkers.insert(std::string(FindingKindName(f.kind)));
  }
  for (const TensorView& t : x) (void)dev.Free(t.mem);
  return checkers;
}

// RunInPlaceThenAdd with a plugin, in a worker process: its crash or exit is collective_crash,
// a hang collective_hang. The worker sends the checkers ('C', comma-separated) or its error
// ('E', the status code, the message).
absl::StatusOr<std::set<std::string>> RunInPlaceThenAddIsolated(const std::string& collective,
                                                                uint64_t seed, Fidelity fidelity,
                                                                int hang_seconds) {
  const auto work = [&](WorkerChannel& channel) {
    absl::StatusOr<std::set<std::string>> found =
        RunInPlaceThenAdd(collective, FaultSet(), seed, fidelity);
    if (found.ok()) {
      channel.Send(absl::StrCat("C", absl::StrJoin(*found, ",")));
    } else {
      channel.Send(absl::StrCat("E", std::string(1, static_cast<char>(found.status().code())),
                                found.status().message()));
    }
  };
  std::optional<absl::StatusOr<std::set<std::string>>> result;
  const auto on_message = [&](std::string_view m) -> absl::Status {
    if (result.has_value() || m.empty()) return absl::DataLossError("an unexpected message");
    if (m[0] == 'C') {
      std::set<std::string> checkers;
      for (absl::string_view c :
           absl::StrSplit(absl::string_view(m.data() + 1, m.size() - 1), ',', absl::SkipEmpty())) {
        checkers.insert(std::string(c));
      }
      result = checkers;
    } else if (m[0] == 'E' && m.size() >= 2) {
      result = absl::Status(static_cast<absl::StatusCode>(static_cast<unsigned char>(m[1])),
                            absl::string_view(m.data() + 2, m.size() - 2));
    } else {
      return absl::DataLossError("a message of an unknown kind");
    }
    return absl::OkStatus();
  };
  absl::StatusOr<WorkerEnd> end = RunIsolated(work, on_message, hang_seconds);
  if (!end.ok()) return end.status();
  if (end->how == WorkerEnd::How::kFinished && result.has_value()) return *result;
  return std::set<std::string>{end->how == WorkerEnd::How::kHung ? "collective_hang"
                                                                 : "collective_crash"};
}

// One run of a zoo case: the checker names of its findings (empty: clean).
absl::StatusOr<std::set<std::string>> RunCase(const std::map<std::string, Scenario>& scenarios,
                                              const std::string& name, const FaultSet& faults,
                                              uint64_t seed, Fidelity fidelity) {
  if (name == kInPlaceThenAdd) {
    return RunInPlaceThenAdd(std::string(kRingCollective), faults, seed, fidelity);
  }
  absl::StatusOr<ReplayReport> r =
      ReplayOnSim(scenarios.at(name), faults, seed, /*pieces=*/2, fidelity);
  if (!r.ok()) return r.status();
  std::set<std::string> checkers;
  for (const ReplayFinding& f : r->findings) checkers.insert(CheckerOf(f));
  return checkers;
}

// The example third-party collectives: each bug with its fix and the scenario that shows it.
struct PluginCase {
  const char* plugin;
  const char* fixed;
  const char* scenario;
};

const std::vector<PluginCase>& PluginCatalog() {
  static const std::vector<PluginCase> kAll = {
      {"persistent_workspace", "fresh_output", "examples/plugins/persistent_workspace.yaml"},
      {"symmetric_scratch", "symmetric_scratch_fixed", "examples/plugins/symmetric_scratch.yaml"},
      {"graph_shared_buffer", "graph_shared_buffer_fixed",
       "examples/plugins/graph_shared_buffer.yaml"},
      {"baked_flag", "baked_flag_fixed", "examples/plugins/baked_flag.yaml"},
      {"shape_overlap", "shape_overlap_fixed", "examples/plugins/shape_overlap.yaml"},
  };
  return kAll;
}

// One replay of a scenario with a plugin: the checker names of its findings.
absl::StatusOr<std::set<std::string>> RunPlugin(const Scenario& scenario, const std::string& path,
                                                uint64_t seed, Fidelity fidelity,
                                                int hang_seconds) {
  absl::StatusOr<ReplayReport> r =
      ReplayOnSim(scenario, FaultSet(), seed, /*pieces=*/2, fidelity, path, hang_seconds);
  if (!r.ok()) return r.status();
  std::set<std::string> checkers;
  for (const ReplayFinding& f : r->findings) checkers.insert(CheckerOf(f));
  return checkers;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using Checkers = absl::StatusOr<std::set<std::string>>;
using Take = std::function<bool(int seed, const std::set<std::string>& checkers)>;

// The zoo's seed loops, run together: each row runs run(seed) for seeds 1..seeds and takes the
// results in seed order with take(seed, checkers) until take returns false (a fault found: the
// row runs no later seed). Runs go seed by seed across the rows (seed 1 of every row first), on
// `jobs` threads: threads find work in other rows while a row is still running, and a row that
// ends at its first seed wastes no run. The results are taken in that order for any number of
// threads, so the report is the same. The first error in that order ends everything.
class ZooRuns {
 public:
  // `seconds`, when given, adds up the times of the row's runs.
  void Add(std::function<Checkers(int)> run, Take take, double* seconds = nullptr) {
    rows_.push_back(Row{std::move(run), std::move(take), seconds});
  }

  absl::Status Run(int seeds, int jobs) {
    struct Timed {
      Checkers found;
      double seconds = 0;
    };
    const int64_t rows = static_cast<int64_t>(rows_.size());
    const auto seed_of = [rows](int64_t i) { return static_cast<int>(i / rows + 1); };
    absl::Status error;
    RunOrdered<Timed>(
        rows * seeds, jobs, [rows](int64_t i) { return i % rows; },
        [&](int64_t i) {
          const auto start = std::chrono::steady_clock::now();
          Checkers found = rows_[i % rows].run(seed_of(i));
          return Timed{std::move(found), SecondsSince(start)};
        },
        [&](int64_t i, Timed& t) {
          const Row& row = rows_[i % rows];
          if (row.seconds != nullptr) *row.seconds += t.seconds;
          if (!t.found.ok()) {
            error = t.found.status();
            return Consumed::kStop;
          }
          return row.take(seed_of(i), *t.found) ? Consumed::kContinue : Consumed::kEndGroup;
        });
    return error;
  }

 private:
  struct Row {
    std::function<Checkers(int)> run;
    Take take;
    double* seconds;
  };
  std::vector<Row> rows_;
};

// The collective under test with no fault, on one scenario over seeds 1..seeds: `run(seed)` gives
// the checkers of one run (any is a failing run); `ran` follows every run.
void AddCleanRow(ZooRuns& runs, std::function<Checkers(int)> run, std::function<void()> ran,
                 ZooCleanRow& row) {
  runs.Add(
      std::move(run),
      [&row, ran = std::move(ran)](int seed, const std::set<std::string>& found) {
        ++row.seeds_run;
        ran();
        if (!found.empty() && row.failing_runs++ == 0) {
          row.first_failing_seed = seed;
          row.checkers = absl::StrJoin(found, ",");
        }
        return true;
      },
      &row.seconds);
}

// `dmalab zoo --collective=PLUGIN`: the plugin over every zoo scenario and every example
// plugin's scenario, no fault injected; a failing run is a finding of the plugin.
absl::StatusOr<ZooReport> RunPluginZoo(const ZooOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> files = ZooScenarios();
  for (const PluginCase& c : PluginCatalog()) files.push_back(c.scenario);
  ZooReport report;
  const int64_t total = static_cast<int64_t>(files.size()) * options.seeds;
  int64_t done = 0;
  const auto ran = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };
  report.clean.resize(files.size());  // rows stay where the runs write them
  std::deque<std::optional<Scenario>> scenarios;
  ZooRuns runs;
  for (size_t f = 0; f < files.size(); ++f) {
    ZooCleanRow& row = report.clean[f];
    row.scenario = files[f];
    std::optional<Scenario>& scenario = scenarios.emplace_back();
    if (files[f] != kInPlaceThenAdd) {
      absl::StatusOr<Scenario> loaded = LoadScenarioFile(options.root + "/" + files[f]);
      if (!loaded.ok()) return loaded.status();
      scenario = *std::move(loaded);
      if (scenario->wire != WireMode::kNative) {
        row.skipped = absl::StrFormat("wire %s is the ring's option", WireModeName(scenario->wire));
      }
    }
    if (row.skipped.empty()) {
      const auto run = [&options, &scenario](int seed) {
        return scenario ? RunPlugin(*scenario, options.collective, seed, options.fidelity,
                                    options.hang_seconds)
                        : RunInPlaceThenAddIsolated(options.collective, seed, options.fidelity,
                                                    options.hang_seconds);
      };
      AddCleanRow(runs, run, ran, row);
    } else {
      done += options.seeds;
      if (options.progress) options.progress(done, total);
    }
  }
  DMALAB_RETURN_IF_ERROR(runs.Run(options.seeds, options.jobs));
  report.seconds = SecondsSince(start);
  return report;
}

}  // namespace

const std::vector<std::string>& ZooScenarios() {
  static const std::vector<std::string> kAll = {kMtp,         kExplicit, kInPlaceThenAddFile,
                                                kGraphOutput, kPrequant, kInPlaceThenAdd};
  return kAll;
}

bool ZooReport::pass() const {
  for (const ZooRow& row : faults) {
    if (row.detected == row.benign) return false;
  }
  for (const ZooPluginRow& row : plugins) {
    if (!row.detected || row.fixed_failing_runs > 0) return false;
  }
  for (const ZooCleanRow& row : clean) {
    if (row.failing_runs > 0) return false;
  }
  return true;
}

absl::StatusOr<ZooReport> RunZoo(const ZooOptions& options) {
  if (options.collective != kRingCollective) return RunPluginZoo(options);
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, Scenario> scenarios;
  for (const std::string& file : ZooScenarios()) {
    if (file.rfind("api:", 0) == 0) continue;
    absl::StatusOr<Scenario> s = LoadScenarioFile(options.root + "/" + file);
    if (!s.ok()) return s.status();
    scenarios.emplace(file, *std::move(s));
  }
  ZooReport report;
  int64_t total = 0, done = 0;
  for (const ZooCase& c : Catalog()) total += static_cast<int64_t>(c.scenarios.size());
  total = (total + static_cast<int64_t>(ZooScenarios().size())) * options.seeds;
  const auto ran = [&](int64_t runs) {
    done += runs;
    if (options.progress) options.progress(done, total);
  };
  ZooRuns runs;
  // Rows stay where the runs write them: sized before any is added.
  for (const ZooCase& c : Catalog()) {
    for (const std::string& file : c.scenarios) {
      ZooRow& row = report.faults.emplace_back();
      row.fault = c.fault;
      row.scenario = file;
      row.benign = c.benign;
    }
  }
  report.clean.resize(ZooScenarios().size());
  std::deque<Scenario> plugin_scenarios;
  if (!options.plugins_dir.empty()) {
    for (const PluginCase& c : PluginCatalog()) {
      absl::StatusOr<Scenario> scenario = LoadScenarioFile(options.root + "/" + c.scenario);
      if (!scenario.ok()) return scenario.status();
      plugin_scenarios.push_back(*std::move(scenario));
      ZooPluginRow& row = report.plugins.emplace_back();
      row.plugin = c.plugin;
      row.fixed = c.fixed;
      row.scenario = c.scenario;
    }
  }
  for (ZooRow& row : report.faults) {
    const auto run = [&options, &scenarios, &row](int seed) {
      return RunCase(scenarios, row.scenario, FaultSet().Add(row.fault), seed, options.fidelity);
    };
    runs.Add(run, [&options, &row, ran](int seed, const std::set<std::string>& found) {
      ++row.seeds_run;
      ran(1);
      if (found.empty()) return true;
      ran(options.seeds - seed);  // the seeds a detected row skips
      row.detected = true;
      row.first_seed = seed;
      row.checkers = absl::StrJoin(found, ",");
      return false;
    });
  }
  for (size_t f = 0; f < ZooScenarios().size(); ++f) {
    ZooCleanRow& row = report.clean[f];
    row.scenario = ZooScenarios()[f];
    const auto run = [&options, &scenarios, &row](int seed) {
      return RunCase(scenarios, row.scenario, FaultSet(), seed, options.fidelity);
    };
    AddCleanRow(
        runs, run, [ran] { ran(1); }, row);
  }
  for (size_t p = 0; p < report.plugins.size(); ++p) {
    ZooPluginRow& row = report.plugins[p];
    const Scenario& scenario = plugin_scenarios[p];
    const std::string bug = absl::StrCat(options.plugins_dir, "/", row.plugin, ".so");
    const std::string fix = absl::StrCat(options.plugins_dir, "/", row.fixed, ".so");
    runs.Add(
        [&options, &scenario, bug](int seed) {
          return RunPlugin(scenario, bug, seed, options.fidelity, options.hang_seconds);
        },
             [&row](int seed, const std::set<std::string>& found) {
               ++row.seeds_run;
               if (found.empty()) return true;
               row.detected = true;
               row.first_seed = seed;
               row.checkers = absl::StrJoin(found, ",");
               return false;
             });
    runs.Add(
        [&options, &scenario, fix](int seed) {
          return RunPlugin(scenario, fix, seed, options.fidelity, options.hang_seconds);
        },
             [&row](int, const std::set<std::string>& found) {
               ++row.fixed_seeds_run;
               if (!found.empty()) ++row.fixed_failing_runs;
               return true;
             });
  }
  DMALAB_RETURN_IF_ERROR(runs.Run(options.seeds, options.jobs));
  report.seconds = SecondsSince(start);
  return report;
}

// The clean rows' table: the collective under test, no fault injected.
std::string FormatCleanRows(const ZooReport& report, int* runs, int* failing) {
  std::string out = absl::StrFormat("%-44s %6s %8s %12s %-44s %8s\n", "scenario", "seeds",
                                    "failing", "first_failing", "checker", "seconds");
  for (const ZooCleanRow& row : report.clean) {
    *runs += row.seeds_run;
    *failing += row.failing_runs;
    if (!row.skipped.empty()) {
      absl::StrAppendFormat(&out, "%-44s skipped: %s\n", row.scenario, row.skipped);
      continue;
    }
    absl::StrAppendFormat(
        &out, "%-44s %6d %8d %12s %-44s %8.1f\n", row.scenario, row.seeds_run, row.failing_runs,
        row.failing_runs > 0 ? absl::StrFormat("%d", row.first_failing_seed) : "-",
        row.failing_runs > 0 ? row.checkers : "-", row.seconds);
  }
  return out;
}

std::string FormatZooReport(const ZooReport& report, const ZooOptions& options) {
  if (options.collective != kRingCollective) {
    int runs = 0, failing = 0;
    std::string out = absl::StrFormat(
        "# dmalab zoo: collective %s on the simulator (%s fidelity), seeds 1..%d, over every zoo "
        "scenario and every example plugin's scenario, no fault injected\n"
        "# (the ring's fault injections and the example plugins are left out: they test the "
        "ring and the examples)\n",
        options.collective, FidelityName(options.fidelity), options.seeds);
    out += FormatCleanRows(report, &runs, &failing);
    absl::StrAppendFormat(&out, "\nfailing runs %d in %d, %.1f s, status=%s\n", failing, runs,
                          report.seconds, report.pass() ? "PASS" : "FAIL");
    return out;
  }
  std::string out = absl::StrFormat(
      "# dmalab zoo: every fault injection on the simulator (%s fidelity), seeds 1..%d\n",
      FidelityName(options.fidelity), options.seeds);
  absl::StrAppendFormat(&out, "%-24s %-44s %-11s %-40s %10s %6s\n", "fault", "scenario", "detected",
                        "checker", "first_seed", "seeds");
  int detectable = 0, detected = 0;
  for (const ZooRow& row : report.faults) {
    std::string verdict = row.detected ? "yes" : "no";
    if (row.benign) verdict += row.detected ? " (!)" : " (benign)";
    detectable += !row.benign;
    detected += !row.benign && row.detected;
    absl::StrAppendFormat(&out, "%-24s %-44s %-11s %-40s %10s %6d\n", FaultName(row.fault),
                          row.scenario, verdict, row.detected ? row.checkers : "-",
                          row.detected ? absl::StrFormat("%d", row.first_seed) : "-",
                          row.seeds_run);
  }
  if (!report.plugins.empty()) {
    absl::StrAppendFormat(&out,
                          "\n# third-party collectives (examples/plugins/): the bug, then its fix\n"
                          "%-22s %-44s %-9s %-40s %10s %-26s %8s\n",
                          "plugin", "scenario", "detected", "checker", "first_seed", "fix",
                          "fix_fail");
    for (const ZooPluginRow& row : report.plugins) {
      absl::StrAppendFormat(&out, "%-22s %-44s %-9s %-40s %10s %-26s %8d\n", row.plugin,
                            row.scenario, row.detected ? "yes" : "no",
                            row.detected ? row.checkers : "-",
                            row.detected ? absl::StrFormat("%d", row.first_seed) : "-", row.fixed,
                            row.fixed_failing_runs);
    }
  }
  out += "\n# no fault (false positives)\n";
  int runs = 0, failing = 0;
  out += FormatCleanRows(report, &runs, &failing);
  absl::StrAppendFormat(&out,
                        "\nfaults detected %d/%d (rows), false positives %d in %d clean runs, "
                        "%.1f s, status=%s\n",
                        detected, detectable, failing, runs, report.seconds,
                        report.pass() ? "PASS" : "FAIL");
  return out;
}

std::string FormatZooJson(const ZooReport& report, const ZooOptions& options) {
  JsonWriter w;
  w.BeginObject();
  WriteJsonPreamble(w, "zoo");
  w.Key("collective").String(options.collective);
  w.Key("fidelity").String(FidelityName(options.fidelity)).Key("seeds").Int(options.seeds);
  w.Key("faults").BeginArray();
  for (const ZooRow& row : report.faults) {
    w.BeginObject().Key("fault").String(FaultName(row.fault)).Key("scenario").String(row.scenario);
    w.Key("benign").Bool(row.benign).Key("detected").Bool(row.detected);
    w.Key("checkers").BeginArray();
    if (row.detected) {
      for (absl::string_view c : absl::StrSplit(row.checkers, ',')) w.String(std::string(c));
    }
    w.EndArray();
    w.Key("first_seed");
    if (row.detected) {
      w.UInt(row.first_seed);
    } else {
      w.Null();
    }
    w.Key("seeds_run").Int(row.seeds_run).EndObject();
  }
  w.EndArray();
  w.Key("plugins").BeginArray();
  for (const ZooPluginRow& row : report.plugins) {
    w.BeginObject().Key("plugin").String(row.plugin).Key("fixed").String(row.fixed);
    w.Key("scenario").String(row.scenario).Key("detected").Bool(row.detected);
    w.Key("checkers").BeginArray();
    if (row.detected) {
      for (absl::string_view c : absl::StrSplit(row.checkers, ',')) w.String(std::string(c));
    }
    w.EndArray().Key("first_seed");
    if (row.detected) {
      w.UInt(row.first_seed);
    } else {
      w.Null();
    }
    w.Key("seeds_run").Int(row.seeds_run).Key("fixed_seeds_run").Int(row.fixed_seeds_run);
    w.Key("fixed_failing_runs").Int(row.fixed_failing_runs).EndObject();
  }
  w.EndArray();
  w.Key("clean").BeginArray();
  for (const ZooCleanRow& row : report.clean) {
    w.BeginObject().Key("scenario").String(row.scenario).Key("seeds_run").Int(row.seeds_run);
    w.Key("failing_runs").Int(row.failing_runs).Key("first_failing_seed");
    if (row.failing_runs > 0) {
      w.UInt(row.first_failing_seed);
    } else {
      w.Null();
    }
    w.Key("checkers").BeginArray();
    if (row.failing_runs > 0) {
      for (absl::string_view c : absl::StrSplit(row.checkers, ',')) w.String(std::string(c));
    }
    w.EndArray().Key("skipped");
    if (row.skipped.empty()) {
      w.Null();
    } else {
      w.String(row.skipped);
    }
    w.Key("seconds").Double(row.seconds).EndObject();
  }
  w.EndArray();
  w.Key("seconds").Double(report.seconds);
  w.Key("status").String(report.pass() ? "PASS" : "FAIL");
  w.EndObject();
  return w.str();
}

absl::StatusOr<std::string> FindZooRoot(const std::string& root) {
  const auto holds_zoo = [](const std::filesystem::path& dir) {
    std::error_code ec;
    for (const std::string& file : ZooScenarios()) {
      if (file.rfind("api:", 0) == 0) continue;
      if (!std::filesystem::is_regular_file(dir / file, ec)) return false;
    }
    return true;
  };
  std::vector<std::pair<std::string, std::string>> candidates;  // (folder, why)
  if (!root.empty()) {
    candidates.emplace_back(root, "--root");
  } else if (const char* env = std::getenv("DMALAB_ROOT"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env, "$DMALAB_ROOT");
  } else {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      candidates.emplace_back((exe.parent_path() / ".." / "share" / "dmalab").lexically_normal(),
                              "the install prefix");
      candidates.emplace_back((exe.parent_path() / ".." / "..").lexically_normal(),
                              "above the executable's folder");
    }
#ifdef DMALAB_SOURCE_DIR
    candidates.emplace_back(DMALAB_SOURCE_DIR, "the source tree it was built from");
#endif
    candidates.emplace_back(std::filesystem::current_path(ec).string(), "the current directory");
  }
  std::vector<std::string> looked;
  for (const auto& [dir, why] : candidates) {
    if (holds_zoo(dir)) return dir;
    looked.push_back(absl::StrFormat("%s (%s)", dir, why));
  }
  return absl::NotFoundError(absl::StrFormat(
      "cannot find the zoo's scenarios (%s and %d more files); looked in: %s; pass --root=DIR "
      "or set DMALAB_ROOT to a folder holding scenarios/ and tests/zoo/ (the source tree, or an "
      "install's share/dmalab)",
      ZooScenarios().front(), ZooScenarios().size() - 2, absl::StrJoin(looked, ", ")));
}

int RunZooCommand(const ZooCommand& command) {
  const auto bad_input = [](const std::string& message) {
    std::fprintf(stderr, "dmalab zoo: %s\n", message.c_str());
    return 2;
  };
  ZooOptions options;
  options.seeds = command.seeds;
  options.jobs = command.jobs > 0 ? command.jobs : AvailableCores();
  if (options.seeds < 1)
    return bad_input(absl::StrFormat("--seeds is %d; must be >= 1", options.seeds));
  absl::StatusOr<Fidelity> fidelity = ParseFidelity(command.fidelity);
  if (!fidelity.ok()) return bad_input(absl::StrCat("--", fidelity.status().message()));
  options.fidelity = *fidelity;
  if (absl::Status s = CheckCollectiveOptions(command.run, "zoo"); !s.ok()) {
    return bad_input(std::string(s.message()));
  }
  if (absl::Status s = CheckCollective(command.run.collective); !s.ok()) {
    return bad_input(absl::StrCat("--collective: ", s.message()));
  }
  options.collective = command.run.collective;
  options.hang_seconds = command.hang_seconds;
  absl::StatusOr<std::string> root = FindZooRoot(command.root);
  if (!root.ok()) return bad_input(std::string(root.status().message()));
  options.root = *root;
  // The example plugins are built beside the executable (build/bin/../examples/).
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path plugins = exe.parent_path().parent_path() / "examples";
  if (options.collective != kRingCollective) {
    // The plugin under test replaces the ring; the example plugins' rows are left out.
  } else if (!ec && std::filesystem::exists(plugins / "persistent_workspace.so", ec)) {
    options.plugins_dir = plugins.string();
  } else {
    std::fprintf(stderr,
                 "dmalab zoo: the example plugins are not built (no %s): their rows are left out "
                 "(build the target example_plugins)\n",
                 (plugins / "persistent_workspace.so").string().c_str());
  }
  Progress progress("zoo", "runs", ProgressWanted(command.run.quiet));
  options.progress = [&progress](int64_t done, int64_t total) { progress.Update(done, total); };
  absl::StatusOr<ZooReport> report = RunZoo(options);
  progress.Clear();
  if (!report.ok()) return bad_input(std::string(report.status().message()));
  std::fputs(FormatZooReport(*report, options).c_str(), stdout);
  if (!command.run.json.empty()) {
    if (absl::Status s = WriteTextFile(command.run.json, FormatZooJson(*report, options) + "\n");
        !s.ok()) {
      return bad_input(absl::StrCat("--json: ", s.message()));
    }
  }
  return report->pass() ? 0 : 1;
}

}  // namespace dmalab
