// ResourceGrowth: resources held that keep growing call after call in steady state (one more
// allocation or mapping every call over a repeat) are reported once the count has grown after
// each of kCalls calls in a row, long before a fixed registration table would overflow. One
// tracker per rank.
#ifndef DMALAB_COMMON_CORE_RESOURCE_GROWTH_H_
#define DMALAB_COMMON_CORE_RESOURCE_GROWTH_H_

#include <cstdint>

namespace dmalab {

class ResourceGrowth {
 public:
  static constexpr int kCalls = 16;

  // The count held after a call; true exactly once, at the kCalls-th growth in a row.
  bool After(int64_t held) {
    streak_ = held > last_ ? streak_ + 1 : 0;
    last_ = held;
    if (streak_ < kCalls || reported_) return false;
    reported_ = true;
    return true;
  }
  // Sets the baseline without counting a call (after create).
  void Start(int64_t held) { last_ = held; }

 private:
  int64_t last_ = 0;
  int streak_ = 0;
  bool reported_ = false;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_RESOURCE_GROWTH_H_
