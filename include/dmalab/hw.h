// The hardware backend: real GPUs (CudaDevice, the CUDA backend of hw/) behind the Device
// interface, and a GPU's properties. In dmalab::measure, built on dmalab::hw when dmalab was built
// with a CUDA toolkit (measure/hw_backend_cuda.cc) and otherwise with every call Unavailable
// (measure/hw_backend_none.cc), so that no user of it tests for CUDA.
#ifndef DMALAB_HW_H_
#define DMALAB_HW_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dmalab/device.h"

namespace dmalab {

// What calibration records about a GPU.
struct GpuProperties {
  std::string name;      // e.g. "NVIDIA H200"
  int copy_engines = 0;  // cudaDeviceProp::asyncEngineCount
  int sms = 0;
  int cuda_runtime = 0;                             // cudaRuntimeGetVersion, e.g. 13000
  int cuda_driver = 0;                              // cudaDriverGetVersion
  int pci_domain = 0, pci_bus = 0, pci_device = 0;  // cudaDeviceProp::pciDomainID, ...
};

// What a hardware device is made with besides its ranks and GPUs.
struct HwDeviceOptions {
  // Set: seeded stream priorities (CudaDeviceOptions::stream_priority_seed).
  std::optional<uint64_t> stream_priority_seed;
  // Rank 0's GPU, modulo the GPUs visible (CudaDeviceOptions::first_gpu).
  int first_gpu = 0;
};

// CudaDevice::Create(world, gpus).
absl::StatusOr<std::unique_ptr<Device>> CreateHwDevice(int world, int gpus,
                                                       const HwDeviceOptions& options = {});
// Enqueues a spin of `ns` nanoseconds on `stream` of a device CreateHwDevice made
// (CudaDevice::Spin); InvalidArgument for any other device.
absl::Status HwSpin(Device& device, StreamId stream, uint64_t ns);
// Properties of CUDA device `ordinal`.
absl::StatusOr<GpuProperties> HwGpuProperties(int ordinal);

}  // namespace dmalab

#endif  // DMALAB_HW_H_
