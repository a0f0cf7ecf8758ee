#include "zoo/zoo.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/core/json_writer.h"
#include "common/core/status_macros.h"
#include "common/core/text_escape.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/scenario/size_family.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "runner/host_memory.h"
#include "runner/isolated_replay.h"
#include "runner/isolated_run.h"
#include "runner/ordered_parallel.h"
#include "runner/run_device.h"
#include "runner/seed_split.h"
#include "runner/sim_replay.h"
#include "sim/sim_device.h"

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
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<Collective> ar, OpenCollective(&dev, collective, params));
  std::vector<TensorView> x;
  for (int r = 0; r < kWorld; ++r) {
    DMALAB_ASSIGN_OR_RETURN(MemRef mem, dev.Allocate(r, kElems * 2, "x"));
    DMALAB_RETURN_IF_ERROR(dev.Write(mem, std::vector<uint8_t>(kElems * 2, 0)));
    x.push_back(TensorView{mem, DType::kBF16, {kElems}, true});
  }
  if (absl::Status s = ar->AllReduce(x, x); !s.ok()) {
    if (IsCollectiveCallBadInput(s, collective)) return s;
    return std::set<std::string>{
        std::string(ReplayFindingKindName(CollectiveCallFailureKind(s, collective)))};
  }
  for (int r = 0; r < kWorld; ++r) {
    const Operand op{x[r].mem};
    DMALAB_RETURN_IF_ERROR(dev.Reduce(dev.ComputeStream(r), DType::kBF16, op, {op, op}, kElems,
                                      "caller's add into x"));
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
  DMALAB_ASSIGN_OR_RETURN(WorkerEnd end, RunIsolated(work, on_message, hang_seconds));
  if (end.how == WorkerEnd::How::kFinished && result.has_value()) return *result;
  return std::set<std::string>{end.how == WorkerEnd::How::kHung ? "collective_hang"
                                                                : "collective_crash"};
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

// Run `run` of `scenario` with `collective` and `faults` on the zoo's device: in this process
// for the ring on the simulator, in a worker process for a plugin (its crash or hang is a
// finding) and for every run on GPUs. `limit`: the
// simulator's memory limit, read once before any run, so that no run's verdict depends on what
// else runs at once.
absl::StatusOr<RunFindings> RunScenario(const ZooOptions& o, const MemoryLimit& limit,
                                        const Scenario& scenario, const std::string& collective,
                                        const FaultSet& faults, int run) {
  DeviceChoice choice;
  choice.backend = o.backend;
  choice.gpus = std::min(o.gpus, scenario.world);  // a world of 2 spreads over 2 GPUs at most
  choice.fidelity = o.fidelity;
  if (o.perturb) choice.perturb_seed = SeedOf(o, run);
  const auto replay = [&](const ReplayObserver& observer) -> absl::StatusOr<ReplayReport> {
    DMALAB_ASSIGN_OR_RETURN(RunDevice device,
                            RunDevice::Make(choice, scenario.world, SeedOf(o, run)));
    ReplayOptions options;
    options.collective = collective;
    options.faults = faults;
    options.observer = observer;
    if (device.sim() != nullptr) {
      options.max_memory_bytes = limit.bytes;
      options.max_memory_source = limit.source;
    }
    return device.Replay(scenario, options);
  };
  // On GPUs every run is made in a worker: a CUDA context does not survive a fork, so a process
  // that ran the ring on the GPU could not start a plugin's worker afterwards.
  DMALAB_ASSIGN_OR_RETURN(ReplayReport r, IsPluginPath(collective) || o.backend == "hw"
                                              ? ReplayInWorker(replay, scenario, o.hang_seconds)
                                              : replay(nullptr));
  RunFindings found;
  for (const ReplayFinding& f : r.findings) found.checkers.insert(CheckerOf(f));
  if (!r.groups.empty()) found.first_step = r.groups.front().first.step;
  return found;
}

// The API case (RunInPlaceThenAdd) as a run; a plugin's in a worker process.
absl::StatusOr<RunFindings> RunApiCase(const ZooOptions& o, const std::string& collective,
                                       const FaultSet& faults, uint64_t seed) {
  DMALAB_ASSIGN_OR_RETURN(
      std::set<std::string> checkers,
      IsPluginPath(collective)
          ? RunInPlaceThenAddIsolated(collective, seed, o.fidelity, o.hang_seconds)
          : RunInPlaceThenAdd(collective, faults, seed, o.fidelity));
  RunFindings found;
  found.checkers = std::move(checkers);
  if (!found.checkers.empty()) found.first_step = "in-place all-reduce, then the caller's add";
  return found;
}

// What a run of `scenario` holds while it runs, relative to other scenarios': the bytes of its
// tensors on all its ranks (its simulated device memory, roughly). Tells the threads which runs
// not to run at once (ZooRuns::Run), never what a run finds.
uint64_t RunWeight(const Scenario& scenario) {
  uint64_t bytes = 0;
  for (const auto& [name, tensor] : scenario.tensors) bytes += tensor.bytes();
  return bytes * static_cast<uint64_t>(scenario.world);
}

// RunWeight of a zoo case of the ring (the API case's tensors are a few KiB: 0).
uint64_t CaseWeight(const std::map<std::string, Scenario>& scenarios, const std::string& name) {
  return name == kInPlaceThenAdd ? 0 : RunWeight(scenarios.at(name));
}

// One run of a zoo case of the ring.
absl::StatusOr<RunFindings> RunCase(const ZooOptions& o, const MemoryLimit& limit,
                                    const std::map<std::string, Scenario>& scenarios,
                                    const std::string& name, const FaultSet& faults, int run) {
  if (name == kInPlaceThenAdd) {
    return RunApiCase(o, std::string(kRingCollective), faults, static_cast<uint64_t>(run));
  }
  return RunScenario(o, limit, scenarios.at(name), std::string(kRingCollective), faults, run);
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
      {"custom_ar_graph_count", "custom_ar", "examples/plugins/custom_ar.yaml"},
      {"custom_ar_graph_output", "custom_ar", "examples/plugins/custom_ar_graph_pool.yaml"},
  };
  return kAll;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using Found = absl::StatusOr<RunFindings>;
// Takes run `run`'s findings in order; false: the row runs no later run (a fault found).
using Take = std::function<bool(int run, const RunFindings& found)>;

// The zoo's run loops, run together: each row runs run(i) for runs 1..runs and takes the
// results in order with take(i, found) until take returns false. Runs go run by run across the
// rows (run 1 of every row first), on `jobs` threads: threads find work in other rows while a
// row is still running, and a row that ends at its first run wastes no run. Two heavy runs (large
// size-regime scenarios) do not run at once while light ones can run beside them (JobHints), so
// that more threads need little more memory. The results are taken in that order for any number
// of threads, so the report is the same. The first error in that order ends everything. Rows may
// have different numbers of runs (the size family's).
class ZooRuns {
 public:
  // The order of the jobs, run 1 of every row first, then run 2 of every row that has one, and so
  // on, each round in the rows' order: job k is (row, run). Kept as stretches of rounds in which
  // the same rows take part, not as a list of every job, so that a campaign of a million seeds
  // holds a few rows' worth of it.
  class JobOrder {
   public:
    explicit JobOrder(const std::vector<int>& runs) {
      std::vector<int> ends(runs.begin(), runs.end());  // the rounds where a stretch ends
      std::sort(ends.begin(), ends.end());
      ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
      int last = 0;
      for (int end : ends) {
        if (end <= last) continue;  // rows of no run take part nowhere
        Stretch s{size_, last + 1, {}};
        for (size_t r = 0; r < runs.size(); ++r) {
          if (runs[r] >= end) s.rows.push_back(r);
        }
        size_ += static_cast<int64_t>(end - last) * static_cast<int64_t>(s.rows.size());
        stretches_.push_back(std::move(s));
        last = end;
      }
    }
    int64_t size() const { return size_; }
    // (row, run) of job k, 0 <= k < size().
    std::pair<size_t, int> operator[](int64_t k) const {
      const auto it = std::prev(
          std::upper_bound(stretches_.begin(), stretches_.end(), k,
                           [](int64_t job, const Stretch& s) { return job < s.first_job; }));
      const int64_t off = k - it->first_job, width = static_cast<int64_t>(it->rows.size());
      return {it->rows[static_cast<size_t>(off % width)],
              it->first_run + static_cast<int>(off / width)};
    }

   private:
    struct Stretch {
      int64_t first_job;
      int first_run;
      std::vector<size_t> rows;  // those taking part, in order
    };
    std::vector<Stretch> stretches_;
    int64_t size_ = 0;
  };

  // `weight`: what a run of the row holds, relative to the others (RunWeight); `may_end`:
  // whether `take` may end the row (a fault row's) or takes every run (a clean row's); `seconds`,
  // when given, adds up the times of the row's runs.
  void Add(int runs, uint64_t weight, bool may_end, std::function<Found(int)> run, Take take,
           double* seconds = nullptr) {
    rows_.push_back(Row{runs, weight, may_end, std::move(run), std::move(take), seconds});
  }

  struct Timed {
    Found found;
    double seconds = 0;
  };
  // A run's result as it crosses MPI ranks: its status, checkers, first step and time.
  static std::string SerializeTimed(const Timed& t) {
    if (!t.found.ok()) {
      return JoinFields({"E", absl::StrCat(static_cast<int>(t.found.status().code())),
                         std::string(t.found.status().message()),
                         absl::StrFormat("%.17g", t.seconds)});
    }
    return JoinFields({"F", absl::StrJoin(t.found->checkers, ","), t.found->first_step,
                       absl::StrFormat("%.17g", t.seconds)});
  }
  static Timed ParseTimed(const std::string& text) {
    absl::StatusOr<std::vector<std::string>> f = SplitFields(text);
    Timed t;
    int code = 0;
    if (f.ok() && f->size() == 4 && (*f)[0] == "E" && absl::SimpleAtoi((*f)[1], &code) &&
        absl::SimpleAtod((*f)[3], &t.seconds)) {
      t.found = absl::Status(static_cast<absl::StatusCode>(code), (*f)[2]);
      return t;
    }
    if (f.ok() && f->size() == 4 && (*f)[0] == "F" && absl::SimpleAtod((*f)[3], &t.seconds)) {
      RunFindings found;
      for (absl::string_view c : absl::StrSplit((*f)[1], ',', absl::SkipEmpty())) {
        found.checkers.insert(std::string(c));
      }
      found.first_step = (*f)[2];
      t.found = std::move(found);
      return t;
    }
    t.found = absl::DataLossError("a run's result came back garbled from its MPI rank");
    return t;
  }

  absl::Status Run(int jobs) {
    std::vector<int> runs;
    for (const Row& row : rows_) runs.push_back(row.runs);
    const JobOrder jobs_list(runs);
    absl::Status error;
    const auto run = [&](int64_t k) {
      const auto start = std::chrono::steady_clock::now();
      Found found = rows_[jobs_list[k].first].run(jobs_list[k].second);
      return Timed{std::move(found), SecondsSince(start)};
    };
    const auto consume = [&](int64_t k, Timed& t) {
      const Row& row = rows_[jobs_list[k].first];
      if (row.seconds != nullptr) *row.seconds += t.seconds;
      if (!t.found.ok()) {
        error = t.found.status();
        return Consumed::kStop;
      }
      return row.take(jobs_list[k].second, *t.found) ? Consumed::kContinue : Consumed::kEndGroup;
    };
    if (CurrentSeedSplit().size > 1) {
      // Split over the MPI ranks (runner/seed_split.h): each runs its share of the jobs, rank 0
      // takes every result in the same order as above, skipping the rows that ended.
      std::set<size_t> ended;
      absl::Status split = RunSplit(
          jobs_list.size(), jobs, [&](int64_t k) { return SerializeTimed(run(k)); },
          [&](int64_t k, const std::string& text) {
            if (ended.contains(jobs_list[k].first)) return true;
            Timed t = ParseTimed(text);
            const Consumed c = consume(k, t);
            if (c == Consumed::kEndGroup) ended.insert(jobs_list[k].first);
            return c != Consumed::kStop;
          });
      return split.ok() ? error : split;
    }
    RunOrdered<Timed>(
        jobs_list.size(), jobs, [&](int64_t k) { return static_cast<int64_t>(jobs_list[k].first); },
        run, consume,
        JobHints{[&](int64_t k) { return rows_[jobs_list[k].first].weight; },
                 [&](int64_t row) { return rows_[static_cast<size_t>(row)].may_end; }});
    return error;
  }

 private:
  struct Row {
    int runs;
    uint64_t weight;
    bool may_end;
    std::function<Found(int)> run;
    Take take;
    double* seconds;
  };
  std::vector<Row> rows_;
};

// The collective under test with no fault, on one scenario over runs 1..runs: `run(i)` gives
// what run i found (any checker is a failing run); `ran` follows every run.
void AddCleanRow(ZooRuns& runs, const ZooOptions& o, int count, uint64_t weight,
                 std::function<Found(int)> run, std::function<void()> ran, ZooCleanRow& row) {
  runs.Add(
      count, weight, /*may_end=*/false, std::move(run),
      [&o, &row, ran = std::move(ran)](int i, const RunFindings& found) {
        ++row.seeds_run;
        ran();
        if (!found.checkers.empty() && row.failing_runs++ == 0) {
          row.first_failing_seed = SeedOf(o, i);
          row.checkers = absl::StrJoin(found.checkers, ",");
          row.first_step = found.first_step;
        }
        return true;
      },
      &row.seconds);
}

// The runs of the size-regime family's rows (report.sizes, as ZooTable names them) for
// `collective`, `options.size_seeds` runs each. `scenarios` keeps the parsed scenarios alive
// while the runs go.
absl::Status AddSizeRows(ZooRuns& runs, const ZooOptions& options, const MemoryLimit& limit,
                         const std::string& collective, std::function<void()> ran,
                         std::deque<Scenario>& scenarios, ZooReport& report) {
  if (options.size_seeds == 0) return absl::OkStatus();
  const std::vector<SizeFamilyMember> family = SizeFamily();
  for (size_t k = 0; k < family.size(); ++k) {
    DMALAB_ASSIGN_OR_RETURN(Scenario scenario, ParseScenario(family[k].yaml, family[k].file));
    const Scenario& s = scenarios.emplace_back(std::move(scenario));
    ZooCleanRow& row = report.sizes[k];  // named by ZooTable
    const auto run = [&options, &limit, &s, collective](int i) {
      return RunScenario(options, limit, s, collective, FaultSet(), i);
    };
    AddCleanRow(runs, options, options.size_seeds, RunWeight(s), run, ran, row);
  }
  return absl::OkStatus();
}

int64_t SizeRuns(const ZooOptions& options) {
  return options.size_seeds == 0 ? 0
                                 : static_cast<int64_t>(SizeFamily().size()) * options.size_seeds;
}

// Runs at once: --jobs on the simulator; GPU runs share the GPUs, so one at a time.
// Plugins' runs fork workers: one at a time in a sanitized build (WorkerJobs).
int JobsOf(const ZooOptions& options) {
  if (options.backend != "sim") return 1;
  const bool forks = IsPluginPath(options.collective) || !options.plugins_dir.empty();
  return forks ? WorkerJobs(options.jobs) : options.jobs;
}

// `dmalab zoo --collective=PLUGIN`: the plugin over every zoo scenario, every example plugin's
// scenario and the size family, no fault injected; a failing run is a finding of the plugin.
absl::StatusOr<ZooReport> RunPluginZoo(const ZooOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const MemoryLimit limit = AvailableMemory();
  // Rows stay where the runs write them: all named before any run is added.
  ZooReport report = ZooTable(options);
  const int64_t total =
      static_cast<int64_t>(report.clean.size()) * options.seeds + SizeRuns(options);
  int64_t done = 0;
  const auto ran = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };
  std::deque<Scenario> scenarios;
  ZooRuns runs;
  for (ZooCleanRow& row : report.clean) {
    const Scenario* scenario = nullptr;
    if (row.scenario != kInPlaceThenAdd) {
      DMALAB_ASSIGN_OR_RETURN(Scenario loaded, LoadScenarioFile(options.root + "/" + row.scenario));
      scenario = &scenarios.emplace_back(std::move(loaded));
      if (scenario->wire != WireMode::kNative) {
        row.skipped = absl::StrFormat("wire %s is the ring's option", WireModeName(scenario->wire));
      }
    }
    if (row.skipped.empty()) {
      const auto run = [&options, &limit, scenario](int i) {
        return scenario != nullptr
                   ? RunScenario(options, limit, *scenario, options.collective, FaultSet(), i)
                   : RunApiCase(options, options.collective, FaultSet(), static_cast<uint64_t>(i));
      };
      AddCleanRow(runs, options, options.seeds, scenario != nullptr ? RunWeight(*scenario) : 0, run,
                  ran, row);
    } else {
      done += options.seeds;
      if (options.progress) options.progress(done, total);
    }
  }
  DMALAB_RETURN_IF_ERROR(
      AddSizeRows(runs, options, limit, options.collective, ran, scenarios, report));
  DMALAB_RETURN_IF_ERROR(runs.Run(JobsOf(options)));
  report.seconds = SecondsSince(start);
  return report;
}

}  // namespace

const std::vector<std::string>& ZooScenarios() {
  static const std::vector<std::string> kAll = {kMtp,         kExplicit, kInPlaceThenAddFile,
                                                kGraphOutput, kPrequant, kInPlaceThenAdd};
  return kAll;
}

ZooReport ZooTable(const ZooOptions& options) {
  const bool sim = options.backend == "sim";
  const bool ring = options.collective == kRingCollective;
  ZooReport report;
  // The fault injections show the simulator's checkers: on GPUs they are left out.
  if (ring && sim) {
    for (const ZooCase& c : Catalog()) {
      for (const std::string& file : c.scenarios) {
        ZooRow& row = report.faults.emplace_back();
        row.fault = c.fault;
        row.scenario = file;
        row.benign = c.benign;
      }
    }
  }
  if (ring && !options.plugins_dir.empty()) {
    for (const PluginCase& c : PluginCatalog()) {
      ZooPluginRow& row = report.plugins.emplace_back();
      row.plugin = c.plugin;
      row.fixed = c.fixed;
      row.scenario = c.scenario;
      row.bug_required = sim;
    }
  }
  // A plugin under test also runs on the example plugins' scenarios.
  std::vector<std::string> files = ZooScenarios();
  if (!ring) {
    for (const PluginCase& c : PluginCatalog()) files.push_back(c.scenario);
  }
  for (const std::string& file : files) {
    ZooCleanRow& row = report.clean.emplace_back();
    row.scenario = file;
    if (!sim && file == kInPlaceThenAdd) row.skipped = "the API case runs on the simulator only";
  }
  if (options.size_seeds > 0) {
    for (const SizeFamilyMember& m : SizeFamily()) {
      ZooCleanRow& row = report.sizes.emplace_back();
      row.scenario = m.file;
      row.regime = m.regime;
    }
  }
  return report;
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
  const auto start = std::chrono::steady_clock::now();
  const MemoryLimit limit = AvailableMemory();
  std::map<std::string, Scenario> scenarios;
  for (const std::string& file : ZooScenarios()) {
    if (file.rfind("api:", 0) == 0) continue;
    DMALAB_ASSIGN_OR_RETURN(Scenario s, LoadScenarioFile(options.root + "/" + file));
    scenarios.emplace(file, std::move(s));
  }
  // Rows stay where the runs write them: all named before any run is added.
  ZooReport report = ZooTable(options);
  const int64_t total =
      static_cast<int64_t>(report.faults.size() + report.clean.size() + 2 * report.plugins.size()) *
          options.seeds +
      SizeRuns(options);
  int64_t done = 0;
  const auto ran = [&](int64_t runs) {
    done += runs;
    if (options.progress) options.progress(done, total);
  };
  ZooRuns runs;
  std::deque<Scenario> plugin_scenarios;
  for (const ZooPluginRow& row : report.plugins) {
    DMALAB_ASSIGN_OR_RETURN(Scenario scenario, LoadScenarioFile(options.root + "/" + row.scenario));
    plugin_scenarios.push_back(std::move(scenario));
  }
  for (ZooRow& row : report.faults) {
    const auto run = [&options, &limit, &scenarios, &row](int seed) {
      return RunCase(options, limit, scenarios, row.scenario, FaultSet().Add(row.fault), seed);
    };
    runs.Add(options.seeds, CaseWeight(scenarios, row.scenario), /*may_end=*/true, run,
             [&options, &row, ran](int seed, const RunFindings& found) {
               ++row.seeds_run;
               ran(1);
               if (found.checkers.empty()) return true;
               ran(options.seeds - seed);  // the seeds a detected row skips
               row.detected = true;
               row.first_seed = seed;
               row.checkers = absl::StrJoin(found.checkers, ",");
               return false;
             });
  }
  for (ZooCleanRow& row : report.clean) {
    if (!row.skipped.empty()) {
      ran(options.seeds);
      continue;
    }
    const auto run = [&options, &limit, &scenarios, &row](int i) {
      return RunCase(options, limit, scenarios, row.scenario, FaultSet(), i);
    };
    AddCleanRow(
        runs, options, options.seeds, CaseWeight(scenarios, row.scenario), run, [ran] { ran(1); },
        row);
  }
  for (size_t p = 0; p < report.plugins.size(); ++p) {
    ZooPluginRow& row = report.plugins[p];
    const Scenario& scenario = plugin_scenarios[p];
    const std::string bug = absl::StrCat(options.plugins_dir, "/", row.plugin, ".so");
    const std::string fix = absl::StrCat(options.plugins_dir, "/", row.fixed, ".so");
    runs.Add(
        options.seeds, RunWeight(scenario), /*may_end=*/true,
        [&options, &limit, &scenario, bug](int i) {
          return RunScenario(options, limit, scenario, bug, FaultSet(), i);
        },
        [&options, &row, ran](int i, const RunFindings& found) {
          ++row.seeds_run;
          ran(1);
          if (found.checkers.empty()) return true;
          ran(options.seeds - i);
          row.detected = true;
          row.first_seed = SeedOf(options, i);
          row.checkers = absl::StrJoin(found.checkers, ",");
          return false;
        });
    runs.Add(
        options.seeds, RunWeight(scenario), /*may_end=*/false,
        [&options, &limit, &scenario, fix](int i) {
          return RunScenario(options, limit, scenario, fix, FaultSet(), i);
        },
        [&row, ran](int, const RunFindings& found) {
          ++row.fixed_seeds_run;
          ran(1);
          if (!found.checkers.empty()) ++row.fixed_failing_runs;
          return true;
        });
  }
  std::deque<Scenario> size_scenarios;
  DMALAB_RETURN_IF_ERROR(AddSizeRows(
      runs, options, limit, std::string(kRingCollective), [ran] { ran(1); }, size_scenarios,
      report));
  DMALAB_RETURN_IF_ERROR(runs.Run(JobsOf(options)));
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
  w.Key("size_seeds").Int(options.size_seeds).Key("perturb").OptionalUInt(options.perturb);
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

}  // namespace dmalab
