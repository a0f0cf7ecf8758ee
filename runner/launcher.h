// Launching a multi-process run: one process per rank on this host (one per GPU), as torchrun or
// mpirun do locally. LaunchRanks starts W copies of a program, each told its rank through the
// environment, and a fresh bootstrap address (common/plugin/socket_bootstrap.h) through which
// they find each other; it waits for them all and reports how each ended.
//
// Failures are bounded and named: when one rank fails (exits non-zero, or is killed by a signal)
// the launcher ends the others (SIGTERM, then SIGKILL after a grace period), since they would
// only wait for it; past the optional overall timeout it ends all and names the ranks still
// running. Ranks die with the launcher (a parent-death signal, which follows the thread that
// forked them: call LaunchRanks from a thread that lives as long as the launch), and every child
// is reaped: no zombie, no orphan. Ranks inherit the launcher's stdout and stderr.
#ifndef DMALAB_RUNNER_LAUNCHER_H_
#define DMALAB_RUNNER_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dmalab {

// The environment a rank process reads (set by LaunchRanks).
inline constexpr char kRankEnv[] = "DMALAB_RANK";             // 0 <= rank < world
inline constexpr char kWorldEnv[] = "DMALAB_WORLD";           // 1 <= world <= kMaxLaunchWorld
inline constexpr char kBootstrapEnv[] = "DMALAB_BOOTSTRAP";   // SocketBootstrapOptions::address
inline constexpr char kLocalRankEnv[] = "DMALAB_LOCAL_RANK";  // the rank on this host (its GPU)
inline constexpr int kMaxLaunchWorld = 64;

struct LaunchOptions {
  // The program and its arguments; argv[0] is a path, or a name looked up in PATH.
  std::vector<std::string> argv;
  int world = 1;
  // The bootstrap address handed to the ranks; empty: a fresh abstract socket name.
  std::string address;
  // Past this the launcher ends all ranks; infinite: no bound.
  absl::Duration timeout = absl::InfiniteDuration();
  // After a rank's failure, how long the others have to end by themselves (and say why) before
  // the launcher ends them.
  absl::Duration settle = absl::Seconds(1);
  // How long ranks have, after SIGTERM, before SIGKILL.
  absl::Duration kill_grace = absl::Seconds(2);
  // Exit statuses 0..finished_status mean a rank finished (a verdict, e.g. dmalab's 1 for a
  // failed check), not that it failed: the others are left to finish too.
  int finished_status = 0;
};

// How one rank's process ended.
struct RankEnd {
  enum class How {
    kNotStarted,  // the launch failed before it was started
    kExited,      // exited with `exit_status`
    kSignaled,    // a signal (`signal`) ended it
  };
  How how = How::kNotStarted;
  int exit_status = 0;
  int signal = 0;
  // The launcher ended it (another rank failed, or the timeout passed).
  bool killed_by_launcher = false;

  bool ok() const { return finished(0); }
  // Exited with a status of at most `finished_status` (LaunchOptions::finished_status).
  bool finished(int finished_status) const {
    return how == How::kExited && exit_status >= 0 && exit_status <= finished_status;
  }
  // "exited with status 3", "was killed by signal 11 (SIGSEGV)".
  std::string Describe() const;
};

struct LaunchResult {
  std::string address;         // the bootstrap address the ranks were given
  std::vector<RankEnd> ranks;  // index r: rank r
  int first_failure = -1;      // the rank that failed first; -1 when none did
  bool timed_out = false;      // the timeout passed (`failure` names the ranks still running)
  // In words, empty when every rank exited 0: "rank 1 was killed by signal 11 (SIGSEGV)",
  // "rank 2 exited with status 3", "timed out after 2 s; rank 1 was still running".
  std::string failure;

  bool ok() const { return failure.empty(); }
  // OK, or an error carrying `failure` (Aborted for a failing rank, DeadlineExceeded for the
  // timeout).
  absl::Status ToStatus() const;
};

// Starts options.world processes of options.argv and waits for them all. An error is the
// launcher's own (bad options, a fork that failed, a program that cannot be run); how the ranks
// ended is in the result.
absl::StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options);

// A fresh abstract socket name, unique per call: "@dmalab-<pid>-<random>".
std::string FreshBootstrapAddress();

// What a rank process was told by its launcher.
struct RankEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;     // DMALAB_LOCAL_RANK, the rank when not set
  std::string bootstrap;  // the address of SocketBootstrapOptions
};

// Reads DMALAB_RANK, DMALAB_WORLD, DMALAB_BOOTSTRAP (and DMALAB_LOCAL_RANK) from the
// environment. None set: NotFound ("not launched as a rank"); some set but not all, or a
// malformed value: InvalidArgument naming the variable, its value and what is allowed.
absl::StatusOr<RankEnv> RankEnvFromEnvironment();

}  // namespace dmalab

#endif  // DMALAB_RUNNER_LAUNCHER_H_
