#include "tools/npy.h"

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "tools/output_file.h"

namespace dmalab {

std::string NpyHeader(const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) absl::StrAppendFormat(&dims, "%d, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(2, 3)"; one dim keeps "(5,)"
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict =
      absl::StrFormat("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  header.push_back(static_cast<char>(dict.size() & 0xff));
  header.push_back(static_cast<char>(dict.size() >> 8));
  return header + dict;
}

absl::Status WriteNpy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
                      absl::Span<const uint8_t> bytes) {
  if (shape.size() > kMaxNpyDims) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dump: '%s': the tensor has %d dimensions, allowed at most %d (numpy's "
                        "limit)",
                        path, shape.size(), kMaxNpyDims));
  }
  const size_t n = bytes.size() / DTypeBytes(dtype);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = LoadAsFloat(dtype, bytes.data(), i);
  const std::string header = NpyHeader(shape);
  // A dump file is named after a tensor: whatever is at its path (a link to a file outside the
  // folder included) is replaced, never written through.
  const std::string_view parts[] = {
      header, std::string_view(reinterpret_cast<const char*>(values.data()), n * sizeof(float))};
  return Prefixed("dump: ", WriteOutputFile(path, parts, OutputLinks::kReplace));
}

std::string DumpFileName(std::string_view tensor) {
  std::string out;
  for (size_t i = 0; i < tensor.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(tensor[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain) {
      out += static_cast<char>(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

}  // namespace dmalab
