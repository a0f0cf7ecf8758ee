// `dmalab demo` and `dmalab plan`: the ring all-reduce on the simulator over a range of sizes
// with integer inputs (every wrong element counted against the exact sum), and the ring plan of
// one tensor size.
#ifndef DMALAB_TOOLS_DEMO_COMMAND_H_
#define DMALAB_TOOLS_DEMO_COMMAND_H_

#include <cstdint>
#include <string>

#include "tools/command.h"

namespace dmalab {

struct DemoCommand {
  int ranks = 4;
  std::string dtype = "bf16";
  std::string wire = "bf16";
  int pieces = 2;
  uint64_t min_bytes = 1 << 20;   // -b, --minbytes
  uint64_t max_bytes = 16 << 20;  // -e, --maxbytes
  int factor = 4;                 // -f, --stepfactor
  uint64_t seed = 1;              // the simulator's scheduling seed
  std::string inject;             // comma-separated fault names
  RunFlags run;                   // --collective, --json, --quiet
};

// The largest size demo runs: the simulator holds every rank's input, output and scratch in
// host memory.
inline constexpr uint64_t kDemoMaxBytes = 256ull << 20;

// Exit status: 0 PASS, 1 wrong elements (native wire), ranks differing or checker findings,
// 2 bad input.
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
