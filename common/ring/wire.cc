#include "dmalab/wire.h"

#include "common/ring/enum_names.h"

namespace dmalab {

std::string_view WireModeName(WireMode mode) { return kWireModes.Name(mode); }

absl::StatusOr<WireMode> ParseWireMode(std::string_view name) { return kWireModes.Parse(name); }

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
