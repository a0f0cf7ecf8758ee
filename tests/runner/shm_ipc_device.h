// ShmIpcDevice: a fake one-rank Device whose memory is shared memory, for tests of what crosses
// processes (the lockstep device's handle exchange, common/spmd/lockstep_device.h) on machines
// without a GPU.
//
// Every allocation is a memfd of its own, mapped into this process. Its IPC handle names the
// exporting process and the memfd's number; a peer process opens the memfd through
// /proc/<pid>/fd/<fd> and maps it, so both see the same bytes, as two GPUs do through CUDA IPC.
// Work is queued per stream, in order, and run by the device's own engine thread (and by the host
// whenever it enqueues, waits or touches memory): an operation runs once the ones before it on its
// stream ran, a flag wait once the flag (in shared memory, so a peer process may set it) reached
// its value, an event wait once the event's record ran. So a stream waiting for a peer does not
// hold up this process's other streams, as on a GPU. Synchronize (and host Read and Write) run the
// queues until they are empty, failing after a few seconds with the flag that never came instead of
// hanging. Every range given to an operation must lie inside a live allocation or an open mapping.
// Reduce takes plain operands (no block codecs).
#ifndef DMALAB_TESTS_RUNNER_SHM_IPC_DEVICE_H_
#define DMALAB_TESTS_RUNNER_SHM_IPC_DEVICE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"

namespace dmalab {

class ShmIpcDevice : public Device {
 public:
  // Starts the device's engine: a thread that runs queued work by itself, as a GPU does, so a
  // stream waiting for a peer's flag completes while this process's host waits elsewhere (in
  // the bootstrap).
  ShmIpcDevice();
  // Stops the engine; unmaps every allocation and mapping still live and closes their memfds.
  ~ShmIpcDevice() override;

  ShmIpcDevice(const ShmIpcDevice&) = delete;
  ShmIpcDevice& operator=(const ShmIpcDevice&) = delete;

  int world_size() const override { return 1; }
  std::string name() const override { return "shm"; }

  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override;
  absl::Status Free(const MemRef& allocation) override;

  StreamId ComputeStream(int rank) override;
  absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind, std::string_view name) override;
  absl::StatusOr<EventId> CreateEvent(int rank) override;
  absl::Status RecordEvent(EventId event, StreamId stream) override;
  absl::Status WaitEvent(StreamId stream, EventId event) override;

  absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                    std::string_view label) override;
  absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                      absl::Span<const Operand> terms, int64_t elems,
                      std::string_view label) override;
  absl::Status SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                          std::string_view label) override;
  absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                        std::string_view label) override;

  absl::Status WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                          std::string_view label) override;
  absl::Status WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                         std::string_view label) override;

  absl::Status Synchronize() override;
  absl::StatusOr<bool> RankIdle(int rank) override;
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;

  bool SupportsIpc() const override { return true; }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;

  int64_t LiveAllocations(int rank) const override;
  // Mappings of peers' memory open now.
  int open_mappings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(mappings_.size());
  }

 private:
  // An allocation (memfd kept open, so that peers can open it) or a mapping (memfd closed once
  // mapped: the mapping keeps the memory alive).
  struct Region {
    void* base = nullptr;
    uint64_t bytes = 0;
    int fd = -1;          // allocations only
    uint64_t number = 0;  // the allocation's id, or the mapping's number
  };

  // The live allocation or open mapping that holds all of `m`, or an error naming `what`.
  absl::Status CheckRange(const MemRef& m, std::string_view what) const;
  // OK when `stream` is a stream of this device.
  absl::Status CheckStream(StreamId stream, std::string_view what) const;

  // A queued operation: runs when it can (true), or says it must wait (false).
  using Op = std::function<bool()>;
  // Queues `op` on `stream` (`label` names it when it never runs) and runs what can run.
  absl::Status Enqueue(StreamId stream, std::string_view label, Op op);
  // Runs queued operations until none can run; true when every queue is empty.
  bool Progress();
  // Runs the queues until they are empty (mu_ held through `lock`, let go while it waits);
  // DeadlineExceeded naming what waits after a while.
  absl::Status Drain(std::unique_lock<std::mutex>& lock, std::string_view what);
  // The engine thread's loop.
  void Engine();

  // Guards everything below and the memory's queued work; the engine and the host take turns.
  mutable std::mutex mu_;
  std::condition_variable work_;
  bool stop_ = false;

  std::map<int32_t, std::deque<std::pair<std::string, Op>>> queues_;  // by stream
  std::vector<uint64_t> event_recorded_;  // by event: records run so far
  std::vector<uint64_t> event_pending_;   // by event: records enqueued so far

  std::map<uint64_t, Region> allocations_;  // by address
  std::map<uint64_t, Region> mappings_;     // by address
  uint64_t next_alloc_id_ = 1;
  uint64_t next_mapping_ = 1;
  int32_t next_stream_ = 1;  // 0 is the compute stream
  int32_t next_event_ = 0;
  std::thread engine_;  // last: starts once everything above is constructed
};

}  // namespace dmalab

#endif  // DMALAB_TESTS_RUNNER_SHM_IPC_DEVICE_H_
