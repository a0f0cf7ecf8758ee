#include "runner/sim_replay.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/plugin/open_collective.h"
#include "runner/host_memory.h"
#include "runner/isolated_replay.h"
#include "sim/sim_device.h"

namespace dmalab {

absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces, Fidelity fidelity,
                                         const std::string& collective, int hang_seconds,
                                         std::optional<MemoryLimit> limit) {
  if (!limit.has_value()) limit = AvailableMemory();
  const auto replay = [&](const ReplayObserver& observer) -> absl::StatusOr<ReplayReport> {
    SimDevice device(scenario.world, seed, fidelity);
    ReplayOptions options;
    options.collective = collective;
    options.faults = faults;
    options.pieces = pieces;
    options.poll_device_findings = NewFindingsPoller(device);
    options.max_memory_bytes = limit->bytes;
    options.max_memory_source = limit->source;
    options.observer = observer;
    absl::StatusOr<ReplayReport> report = Replay(scenario, &device, options);
    if (report.ok()) report->scheduling_seed = seed;
    return report;
  };
  // A plugin's replay runs in a forked worker. With --jobs, the threads that fork run no
  // replay themselves (only the workers do), so no lock of the simulator is held at a fork.
  if (!IsPluginPath(collective)) return replay(nullptr);
  return ReplayInWorker(replay, scenario, hang_seconds);
}

int JobsWithinMemory(const Scenario& scenario, int pieces, Fidelity fidelity,
                     const std::string& collective, uint64_t budget, int jobs) {
  if (fidelity != Fidelity::kValues) return jobs;
  ReplayOptions options;
  options.collective = collective;
  options.pieces = pieces;
  const uint64_t need = EstimateReplayMemory(scenario, options).Total();
  if (need == 0) return jobs;
  return static_cast<int>(std::clamp<uint64_t>(budget / need, 1, static_cast<uint64_t>(jobs)));
}

std::string CheckerOf(const ReplayFinding& finding) { return finding.checker; }

}  // namespace dmalab
