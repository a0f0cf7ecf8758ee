// This build has no CUDA backend (no CUDA toolkit was found, or DMALAB_CUDA is off).
#include "dmalab/hw.h"

namespace dmalab {

absl::StatusOr<std::unique_ptr<Device>> CreateHwDevice(int, int, const HwDeviceOptions&) {
  return absl::UnavailableError(
      "backend hw: this dmalab was built without the CUDA backend (no CUDA toolkit found)");
}

absl::Status HwSpin(Device&, StreamId, uint64_t) {
  return absl::UnavailableError(
      "backend hw: this dmalab was built without the CUDA backend (no CUDA toolkit found)");
}

absl::StatusOr<GpuProperties> HwGpuProperties(int) {
  return absl::UnavailableError(
      "backend hw: this dmalab was built without the CUDA backend (no CUDA toolkit found)");
}

}  // namespace dmalab
