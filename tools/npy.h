// Writes tensors as NumPy .npy files (format version 1.0), float32 little-endian, so results
// can be inspected with numpy.load. bf16 and fp16 widen to float32 exactly.
#ifndef DMALAB_TOOLS_NPY_H_
#define DMALAB_TOOLS_NPY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/dtype.h"

namespace dmalab {

// numpy's limit on dimensions (NPY_MAXDIMS before numpy 2); WriteNpy refuses more.
inline constexpr size_t kMaxNpyDims = 32;

// The .npy header (magic, version, length, dict padded to 64 bytes) for a C-ordered float32
// array of `shape` (at most kMaxNpyDims dimensions, so its length fits the 16-bit field).
std::string NpyHeader(const std::vector<int64_t>& shape);

// Writes `bytes` (elements of `dtype`) widened to float32 as `path`, atomically, replacing
// whatever file or link is there (tools/output_file.h, OutputLinks::kReplace). Errors name the
// path and the reason: more than kMaxNpyDims dimensions, a file that cannot be created, or a
// failed write (a full disk included).
absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      absl::Span<const uint8_t> bytes);

// A file name for tensor `name` that stays inside the dump directory and differs for different
// names: ASCII letters, digits, '_', '-' and (not first) '.' are kept, every other byte ('/',
// NUL, control characters, '%', non-ASCII) becomes %HH. So "../x" becomes "%2E.%2Fx".
std::string DumpFileName(std::string_view name);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_NPY_H_
