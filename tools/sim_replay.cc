#include "tools/sim_replay.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "sim/sim_device.h"
#include "tools/host_memory.h"

namespace dmalab {

absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces, Fidelity fidelity,
                                         const std::string& collective,
                                         std::optional<uint64_t> max_memory_bytes) {
  SimDevice device(scenario.world, seed, fidelity);
  ReplayOptions options;
  options.collective = collective;
  options.faults = faults;
  options.pieces = pieces;
  options.poll_device_findings = NewFindingsPoller(device);
  options.max_memory_bytes = max_memory_bytes.value_or(AvailableMemoryBytes());
  absl::StatusOr<ReplayReport> report = Replay(scenario, &device, options);
  if (report.ok()) report->scheduling_seed = seed;
  return report;
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
