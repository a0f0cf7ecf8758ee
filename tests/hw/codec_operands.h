// Inputs for the block-codec Reduce tests: bf16 tensors of realistic values, random bit
// patterns and edge blocks, and block-coded segments made from them (or from random bytes).
#ifndef DMALAB_TESTS_HW_CODEC_OPERANDS_H_
#define DMALAB_TESTS_HW_CODEC_OPERANDS_H_

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "common/core/codec.h"
#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "dmalab/device.h"

namespace dmalab::testing {

using Bytes = std::vector<uint8_t>;

enum class InputKind {
  kValues,  // normal(0, 1) rounded to bf16: sums round often
  kBits,    // random bf16 bit patterns: NaNs with payloads, infinities, subnormals, huge values
  kEdges,   // whole blocks of one edge kind each (see EdgeBlockValue)
};

inline constexpr InputKind kInputKinds[] = {InputKind::kValues, InputKind::kBits,
                                            InputKind::kEdges};

inline std::string_view InputKindName(InputKind kind) {
  switch (kind) {
    case InputKind::kValues:
      return "values";
    case InputKind::kBits:
      return "bits";
    case InputKind::kEdges:
      return "edges";
  }
  return "?";
}

// Value i of an edge block of kind `kind` (0..7): all zero of both signs; one NaN; one +inf or
// -inf; subnormals only (the scale underflows or is subnormal); the largest bf16 values (sums
// overflow); ordinary values with -0 and +0 sprinkled in; tiny values next to one normal one.
inline uint16_t EdgeBlockValue(std::mt19937_64& rng, int kind, int64_t i) {
  const uint16_t sign = static_cast<uint16_t>((rng() & 1) << 15);
  const bool first = i % kCodecBlockElems == static_cast<int64_t>(rng() % 4);
  switch (kind) {
    case 0:
      return sign;
    case 1:
      return first ? static_cast<uint16_t>(0x7fc1 | sign) : static_cast<uint16_t>(rng() & 0xbfff);
    case 2:
      return first ? static_cast<uint16_t>(0x7f80 | sign) : static_cast<uint16_t>(rng() & 0xbfff);
    case 3:
      return static_cast<uint16_t>(sign | (rng() % 0x80));
    case 4:
      return static_cast<uint16_t>(sign | (0x7f70 + rng() % 0x10));
    case 5:
      return rng() % 3 == 0 ? sign : static_cast<uint16_t>(sign | (0x3c00 + rng() % 0x600));
    default:
      return first ? static_cast<uint16_t>(sign | 0x4000)
                   : static_cast<uint16_t>(sign | (rng() % 4));
  }
}

inline Bytes RandomBF16(std::mt19937_64& rng, InputKind kind, int64_t elems) {
  Bytes v(static_cast<size_t>(elems) * 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int edge = 0;
  for (int64_t i = 0; i < elems; ++i) {
    uint16_t h = 0;
    switch (kind) {
      case InputKind::kValues:
        h = FloatToBF16(normal(rng));
        break;
      case InputKind::kBits:
        h = static_cast<uint16_t>(rng());
        break;
      case InputKind::kEdges:
        if (i % kCodecBlockElems == 0) edge = static_cast<int>(rng() % 7);
        h = EdgeBlockValue(rng, edge, i);
        break;
    }
    v[2 * i] = static_cast<uint8_t>(h);
    v[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return v;
}

// The bf16 tensor `plain` of `elems` values encoded with `codec` by the host reference.
inline Bytes EncodeSegment(Codec codec, const Bytes& plain, int64_t elems) {
  Bytes out(EncodedBytes(codec, DType::kBF16, elems));
  const HostOperand term = {plain.data(), Codec::kPlain};
  (void)ReduceHost(DType::kBF16, out.data(), codec, {&term, 1}, elems);
  return out;
}

// Raw bytes of an operand of `codec`: for kBits a block-coded operand is random bytes, its
// codes and scales included (NaN and subnormal scales, poison codes in finite blocks); otherwise
// the encoding of a bf16 tensor of that kind.
inline Bytes RandomOperand(std::mt19937_64& rng, Codec codec, InputKind kind, int64_t elems) {
  if (codec != Codec::kPlain && kind == InputKind::kBits) {
    Bytes v(EncodedBytes(codec, DType::kBF16, elems));
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
    return v;
  }
  Bytes plain = RandomBF16(rng, kind, elems);
  return codec == Codec::kPlain ? plain : EncodeSegment(codec, plain, elems);
}

}  // namespace dmalab::testing

#endif  // DMALAB_TESTS_HW_CODEC_OPERANDS_H_
