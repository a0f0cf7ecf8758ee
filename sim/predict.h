// Predicted all-reduce times from the timing model, for sweeps and calibration.
#ifndef DMALAB_SIM_PREDICT_H_
#define DMALAB_SIM_PREDICT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/core/dtype.h"
#include "dmalab/wire.h"
#include "sim/topology.h"

namespace dmalab {

// The simulated time, in us, of one DmaAllReduce call of `elems` elements of `dtype` over
// `world` ranks of `topology`: a warm-up call, then one call timed from the host's enqueue of
// its first op to the end of its last (what a host timer around call + synchronize measures).
absl::StatusOr<double> PredictAllReduceUs(const Topology& topology, int world, int64_t elems,
                                          DType dtype, WireMode wire, int pieces);

// nccl-tests' bus bandwidth of an all-reduce of `bytes` over `world` ranks in `us`, GB/s:
// bytes / time * 2(world-1)/world.
double AllReduceBusGbps(uint64_t bytes, int world, double us);

}  // namespace dmalab

#endif  // DMALAB_SIM_PREDICT_H_
