#include "common/plugin/rank_threads.h"

#include <sched.h>

#include <utility>

namespace dmalab {

RankThreads::RankThreads(int world, uint64_t seed)
    : world_(world), rng_(seed), wake_(world + 1), ranks_(world) {
  for (int r = 0; r < world; ++r) threads_.emplace_back([this, r] { Main(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  for (std::condition_variable& cv : wake_) cv.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::condition_variable& RankThreads::WakeOf(int rank) { return wake_[rank + 1]; }

void RankThreads::AwaitTurn(int rank, std::unique_lock<std::mutex>& lock) {
  WakeOf(rank).wait(lock, [&] { return turn_ == rank; });
}

void RankThreads::Main(int rank) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    WakeOf(rank).wait(lock, [&] { return quit_ || (generation_ != seen && turn_ == rank); });
    if (quit_) return;
    seen = generation_;
    if (share_cpu_) sched_setaffinity(0, sizeof(run_cpu_), &run_cpu_);
    lock.unlock();
    absl::Status s = (*body_)(rank);
    lock.lock();
    ranks_[rank].status = std::move(s);
    ranks_[rank].state = State::kDone;
    PassTurn();
  }
}

void RankThreads::PassTurn() {
  std::vector<int> candidates, blocked;
  for (int r = 0; r < world_; ++r) {
    Rank& k = ranks_[r];
    if (k.state == State::kRunnable) candidates.push_back(r);
    if (k.state == State::kBlocked) {
      blocked.push_back(r);
      if ((*k.ready)()) candidates.push_back(r);
    }
  }
  // Nobody can make progress: a blocked rank wakes with the deadlock (the others in turn, as
  // long as what it does next leaves them blocked).
  const bool deadlock = candidates.empty() && !blocked.empty();
  if (deadlock) candidates = blocked;
  if (candidates.empty()) {
    turn_ = kCaller;
  } else {
    turn_ = candidates[rng_() % candidates.size()];
    Rank& next = ranks_[turn_];
    next.deadlocked = deadlock;
    next.state = State::kRunnable;
    next.ready = nullptr;
  }
  WakeOf(turn_).notify_one();  // only the thread whose turn it is: the others sleep on
}

// One thread runs at a time, and every pass of the turn wakes another: on one CPU that is a
// context switch; across CPUs it is a wake-up of an idle CPU (on a virtual machine, an exit to
// the hypervisor), several times dearer. So for a run the ranks' threads and the caller share the
// CPU the caller is on; between runs the caller is free again, so the system can move it (and
// with it the next run) to balance the load. Only a hint: where the affinity cannot be set, the
// threads run where the system puts them. (Each rank's thread moves itself when its first turn
// of the run comes.)
void RankThreads::ShareCallersCpu() {
  const int cpu = sched_getcpu();
  CPU_ZERO(&run_cpu_);
  if (cpu >= 0) CPU_SET(cpu, &run_cpu_);
  share_cpu_ = cpu >= 0 && sched_setaffinity(0, sizeof(run_cpu_), &run_cpu_) == 0;
}

std::vector<absl::Status> RankThreads::Run(const std::function<absl::Status(int)>& body) {
  cpu_set_t callers;
  const bool restorable = sched_getaffinity(0, sizeof(callers), &callers) == 0;
  std::unique_lock<std::mutex> lock(mu_);
  if (restorable) ShareCallersCpu();
  body_ = &body;
  for (Rank& k : ranks_) k = Rank{State::kRunnable, nullptr, false, absl::OkStatus()};
  ++generation_;
  PassTurn();
  AwaitTurn(kCaller, lock);
  body_ = nullptr;
  std::vector<absl::Status> out;
  for (Rank& k : ranks_) {
    out.push_back(std::move(k.status));
    k.state = State::kIdle;
  }
  if (restorable) sched_setaffinity(0, sizeof(callers), &callers);
  return out;
}

void RankThreads::Yield(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  PassTurn();
  AwaitTurn(rank, lock);
}

bool RankThreads::Block(int rank, const std::function<bool()>& ready) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ready()) return true;
  Rank& k = ranks_[rank];
  k.state = State::kBlocked;
  k.ready = &ready;
  k.deadlocked = false;
  PassTurn();
  AwaitTurn(rank, lock);
  return !std::exchange(k.deadlocked, false);
}

}  // namespace dmalab
