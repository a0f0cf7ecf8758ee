// Which process and host run each rank, for the sweep's "# Using devices" lines: with --procs
// every rank is its own process, so each contributes its own pid and host name over the ranks'
// bootstrap.
#ifndef DMALAB_TOOLS_PROCESS_NAMES_H_
#define DMALAB_TOOLS_PROCESS_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plugin/bootstrap.h"

namespace dmalab {

struct ProcessName {
  int pid = 0;
  std::string host;
};

// This process: getpid() and gethostname() ("unknown" when the host has none).
ProcessName ThisProcessName();

// Every rank's process name, by rank, in every rank: `rank` contributes `mine`. Every rank of
// `bootstrap` makes this call at the same point of its program.
absl::StatusOr<std::vector<ProcessName>> GatherProcessNames(Bootstrap& bootstrap, int rank,
                                                            const ProcessName& mine);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_PROCESS_NAMES_H_
