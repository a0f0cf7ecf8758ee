// `dmalab replay`: loads a scenario, replays it on the simulator or the GPU, prints the report.
#ifndef DMALAB_TOOLS_REPLAY_COMMAND_H_
#define DMALAB_TOOLS_REPLAY_COMMAND_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "runner/isolated_run.h"
#include "tools/command.h"

namespace dmalab {

struct ReplayCommand {
  std::string file;
  std::string backend = "sim";      // "sim" or "hw"
  std::string fidelity = "values";  // sim: "values" or "shadow" (no payload: provenance only)
  std::optional<uint64_t> seed;     // simulator scheduling seed; default: the scenario's seed
  std::string inject;               // comma-separated fault names
  std::string dump_dir;             // write every live tensor per rank as .npy here when set
  int gpus = 1;                     // hw: GPUs the ranks spread over
  // hw: one process per rank (runner/rank_process.h); must be the scenario's world. 0: one
  // process drives every rank.
  int procs = 0;
  // hw: perturb the schedule with this seed (measure/perturbing_device.h); with `seeds`, the
  // first of the perturbation seeds.
  std::optional<uint64_t> perturb;
  int pieces = 2;
  // > 0: that many replays, listing the failing ones: scheduling seeds 1..seeds on the simulator;
  // on GPUs perturbation seeds perturb..perturb+seeds-1 (unperturbed runs without --perturb).
  int seeds = 0;
  bool check_determinism = false;  // sim: replay one seed twice, compare the report bytes
  int jobs = 0;  // sim, --seeds and --check-determinism: runs at once; 0: AvailableCores()
  RunFlags run;  // --collective, --json (the report), --quiet
  // --timeout: a plugin runs in a worker process; a step it has not ended after this many
  // seconds is a collective_hang finding (runner/isolated_replay.h).
  int hang_seconds = kDefaultHangSeconds;
  // sim: refuse a run whose memory need (EstimateReplayMemory) exceeds this many bytes; default
  // the available physical memory (AvailableMemoryBytes).
  std::optional<uint64_t> max_memory_bytes;
  // Called with (steps done, total) during the replay (ReplayOptions::progress); optional.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Returns the process exit status: 0 PASS (and the scenario's expectation for these faults, if
// it states one, met), 1 a check failed or the expectation was not met, 2 bad input or usage.
int RunReplayCommand(const ReplayCommand& command);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_REPLAY_COMMAND_H_
