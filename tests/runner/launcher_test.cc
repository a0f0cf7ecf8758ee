// The multi-process launcher (runner/launcher.h) with a tiny rank program (rank_program.cc): every
// way a launch can end is reported by rank and cause, the other ranks are ended and reaped, and
// W ranks find each other through the bootstrap address it hands them.
#include "runner/launcher.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

using Clock = std::chrono::steady_clock;

LaunchResult Launch(int world, std::vector<std::string> args,
                    absl::Duration timeout = absl::Seconds(20),
                    absl::Duration grace = absl::Seconds(2)) {
  LaunchOptions o;
  o.argv = {RANK_PROGRAM};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.world = world;
  o.timeout = timeout;
  o.kill_grace = grace;
  absl::StatusOr<LaunchResult> result = LaunchRanks(o);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : LaunchResult();
}

void ExpectEndedByLauncher(const RankEnd& end, int signal) {
  EXPECT_TRUE(end.killed_by_launcher);
  EXPECT_EQ(end.how, RankEnd::How::kSignaled);
  EXPECT_EQ(end.signal, signal);
}

TEST(LauncherTest, AllRanksExitZero) {
  const LaunchResult r = Launch(4, {"ok"});
  EXPECT_TRUE(r.ok()) << r.failure;
  EXPECT_TRUE(r.ToStatus().ok());
  EXPECT_EQ(r.first_failure, -1);
  ASSERT_EQ(r.ranks.size(), 4u);
  for (const RankEnd& end : r.ranks) {
    EXPECT_EQ(end.how, RankEnd::How::kExited);
    EXPECT_EQ(end.exit_status, 0);
    EXPECT_FALSE(end.killed_by_launcher);
  }
}

TEST(LauncherTest, EachRankIsToldItsPlace) {
  char dir[] = "/tmp/dmalab-launcher-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const LaunchResult r = Launch(3, {"env", dir});
  EXPECT_TRUE(r.ok()) << r.failure;
  EXPECT_EQ(r.address.rfind("@dmalab-", 0), 0u) << r.address;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string file = std::string(dir) + "/rank" + std::to_string(rank) + ".txt";
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    EXPECT_EQ(text.str(), std::to_string(rank) + " 3 " + std::to_string(rank) + " " + r.address);
    ::unlink(file.c_str());
  }
  ::rmdir(dir);
  // A fresh address per launch.
  EXPECT_NE(FreshBootstrapAddress(), FreshBootstrapAddress());
}

TEST(LauncherTest, RankExitingNonZeroEndsTheOthers) {
  const Clock::time_point start = Clock::now();
  const LaunchResult r = Launch(3, {"exit", "1", "3"});
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5);
  EXPECT_EQ(r.failure, "rank 1 exited with status 3");
  EXPECT_EQ(r.first_failure, 1);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.ToStatus(), absl::AbortedError("rank 1 exited with status 3"));
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[1].how, RankEnd::How::kExited);
  EXPECT_EQ(r.ranks[1].exit_status, 3);
  EXPECT_FALSE(r.ranks[1].killed_by_launcher);
  ExpectEndedByLauncher(r.ranks[0], SIGTERM);
  ExpectEndedByLauncher(r.ranks[2], SIGTERM);
}

// A verdict (dmalab's exit 1: a check failed) is a finished rank, not a failure, when the launch
// says so: the other ranks are left to finish.
TEST(LauncherTest, AFinishedStatusIsAVerdictNotAFailure) {
  LaunchOptions o;
  o.argv = {RANK_PROGRAM, "verdict", "0", "1"};
  o.world = 3;
  o.timeout = absl::Seconds(20);
  o.finished_status = 1;
  absl::StatusOr<LaunchResult> r = LaunchRanks(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok()) << r->failure;
  ASSERT_EQ(r->ranks.size(), 3u);
  EXPECT_EQ(r->ranks[0].exit_status, 1);
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_EQ(r->ranks[rank].how, RankEnd::How::kExited);
    EXPECT_EQ(r->ranks[rank].exit_status, 0);
    EXPECT_FALSE(r->ranks[rank].killed_by_launcher);
  }
  // A status past it still fails the launch.
  o.argv = {RANK_PROGRAM, "verdict", "2", "2"};
  r = LaunchRanks(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failure, "rank 2 exited with status 2");
}

TEST(LauncherTest, RankKilledBySignalIsNamed) {
  const LaunchResult r = Launch(3, {"segv", "2"});
  EXPECT_EQ(r.failure, "rank 2 was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(r.first_failure, 2);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_EQ(r.ranks[2].Describe(), "was killed by signal 11 (SIGSEGV)");
  EXPECT_FALSE(r.ranks[2].killed_by_launcher);
  ExpectEndedByLauncher(r.ranks[0], SIGTERM);
  ExpectEndedByLauncher(r.ranks[1], SIGTERM);
}

TEST(LauncherTest, TimeoutEndsAndNamesTheRanksStillRunning) {
  const Clock::time_point start = Clock::now();
  const LaunchResult r = Launch(3, {"hang", "1"}, absl::Seconds(2));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(seconds, 2);
  EXPECT_LT(seconds, 5);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.failure, "timed out after 2 s; rank 1 was still running");
  EXPECT_EQ(r.ToStatus().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r.first_failure, -1);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_TRUE(r.ranks[0].ok());
  EXPECT_TRUE(r.ranks[2].ok());
  ExpectEndedByLauncher(r.ranks[1], SIGTERM);
}

TEST(LauncherTest, RankIgnoringSigtermIsKilled) {
  const LaunchResult r =
      Launch(2, {"hang-hard", "0"}, absl::Milliseconds(500), absl::Milliseconds(300));
  EXPECT_EQ(r.failure, "timed out after 0.5 s; rank 0 was still running");
  ASSERT_EQ(r.ranks.size(), 2u);
  ExpectEndedByLauncher(r.ranks[0], SIGKILL);
  EXPECT_TRUE(r.ranks[1].ok());
}

TEST(LauncherTest, RanksAllGatherThroughTheBootstrap) {
  const LaunchResult r = Launch(4, {"allgather"});
  EXPECT_TRUE(r.ok()) << r.failure;
  for (const RankEnd& end : r.ranks) EXPECT_TRUE(end.ok()) << end.Describe();
}

// The others then fail too (rank 2's connection closed), but the crash is the cause.
TEST(LauncherTest, CrashDuringBootstrapIsTheFirstFailure) {
  const LaunchResult r = Launch(4, {"allgather-segv", "2"});
  EXPECT_EQ(r.failure, "rank 2 was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(r.first_failure, 2);
}

TEST(LauncherTest, LauncherErrors) {
  LaunchOptions o;
  o.argv = {"/nonexistent/rank_program"};
  o.world = 2;
  EXPECT_EQ(LaunchRanks(o).status(),
            absl::FailedPreconditionError(
                "launch: cannot run \"/nonexistent/rank_program\": No such file or directory"));
  o.world = 65;
  EXPECT_EQ(LaunchRanks(o).status(),
            absl::InvalidArgumentError("launch: world 65; it must be 1 to 64"));
  o.world = 2;
  o.argv = {};
  EXPECT_EQ(LaunchRanks(o).status(), absl::InvalidArgumentError("launch: no program to run"));
}

// Sets the rank variables for one test and restores "unset" after it.
class RankEnvTest : public testing::Test {
 protected:
  void TearDown() override { Set(nullptr, nullptr, nullptr); }
  static void Set(const char* rank, const char* world, const char* bootstrap) {
    const std::pair<const char*, const char*> vars[] = {
        {kRankEnv, rank}, {kWorldEnv, world}, {kBootstrapEnv, bootstrap}, {kLocalRankEnv, nullptr}};
    for (const auto& [name, value] : vars) {
      if (value == nullptr) {
        ::unsetenv(name);
      } else {
        ::setenv(name, value, 1);
      }
    }
  }
};

TEST_F(RankEnvTest, NotLaunchedAsARank) {
  Set(nullptr, nullptr, nullptr);
  EXPECT_EQ(RankEnvFromEnvironment().status(),
            absl::NotFoundError("not launched as a rank: DMALAB_RANK, DMALAB_WORLD and "
                                "DMALAB_BOOTSTRAP are not set"));
}

TEST_F(RankEnvTest, ReadsAWellFormedEnvironment) {
  Set("2", "4", "@dmalab-x");
  absl::StatusOr<RankEnv> env = RankEnvFromEnvironment();
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->bootstrap, "@dmalab-x");
}

TEST_F(RankEnvTest, MalformedValuesAreNamed) {
  Set("2", nullptr, "@x");
  EXPECT_EQ(RankEnvFromEnvironment().status(),
            absl::InvalidArgumentError("DMALAB_WORLD is not set, but some of DMALAB_RANK, "
                                       "DMALAB_WORLD and DMALAB_BOOTSTRAP are: a launcher sets "
                                       "all three"));
  Set("2", "abc", "@x");
  EXPECT_EQ(RankEnvFromEnvironment().status(),
            absl::InvalidArgumentError(
                "DMALAB_WORLD=\"abc\": the world must be an integer with 1 <= world <= 64"));
  Set("0", "65", "@x");
  EXPECT_EQ(RankEnvFromEnvironment().status().code(), absl::StatusCode::kInvalidArgument);
  Set("4", "4", "@x");
  EXPECT_EQ(RankEnvFromEnvironment().status(),
            absl::InvalidArgumentError("DMALAB_RANK=\"4\": the rank must be an integer with 0 <= "
                                       "rank < world (DMALAB_WORLD=4)"));
  Set("-1", "4", "@x");
  EXPECT_EQ(RankEnvFromEnvironment().status().code(), absl::StatusCode::kInvalidArgument);
  Set("1", "4", "");
  EXPECT_EQ(RankEnvFromEnvironment().status(),
            absl::InvalidArgumentError(
                "DMALAB_BOOTSTRAP=\"\": it must be a Unix socket path or an abstract name "
                "starting with '@', of 1 to 107 bytes"));
}

}  // namespace
}  // namespace dmalab
