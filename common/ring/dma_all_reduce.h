// DmaAllReduce: the user API of the copy-engine ring all-reduce (docs/design.md section 4).
//
// One object serves W ranks of one Device. Each call enqueues the plan on every rank's
// streams and returns without waiting; results are ordered on each rank's compute stream.
#ifndef DMALAB_COMMON_RING_DMA_ALL_REDUCE_H_
#define DMALAB_COMMON_RING_DMA_ALL_REDUCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/core/collective.h"
#include "common/ring/ring_plan.h"
#include "dmalab/device.h"
#include "dmalab/faults.h"
#include "dmalab/tensor.h"
#include "dmalab/wire.h"

namespace dmalab {

struct DmaAllReduceOptions {
  uint64_t max_bytes = 64ull << 20;  // largest tensor, in bytes; sizes the scratch areas
  uint64_t min_bytes = 1;            // smallest tensor, in bytes
  WireMode wire = WireMode::kNative;
  int pieces = 2;
  FaultSet faults;  // injected bugs; empty by default
  // Explicit form only: the first call with given input and output addresses is captured into
  // a device graph, later calls with the same addresses replay it (device-side monotonic flag
  // counters need no host patching). Cuts the host's enqueue cost to one graph launch; needs a
  // device with graphs (Create fails otherwise).
  bool graph_cache = false;
};

class DmaAllReduce : public Collective {
 public:
  // Allocates and zeroes each rank's slab (flags, counters, scratch) and creates the streams
  // and events. Fails on bad options.
  static absl::StatusOr<std::unique_ptr<DmaAllReduce>> Create(Device* device,
                                                              const DmaAllReduceOptions& options);
  // The device memory Create allocates per rank (slab, staging areas, the persistent-output
  // fault's workspace), before the allocator's rounding; for memory checks made beforehand.
  static uint64_t WorkspaceBytesPerRank(int world, const DmaAllReduceOptions& options);
  ~DmaAllReduce() override;
  DmaAllReduce(const DmaAllReduce&) = delete;
  DmaAllReduce& operator=(const DmaAllReduce&) = delete;

  // Default form: returns, per rank, a fresh output allocated from the device (the caller owns
  // it and frees it with Device::Free). inputs[r] lives on rank r.
  absl::StatusOr<std::vector<TensorView>> AllReduce(absl::Span<const TensorView> inputs) override;
  // Explicit form: writes into caller-owned outs; outs[r] == inputs[r] is in place.
  absl::Status AllReduce(absl::Span<const TensorView> inputs,
                         absl::Span<const TensorView> outs) override;

  // "ring", or "ring(WIRE)" for a compressed wire.
  std::string name() const override;

  // The plan a call with these inputs would run (validated as a call is).
  absl::StatusOr<RingPlan> PlanFor(const TensorView& input) const;

  const DmaAllReduceOptions& options() const { return options_; }
  Device* device() const { return device_; }
  // Number of calls enqueued so far.
  int64_t calls() const { return calls_; }

 private:
  DmaAllReduce(Device* device, const DmaAllReduceOptions& options);
  absl::Status Init();
  absl::Status ValidateInputs(absl::Span<const TensorView> inputs) const;
  absl::Status EnsureEvents(const RingPlan& plan);
  absl::Status Run(const RingPlan& plan, absl::Span<const TensorView> inputs,
                   absl::Span<const TensorView> outs);
  absl::Status RunCached(const RingPlan& plan, absl::Span<const TensorView> inputs,
                         absl::Span<const TensorView> outs);
  absl::StatusOr<RingPlan> PlanFor(const TensorView& input, bool in_place) const;
  absl::StatusOr<const RingPlan*> CachedPlan(const TensorView& input, bool in_place);

  Device* device_;
  DmaAllReduceOptions options_;
  int world_;
  struct RankState {
    MemRef slab;
    std::vector<MemRef> staging;
    StreamId streams[kNumPlanStreams] = {};
    std::vector<EventId> events;
    MemRef workspace;  // persistent-output fault only
  };
  std::vector<RankState> ranks_;
  std::map<std::tuple<int64_t, DType, bool>, RingPlan> plans_;  // (elems, dtype, in place)
  // graph-output-freed fault only: input addresses -> the outs of the first call with them.
  std::map<std::vector<uint64_t>, std::vector<TensorView>> captured_outs_;
  std::map<std::vector<uint64_t>, GraphId> graphs_;  // (elems, dtype, addresses) -> graph
  int64_t calls_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_RING_DMA_ALL_REDUCE_H_
