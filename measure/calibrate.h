// Calibration: measures a GPU's rates through the Device interface and writes a topology
// YAML for the simulator's timing model (measure/calibration.h writes it). MeasureCalibration works
// on any Device, so the simulator can check it recovers a topology it was given.
#ifndef DMALAB_MEASURE_CALIBRATE_H_
#define DMALAB_MEASURE_CALIBRATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dmalab/device.h"
#include "measure/calibration.h"
#include "measure/device_timer.h"

namespace dmalab {

struct CalibrationPlan {
  std::vector<uint64_t> copy_bytes;          // default: 4 KiB .. 1 GiB, x4
  std::vector<int> concurrency = {1, 2, 4};  // copies at once, each on its own rank's stream
  std::vector<uint64_t> reduce_bytes;        // per operand; default: 4 KiB, 1, 16, 256 MiB, 1 GiB
  int iters = 20;                            // timed rounds per sample, at least
  // Small samples run more rounds: enough to move bytes_per_sample, up to max_rounds.
  uint64_t bytes_per_sample = 256ull << 20;
  int max_rounds = 2000;
  int warmup = 3;
  int enqueue_calls = 256;     // calls per host-cost measurement
  int flag_round_trips = 200;  // ping-pongs per flag measurement
  // In-situ host costs: all-reduces per rank of these sizes (default 64 and 256 KiB: below the
  // sizes a sweep judges the model on), this many per measurement.
  std::vector<uint64_t> host_cost_bytes;
  int host_cost_all_reduces = 20;
};

// The plan `dmalab calibrate` runs.
CalibrationPlan DefaultCalibrationPlan();

// Measures the copies, reduces, host costs and flag hop of `plan` on rank 0's GPU of `device`
// (copies of concurrency c use ranks 0..c-1, so the device needs max(concurrency) ranks, and
// at least 2), and the in-situ host costs of all-reduces over all its ranks. Fills copies,
// reduces and the host and flag numbers; not the GPU's description.
absl::StatusOr<CalibrationMeasurements> MeasureCalibration(Device& device, const DeviceClock& clock,
                                                           const CalibrationPlan& plan);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_CALIBRATE_H_
