#include "dmalab/wire.h"

#include "absl/strings/str_format.h"

namespace dmalab {

std::string_view WireModeName(WireMode mode) {
  switch (mode) {
    case WireMode::kNative:
      return "bf16";
    case WireMode::kI8:
      return "i8";
    case WireMode::kI8Ring:
      return "i8_ring";
    case WireMode::kI8A2A:
      return "i8_a2a";
    case WireMode::kE4M3:
      return "e4m3";
    case WireMode::kE4M3Ring:
      return "e4m3_ring";
    case WireMode::kE4M3A2A:
      return "e4m3_a2a";
  }
  return "?";
}

absl::StatusOr<WireMode> ParseWireMode(std::string_view name) {
  if (name == "native") return WireMode::kNative;
  for (WireMode m : {WireMode::kNative, WireMode::kI8, WireMode::kI8Ring, WireMode::kI8A2A,
                     WireMode::kE4M3, WireMode::kE4M3Ring, WireMode::kE4M3A2A}) {
    if (name == WireModeName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "wire mode '%s' is not known; allowed: bf16, i8, i8_ring, i8_a2a, e4m3, e4m3_ring, "
      "e4m3_a2a",
      name));
}

std::string_view WireLabel(WireMode mode, DType dtype) {
  return mode == WireMode::kNative ? DTypeName(dtype) : WireModeName(mode);
}

Codec WireCodec(WireMode mode) {
  switch (mode) {
    case WireMode::kNative:
      return Codec::kPlain;
    case WireMode::kI8:
    case WireMode::kI8Ring:
    case WireMode::kI8A2A:
      return Codec::kInt8Block;
    case WireMode::kE4M3:
    case WireMode::kE4M3Ring:
    case WireMode::kE4M3A2A:
      return Codec::kE4M3Block;
  }
  return Codec::kPlain;
}

}  // namespace dmalab
