#include "tools/sim_replay.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"

namespace dmalab {

absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces, Fidelity fidelity) {
  SimDevice device(scenario.world, seed, fidelity);
  ReplayOptions options;
  options.faults = faults;
  options.pieces = pieces;
  options.poll_device_findings = NewFindingsPoller(device);
  options.max_memory_bytes = AvailableMemoryBytes();
  return Replay(scenario, &device, options);
}

std::string CheckerOf(const ReplayFinding& finding) {
  if (finding.kind == ReplayFindingKind::kDeviceChecker) {
    const size_t colon = finding.detail.find(':');
    return colon == std::string::npos ? "device_checker" : finding.detail.substr(0, colon);
  }
  return std::string(ReplayFindingKindName(finding.kind));
}

}  // namespace dmalab
