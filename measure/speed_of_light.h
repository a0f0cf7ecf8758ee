// Speed of light for the ring all-reduce (docs/design.md, "Measuring"): the time bare
// Device::Copy calls need to move the bytes the ring's own plan sends to peers, at the ring's
// hop pattern and concurrency, on the same device as the ring and timed the same way. Every
// rank issues its plan's peer copies (2(W-1) hops, each split in the plan's pieces; a compressed
// wire sends its encoded bytes), one after another on one copy stream as the ring's send stream
// does, all ranks at once; no flags, no kernels, no events. With graphs, a round is captured
// once and replayed per call, as the ring's graph cache does. A ring can only approach this time
// from above.
#ifndef DMALAB_MEASURE_SPEED_OF_LIGHT_H_
#define DMALAB_MEASURE_SPEED_OF_LIGHT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ring/ring_plan.h"
#include "dmalab/device.h"
#include "measure/device_timer.h"

namespace dmalab {

// Per rank, the bytes of each copy the plan writes to a peer, in plan order.
std::vector<std::vector<uint64_t>> PeerCopyBytes(const RingPlan& plan);

class SpeedOfLight {
 public:
  // Allocates, per rank, a source and a destination of `max_bytes` and one copy stream. With
  // `graphs`, rounds are captured into a device graph and replayed (the device must have them).
  static absl::StatusOr<std::unique_ptr<SpeedOfLight>> Create(Device* device, uint64_t max_bytes,
                                                              bool graphs = false);
  ~SpeedOfLight();
  SpeedOfLight(const SpeedOfLight&) = delete;
  SpeedOfLight& operator=(const SpeedOfLight&) = delete;

  // Enqueues one round: `copies[r]` lists rank r's copies (bytes, each at most max_bytes), each
  // from its source to its successor's destination. Hop-major: every rank's j-th copy is
  // enqueued before any rank's (j+1)-th.
  absl::Status Enqueue(const std::vector<std::vector<uint64_t>>& copies);
  // Time of one round of `plan`'s peer copies, us, timed as TimePerCallUs times it (with graphs:
  // the round is captured once, outside the timing, and each call replays it).
  absl::StatusOr<double> MeasureUs(const RingPlan& plan, const DeviceClock& clock, int warmup,
                                   int iters);

 private:
  explicit SpeedOfLight(Device* device, uint64_t max_bytes, bool graphs)
      : device_(device), max_bytes_(max_bytes), graphs_(graphs) {}

  Device* device_;
  uint64_t max_bytes_;
  bool graphs_;
  std::vector<MemRef> src_, dst_;
  std::vector<StreamId> streams_;
  std::map<std::vector<std::vector<uint64_t>>, GraphId> captured_;
};

}  // namespace dmalab

#endif  // DMALAB_MEASURE_SPEED_OF_LIGHT_H_
