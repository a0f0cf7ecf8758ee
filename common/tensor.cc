#include "common/tensor.h"

#include "absl/strings/str_join.h"

namespace dmalab {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return "[" + absl::StrJoin(shape, ", ") + "]";
}

}  // namespace dmalab
