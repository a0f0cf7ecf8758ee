// An instantiated CUDA graph made by CudaDevice::Capture; replayed with CudaDevice::Replay.
#ifndef DMALAB_HW_CUDA_GRAPH_H_
#define DMALAB_HW_CUDA_GRAPH_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace dmalab {

// Owns a captured graph and its executable instance; move-only.
class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool valid() const { return exec_ != nullptr; }
  // Nodes in the captured graph (kernels, copies, event nodes, empty joins).
  size_t num_nodes() const;

 private:
  friend class CudaDevice;
  CudaGraph(cudaGraph_t graph, cudaGraphExec_t exec) : graph_(graph), exec_(exec) {}
  void Reset();

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace dmalab

#endif  // DMALAB_HW_CUDA_GRAPH_H_
