#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "dmalab/hw.h"
#include "hw/cuda_device.h"

namespace dmalab {

absl::StatusOr<std::unique_ptr<Device>> CreateHwDevice(int world, int gpus,
                                                       const HwDeviceOptions& options) {
  CudaDeviceOptions cuda;
  cuda.stream_priority_seed = options.stream_priority_seed;
  cuda.first_gpu = options.first_gpu;
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                          CudaDevice::Create(world, gpus, cuda));
  return std::unique_ptr<Device>(std::move(device));
}

absl::Status HwSpin(Device& device, StreamId stream, uint64_t ns) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "spin: device '%s' is not a CUDA device; spins need --backend=hw", device.name()));
  }
  return cuda->Spin(stream, ns);
}

absl::StatusOr<GpuProperties> HwGpuProperties(int ordinal) {
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, ordinal); e != cudaSuccess) {
    return absl::UnavailableError(
        absl::StrFormat("cudaGetDeviceProperties(%d): %s", ordinal, cudaGetErrorString(e)));
  }
  GpuProperties p;
  p.name = prop.name;
  p.copy_engines = prop.asyncEngineCount;
  p.sms = prop.multiProcessorCount;
  p.pci_domain = prop.pciDomainID;
  p.pci_bus = prop.pciBusID;
  p.pci_device = prop.pciDeviceID;
  (void)cudaRuntimeGetVersion(&p.cuda_runtime);
  (void)cudaDriverGetVersion(&p.cuda_driver);
  return p;
}

}  // namespace dmalab
