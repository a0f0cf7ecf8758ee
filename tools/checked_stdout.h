// The command line's standard output, checked: a report that could not be written (a full disk,
// a reader that went away, a closed descriptor) makes the run exit 2 with the reason, never 0.
#ifndef DMALAB_TOOLS_CHECKED_STDOUT_H_
#define DMALAB_TOOLS_CHECKED_STDOUT_H_

#include <string>

namespace dmalab {

// Call first in main. Opens /dev/null on descriptors 0, 1 and 2 the caller closed (so that no
// file the run opens takes their number and receives the report), ignores SIGPIPE (a reader that
// goes away is a write error, reported after the files the command line asked for are written),
// and routes stdout through a stream that remembers the first write error and its errno.
void CheckStdout();

// Flushes stdout. Returns `rc` when everything printed was written; else prints
// "<command>: cannot write to stdout: <reason>" on stderr (unless `rc` is already 2, bad input
// whose message came first) and returns 2 (cli::kExitUsage, tools/exit_status.h).
int FinishStdout(const std::string& command, int rc);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_CHECKED_STDOUT_H_
