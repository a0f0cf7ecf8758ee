// Turns CUDA runtime error codes into absl::Status values that say which call failed, on
// which rank or GPU, and what it was for.
#ifndef DMALAB_HW_CUDA_STATUS_H_
#define DMALAB_HW_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

// OkStatus for cudaSuccess; otherwise "<context>: <call> failed: <name> (<description>)" with a
// code that fits the error (no device or driver: Unavailable; out of memory: ResourceExhausted;
// otherwise Internal). Clears the runtime's non-sticky last error.
absl::Status CudaStatus(cudaError_t error, std::string_view call, std::string_view context);

// As above, the context an absl::StrFormat format and its values, formatted only on failure: a
// call that succeeds (nearly every one) costs no formatting.
template <typename... Args>
absl::Status CudaStatus(cudaError_t error, std::string_view call,
                        const absl::FormatSpec<Args...>& context, const Args&... args) {
  if (error == cudaSuccess) return absl::OkStatus();
  return CudaStatus(error, call, absl::StrFormat(context, args...));
}

}  // namespace dmalab

// Evaluates a CUDA runtime call; on failure returns its CudaStatus, named by the call's own text,
// from the enclosing function (DMALAB_RETURN_IF_ERROR). The remaining arguments are an
// absl::StrFormat format and values naming the context, e.g.
//   DMALAB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n), "allocate: rank %d, %d bytes", rank, n);
#define DMALAB_CUDA_RETURN_IF_ERROR(call, ...) \
  DMALAB_RETURN_IF_ERROR(::dmalab::CudaStatus((call), #call, __VA_ARGS__))

#endif  // DMALAB_HW_CUDA_STATUS_H_
