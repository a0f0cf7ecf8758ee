#include "tools/npy.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"

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
  const size_t n = bytes.size() / DTypeBytes(dtype);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = LoadAsFloat(dtype, bytes.data(), i);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return absl::PermissionDeniedError(absl::StrFormat("dump: cannot write '%s'", path));
  const std::string header = NpyHeader(shape);
  if (std::fwrite(header.data(), 1, header.size(), f.get()) != header.size() ||
      std::fwrite(values.data(), sizeof(float), n, f.get()) != n) {
    return absl::DataLossError(absl::StrFormat("dump: short write to '%s'", path));
  }
  return absl::OkStatus();
}

}  // namespace dmalab
