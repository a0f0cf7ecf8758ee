// `dmalab sweep`: the command line's side of RunSweep (measure/sweep.h).
#ifndef DMALAB_TOOLS_SWEEP_COMMAND_H_
#define DMALAB_TOOLS_SWEEP_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "measure/sweep.h"
#include "tools/command.h"

namespace dmalab {

// The command line's arguments (nccl-tests' names in comments). The defaults are
// SweepOptions' own, so the struct, `dmalab sweep --help` and a run agree.
struct SweepCommand {
  uint64_t b = SweepOptions{}.min_bytes;     // -b, --minbytes
  uint64_t e = SweepOptions{}.max_bytes;     // -e, --maxbytes
  int f = SweepOptions{}.factor;             // -f, --stepfactor
  int n = SweepOptions{}.iters;              // -n, --iters
  int w = SweepOptions{}.warmup;             // -w, --warmup_iters
  int c = SweepOptions{}.check ? 1 : 0;      // -c, --check
  int graph = SweepOptions{}.graph ? 1 : 0;  // -G, --cudagraph
  std::string dtype = "bf16", wire = "bf16";
  int pieces = SweepOptions{}.pieces;
  std::string backend = "sim";
  std::string fidelity = "values";  // sim: "values" or "shadow" (times only: needs -c 0)
  int ranks = 4, gpus = 1;
  // hw: one process per rank (runner/rank_process.h); must equal ranks. 0: one process.
  int procs = 0;
  std::string topology;  // sim: required
  uint64_t seed = 1;     // sim: the scheduling seed
  std::string csv;       // output path; empty: none
  RunFlags run;          // --collective, --json, --quiet
};

// `dmalab sweep`: prints the table on stdout and writes the files. Exit status: 0, 1 when a
// result is wrong (or the simulator's checkers report a finding), 2 on bad input or an error.
// `nccl` adds nccl-tests' JSON report (all_reduce_perf -J).
struct SweepNcclJsonOption {
  std::string path;               // where to write it; empty: not written
  std::vector<std::string> args;  // the command line, recorded in it
};
int RunSweepCommand(const SweepCommand& command, const SweepNcclJsonOption& nccl = {});

}  // namespace dmalab

#endif  // DMALAB_TOOLS_SWEEP_COMMAND_H_
