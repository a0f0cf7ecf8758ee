#include "common/core/dtype.h"

#include "common/core/enum_names.h"

namespace dmalab {

std::string_view DTypeName(DType t) { return kDTypes.Name(t); }

absl::StatusOr<DType> ParseDType(std::string_view name) { return kDTypes.Parse(name); }

}  // namespace dmalab
