#include "sim/predict.h"

#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
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
  if (absl::Status s = dev.SetTopology(&topology); !s.ok()) return s;
  const uint64_t bytes = static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  options.wire = wire;
  options.pieces = pieces;
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar = DmaAllReduce::Create(&dev, options);
  if (!ar.ok()) return ar.status();
  std::vector<TensorView> ins, outs;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<MemRef> in = dev.Allocate(r, bytes, "predict input");
    absl::StatusOr<MemRef> out = dev.Allocate(r, bytes, "predict output");
    if (!in.ok()) return in.status();
    if (!out.ok()) return out.status();
    // Zeros: any finite values time the same, and zeros encode in every wire mode.
    if (absl::Status s = dev.Write(*in, std::vector<uint8_t>(bytes, 0)); !s.ok()) return s;
    ins.push_back(TensorView{*in, dtype, {elems}, true});
    outs.push_back(TensorView{*out, dtype, {elems}, true});
  }
  double start_us = 0;
  for (int call = 0; call < 2; ++call) {  // the first call warms up, the second is timed
    start_us = dev.now_us();
    if (absl::Status s = (*ar)->AllReduce(ins, outs); !s.ok()) return s;
    if (absl::Status s = dev.Synchronize(); !s.ok()) return s;
  }
  return dev.now_us() - start_us;
}

double AllReduceBusGbps(uint64_t bytes, int world, double us) {
  return static_cast<double>(bytes) / (us * 1e3) * 2.0 * (world - 1) / world;
}

}  // namespace dmalab
