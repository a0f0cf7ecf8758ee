#include "sim/predict.h"

#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/ring/dma_all_reduce.h"
#include "sim/sim_device.h"

namespace dmalab {

absl::StatusOr<double> PredictAllReduceUs(const Topology& topology, int world, int64_t elems,
                                          DType dtype, WireMode wire, int pieces) {
  if (elems <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("predict: elems is %d; must be > 0", elems));
  }
  // Times depend on the plan, not on the schedule's seed (sim/timing_model.h).
  SimDevice dev(world, /*seed=*/1);
  DMALAB_RETURN_IF_ERROR(dev.SetTopology(&topology));
  const uint64_t bytes = static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  options.wire = wire;
  options.pieces = pieces;
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<DmaAllReduce> ar, DmaAllReduce::Create(&dev, options));
  std::vector<TensorView> ins, outs;
  for (int r = 0; r < world; ++r) {
    DMALAB_ASSIGN_OR_RETURN(const MemRef in, dev.Allocate(r, bytes, "predict input"));
    DMALAB_ASSIGN_OR_RETURN(const MemRef out, dev.Allocate(r, bytes, "predict output"));
    // Zeros: any finite values time the same, and zeros encode in every wire mode.
    DMALAB_RETURN_IF_ERROR(dev.Write(in, std::vector<uint8_t>(bytes, 0)));
    ins.push_back(TensorView{in, dtype, {elems}, true});
    outs.push_back(TensorView{out, dtype, {elems}, true});
  }
  double start_us = 0;
  for (int call = 0; call < 2; ++call) {  // the first call warms up, the second is timed
    start_us = dev.now_us();
    DMALAB_RETURN_IF_ERROR(ar->AllReduce(ins, outs));
    DMALAB_RETURN_IF_ERROR(dev.Synchronize());
  }
  return dev.now_us() - start_us;
}

double AllReduceBusGbps(uint64_t bytes, int world, double us) {
  return static_cast<double>(bytes) / (us * 1e3) * 2.0 * (world - 1) / world;
}

}  // namespace dmalab
