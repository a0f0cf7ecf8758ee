#include "common/core/dtype.h"

#include "absl/strings/str_format.h"

namespace dmalab {

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
    case DType::kFP32:
      return "fp32";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kFP16;
  if (name == "fp32") return DType::kFP32;
  return absl::InvalidArgumentError(
      absl::StrFormat("dtype '%s' is not known; allowed: bf16, fp16, fp32", name));
}

}  // namespace dmalab
