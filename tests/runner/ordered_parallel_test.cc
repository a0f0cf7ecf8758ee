// RunOrdered (runner/ordered_parallel.h): results are consumed in job order whatever the number
// of threads, an ended group runs no more of its jobs, a stop stops, and jobs never run far
// ahead of consumption.
#include "runner/ordered_parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

// Jobs of uneven length, so that later jobs often finish first.
int64_t SlowSquare(int64_t i) {
  std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 5 * 300));
  return i * i;
}

TEST(RunOrderedTest, ResultsAreConsumedInJobOrderForAnyNumberOfThreads) {
  for (int jobs : {1, 2, 3, 8}) {
    std::vector<int64_t> seen;
    RunOrdered<int64_t>(
        40, jobs, [](int64_t) { return 0; }, SlowSquare,
        [&](int64_t i, int64_t& r) {
          EXPECT_EQ(r, i * i);
          seen.push_back(i);
          return Consumed::kContinue;
        });
    std::vector<int64_t> want(40);
    for (int64_t i = 0; i < 40; ++i) want[i] = i;
    EXPECT_EQ(seen, want) << "jobs " << jobs;
  }
}

TEST(RunOrderedTest, AnEndedGroupConsumesNothingMoreAndTheNextGroupsRun) {
  // Groups of 10 jobs; group g ends at its job g + 2 (a fault found at seed g + 3).
  const auto group = [](int64_t i) { return i / 10; };
  for (int jobs : {1, 2, 4}) {
    std::vector<int64_t> seen;
    RunOrdered<int64_t>(40, jobs, group, SlowSquare, [&](int64_t i, int64_t&) {
      seen.push_back(i);
      return i % 10 == group(i) + 2 ? Consumed::kEndGroup : Consumed::kContinue;
    });
    const std::vector<int64_t> want = {0,  1,  2,  10, 11, 12, 13, 20, 21,
                                       22, 23, 24, 30, 31, 32, 33, 34, 35};
    EXPECT_EQ(seen, want) << "jobs " << jobs;
  }
}

TEST(RunOrderedTest, GroupsMayInterleave) {
  // Job i is job i / 4 of group i % 4 (seeds across zoo rows); group g ends at its job g.
  const auto group = [](int64_t i) { return i % 4; };
  for (int jobs : {1, 2, 4}) {
    std::vector<int64_t> seen;
    RunOrdered<int64_t>(20, jobs, group, SlowSquare, [&](int64_t i, int64_t&) {
      seen.push_back(i);
      return i / 4 == group(i) ? Consumed::kEndGroup : Consumed::kContinue;
    });
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7, 10, 11, 15})) << "jobs " << jobs;
  }
}

TEST(RunOrderedTest, AStopEndsTheConsumptionAtOnce) {
  for (int jobs : {1, 3}) {
    std::vector<int64_t> seen;
    RunOrdered<int64_t>(
        100, jobs, [](int64_t) { return 0; }, SlowSquare,
        [&](int64_t i, int64_t&) {
          seen.push_back(i);
          return i == 4 ? Consumed::kStop : Consumed::kContinue;
        });
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4})) << "jobs " << jobs;
  }
}

TEST(RunOrderedTest, JobsStartAtMostTheLookaheadAheadOfConsumption) {
  constexpr int kJobs = 3;
  std::mutex mu;
  int64_t consumed = 0, farthest_ahead = 0, started = 0;
  RunOrdered<int64_t>(
      200, kJobs, [](int64_t) { return 0; },
      [&](int64_t i) {
        {
          std::lock_guard<std::mutex> lock(mu);
          farthest_ahead = std::max(farthest_ahead, i - consumed);
          ++started;
        }
        return SlowSquare(i);
      },
      [&](int64_t, int64_t&) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow consumer
        std::lock_guard<std::mutex> lock(mu);
        ++consumed;
        return Consumed::kContinue;
      });
  EXPECT_EQ(started, 200);
  EXPECT_LT(farthest_ahead, kLookahead * kJobs);
}

TEST(RunOrderedTest, NoJobsIsNothingToDo) {
  int calls = 0;
  RunOrdered<int>(
      0, 4, [](int64_t) { return 0; },
      [&](int64_t) {
        ++calls;
        return 0;
      },
      [&](int64_t, int&) {
        ++calls;
        return Consumed::kContinue;
      });
  EXPECT_EQ(calls, 0);
  EXPECT_GE(AvailableCores(), 1);
}

}  // namespace
}  // namespace dmalab
