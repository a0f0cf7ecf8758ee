// `dmalab zoo`: its flags, where it finds the zoo's files and the example plugins, and what it
// prints and writes. The zoo itself (its cases, runs and report) is zoo/zoo.h.
#ifndef DMALAB_TOOLS_ZOO_COMMAND_H_
#define DMALAB_TOOLS_ZOO_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runner/isolated_run.h"
#include "tools/command.h"

namespace dmalab {

// `dmalab zoo`'s flags.
struct ZooCommand {
  int seeds = 20;
  int jobs = 0;             // 0: AvailableCores()
  int sizes = 1;            // --sizes: runs of each size-regime scenario; 0 leaves them out
  std::string write_sizes;  // --write-sizes=DIR: also write the size-regime scenarios there
  std::string backend = "sim";
  int gpus = 1;
  std::optional<uint64_t> perturb;  // hw: the first perturbation seed
  std::string fidelity = "values";
  // --root: the folder holding scenarios/ and tests/zoo/ (a source tree or an install's
  // share/dmalab); empty: search (FindZooRoot).
  std::string root;
  int hang_seconds = kDefaultHangSeconds;  // --timeout (plugins)
  RunFlags run;
};

// Where the zoo's files are: `root` when given, else $DMALAB_ROOT when set, else the first of
// <executable's folder>/../share/dmalab, <executable's folder>/../.., the source tree this
// binary was built from, and the current directory that holds every file of ZooScenarios().
// The error names every place it looked.
absl::StatusOr<std::string> FindZooRoot(const std::string& root);

// Writes every member of the size-regime family as DIR/<name>.yaml (creating DIR).
absl::Status WriteSizeFamily(const std::string& dir);

// Returns the exit status: 0 PASS, 1 a fault undetected or a false positive, 2 bad input.
int RunZooCommand(const ZooCommand& command);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_ZOO_COMMAND_H_
