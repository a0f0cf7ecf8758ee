// Timing calls on a Device the way nccl-tests does: synchronize, read a clock, enqueue the calls,
// synchronize, read the clock again. The clock is the host's wall clock on hardware and the
// simulated host clock (SimDevice::now_us) on the simulator, so one loop serves both backends.
#ifndef DMALAB_MEASURE_DEVICE_TIMER_H_
#define DMALAB_MEASURE_DEVICE_TIMER_H_

#include <functional>

#include "absl/status/statusor.h"
#include "dmalab/device.h"

namespace dmalab {

// Returns the current time in us; read only right after Device::Synchronize.
using DeviceClock = std::function<double()>;

// The host's monotonic wall clock, us.
DeviceClock WallClock();

// Enqueues `call` `warmup` times and synchronizes, then times `iters` calls enqueued back to
// back between two synchronizations. Returns the time per call, us. Fails with `call`'s or
// Synchronize's error, or when iters < 1 or warmup < 0.
absl::StatusOr<double> TimePerCallUs(Device& device, const DeviceClock& clock, int warmup,
                                     int iters, const std::function<absl::Status()>& call);

// The host time, us, that enqueueing `call` `iters` times takes, without waiting for the work
// (the device is synchronized before and after, outside the timed region).
absl::StatusOr<double> EnqueueCostUs(Device& device, const DeviceClock& clock, int iters,
                                     const std::function<absl::Status()>& call);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_DEVICE_TIMER_H_
