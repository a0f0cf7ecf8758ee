// Writes tensors as NumPy .npy files (format version 1.0), float32 little-endian, so results
// can be inspected with numpy.load. bf16 and fp16 widen to float32 exactly.
#ifndef DMALAB_TOOLS_NPY_H_
#define DMALAB_TOOLS_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/dtype.h"

namespace dmalab {

// The .npy header (magic, version, length, dict padded to 64 bytes) for a C-ordered float32
// array of `shape`.
std::string NpyHeader(const std::vector<int64_t>& shape);

// Writes `bytes` (elements of `dtype`) widened to float32 as `path`.
absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      absl::Span<const uint8_t> bytes);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_NPY_H_
