#include "runner/isolated_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

// A frame: 4 bytes of length (little-endian, the kind byte and the payload), the kind, the payload.
constexpr char kMessage = 'm';
constexpr char kDone = 'd';  // `work` returned: sent last, by RunIsolated's worker code
// A frame longer than this is not one the worker wrote (the report's deltas are far smaller).
constexpr uint32_t kMaxFrame = 64u << 20;

void WriteFrame(int fd, char kind, std::string_view payload) {
  const uint32_t n = static_cast<uint32_t>(payload.size() + 1);
  char head[5] = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                  static_cast<char>(n >> 24), kind};
  for (std::string_view part : {std::string_view(head, 5), payload}) {
    while (!part.empty()) {
      const ssize_t w = ::write(fd, part.data(), part.size());
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ::_exit(3);  // the parent went away: nobody to report to
      part.remove_prefix(static_cast<size_t>(w));
    }
  }
}

// Set in a worker process. A worker ends by _exit (no leak check) unless the collective ends it
// itself, e.g. by exit() from one of its threads while others still run; LeakSanitizer's check
// at that exit cannot stop those threads and reports false leaks, so workers never run it.
bool in_worker = false;

[[noreturn]] void RunWorker(int fd, pid_t parent, const std::function<void(WorkerChannel&)>& work) {
  in_worker = true;
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);  // the parent died before the line above
  ::dup2(STDERR_FILENO, STDOUT_FILENO);   // what the collective prints is not the report
  WorkerChannel channel(fd);
  // On a thread of its own: its allocations then come from a new malloc arena instead of the
  // parent's heap, whose free lists a forked worker would walk and rewrite, paying a
  // copy-on-write fault per page it touches (in a long campaign the parent's heap is large, and on
  // a virtual machine such a fault costs several times a copy of the page).
  std::thread([&] { work(channel); }).join();
  WriteFrame(fd, kDone, "");
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Frames out of the bytes read so far.
class FrameReader {
 public:
  // Appends `data` and hands every complete frame on; an error stops it.
  absl::Status Feed(std::string_view data,
                    const std::function<absl::Status(std::string_view)>& on_message) {
    buf_.append(data);
    size_t at = 0;
    absl::Status status;
    while (status.ok() && buf_.size() - at >= 4) {
      uint32_t n = 0;
      for (int i = 0; i < 4; ++i)
        n |= static_cast<uint32_t>(static_cast<uint8_t>(buf_[at + i])) << (8 * i);
      if (n == 0 || n > kMaxFrame) {
        status = absl::DataLossError(absl::StrFormat("a frame of %d bytes", n));
        break;
      }
      if (buf_.size() - at - 4 < n) break;
      const char kind = buf_[at + 4];
      const std::string_view payload(buf_.data() + at + 5, n - 1);
      if (kind == kMessage && !done_) {
        status = on_message(payload);
      } else if (kind == kDone && payload.empty() && !done_) {
        done_ = true;
      } else {
        status = absl::DataLossError("a frame of an unknown kind");
      }
      at += 4 + n;
    }
    buf_.erase(0, at);
    return status;
  }
  bool done() const { return done_; }

 private:
  std::string buf_;
  bool done_ = false;
};

}  // namespace

void WorkerChannel::Send(std::string_view message) { WriteFrame(fd_, kMessage, message); }

std::string WorkerEnd::Describe() const {
  switch (how) {
    case How::kFinished:
      return "finished";
    case How::kSignaled: {
      const char* abbrev = ::sigabbrev_np(signal);
      const char* text = ::strsignal(signal);
      return absl::StrFormat("was killed by signal %d (SIG%s: %s)", signal,
                             abbrev != nullptr ? abbrev : "?", text != nullptr ? text : "?");
    }
    case How::kExited:
      return absl::StrFormat("exited with status %d", exit_status);
    case How::kHung:
      return absl::StrFormat("made no progress for %g s (--timeout) and was killed", seconds);
    case How::kBadStream:
      return absl::StrFormat("sent a report the command line cannot read (%s) and was killed",
                             detail);
  }
  return "?";
}

absl::StatusOr<WorkerEnd> RunIsolated(
    const std::function<void(WorkerChannel&)>& work,
    const std::function<absl::Status(std::string_view)>& on_message, int hang_seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrFormat("cannot make a pipe: %s", std::strerror(errno)));
  }
  std::fflush(stdout);  // else the worker would print what the parent buffered, again
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrFormat("cannot fork a worker: %s", std::strerror(error)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    RunWorker(fds[1], parent, work);
  }
  ::close(fds[1]);
  ::setpgid(pid, pid);  // as the worker does: whichever runs first
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);

  WorkerEnd end;
  FrameReader frames;
  bool exited = false, killed = false, eof = false;
  double deadline = Now() + hang_seconds;
  // Reads what the pipe holds; false once the worker must be killed (a bad frame).
  const auto drain = [&]() {
    char chunk[1 << 16];
    while (!eof) {
      const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // EAGAIN: nothing more for now
      if (n == 0) {
        eof = true;
        break;
      }
      deadline = Now() + hang_seconds;  // the worker is alive and talking
      if (absl::Status s = frames.Feed(std::string_view(chunk, n), on_message); !s.ok()) {
        end.how = WorkerEnd::How::kBadStream;
        end.detail = std::string(s.message());
        return false;
      }
    }
    return true;
  };
  // Readable when the worker exits (Linux 5.3 and later); else the loop looks every 5 ms.
  const int exit_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  while (true) {
    // Exited, not yet reaped: its process group stays, so killing it cannot hit another.
    siginfo_t info{};
    if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      exited = true;
      if (!drain()) killed = true;
      break;
    }
    if (!drain()) {
      killed = true;
      break;
    }
    const double left = deadline - Now();
    if (left <= 0) {
      end.how = WorkerEnd::How::kHung;
      end.seconds = hang_seconds;
      killed = true;
      break;
    }
    // The pipe and the worker's exit (a worker may close its end of the pipe, or a child it
    // forked may hold it open after the worker died).
    pollfd p[2] = {{exit_fd, POLLIN, 0}, {eof ? -1 : fds[0], POLLIN, 0}};
    const double wait_ms = exit_fd >= 0 ? left * 1000 : std::min(left * 1000, 5.0);
    ::poll(p, 2, static_cast<int>(std::min(wait_ms, 3.6e6)) + 1);
  }
  if (exit_fd >= 0) ::close(exit_fd);
  ::kill(-pid, SIGKILL);  // the worker if it runs on, and whatever it forked
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  if (killed) return end;  // kHung or kBadStream
  (void)exited;
  if (WIFSIGNALED(status)) {
    end.how = WorkerEnd::How::kSignaled;
    end.signal = WTERMSIG(status);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && frames.done()) {
    end.how = WorkerEnd::How::kFinished;
  } else {
    end.how = WorkerEnd::How::kExited;
    end.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return end;
}

}  // namespace dmalab

int dmalab::WorkerJobs(int jobs) {
#if defined(__SANITIZE_ADDRESS__)
  (void)jobs;
  return 1;
#else
  return jobs;
#endif
}

// LeakSanitizer's hook: nonzero turns its check off (in worker processes only; see in_worker).
extern "C" int __lsan_is_turned_off() { return dmalab::in_worker ? 1 : 0; }
