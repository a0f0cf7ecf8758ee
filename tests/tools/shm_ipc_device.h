// ShmIpcDevice: a fake one-rank Device whose memory is shared memory, for tests of what crosses
// processes (the lockstep device's handle exchange, common/spmd/lockstep_device.h) on machines
// without a GPU.
//
// Every allocation is a memfd of its own, mapped into this process. Its IPC handle names the
// exporting process and the memfd's number; a peer process opens the memfd through
// /proc/<pid>/fd/<fd> and maps it, so both see the same bytes, as two GPUs do through CUDA IPC.
// All work is synchronous: a copy is a memcpy done at once, streams and events only get numbers.
// Every range given to Copy, Read or Write must lie inside a live allocation or an open mapping.
// Reduce and the flag kernels are not offered.
#ifndef DMALAB_TESTS_TOOLS_SHM_IPC_DEVICE_H_
#define DMALAB_TESTS_TOOLS_SHM_IPC_DEVICE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/core/device.h"

namespace dmalab {

class ShmIpcDevice : public Device {
 public:
  ShmIpcDevice() = default;
  // Unmaps every allocation and mapping still live and closes their memfds.
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

  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;

  bool SupportsIpc() const override { return true; }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;

  int64_t LiveAllocations(int rank) const override;
  // Mappings of peers' memory open now.
  int open_mappings() const { return static_cast<int>(mappings_.size()); }

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

  std::map<uint64_t, Region> allocations_;  // by address
  std::map<uint64_t, Region> mappings_;     // by address
  uint64_t next_alloc_id_ = 1;
  uint64_t next_mapping_ = 1;
  int32_t next_stream_ = 1;  // 0 is the compute stream
  int32_t next_event_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_TESTS_TOOLS_SHM_IPC_DEVICE_H_
