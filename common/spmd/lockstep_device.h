// LockstepDevice: one rank's part of a W-rank program that W instances (rank threads or rank
// processes) run in lockstep.
//
// Every instance makes the same Device calls in the same order (the ring core and the replay
// engine are deterministic), and each carries out only the calls of its own rank, on its local
// device; the calls of other ranks it follows without running them. What crosses ranks goes
// through the exchange, an out-of-band channel every instance calls at the same points:
//   - memory: each rank allocates its own; a peer's allocation is known to the other instances
//     by the place it has in the common call order. The first time an operation on rank s's
//     stream touches rank t's allocation, t exports an IPC handle and s opens it (every instance
//     sees that point, so t and s meet there); later operations go through that mapping. A free
//     closes the peers' mappings before the owner frees.
//   - host reads: the owner reads, and broadcasts the bytes to every instance.
//   - Synchronize: the local device's, then a barrier of every instance.
// Host writes to another rank's memory are that rank's to make (every instance computes the same
// bytes). Events stay within their rank (an event recorded or waited on another rank's stream is
// refused). So the same collective code runs as one instance per rank, and its peers are reached
// through real IPC mappings: in the simulator they are checked as any plugin's, on GPUs they
// are CUDA IPC.
#ifndef DMALAB_COMMON_SPMD_LOCKSTEP_DEVICE_H_
#define DMALAB_COMMON_SPMD_LOCKSTEP_DEVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"

namespace dmalab {

// The instances' channel. Every instance calls each method at the same point of the program.
class LockstepExchange {
 public:
  virtual ~LockstepExchange() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Every instance passes `data` of the same size; afterwards each holds root's bytes.
  virtual absl::Status Broadcast(int root, absl::Span<uint8_t> data) = 0;
  virtual absl::Status Barrier() = 0;
};

// A LockstepExchange over an all-gather and a barrier (a plugin's dmalab_bootstrap, a
// Bootstrap): a broadcast is an all-gather of which the root's part is kept.
class AllGatherExchange : public LockstepExchange {
 public:
  using AllGather =
      std::function<absl::Status(absl::Span<const uint8_t> send, absl::Span<uint8_t> recv)>;
  AllGatherExchange(int rank, int world, AllGather all_gather,
                    std::function<absl::Status()> barrier)
      : rank_(rank),
        world_(world),
        all_gather_(std::move(all_gather)),
        barrier_(std::move(barrier)) {}

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  absl::Status Broadcast(int root, absl::Span<uint8_t> data) override;
  absl::Status Barrier() override { return barrier_(); }

 private:
  int rank_, world_;
  AllGather all_gather_;
  std::function<absl::Status()> barrier_;
  std::vector<uint8_t> recv_;
};

class LockstepDevice : public Device {
 public:
  // `local` runs this instance's rank as its rank `local_rank` and must offer IPC; `exchange`
  // connects the instances. Both outlive the device. `name` is what name() returns.
  LockstepDevice(Device* local, int local_rank, LockstepExchange* exchange, std::string name);

  int rank() const { return me_; }
  int world_size() const override { return world_; }
  std::string name() const override { return name_; }
  uint64_t seed() const override { return local_->seed(); }

  // Every instance: a collective call (the owner's success is everyone's).
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
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;

  bool HoldsValues() const override { return local_->HoldsValues(); }
  void SetContext(std::string_view context) override { local_->SetContext(context); }
  bool IsCapturing(StreamId stream) const override;
  int64_t LiveAllocations(int rank) const override;

  // Every instance: `allocation` (of any rank) leaves this device's books without being freed:
  // it was handed over (a default-form all-reduce's output, now the caller's). Nothing happens
  // when a peer mapped it (its mappings stay until the device's end).
  void HandOver(const MemRef& allocation);

  // `m`, memory of this instance's own rank, as a range of the local device (the same address
  // on the local device's rank). InvalidArgument for another rank's memory: that is its
  // owner's to touch.
  absl::StatusOr<MemRef> ToLocal(const MemRef& m) const;
  // Every instance: rank `rank`'s allocation `local`, made on the owner's local device outside
  // this device (by a plugin's instance, as its default-form result), joins this device's books
  // as if allocated here: the owner passes its local allocation (others pass anything; it is
  // not read), its address and size reach every instance, and the result is the W-rank range
  // every instance then names it by. A later Free frees it on the owner's local device.
  absl::StatusOr<MemRef> Adopt(int rank, const MemRef& local);

  // Mappings this instance holds open to peers' allocations (for tests and leak reports).
  int open_mappings() const;

  // The local device's stream behind `stream` when it is this instance's rank's; nullopt for
  // another rank's stream (or no stream).
  std::optional<StreamId> LocalStream(StreamId stream) const;

 private:
  struct Allocation {
    int rank = 0;
    uint64_t base = 0;  // the owner's address in the owner's instance, a stand-in elsewhere
    uint64_t bytes = 0;
    MemRef local;                   // the owner's instance: the local device's allocation
    std::set<int> openers;          // ranks that mapped it (the same set in every instance)
    std::optional<MemRef> mapping;  // this instance's mapping, when it is an opener
  };
  struct StreamInfo {
    int rank = 0;
    StreamId local;  // when rank is this instance's
  };
  struct EventInfo {
    int rank = 0;
    EventId local;
  };

  absl::StatusOr<const StreamInfo*> GetStream(StreamId stream, std::string_view what) const;
  // The allocation of `m` (by rank and address), or an error naming the call.
  absl::StatusOr<Allocation*> Find(const MemRef& m, std::string_view what);
  // Every instance: makes sure rank `rank` has mapped each of `mems` it does not own.
  absl::Status Reach(int rank, std::initializer_list<const MemRef*> mems, std::string_view what);
  absl::Status Reach(int rank, const std::vector<const MemRef*>& mems, std::string_view what);
  absl::Status Map(Allocation& a, int opener, std::string_view what);
  // `m` on this instance's local device (own memory, or through this instance's mapping).
  absl::StatusOr<MemRef> Local(const MemRef& m, std::string_view what);

  Device* local_;
  const int local_rank_;
  LockstepExchange* exchange_;
  const std::string name_;
  const int me_;
  const int world_;
  std::map<std::pair<int, uint64_t>, Allocation> allocations_;  // by (rank, base)
  std::vector<uint64_t> next_stand_in_;                         // by rank
  std::vector<StreamInfo> streams_;
  std::vector<std::optional<StreamId>> compute_;  // by rank
  std::vector<EventInfo> events_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_SPMD_LOCKSTEP_DEVICE_H_
