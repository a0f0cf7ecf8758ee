// Running code that may crash, exit or hang (a third-party collective) in a worker process, so
// that the command line survives it and reports it: the fork-per-run of libFuzzer's fork mode and
// of the PyTorch harness.
//
// The worker is forked from this process (it inherits everything loaded so far and runs the same
// deterministic code), in a process group of its own and with a parent-death signal (it dies
// with the command line); its stdout goes to stderr, so nothing it prints mixes with the report.
// It sends messages to the parent through a pipe; every message restarts the hang bound. When the
// worker ends, its whole process group is killed, so children it forked do not outlive it.
#ifndef DMALAB_RUNNER_ISOLATED_RUN_H_
#define DMALAB_RUNNER_ISOLATED_RUN_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmalab {

// The default of --timeout: seconds a collective's step may run before it counts as hung (as the
// PyTorch harness's).
inline constexpr int kDefaultHangSeconds = 300;

// How many runs that fork workers may go at once, for `jobs` wanted. Forking while other threads
// run is safe with glibc's allocator, which prepares for fork; AddressSanitizer's (GCC 12's
// runtime) does not, and a worker forked while another thread holds its lock waits forever. So a
// sanitized build forks from one thread at a time (1); any other build runs `jobs`.
int WorkerJobs(int jobs);

// The worker's end of the pipe.
class WorkerChannel {
 public:
  explicit WorkerChannel(int fd) : fd_(fd) {}
  // Sends one message; a parent that went away ends the worker (exit status 3).
  void Send(std::string_view message);

 private:
  int fd_;
};

// How a worker ended.
struct WorkerEnd {
  enum class How {
    kFinished,   // `work` returned and the worker exited 0
    kSignaled,   // a signal ended it (a segfault, an abort)
    kExited,     // it exited before `work` returned (exit() inside the collective)
    kHung,       // no message within the hang bound: killed
    kBadStream,  // a message the parent could not read: killed
  };
  How how = How::kFinished;
  int signal = 0;       // kSignaled
  int exit_status = 0;  // kExited
  double seconds = 0;   // kHung: the bound that passed
  std::string detail;   // kBadStream: what was wrong
  // In words, for a finding: "was killed by signal 11 (SIGSEGV: Segmentation fault)", "exited
  // with status 0", "sent nothing for 300 s (--timeout) and was killed".
  std::string Describe() const;
};

// Forks a worker that runs `work` with the channel to the parent and exits; the parent calls
// `on_message` with each message, in order (an error from it is kBadStream), until the worker
// ends. `hang_seconds` bounds the time between two messages. An error is the parent's own
// failure (no pipe, no fork).
absl::StatusOr<WorkerEnd> RunIsolated(
    const std::function<void(WorkerChannel&)>& work,
    const std::function<absl::Status(std::string_view)>& on_message, int hang_seconds);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_ISOLATED_RUN_H_
