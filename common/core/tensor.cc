#include "dmalab/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dmalab {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<TensorView> ContiguousViews(const std::vector<MemRef>& mems, DType dtype,
                                        int64_t count) {
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeBytes(dtype);
  std::vector<TensorView> views;
  for (const MemRef& m : mems) views.push_back(TensorView{m.Slice(0, bytes), dtype, {count}, true});
  return views;
}

}  // namespace dmalab
