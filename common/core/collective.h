// Collective: what dmalab checks. Any all-reduce over the W ranks of one Device: dmalab's own DMA
// ring (common/ring/dma_all_reduce.h), a third-party C plugin (include/dmalab/plugin.h,
// common/plugin/), or a test's fake. The replay engine, the zoo, the sweep and the demo take any
// Collective; nothing here is ring-specific.
//
// One object serves all ranks: a call receives one tensor per rank (inputs[r] lives on rank r),
// enqueues work on the device's streams and returns without waiting; results are ordered on
// each rank's compute stream.
#ifndef DMALAB_COMMON_CORE_COLLECTIVE_H_
#define DMALAB_COMMON_CORE_COLLECTIVE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device_finding.h"
#include "dmalab/tensor.h"

namespace dmalab {

class Collective {
 public:
  virtual ~Collective() = default;

  // Names the collective in reports and findings, e.g. "ring" or "plugin:persistent_workspace".
  virtual std::string name() const = 0;

  // Default form: returns, per rank, a fresh output holding the sum. The caller owns it from
  // then on and returns it with Device::Free; a collective that returns storage it keeps using
  // is the founding bug, which the checkers must see.
  virtual absl::StatusOr<std::vector<TensorView>> AllReduce(
      absl::Span<const TensorView> inputs) = 0;
  // Explicit form: writes the sum into caller-owned outs; outs[r] == inputs[r] is in place.
  virtual absl::Status AllReduce(absl::Span<const TensorView> inputs,
                                 absl::Span<const TensorView> outs) = 0;

  // A graph capture that contained calls of this collective has ended (called after the capture,
  // outside it): a collective may now register the buffers the capture used with its peers.
  virtual absl::Status CaptureEnded() { return absl::OkStatus(); }
  // Ends the collective's life (its destroy) while the device is still there, so what it failed
  // to release can be reported. Calls after Close fail.
  virtual absl::Status Close() { return absl::OkStatus(); }
  // What the collective's host side found since the last call (resources leaked at Close or
  // growing call after call, a bootstrap deadlock), typed as a device's findings.
  virtual DeviceFindings TakeFindings() { return {}; }
  // Whether the collective reports its own resource growth (in TakeFindings); otherwise the
  // replay watches the device's live allocations that the scenario does not hold.
  virtual bool TracksOwnGrowth() const { return false; }
};

// A failed call's status says whose fault it was (include/dmalab/replay.h, IsRejectedArguments):
// InvalidArgument or FailedPrecondition, the call refused its arguments (bad input, exit status
// 2); Aborted, the collective broke its contract on valid input, e.g. a plugin freed memory it
// does not own (a collective_error finding, exit status 1); anything else, the collective
// failed while executing, e.g. a flag wait timed out (a device_error finding, exit status 1).

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_COLLECTIVE_H_
