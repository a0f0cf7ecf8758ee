// What the commands of the command line share: the flags of every command that runs the
// collective (replay, zoo, sweep, demo), and writing result files (tools/output_file.h).
#ifndef DMALAB_TOOLS_COMMAND_H_
#define DMALAB_TOOLS_COMMAND_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/exit_status.h"
#include "tools/output_file.h"  // WriteTextFile: every command's report files

namespace dmalab {

// Flags of replay, zoo, sweep and demo (tools/dmalab_main.cc adds them in one place,
// AddRunFlags: a flag for all four is one line there and one field here).
struct RunFlags {
  std::string collective = "ring";  // --collective=NAME|PATH.so: the collective under test
  std::string collective_options;   // --collective-options=TEXT: handed to a plugin's create
  std::string json;                 // --json=PATH: also write the results as JSON (docs/json.md)
  bool quiet = false;               // --quiet: no progress on stderr
};

// The collectives --collective accepts: "ring" (DmaAllReduce) or a plugin path. The error names the
// value and what is allowed.
absl::Status CheckCollective(const std::string& name);
// --collective-options: only for a plugin, and only where the command opens it with them (`where`
// names the mode, e.g. "replay --seeds"; empty: every mode of the command takes them).
absl::Status CheckCollectiveOptions(const RunFlags& run, std::string_view where = "");

// The plugin path `name` as the user wrote it: a path without '/' ("minimal.so") gets "./" in
// front, so that the loader opens that file in the current folder instead of searching the
// library path (LD_LIBRARY_PATH, the system's folders) for a library of that name. Other names
// are returned as they are.
std::string CollectiveAsWritten(const std::string& name);

// How every command ends: `run` is what the command returned, its exit status (cli::kExitPass or
// cli::kExitFailed; the launcher's for --procs), or an error, which is bad input or usage:
// "dmalab COMMAND: REASON" on stderr and cli::kExitUsage. A reason that already begins with
// "COMMAND: " (the libraries name themselves, for callers that print their errors bare) is not
// prefixed twice. A command's body returns its errors early through the status macros
// (common/core/status_macros.h), and this is the one place that turns them into the exit status.
int ExitStatus(std::string_view command, const absl::StatusOr<int>& run);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_COMMAND_H_
