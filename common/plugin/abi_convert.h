// Conversions between the plugin C ABI's values (include/dmalab/plugin.h) and dmalab's types,
// shared by both ABI versions' adapters (plugin_collective.cc for v1, rank_api.cc and
// spmd_collective.cc for v2), so that the two accept and name the same values.
#ifndef DMALAB_COMMON_PLUGIN_ABI_CONVERT_H_
#define DMALAB_COMMON_PLUGIN_ABI_CONVERT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/core/dtype.h"
#include "dmalab/device.h"
#include "dmalab/plugin.h"
#include "dmalab/tensor.h"

namespace dmalab {

// DMALAB_DTYPE_* to DType; any other value is an error naming the allowed ones.
absl::StatusOr<DType> DTypeFromAbi(int32_t dtype);
// DType to DMALAB_DTYPE_*.
int32_t DTypeToAbi(DType dtype);
// DMALAB_STREAM_* to StreamKind; any other value is an error naming the allowed ones.
absl::StatusOr<StreamKind> StreamKindFromAbi(int32_t kind);
// A MemRef as the plugin sees it.
dmalab_mem MemToAbi(const MemRef& m);
// A label the plugin passed (possibly NULL) as text.
std::string LabelFromAbi(const char* label);

}  // namespace dmalab

#endif  // DMALAB_COMMON_PLUGIN_ABI_CONVERT_H_
