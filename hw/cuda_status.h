// Turns CUDA runtime error codes into absl::Status values that say which call failed, on
// which rank or GPU, and what it was for.
#ifndef DMALAB_HW_CUDA_STATUS_H_
#define DMALAB_HW_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace dmalab {

// OkStatus for cudaSuccess; otherwise "<context>: <call> failed: <name> (<description>)" with a
// code that fits the error (no device or driver: Unavailable; out of memory: ResourceExhausted;
// otherwise Internal). Clears the runtime's non-sticky last error.
absl::Status CudaStatus(cudaError_t error, std::string_view call, std::string_view context);

}  // namespace dmalab

// Evaluates a CUDA runtime call; on failure returns its Status from the enclosing function.
// The remaining arguments are an absl::StrFormat format and values naming the context, e.g.
//   DMALAB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n), "allocate: rank %d, %d bytes", rank, n);
#define DMALAB_CUDA_RETURN_IF_ERROR(call, ...)                                                \
  do {                                                                                        \
    const cudaError_t dmalab_cuda_error_ = (call);                                            \
    if (dmalab_cuda_error_ != cudaSuccess) {                                                  \
      return ::dmalab::CudaStatus(dmalab_cuda_error_, #call, ::absl::StrFormat(__VA_ARGS__)); \
    }                                                                                         \
  } while (false)

// Evaluates an expression yielding absl::Status; returns it when not OK. Variadic so that
// braced arguments with commas pass through.
#define DMALAB_HW_RETURN_IF_ERROR(...)                                         \
  do {                                                                         \
    if (::absl::Status dmalab_status_ = (__VA_ARGS__); !dmalab_status_.ok()) { \
      return dmalab_status_;                                                   \
    }                                                                          \
  } while (false)

#endif  // DMALAB_HW_CUDA_STATUS_H_
