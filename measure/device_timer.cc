#include "measure/device_timer.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

DeviceClock WallClock() {
  return [] {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

absl::StatusOr<double> TimePerCallUs(Device& device, const DeviceClock& clock, int warmup,
                                     int iters, const std::function<absl::Status()>& call) {
  if (iters < 1 || warmup < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "timing: iters is %d and warmup %d; need iters >= 1, warmup >= 0", iters, warmup));
  }
  for (int i = 0; i < warmup; ++i) {
    DMALAB_RETURN_IF_ERROR(call());
  }
  DMALAB_RETURN_IF_ERROR(device.Synchronize());
  const double start_us = clock();
  for (int i = 0; i < iters; ++i) {
    DMALAB_RETURN_IF_ERROR(call());
  }
  DMALAB_RETURN_IF_ERROR(device.Synchronize());
  return (clock() - start_us) / iters;
}

absl::StatusOr<double> EnqueueCostUs(Device& device, const DeviceClock& clock, int iters,
                                     const std::function<absl::Status()>& call) {
  if (iters < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("timing: iters is %d; need >= 1", iters));
  }
  DMALAB_RETURN_IF_ERROR(device.Synchronize());
  const double start_us = clock();
  for (int i = 0; i < iters; ++i) {
    DMALAB_RETURN_IF_ERROR(call());
  }
  const double end_us = clock();
  DMALAB_RETURN_IF_ERROR(device.Synchronize());
  return (end_us - start_us) / iters;
}

}  // namespace dmalab
