#include "tools/sim_replay.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "common/plugin/open_collective.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"
#include "tools/isolated_replay.h"

namespace dmalab {

absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces, Fidelity fidelity,
                                         const std::string& collective, int hang_seconds) {
  const MemoryLimit limit = AvailableMemory();
  const auto replay = [&](const ReplayObserver& observer) -> absl::StatusOr<ReplayReport> {
    SimDevice device(scenario.world, seed, fidelity);
    ReplayOptions options;
    options.collective = collective;
    options.faults = faults;
    options.pieces = pieces;
    options.poll_device_findings = NewFindingsPoller(device);
    options.max_memory_bytes = limit.bytes;
    options.max_memory_source = limit.source;
    options.observer = observer;
    absl::StatusOr<ReplayReport> report = Replay(scenario, &device, options);
    if (report.ok()) report->scheduling_seed = seed;
    return report;
  };
  if (!IsPluginPath(collective)) return replay(nullptr);
  return ReplayInWorker(replay, scenario, hang_seconds);
}

std::string CheckerOf(const ReplayFinding& finding) { return finding.checker; }

}  // namespace dmalab
