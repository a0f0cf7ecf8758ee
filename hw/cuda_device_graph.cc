// CudaDevice's CUDA-graph support: capture of every rank's streams into one graph, and replay.
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "hw/cuda_device.h"
#include "hw/cuda_status.h"

namespace dmalab {

bool CudaDevice::IsCapturing(StreamId stream) const {
  if (stream.value() < 0 || stream.value() >= static_cast<int32_t>(streams_.size())) return false;
  if (capturing_) return true;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(streams_[stream.value()].stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

absl::StatusOr<CudaGraph> CudaDevice::Capture(const std::function<absl::Status()>& body) {
  if (capturing_) return absl::FailedPreconditionError("capture: a capture is already running");
  const Stream& origin = streams_[ranks_[0].compute_stream.value()];
  DMALAB_RETURN_IF_ERROR(UseGpu(origin.gpu));
  // Thread-local mode: this thread's unsafe calls (cudaMalloc, synchronous copies) fail the
  // capture instead of silently running eagerly.
  DMALAB_CUDA_RETURN_IF_ERROR(
      cudaStreamBeginCapture(origin.stream, cudaStreamCaptureModeThreadLocal),
      "capture: begin on rank 0 compute stream");
  capturing_ = true;
  // Fork: every other stream, on any GPU, waits for the origin and so joins the capture.
  absl::Status status = [&]() -> absl::Status {
    DMALAB_CUDA_RETURN_IF_ERROR(cudaEventRecord(fork_event_, origin.stream),
                                "capture: record fork event");
    for (const Stream& s : streams_) {
      if (&s == &origin) continue;
      DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
      DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s.stream, fork_event_, 0),
                                  "capture: fork rank %d stream '%s'", s.rank, s.name);
    }
    return body();
  }();
  // Join every forked stream back, even after a failure: ending a capture with unjoined
  // streams fails and would leave them in capture mode.
  for (const Stream& s : streams_) {
    if (&s == &origin) continue;
    absl::Status join = [&]() -> absl::Status {
      DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
      DMALAB_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.join_event, s.stream),
                                  "capture: record join event of rank %d stream '%s'", s.rank,
                                  s.name);
      DMALAB_RETURN_IF_ERROR(UseGpu(origin.gpu));
      DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(origin.stream, s.join_event, 0),
                                  "capture: join rank %d stream '%s'", s.rank, s.name);
      return absl::OkStatus();
    }();
    if (status.ok()) status = join;
  }
  cudaGraph_t graph = nullptr;
  absl::Status end = UseGpu(origin.gpu);
  if (end.ok()) {
    end = CudaStatus(cudaStreamEndCapture(origin.stream, &graph), "cudaStreamEndCapture",
                     "capture: end on rank 0 compute stream");
  }
  capturing_ = false;
  if (status.ok()) status = end;
  if (!status.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return status;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    return CudaStatus(e, "cudaGraphInstantiate", "capture: instantiate the graph");
  }
  return CudaGraph(graph, exec);
}

absl::Status CudaDevice::Replay(const CudaGraph& graph) {
  if (!graph.valid()) return absl::InvalidArgumentError("replay: the graph is empty");
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("replay"));
  const Stream& origin = streams_[ranks_[0].compute_stream.value()];
  for (size_t r = 1; r < ranks_.size(); ++r) {
    const Stream& s = streams_[ranks_[r].compute_stream.value()];
    DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
    DMALAB_CUDA_RETURN_IF_ERROR(cudaEventRecord(s.join_event, s.stream),
                                "replay: record rank %d compute stream", r);
    DMALAB_RETURN_IF_ERROR(UseGpu(origin.gpu));
    DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(origin.stream, s.join_event, 0),
                                "replay: order after rank %d compute stream", r);
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(origin.gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph.exec_, origin.stream),
                              "replay: launch on rank 0 compute stream");
  DMALAB_CUDA_RETURN_IF_ERROR(cudaEventRecord(origin.join_event, origin.stream),
                              "replay: record the end of the graph");
  for (size_t r = 1; r < ranks_.size(); ++r) {
    const Stream& s = streams_[ranks_[r].compute_stream.value()];
    DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
    DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s.stream, origin.join_event, 0),
                                "replay: order rank %d compute stream after the graph", r);
  }
  return absl::OkStatus();
}

absl::StatusOr<GraphId> CudaDevice::CaptureGraph(const std::function<absl::Status()>& body) {
  DMALAB_ASSIGN_OR_RETURN(CudaGraph graph, Capture(body));
  graphs_.push_back(std::make_unique<CudaGraph>(std::move(graph)));
  return GraphId(static_cast<int32_t>(graphs_.size() - 1));
}

absl::Status CudaDevice::LaunchGraph(GraphId graph) {
  if (graph.value() < 0 || graph.value() >= static_cast<int32_t>(graphs_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("launch graph: graph %d does not exist", graph));
  }
  return Replay(*graphs_[graph.value()]);
}

}  // namespace dmalab
