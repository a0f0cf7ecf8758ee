#include "tools/replay_command.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/json_writer.h"
#include "common/core/status_macros.h"
#include "common/core/version.h"
#include "common/plugin/open_collective.h"
#include "common/scenario/integer_sums.h"
#include "common/scenario/replay_expectations.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "dmalab/scenario_loader.h"
#include "runner/host_memory.h"
#include "runner/isolated_replay.h"
#include "runner/isolated_run.h"
#include "runner/ordered_parallel.h"
#include "runner/rank_process.h"
#include "runner/run_device.h"
#include "runner/seed_split.h"
#include "runner/sim_replay.h"
#include "sim/sim_device.h"
#include "tools/exit_status.h"
#include "tools/npy.h"
#include "tools/progress.h"

namespace dmalab {
namespace {

// The device of run `run` (1-based) of --seeds: scheduling seed `run` on the simulator; on GPUs
// perturbation seed perturb + run - 1, or none without --perturb. One run: the command's seeds.
DeviceChoice ChoiceOf(const ReplayCommand& c, Fidelity fidelity, int run) {
  DeviceChoice d;
  d.backend = c.backend;
  d.gpus = c.gpus;
  d.procs = c.procs;
  d.fidelity = fidelity;
  if (c.perturb) d.perturb_seed = *c.perturb + static_cast<uint64_t>(run > 0 ? run - 1 : 0);
  return d;
}

// One replay on the device of run `run` (ChoiceOf): in this process for the ring, in a worker
// process for a plugin (runner/isolated_replay.h; a GPU's context does not survive a fork, so the
// device is made in the worker). `limit`: the simulator's memory limit, read once for all runs.
absl::StatusOr<ReplayReport> ReplayOnce(const Scenario& scenario, const FaultSet& faults,
                                        const ReplayCommand& c, Fidelity fidelity, int run,
                                        uint64_t scheduling_seed, const MemoryLimit& limit) {
  const auto replay = [&](const ReplayObserver& observer) -> absl::StatusOr<ReplayReport> {
    DMALAB_ASSIGN_OR_RETURN(RunDevice device, RunDevice::Make(ChoiceOf(c, fidelity, run),
                                                              scenario.world, scheduling_seed));
    ReplayOptions options;
    options.collective = c.run.collective;
    options.collective_options = c.run.collective_options;
    options.faults = faults;
    options.pieces = c.pieces;
    options.observer = observer;
    if (device.sim() != nullptr) {
      options.max_memory_bytes = limit.bytes;
      options.max_memory_source = limit.source;
    }
    return device.Replay(scenario, options);
  };
  if (!IsPluginPath(c.run.collective) || InRankProcess()) return replay(nullptr);
  return ReplayInWorker(replay, scenario, c.hang_seconds);
}

// The simulator's memory limit: --max-memory, else what is available now.
MemoryLimit LimitOf(const ReplayCommand& c) {
  return c.max_memory_bytes.has_value() ? MemoryLimit{*c.max_memory_bytes, ""} : AvailableMemory();
}

// Writes rank r of tensor `name` as DIR/FILE.rankR.npy, FILE = DumpFileName(name).
absl::Status Dump(Device& device, const std::string& dir, const std::string& name,
                  const std::vector<TensorView>& views) {
  for (size_t r = 0; r < views.size(); ++r) {
    std::vector<uint8_t> bytes(views[r].bytes());
    DMALAB_RETURN_IF_ERROR(device.Read(views[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes)));
    if (!IsLeadProcess()) continue;  // every rank process reads (in lockstep); rank 0 writes
    const std::string path = absl::StrFormat("%s/%s.rank%d.npy", dir, DumpFileName(name), r);
    DMALAB_RETURN_IF_ERROR(WriteNpy(path, views[r].dtype, views[r].shape, bytes));
  }
  return absl::OkStatus();
}

// The runs made at once: --jobs (all cores by default), fewer when that many replays of the
// scenario would not fit in the memory available now, said on stderr. Also the memory limit
// every run is checked against, read once so that no run's verdict depends on the others.
int Jobs(const Scenario& scenario, const ReplayCommand& c, Fidelity fidelity, int most,
         MemoryLimit* limit) {
  *limit = LimitOf(c);
  const int wanted = std::min(c.jobs > 0 ? c.jobs : AvailableCores(), most);
  const int jobs =
      JobsWithinMemory(scenario, c.pieces, fidelity, c.run.collective, limit->bytes, wanted);
  if (jobs < wanted) {
    std::fprintf(stderr,
                 "dmalab replay: running %d replays at once, not %d: each needs its scenario's "
                 "memory, and %s are available\n",
                 jobs, wanted, BytesText(limit->bytes).c_str());
  }
  // A plugin's runs fork workers: one at a time in a sanitized build (WorkerJobs; the output is
  // the same for any number of jobs).
  return IsPluginPath(c.run.collective) ? WorkerJobs(jobs) : jobs;
}

// What a seed sweep takes of one run's report: all it prints and writes. It crosses processes
// when the runs are split over MPI ranks (runner/seed_split.h).
struct SeedOutcome {
  absl::Status status;  // the run's error, if it had one
  bool pass = true;
  std::optional<uint64_t> perturb_seed;
  int64_t findings_total = 0;
  int64_t distinct = 0;
  std::string checker, step, detail;  // the first distinct finding
  int step_index = 0;
  int rank = 0;
};

SeedOutcome OutcomeOf(const absl::StatusOr<ReplayReport>& r) {
  SeedOutcome o;
  if (!r.ok()) {
    o.status = r.status();
    return o;
  }
  o.pass = r->pass();
  o.perturb_seed = r->perturb_seed;
  o.findings_total = r->findings_total;
  o.distinct = static_cast<int64_t>(r->groups.size());
  if (!r->groups.empty()) {
    const ReplayFinding& f = r->groups.front().first;
    o.checker = f.checker;
    o.step = f.step;
    o.detail = f.detail;
    o.step_index = f.step_index;
    o.rank = f.rank;
  }
  return o;
}

std::string Serialize(const SeedOutcome& o) {
  return JoinFields({absl::StrCat(static_cast<int>(o.status.code())),
                     std::string(o.status.message()), o.pass ? "1" : "0",
                     o.perturb_seed ? absl::StrCat(*o.perturb_seed) : "",
                     absl::StrCat(o.findings_total), absl::StrCat(o.distinct), o.checker, o.step,
                     o.detail, absl::StrCat(o.step_index), absl::StrCat(o.rank)});
}

SeedOutcome ParseOutcome(const std::string& text) {
  SeedOutcome o;
  absl::StatusOr<std::vector<std::string>> f = SplitFields(text);
  int code = 0;
  uint64_t seed = 0;
  if (!f.ok() || f->size() != 11 || !absl::SimpleAtoi((*f)[0], &code) ||
      !absl::SimpleAtoi((*f)[4], &o.findings_total) || !absl::SimpleAtoi((*f)[5], &o.distinct) ||
      !absl::SimpleAtoi((*f)[9], &o.step_index) || !absl::SimpleAtoi((*f)[10], &o.rank)) {
    o.status = absl::DataLossError("a run's result came back garbled from its MPI rank");
    return o;
  }
  o.status = absl::Status(static_cast<absl::StatusCode>(code), (*f)[1]);
  o.pass = (*f)[2] == "1";
  if (!(*f)[3].empty() && absl::SimpleAtoi((*f)[3], &seed)) o.perturb_seed = seed;
  o.checker = (*f)[6];
  o.step = (*f)[7];
  o.detail = (*f)[8];
  return o;
}

// --seeds=N: N replays (scheduling seeds 1..N on the simulator, perturbation seeds on GPUs), one
// line per failing one, then a summary. Exit 1 if any failed. Simulator runs go --jobs at a
// time; their reports are taken in seed order, so the output is the same. Under mpirun the runs
// are split over the ranks and rank 0 takes them all in seed order (runner/seed_split.h).
absl::StatusOr<int> RunSeedSweep(const Scenario& scenario, const FaultSet& faults,
                                 const ReplayCommand& c, Fidelity fidelity) {
  const auto start = std::chrono::steady_clock::now();
  const bool sim = c.backend == "sim";
  std::vector<uint64_t> failing;
  JsonWriter json;
  json.BeginObject();
  WriteJsonPreamble(json, "replay");
  json.Key("mode").String("seeds").Key("scenario").String(scenario.name);
  json.Key("file").String(scenario.file).Key("faults").String(faults.ToString());
  json.Key("fidelity").String(c.fidelity).Key("backend").String(c.backend);
  json.Key("seeds").Int(c.seeds);
  json.Key("failing").BeginArray();
  Progress progress("replay", "seeds", ProgressWanted(c.run.quiet));
  // Which seed names a run: the scheduling seed, the perturbation seed, or (unperturbed GPU runs)
  // the run's ordinal; as printed, and as a JSON key.
  const char* seed_name = sim ? "seed" : c.perturb ? "perturb_seed" : "run";
  const char* seed_key = sim ? "scheduling_seed" : seed_name;
  MemoryLimit limit;
  const int jobs = sim ? Jobs(scenario, c, fidelity, c.seeds, &limit) : 1;
  absl::Status error;
  const auto run_one = [&](int64_t i) {
    const int run = static_cast<int>(i + 1);
    return OutcomeOf(
        ReplayOnce(scenario, faults, c, fidelity, run, static_cast<uint64_t>(run), limit));
  };
  const auto take = [&](int64_t i, const SeedOutcome& r) {
    const int run = static_cast<int>(i + 1);
    if (!r.status.ok()) {
      error = r.status;
      return Consumed::kStop;
    }
    const uint64_t seed =
        sim ? run : (r.perturb_seed ? *r.perturb_seed : static_cast<uint64_t>(run));
    progress.Update(run, c.seeds, absl::StrFormat("%zu failing", failing.size()));
    if (r.pass) return Consumed::kContinue;
    failing.push_back(seed);
    const std::string where =
        r.step_index > 0 ? absl::StrFormat("step %d %s", r.step_index, r.step) : r.step;
    progress.Clear();
    std::printf("%s=%llu FAIL findings=%lld (%lld distinct) first: %s at %s, rank %d: %s\n",
                seed_name, static_cast<unsigned long long>(seed),
                static_cast<long long>(r.findings_total), static_cast<long long>(r.distinct),
                r.checker.c_str(), where.c_str(), r.rank, r.detail.substr(0, 200).c_str());
    json.BeginObject().Key(seed_key).UInt(seed);
    json.Key("findings_total").Int(r.findings_total);
    json.Key("findings_distinct").Int(r.distinct);
    json.Key("first_checker").String(r.checker).Key("first_step").String(r.step);
    json.Key("first_rank").Int(r.rank).Key("first_detail").String(r.detail).EndObject();
    return Consumed::kContinue;
  };
  if (CurrentSeedSplit().size > 1) {
    const auto run_serialized = [&](int64_t i) { return Serialize(run_one(i)); };
    const auto take_serialized = [&](int64_t i, const std::string& text) {
      return take(i, ParseOutcome(text)) == Consumed::kContinue;
    };
    DMALAB_RETURN_IF_ERROR(RunSplit(c.seeds, jobs, run_serialized, take_serialized));
    if (CurrentSeedSplit().rank != 0) return cli::kExitPass;  // rank 0 decides (seed_split.h)
  } else {
    RunOrdered<SeedOutcome>(
        c.seeds, jobs, [](int64_t) { return 0; }, run_one,
        [&](int64_t i, SeedOutcome& r) { return take(i, r); });
  }
  DMALAB_RETURN_IF_ERROR(error);
  progress.Clear();
  json.EndArray();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string runs = absl::StrFormat("seeds 1..%d", c.seeds);
  std::string again;
  if (!sim && c.perturb) {
    runs = absl::StrFormat("perturbation seeds %llu..%llu",
                           static_cast<unsigned long long>(*c.perturb),
                           static_cast<unsigned long long>(*c.perturb + c.seeds - 1));
    if (!failing.empty())
      again = absl::StrFormat("; replay it with --perturb=%llu",
                              static_cast<unsigned long long>(failing[0]));
  } else if (!sim) {
    runs = absl::StrFormat("%d unperturbed runs", c.seeds);
  }
  std::printf("%s: %zu failing%s, inject %s, fidelity %s, %.1f s, status=%s\n", runs.c_str(),
              failing.size(),
              failing.empty() ? ""
                              : absl::StrFormat(" (first %s %llu%s)", seed_name,
                                                static_cast<unsigned long long>(failing[0]), again)
                                    .c_str(),
              faults.ToString().c_str(), c.fidelity.c_str(), s, failing.empty() ? "PASS" : "FAIL");
  json.Key("status").String(failing.empty() ? "PASS" : "FAIL").EndObject();
  if (!c.run.json.empty() && IsLeadProcess()) {
    DMALAB_RETURN_IF_ERROR(Prefixed("--json: ", WriteTextFile(c.run.json, json.str() + "\n")));
  }
  return failing.empty() ? cli::kExitPass : cli::kExitFailed;
}

// --check-determinism: the same seed twice must give the same report, byte for byte. With
// --jobs of 2 or more the two replays run at once, on two threads. A crash or hang of the
// collective fails the run in this mode too (the reports may well agree).
absl::StatusOr<int> CheckDeterminism(const Scenario& scenario, const FaultSet& faults,
                                     uint64_t seed, const ReplayCommand& c, Fidelity fidelity) {
  std::string text[2];
  std::optional<ReplayFinding> broke;
  MemoryLimit limit;
  const int jobs = Jobs(scenario, c, fidelity, 2, &limit);
  absl::Status error;
  RunOrdered<absl::StatusOr<ReplayReport>>(
      2, jobs, [](int64_t) { return 0; },
      [&](int64_t) {
        return ReplayOnSim(scenario, faults, seed, c.pieces, fidelity, c.run.collective,
                           c.hang_seconds, limit);
      },
      [&](int64_t i, absl::StatusOr<ReplayReport>& r) {
        if (!r.ok()) {
          error = r.status();
          return Consumed::kStop;
        }
        text[i] = FormatReportText(*r) + FormatReportJson(*r);
        for (const ReplayFinding& f : r->findings) {
          if (!broke.has_value() && (f.kind == ReplayFindingKind::kCollectiveCrash ||
                                     f.kind == ReplayFindingKind::kCollectiveHang)) {
            broke = f;
          }
        }
        return Consumed::kContinue;
      });
  DMALAB_RETURN_IF_ERROR(error);
  if (text[0] == text[1]) {
    std::printf("determinism: seed %llu, inject %s: two runs gave identical reports (%zu bytes)\n",
                static_cast<unsigned long long>(seed), faults.ToString().c_str(), text[0].size());
    if (!broke.has_value()) return cli::kExitPass;
  }
  if (broke.has_value()) {
    std::printf("determinism: the collective failed: %s: %s\n", broke->checker.c_str(),
                broke->detail.c_str());
    if (text[0] == text[1]) return cli::kExitFailed;
  }
  size_t at = 0;
  while (at < text[0].size() && at < text[1].size() && text[0][at] == text[1][at]) ++at;
  std::printf("determinism: seed %llu: reports differ from byte %zu:\n  run 1: %s\n  run 2: %s\n",
              static_cast<unsigned long long>(seed), at, text[0].substr(at, 120).c_str(),
              text[1].substr(at, 120).c_str());
  return cli::kExitFailed;
}

absl::StatusOr<int> Execute(const ReplayCommand& c) {
  if (c.file.empty()) {
    return absl::InvalidArgumentError(
        "usage: dmalab replay FILE [flags]; see dmalab replay --help");
  }
  DMALAB_RETURN_IF_ERROR(Prefixed("--collective: ", CheckCollective(c.run.collective)));
  DMALAB_ASSIGN_OR_RETURN(const Scenario scenario, LoadScenarioFile(c.file));
  if (IsLeadProcess()) {
    for (const std::string& w : IntegerSumWarnings(scenario)) {
      std::fprintf(stderr, "dmalab replay: warning: %s\n", w.c_str());
    }
  }
  DMALAB_ASSIGN_OR_RETURN(const FaultSet faults, FaultSet::Parse(c.inject));
  const uint64_t seed = c.seed.value_or(scenario.seed);
  if (c.seeds < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("--seeds is %d; must be >= 0", c.seeds));
  }
  if (c.check_determinism && c.backend != "sim") {
    return absl::InvalidArgumentError("--check-determinism needs --backend=sim");
  }
  absl::StatusOr<Fidelity> parsed_fidelity = ParseFidelity(c.fidelity);
  if (!parsed_fidelity.ok()) return Prefixed("--", parsed_fidelity.status());
  const Fidelity fidelity = *parsed_fidelity;
  if (fidelity == Fidelity::kShadow && c.backend != "sim") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--fidelity=shadow needs --backend=sim; --backend is '%s', which holds values", c.backend));
  }
  if (fidelity == Fidelity::kShadow && !c.dump_dir.empty()) {
    return absl::InvalidArgumentError(
        "--dump needs values; the shadow fidelity keeps none (drop --fidelity=shadow)");
  }
  DMALAB_RETURN_IF_ERROR(CheckCollectiveOptions(c.run, c.check_determinism
                                                           ? "replay --check-determinism"
                                                       : c.seeds > 0 ? "replay --seeds"
                                                                     : ""));
  if (CurrentSeedSplit().size > 1 && (c.seeds == 0 || c.procs > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launched as one of %d MPI processes: replay splits --seeds=N over them (one process per "
        "rank of a run is --procs, not mpirun)",
        CurrentSeedSplit().size));
  }
  if (c.check_determinism) return CheckDeterminism(scenario, faults, seed, c, fidelity);
  DMALAB_RETURN_IF_ERROR(CheckDeviceChoice(ChoiceOf(c, fidelity, 0)));
  if (c.procs > 0) {
    if (c.procs != scenario.world) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--procs is %d, but scenario '%s' has world %d; --procs starts one process per rank",
          c.procs, scenario.name, scenario.world));
    }
    if (!InRankProcess()) {
      DMALAB_RETURN_IF_ERROR(CheckProcsCollective(c.run.collective));
      return LaunchRankProcesses("replay", c.procs);
    }
  }
  if (c.seeds > 0) return RunSeedSweep(scenario, faults, c, fidelity);
  if (!c.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.dump_dir, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--dump: cannot create '%s': %s", c.dump_dir, ec.message()));
    }
  }
  // The simulator holds every rank's memory in this process: refuse a run that cannot fit
  // rather than die in the allocator.
  const MemoryLimit limit = LimitOf(c);
  // The whole run, device included (a GPU's context does not survive a fork): in this process
  // for the ring, in a worker for a plugin (runner/isolated_replay.h).
  const auto replay = [&](const ReplayObserver& observer) -> absl::StatusOr<ReplayReport> {
    DMALAB_ASSIGN_OR_RETURN(RunDevice device,
                            RunDevice::Make(ChoiceOf(c, fidelity, 0), scenario.world, seed));
    ReplayOptions options;
    options.collective = c.run.collective;
    options.collective_options = c.run.collective_options;
    options.faults = faults;
    options.pieces = c.pieces;
    options.observer = observer;
    if (device.sim() != nullptr) {
      options.max_memory_bytes = limit.bytes;
      options.max_memory_source = limit.source;
    }
    Progress progress("replay", "steps", ProgressWanted(c.run.quiet));
    options.progress = [&progress, &c](int64_t done, int64_t total) {
      progress.Update(done, total);
      if (c.progress) c.progress(done, total);
    };
    Device& dev = *device.get();
    if (!c.dump_dir.empty()) {
      options.inspect_at_end = [&dev, &c](const std::string& name,
                                          const std::vector<TensorView>& views) {
        return Dump(dev, c.dump_dir, name, views);
      };
    }
    absl::StatusOr<ReplayReport> report = device.Replay(scenario, options);
    progress.Clear();
    return report;
  };
  // A rank process runs its plugin instance itself: it is the process of one rank already, and
  // its connection to the others is its own.
  DMALAB_ASSIGN_OR_RETURN(const ReplayReport report,
                          IsPluginPath(c.run.collective) && !InRankProcess()
                              ? ReplayInWorker(replay, scenario, c.hang_seconds)
                              : replay(nullptr));

  std::fputs(FormatReportText(report).c_str(), stdout);
  bool expectation_met = true;
  std::vector<std::string> diffs;
  const Expectation* expect = FindExpectation(scenario, faults);
  if (expect != nullptr) {
    diffs = CompareWithExpectation(*expect, report);
    expectation_met = diffs.empty();
    std::printf("%s\n", ExpectationLine(*expect, report, diffs).c_str());
    for (const std::string& d : diffs) std::printf("  %s\n", d.c_str());
  }
  if (!c.run.json.empty()) {
    std::string json = FormatReportJson(report);
    // The expectation, as one more member of the report object.
    JsonWriter e;
    e.BeginObject();
    if (expect == nullptr) {
      e.Key("stated").Bool(false);
    } else {
      e.Key("stated").Bool(true).Key("met").Bool(expectation_met).Key("differences").BeginArray();
      for (const std::string& d : diffs) e.String(d);
      e.EndArray();
    }
    e.EndObject();
    json.insert(json.size() - 1, ",\"expectation\":" + e.str());
    if (IsLeadProcess()) {
      DMALAB_RETURN_IF_ERROR(Prefixed("--json: ", WriteTextFile(c.run.json, json + "\n")));
    }
  }
  return report.pass() && expectation_met ? cli::kExitPass : cli::kExitFailed;
}

}  // namespace

int RunReplayCommand(const ReplayCommand& c) { return ExitStatus("replay", Execute(c)); }

}  // namespace dmalab
