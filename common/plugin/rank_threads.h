// RankThreads: W host threads of control, one per rank, as W processes would be, run
// deterministically: only one runs at a time, and at every point where a rank yields or blocks
// the seed picks which runnable rank goes on. The same seed gives the same interleaving of the
// ranks' host calls and bootstrap arrivals; another seed permutes it. When every rank left is
// blocked, nobody can make progress: the blocked ranks are woken with a deadlock.
#ifndef DMALAB_COMMON_PLUGIN_RANK_THREADS_H_
#define DMALAB_COMMON_PLUGIN_RANK_THREADS_H_

#include <sched.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace dmalab {

class RankThreads {
 public:
  RankThreads(int world, uint64_t seed);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int world() const { return world_; }

  // Runs body(rank) for every rank, each on its own thread, and returns when all returned: the
  // statuses by rank. Not reentrant (call it from one thread that is not a rank's).
  std::vector<absl::Status> Run(const std::function<absl::Status(int rank)>& body);

  // From rank's thread, inside Run: lets another runnable rank go on (or this one; the seed's
  // choice).
  void Yield(int rank);
  // From rank's thread, inside Run: waits until `ready()` holds (it is evaluated, with every
  // other rank stopped, each time the running rank yields, blocks or returns). Returns false
  // when every rank still in Run is blocked with `ready()` false: a deadlock.
  bool Block(int rank, const std::function<bool()>& ready);

 private:
  enum class State { kIdle, kRunnable, kBlocked, kDone };
  struct Rank {
    State state = State::kIdle;
    const std::function<bool()>* ready = nullptr;
    bool deadlocked = false;
    absl::Status status;
  };
  static constexpr int kCaller = -1;

  void Main(int rank);
  // Chooses who runs next (mu_ held) and wakes it; kCaller when every rank is done.
  void PassTurn();
  // Waits (mu_ held through `lock`) until it is `rank`'s turn.
  void AwaitTurn(int rank, std::unique_lock<std::mutex>& lock);

  const int world_;
  std::mt19937_64 rng_;
  // The thread whose turn it is (a rank's, or the caller's) is woken alone: with one condition
  // variable for all, every pass woke every thread, and W - 1 of them went back to sleep.
  std::condition_variable& WakeOf(int rank);
  // Puts the caller on the CPU it is on, and has the ranks' threads follow it (mu_ held).
  void ShareCallersCpu();

  std::mutex mu_;
  std::vector<std::condition_variable> wake_;  // by rank + 1; the caller's first
  std::vector<Rank> ranks_;
  cpu_set_t run_cpu_;  // ShareCallersCpu's CPU, when share_cpu_
  bool share_cpu_ = false;
  int turn_ = kCaller;
  uint64_t generation_ = 0;  // one per Run
  bool quit_ = false;
  const std::function<absl::Status(int)>* body_ = nullptr;
  std::vector<std::thread> threads_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_RANK_THREADS_H_
