// CudaDevice's streams and events: creation (with the per-rank cap on CUDA streams), record
// and wait.
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "hw/cuda_device.h"
#include "hw/cuda_status.h"

namespace dmalab {

absl::StatusOr<StreamId> CudaDevice::NewStream(int rank, StreamKind kind, std::string_view name,
                                               cudaStream_t shared) {
  Stream s;
  s.rank = rank;
  s.gpu = ranks_[rank].gpu;
  s.kind = kind;
  s.name = std::string(name);
  s.stream = shared;
  s.owns_stream = shared == nullptr;
  DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
  if (s.owns_stream && !options_.stream_priority_seed) {
    DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                                "create stream '%s' on rank %d", name, rank);
  } else if (s.owns_stream) {
    // A perturbation: a priority drawn from the GPU's range (lower numbers run first).
    int least = 0, greatest = 0;
    DMALAB_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                "stream priority range for stream '%s' on rank %d", name, rank);
    uint64_t h = *options_.stream_priority_seed ^ (static_cast<uint64_t>(streams_.size()) << 32);
    h = (h ^ (h >> 31)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    const int priority =
        greatest + static_cast<int>(h % static_cast<uint64_t>(least - greatest + 1));
    DMALAB_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithPriority(&s.stream, cudaStreamNonBlocking, priority),
        "create stream '%s' on rank %d with priority %d", name, rank, priority);
  }
  const cudaError_t e = cudaEventCreateWithFlags(&s.join_event, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    if (s.owns_stream) cudaStreamDestroy(s.stream);
    return CudaStatus(e, "cudaEventCreateWithFlags",
                      absl::StrFormat("create join event of stream '%s' on rank %d", name, rank));
  }
  streams_.push_back(std::move(s));
  return StreamId(static_cast<int32_t>(streams_.size() - 1));
}

absl::StatusOr<StreamId> CudaDevice::CreateStream(int rank, StreamKind kind,
                                                  std::string_view name) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "create stream"));
  DMALAB_RETURN_IF_ERROR(
      RefuseDuringCapture(absl::StrFormat("create stream '%s' on rank %d", name, rank)));
  // Each rank owns at most kCudaStreamsPerKind CUDA streams of a kind; later requests share
  // them round-robin (see the header).
  Rank& owner = ranks_[rank];
  const int k = static_cast<int>(kind);
  const int cap = kCudaStreamsPerKind[k];
  const int nth = owner.streams_requested[k]++;
  if (nth < cap) {
    absl::StatusOr<StreamId> id = NewStream(rank, kind, name);
    if (id.ok()) owner.owned_streams[k].push_back(*id);
    return id;
  }
  return NewStream(rank, kind, name, streams_[owner.owned_streams[k][nth % cap].value()].stream);
}

absl::StatusOr<EventId> CudaDevice::CreateEvent(int rank) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "create event"));
  Event e;
  e.rank = rank;
  e.gpu = ranks_[rank].gpu;
  DMALAB_RETURN_IF_ERROR(UseGpu(e.gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event, cudaEventDisableTiming),
                              "create event on rank %d", rank);
  events_.push_back(e);
  return EventId(static_cast<int32_t>(events_.size() - 1));
}

absl::Status CudaDevice::RecordEvent(EventId event, StreamId stream) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "record event"));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record event: event %d does not exist", event));
  }
  const Event& e = events_[event.value()];
  if (e.gpu != s->gpu) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "record event: event %d (rank %d, GPU %d) and stream '%s' (rank %d, GPU %d) must be on "
        "one GPU",
        event, e.rank, gpus_[e.gpu].ordinal, s->name, s->rank, gpus_[s->gpu].ordinal));
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(e.gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaEventRecord(e.event, s->stream),
                              "record event %d on rank %d stream '%s'", event, s->rank, s->name);
  return absl::OkStatus();
}

absl::Status CudaDevice::WaitEvent(StreamId stream, EventId event) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "wait event"));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait event: event %d does not exist", event));
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s->stream, events_[event.value()].event, 0),
                              "rank %d stream '%s' wait for event %d of rank %d", s->rank, s->name,
                              event, events_[event.value()].rank);
  return absl::OkStatus();
}

}  // namespace dmalab
