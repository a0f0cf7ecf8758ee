// Vector clocks over the simulator's timelines (one per stream, plus the host).
#ifndef DMALAB_SIM_VECTOR_CLOCK_H_
#define DMALAB_SIM_VECTOR_CLOCK_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dmalab {

class VectorClock {
 public:
  uint32_t Get(int timeline) const {
    return timeline < static_cast<int>(c_.size()) ? c_[timeline] : 0;
  }
  void Tick(int timeline) {
    Grow(timeline);
    ++c_[timeline];
  }
  // Component-wise maximum: everything `other` has seen, this has now seen.
  void Join(const VectorClock& other) {
    if (other.c_.size() > c_.size()) c_.resize(other.c_.size(), 0);
    for (size_t i = 0; i < other.c_.size(); ++i) c_[i] = std::max(c_[i], other.c_[i]);
  }
  // True when the access (timeline, clock) happened before the holder of this clock.
  bool HasSeen(int timeline, uint32_t clock) const { return Get(timeline) >= clock; }

 private:
  void Grow(int timeline) {
    if (timeline >= static_cast<int>(c_.size())) c_.resize(timeline + 1, 0);
  }
  std::vector<uint32_t> c_;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_VECTOR_CLOCK_H_
