// Replaying a scenario on the simulator with one scheduling seed, and naming the checker behind
// each finding: the building block of `dmalab replay --seeds`, `--check-determinism` and
// `dmalab zoo`.
#ifndef DMALAB_RUNNER_SIM_REPLAY_H_
#define DMALAB_RUNNER_SIM_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dmalab/faults.h"
#include "dmalab/replay.h"
#include "dmalab/scenario.h"
#include "runner/host_memory.h"
#include "runner/isolated_run.h"  // kDefaultHangSeconds
#include "sim/sim_device.h"

namespace dmalab {

// Replays `scenario` on a fresh SimDevice of `fidelity` seeded with `seed` (every scheduling
// choice), with the simulator's own checkers (races, use after free or reuse, deadlock) polled
// into the report. A plugin runs in a worker process (runner/isolated_replay.h): its crash, exit
// or a step longer than `hang_seconds` is a finding. An error is bad input (the scenario cannot
// run, needs more than the available memory, an all-reduce rejects its arguments).
// `limit`: the memory limit of the run (ReplayOptions::max_memory_bytes); unset, the memory
// available now (AvailableMemory). Runs made at once share one value read before any of them,
// so a run's verdict does not depend on what else runs.
absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, const FaultSet& faults,
                                         uint64_t seed, int pieces = 2,
                                         Fidelity fidelity = Fidelity::kValues,
                                         const std::string& collective = "ring",
                                         int hang_seconds = kDefaultHangSeconds,
                                         std::optional<MemoryLimit> limit = std::nullopt);

// How many replays of `scenario` fit at once in `budget` bytes: `jobs`, or fewer when that many
// would need more (EstimateReplayMemory; the shadow fidelity holds no payload, so `jobs`), at
// least 1 (a run that needs more than the budget alone is refused by the replay itself).
int JobsWithinMemory(const Scenario& scenario, int pieces, Fidelity fidelity,
                     const std::string& collective, uint64_t budget, int jobs);

// The checker that made a finding: the simulator checker's kind for device findings ("race",
// "use_after_free", ...), else the replay check ("retained_mismatch", "rank_inconsistent", ...).
std::string CheckerOf(const ReplayFinding& finding);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_SIM_REPLAY_H_
