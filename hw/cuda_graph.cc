#include "hw/cuda_graph.h"

#include <utility>

namespace dmalab {

CudaGraph::~CudaGraph() { Reset(); }

CudaGraph::CudaGraph(CudaGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    Reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

void CudaGraph::Reset() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

size_t CudaGraph::num_nodes() const {
  if (graph_ == nullptr) return 0;
  size_t n = 0;
  if (cudaGraphGetNodes(graph_, nullptr, &n) != cudaSuccess) return 0;
  return n;
}

}  // namespace dmalab
