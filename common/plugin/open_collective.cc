#include "common/plugin/open_collective.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/plugin/plugin_collective.h"
#include "common/plugin/plugin_library.h"
#include "common/plugin/spmd_collective.h"
#include "common/ring/dma_all_reduce.h"

namespace dmalab {

bool IsPluginPath(std::string_view spec) {
  return spec.find('/') != std::string_view::npos || spec.ends_with(".so");
}

absl::StatusOr<std::unique_ptr<Collective>> OpenCollective(Device* device, std::string_view spec,
                                                           const CollectiveParams& params) {
  if (spec == kRingCollective) {
    if (!params.options.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "collective options '%s' are for plugins; the ring takes its settings from the "
          "scenario and flags",
          params.options));
    }
    DmaAllReduceOptions options;
    options.max_bytes = params.max_bytes;
    options.wire = params.wire;
    options.pieces = params.pieces;
    options.faults = params.faults;
    auto ar = DmaAllReduce::Create(device, options);
    if (!ar.ok()) return Prefixed("DmaAllReduce: ", ar.status());
    return std::unique_ptr<Collective>(*std::move(ar));
  }
  if (!IsPluginPath(spec)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("collective is '%s'; allowed: ring (the built-in DMA ring), or the path "
                        "of a plugin's shared library (containing '/' or ending in .so)",
                        spec));
  }
  const std::string where = absl::StrFormat("collective %s", spec);
  if (!params.faults.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: fault injections (%s) are bugs of the built-in ring; a plugin brings its own", where,
        params.faults.ToString()));
  }
  if (params.wire != WireMode::kNative) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the wire mode '%s' is the built-in ring's; a plugin receives plain "
                        "tensors (use a scenario with wire: bf16)",
                        where, WireModeName(params.wire)));
  }
  PluginConfig config;
  config.path = std::string(spec);
  config.options = params.options;
  config.max_bytes = params.max_bytes;
  config.dtype = params.dtype;
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<PluginLibrary> lib, PluginLibrary::Open(config.path));
  if (lib->abi() == 2) {
    DMALAB_ASSIGN_OR_RETURN(auto p,
                            SpmdCollective::Create(device, std::move(lib), config, params.process));
    return std::unique_ptr<Collective>(std::move(p));
  }
  if (params.process != nullptr) {
    return lib->Error(
        "it speaks plugin ABI v1, whose one instance drives every rank from one process; one "
        "process per rank (--procs) runs ABI v2 (SPMD) plugins only, one instance per rank");
  }
  DMALAB_ASSIGN_OR_RETURN(auto p, PluginCollective::Create(device, std::move(lib), config));
  return std::unique_ptr<Collective>(std::move(p));
}

}  // namespace dmalab
