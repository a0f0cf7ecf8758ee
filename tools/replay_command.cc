#include "tools/replay_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/replay.h"
#include "common/replay_expectations.h"
#include "common/report.h"
#include "common/scenario_loader.h"
#include "sim/sim_device.h"
#include "tools/npy.h"
#ifdef DMALAB_HAVE_CUDA
#include "hw/cuda_device.h"
#endif

namespace dmalab {
namespace {

int BadInput(const std::string& message) {
  std::fprintf(stderr, "dmalab replay: %s\n", message.c_str());
  return 2;
}

absl::StatusOr<std::unique_ptr<Device>> MakeDevice(const ReplayCommand& c, int world,
                                                   uint64_t seed) {
  if (c.backend == "sim") return std::unique_ptr<Device>(new SimDevice(world, seed));
  if (c.backend == "hw") {
#ifdef DMALAB_HAVE_CUDA
    absl::StatusOr<std::unique_ptr<CudaDevice>> d = CudaDevice::Create(world, c.gpus);
    if (!d.ok()) return d.status();
    return std::unique_ptr<Device>(std::move(*d));
#else
    return absl::FailedPreconditionError(
        "--backend=hw: this build has no CUDA backend (no CUDA toolkit was found)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("--backend is '%s'; allowed: sim, hw", c.backend));
}

// Writes rank r of tensor `name` as DIR/NAME.rankR.npy.
absl::Status Dump(Device& device, const std::string& dir, const std::string& name,
                  const std::vector<TensorView>& views) {
  for (size_t r = 0; r < views.size(); ++r) {
    std::vector<uint8_t> bytes(views[r].bytes());
    if (absl::Status s = device.Read(views[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
        !s.ok()) {
      return s;
    }
    const std::string path = absl::StrFormat("%s/%s.rank%d.npy", dir, name, r);
    if (absl::Status s = WriteNpy(path, views[r].dtype, views[r].shape, bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

int RunReplayCommand(const ReplayCommand& c) {
  if (c.file.empty()) return BadInput("usage: dmalab replay FILE [flags]; see dmalab help");
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(c.file);
  if (!scenario.ok()) return BadInput(std::string(scenario.status().message()));
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(c.inject);
  if (!faults.ok()) return BadInput(std::string(faults.status().message()));
  const uint64_t seed = c.seed.value_or(scenario->seed);
  absl::StatusOr<std::unique_ptr<Device>> device = MakeDevice(c, scenario->world, seed);
  if (!device.ok()) return BadInput(std::string(device.status().message()));
  if (!c.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(c.dump_dir, ec);
    if (ec) return BadInput(absl::StrFormat("--dump: cannot create '%s': %s", c.dump_dir,
                                            ec.message()));
  }

  ReplayOptions options;
  options.faults = *faults;
  options.pieces = c.pieces;
  auto* sim = dynamic_cast<SimDevice*>(device->get());
  size_t seen = 0;
  if (sim != nullptr) {
    options.poll_device_findings = [sim, &seen]() {
      std::vector<std::string> lines;
      const auto& all = sim->findings().findings();
      for (; seen < all.size(); ++seen) {
        lines.push_back(absl::StrFormat("%s: %s", FindingKindName(all[seen].kind),
                                        all[seen].message));
      }
      return lines;
    };
  }
  Device& dev = **device;
  if (!c.dump_dir.empty()) {
    options.inspect_at_end = [&dev, &c](const std::string& name,
                                        const std::vector<TensorView>& views) {
      return Dump(dev, c.dump_dir, name, views);
    };
  }
  absl::StatusOr<ReplayReport> report = Replay(*scenario, device->get(), options);
  if (!report.ok()) return BadInput(std::string(report.status().message()));

  std::fputs(FormatReportText(*report).c_str(), stdout);
  if (sim != nullptr) std::printf("seed=%llu\n", static_cast<unsigned long long>(seed));
  if (const Expectation* expect = FindExpectation(*scenario, *faults)) {
    const std::vector<std::string> diffs = CompareWithExpectation(*expect, *report);
    std::printf("expectation: %s\n", diffs.empty() ? "met" : "NOT met");
    for (const std::string& d : diffs) std::printf("  %s\n", d.c_str());
  }
  if (!c.json_path.empty()) {
    std::ofstream out(c.json_path);
    out << FormatReportJson(*report) << "\n";
    if (!out) return BadInput(absl::StrFormat("--json: cannot write '%s'", c.json_path));
  }
  return report->pass() ? 0 : 1;
}

}  // namespace dmalab
