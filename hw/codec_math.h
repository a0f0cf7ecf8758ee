// Block codec arithmetic (INT8 and E4M3, common/core/codec.h) written once for the GPU and the
// host.
//
// The block-codec Reduce kernel must equal ReduceHost bit for bit, so every step here is the
// operation sequence documented in common/core/codec.h, one IEEE fp32 operation at a time: true
// divisions (__fdiv_rn on the GPU, `/` on the host), round-to-nearest-even adds and multiplies
// (__fadd_rn, __fmul_rn: never contracted into an FMA), and integer code for rounding to the
// codes, copied from common/core/codec.cc. CUDA's own conversions (__nv_cvt_float_to_fp8,
// __float2int_rn) are not used: the same fp32 add that rounds on the host rounds on the GPU.
// Compiled by g++ as well, so that tests/hw/codec_math_test.cc checks this very code against
// common/core/codec.cc on a machine without a GPU.
#ifndef DMALAB_HW_CODEC_MATH_H_
#define DMALAB_HW_CODEC_MATH_H_

#include <cstdint>

#include "hw/element_math.h"

namespace dmalab::codec_math {

namespace em = ::dmalab::element_math;

inline constexpr uint32_t kCanonicalNaNBits = 0x7fc00000u;
inline constexpr uint32_t kInfBits = 0x7f800000u;
// scale = amax / max code.
inline constexpr float kInt8MaxCode = 127.0f;
inline constexpr float kE4M3MaxCode = 448.0f;
// The value byte of every value of a non-finite block: codes no finite block uses.
inline constexpr uint8_t kInt8PoisonByte = 0x80;  // -128
inline constexpr uint8_t kE4M3PoisonByte = 0x7f;  // E4M3 NaN

// fp32 a / b, a + b and a * b, each rounded once to nearest even.
DMALAB_HD float Div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

DMALAB_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

DMALAB_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// |v| as fp32 bits. The block's amax is the unsigned maximum of these: it orders magnitudes like
// floats and puts NaN above infinity above every finite value.
DMALAB_HD uint32_t AbsBits(float v) { return em::Bits(v) & 0x7fffffffu; }

DMALAB_HD uint32_t MaxBits(uint32_t a, uint32_t b) { return a > b ? a : b; }

// A block whose amax is NaN or infinity is poisoned: NaN scale, poison value bytes.
DMALAB_HD bool IsNonFiniteAmax(uint32_t amax_bits) { return amax_bits >= kInfBits; }

// scale = amax / max_code (one division), or 1.0f where that is zero (all-zero block, or the
// division underflows). amax_bits must be finite.
DMALAB_HD float BlockScale(uint32_t amax_bits, float max_code) {
  const float scale = Div(em::FromBits(amax_bits), max_code);
  return scale == 0.0f ? 1.0f : scale;
}

// clamp(rint(x), -127, 127) as a byte, for |x| < 2^22 (always so in a finite block). Adding
// 1.5 * 2^23 leaves no fraction bits, so the add itself rounds to nearest even (like
// __float2int_rn) and the low mantissa bits are then the signed integer.
DMALAB_HD uint8_t RoundToInt8(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const int32_t n = static_cast<int32_t>(em::Bits(Add(x, kMagic)) - em::Bits(kMagic));
  const int32_t clamped = n < -127 ? -127 : (n > 127 ? 127 : n);
  return static_cast<uint8_t>(clamped);
}

// fp32 to E4M3FN as common/core/codec.h's FloatToE4M3: nearest even, |x| > 448 (infinity included)
// saturates to +-448, the sign of zero is kept, NaN becomes 0x7f.
DMALAB_HD uint8_t FloatToE4M3(float x) {
  const uint32_t bits = em::Bits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > kInfBits) return kE4M3PoisonByte;
  if (abs < 0x3c800000u) {
    // Below 2^-6 the codes are the multiples of 2^-9 (subnormals, and 0x08 = 2^-6 for a carry).
    // Adding 1.5 * 2^14 makes the fp32 ulp 2^-9, so the add rounds to that grid, ties to even,
    // and leaves the count of steps (0..8) in the low bits.
    constexpr float kMagic = 24576.0f;  // 1.5 * 2^14
    return static_cast<uint8_t>(sign |
                                (em::Bits(Add(em::FromBits(abs), kMagic)) - em::Bits(kMagic)));
  }
  // Keep 3 of the 23 mantissa bits, round to nearest even on the 20 dropped ones (a carry moves
  // into the exponent), rebias the exponent from 127 to 7, saturate at 448 (0x7e).
  const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);
  const uint32_t code = (rounded >> 20) - (120u << 3);
  return static_cast<uint8_t>(sign | (code < 0x7eu ? code : 0x7eu));
}

// E4M3FN to fp32, exact; 0x7f and 0xff (NaN) give the canonical quiet NaN.
DMALAB_HD float E4M3ToFloat(uint8_t q) {
  const uint32_t sign = static_cast<uint32_t>(q & 0x80u) << 24;
  const uint32_t exp = (q >> 3) & 0xfu;
  const uint32_t mant = q & 0x7u;
  if (exp == 0xf && mant == 0x7) return em::FromBits(kCanonicalNaNBits);
  if (exp == 0) {
    // Subnormal: mant * 2^-9, exact (mant has at most 3 bits).
    return em::FromBits(sign | em::Bits(Mul(static_cast<float>(mant), 0x1p-9f)));
  }
  return em::FromBits(sign | ((exp + 120u) << 23) | (mant << 20));
}

// Value codes of a finite block with scale `scale`: one true division, then the rounding.
DMALAB_HD uint8_t QuantizeInt8(float v, float scale) { return RoundToInt8(Div(v, scale)); }

DMALAB_HD uint8_t QuantizeE4M3(float v, float scale) { return FloatToE4M3(Div(v, scale)); }

// float(code) * scale (one multiply), every NaN written as the canonical quiet NaN.
DMALAB_HD float ScaleCode(float code, float scale) {
  const float r = Mul(code, scale);
  return em::IsNanBits(em::Bits(r)) ? em::FromBits(kCanonicalNaNBits) : r;
}

DMALAB_HD float DecodeInt8(uint8_t q, float scale) {
  return ScaleCode(static_cast<float>(static_cast<int8_t>(q)), scale);
}

DMALAB_HD float DecodeE4M3(uint8_t q, float scale) { return ScaleCode(E4M3ToFloat(q), scale); }

}  // namespace dmalab::codec_math

#endif  // DMALAB_HW_CODEC_MATH_H_
