// SocketBootstrap: the ranks' out-of-band channel when every rank is its own process on one host
// (one process per GPU), over Unix-domain stream sockets. The local counterpart of NCCL's
// bootstrap ring or torch.distributed's TCPStore: small, blocking, host-side collectives
// (AllGather, Barrier, Broadcast) that every rank calls in the same order, used to exchange
// handles and to keep the ranks in step.
//
// Topology: a star through rank 0. Rank 0 listens on `address` and accepts the other W-1 ranks;
// each sends a hello (magic, protocol version, rank, world), and rank 0 refuses the whole group
// when one is wrong (a world that differs from its own, a rank out of range or taken twice, a
// bad magic or version). In a call every rank sends its frame to rank 0, which checks that all
// made the same call with the same count, assembles the result and sends it back.
//
// Failures are bounded and named: every wait is a poll() with a deadline (connect_timeout while
// connecting, op_timeout per call). A rank whose process ended shows up as a closed connection
// ("rank 2 closed its connection (its process ended?) during allgather #5"); a rank that does
// not make a call within op_timeout is named by rank 0 ("barrier #3: ranks 1, 3 did not arrive
// within 300 s"). Rank 0 sends its error to every other rank, and a rank that fails a call on its
// own (a wrong argument) sends its error to rank 0, which passes it on: every rank then reports
// the same first error. After an error the bootstrap is broken and every later call fails at
// once with that error. "#n" counts the calls of the bootstrap (of every kind) from 1.
//
// One rank per process; calls come from one thread at a time.
#ifndef DMALAB_COMMON_PLUGIN_SOCKET_BOOTSTRAP_H_
#define DMALAB_COMMON_PLUGIN_SOCKET_BOOTSTRAP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/plugin/bootstrap.h"

namespace dmalab {

// The largest message the bootstrap carries (a rank's contribution, or a call's whole result).
inline constexpr uint64_t kMaxBootstrapMessage = uint64_t{1} << 30;

struct SocketBootstrapOptions {
  int rank = 0;
  int world = 1;
  // A Unix socket path, or an abstract-namespace name starting with '@' (nothing on disk, gone
  // when the socket closes). Rank 0 listens here; a path is unlinked once every rank connected.
  std::string address;
  // How long ranks wait for each other while connecting (rank 0 for all hellos, the others for
  // rank 0 to listen and to accept the group).
  absl::Duration connect_timeout = absl::Seconds(60);
  // How long rank 0 waits in one call for the other ranks to arrive. The other ranks wait a
  // little longer for rank 0's answer, so that rank 0's account (naming who is missing) reaches
  // them first.
  absl::Duration op_timeout = absl::Seconds(300);
};

class SocketBootstrap : public Bootstrap {
 public:
  // Connects this process's rank to the others; returns once all W ranks are connected (it is
  // itself a barrier), or with the first error.
  static absl::StatusOr<std::unique_ptr<SocketBootstrap>> Connect(
      const SocketBootstrapOptions& options);
  ~SocketBootstrap() override;

  SocketBootstrap(const SocketBootstrap&) = delete;
  SocketBootstrap& operator=(const SocketBootstrap&) = delete;

  int world() const override { return options_.world; }
  int rank() const { return options_.rank; }
  // `rank` must be this process's rank.
  absl::Status AllGather(int rank, absl::Span<const uint8_t> send,
                         absl::Span<uint8_t> recv) override;
  absl::Status Barrier(int rank) override;
  // Root's `data` to every rank: every rank passes the same size; on the root `data` is read,
  // elsewhere it is overwritten.
  absl::Status Broadcast(int root, absl::Span<uint8_t> data);

  // The first error, once a call failed (OK before).
  const absl::Status& broken() const { return broken_; }

  // Details of the implementation (defined in the .cc): a connection and a frame's kind.
  struct Conn;
  enum class Kind : uint16_t;

 private:
  explicit SocketBootstrap(const SocketBootstrapOptions& options);
  absl::Status ListenAndAccept();
  absl::Status ConnectToRoot();
  // One call: `send` is this rank's payload (its contribution, or the root's data), `out` where
  // the result lands; `count` the per-rank count every rank must agree on.
  absl::Status Call(Kind kind, int root, uint64_t count, absl::Span<const uint8_t> send,
                    absl::Span<uint8_t> out);
  absl::Status RootCall(Kind kind, int root, uint64_t count, absl::Span<const uint8_t> send,
                        absl::Span<uint8_t> out, const std::string& what);
  absl::Status PeerCall(Kind kind, int root, uint64_t count, absl::Span<const uint8_t> send,
                        absl::Span<uint8_t> out, const std::string& what);
  // Records the first error, tells the other side(s) about it unless `tell` is false (best
  // effort, briefly bounded) and closes the sockets. Returns the first error.
  absl::Status Fail(absl::Status status, bool tell = true);
  // On a rank other than 0, after its connection to rank 0 broke: rank 0's error if it sent one
  // before closing, else `fallback`.
  absl::Status ErrorFromRoot(absl::Status fallback);
  void CloseAll();

  SocketBootstrapOptions options_;
  std::vector<std::unique_ptr<Conn>> peers_;  // on rank 0: index r is rank r (0 unused)
  std::unique_ptr<Conn> root_;                // on other ranks: the connection to rank 0
  int listen_fd_ = -1;
  bool unlink_path_ = false;  // rank 0 bound a filesystem path, not yet unlinked
  uint64_t calls_ = 0;        // calls made so far
  absl::Status broken_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_SOCKET_BOOTSTRAP_H_
