#include "runner/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/core/status_macros.h"

extern char** environ;

namespace dmalab {
namespace {

using Clock = std::chrono::steady_clock;

// How often the launcher looks at its children.
constexpr auto kPollInterval = std::chrono::milliseconds(5);

std::string Seconds(absl::Duration d) { return absl::StrFormat("%g s", absl::ToDoubleSeconds(d)); }

Clock::duration ToClock(absl::Duration d) {
  d = std::clamp(d, absl::ZeroDuration(), absl::Hours(24 * 365));
  return std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(d));
}

// The path execve runs: argv[0] itself when it holds a '/', else its first match in PATH.
absl::StatusOr<std::string> ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrFormat("launch: no program \"%s\" in PATH", name));
}

// Reaps rank `r` if it ended (without waiting); true when it did.
bool Reap(pid_t pid, RankEnd* end, bool block) {
  int st = 0;
  pid_t got;
  do {
    got = ::waitpid(pid, &st, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got != pid) return false;
  if (WIFSIGNALED(st)) {
    end->how = RankEnd::How::kSignaled;
    end->signal = WTERMSIG(st);
  } else {
    end->how = RankEnd::How::kExited;
    end->exit_status = WEXITSTATUS(st);
  }
  return true;
}

// Reaps the ranks that end by themselves within `wait`; true when none is left running.
bool AwaitEnds(std::vector<pid_t>& pids, std::vector<RankEnd>& ends, absl::Duration wait) {
  const Clock::time_point until = Clock::now() + ToClock(wait);
  while (true) {
    bool running = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] <= 0) continue;
      if (Reap(pids[r], &ends[r], /*block=*/false)) {
        pids[r] = 0;
      } else {
        running = true;
      }
    }
    if (!running) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Ends the ranks still running: first lets them end by themselves for `settle` (a rank that
// failed usually tells its peers, which then fail and say why), then SIGTERM, then SIGKILL to
// those alive after `grace`; reaps all.
void EndAll(std::vector<pid_t>& pids, std::vector<RankEnd>& ends, absl::Duration settle,
            absl::Duration grace) {
  if (AwaitEnds(pids, ends, settle)) return;
  for (size_t r = 0; r < pids.size(); ++r) {
    if (pids[r] <= 0) continue;
    ::kill(pids[r], SIGTERM);
    ends[r].killed_by_launcher = true;
  }
  AwaitEnds(pids, ends, grace);
  for (size_t r = 0; r < pids.size(); ++r) {
    if (pids[r] <= 0) continue;
    ::kill(pids[r], SIGKILL);
    Reap(pids[r], &ends[r], /*block=*/true);
    pids[r] = 0;
  }
}

bool IsRankVariable(std::string_view entry) {
  for (const char* name : {kRankEnv, kWorldEnv, kBootstrapEnv, kLocalRankEnv}) {
    const std::string_view n(name);
    if (entry.size() > n.size() && entry.substr(0, n.size()) == n && entry[n.size()] == '=') {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string RankEnd::Describe() const {
  switch (how) {
    case How::kNotStarted:
      return "was not started";
    case How::kExited:
      return absl::StrFormat("exited with status %d", exit_status);
    case How::kSignaled: {
      const char* abbrev = ::sigabbrev_np(signal);
      return absl::StrFormat("was killed by signal %d (SIG%s)", signal,
                             abbrev != nullptr ? abbrev : "?");
    }
  }
  return "?";
}

absl::Status LaunchResult::ToStatus() const {
  if (ok()) return absl::OkStatus();
  return timed_out ? absl::DeadlineExceededError(failure) : absl::AbortedError(failure);
}

std::string FreshBootstrapAddress() {
  std::random_device device;
  const uint64_t noise = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                         static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return absl::StrFormat("@dmalab-%d-%016x", ::getpid(), noise);
}

absl::StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options) {
  const int w = options.world;
  if (options.argv.empty()) return absl::InvalidArgumentError("launch: no program to run");
  if (w < 1 || w > kMaxLaunchWorld) {
    return absl::InvalidArgumentError(
        absl::StrFormat("launch: world %d; it must be 1 to %d", w, kMaxLaunchWorld));
  }
  if (options.timeout <= absl::ZeroDuration() || options.kill_grace < absl::ZeroDuration() ||
      options.settle < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "launch: the timeout must be positive, the settle time and the kill grace not negative");
  }
  DMALAB_ASSIGN_OR_RETURN(std::string program, ResolveProgram(options.argv[0]));

  LaunchResult result;
  result.address = options.address.empty() ? FreshBootstrapAddress() : options.address;
  result.ranks.resize(w);

  // Everything the children need is built before forking: after fork a child only calls
  // async-signal-safe functions (the launcher may have other threads).
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> base_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!IsRankVariable(*e)) base_env.emplace_back(*e);
  }
  std::vector<std::vector<std::string>> rank_env(w, base_env);
  for (int r = 0; r < w; ++r) {
    rank_env[r].push_back(absl::StrFormat("%s=%d", kRankEnv, r));
    rank_env[r].push_back(absl::StrFormat("%s=%d", kWorldEnv, w));
    rank_env[r].push_back(absl::StrFormat("%s=%s", kBootstrapEnv, result.address));
    rank_env[r].push_back(absl::StrFormat("%s=%d", kLocalRankEnv, r));
  }

  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids(w, 0);
  for (int r = 0; r < w; ++r) {
    std::vector<char*> envp;
    for (const std::string& e : rank_env[r]) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    // A pipe closed by a successful exec, or carrying exec's errno.
    int exec_pipe[2];
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
      const int err = errno;
      EndAll(pids, result.ranks, absl::ZeroDuration(), absl::ZeroDuration());
      return absl::UnavailableError(absl::StrFormat("launch: pipe: %s", std::strerror(err)));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      ::close(exec_pipe[0]);
      ::close(exec_pipe[1]);
      EndAll(pids, result.ranks, absl::ZeroDuration(), absl::ZeroDuration());
      return absl::UnavailableError(
          absl::StrFormat("launch: fork for rank %d: %s", r, std::strerror(err)));
    }
    if (pid == 0) {
      ::close(exec_pipe[0]);
      // Die with the launcher; if it already died (before the line above), end now.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) ::_exit(127);
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::execve(program.c_str(), argv.data(), envp.data());
      const int err = errno;
      ssize_t ignored = ::write(exec_pipe[1], &err, sizeof(err));
      (void)ignored;
      ::_exit(127);
    }
    pids[r] = pid;
    ::close(exec_pipe[1]);
    int err = 0;
    ssize_t n;
    do {
      n = ::read(exec_pipe[0], &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    ::close(exec_pipe[0]);
    if (n == static_cast<ssize_t>(sizeof(err))) {
      Reap(pid, &result.ranks[r], /*block=*/true);
      pids[r] = 0;
      EndAll(pids, result.ranks, absl::ZeroDuration(), absl::ZeroDuration());
      return absl::FailedPreconditionError(
          absl::StrFormat("launch: cannot run \"%s\": %s", program, std::strerror(err)));
    }
  }

  const bool bounded = options.timeout != absl::InfiniteDuration();
  const Clock::time_point deadline = Clock::now() + ToClock(options.timeout);
  int running = w;
  while (running > 0) {
    int failed = -1;  // the lowest rank found failed in this look
    for (int r = 0; r < w; ++r) {
      if (pids[r] <= 0 || !Reap(pids[r], &result.ranks[r], /*block=*/false)) continue;
      pids[r] = 0;
      --running;
      if (failed < 0 && !result.ranks[r].finished(options.finished_status)) failed = r;
    }
    if (failed >= 0) {
      EndAll(pids, result.ranks, options.settle, options.kill_grace);
      // A rank that a signal ended (not the launcher's) is the likelier cause: the others then
      // fail for want of it. It may be found after them, in this look or in the settle time: its
      // sockets close before it can be reaped, the more so while it dumps core.
      if (result.ranks[failed].how != RankEnd::How::kSignaled) {
        for (int r = 0; r < w; ++r) {
          const RankEnd& end = result.ranks[r];
          if (end.how == RankEnd::How::kSignaled && !end.killed_by_launcher) {
            failed = r;
            break;
          }
        }
      }
      result.first_failure = failed;
      result.failure = absl::StrFormat("rank %d %s", failed, result.ranks[failed].Describe());
      break;
    }
    if (running == 0) break;
    if (bounded && Clock::now() >= deadline) {
      std::vector<int> late;
      for (int r = 0; r < w; ++r) {
        if (pids[r] > 0) late.push_back(r);
      }
      result.timed_out = true;
      result.failure = absl::StrFormat(
          "timed out after %s; %s %s still running", Seconds(options.timeout),
          late.size() == 1 ? "rank" : "ranks",
          absl::StrCat(absl::StrJoin(late, ", "), late.size() == 1 ? " was" : " were"));
      EndAll(pids, result.ranks, absl::ZeroDuration(), options.kill_grace);
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return result;
}

namespace {

// The value of `name`, or nullptr when unset.
const char* Env(const char* name) { return std::getenv(name); }

}  // namespace

absl::StatusOr<RankEnv> RankEnvFromEnvironment() {
  const char* rank = Env(kRankEnv);
  const char* world = Env(kWorldEnv);
  const char* bootstrap = Env(kBootstrapEnv);
  if (rank == nullptr && world == nullptr && bootstrap == nullptr) {
    return absl::NotFoundError(absl::StrFormat("not launched as a rank: %s, %s and %s are not set",
                                               kRankEnv, kWorldEnv, kBootstrapEnv));
  }
  for (const char* name : {kRankEnv, kWorldEnv, kBootstrapEnv}) {
    if (Env(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s is not set, but some of %s, %s and %s are: a launcher sets all three",
                          name, kRankEnv, kWorldEnv, kBootstrapEnv));
    }
  }
  RankEnv env;
  if (!absl::SimpleAtoi(world, &env.world) || env.world < 1 || env.world > kMaxLaunchWorld) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s=\"%s\": the world must be an integer with 1 <= world <= %d", kWorldEnv,
                        world, kMaxLaunchWorld));
  }
  if (!absl::SimpleAtoi(rank, &env.rank) || env.rank < 0 || env.rank >= env.world) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s=\"%s\": the rank must be an integer with 0 <= rank < world (%s=%d)",
                        kRankEnv, rank, kWorldEnv, env.world));
  }
  env.local_rank = env.rank;
  if (const char* local = Env(kLocalRankEnv); local != nullptr) {
    if (!absl::SimpleAtoi(local, &env.local_rank) || env.local_rank < 0 ||
        env.local_rank >= kMaxLaunchWorld) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s=\"%s\": the local rank must be an integer with 0 <= local rank < %d",
                          kLocalRankEnv, local, kMaxLaunchWorld));
    }
  }
  env.bootstrap = bootstrap;
  const size_t limit = sizeof(sockaddr_un::sun_path) - 1;
  if (env.bootstrap.empty() || env.bootstrap == "@" || env.bootstrap.size() > limit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=\"%s\": it must be a Unix socket path or an abstract name starting with '@', of 1 "
        "to %d bytes",
        kBootstrapEnv, bootstrap, limit));
  }
  return env;
}

}  // namespace dmalab
