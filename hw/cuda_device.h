// CudaDevice: the Device interface on real NVIDIA GPUs in one process (docs/design.md section 7).
//
// Rank r runs on GPU r * gpus / world: one rank per GPU (peer access enabled between all GPUs
// in use), or several virtual ranks on one GPU, each with its own allocator, streams and
// events. MemRef.addr is the device pointer. Copies are cudaMemcpyAsync (copy engines, no
// SMs); Reduce is a kernel equal to ReduceHost bit for bit; flag kernels store with
// system-scope release and wait with system-scope acquire, bounded by a timeout so that a lost
// signal fails Synchronize with the rank, stream, label and flag values instead of hanging.
// Not thread-safe: one host thread drives a CudaDevice.
#ifndef DMALAB_HW_CUDA_DEVICE_H_
#define DMALAB_HW_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"
#include "hw/caching_allocator.h"
#include "hw/cuda_graph.h"
#include "hw/wait_failure_log.h"

namespace dmalab {

struct CudaDeviceOptions {
  // How long a WaitFlag kernel spins before it gives up and reports.
  uint64_t flag_wait_timeout_ns = 10'000'000'000;
  // Set: every CUDA stream the device creates gets a priority drawn from the GPU's range by this
  // seed and the stream's place in creation order, a schedule perturbation
  // (measure/perturbing_device.h). Unset: default priorities.
  std::optional<uint64_t> stream_priority_seed;
  // The GPU of rank 0 is this one modulo the GPUs visible (a rank process of a multi-process run
  // passes its local rank); later ranks' GPUs follow it, wrapping around.
  int first_gpu = 0;
};

class CudaDevice : public Device {
 public:
  // Maps `world` ranks onto the first `gpus` CUDA devices (1 <= gpus <= world). Fails with
  // Unavailable ("no CUDA device ...") when there is no usable GPU or too few of them, and with
  // FailedPrecondition when a GPU is older than sm_90 or two GPUs cannot be peers.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int world, int gpus,
                                                            const CudaDeviceOptions& options = {});
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int world_size() const override { return static_cast<int>(ranks_.size()); }
  std::string name() const override { return "cuda"; }

  // Refused (FailedPrecondition) during Capture: a graph must use memory allocated before it.
  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override;
  absl::Status Free(const MemRef& allocation) override;

  StreamId ComputeStream(int rank) override { return ranks_[rank].compute_stream; }
  // A stream on the rank's GPU (cudaStreamNonBlocking). Refused during Capture. Each rank has
  // at most 2 CUDA streams of kind kCopy and 1 each of kFlag and kCompute (besides its compute
  // stream); further requests get a new StreamId that shares one of those CUDA streams
  // round-robin (the (n+cap)-th request shares with the n-th). Sharing only adds ordering, so
  // it is always correct; it keeps W <= 8 virtual ranks (32 streams) within the GPU's 32
  // hardware queues, where a spinning WaitFlag kernel can never sit in a queue ahead of the
  // signal it waits for.
  absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind, std::string_view name) override;
  // A cudaEventDisableTiming event on the rank's GPU.
  absl::StatusOr<EventId> CreateEvent(int rank) override;
  // The event and the stream must be on one GPU.
  absl::Status RecordEvent(EventId event, StreamId stream) override;
  absl::Status WaitEvent(StreamId stream, EventId event) override;

  absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                    std::string_view label) override;
  // At most 16 terms. Block-coded operands (bf16 only) run the block-codec kernel, where a term
  // that overlaps dst must be dst itself with dst's codec.
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
  // Enqueues a one-thread kernel that holds `stream` for `ns` nanoseconds: a schedule
  // perturbation that delays the stream's next work (measure/perturbing_device.h).
  absl::Status Spin(StreamId stream, uint64_t ns);
  void* NativeStream(StreamId stream) override;
  void* NativePointer(const MemRef& mem) override;
  int NativeDeviceOrdinal(int rank) override;
  absl::Status Synchronize() override;
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override;
  // One rank's host thread of an in-process SPMD collective: its streams alone are queried or
  // waited for, since the other ranks' work may wait for what this thread has yet to enqueue.
  absl::StatusOr<bool> RankIdle(int rank) override;
  absl::Status WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) override;
  absl::Status ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) override;

  bool IsCapturing(StreamId stream) const override;

  // IPC (hw/cuda_device_ipc.cc). A memory handle is the CUDA IPC handle of the allocator segment
  // (one cudaMalloc) that holds the allocation, with the allocation's offset and size in it.
  // OpenMemory in another process maps the segment once per process (cudaIpcOpenMemHandle
  // refuses a second mapping of one segment) and counts the mappings through it; CloseMemory
  // unmaps the segment with its last mapping. A handle exported by this process is opened
  // without CUDA (which maps handles only into other processes): the mapping is the
  // allocation's own address. An operation on a closed mapping is refused as a use after free.
  // The owner's Free does not wait for peers' mappings, as CUDA's. Event handles are not
  // offered: ranks in separate processes meet through flags.
  bool SupportsIpc() const override { return true; }
  absl::StatusOr<IpcHandle> ExportMemory(const MemRef& allocation) override;
  absl::StatusOr<MemRef> OpenMemory(int rank, const IpcHandle& handle) override;
  absl::Status CloseMemory(const MemRef& mapping) override;
  absl::StatusOr<IpcHandle> ExportEvent(EventId event) override;
  absl::StatusOr<EventId> OpenEvent(int rank, const IpcHandle& handle) override;
  int64_t LiveAllocations(int rank) const override;
  // Mappings opened and not yet closed (for tests and leak reports).
  int open_mappings() const;

  // Runs `body`, capturing the work it enqueues on every stream of every rank into one graph:
  // capture begins on rank 0's compute stream, every other stream joins it through an event
  // and is joined back before the capture ends. Fails with body's error, or when the capture
  // fails (e.g. body synchronized or allocated).
  absl::StatusOr<CudaGraph> Capture(const std::function<absl::Status()>& body);
  // Launches `graph` on rank 0's compute stream, after the work already enqueued on every
  // rank's compute stream and before the work enqueued on them later.
  absl::Status Replay(const CudaGraph& graph);

  // Device's graph interface over Capture and Replay; the device owns the graphs.
  bool SupportsGraphs() const override { return true; }
  absl::StatusOr<GraphId> CaptureGraph(const std::function<absl::Status()>& body) override;
  absl::Status LaunchGraph(GraphId graph) override;

  // The CUDA device ordinal rank `rank` runs on.
  int gpu_of_rank(int rank) const { return gpus_[ranks_[rank].gpu].ordinal; }
  int num_gpus() const { return static_cast<int>(gpus_.size()); }
  cudaStream_t cuda_stream(StreamId stream) const { return streams_[stream.value()].stream; }
  CachingAllocator::Stats allocator_stats(int rank) const {
    return ranks_[rank].allocator->stats();
  }
  // Applies to WaitFlag calls enqueued (or captured) afterwards.
  void set_flag_wait_timeout_ns(uint64_t ns) { options_.flag_wait_timeout_ns = ns; }
  uint64_t flag_wait_timeout_ns() const { return options_.flag_wait_timeout_ns; }

 private:
  struct Gpu {
    int ordinal = 0;
    int max_reduce_blocks = 0;
  };
  struct LiveAllocation {
    uint64_t bytes = 0;
    uint64_t alloc_id = 0;
  };
  struct Rank {
    int gpu = 0;  // index into gpus_
    std::unique_ptr<CachingAllocator> allocator;
    std::map<uint64_t, LiveAllocation> live;  // by address
    StreamId compute_stream;
    // Per StreamKind: CreateStream calls so far, and the streams that own a CUDA stream.
    int streams_requested[3] = {};
    std::vector<StreamId> owned_streams[3];
  };
  static constexpr int kCudaStreamsPerKind[3] = {1, 2, 1};  // kCompute, kCopy, kFlag
  struct Stream {
    int rank = 0;
    int gpu = 0;
    StreamKind kind = StreamKind::kCompute;
    std::string name;
    cudaStream_t stream = nullptr;
    bool owns_stream = true;
    cudaEvent_t join_event = nullptr;  // joins the stream back into a capture or replay
  };
  struct Event {
    int rank = 0;
    int gpu = 0;
    cudaEvent_t event = nullptr;
  };
  // A peer's segment mapped into this process (cudaIpcOpenMemHandle), shared by the mappings
  // opened through it.
  struct MappedSegment {
    uint64_t base = 0;
    int gpu = 0;
    int mappings = 0;
    bool foreign = true;  // opened through CUDA (another process exported it)
  };
  struct Mapping {
    int rank = 0;
    uint64_t addr = 0;
    uint64_t bytes = 0;
    std::array<uint8_t, 64> segment{};  // the key of its MappedSegment
    bool open = true;
  };

  explicit CudaDevice(const CudaDeviceOptions& options) : options_(options) {}
  // `visible`: the GPUs this process sees.
  absl::Status Init(int world, int gpus, int visible);
  absl::Status EnablePeerAccess();
  // A new StreamId backed by a fresh CUDA stream, or by `shared` when given.
  absl::StatusOr<StreamId> NewStream(int rank, StreamKind kind, std::string_view name,
                                     cudaStream_t shared = nullptr);
  // Makes the GPU (index into gpus_) current for this thread.
  absl::Status UseGpu(int gpu);
  absl::Status CheckRank(int rank, std::string_view what) const;
  // Names an operand in error messages, formatted only on error: "reduce 'rs.k0' terms[1]".
  struct OperandName {
    std::string_view op;
    std::string_view label;
    std::string_view role;
    int index = -1;
    std::string ToString() const;
  };
  absl::StatusOr<const Stream*> GetStream(StreamId id, std::string_view what) const;
  // OK when `mem` lies inside one live allocation of its rank (and is that allocation when
  // mem.alloc_id is set): catches out-of-bounds views and use after free before they reach
  // the GPU, which would not notice.
  absl::Status CheckLive(const MemRef& mem, const OperandName& name) const;
  absl::Status CheckFlagWord(const MemRef& mem, const OperandName& name) const;
  // CheckLive for a range reached through an IPC mapping (mem.via_mapping set).
  absl::Status CheckMapping(const MemRef& mem, const OperandName& name) const;
  // The number of an open mapping of the same rank and peer segment as `like` that is exactly
  // [addr, +bytes) (`exact`) or covers it, 0 when there is none. One process maps a segment once,
  // so several opens of its handles share addresses.
  uint64_t OpenAlias(const Mapping& like, uint64_t addr, uint64_t bytes, bool exact) const;
  // Unmaps every peer segment still mapped (the destructor).
  void CloseAllMappings();
  // Fills the bookkeeping of a wait kernel (timeout, rank, label, failure records) and launches
  // it on `s`; WaitFlag and WaitValue differ only in what they wait for.
  absl::Status LaunchWait(const Stream& s, StreamId stream, kernels::WaitFlagArgs args,
                          std::string_view what, std::string_view label);
  absl::Status RefuseDuringCapture(std::string_view what) const;
  // The flag waits that timed out since the last call, as one error naming each (OK if none).
  absl::Status TakeWaitFailures();
  // WriteRank and ReadRank: n bytes between `host` and `mem`, on and waiting for one of mem's
  // rank's streams only.
  absl::Status CopyRank(const MemRef& mem, void* host, size_t n, bool to_device,
                        std::string_view what);
  // Reduce with at least one block-coded operand; the arguments are validated and the stream's
  // GPU is current.
  absl::Status ReduceBlockCoded(const Stream& stream, const Operand& dst,
                                absl::Span<const Operand> terms, int64_t elems,
                                std::string_view label);

  CudaDeviceOptions options_;
  std::vector<Gpu> gpus_;
  std::vector<Rank> ranks_;
  std::vector<Stream> streams_;
  std::vector<Event> events_;
  std::unique_ptr<WaitFailureLog> wait_log_;
  cudaEvent_t fork_event_ = nullptr;  // on rank 0's GPU
  uint64_t next_alloc_id_ = 1;
  bool capturing_ = false;
  std::vector<std::unique_ptr<CudaGraph>> graphs_;                    // owned by CaptureGraph's ids
  std::map<std::array<uint8_t, 64>, MappedSegment> mapped_segments_;  // by CUDA handle
  std::map<uint64_t, Mapping> mappings_;  // by number (MemRef::via_mapping), closed ones kept
};

}  // namespace dmalab

#endif  // DMALAB_HW_CUDA_DEVICE_H_
