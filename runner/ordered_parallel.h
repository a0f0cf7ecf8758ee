// Runs independent jobs (one simulator run per seed) on several threads while their results are
// consumed one by one in job order on the calling thread, so that what a command prints and
// decides is the same for any number of threads: `dmalab zoo`, `replay --seeds` and
// `replay --check-determinism` with --jobs=N.
//
// Jobs belong to groups (a zoo row). Consuming a result may end its group (a fault found at this
// seed: the row's later seeds are not run) or everything (an error). A job is started only when
// its group is still open; one already started for a group that ends is finished and dropped.
// At most `jobs` run at once. A job starts only when fewer than kLookahead * `jobs` jobs lie
// between the consumer and it, or, where no earlier job of its own group waits to be consumed or
// its group cannot end (so that no result can end its group before it: it is never wasted), fewer
// than
// kFarLookahead * `jobs`. So at most that many results wait to be consumed (memory stays
// bounded), and a group that ends at its first job (a fault found at seed 1) wastes at most
// kLookahead * `jobs` runs. The lookahead is more than `jobs` so that a thread that finished a
// short job finds another while a long one still runs ahead of it in job order: with a window of
// exactly `jobs`, one long job left every other thread idle until it was consumed; and it is far
// longer for jobs that cannot be wasted, so that one long run of a zoo row (a large size-regime
// scenario, 2 s) does not idle the other threads once they have run a few short ones (seeds of
// other rows, 50 ms each) behind it.
#ifndef DMALAB_RUNNER_ORDERED_PARALLEL_H_
#define DMALAB_RUNNER_ORDERED_PARALLEL_H_

#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace dmalab {

enum class Consumed { kContinue, kEndGroup, kStop };

// How many jobs per thread may run ahead of the consumer (RunOrdered): any job, and a job no
// earlier job of whose group waits to be consumed.
inline constexpr int kLookahead = 4;
inline constexpr int kFarLookahead = 256;

// The cores this process may run on (its CPU affinity), at least 1: --jobs' default.
inline int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// What a caller may tell RunOrdered of its jobs, so that they keep every thread busy.
struct JobHints {
  // What job i holds while it runs (its memory, roughly). When given, the jobs running at once
  // weigh at most the heaviest job and `jobs` - 1 jobs of the median weight together, or a job
  // runs alone; and jobs start out of order: a job that does not fit yet waits, and a later one
  // that fits starts before it (within the lookahead), so that --jobs=N needs about the memory
  // of its largest run beside small ones, not N times the largest. Without it, jobs start in
  // order.
  std::function<uint64_t(int64_t job)> weight;
  // Whether consuming a job of group g may end g (default: every group may end). A job of a
  // group that cannot end is never wasted, so it may start anywhere within the far lookahead.
  std::function<bool(int64_t group)> group_may_end;
};

// For i in [0, n): run(i) on one of `jobs` threads (the calling thread alone when jobs is 1), then
// consume(i, result) on the calling thread in increasing i. group(i) names i's group (its jobs
// need not be next to each other). Returns after the last consume, or once consume returns kStop.
template <typename Result>
void RunOrdered(int64_t n, int jobs, const std::function<int64_t(int64_t)>& group,
                const std::function<Result(int64_t)>& run,
                const std::function<Consumed(int64_t, Result&)>& consume,
                const JobHints& hints = {}) {
  const std::function<uint64_t(int64_t)>& weight = hints.weight;
  if (jobs <= 1) {
    std::set<int64_t> ended;  // groups ended by consume: their remaining jobs are skipped
    for (int64_t i = 0; i < n; ++i) {
      if (ended.contains(group(i))) continue;
      Result r = run(i);
      const Consumed c = consume(i, r);
      if (c == Consumed::kStop) return;
      if (c == Consumed::kEndGroup) ended.insert(group(i));
    }
    return;
  }
  long double budget = 0;
  if (weight && n > 0) {
    // Counted by distinct weight, not kept per job: a campaign of a million seeds has few.
    std::map<uint64_t, int64_t> count;
    for (int64_t i = 0; i < n; ++i) ++count[weight(i)];
    uint64_t median = 0;
    int64_t below = 0;
    for (const auto& [w, c] : count) {
      median = w;
      below += c;
      if (below > n / 2) break;
    }
    budget = static_cast<long double>(count.rbegin()->first) +
             static_cast<long double>(jobs - 1) * static_cast<long double>(median);
  }
  std::mutex mu;
  std::condition_variable changed;
  std::map<int64_t, Result> done;  // finished, not consumed yet
  std::set<int64_t> ended;         // groups ended by consume
  std::map<int64_t, int> waiting;  // group -> its jobs started and not consumed yet
  std::set<int64_t> started;       // jobs after `next` started out of order
  int64_t next = 0;                // the first job not started (nor skipped)
  int64_t consumed = 0;            // jobs before this one are consumed or skipped
  int running = 0;
  long double running_weight = 0;
  bool stop = false;
  const int64_t window = int64_t{kLookahead} * jobs;
  const int64_t far_window = int64_t{kFarLookahead} * jobs;
  // The job to start now, or -1. Candidates in job order from `next`: one within `window` of the
  // consumer, or within `far_window` where no earlier job of its group is still to be consumed;
  // and that fits the budget. Without weights only `next` is a candidate.
  const auto pick = [&]() -> int64_t {
    while (next < n && (ended.contains(group(next)) || started.contains(next))) {
      started.erase(next);
      ++next;
    }
    std::set<int64_t> passed;  // groups of the jobs not started before the candidate
    const int64_t last = std::min(n, consumed + far_window);
    for (int64_t j = next; j < last; ++j) {
      const int64_t g = group(j);
      if (started.contains(j) || ended.contains(g)) continue;
      const auto w = waiting.find(g);
      const bool near = j < consumed + window;
      const bool unwasted = (hints.group_may_end && !hints.group_may_end(g)) ||
                            (!passed.contains(g) && (w == waiting.end() || w->second == 0));
      const bool fits =
          !weight || running == 0 || running_weight + static_cast<long double>(weight(j)) <= budget;
      if ((near || unwasted) && fits) return j;
      if (!weight) return -1;
      passed.insert(g);
    }
    return -1;
  };
  const auto worker = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      int64_t i = -1;
      changed.wait(lock, [&] { return stop || (i = pick()) >= 0 || next >= n; });
      if (stop || i < 0) return;
      if (i == next) {
        ++next;
      } else {
        started.insert(i);
      }
      ++waiting[group(i)];
      const long double held = weight ? static_cast<long double>(weight(i)) : 0;
      ++running;
      running_weight += held;
      lock.unlock();
      Result r = run(i);
      lock.lock();
      --running;
      running_weight -= held;
      // A result the consumer has passed (its group ended meanwhile) is dropped, not kept.
      if (i >= consumed) done.emplace(i, std::move(r));
      changed.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < jobs; ++t) threads.emplace_back(worker);
  for (int64_t i = 0; i < n; ++i) {
    std::unique_lock<std::mutex> lock(mu);
    if (ended.contains(group(i))) {
      done.erase(i);  // finished before its group ended
      consumed = i + 1;
      changed.notify_all();
      continue;
    }
    changed.wait(lock, [&] { return done.contains(i); });
    Result r = std::move(done.at(i));
    done.erase(i);
    if (--waiting[group(i)] == 0) waiting.erase(group(i));
    lock.unlock();
    const Consumed c = consume(i, r);
    lock.lock();
    consumed = i + 1;
    if (c == Consumed::kEndGroup) {
      ended.insert(group(i));
      waiting.erase(group(i));  // its jobs start no more
    }
    if (c == Consumed::kStop) stop = true;
    changed.notify_all();
    if (stop) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    changed.notify_all();
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace dmalab

#endif  // DMALAB_RUNNER_ORDERED_PARALLEL_H_
