// The process-per-rank bootstrap (common/plugin/socket_bootstrap.h): W ranks as forked child
// processes of the test exchange exact bytes over many rounds; and each way a group can go wrong
// (a world that differs, a rank twice, a rank that ends or never arrives, unequal counts, calls
// out of step) ends every rank with the same error naming the culprit, well within the bounds.
#include "common/plugin/socket_bootstrap.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tools/process_names.h"

namespace dmalab {
namespace {

using Clock = std::chrono::steady_clock;

std::string FreshAddress() {
  static std::atomic<int> n{0};
  return absl::StrFormat("@dmalab-bootstrap-test-%d-%d-%d", ::getpid(), n++,
                         Clock::now().time_since_epoch().count());
}

// What one rank process reported: its exit code and the text it sent back.
struct RankReport {
  int exit_code = -1;  // -1: killed (it outlived the test's bound)
  std::string text;
};

// Forks `world` children; child r runs body(r) and sends back its return value. The parent
// collects every report within `bound`; a child still running then is killed (the test fails).
// No child outlives the call.
std::vector<RankReport> RunRanks(int world, const std::function<std::string(int)>& body,
                                 std::chrono::milliseconds bound = std::chrono::seconds(10)) {
  std::vector<pid_t> pids(world, -1);
  std::vector<int> fds(world, -1);
  std::vector<RankReport> reports(world);
  for (int r = 0; r < world; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      ADD_FAILURE() << "pipe";
      break;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      for (int i = 0; i < r; ++i) ::close(fds[i]);
      const std::string text = body(r);
      size_t at = 0;
      while (at < text.size()) {
        const ssize_t n = ::write(p[1], text.data() + at, text.size() - at);
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
      ::_exit(0);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  const Clock::time_point deadline = Clock::now() + bound;
  while (true) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < world; ++r) {
      if (fds[r] < 0) continue;
      pfds.push_back({fds[r], POLLIN, 0});
      who.push_back(r);
    }
    if (pfds.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ADD_FAILURE() << "ranks still running after " << bound.count() << " ms";
      break;
    }
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(left)) <= 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        reports[who[i]].text.append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[who[i]]);
        fds[who[i]] = -1;
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (fds[r] >= 0) {
      ::close(fds[r]);
      ::kill(pids[r], SIGKILL);
    }
    if (pids[r] <= 0) continue;
    int st = 0;
    while (::waitpid(pids[r], &st, 0) < 0 && errno == EINTR) {
    }
    reports[r].exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return reports;
}

SocketBootstrapOptions Options(int rank, int world, const std::string& address,
                               absl::Duration timeout = absl::Seconds(2)) {
  SocketBootstrapOptions o;
  o.rank = rank;
  o.world = world;
  o.address = address;
  o.connect_timeout = timeout;
  o.op_timeout = timeout;
  return o;
}

// The text a rank sends back for a status: "OK" or "<code>: <message>".
std::string Text(const absl::Status& s) {
  return s.ok() ? "OK" : absl::StrFormat("%s: %s", absl::StatusCodeToString(s.code()), s.message());
}

uint8_t Byte(int rank, int round, size_t i) {
  return static_cast<uint8_t>(rank * 131 + round * 17 + i * 7 + (i >> 8));
}

// Many rounds of allgathers (sizes from 0 bytes to 1 MiB), broadcasts from every root and
// barriers; every byte checked. Returns "OK" or the first thing that was wrong.
std::string ExactRounds(int rank, int world, const std::string& address) {
  absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
      SocketBootstrap::Connect(Options(rank, world, address, absl::Seconds(5)));
  if (!b.ok()) return Text(b.status());
  const size_t sizes[] = {0, 1, 3, 8, 64, 1000, 4096, 65537, 1 << 20};
  constexpr int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    const size_t n = sizes[round % std::size(sizes)];
    std::vector<uint8_t> send(n);
    for (size_t i = 0; i < n; ++i) send[i] = Byte(rank, round, i);
    std::vector<uint8_t> recv(n * world, 0xee);
    if (absl::Status s = (*b)->AllGather(rank, send, absl::MakeSpan(recv)); !s.ok()) {
      return Text(s);
    }
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < n; ++i) {
        if (recv[r * n + i] != Byte(r, round, i)) {
          return absl::StrFormat("round %d: byte %d of rank %d's part is %d, not %d", round, i, r,
                                 recv[r * n + i], Byte(r, round, i));
        }
      }
    }
    const int root = round % world;
    std::vector<uint8_t> data(n + 5, 0);
    if (rank == root) {
      for (size_t i = 0; i < data.size(); ++i) data[i] = Byte(root + 100, round, i);
    }
    if (absl::Status s = (*b)->Broadcast(root, absl::MakeSpan(data)); !s.ok()) return Text(s);
    for (size_t i = 0; i < data.size(); ++i) {
      if (data[i] != Byte(root + 100, round, i)) {
        return absl::StrFormat("round %d: broadcast byte %d is %d", round, i, data[i]);
      }
    }
    if (round % 3 == 0) {
      if (absl::Status s = (*b)->Barrier(rank); !s.ok()) return Text(s);
    }
  }
  return "OK";
}

class ExactRoundsTest : public testing::TestWithParam<int> {};

TEST_P(ExactRoundsTest, EveryByteArrives) {
  const int world = GetParam();
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports =
      RunRanks(world, [&](int rank) { return ExactRounds(rank, world, address); });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(reports[r].exit_code, 0) << "rank " << r;
    EXPECT_EQ(reports[r].text, "OK") << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ExactRoundsTest, testing::Values(1, 2, 4, 8));

// As `sweep --procs` names its ranks' processes: each rank process contributes its own pid and
// host (tools/process_names.h), and every rank gets all of them by rank. A rank sends back its own
// pid, then every rank's as gathered: "<own> <pid of rank 0> ... <pid of rank W-1>".
TEST(SocketBootstrapTest, RankProcessesGatherEachOthersPidAndHost) {
  constexpr int kWorld = 4;
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(kWorld, [&](int rank) -> std::string {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, kWorld, address));
    if (!b.ok()) return Text(b.status());
    const ProcessName mine = ThisProcessName();
    absl::StatusOr<std::vector<ProcessName>> names = GatherProcessNames(**b, rank, mine);
    if (!names.ok()) return Text(names.status());
    std::string text = absl::StrFormat("%d", mine.pid);
    for (const ProcessName& n : *names) {
      if (n.host != mine.host) return "host " + n.host + " is not " + mine.host;
      absl::StrAppendFormat(&text, " %d", n.pid);
    }
    return text;
  });
  std::vector<std::vector<std::string>> fields(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(reports[r].exit_code, 0) << "rank " << r;
    fields[r] = absl::StrSplit(reports[r].text, ' ');
    ASSERT_EQ(fields[r].size(), kWorld + 1u) << "rank " << r << ": " << reports[r].text;
  }
  for (int r = 0; r < kWorld; ++r) {
    for (int q = 0; q < kWorld; ++q) {
      EXPECT_EQ(fields[r][q + 1], fields[q][0]) << "rank " << r << " names rank " << q;
      if (q != r) {
        EXPECT_NE(fields[q][0], fields[r][0]) << "ranks " << q << " and " << r;
      }
    }
  }
}

TEST(SocketBootstrapTest, FilesystemPathReplacesALeftoverAndIsUnlinkedOnceConnected) {
  char dir[] = "/tmp/dmalab-bootstrap-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/bootstrap.sock";
  {
    // A socket file left by an earlier run that died: nobody listens there, so it is replaced.
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    ::close(fd);
    ASSERT_EQ(::access(path.c_str(), F_OK), 0);
  }
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, 3, path));
    if (!b.ok()) return Text(b.status());
    if (rank == 0 && ::access(path.c_str(), F_OK) == 0) return std::string("socket file left");
    return Text((*b)->Barrier(rank));
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(reports[r].text, "OK") << "rank " << r;
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  ::rmdir(dir);
}

TEST(SocketBootstrapTest, WorldMismatchIsRefusedWithTheSameErrorEverywhere) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(4, [&](int rank) {
    // The others connect first, so that every rank hears rank 0's refusal.
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return Text(SocketBootstrap::Connect(Options(rank, rank == 2 ? 3 : 4, address)).status());
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(reports[r].text, "INVALID_ARGUMENT: rank 2 says world 3; rank 0 has world 4")
        << "rank " << r;
  }
}

TEST(SocketBootstrapTest, DuplicateRankIsRefused) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return Text(SocketBootstrap::Connect(Options(rank == 2 ? 1 : rank, 3, address)).status());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reports[r].text, "INVALID_ARGUMENT: two processes say they are rank 1")
        << "rank " << r;
  }
}

TEST(SocketBootstrapTest, StrangerWithBadMagicIsRefused) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(2, [&](int rank) {
    if (rank == 0) return Text(SocketBootstrap::Connect(Options(0, 2, address)).status());
    // Not a rank: something else connects and writes garbage.
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, address.data() + 1, address.size() - 1);
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    for (int i = 0; i < 200 && ::connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const std::string garbage(40, 'x');
    if (::write(fd, garbage.data(), garbage.size()) != 40) return std::string("write failed");
    char c;
    while (::read(fd, &c, 1) > 0) {
    }
    ::close(fd);
    return std::string("OK");
  });
  EXPECT_EQ(reports[0].text,
            "DATA_LOSS: a process connecting to rank 0 sent a frame with magic 0x78787878, not a "
            "dmalab bootstrap frame");
}

TEST(SocketBootstrapTest, RankThatNeverConnectsIsNamed) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    if (rank == 2) return std::string("absent");
    return Text(SocketBootstrap::Connect(Options(rank, 3, address, absl::Seconds(1))).status());
  });
  const std::string expected = absl::StrFormat(
      "DEADLINE_EXCEEDED: bootstrap at \"%s\": rank 2 did not connect within 1 s", address);
  EXPECT_EQ(reports[0].text, expected);
  EXPECT_EQ(reports[1].text, expected);
}

// A rank whose process ends is named by every other rank, at once, in the call it missed; later
// calls fail fast with the same error.
TEST(SocketBootstrapTest, RankThatEndsIsNamedByEveryone) {
  for (const int dies : {2, 0}) {
    const std::string address = FreshAddress();
    const Clock::time_point start = Clock::now();
    const std::vector<RankReport> reports = RunRanks(4, [&](int rank) {
      absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
          SocketBootstrap::Connect(Options(rank, 4, address, absl::Seconds(2)));
      if (!b.ok()) return Text(b.status());
      std::vector<uint8_t> send(16, static_cast<uint8_t>(rank)), recv(64);
      for (int i = 0; i < 3; ++i) {
        if (absl::Status s = (*b)->AllGather(rank, send, absl::MakeSpan(recv)); !s.ok()) {
          return Text(s);
        }
      }
      if (rank == dies) ::_exit(0);
      const absl::Status first = (*b)->AllGather(rank, send, absl::MakeSpan(recv));
      const absl::Status later = (*b)->Barrier(rank);
      return later == first ? Text(first) : "later call: " + Text(later);
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, 1.5) << "the end of a rank is seen at once, not at the timeout";
    for (int r = 0; r < 4; ++r) {
      if (r == dies) continue;
      EXPECT_EQ(reports[r].text,
                absl::StrFormat("UNAVAILABLE: rank %d closed its connection (its process ended?) "
                                "during allgather #4",
                                dies))
          << "rank " << r;
    }
  }
}

TEST(SocketBootstrapTest, RanksThatDoNotArriveAreNamed) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(4, [&](int rank) {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, 4, address, absl::Seconds(1)));
    if (!b.ok()) return Text(b.status());
    if (absl::Status s = (*b)->Barrier(rank); !s.ok()) return Text(s);
    // Ranks 1 and 3 come late to the second barrier: after rank 0 gave up on them.
    if (rank == 1 || rank == 3) std::this_thread::sleep_for(std::chrono::milliseconds(1800));
    return Text((*b)->Barrier(rank));
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(reports[r].text,
              "DEADLINE_EXCEEDED: barrier #2: ranks 1, 3 did not arrive within 1 s")
        << "rank " << r;
  }
}

TEST(SocketBootstrapTest, UnequalCountsAreNamed) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, 3, address));
    if (!b.ok()) return Text(b.status());
    const size_t n = rank == 1 ? 8 : 4;
    std::vector<uint8_t> send(n), recv(3 * n);
    return Text((*b)->AllGather(rank, send, absl::MakeSpan(recv)));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reports[r].text,
              "INVALID_ARGUMENT: allgather #1: rank 1 passes 8 bytes, rank 0 passes 4; every rank "
              "passes the same count")
        << "rank " << r;
  }
}

TEST(SocketBootstrapTest, CallsOutOfStepAreNamed) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, 3, address));
    if (!b.ok()) return Text(b.status());
    if (rank == 2) return Text((*b)->Barrier(rank));
    std::vector<uint8_t> send(4), recv(12);
    return Text((*b)->AllGather(rank, send, absl::MakeSpan(recv)));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reports[r].text,
              "INVALID_ARGUMENT: call #1: rank 0 called allgather of 4 bytes, rank 2 barrier; "
              "every rank makes the same calls in the same order")
        << "rank " << r;
  }
}

// A rank's own wrong argument reaches every rank through rank 0.
TEST(SocketBootstrapTest, WrongRankArgumentReachesEveryRank) {
  const std::string address = FreshAddress();
  const std::vector<RankReport> reports = RunRanks(3, [&](int rank) {
    absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
        SocketBootstrap::Connect(Options(rank, 3, address));
    if (!b.ok()) return Text(b.status());
    if (absl::Status s = (*b)->Barrier(rank); !s.ok()) return Text(s);
    return Text((*b)->Barrier(rank == 1 ? 0 : rank));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reports[r].text,
              "INVALID_ARGUMENT: barrier #2: process of rank 1 called it as rank 0")
        << "rank " << r;
  }
}

TEST(SocketBootstrapTest, OversizedMessageIsRefusedAndBreaksTheBootstrap) {
  absl::StatusOr<std::unique_ptr<SocketBootstrap>> b =
      SocketBootstrap::Connect(Options(0, 1, FreshAddress()));
  ASSERT_TRUE(b.ok()) << b.status();
  // The size is refused before any byte is touched.
  const absl::Span<const uint8_t> huge(reinterpret_cast<const uint8_t*>(&b),
                                       kMaxBootstrapMessage + 1);
  const absl::Status s = (*b)->AllGather(0, huge, {});
  EXPECT_EQ(Text(s),
            "INVALID_ARGUMENT: allgather #1 on rank 0: 1 ranks x 1073741825 bytes exceed the "
            "bootstrap's limit of 1073741824 bytes");
  EXPECT_EQ((*b)->Barrier(0), s);
}

TEST(SocketBootstrapTest, BadOptionsAreRefused) {
  EXPECT_EQ(Text(SocketBootstrap::Connect(Options(3, 3, "@x")).status()),
            "INVALID_ARGUMENT: bootstrap rank 3: world 3 has ranks 0 to 2");
  EXPECT_EQ(Text(SocketBootstrap::Connect(Options(0, 2, "")).status()),
            "INVALID_ARGUMENT: bootstrap address is empty: give a socket path or an abstract name "
            "starting with '@'");
}

}  // namespace
}  // namespace dmalab
