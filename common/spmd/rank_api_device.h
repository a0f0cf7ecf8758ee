// RankApiDevice: the Device interface over one rank's ABI v2 device table (dmalab_rank_api of
// include/dmalab/plugin.h). It is how C++ code written against Device (the ring core) runs
// inside a v2 plugin instance: the instance's rank is the only rank it serves; a call for any
// other rank is refused. Streams and events are the table's ids; errors carry the table's
// last_error. What the table does not offer (graphs, shadow values) is Unimplemented.
#ifndef DMALAB_COMMON_SPMD_RANK_API_DEVICE_H_
#define DMALAB_COMMON_SPMD_RANK_API_DEVICE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"
#include "dmalab/plugin.h"

namespace dmalab {

class RankApiDevice : public Device {
 public:
  // `api` outlives the device.
  explicit RankApiDevice(const dmalab_rank_api* api);
  // Destroys the streams and events it created (the table's books would count them as leaks).
  ~RankApiDevice() override;
  RankApiDevice(const RankApiDevice&) = delete;
  RankApiDevice& operator=(const RankApiDevice&) = delete;

  int rank() const { return api_->rank; }
  int world_size() const override { return api_->world_size; }
  std::string name() const override;

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

  // This rank's work only (the table's synchronize).
  absl::Status Synchronize() override;
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;

  bool IsCapturing(StreamId stream) const override;

  bool SupportsIpc() const override { return true; }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;

  void* NativeStream(StreamId stream) override;
  void* NativePointer(const MemRef& mem) override;
  int NativeDeviceOrdinal(int rank) override;

 private:
  // OK, or the table's last_error for `what` when `rc` is not DMALAB_OK.
  absl::Status Check(int32_t rc, std::string_view what) const;
  absl::Status CheckRank(int rank, std::string_view what) const;

  const dmalab_rank_api* api_;
  std::vector<StreamId> streams_;  // created here (not the compute stream)
  std::vector<EventId> events_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_SPMD_RANK_API_DEVICE_H_
