// The simulator's public entry points (include/dmalab/sim.h) over SimDevice.
#include "dmalab/sim.h"

#include <cstdint>
#include <functional>
#include <memory>

#include "dmalab/device.h"
#include "dmalab/device_finding.h"
#include "sim/sim_device.h"

namespace dmalab {

std::unique_ptr<Device> NewSimDevice(int world, uint64_t seed, Fidelity fidelity) {
  return std::make_unique<SimDevice>(world, seed, fidelity);
}

std::function<DeviceFindings()> NewFindingsPoller(const Device& device) {
  const auto* sim = dynamic_cast<const SimDevice*>(&device);
  if (sim == nullptr) return nullptr;
  return NewFindingsPoller(*sim);
}

}  // namespace dmalab
