// SpmdProcess: what a process that runs ONE rank of a W-rank program (one process per GPU,
// runner/rank_process.h) gives an ABI v2 plugin so that it runs there as one instance, its own
// rank's, exactly as in a simulated rank: its dmalab_rank_api over the process's local one-rank
// device (IPC handles are then real cross-process handles) and its dmalab_bootstrap over the
// processes' bootstrap, which the other processes' instances call too.
//
// The command itself drives a W-rank device (common/spmd/lockstep_device.h) whose tensors the
// collective receives; SpmdProcess translates between the two (own rank's memory to the local
// device, and a local allocation the instance hands over back to a W-rank one every process
// knows).
//
// RankDevice presents the local device as rank `rank` of a W-rank device, so that the very same
// RankApi (common/plugin/rank_api.h) serves the instance: its ranges carry its own rank, and
// calls of other ranks are refused (they are their own processes' to make).
#ifndef DMALAB_COMMON_PLUGIN_SPMD_PROCESS_H_
#define DMALAB_COMMON_PLUGIN_SPMD_PROCESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/plugin/bootstrap.h"
#include "dmalab/device.h"

namespace dmalab {

class SpmdProcess {
 public:
  virtual ~SpmdProcess() = default;
  // This process's rank and the world.
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // The process's one-rank device (its rank 0 runs this process's rank).
  virtual Device* local() = 0;
  // The processes' bootstrap (the plugin instances' and the collective's own exchanges).
  virtual Bootstrap* bootstrap() = 0;
  // Memory of this process's rank, from the W-rank device to the local device.
  virtual absl::StatusOr<MemRef> ToLocal(const MemRef& m) = 0;
  // Every process: rank `rank`'s local allocation `local` (read on the owner only) becomes a
  // W-rank allocation of the command's device, the same range in every process.
  virtual absl::StatusOr<MemRef> Adopt(int rank, const MemRef& local) = 0;
};

class RankDevice : public Device {
 public:
  // `local` (one rank, which outlives this) runs rank `rank` of `world`.
  RankDevice(Device* local, int rank, int world) : local_(local), rank_(rank), world_(world) {}

  // A range of the local device as this rank's, and back.
  MemRef Up(const MemRef& m) const { return Relabel(m, rank_); }
  absl::StatusOr<MemRef> Down(const MemRef& m, std::string_view what) const;

  int world_size() const override { return world_; }
  std::string name() const override { return local_->name(); }
  uint64_t seed() const override { return local_->seed(); }

  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override;
  absl::Status Free(const MemRef& allocation) override;
  StreamId ComputeStream(int rank) override;
  absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind, std::string_view name) override;
  absl::StatusOr<EventId> CreateEvent(int rank) override;
  absl::Status RecordEvent(EventId event, StreamId stream) override {
    return local_->RecordEvent(event, stream);
  }
  absl::Status WaitEvent(StreamId stream, EventId event) override {
    return local_->WaitEvent(stream, event);
  }
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
  absl::Status Synchronize() override { return local_->Synchronize(); }
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;
  bool HoldsValues() const override { return local_->HoldsValues(); }
  void SetContext(std::string_view context) override { local_->SetContext(context); }
  bool IsCapturing(StreamId stream) const override { return local_->IsCapturing(stream); }
  bool SupportsIpc() const override { return local_->SupportsIpc(); }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;
  absl::StatusOr<IpcHandle> ExportEvent(EventId event) override {
    return local_->ExportEvent(event);
  }
  absl::StatusOr<EventId> OpenEvent(int rank, const IpcHandle& handle) override;
  int64_t LiveAllocations(int rank) const override {
    return rank == rank_ ? local_->LiveAllocations(0) : -1;
  }
  absl::StatusOr<bool> RankIdle(int rank) override;
  absl::Status WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) override;
  void* NativeStream(StreamId stream) override { return local_->NativeStream(stream); }
  void* NativePointer(const MemRef& mem) override;
  int NativeDeviceOrdinal(int rank) override {
    return rank == rank_ ? local_->NativeDeviceOrdinal(0) : -1;
  }

 private:
  static MemRef Relabel(const MemRef& m, int rank) {
    return MemRef{rank, m.addr, m.bytes, m.alloc_id, m.via_mapping};
  }
  // OK when `rank` is this process's rank.
  absl::Status Mine(int rank, std::string_view what) const;

  Device* local_;
  const int rank_;
  const int world_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_SPMD_PROCESS_H_
