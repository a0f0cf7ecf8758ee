// Wire modes: how the ring's payload travels (docs/design.md section 3).
#ifndef DMALAB_WIRE_H_
#define DMALAB_WIRE_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "dmalab/device.h"

namespace dmalab {

enum class WireMode {
  kNative,    // "bf16": the tensor's own dtype, an add per hop (any dtype)
  kI8,        // bf16 reduce-scatter; the owner quantizes its chunk once for the all-gather
  kI8Ring,    // requantize on every reduce-scatter hop; all-gather as kI8
  kI8A2A,     // quantize each input slice once, all-to-all to owners, then as kI8
  kE4M3,      // as kI8 with E4M3 payload
  kE4M3Ring,  // as kI8Ring with E4M3 payload
  kE4M3A2A,   // as kI8A2A with E4M3 payload
};

// "bf16", "i8", "i8_ring", "i8_a2a", "e4m3", "e4m3_ring", "e4m3_a2a".
std::string_view WireModeName(WireMode mode);
// Parses a name as printed by WireModeName ("native" is accepted for "bf16").
absl::StatusOr<WireMode> ParseWireMode(std::string_view name);

// What a run of `mode` on `dtype` tensors sends, for reports: the dtype's own name for kNative
// (an fp16 all-reduce's native wire carries fp16, not bf16), else the mode's name.
std::string_view WireLabel(WireMode mode, DType dtype);

// The block codec of a compressed mode; Codec::kPlain for kNative.
Codec WireCodec(WireMode mode);

}  // namespace dmalab

#endif  // DMALAB_WIRE_H_
