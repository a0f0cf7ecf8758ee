// A replay through a third-party collective in a worker process (runner/isolated_run.h), so that
// its crash, exit or hang is a finding with the report of every step before it, not the end of
// the command line: `collective_crash` (a signal, or an exit inside the collective) and
// `collective_hang` (a step that did not end within the hang bound), each naming the step.
//
// The worker replays as the command line would and streams its report before every step
// (runner/report_stream.h); the parent rebuilds it, so the same seed gives the same report in the
// worker as in one process. The built-in ring runs in-process: it is not under test here.
#ifndef DMALAB_RUNNER_ISOLATED_REPLAY_H_
#define DMALAB_RUNNER_ISOLATED_REPLAY_H_

#include <functional>

#include "absl/status/statusor.h"
#include "dmalab/replay.h"
#include "dmalab/scenario.h"

namespace dmalab {

// Runs `replay` in a worker; it must pass the observer it is given to Replay
// (ReplayOptions::observer). Returns its report, or its error (bad input), or the report of
// every step before the one that crashed, exited or hung, with that finding added. `scenario`
// names the report when the worker ends before it says anything. An error is also the parent's
// own failure (no fork).
absl::StatusOr<ReplayReport> ReplayInWorker(
    const std::function<absl::StatusOr<ReplayReport>(const ReplayObserver& observer)>& replay,
    const Scenario& scenario, int hang_seconds, int max_findings = 64);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_ISOLATED_REPLAY_H_
