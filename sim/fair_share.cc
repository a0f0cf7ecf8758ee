#include "sim/fair_share.h"

#include <algorithm>
#include <limits>

namespace dmalab {

std::vector<double> MaxMinFairRates(absl::Span<const FlowDemand* const> flows,
                                    absl::Span<const double> capacities_gbps) {
  const size_t n = flows.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  std::vector<double> left(capacities_gbps.begin(), capacities_gbps.end());
  // Relative slack below which a cap or a resource counts as reached; rates are O(1..1e4).
  constexpr double kFull = 1e-9;
  size_t growing = n;
  while (growing > 0) {
    // Per resource, how fast its use grows when every growing flow speeds up by 1 GB/s.
    std::vector<double> weight(left.size(), 0.0);
    double step = std::numeric_limits<double>::infinity();
    for (size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      step = std::min(step, flows[f]->cap_gbps - rate[f]);
      for (const ResourceUse& u : flows[f]->uses) weight[u.resource] += u.bytes_per_byte;
    }
    for (size_t r = 0; r < left.size(); ++r) {
      if (weight[r] > 0) step = std::min(step, std::max(0.0, left[r]) / weight[r]);
    }
    for (size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      rate[f] += step;
      for (const ResourceUse& u : flows[f]->uses) left[u.resource] -= step * u.bytes_per_byte;
    }
    for (size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      bool stop = rate[f] >= flows[f]->cap_gbps * (1 - kFull);
      for (const ResourceUse& u : flows[f]->uses) {
        stop = stop || left[u.resource] <= capacities_gbps[u.resource] * kFull;
      }
      if (stop) {
        frozen[f] = true;
        --growing;
      }
    }
  }
  return rate;
}

}  // namespace dmalab
