#include "tools/sim_replay.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"

namespace dmalab {

absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces, Fidelity fidelity,
                                         const std::string& collective) {
  SimDevice device(scenario.world, seed, fidelity);
  ReplayOptions options;
  options.collective = collective;
  options.faults = faults;
  options.pieces = pieces;
  options.poll_device_findings = NewFindingsPoller(device);
  const MemoryLimit limit = AvailableMemory();
  options.max_memory_bytes = limit.bytes;
  options.max_memory_source = limit.source;
  absl::StatusOr<ReplayReport> report = Replay(scenario, &device, options);
  if (report.ok()) report->scheduling_seed = seed;
  return report;
}

std::string CheckerOf(const ReplayFinding& finding) { return finding.checker; }

}  // namespace dmalab
