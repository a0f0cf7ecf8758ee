// Element types of collective payloads (DType: include/dmalab/dtype.h) and their exact
// conversions to and from fp32.
//
// The conversions are the host reference arithmetic: round-to-nearest-even, NaN stays NaN
// (quiet), overflow rounds to infinity as IEEE 754 requires. The CUDA kernels must match
// these bit for bit.
#ifndef DMALAB_COMMON_CORE_DTYPE_H_
#define DMALAB_COMMON_CORE_DTYPE_H_

#include <cstdint>
#include <cstring>

#include "common/core/float_bits.h"
#include "dmalab/dtype.h"

namespace dmalab {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The conversions (common/core/float_bits.h, shared with the GPU kernels):
// bf16 is the upper half of an fp32: widening is exact.
inline float BF16ToFloat(uint16_t h) { return float_bits::DecodeBF16(h); }
// Rounds to nearest even; NaN becomes a quiet NaN with the same sign.
inline uint16_t FloatToBF16(float f) { return float_bits::EncodeBF16(f); }
// IEEE binary16 to fp32, exact (subnormals included).
inline float FP16ToFloat(uint16_t h) { return float_bits::DecodeFP16(h); }
// fp32 to IEEE binary16, round to nearest even, subnormals and overflow to infinity.
inline uint16_t FloatToFP16(float f) { return float_bits::EncodeFP16(f); }

// Reads element i of a buffer of type t, widened exactly to fp32.
inline float LoadAsFloat(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
      return BF16ToFloat(h);
    }
    case DType::kFP16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
      return FP16ToFloat(h);
    }
    case DType::kFP32: {
      float f;
      std::memcpy(&f, static_cast<const uint8_t*>(base) + 4 * i, 4);
      return f;
    }
  }
  return 0.0f;
}

// How many of the `elems` elements of type t at `base` are not finite (infinity or NaN: every
// exponent bit set), and the index of the first (-1 when none). Reads the bits and converts
// nothing, so the scan runs at memory speed: the replay checks every element of every output.
struct NonFiniteCount {
  int64_t count = 0;
  int64_t first = -1;
};
NonFiniteCount CountNonFinite(DType t, const void* base, int64_t elems);

// Rounds v to type t and stores it as element i.
inline void StoreFromFloat(DType t, void* base, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: {
      const uint16_t h = FloatToBF16(v);
      std::memcpy(static_cast<uint8_t*>(base) + 2 * i, &h, 2);
      return;
    }
    case DType::kFP16: {
      const uint16_t h = FloatToFP16(v);
      std::memcpy(static_cast<uint8_t*>(base) + 2 * i, &h, 2);
      return;
    }
    case DType::kFP32:
      std::memcpy(static_cast<uint8_t*>(base) + 4 * i, &v, 4);
      return;
  }
}

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_DTYPE_H_
