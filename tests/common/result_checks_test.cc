// Aliasing among live results (common/core/result_checks.h): the sorted sweep finds exactly the
// pairs that comparing every range with every later one finds, in that order.
#include "common/core/result_checks.h"

#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

TEST(OverlappingPairsTest, NamesEachOverlappingPairOnceInInputOrder) {
  const std::vector<MemRef> ranges = {
      {0, 100, 50},  // [100, 150) on rank 0
      {1, 100, 50},  // same bytes, another rank: no overlap
      {0, 140, 20},  // overlaps the first
      {0, 150, 10},  // only touches the first's end; overlaps the third
      {0, 120, 0},   // empty: overlaps nothing
      {0, 90, 100},  // covers the first, the third and the fourth
  };
  EXPECT_EQ(OverlappingPairs(ranges),
            (std::vector<std::pair<size_t, size_t>>{{0, 2}, {0, 5}, {2, 3}, {2, 5}, {3, 5}}));
}

TEST(OverlappingPairsTest, AgreesWithComparingEveryPair) {
  std::mt19937_64 rng(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<MemRef> ranges(1 + rng() % 40);
    for (MemRef& r : ranges) {
      r = MemRef{static_cast<int>(rng() % 3), rng() % 200, rng() % 30};
    }
    std::vector<std::pair<size_t, size_t>> every;
    for (size_t i = 0; i < ranges.size(); ++i) {
      for (size_t j = i + 1; j < ranges.size(); ++j) {
        if (ranges[i].Overlaps(ranges[j])) every.emplace_back(i, j);
      }
    }
    ASSERT_EQ(OverlappingPairs(ranges), every) << "round " << round;
  }
}

}  // namespace
}  // namespace dmalab
