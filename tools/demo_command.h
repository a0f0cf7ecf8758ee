// `dmalab demo` and `dmalab plan`: the all-reduce on the simulator or the GPUs over a range of
// sizes with integer inputs (every wrong element counted against the exact sum), and the ring
// plan of one tensor size.
#ifndef DMALAB_TOOLS_DEMO_COMMAND_H_
#define DMALAB_TOOLS_DEMO_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tools/command.h"

namespace dmalab {

struct DemoCommand {
  std::string backend = "sim";      // "sim" or "hw"
  int gpus = 1;                     // hw: GPUs the ranks spread over
  int procs = 0;                    // hw: one process per rank (runner/rank_process.h)
  std::optional<uint64_t> perturb;  // hw: the schedule perturbation's seed
  int ranks = 4;
  std::string dtype = "bf16";
  std::string wire = "bf16";
  int pieces = 2;
  uint64_t min_bytes = 1 << 20;   // -b, --minbytes
  uint64_t max_bytes = 16 << 20;  // -e, --maxbytes
  int factor = 4;                 // -f, --stepfactor
  uint64_t seed = 1;              // sim: the scheduling seed
  std::string inject;             // comma-separated fault names
  RunFlags run;                   // --collective, --json, --quiet
};

// The largest size demo runs: the simulator holds every rank's input, output and scratch in
// host memory (the same bound on GPUs, whose host copies are checked the same way).
inline constexpr uint64_t kDemoMaxBytes = 256ull << 20;

// Exit status: 0 PASS, 1 wrong elements (native wire), ranks differing, checker findings or a
// failing call of the collective (a deadlock included), 2 bad input.
int RunDemoCommand(const DemoCommand& command);

struct PlanCommand {
  int ranks = 4;
  int64_t elems = 4096;
  std::string dtype = "bf16";
  std::string wire = "bf16";
  int pieces = 2;
  std::string inject;
  std::string json;  // also write the plan as JSON here
};

// Prints the plan; exit status 0, or 2 on bad input.
int RunPlanCommand(const PlanCommand& command);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_DEMO_COMMAND_H_
