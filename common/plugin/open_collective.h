// OpenCollective: the collective a command runs, by name: dmalab's own DMA ring ("ring"), or a
// plugin's shared library (a path: it contains a '/' or ends in ".so").
#ifndef DMALAB_COMMON_PLUGIN_OPEN_COLLECTIVE_H_
#define DMALAB_COMMON_PLUGIN_OPEN_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/core/collective.h"
#include "common/core/dtype.h"
#include "common/plugin/spmd_process.h"
#include "dmalab/device.h"
#include "dmalab/faults.h"
#include "dmalab/wire.h"

namespace dmalab {

// The default collective.
inline constexpr std::string_view kRingCollective = "ring";

struct CollectiveParams {
  uint64_t max_bytes = 0;  // the largest tensor a call will pass
  DType dtype = DType::kBF16;
  // Ring only: a plugin refuses anything but the defaults, naming the option.
  WireMode wire = WireMode::kNative;
  int pieces = 2;
  FaultSet faults;
  // Plugins only: handed to the plugin as dmalab_collective_config.options.
  std::string options;
  // Set where this process runs one rank of the device's W (one process per rank): an ABI v2
  // plugin then runs its own rank's instance only (common/plugin/spmd_process.h); an ABI v1
  // plugin, whose one instance drives every rank, is refused.
  SpmdProcess* process = nullptr;
};

// True when `spec` names a plugin's shared library rather than a built-in collective.
bool IsPluginPath(std::string_view spec);

// Makes the collective `spec` names on `device`. Errors are InvalidArgument (bad input): an
// unknown name, a plugin that does not load, ring options given to a plugin.
absl::StatusOr<std::unique_ptr<Collective>> OpenCollective(Device* device, std::string_view spec,
                                                           const CollectiveParams& params);

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_OPEN_COLLECTIVE_H_
