// RankThreads (common/plugin/rank_threads.h): one rank's thread runs at a time, in an order the
// seed fixes; a run keeps the ranks on the caller's CPU and gives the caller its affinity back.
#include "common/plugin/rank_threads.h"

#include <sched.h>

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

// Four ranks that each yield three times; the order in which their steps ran.
std::string Interleaving(uint64_t seed) {
  RankThreads threads(4, seed);
  std::string order;  // written by one thread at a time (the one whose turn it is)
  const std::vector<absl::Status> st = threads.Run([&](int rank) {
    for (int step = 0; step < 3; ++step) {
      absl::StrAppend(&order, rank);
      threads.Yield(rank);
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << s;
  return order;
}

TEST(RankThreadsTest, TheSeedFixesTheInterleaving) {
  const std::string a = Interleaving(7);
  ASSERT_EQ(a.size(), 12u);
  for (char r : std::string("0123")) EXPECT_EQ(std::count(a.begin(), a.end(), r), 3) << a;
  EXPECT_EQ(Interleaving(7), a);
  // Another seed permutes it (these two seeds do).
  EXPECT_NE(Interleaving(8), a);
}

TEST(RankThreadsTest, ARunKeepsTheRanksOnTheCallersCpuAndRestoresItsAffinity) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  RankThreads threads(3, 1);
  std::mutex mu;
  std::vector<int> cpus;
  for (int run = 0; run < 3; ++run) {
    cpus.clear();
    threads.Run([&](int rank) {
      for (int step = 0; step < 4; ++step) {
        {
          std::lock_guard<std::mutex> lock(mu);
          cpus.push_back(sched_getcpu());
        }
        threads.Yield(rank);
      }
      return absl::OkStatus();
    });
    ASSERT_EQ(cpus.size(), 12u);
    for (int cpu : cpus) EXPECT_EQ(cpu, cpus[0]) << "run " << run;
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "run " << run;
  }
}

TEST(RankThreadsTest, RanksThatAllBlockAreWokenWithADeadlock) {
  RankThreads threads(2, 3);
  std::vector<int> woke(2, -1);
  threads.Run([&](int rank) {
    woke[rank] = threads.Block(rank, [] { return false; }) ? 1 : 0;
    return absl::OkStatus();
  });
  EXPECT_EQ(woke, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace dmalab
