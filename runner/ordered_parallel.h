// Runs independent jobs (one simulator run per seed) on several threads while their results are
// consumed one by one in job order on the calling thread, so that what a command prints and
// decides is the same for any number of threads: `dmalab zoo`, `replay --seeds` and
// `replay --check-determinism` with --jobs=N.
//
// Jobs belong to groups (a zoo row). Consuming a result may end its group (a fault found at this
// seed: the row's later seeds are not run) or everything (an error). A job is started only when
// its group is still open; one already started for a group that ends is finished and dropped.
// At most `jobs` run at once. A job starts only when fewer than kLookahead * `jobs` jobs lie
// between the consumer and it: so at most that many results wait to be consumed (memory stays
// bounded), and a group that ends at its first job (a fault found at seed 1) wastes at most that
// many runs. The lookahead is more than `jobs` so that a thread that finished a short job finds
// another while a long one still runs ahead of it in job order: with a window of exactly `jobs`,
// one long job left every other thread idle until it was consumed (jobs of uneven length, as the
// zoo's rows are, ran little faster on two threads than on one).
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

// How many jobs per thread may run ahead of the consumer (RunOrdered).
inline constexpr int kLookahead = 4;

// The cores this process may run on (its CPU affinity), at least 1: --jobs' default.
inline int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// For i in [0, n): run(i) on one of `jobs` threads (the calling thread alone when jobs is 1), then
// consume(i, result) on the calling thread in increasing i. group(i) names i's group (its jobs
// need not be next to each other). Returns after the last consume, or once consume returns kStop.
template <typename Result>
void RunOrdered(int64_t n, int jobs, const std::function<int64_t(int64_t)>& group,
                const std::function<Result(int64_t)>& run,
                const std::function<Consumed(int64_t, Result&)>& consume) {
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
  std::mutex mu;
  std::condition_variable changed;
  std::map<int64_t, Result> done;  // finished, not consumed yet
  std::set<int64_t> ended;         // groups ended by consume
  int64_t next = 0;                // the next job to start
  int64_t consumed = 0;            // jobs before this one are consumed or skipped
  bool stop = false;
  const int64_t window = int64_t{kLookahead} * jobs;
  const auto worker = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      changed.wait(lock, [&] {
        while (next < n && ended.contains(group(next))) ++next;
        return stop || next >= n || next < consumed + window;
      });
      if (stop || next >= n) return;
      const int64_t i = next++;
      lock.unlock();
      Result r = run(i);
      lock.lock();
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
    lock.unlock();
    const Consumed c = consume(i, r);
    lock.lock();
    consumed = i + 1;
    if (c == Consumed::kEndGroup) ended.insert(group(i));
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
