// Max-min fair sharing of bandwidth among concurrent transfers: the rate rule of the fluid
// timing model (sim/timing_model.h).
#ifndef DMALAB_SIM_FAIR_SHARE_H_
#define DMALAB_SIM_FAIR_SHARE_H_

#include <vector>

#include "absl/types/span.h"

namespace dmalab {

// A transfer's use of a shared resource: `bytes_per_byte` bytes of the resource's capacity per
// byte the transfer moves (a same-GPU copy reads and writes memory: 2).
struct ResourceUse {
  int resource = 0;
  double bytes_per_byte = 1;
};

struct FlowDemand {
  double cap_gbps = 0;            // the transfer's own limit (engine, link class, kernel)
  std::vector<ResourceUse> uses;  // the shared resources it crosses
};

// Max-min fair rates (GB/s) by progressive filling: all transfers speed up together; one stops
// growing when it reaches its own cap or when a resource it uses is full. No transfer can then go
// faster without slowing one that is not faster than it. `capacities_gbps[r]` is resource r's.
std::vector<double> MaxMinFairRates(absl::Span<const FlowDemand* const> flows,
                                    absl::Span<const double> capacities_gbps);

}  // namespace dmalab

#endif  // DMALAB_SIM_FAIR_SHARE_H_
