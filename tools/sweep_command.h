// `dmalab sweep`: the command line's side of RunSweep (measure/sweep.h).
#ifndef DMALAB_TOOLS_SWEEP_COMMAND_H_
#define DMALAB_TOOLS_SWEEP_COMMAND_H_

#include <cstdint>
#include <string>

namespace dmalab {

// The command line's arguments, unparsed.
struct SweepCommand {
  std::string b = "1M", e = "16M";
  int f = 2, n = 20, w = 5, c = 1, graph = 0;
  std::string dtype = "bf16", wire = "bf16";
  int pieces = 2;
  std::string backend = "sim";
  std::string fidelity = "values";  // sim: "values" or "shadow" (times only: needs -c 0)
  int ranks = 4, gpus = 1;
  std::string topology;  // sim: required
  uint64_t seed = 1;
  std::string csv, json;  // output paths; empty: none
};

// `dmalab sweep`: prints the table on stdout and writes the files. Exit status: 0, 1 when a
// result is wrong (or the simulator's checkers report a finding), 2 on bad input or an error.
int RunSweepCommand(const SweepCommand& command);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_SWEEP_COMMAND_H_
