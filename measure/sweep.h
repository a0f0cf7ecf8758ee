// `dmalab sweep`: an all-reduce (the DMA ring, or any Collective) over a range of sizes, timed out
// of place and in place beside its speed of light (measure/speed_of_light.h), shaped like
// nccl-tests' all_reduce_perf (docs/design.md section 8). RunSweep measures on any Device;
// RunSweepCommand (tools/sweep_command.h) is the command line's entry point (backend choice, table,
// CSV and JSON files, exit status).
#ifndef DMALAB_MEASURE_SWEEP_H_
#define DMALAB_MEASURE_SWEEP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/dtype.h"
#include "common/plugin/spmd_process.h"
#include "dmalab/device.h"
#include "dmalab/wire.h"
#include "measure/device_timer.h"

namespace dmalab {

struct SweepOptions {
  uint64_t min_bytes = 1 << 20;   // -b
  uint64_t max_bytes = 16 << 20;  // -e
  int factor = 2;                 // -f: each size is the previous one times factor
  int iters = 20;                 // -n: timed calls per size and mode
  int warmup = 5;                 // -w: untimed calls before them
  bool check = true;              // -c: one more call on known inputs, compared with the sum
  bool graph = false;             // -G: replay a captured graph per call (graph_cache)
  DType dtype = DType::kBF16;
  WireMode wire = WireMode::kNative;
  int pieces = 2;
  // --collective: "ring" or a plugin's shared library (common/plugin/open_collective.h). A plugin
  // is timed eagerly (no -G: graph mode replays the ring's own graph cache) and beside the DMA
  // ring's speed of light at the same size, a reference for what the copy engines can do.
  std::string collective = "ring";
  // Set in a rank process of --procs: an ABI v2 plugin runs its own rank's instance only
  // (CollectiveParams::process).
  SpmdProcess* spmd_process = nullptr;
};

// One mode (out of place or in place) at one size.
struct SweepTiming {
  double time_us = 0;
  double algbw_gbps = 0;  // bytes / time
  double busbw_gbps = 0;  // algbw * 2(W-1)/W
  // Unset without the check. Native wire: elements, over all ranks, that differ from the exact
  // sum. Compressed wires: elements of ranks 1..W-1 whose bytes differ from rank 0's (every
  // rank must hold the same result); their rounding is counted in `rounded` instead.
  std::optional<int64_t> wrong;
  // Compressed wires with the check: elements, over all ranks, that differ from the exact sum
  // (the wire's rounding). Unset for the native wire, where any difference is wrong.
  std::optional<int64_t> rounded;
};

struct SweepRow {
  uint64_t bytes = 0;
  int64_t count = 0;  // elements
  DType dtype = DType::kBF16;
  WireMode wire = WireMode::kNative;
  SweepTiming out_of_place, in_place;
  double sol_us = 0;  // speed of light: the ring plan's peer copies alone (speed_of_light.h)
  double sol_busbw_gbps = 0;  // busbw a ring of sol_us would reach
  double pct_sol = 0;         // sol_us / out-of-place time * 100
};

// The element counts a sweep visits: min_bytes, min_bytes * factor, ... up to max_bytes, each
// rounded down to what the all-reduce accepts (a multiple of W*8 elements; W*128 for
// compressed wires); sizes that round to 0 or repeat are left out.
absl::StatusOr<std::vector<int64_t>> SweepCounts(const SweepOptions& options, int world);

// The memory a sweep holds at its largest size when the device keeps values (the simulator holds
// all of it in this process): per rank the input, output and in-place buffers, the speed of
// light's source and destination and the ring's workspace (a plugin's own is not known), and the
// host's buffers (written inputs, read-back results). Saturates at UINT64_MAX.
absl::StatusOr<uint64_t> SweepMemoryBytes(const SweepOptions& options, int world);

// What RunSweep refuses before it runs anything: the sizes (SweepCounts), -c 1 on a device that
// keeps no values, -G without a warm-up call or with a plugin. A caller that prints before the
// sweep runs (dmalab sweep's table header) checks first, so that a refusal comes alone.
absl::Status CheckSweepOptions(const SweepOptions& options, const Device& device);

// Called before each measurement (`phase`: "out-of-place", "in-place", "speed of light",
// "check") and with each finished row.
struct SweepObserver {
  std::function<void(int index, int total, uint64_t bytes, std::string_view phase)> progress;
  std::function<void(const SweepRow&)> row;
};

// Runs the sweep on `device`, timing with `clock` (TimePerCallUs). Time inputs are zeros (any
// finite values time the same and an in-place loop stays finite); the check rewrites small
// integers per rank, runs one call and reads every rank back. An error of the collective's own
// calls, or of the device while they ran, stops the sweep and is marked (IsCollectiveFailure),
// its message naming the size and the phase; every other error (options, allocation, the speed
// of light, reading results back) is not.
absl::StatusOr<std::vector<SweepRow>> RunSweep(Device& device, const DeviceClock& clock,
                                               const SweepOptions& options,
                                               const SweepObserver& observer = {});

// Whether a RunSweep error is the collective failing while it ran (dmalab sweep: a failed check,
// exit 1, unless the call rejected its arguments) rather than the sweep unable to run (exit 2).
bool IsCollectiveFailure(const absl::Status& status);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_SWEEP_H_
