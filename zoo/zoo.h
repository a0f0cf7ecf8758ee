// The bug zoo, the engine of `dmalab zoo` (tools/zoo_command.h: its flags and printing). Replays
// every named fault injection (include/dmalab/faults.h) against the scenarios that can show it, on
// the simulator over seeds 1..N, and the correct implementation against every zoo scenario and
// every member of the size-regime family (common/scenario/size_family.h) over the same seeds;
// reports which checker caught each fault at which seed first and the false-positive count. On GPUs
// (--backend=hw) the runs of a row differ by their schedule perturbation
// (measure/perturbing_device.h) instead of a scheduling seed.
#ifndef DMALAB_ZOO_ZOO_H_
#define DMALAB_ZOO_ZOO_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dmalab/faults.h"
#include "runner/isolated_run.h"
#include "sim/sim_device.h"

namespace dmalab {

struct ZooOptions {
  // The collective under test: "ring" runs the ring's fault injections, the example plugins and
  // the clean sweep; a plugin's path runs the plugin, in the ring's place, over every zoo
  // scenario and every example plugin's scenario (the fault injections and the example plugins
  // test the ring and the examples, so they are left out).
  std::string collective = "ring";
  int seeds = 20;          // seeds 1..seeds: a fault's search budget and the false-positive sweep
  std::string root = ".";  // where the zoo's files are: scenario paths are relative to it
  // Where the example plugins are (NAME.so); empty: leave the plugin rows out.
  std::string plugins_dir;
  Fidelity fidelity = Fidelity::kValues;
  // Every run of a plugin is in a worker process (runner/isolated_run.h): its crash or exit is a
  // failing run (collective_crash), and so is a step longer than this (collective_hang).
  int hang_seconds = kDefaultHangSeconds;
  // Runs made at once, on this many threads (simulator runs); results are taken in seed order, so
  // the report is the same for any number (but its times).
  int jobs = 1;
  // Runs of each size-regime scenario (scheduling seeds 1..size_seeds, or perturbation seeds on
  // GPUs); 0 leaves the family out.
  int size_seeds = 1;
  // "sim", or "hw": the GPUs run the clean rows, the size family and the example plugins' fixes
  // (the fault injections and the API case need the simulator's checkers, and an example's bug
  // is shown, not required, there); `gpus` as replay's, at most a scenario's world size. With
  // `perturb` = P, run i of a row is perturbed with seed P + i - 1; without, runs are
  // unperturbed.
  std::string backend = "sim";
  int gpus = 1;
  std::optional<uint64_t> perturb;
  // Optional: called after every run with the runs done and the most the zoo can run (a fault
  // row stops at its first detection; the runs it skips count as done).
  std::function<void(int64_t done, int64_t total)> progress;
};

// One fault against one scenario.
struct ZooRow {
  Fault fault = Fault::kPersistentOutput;
  std::string scenario;
  bool benign = false;  // the catalog says this ring is immune to the fault
  bool detected = false;
  std::string checkers;     // comma-separated checker names of the first detecting run
  uint64_t first_seed = 0;  // 0: not detected
  int seeds_run = 0;
};

// The collective under test, no fault injected, on one scenario.
struct ZooCleanRow {
  std::string scenario;
  int seeds_run = 0;
  int failing_runs = 0;
  // The first failing run's seed: scheduling seed (sim), perturbation seed or run number (hw).
  uint64_t first_failing_seed = 0;
  std::string checkers;    // comma-separated checker names of the first failing run
  std::string first_step;  // the step of the first failing run's first finding
  std::string regime;      // size-regime rows: what the scenario covers
  // Why the scenario did not run (a plugin and a compressed wire, which is the ring's option);
  // empty when it ran.
  std::string skipped;
  double seconds = 0;  // the time of its runs, added up (they may run at once, with others)
};

// A third-party collective with a known bug (examples/plugins/) against its scenario, and the
// fixed version over the same seeds.
struct ZooPluginRow {
  std::string plugin;  // the buggy plugin's name (build/examples/NAME.so)
  std::string fixed;   // its fix
  std::string scenario;
  bool detected = false;
  std::string checkers;     // of the first detecting run
  uint64_t first_seed = 0;  // 0: not detected
  int seeds_run = 0;
  int fixed_seeds_run = 0;
  int fixed_failing_runs = 0;  // false positives of the fix
  bool bug_required = true;    // false on GPUs: the bug is shown, the fix is what is judged
};

struct ZooReport {
  std::vector<ZooRow> faults;
  std::vector<ZooPluginRow> plugins;
  std::vector<ZooCleanRow> clean;
  std::vector<ZooCleanRow> sizes;  // the size-regime family, one row per member
  double seconds = 0;
  // Every non-benign row detected, every benign row silent, and no false positive.
  bool pass() const;
};

// The scenario files of the zoo, relative to the repository root.
const std::vector<std::string>& ZooScenarios();

// The rows a run of the zoo with `options` holds, named and not yet run: each fault injection
// against each scenario that can show it (the ring on the simulator), each example plugin
// (the ring, with `plugins_dir`), the collective under test on every zoo scenario (a plugin: and
// every example plugin's scenario), and every member of the size-regime family (`size_seeds` >
// 0). A row that cannot run there says so in `skipped` (the API case on GPUs); a plugin's rows
// of a compressed wire are marked when the run loads their scenarios.
ZooReport ZooTable(const ZooOptions& options);

// Runs the zoo; an error is bad input (a scenario that does not load or run).
absl::StatusOr<ZooReport> RunZoo(const ZooOptions& options);

// The table `dmalab zoo` prints.
std::string FormatZooReport(const ZooReport& report, const ZooOptions& options);

// The report as JSON (docs/json.md).
std::string FormatZooJson(const ZooReport& report, const ZooOptions& options);

}  // namespace dmalab

#endif  // DMALAB_ZOO_ZOO_H_
