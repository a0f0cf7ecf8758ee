#include "common/plugin/rank_threads.h"

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

std::vector<absl::Status> RankThreads::Run(const std::function<absl::Status(int)>& body) {
  std::unique_lock<std::mutex> lock(mu_);
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
