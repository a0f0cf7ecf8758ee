// Element types of collective payloads. Their exact conversions to and from fp32, the host
// reference arithmetic, are dmalab's own (common/core/dtype.h).
#ifndef DMALAB_DTYPE_H_
#define DMALAB_DTYPE_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace dmalab {

enum class DType { kBF16, kFP16, kFP32 };

// Bytes per element.
inline constexpr int DTypeBytes(DType t) { return t == DType::kFP32 ? 4 : 2; }

// "bf16", "fp16" or "fp32".
std::string_view DTypeName(DType t);

// Parses a name as printed by DTypeName; the error lists the allowed names.
absl::StatusOr<DType> ParseDType(std::string_view name);

}  // namespace dmalab

#endif  // DMALAB_DTYPE_H_
