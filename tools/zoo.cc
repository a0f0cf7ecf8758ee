#include "tools/zoo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
#include "common/core/text_escape.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/replay.h"
#include "common/scenario/report.h"
#include "common/scenario/scenario_loader.h"
#include "common/scenario/size_family.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"
#include "tools/progress.h"
#include "tools/run_device.h"
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
    if (IsCollectiveCallBadInput(s, collective)) return s;
    return std::set<std::string>{
        std::string(ReplayFindingKindName(CollectiveCallFailureKind(s, collective)))};
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

// What one run found: the checker names of its findings (empty: clean) and where the first was.
struct RunFindings {
  std::set<std::string> checkers;
  std::string first_step;
};

// The seed that names run `run` (1-based) of a row: the scheduling seed on the simulator; on
// GPUs the perturbation seed, or the run's number when unperturbed.
uint64_t SeedOf(const ZooOptions& o, int run) {
  return o.perturb ? *o.perturb + static_cast<uint64_t>(run - 1) : static_cast<uint64_t>(run);
}

// Run `run` of `scenario` with `collective` and `faults` on the zoo's device.
absl::StatusOr<RunFindings> RunScenario(const ZooOptions& o, const Scenario& scenario,
                                        const std::string& collective, const FaultSet& faults,
                                        int run) {
  DeviceChoice choice;
  choice.backend = o.backend;
  choice.gpus = std::min(o.gpus, scenario.world);  // a world of 2 spreads over 2 GPUs at most
  choice.fidelity = o.fidelity;
  if (o.perturb) choice.perturb_seed = SeedOf(o, run);
  absl::StatusOr<RunDevice> device = RunDevice::Make(choice, scenario.world, SeedOf(o, run));
  if (!device.ok()) return device.status();
  ReplayOptions options;
  options.collective = collective;
  options.faults = faults;
  if (device->sim() != nullptr) options.max_memory_bytes = AvailableMemoryBytes();
  absl::StatusOr<ReplayReport> r = device->Replay(scenario, options);
  if (!r.ok()) return r.status();
  RunFindings found;
  for (const ReplayFinding& f : r->findings) found.checkers.insert(CheckerOf(f));
  if (!r->groups.empty()) found.first_step = r->groups.front().first.step;
  return found;
}

// The API case (RunInPlaceThenAdd) as a run.
absl::StatusOr<RunFindings> RunApiCase(const std::string& collective, const FaultSet& faults,
                                       uint64_t seed, Fidelity fidelity) {
  absl::StatusOr<std::set<std::string>> checkers =
      RunInPlaceThenAdd(collective, faults, seed, fidelity);
  if (!checkers.ok()) return checkers.status();
  RunFindings found;
  found.checkers = *std::move(checkers);
  if (!found.checkers.empty()) found.first_step = "in-place all-reduce, then the caller's add";
  return found;
}

// One run of a zoo case of the ring.
absl::StatusOr<RunFindings> RunCase(const ZooOptions& o,
                                    const std::map<std::string, Scenario>& scenarios,
                                    const std::string& name, const FaultSet& faults, int run) {
  if (name == kInPlaceThenAdd) {
    return RunApiCase(std::string(kRingCollective), faults, run, o.fidelity);
  }
  return RunScenario(o, scenarios.at(name), std::string(kRingCollective), faults, run);
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
      {"small_message_spacing", "small_message_spacing_fixed",
       "examples/plugins/small_message_spacing.yaml"},
      {"ready_unordered", "ready_unordered_fixed", "examples/plugins/ready_unordered.yaml"},
  };
  return kAll;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The collective under test with no fault, on one scenario over runs 1..runs: `run(i)` gives
// what run i found (any checker is a failing run); `ran` follows every run.
absl::Status RunCleanRow(const ZooOptions& o, int runs,
                         const std::function<absl::StatusOr<RunFindings>(int)>& run,
                         const std::function<void()>& ran, ZooCleanRow& row) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= runs; ++i) {
    absl::StatusOr<RunFindings> found = run(i);
    if (!found.ok()) return found.status();
    ++row.seeds_run;
    ran();
    if (found->checkers.empty()) continue;
    if (row.failing_runs++ == 0) {
      row.first_failing_seed = SeedOf(o, i);
      row.checkers = absl::StrJoin(found->checkers, ",");
      row.first_step = found->first_step;
    }
  }
  row.seconds = SecondsSince(start);
  return absl::OkStatus();
}

// The size-regime family's rows for `collective`, `options.size_seeds` runs each.
absl::Status RunSizeRows(const ZooOptions& options, const std::string& collective,
                         const std::function<void()>& ran, ZooReport& report) {
  if (options.size_seeds == 0) return absl::OkStatus();
  for (const SizeFamilyMember& m : SizeFamily()) {
    absl::StatusOr<Scenario> scenario = ParseScenario(m.yaml, m.file);
    if (!scenario.ok()) return scenario.status();
    ZooCleanRow row;
    row.scenario = m.file;
    row.regime = m.regime;
    const auto run = [&](int i) {
      return RunScenario(options, *scenario, collective, FaultSet(), i);
    };
    DMALAB_RETURN_IF_ERROR(RunCleanRow(options, options.size_seeds, run, ran, row));
    report.sizes.push_back(row);
  }
  return absl::OkStatus();
}

int64_t SizeRuns(const ZooOptions& options) {
  return options.size_seeds == 0 ? 0
                                 : static_cast<int64_t>(SizeFamily().size()) * options.size_seeds;
}

// `dmalab zoo --collective=PLUGIN`: the plugin over every zoo scenario, every example plugin's
// scenario and the size family, no fault injected; a failing run is a finding of the plugin.
absl::StatusOr<ZooReport> RunPluginZoo(const ZooOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> files = ZooScenarios();
  for (const PluginCase& c : PluginCatalog()) files.push_back(c.scenario);
  ZooReport report;
  const int64_t total = static_cast<int64_t>(files.size()) * options.seeds + SizeRuns(options);
  int64_t done = 0;
  const auto ran = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };
  for (const std::string& file : files) {
    ZooCleanRow row;
    row.scenario = file;
    std::optional<Scenario> scenario;
    if (file != kInPlaceThenAdd) {
      absl::StatusOr<Scenario> loaded = LoadScenarioFile(options.root + "/" + file);
      if (!loaded.ok()) return loaded.status();
      scenario = *std::move(loaded);
      if (scenario->wire != WireMode::kNative) {
        row.skipped = absl::StrFormat("wire %s is the ring's option", WireModeName(scenario->wire));
      }
    } else if (options.backend != "sim") {
      row.skipped = "the API case runs on the simulator only";
    }
    if (row.skipped.empty()) {
      const auto run = [&](int i) {
        return scenario ? RunScenario(options, *scenario, options.collective, FaultSet(), i)
                        : RunApiCase(options.collective, FaultSet(), i, options.fidelity);
      };
      DMALAB_RETURN_IF_ERROR(RunCleanRow(options, options.seeds, run, ran, row));
    } else {
      done += options.seeds;
      if (options.progress) options.progress(done, total);
    }
    report.clean.push_back(row);
  }
  DMALAB_RETURN_IF_ERROR(RunSizeRows(options, options.collective, ran, report));
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
    if ((row.bug_required && !row.detected) || row.fixed_failing_runs > 0) return false;
  }
  for (const std::vector<ZooCleanRow>* rows : {&clean, &sizes}) {
    for (const ZooCleanRow& row : *rows) {
      if (row.failing_runs > 0) return false;
    }
  }
  return true;
}

absl::StatusOr<ZooReport> RunZoo(const ZooOptions& options) {
  if (options.collective != kRingCollective) return RunPluginZoo(options);
  const bool sim = options.backend == "sim";
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
  if (sim) {
    for (const ZooCase& c : Catalog()) total += static_cast<int64_t>(c.scenarios.size());
  }
  total = (total + static_cast<int64_t>(ZooScenarios().size())) * options.seeds;
  if (!options.plugins_dir.empty()) {
    total += static_cast<int64_t>(PluginCatalog().size()) * 2 * options.seeds;
  }
  total += SizeRuns(options);
  const auto ran = [&](int64_t runs) {
    done += runs;
    if (options.progress) options.progress(done, total);
  };
  // The fault injections show the simulator's checkers: on GPUs they are left out.
  for (const ZooCase& c : sim ? Catalog() : std::vector<ZooCase>()) {
    for (const std::string& file : c.scenarios) {
      ZooRow row;
      row.fault = c.fault;
      row.scenario = file;
      row.benign = c.benign;
      for (int seed = 1; seed <= options.seeds && !row.detected; ++seed) {
        absl::StatusOr<RunFindings> found =
            RunCase(options, scenarios, file, FaultSet().Add(c.fault), seed);
        if (!found.ok()) return found.status();
        ++row.seeds_run;
        ran(1);
        if (found->checkers.empty()) continue;
        ran(options.seeds - seed);  // the seeds a detected row skips
        row.detected = true;
        row.first_seed = seed;
        row.checkers = absl::StrJoin(found->checkers, ",");
      }
      report.faults.push_back(row);
    }
  }
  for (const std::string& file : ZooScenarios()) {
    ZooCleanRow row;
    row.scenario = file;
    if (!sim && file == kInPlaceThenAdd) {
      row.skipped = "the API case runs on the simulator only";
      ran(options.seeds);
      report.clean.push_back(row);
      continue;
    }
    const auto run = [&](int i) { return RunCase(options, scenarios, file, FaultSet(), i); };
    DMALAB_RETURN_IF_ERROR(RunCleanRow(
        options, options.seeds, run, [&] { ran(1); }, row));
    report.clean.push_back(row);
  }
  if (!options.plugins_dir.empty()) {
    for (const PluginCase& c : PluginCatalog()) {
      absl::StatusOr<Scenario> scenario = LoadScenarioFile(options.root + "/" + c.scenario);
      if (!scenario.ok()) return scenario.status();
      ZooPluginRow row;
      row.plugin = c.plugin;
      row.fixed = c.fixed;
      row.scenario = c.scenario;
      row.bug_required = sim;
      const std::string bug = absl::StrCat(options.plugins_dir, "/", c.plugin, ".so");
      const std::string fix = absl::StrCat(options.plugins_dir, "/", c.fixed, ".so");
      for (int i = 1; i <= options.seeds && !row.detected; ++i) {
        absl::StatusOr<RunFindings> found = RunScenario(options, *scenario, bug, FaultSet(), i);
        if (!found.ok()) return found.status();
        ++row.seeds_run;
        ran(1);
        if (found->checkers.empty()) continue;
        ran(options.seeds - i);
        row.detected = true;
        row.first_seed = SeedOf(options, i);
        row.checkers = absl::StrJoin(found->checkers, ",");
      }
      for (int i = 1; i <= options.seeds; ++i) {
        absl::StatusOr<RunFindings> found = RunScenario(options, *scenario, fix, FaultSet(), i);
        if (!found.ok()) return found.status();
        ++row.fixed_seeds_run;
        ran(1);
        if (!found->checkers.empty()) ++row.fixed_failing_runs;
      }
      report.plugins.push_back(row);
    }
  }
  DMALAB_RETURN_IF_ERROR(RunSizeRows(
      options, std::string(kRingCollective), [&] { ran(1); }, report));
  report.seconds = SecondsSince(start);
  return report;
}

// The clean rows' table: the collective under test, no fault injected. A failing row names the
// step of its first finding on a line of its own.
std::string FormatCleanRows(const std::vector<ZooCleanRow>& rows, int* runs, int* failing) {
  std::string out = absl::StrFormat("%-44s %6s %8s %12s %-44s %8s\n", "scenario", "seeds",
                                    "failing", "first_failing", "checker", "seconds");
  for (const ZooCleanRow& row : rows) {
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
    if (row.failing_runs > 0 && !row.first_step.empty()) {
      absl::StrAppendFormat(&out, "    first failure: %s\n", EscapeText(row.first_step));
    }
  }
  return out;
}

// The size family's section: what each regime covers, then its rows; a failing row names its
// first failing step, whose label names tokens, hidden size (or bytes) and form.
std::string FormatSizeRows(const ZooReport& report, int* runs, int* failing) {
  if (report.sizes.empty()) return "";
  std::string out =
      "\n# size regimes (generated scenarios, common/scenario/size_family.h; --write-sizes=DIR "
      "writes them), no fault injected\n";
  std::set<std::string> regimes;
  for (const ZooCleanRow& row : report.sizes) {
    if (regimes.insert(row.regime).second) absl::StrAppend(&out, "#   ", row.regime, "\n");
  }
  out += FormatCleanRows(report.sizes, runs, failing);
  return out;
}

// "seeds 1..N" on the simulator; on GPUs the perturbation seeds or the unperturbed runs.
std::string RunsText(const ZooOptions& o, int runs) {
  if (o.backend == "sim") {
    return absl::StrFormat("on the simulator (%s fidelity), seeds 1..%d", FidelityName(o.fidelity),
                           runs);
  }
  if (o.perturb) {
    return absl::StrFormat("on the GPU, perturbation seeds %d..%d", *o.perturb,
                           *o.perturb + static_cast<uint64_t>(runs) - 1);
  }
  return absl::StrFormat("on the GPU, %d unperturbed runs", runs);
}

std::string FormatZooReport(const ZooReport& report, const ZooOptions& options) {
  if (options.collective != kRingCollective) {
    int runs = 0, failing = 0;
    std::string out = absl::StrFormat(
        "# dmalab zoo: collective %s %s, over every zoo scenario, every example plugin's "
        "scenario and the size regimes, no fault injected\n"
        "# (the ring's fault injections and the example plugins are left out: they test the "
        "ring and the examples)\n",
        options.collective, RunsText(options, options.seeds));
    out += FormatCleanRows(report.clean, &runs, &failing);
    out += FormatSizeRows(report, &runs, &failing);
    absl::StrAppendFormat(&out, "\nfailing runs %d in %d, %.1f s, status=%s\n", failing, runs,
                          report.seconds, report.pass() ? "PASS" : "FAIL");
    return out;
  }
  std::string out;
  if (options.backend == "sim") {
    absl::StrAppendFormat(&out, "# dmalab zoo: every fault injection %s\n",
                          RunsText(options, options.seeds));
    absl::StrAppendFormat(&out, "%-24s %-44s %-11s %-40s %10s %6s\n", "fault", "scenario",
                          "detected", "checker", "first_seed", "seeds");
  } else {
    absl::StrAppendFormat(&out,
                          "# dmalab zoo: the ring %s (the fault injections need the "
                          "simulator's checkers: left out)\n",
                          RunsText(options, options.seeds));
  }
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
    absl::StrAppendFormat(
        &out,
        "\n# third-party collectives (examples/plugins/): the bug, then its fix%s\n"
        "%-22s %-44s %-9s %-40s %10s %-28s %8s\n",
        options.backend == "sim" ? "" : " (on the GPU the bug is shown, only the fix is judged)",
        "plugin", "scenario", "detected", "checker", "first_seed", "fix", "fix_fail");
    for (const ZooPluginRow& row : report.plugins) {
      absl::StrAppendFormat(&out, "%-22s %-44s %-9s %-40s %10s %-28s %8d\n", row.plugin,
                            row.scenario, row.detected ? "yes" : "no",
                            row.detected ? row.checkers : "-",
                            row.detected ? absl::StrFormat("%d", row.first_seed) : "-", row.fixed,
                            row.fixed_failing_runs);
    }
  }
  out += "\n# no fault (false positives)\n";
  int runs = 0, failing = 0;
  out += FormatCleanRows(report.clean, &runs, &failing);
  out += FormatSizeRows(report, &runs, &failing);
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
  w.Key("collective").String(options.collective).Key("backend").String(options.backend);
  w.Key("fidelity").String(FidelityName(options.fidelity)).Key("seeds").Int(options.seeds);
  w.Key("size_seeds").Int(options.size_seeds).Key("perturb");
  if (options.perturb) {
    w.UInt(*options.perturb);
  } else {
    w.Null();
  }
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
    w.Key("bug_required").Bool(row.bug_required);
    w.Key("seeds_run").Int(row.seeds_run).Key("fixed_seeds_run").Int(row.fixed_seeds_run);
    w.Key("fixed_failing_runs").Int(row.fixed_failing_runs).EndObject();
  }
  w.EndArray();
  for (const auto& [key, rows] : {std::pair{"clean", &report.clean}, {"sizes", &report.sizes}}) {
    w.Key(key).BeginArray();
    for (const ZooCleanRow& row : *rows) {
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
      w.EndArray().Key("first_step");
      if (row.failing_runs > 0) {
        w.String(row.first_step);
      } else {
        w.Null();
      }
      w.Key("regime");
      if (row.regime.empty()) {
        w.Null();
      } else {
        w.String(row.regime);
      }
      w.Key("skipped");
      if (row.skipped.empty()) {
        w.Null();
      } else {
        w.String(row.skipped);
      }
      w.Key("seconds").Double(row.seconds).EndObject();
    }
    w.EndArray();
  }
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

absl::Status WriteSizeFamily(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrFormat("cannot create '%s': %s", dir, ec.message()));
  for (const SizeFamilyMember& m : SizeFamily()) {
    const std::string path =
        (std::filesystem::path(dir) / std::filesystem::path(m.file).filename()).string();
    DMALAB_RETURN_IF_ERROR(WriteTextFile(path, m.yaml));
  }
  return absl::OkStatus();
}

int RunZooCommand(const ZooCommand& command) {
  const auto bad_input = [](const std::string& message) {
    std::fprintf(stderr, "dmalab zoo: %s\n", message.c_str());
    return 2;
  };
  ZooOptions options;
  options.seeds = command.seeds;
  if (options.seeds < 1)
    return bad_input(absl::StrFormat("--seeds is %d; must be >= 1", options.seeds));
  absl::StatusOr<Fidelity> fidelity = ParseFidelity(command.fidelity);
  if (!fidelity.ok()) return bad_input(absl::StrCat("--", fidelity.status().message()));
  options.fidelity = *fidelity;
  if (absl::Status s = CheckCollective(command.run.collective); !s.ok()) {
    return bad_input(absl::StrCat("--collective: ", s.message()));
  }
  options.collective = command.run.collective;
  options.size_seeds = command.sizes;
  options.backend = command.backend;
  options.gpus = command.gpus;
  options.perturb = command.perturb;
  DeviceChoice choice;
  choice.backend = command.backend;
  choice.perturb_seed = command.perturb;
  if (absl::Status s = CheckDeviceChoice(choice); !s.ok())
    return bad_input(std::string(s.message()));
  if (!command.write_sizes.empty()) {
    if (absl::Status s = WriteSizeFamily(command.write_sizes); !s.ok()) {
      return bad_input(absl::StrCat("--write-sizes: ", s.message()));
    }
  }
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
