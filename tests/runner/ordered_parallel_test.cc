// RunOrdered (runner/ordered_parallel.h): results are consumed in job order whatever the number
// of threads, an ended group runs no more of its jobs, a stop stops, jobs never run far ahead of
// consumption, a long job leaves the other threads work, and weights bound what runs at once.
#include "runner/ordered_parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

// Jobs of uneven length, so that later jobs often finish first.
int64_t SlowSquare(int64_t i) {
  std::this_thread::sleep_for(std::chrono::microseconds((i * 7919) % 5 * 300));
  return i * i;
}

// Hints with `weight` and, when given, `group_may_end`.
JobHints Weighted(std::function<uint64_t(int64_t)> weight,
                  std::function<bool(int64_t)> group_may_end = nullptr) {
  JobHints hints;
  hints.weight = std::move(weight);
  hints.group_may_end = std::move(group_may_end);
  return hints;
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
  // Groups of 10 jobs; group g ends at its job g + 2 (a fault found at seed g + 3). With weights
  // too, where jobs may start out of order.
  const auto group = [](int64_t i) { return i / 10; };
  for (bool weighted : {false, true}) {
    for (int jobs : {1, 2, 4}) {
      std::vector<int64_t> seen;
      RunOrdered<int64_t>(
          40, jobs, group, SlowSquare,
          [&](int64_t i, int64_t&) {
            seen.push_back(i);
            return i % 10 == group(i) + 2 ? Consumed::kEndGroup : Consumed::kContinue;
          },
          weighted ? Weighted([](int64_t i) { return static_cast<uint64_t>(i % 7); }) : JobHints());
      const std::vector<int64_t> want = {0,  1,  2,  10, 11, 12, 13, 20, 21,
                                         22, 23, 24, 30, 31, 32, 33, 34, 35};
      EXPECT_EQ(seen, want) << "jobs " << jobs << ", weighted " << weighted;
    }
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

// Started jobs, and a way for a job to wait until another has started (bounded: a job that never
// starts fails the test instead of hanging it).
class StartLog {
 public:
  void Started(int64_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    started_.insert(i);
    changed_.notify_all();
  }
  // Waits until job `i` has started; false after 20 s without it.
  bool AwaitStart(int64_t i) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return started_.contains(i); });
  }
  std::set<int64_t> Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::set<int64_t> started_;
};

// What a RunOrdered over `n` jobs did while its job 0 waited for job `awaited` to start (at most
// 20 s): whether it started, which jobs had started by then, and the order of consumption.
struct WhileJobZeroWaited {
  bool awaited_started = false;
  std::set<int64_t> started;
  std::vector<int64_t> consumed;
};
WhileJobZeroWaited RunWithJobZeroAwaiting(int64_t n, int jobs,
                                          const std::function<int64_t(int64_t)>& group,
                                          int64_t awaited, const JobHints& hints) {
  StartLog log;
  WhileJobZeroWaited out;
  RunOrdered<int64_t>(
      n, jobs, group,
      [&](int64_t i) {
        log.Started(i);
        if (i == 0) {
          out.awaited_started = log.AwaitStart(awaited);
          out.started = log.Snapshot();
        }
        return i;
      },
      [&](int64_t i, int64_t&) {
        out.consumed.push_back(i);
        return Consumed::kContinue;
      },
      hints);
  return out;
}

// A long job does not idle the other threads once the lookahead is used up behind it: jobs of
// other groups, which no result before them can end, start up to the far lookahead; jobs of its
// own group stay within the near one. Without weights jobs start in order, so the first job held
// back holds back the rest; with weights a later job may start before it.
TEST(RunOrderedTest, ALongJobLeavesTheOtherThreadsJobsOfOtherGroups) {
  constexpr int kJobs = 2;
  constexpr int64_t kN = 120;
  // Jobs 0, 50 and 70 are group 0; every other job is a group of its own.
  const auto group = [](int64_t i) { return i == 0 || i == 50 || i == 70 ? int64_t{0} : i; };
  for (bool weighted : {false, true}) {
    // Beyond the near lookahead (kLookahead * kJobs = 8) of the consumer, who waits for job 0.
    const int64_t awaited = weighted ? 99 : 49;
    const WhileJobZeroWaited run = RunWithJobZeroAwaiting(
        kN, kJobs, group, awaited,
        weighted ? Weighted([](int64_t) { return uint64_t{1}; }) : JobHints());
    EXPECT_TRUE(run.awaited_started)
        << "job " << awaited << " did not start while job 0 ran; weighted " << weighted;
    EXPECT_FALSE(run.started.contains(50)) << "weighted " << weighted;
    EXPECT_FALSE(run.started.contains(70)) << "weighted " << weighted;
    ASSERT_EQ(run.consumed.size(), static_cast<size_t>(kN));
    for (int64_t i = 0; i < kN; ++i) EXPECT_EQ(run.consumed[i], i);
  }
}

// A group that cannot end wastes no job, so its later jobs start beyond the near lookahead while
// an earlier one of it still waits to be consumed.
TEST(RunOrderedTest, JobsOfAGroupThatCannotEndStartFarAhead) {
  constexpr int kJobs = 2;
  // Two groups: even jobs (group 0, cannot end) and odd jobs (group 1, may end).
  const auto group = [](int64_t i) { return i % 2; };
  const WhileJobZeroWaited run = RunWithJobZeroAwaiting(
      60, kJobs, group, 40,
      Weighted([](int64_t) { return uint64_t{1}; }, [](int64_t g) { return g == 1; }));
  EXPECT_TRUE(run.awaited_started) << "job 40 did not start while job 0 ran";
  for (int64_t i : run.started) {
    if (group(i) == 1) {
      EXPECT_LT(i, kLookahead * kJobs) << "job " << i << " of a group that may end";
    }
  }
}

// With weights, the jobs running at once weigh at most the heaviest and jobs - 1 of the median
// weight (or one runs alone), and a heavy job that does not fit lets later light ones start
// before it.
TEST(RunOrderedTest, WeightsKeepTheRunningJobsWithinTheBudget) {
  constexpr int kJobs = 3;
  constexpr int64_t kN = 40;
  // Jobs 0, 10, 20, 30 weigh 100, the others 1: the budget is 100 + 2 * 1, which two heavy jobs
  // exceed.
  const auto weight = [](int64_t i) { return i % 10 == 0 ? uint64_t{100} : uint64_t{1}; };
  StartLog log;
  std::mutex mu;
  uint64_t running = 0, most = 0;
  bool light_passed_heavy = false;
  std::vector<int64_t> consumed;
  RunOrdered<int64_t>(
      kN, kJobs, [](int64_t i) { return i; },
      [&](int64_t i) {
        {
          std::lock_guard<std::mutex> lock(mu);
          running += weight(i);
          most = std::max(most, running);
        }
        log.Started(i);
        // Job 0 runs until job 15 has started: job 10 cannot start beside it, jobs 11..15 can.
        if (i == 0) light_passed_heavy = log.AwaitStart(15) && !log.Snapshot().contains(10);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(mu);
        running -= weight(i);
        return i * i;
      },
      [&](int64_t i, int64_t& r) {
        EXPECT_EQ(r, i * i);
        consumed.push_back(i);
        return Consumed::kContinue;
      },
      Weighted(weight));
  EXPECT_TRUE(light_passed_heavy);
  EXPECT_LE(most, 102u);
  ASSERT_EQ(consumed.size(), static_cast<size_t>(kN));
  for (int64_t i = 0; i < kN; ++i) EXPECT_EQ(consumed[i], i);
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
