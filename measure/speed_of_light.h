// Speed of light for the ring all-reduce (DESIGN.md section 7): the time bare Device::Copy calls
// need for the ring's bytes at the ring's own hop pattern and concurrency, measured on the same
// device as the ring. Every rank copies 2(W-1) chunks of S/W bytes to its successor, one after
// another on one copy stream (as the ring's send stream does), all ranks at once; no flags, no
// kernels, no events. A ring can only approach this time from above.
#ifndef DMALAB_MEASURE_SPEED_OF_LIGHT_H_
#define DMALAB_MEASURE_SPEED_OF_LIGHT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/core/device.h"
#include "measure/device_timer.h"

namespace dmalab {

class SpeedOfLight {
 public:
  // Allocates, per rank, a source and a destination of `max_bytes` and one copy stream.
  static absl::StatusOr<std::unique_ptr<SpeedOfLight>> Create(Device* device, uint64_t max_bytes);
  ~SpeedOfLight();
  SpeedOfLight(const SpeedOfLight&) = delete;
  SpeedOfLight& operator=(const SpeedOfLight&) = delete;

  // Enqueues one round of the pattern for a tensor of `bytes` (a multiple of the world size,
  // at most max_bytes): rank r's j-th copy moves chunk (r - j) mod W of its source into the
  // same chunk of its successor's destination, for j = 0 .. 2(W-1)-1.
  absl::Status Enqueue(uint64_t bytes);
  // Time of one round, us, timed as TimePerCallUs times it.
  absl::StatusOr<double> MeasureUs(uint64_t bytes, const DeviceClock& clock, int warmup, int iters);

 private:
  explicit SpeedOfLight(Device* device, uint64_t max_bytes)
      : device_(device), max_bytes_(max_bytes) {}

  Device* device_;
  uint64_t max_bytes_;
  std::vector<MemRef> src_, dst_;
  std::vector<StreamId> streams_;
};

}  // namespace dmalab

#endif  // DMALAB_MEASURE_SPEED_OF_LIGHT_H_
