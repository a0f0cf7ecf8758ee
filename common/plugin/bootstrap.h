// Bootstrap: the ranks' out-of-band channel of an SPMD collective (dmalab_bootstrap's host side),
// as ncclCommInitRank's bootstrap or torch.distributed's all_gather_object: blocking, host-side,
// called by every rank in the same order. ThreadBootstrap serves W rank threads of one process
// (RankThreads); a call that some ranks never make ends, once nobody can progress, with an error
// naming them instead of a hang.
#ifndef DMALAB_COMMON_PLUGIN_BOOTSTRAP_H_
#define DMALAB_COMMON_PLUGIN_BOOTSTRAP_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plugin/rank_threads.h"

namespace dmalab {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int world() const = 0;
  // `rank` contributes `send`; recv (world() * send.size() bytes) then holds every rank's
  // contribution, rank r's at r * send.size(). Every rank passes the same count.
  virtual absl::Status AllGather(int rank, absl::Span<const uint8_t> send,
                                 absl::Span<uint8_t> recv) = 0;
  virtual absl::Status Barrier(int rank) = 0;
};

// Every rank's `mine`, by rank, in every rank; the ranks' byte strings may differ in length
// (their sizes travel first). Every rank of `bootstrap` makes this call at the same point.
absl::StatusOr<std::vector<std::string>> AllGatherBytes(Bootstrap& bootstrap, int rank,
                                                        std::string_view mine);

class ThreadBootstrap : public Bootstrap {
 public:
  explicit ThreadBootstrap(RankThreads* threads);

  int world() const override { return threads_->world(); }
  absl::Status AllGather(int rank, absl::Span<const uint8_t> send,
                         absl::Span<uint8_t> recv) override;
  absl::Status Barrier(int rank) override;

  // What `rank`'s host thread is doing, for the message of a deadlock (e.g. "all_reduce call 3").
  void SetActivity(int rank, std::string activity) { activity_[rank] = std::move(activity); }
  // Whether a call of the bootstrap ended in a deadlock (the ranks are then out of step).
  bool broken() const { return broken_; }

 private:
  struct Round {
    bool barrier = false;
    uint64_t bytes = 0;
    int first = -1;  // the first rank to arrive
    int arrived = 0;
    int left = 0;  // ranks that arrived and have not yet taken the result
    std::vector<bool> in;
    std::vector<uint8_t> data;  // world * bytes
    std::string mismatch;
  };
  absl::Status Call(int rank, bool barrier, absl::Span<const uint8_t> send,
                    absl::Span<uint8_t> recv);
  static std::string Describe(bool barrier, uint64_t bytes);

  RankThreads* threads_;
  std::vector<int64_t> next_;  // per rank: its next call's number
  std::map<int64_t, Round> rounds_;
  std::vector<std::string> activity_;
  bool broken_ = false;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_BOOTSTRAP_H_
