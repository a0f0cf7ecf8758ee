// One process per rank on real GPUs (`--procs=W`), as deployments run their collectives.
//
// The command the user started is the launcher: it checks its arguments, then starts W copies of
// itself with the same arguments (runner/launcher.h), each told its rank, the world and a fresh
// bootstrap address through the environment, and waits for them. Each copy is a rank process: it
// connects to the others (common/plugin/socket_bootstrap.h), drives its own rank's GPU (its
// local rank modulo the GPUs it sees) as a one-rank CudaDevice, and runs the very same command
// on a LockstepDevice over it (common/spmd/lockstep_device.h): every process makes every Device
// call, each carries out its own rank's, peers' memory is reached through CUDA IPC mappings, and
// host reads are broadcast, so every process reaches the same verdict. Rank 0 prints the report
// and writes the files; the others print nothing on stdout (their errors still reach stderr).
//
// Exit status: every rank finished: rank 0's (0 PASS, 1 a check failed). A rank that ended
// otherwise is named on stderr; the launch then exits with that rank's status when it is 2 (bad
// input: the rank said why), else 1 (the run could not complete: a rank crashed, hung or was
// ended).
#ifndef DMALAB_RUNNER_RANK_PROCESS_H_
#define DMALAB_RUNNER_RANK_PROCESS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/plugin/spmd_process.h"
#include "dmalab/device.h"

namespace dmalab {

// Most processes `--procs` starts (one per rank; the ring has at most 16 ranks).
inline constexpr int kMaxProcs = 16;

// Remembers the command line, for the launcher to start copies of it (main calls this first).
void SetProgramArguments(int argc, const char* const* argv);

// True in a process started by --procs (or by any launcher that set DMALAB_RANK).
bool InRankProcess();
// True where a command prints its report and writes its files: outside rank processes, and in
// rank 0.
bool IsLeadProcess();

// The collective a --procs run may run (checked by the launcher, before it starts anything): the
// built-in ring, or a plugin speaking ABI v2 (one instance per rank, each in its rank's
// process). InvalidArgument naming the ABI for an ABI v1 plugin, whose one instance drives every
// rank, and the loader's error for a plugin that does not load.
absl::Status CheckProcsCollective(const std::string& collective);

// The launcher: starts `procs` copies of this command line and waits for them; returns the
// command's exit status (above). `command` names the command in messages ("replay").
int LaunchRankProcesses(std::string_view command, int procs);

// In a rank process: this rank's device, connected to the other ranks (the bootstrap connects on
// the first call and serves every later one). `world` is what the command expects (its
// scenario's or --ranks); a launch of another size is refused naming both.
class RankProcessDevice {
 public:
  struct Options {
    int world = 1;
    // Seeded stream priorities of the rank's CUDA streams (--perturb), or none.
    std::optional<uint64_t> stream_priority_seed;
  };
  static absl::StatusOr<std::unique_ptr<RankProcessDevice>> Create(const Options& options);
  virtual ~RankProcessDevice() = default;

  // The W-rank device this process runs its part of.
  virtual Device* get() = 0;
  // This process's rank.
  virtual int rank() const = 0;
  // What an ABI v2 plugin's instance of this rank runs on (common/plugin/spmd_process.h).
  virtual SpmdProcess* process() = 0;
  // Enqueues a spin on `stream` when it is this process's rank's (the perturbation's delays);
  // other ranks' streams are theirs to delay.
  virtual absl::Status Spin(StreamId stream, uint64_t ns) = 0;
};

}  // namespace dmalab

#endif  // DMALAB_RUNNER_RANK_PROCESS_H_
