// The exit-status contract of every command of the command line (tools/dmalab_main.cc), in one
// place: the commands end through ExitStatus (tools/command.h), the flag parser through its
// usage errors (tools/cli_flags.h).
#ifndef DMALAB_TOOLS_EXIT_STATUS_H_
#define DMALAB_TOOLS_EXIT_STATUS_H_

namespace dmalab::cli {

inline constexpr int kExitPass = 0;    // ran, every check passed, every expectation met
inline constexpr int kExitFailed = 1;  // a check failed or an expectation was not met
inline constexpr int kExitUsage = 2;   // bad input or usage, flag errors included

}  // namespace dmalab::cli

#endif  // DMALAB_TOOLS_EXIT_STATUS_H_
