#include "common/plugin/socket_bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/core/enum_table.h"
#include "common/core/status_macros.h"

namespace dmalab {

// What a frame is. The numbers are part of the protocol.
enum class SocketBootstrap::Kind : uint16_t {
  kHello = 1,      // a rank to rank 0: count = its world, arg = its rank
  kWelcome = 2,    // rank 0 to a rank: every rank connected
  kAllGather = 3,  // a rank's contribution (count bytes)
  kBarrier = 4,
  kBroadcast = 5,  // arg = the root; the root's data (count bytes) or nothing
  kResult = 6,     // rank 0 to a rank: a call's result
  kError = 7,      // arg = an absl::StatusCode; the payload is the message
};

namespace {

using Kind = SocketBootstrap::Kind;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x42414d44;  // "DMAB" in memory order
constexpr uint16_t kProtocolVersion = 1;
constexpr uint64_t kMaxErrorText = 64 << 10;
// How long a failing rank tries to hand its error to the other side before closing.
constexpr auto kErrorSendBound = std::chrono::milliseconds(200);

// Every frame starts with this header (native byte order: both ends are on one host), then
// `length` bytes of payload.
struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kProtocolVersion;
  uint16_t kind = 0;
  uint64_t call = 0;   // the call's number (from 1); 0 while connecting
  uint64_t count = 0;  // hello: the sender's world; a call: its per-rank count
  int32_t arg = 0;     // hello: the sender's rank; broadcast: the root; error: a status code
  int32_t reserved = 0;
  uint64_t length = 0;  // payload bytes after the header
};
static_assert(sizeof(Header) == 40, "the header is part of the protocol");

Header MakeHeader(Kind kind, uint64_t call, uint64_t count, int32_t arg, uint64_t length) {
  Header h;
  h.kind = static_cast<uint16_t>(kind);
  h.call = call;
  h.count = count;
  h.arg = arg;
  h.length = length;
  return h;
}

// A point on the monotonic clock by which a wait ends.
class Deadline {
 public:
  static Deadline After(absl::Duration d) {
    // Clamped so that an "infinite" timeout does not overflow the clock.
    d = std::clamp(d, absl::ZeroDuration(), absl::Hours(24 * 365));
    return Deadline(Clock::now() +
                    std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(d)));
  }
  static Deadline After(Clock::duration d) { return Deadline(Clock::now() + d); }
  // What is left, in whole milliseconds rounded up, for poll().
  int PollMs() const {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
  }
  bool Passed() const { return Clock::now() >= at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

std::string Seconds(absl::Duration d) { return absl::StrFormat("%g s", absl::ToDoubleSeconds(d)); }

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrFormat("%s %s", ranks.size() == 1 ? "rank" : "ranks", absl::StrJoin(ranks, ", "));
}

// The longer wait of a rank other than 0 for rank 0's answer (see SocketBootstrapOptions).
absl::Duration WithGrace(absl::Duration d) { return d + std::min(d / 2, absl::Seconds(5)); }

// The names of the calls' frames; any other frame is named by its number.
constexpr auto kCallKinds = MakeEnumTable<Kind>({{Kind::kAllGather, "allgather"},
                                                 {Kind::kBarrier, "barrier"},
                                                 {Kind::kBroadcast, "broadcast"}});

std::string KindName(Kind kind) {
  const std::string_view name = kCallKinds.Name(kind, "");
  if (!name.empty()) return std::string(name);
  return absl::StrFormat("a frame of kind %d", static_cast<int>(kind));
}

// "allgather of 8 bytes", "barrier", "broadcast of 8 bytes from rank 1": a call as one rank made
// it, for the message of a mismatch.
std::string DescribeCall(Kind kind, uint64_t count, int root) {
  switch (kind) {
    case Kind::kAllGather:
      return absl::StrFormat("allgather of %d bytes", count);
    case Kind::kBroadcast:
      return absl::StrFormat("broadcast of %d bytes from rank %d", count, root);
    default:
      return KindName(kind);
  }
}

// The outcome of a send or of a wait on one socket.
enum class Io { kOk, kClosed, kTimeout, kError };

bool ClosedErrno(int e) { return e == EPIPE || e == ECONNRESET || e == ENOTCONN; }

// Writes all of `data` by `deadline` (partial writes and EINTR handled, never SIGPIPE).
Io SendAll(int fd, const void* data, size_t size, Deadline deadline, int* err) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      const int r = ::poll(&pfd, 1, deadline.PollMs());
      if (r < 0 && errno != EINTR) {
        *err = errno;
        return Io::kError;
      }
      if (r == 0 && deadline.Passed()) return Io::kTimeout;
      continue;
    }
    *err = n < 0 ? errno : EPIPE;
    return ClosedErrno(*err) ? Io::kClosed : Io::kError;
  }
  return Io::kOk;
}

Io SendFrame(int fd, const Header& h, absl::Span<const uint8_t> payload, Deadline deadline,
             int* err) {
  Io io = SendAll(fd, &h, sizeof(h), deadline, err);
  if (io == Io::kOk && !payload.empty())
    io = SendAll(fd, payload.data(), payload.size(), deadline, err);
  return io;
}

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::UnavailableError(absl::StrFormat("%s: %s", what, std::strerror(err)));
}

// The socket address of `address` ('@name': the abstract namespace).
absl::Status MakeAddress(const std::string& address, sockaddr_un* sa, socklen_t* len) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  const bool abstract = !address.empty() && address[0] == '@';
  const size_t limit = sizeof(sa->sun_path) - 1;
  if (address.empty() || (abstract && address.size() == 1)) {
    return absl::InvalidArgumentError(
        "bootstrap address is empty: give a socket path or an abstract name starting with '@'");
  }
  if (address.size() > limit) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bootstrap address \"%s\" is %d bytes; a Unix socket address holds at most %d", address,
        address.size(), limit));
  }
  if (abstract) {
    std::memcpy(sa->sun_path + 1, address.data() + 1, address.size() - 1);
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  } else {
    std::memcpy(sa->sun_path, address.data(), address.size());
    *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
  }
  return absl::OkStatus();
}

}  // namespace

// One connection and the frame being read from it, piece by piece as bytes arrive.
struct SocketBootstrap::Conn {
  int fd = -1;
  int rank = -1;  // -1 until its hello named it
  uint8_t head[sizeof(Header)] = {};
  size_t head_got = 0;
  Header h;
  uint8_t* dest = nullptr;  // where the payload goes (set by the header's check)
  uint64_t got = 0;
  std::string text;  // an error frame's message
  bool done = false;

  explicit Conn(int f) : fd(f) {}
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
  Kind kind() const { return static_cast<Kind>(h.kind); }
  void Reset() {
    head_got = 0;
    got = 0;
    dest = nullptr;
    text.clear();
    done = false;
  }
  std::string Who() const {
    return rank >= 0 ? absl::StrFormat("rank %d", rank) : "a process connecting to rank 0";
  }
  absl::Status ErrorInFrame() const {
    return absl::Status(static_cast<absl::StatusCode>(h.arg), text);
  }
};

namespace {

using Conn = SocketBootstrap::Conn;
// Checks a frame's header (its kind, call and length) and sets where its payload goes.
using HeaderCheck = std::function<absl::Status(Conn&)>;

// Reads what `c` has without blocking. kOk: its frame is complete; kTimeout: more to come.
absl::StatusOr<Io> Pump(Conn& c, const HeaderCheck& check) {
  while (!c.done) {
    const bool in_head = c.head_got < sizeof(Header);
    uint8_t* to = in_head ? c.head + c.head_got : c.dest + c.got;
    const size_t want = in_head
                            ? sizeof(Header) - c.head_got
                            : static_cast<size_t>(std::min<uint64_t>(c.h.length - c.got, 1 << 30));
    const ssize_t n = ::recv(c.fd, to, want, MSG_DONTWAIT);
    if (n == 0) return Io::kClosed;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kTimeout;
      if (ClosedErrno(errno)) return Io::kClosed;
      return ErrnoError(absl::StrFormat("reading from %s", c.Who()), errno);
    }
    if (!in_head) {
      c.got += static_cast<uint64_t>(n);
      c.done = c.got == c.h.length;
      continue;
    }
    c.head_got += static_cast<size_t>(n);
    if (c.head_got < sizeof(Header)) continue;
    std::memcpy(&c.h, c.head, sizeof(Header));
    if (c.h.magic != kMagic) {
      return absl::DataLossError(absl::StrFormat(
          "%s sent a frame with magic 0x%08x, not a dmalab bootstrap frame", c.Who(), c.h.magic));
    }
    if (c.h.version != kProtocolVersion) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s speaks bootstrap protocol %d; this process speaks %d", c.Who(),
                          c.h.version, kProtocolVersion));
    }
    if (c.h.length > kMaxBootstrapMessage) {
      return absl::DataLossError(
          absl::StrFormat("%s sent a frame of %d bytes; a bootstrap message is at most %d bytes",
                          c.Who(), c.h.length, kMaxBootstrapMessage));
    }
    if (c.kind() == Kind::kError) {
      c.text.resize(std::min(c.h.length, kMaxErrorText));
      if (c.h.length > kMaxErrorText) {
        return absl::DataLossError(
            absl::StrFormat("%s sent an error message of %d bytes", c.Who(), c.h.length));
      }
      c.dest = reinterpret_cast<uint8_t*>(c.text.data());
    } else {
      DMALAB_RETURN_IF_ERROR(check(c));
    }
    c.done = c.h.length == 0;
  }
  return Io::kOk;
}

// Waits until each of `conns` holds a complete frame, or one closed (`*closed` names it), or
// the deadline passed (`*late` lists the ranks without a frame). A complete error frame ends
// the wait at once with the error it carries.
absl::StatusOr<Io> WaitFrames(const std::vector<Conn*>& conns, Deadline deadline,
                              const HeaderCheck& check, Conn** closed, std::vector<int>* late) {
  for (Conn* c : conns) c->Reset();
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Conn*> open;
    for (Conn* c : conns) {
      if (c->done) continue;
      fds.push_back({c->fd, POLLIN, 0});
      open.push_back(c);
    }
    if (open.empty()) return Io::kOk;
    const int r = ::poll(fds.data(), fds.size(), deadline.PollMs());
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("poll", errno);
    }
    if (r == 0) {
      if (!deadline.Passed()) continue;
      for (Conn* c : open) late->push_back(c->rank);
      std::sort(late->begin(), late->end());
      return Io::kTimeout;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      DMALAB_ASSIGN_OR_RETURN(const Io io, Pump(*open[i], check));
      if (io == Io::kClosed) {
        *closed = open[i];
        return Io::kClosed;
      }
      if (io == Io::kOk && open[i]->kind() == Kind::kError) return open[i]->ErrorInFrame();
    }
  }
}

}  // namespace

SocketBootstrap::SocketBootstrap(const SocketBootstrapOptions& options) : options_(options) {}

SocketBootstrap::~SocketBootstrap() { CloseAll(); }

void SocketBootstrap::CloseAll() {
  peers_.clear();
  root_.reset();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  if (unlink_path_) ::unlink(options_.address.c_str());
  unlink_path_ = false;
}

absl::StatusOr<std::unique_ptr<SocketBootstrap>> SocketBootstrap::Connect(
    const SocketBootstrapOptions& options) {
  if (options.world < 1 || options.world > 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap world %d: it must be 1 to 4096", options.world));
  }
  if (options.rank < 0 || options.rank >= options.world) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap rank %d: world %d has ranks 0 to %d", options.rank,
                        options.world, options.world - 1));
  }
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.op_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("bootstrap timeouts must be positive");
  }
  std::unique_ptr<SocketBootstrap> b(new SocketBootstrap(options));
  if (options.world == 1) return b;  // nobody to talk to
  sockaddr_un sa;
  socklen_t len = 0;
  DMALAB_RETURN_IF_ERROR(MakeAddress(options.address, &sa, &len));
  DMALAB_RETURN_IF_ERROR(options.rank == 0 ? b->ListenAndAccept() : b->ConnectToRoot());
  return b;
}

absl::Status SocketBootstrap::ListenAndAccept() {
  const std::string& address = options_.address;
  const int w = options_.world;
  const Deadline deadline = Deadline::After(options_.connect_timeout);
  sockaddr_un sa;
  socklen_t len = 0;
  DMALAB_RETURN_IF_ERROR(MakeAddress(address, &sa, &len));
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Fail(ErrnoError("bootstrap: socket", errno));
  int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len);
  int err = rc != 0 ? errno : 0;
  if (err == EADDRINUSE && address[0] != '@') {
    // A socket file left by an earlier run: unlink it when nobody listens there any more.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool stale = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&sa), len) != 0 &&
                       errno == ECONNREFUSED;
    if (probe >= 0) ::close(probe);
    if (stale) {
      ::unlink(address.c_str());
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), len);
      err = rc != 0 ? errno : 0;
    }
  }
  if (err != 0) {
    return Fail(ErrnoError(
        absl::StrFormat("bootstrap: rank 0 cannot listen at \"%s\" (another run there?)", address),
        err));
  }
  unlink_path_ = address[0] != '@';
  if (::listen(listen_fd_, std::min(w, SOMAXCONN)) != 0) {
    return Fail(ErrnoError(absl::StrFormat("bootstrap: listen at \"%s\"", address), errno));
  }

  peers_.resize(w);
  int connected = 0;
  std::vector<std::unique_ptr<Conn>> pending;  // accepted, hello not yet read
  // Rank 0 refuses the whole group when one hello is wrong: each connection learns why.
  auto refuse = [&](absl::Status status) {
    const Header h = MakeHeader(Kind::kError, 0, 0, static_cast<int32_t>(status.code()),
                                status.message().size());
    for (auto& c : pending) {
      int err = 0;
      SendFrame(
          c->fd, h,
          {reinterpret_cast<const uint8_t*>(status.message().data()), status.message().size()},
          Deadline::After(kErrorSendBound), &err);
    }
    pending.clear();
    return Fail(std::move(status));
  };
  const HeaderCheck hello = [&](Conn& c) -> absl::Status {
    const Header& h = c.h;
    if (c.kind() != Kind::kHello) {
      return absl::DataLossError(absl::StrFormat(
          "a process connecting to rank 0 at \"%s\" sent a frame of kind %d before its hello",
          address, h.kind));
    }
    if (h.count != static_cast<uint64_t>(w)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("rank %d says world %d; rank 0 has world %d", h.arg, h.count, w));
    }
    if (h.arg < 0 || h.arg >= w) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a process says it is rank %d; world %d has ranks 0 to %d", h.arg, w, w - 1));
    }
    if (h.arg == 0 || peers_[h.arg] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("two processes say they are rank %d", h.arg));
    }
    if (h.length != 0) {
      return absl::DataLossError(absl::StrFormat("rank %d's hello has a payload", h.arg));
    }
    return absl::OkStatus();
  };

  while (connected < w - 1) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (auto& c : pending) fds.push_back({c->fd, POLLIN, 0});
    const int r = ::poll(fds.data(), fds.size(), deadline.PollMs());
    if (r < 0 && errno != EINTR) return refuse(ErrnoError("bootstrap: poll", errno));
    if (r == 0 && deadline.Passed()) {
      std::vector<int> missing;
      for (int rank = 1; rank < w; ++rank) {
        if (peers_[rank] == nullptr) missing.push_back(rank);
      }
      return refuse(absl::DeadlineExceededError(
          absl::StrFormat("bootstrap at \"%s\": %s did not connect within %s", address,
                          RankList(missing), Seconds(options_.connect_timeout))));
    }
    if (r <= 0) continue;
    // Hellos first (indices shift once `pending` changes, so walk a copy of the pointers).
    std::vector<Conn*> ready;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) ready.push_back(pending[i - 1].get());
    }
    for (Conn* c : ready) {
      absl::StatusOr<Io> io = Pump(*c, hello);
      if (!io.ok()) return refuse(io.status());
      if (*io == Io::kTimeout) continue;
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const std::unique_ptr<Conn>& p) { return p.get() == c; });
      std::unique_ptr<Conn> conn = std::move(*it);
      pending.erase(it);
      if (*io == Io::kClosed) continue;  // went away before its hello: as if never come
      conn->rank = conn->h.arg;
      peers_[conn->rank] = std::move(conn);
      ++connected;
    }
    if (fds[0].revents != 0) {
      while (true) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) break;
          return refuse(ErrnoError("bootstrap: accept", errno));
        }
        pending.push_back(std::make_unique<Conn>(fd));
      }
    }
  }
  // Everyone is here: nobody else may connect, and a socket file has done its job.
  ::close(listen_fd_);
  listen_fd_ = -1;
  if (unlink_path_) ::unlink(address.c_str());
  unlink_path_ = false;
  pending.clear();  // late strangers
  for (int rank = 1; rank < w; ++rank) {
    int err = 0;
    const Io io =
        SendFrame(peers_[rank]->fd, MakeHeader(Kind::kWelcome, 0, 0, 0, 0), {}, deadline, &err);
    if (io == Io::kClosed) {
      return Fail(absl::UnavailableError(absl::StrFormat(
          "rank %d closed its connection (its process ended?) while connecting", rank)));
    }
    if (io != Io::kOk) {
      return Fail(absl::UnavailableError(
          absl::StrFormat("bootstrap: rank 0 could not welcome rank %d (%s)", rank,
                          io == Io::kTimeout ? "timeout" : std::strerror(err))));
    }
  }
  return absl::OkStatus();
}

absl::Status SocketBootstrap::ConnectToRoot() {
  const std::string& address = options_.address;
  const int rank = options_.rank;
  const Deadline connect_deadline = Deadline::After(options_.connect_timeout);
  const Deadline answer_deadline = Deadline::After(WithGrace(options_.connect_timeout));
  sockaddr_un sa;
  socklen_t len = 0;
  DMALAB_RETURN_IF_ERROR(MakeAddress(address, &sa, &len));
  // Rank 0 may not listen yet: try again until the deadline.
  int last_error = 0;
  while (true) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return Fail(ErrnoError("bootstrap: socket", errno));
    int rc;
    do {
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), len);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      root_ = std::make_unique<Conn>(fd);
      root_->rank = 0;
      break;
    }
    last_error = errno;
    ::close(fd);
    if (last_error != ECONNREFUSED && last_error != ENOENT && last_error != EAGAIN) {
      return Fail(
          ErrnoError(absl::StrFormat("bootstrap: rank %d cannot connect to \"%s\"", rank, address),
                     last_error));
    }
    if (connect_deadline.Passed()) {
      return Fail(absl::DeadlineExceededError(absl::StrFormat(
          "bootstrap: rank %d could not connect to rank 0 at \"%s\" within %s (%s)", rank, address,
          Seconds(options_.connect_timeout), std::strerror(last_error))));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int err = 0;
  const Io io = SendFrame(root_->fd, MakeHeader(Kind::kHello, 0, options_.world, rank, 0), {},
                          answer_deadline, &err);
  if (io != Io::kOk) {
    return Fail(ErrorFromRoot(absl::UnavailableError(
        absl::StrFormat("bootstrap: rank 0 at \"%s\" closed rank %d's connection before its hello",
                        address, rank))));
  }
  const HeaderCheck welcome = [&](Conn& c) -> absl::Status {
    if (c.kind() != Kind::kWelcome || c.h.length != 0) {
      return absl::DataLossError(absl::StrFormat(
          "rank 0 answered rank %d's hello with a frame of kind %d", rank, c.h.kind));
    }
    return absl::OkStatus();
  };
  Conn* closed = nullptr;
  std::vector<int> late;
  absl::StatusOr<Io> waited = WaitFrames({root_.get()}, answer_deadline, welcome, &closed, &late);
  if (!waited.ok()) return Fail(waited.status(), /*tell=*/false);
  if (*waited == Io::kClosed) {
    return Fail(absl::UnavailableError(absl::StrFormat(
        "rank 0 closed its connection (its process ended?) while rank %d was connecting", rank)));
  }
  if (*waited == Io::kTimeout) {
    return Fail(absl::DeadlineExceededError(absl::StrFormat(
        "bootstrap: rank %d connected to rank 0 at \"%s\" but had no answer within %s (rank 0 "
        "waits for the other ranks)",
        rank, address, Seconds(WithGrace(options_.connect_timeout)))));
  }
  return absl::OkStatus();
}

absl::Status SocketBootstrap::Fail(absl::Status status, bool tell) {
  if (broken_.ok()) broken_ = std::move(status);
  if (tell) {
    const absl::string_view text = broken_.message().substr(0, kMaxErrorText);
    const Header h =
        MakeHeader(Kind::kError, calls_, 0, static_cast<int32_t>(broken_.code()), text.size());
    const absl::Span<const uint8_t> payload(reinterpret_cast<const uint8_t*>(text.data()),
                                            text.size());
    std::vector<Conn*> to;
    for (auto& c : peers_) {
      if (c != nullptr) to.push_back(c.get());
    }
    if (root_ != nullptr) to.push_back(root_.get());
    for (Conn* c : to) {
      int err = 0;
      SendFrame(c->fd, h, payload, Deadline::After(kErrorSendBound), &err);
    }
  }
  CloseAll();
  return broken_;
}

absl::Status SocketBootstrap::ErrorFromRoot(absl::Status fallback) {
  if (root_ == nullptr) return fallback;
  const HeaderCheck none = [](Conn& c) -> absl::Status {
    return absl::DataLossError(absl::StrFormat("an unexpected frame of kind %d", c.h.kind));
  };
  Conn* closed = nullptr;
  std::vector<int> late;
  absl::StatusOr<Io> io =
      WaitFrames({root_.get()}, Deadline::After(kErrorSendBound), none, &closed, &late);
  // An error frame comes back as the error it carries; anything else leaves the fallback.
  if (!io.ok() && root_->done && root_->kind() == Kind::kError) return io.status();
  return fallback;
}

absl::Status SocketBootstrap::AllGather(int rank, absl::Span<const uint8_t> send,
                                        absl::Span<uint8_t> recv) {
  if (!broken_.ok()) return broken_;
  const uint64_t n = calls_ + 1;
  const uint64_t w = static_cast<uint64_t>(world());
  if (rank != options_.rank) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "allgather #%d: process of rank %d called it as rank %d", n, options_.rank, rank)));
  }
  if (send.size() > kMaxBootstrapMessage / w) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "allgather #%d on rank %d: %d ranks x %d bytes exceed the bootstrap's limit of %d bytes", n,
        rank, w, send.size(), kMaxBootstrapMessage)));
  }
  if (recv.size() != send.size() * w) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("allgather #%d on rank %d: recv is %d bytes; %d ranks x %d bytes need %d",
                        n, rank, recv.size(), w, send.size(), send.size() * w)));
  }
  return Call(Kind::kAllGather, 0, send.size(), send, recv);
}

absl::Status SocketBootstrap::Barrier(int rank) {
  if (!broken_.ok()) return broken_;
  if (rank != options_.rank) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "barrier #%d: process of rank %d called it as rank %d", calls_ + 1, options_.rank, rank)));
  }
  return Call(Kind::kBarrier, 0, 0, {}, {});
}

absl::Status SocketBootstrap::Broadcast(int root, absl::Span<uint8_t> data) {
  if (!broken_.ok()) return broken_;
  const uint64_t n = calls_ + 1;
  if (root < 0 || root >= world()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("broadcast #%d on rank %d: root %d; world %d has ranks 0 to %d", n,
                        options_.rank, root, world(), world() - 1)));
  }
  if (data.size() > kMaxBootstrapMessage) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "broadcast #%d on rank %d: %d bytes exceed the bootstrap's limit of %d bytes", n,
        options_.rank, data.size(), kMaxBootstrapMessage)));
  }
  return Call(Kind::kBroadcast, root, data.size(),
              options_.rank == root ? data : absl::Span<uint8_t>(), data);
}

absl::Status SocketBootstrap::Call(Kind kind, int root, uint64_t count,
                                   absl::Span<const uint8_t> send, absl::Span<uint8_t> out) {
  const uint64_t n = ++calls_;
  if (world() == 1) {
    if (kind == Kind::kAllGather && count > 0) std::memcpy(out.data(), send.data(), count);
    return absl::OkStatus();
  }
  const std::string what = absl::StrFormat("%s #%d", KindName(kind), n);
  return options_.rank == 0 ? RootCall(kind, root, count, send, out, what)
                            : PeerCall(kind, root, count, send, out, what);
}

absl::Status SocketBootstrap::RootCall(Kind kind, int root, uint64_t count,
                                       absl::Span<const uint8_t> send, absl::Span<uint8_t> out,
                                       const std::string& what) {
  const int w = world();
  const Deadline deadline = Deadline::After(options_.op_timeout);
  const HeaderCheck check = [&](Conn& c) -> absl::Status {
    const Header& h = c.h;
    if (c.kind() != kind || (kind == Kind::kBroadcast && h.arg != root)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "call #%d: rank 0 called %s, rank %d %s; every rank makes the same calls in the same "
          "order",
          calls_, DescribeCall(kind, count, root), c.rank, DescribeCall(c.kind(), h.count, h.arg)));
    }
    if (h.call != calls_) {
      return absl::DataLossError(
          absl::StrFormat("%s: rank %d sent call #%d", what, c.rank, h.call));
    }
    if (h.count != count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: rank %d passes %d bytes, rank 0 passes %d; every rank passes the same count", what,
          c.rank, h.count, count));
    }
    const bool carries = kind == Kind::kAllGather || (kind == Kind::kBroadcast && c.rank == root);
    if (h.length != (carries ? count : 0)) {
      return absl::DataLossError(
          absl::StrFormat("%s: rank %d sent %d bytes for %d", what, c.rank, h.length, count));
    }
    c.dest = kind == Kind::kAllGather ? out.data() + c.rank * count : out.data();
    return absl::OkStatus();
  };
  std::vector<Conn*> conns;
  for (int r = 1; r < w; ++r) conns.push_back(peers_[r].get());
  Conn* closed = nullptr;
  std::vector<int> late;
  absl::StatusOr<Io> waited = WaitFrames(conns, deadline, check, &closed, &late);
  if (!waited.ok()) return Fail(waited.status());
  if (*waited == Io::kClosed) {
    return Fail(absl::UnavailableError(absl::StrFormat(
        "rank %d closed its connection (its process ended?) during %s", closed->rank, what)));
  }
  if (*waited == Io::kTimeout) {
    return Fail(absl::DeadlineExceededError(absl::StrFormat(
        "%s: %s did not arrive within %s", what, RankList(late), Seconds(options_.op_timeout))));
  }
  if (kind == Kind::kAllGather && count > 0) std::memcpy(out.data(), send.data(), count);
  for (int r = 1; r < w; ++r) {
    const bool carries = kind == Kind::kAllGather || (kind == Kind::kBroadcast && r != root);
    const absl::Span<const uint8_t> result = carries ? out : absl::Span<const uint8_t>();
    int err = 0;
    const Io io =
        SendFrame(peers_[r]->fd, MakeHeader(Kind::kResult, calls_, count, 0, result.size()), result,
                  deadline, &err);
    if (io == Io::kClosed) {
      return Fail(absl::UnavailableError(absl::StrFormat(
          "rank %d closed its connection (its process ended?) during %s", r, what)));
    }
    if (io == Io::kTimeout) {
      return Fail(absl::DeadlineExceededError(absl::StrFormat(
          "%s: rank %d did not take its result within %s", what, r, Seconds(options_.op_timeout))));
    }
    if (io != Io::kOk) {
      return Fail(ErrnoError(absl::StrFormat("%s: sending rank %d its result", what, r), err));
    }
  }
  return absl::OkStatus();
}

absl::Status SocketBootstrap::PeerCall(Kind kind, int root, uint64_t count,
                                       absl::Span<const uint8_t> send, absl::Span<uint8_t> out,
                                       const std::string& what) {
  const int rank = options_.rank;
  const absl::Duration wait = WithGrace(options_.op_timeout);
  const Deadline deadline = Deadline::After(wait);
  const absl::Status root_closed = absl::UnavailableError(
      absl::StrFormat("rank 0 closed its connection (its process ended?) during %s", what));
  int err = 0;
  const Io sent = SendFrame(root_->fd, MakeHeader(kind, calls_, count, root, send.size()), send,
                            deadline, &err);
  if (sent == Io::kClosed) return Fail(ErrorFromRoot(root_closed), /*tell=*/false);
  if (sent == Io::kTimeout) {
    return Fail(absl::DeadlineExceededError(absl::StrFormat(
        "%s: rank 0 did not take rank %d's part within %s", what, rank, Seconds(wait))));
  }
  if (sent != Io::kOk) {
    return Fail(ErrnoError(absl::StrFormat("%s: rank %d sending to rank 0", what, rank), err));
  }
  const uint64_t expect = kind == Kind::kAllGather                     ? out.size()
                          : (kind == Kind::kBroadcast && rank != root) ? count
                                                                       : 0;
  const HeaderCheck check = [&](Conn& c) -> absl::Status {
    if (c.kind() != Kind::kResult || c.h.call != calls_ || c.h.length != expect) {
      return absl::DataLossError(
          absl::StrFormat("%s: rank 0 answered with a frame of kind %d for call #%d with %d bytes",
                          what, c.h.kind, c.h.call, c.h.length));
    }
    c.dest = out.data();
    return absl::OkStatus();
  };
  Conn* closed = nullptr;
  std::vector<int> late;
  absl::StatusOr<Io> waited = WaitFrames({root_.get()}, deadline, check, &closed, &late);
  if (!waited.ok()) {
    // Rank 0's own error is everyone's already; a broken frame is news to rank 0.
    const bool from_root = root_->done && root_->kind() == Kind::kError;
    return Fail(waited.status(), /*tell=*/!from_root);
  }
  if (*waited == Io::kClosed) return Fail(root_closed, /*tell=*/false);
  if (*waited == Io::kTimeout) {
    return Fail(absl::DeadlineExceededError(absl::StrFormat(
        "%s: no answer from rank 0 within %s (rank 0, or a rank it waits for, did not arrive)",
        what, Seconds(wait))));
  }
  return absl::OkStatus();
}

}  // namespace dmalab
