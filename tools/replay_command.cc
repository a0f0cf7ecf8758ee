#include "tools/replay_command.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/core/json_writer.h"
#include "common/core/version.h"
#include "common/scenario/replay.h"
#include "common/scenario/replay_expectations.h"
#include "common/scenario/report.h"
#include "common/scenario/scenario_loader.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"
#include "tools/npy.h"
#include "tools/progress.h"
#include "tools/run_device.h"
#include "tools/sim_replay.h"

namespace dmalab {
namespace {

int BadInput(const std::string& message) {
  std::fprintf(stderr, "dmalab replay: %s\n", message.c_str());
  return 2;
}

// The device of run `run` (1-based) of --seeds: scheduling seed `run` on the simulator; on GPUs
// perturbation seed perturb + run - 1, or none without --perturb. One run: the command's seeds.
DeviceChoice ChoiceOf(const ReplayCommand& c, Fidelity fidelity, int run) {
  DeviceChoice d;
  d.backend = c.backend;
  d.gpus = c.gpus;
  d.fidelity = fidelity;
  if (c.perturb) d.perturb_seed = *c.perturb + static_cast<uint64_t>(run > 0 ? run - 1 : 0);
  return d;
}

absl::StatusOr<ReplayReport> ReplayOnce(const Scenario& scenario, const FaultSet& faults,
                                        const ReplayCommand& c, Fidelity fidelity, int run,
                                        uint64_t scheduling_seed) {
  absl::StatusOr<RunDevice> device =
      RunDevice::Make(ChoiceOf(c, fidelity, run), scenario.world, scheduling_seed);
  if (!device.ok()) return device.status();
  ReplayOptions options;
  options.collective = c.run.collective;
  options.faults = faults;
  options.pieces = c.pieces;
  if (device->sim() != nullptr) options.max_memory_bytes = AvailableMemoryBytes();
  return device->Replay(scenario, options);
}

// Writes rank r of tensor `name` as DIR/FILE.rankR.npy, FILE = DumpFileName(name).
absl::Status Dump(Device& device, const std::string& dir, const std::string& name,
                  const std::vector<TensorView>& views) {
  for (size_t r = 0; r < views.size(); ++r) {
    std::vector<uint8_t> bytes(views[r].bytes());
    if (absl::Status s = device.Read(views[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
        !s.ok()) {
      return s;
    }
    const std::string path = absl::StrFormat("%s/%s.rank%d.npy", dir, DumpFileName(name), r);
    if (absl::Status s = WriteNpy(path, views[r].dtype, views[r].shape, bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// --seeds=N: N replays (scheduling seeds 1..N on the simulator, perturbation seeds on GPUs), one
// line per failing one, then a summary. Exit 1 if any failed.
int RunSeedSweep(const Scenario& scenario, const FaultSet& faults, const ReplayCommand& c,
                 Fidelity fidelity) {
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
  for (int run = 1; run <= c.seeds; ++run) {
    absl::StatusOr<ReplayReport> r = ReplayOnce(scenario, faults, c, fidelity, run, run);
    if (!r.ok()) return BadInput(std::string(r.status().message()));
    const uint64_t seed =
        sim ? run : (r->perturb_seed ? *r->perturb_seed : static_cast<uint64_t>(run));
    progress.Update(run, c.seeds, absl::StrFormat("%zu failing", failing.size()));
    if (r->pass()) continue;
    failing.push_back(seed);
    const ReplayFinding& f = r->groups.front().first;
    const std::string where =
        f.step_index > 0 ? absl::StrFormat("step %d %s", f.step_index, f.step) : f.step;
    progress.Clear();
    std::printf("%s=%llu FAIL findings=%lld (%zu distinct) first: %s at %s, rank %d: %s\n",
                seed_name, static_cast<unsigned long long>(seed),
                static_cast<long long>(r->findings_total), r->groups.size(), f.checker.c_str(),
                where.c_str(), f.rank, f.detail.substr(0, 200).c_str());
    json.BeginObject().Key(seed_key).UInt(seed);
    json.Key("findings_total").Int(r->findings_total);
    json.Key("findings_distinct").Int(static_cast<int64_t>(r->groups.size()));
    json.Key("first_checker").String(f.checker).Key("first_step").String(f.step);
    json.Key("first_rank").Int(f.rank).Key("first_detail").String(f.detail).EndObject();
  }
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
  if (!c.run.json.empty()) {
    if (absl::Status st = WriteTextFile(c.run.json, json.str() + "\n"); !st.ok()) {
      return BadInput(absl::StrFormat("--json: %s", st.message()));
    }
  }
  return failing.empty() ? 0 : 1;
}

// --check-determinism: the same seed twice must give the same report, byte for byte.
int CheckDeterminism(const Scenario& scenario, const FaultSet& faults, uint64_t seed, int pieces,
                     Fidelity fidelity, const std::string& collective) {
  std::string text[2];
  for (std::string& t : text) {
    absl::StatusOr<ReplayReport> r =
        ReplayOnSim(scenario, faults, seed, pieces, fidelity, collective);
    if (!r.ok()) return BadInput(std::string(r.status().message()));
    t = FormatReportText(*r) + FormatReportJson(*r);
  }
  if (text[0] == text[1]) {
    std::printf("determinism: seed %llu, inject %s: two runs gave identical reports (%zu bytes)\n",
                static_cast<unsigned long long>(seed), faults.ToString().c_str(), text[0].size());
    return 0;
  }
  size_t at = 0;
  while (at < text[0].size() && at < text[1].size() && text[0][at] == text[1][at]) ++at;
  std::printf("determinism: seed %llu: reports differ from byte %zu:\n  run 1: %s\n  run 2: %s\n",
              static_cast<unsigned long long>(seed), at, text[0].substr(at, 120).c_str(),
              text[1].substr(at, 120).c_str());
  return 1;
}

}  // namespace

int RunReplayCommand(const ReplayCommand& c) {
  if (c.file.empty())
    return BadInput("usage: dmalab replay FILE [flags]; see dmalab replay --help");
  if (absl::Status s = CheckCollective(c.run.collective); !s.ok()) {
    return BadInput(absl::StrFormat("--collective: %s", s.message()));
  }
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(c.file);
  if (!scenario.ok()) return BadInput(std::string(scenario.status().message()));
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(c.inject);
  if (!faults.ok()) return BadInput(std::string(faults.status().message()));
  const uint64_t seed = c.seed.value_or(scenario->seed);
  if (c.seeds < 0) return BadInput(absl::StrFormat("--seeds is %d; must be >= 0", c.seeds));
  if (c.check_determinism && c.backend != "sim") {
    return BadInput("--check-determinism needs --backend=sim");
  }
  absl::StatusOr<Fidelity> fidelity = ParseFidelity(c.fidelity);
  if (!fidelity.ok()) return BadInput(absl::StrFormat("--%s", fidelity.status().message()));
  if (*fidelity == Fidelity::kShadow && c.backend != "sim") {
    return BadInput(absl::StrFormat(
        "--fidelity=shadow needs --backend=sim; --backend is '%s', which holds values", c.backend));
  }
  if (*fidelity == Fidelity::kShadow && !c.dump_dir.empty()) {
    return BadInput("--dump needs values; the shadow fidelity keeps none (drop --fidelity=shadow)");
  }
  if (c.check_determinism)
    return CheckDeterminism(*scenario, *faults, seed, c.pieces, *fidelity, c.run.collective);
  if (absl::Status s = CheckDeviceChoice(ChoiceOf(c, *fidelity, 0)); !s.ok()) {
    return BadInput(std::string(s.message()));
  }
  if (c.seeds > 0) return RunSeedSweep(*scenario, *faults, c, *fidelity);
  absl::StatusOr<RunDevice> device =
      RunDevice::Make(ChoiceOf(c, *fidelity, 0), scenario->world, seed);
  if (!device.ok()) return BadInput(std::string(device.status().message()));
  if (!c.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.dump_dir, ec);
    if (ec)
      return BadInput(absl::StrFormat("--dump: cannot create '%s': %s", c.dump_dir, ec.message()));
  }

  ReplayOptions options;
  options.collective = c.run.collective;
  options.faults = *faults;
  options.pieces = c.pieces;
  // The simulator holds every rank's memory in this process: refuse a run that cannot fit
  // rather than die in the allocator.
  if (device->sim() != nullptr) {
    options.max_memory_bytes = c.max_memory_bytes.value_or(AvailableMemoryBytes());
  }
  Progress progress("replay", "steps", ProgressWanted(c.run.quiet));
  options.progress = [&progress, &c](int64_t done, int64_t total) {
    progress.Update(done, total);
    if (c.progress) c.progress(done, total);
  };
  Device& dev = *device->get();
  if (!c.dump_dir.empty()) {
    options.inspect_at_end = [&dev, &c](const std::string& name,
                                        const std::vector<TensorView>& views) {
      return Dump(dev, c.dump_dir, name, views);
    };
  }
  absl::StatusOr<ReplayReport> report = device->Replay(*scenario, options);
  progress.Clear();
  if (!report.ok()) return BadInput(std::string(report.status().message()));

  std::fputs(FormatReportText(*report).c_str(), stdout);
  bool expectation_met = true;
  std::vector<std::string> diffs;
  const Expectation* expect = FindExpectation(*scenario, *faults);
  if (expect != nullptr) {
    diffs = CompareWithExpectation(*expect, *report);
    expectation_met = diffs.empty();
    std::printf("expectation: %s\n", expectation_met ? "met" : "NOT met");
    for (const std::string& d : diffs) std::printf("  %s\n", d.c_str());
  }
  if (!c.run.json.empty()) {
    std::string json = FormatReportJson(*report);
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
    if (absl::Status s = WriteTextFile(c.run.json, json + "\n"); !s.ok()) {
      return BadInput(absl::StrFormat("--json: %s", s.message()));
    }
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    return BadInput(absl::StrFormat("cannot write the report to stdout: %s", std::strerror(errno)));
  }
  return report->pass() && expectation_met ? 0 : 1;
}

}  // namespace dmalab
