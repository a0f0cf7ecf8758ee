// GatherProcessNames: every rank gets every rank's pid and host, by rank.
#include "tools/process_names.h"

#include <limits.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/plugin/bootstrap.h"
#include "common/plugin/rank_threads.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

TEST(ProcessNamesTest, EveryRankGetsEveryRanksPidAndHostByRank) {
  constexpr int kWorld = 4;
  RankThreads threads(kWorld, /*seed=*/7);
  ThreadBootstrap bootstrap(&threads);
  std::vector<std::vector<ProcessName>> got(kWorld);
  const std::vector<absl::Status> st = threads.Run([&](int rank) -> absl::Status {
    const ProcessName mine{1000 + rank, absl::StrCat("node-", rank)};
    absl::StatusOr<std::vector<ProcessName>> names = GatherProcessNames(bootstrap, rank, mine);
    if (!names.ok()) return names.status();
    got[rank] = *names;
    return absl::OkStatus();
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(st[rank].ok()) << st[rank];
    ASSERT_EQ(got[rank].size(), 4u);
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_EQ(got[rank][r].pid, 1000 + r) << "rank " << rank << " of " << r;
      EXPECT_EQ(got[rank][r].host, absl::StrCat("node-", r)) << "rank " << rank << " of " << r;
    }
  }
}

TEST(ProcessNamesTest, HostNamesOfDifferentLengthsTravelWhole) {
  RankThreads threads(2, /*seed=*/1);
  ThreadBootstrap bootstrap(&threads);
  const std::string longer(300, 'h');
  std::vector<ProcessName> got;
  const std::vector<absl::Status> st = threads.Run([&](int rank) -> absl::Status {
    const ProcessName mine{rank, rank == 0 ? "h" : longer};
    absl::StatusOr<std::vector<ProcessName>> names = GatherProcessNames(bootstrap, rank, mine);
    if (!names.ok()) return names.status();
    if (rank == 1) got = *names;
    return absl::OkStatus();
  });
  ASSERT_TRUE(st[0].ok() && st[1].ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].host, "h");
  EXPECT_EQ(got[1].host, longer);
}

TEST(ProcessNamesTest, ThisProcessIsOurPidAndHost) {
  char host[HOST_NAME_MAX + 1] = "";
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const ProcessName me = ThisProcessName();
  EXPECT_EQ(me.pid, static_cast<int>(getpid()));
  EXPECT_EQ(me.host, std::string(host));
}

}  // namespace
}  // namespace dmalab
