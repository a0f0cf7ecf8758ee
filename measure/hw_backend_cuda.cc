#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "hw/cuda_device.h"
#include "measure/hw_backend.h"

namespace dmalab {

absl::StatusOr<std::unique_ptr<Device>> CreateHwDevice(int world, int gpus) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(world, gpus);
  if (!device.ok()) return device.status();
  return std::unique_ptr<Device>(std::move(*device));
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
