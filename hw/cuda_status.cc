#include "hw/cuda_status.h"

namespace dmalab {

absl::Status CudaStatus(cudaError_t error, std::string_view call, std::string_view context) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // a non-sticky error must not resurface in an unrelated later check
  const std::string message = absl::StrFormat("%s: %s failed: %s (%s)", context, call,
                                              cudaGetErrorName(error), cudaGetErrorString(error));
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace dmalab
