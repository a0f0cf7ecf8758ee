// Element arithmetic of the Reduce kernel, written once for the GPU and the host.
//
// The kernel must equal ReduceHost (common/core/reduce_host.h) bit for bit, NaNs included. CUDA's
// own conversions do not: __float2bfloat16_rn and the cvt instructions return the canonical NaN
// 0x7fff, and GPU fp32 adds return the canonical NaN 0x7fffffff, while the host reference keeps
// NaN payloads and signs. So conversions here are integer code copied from common/core/dtype.h, and
// the add reproduces the NaN rules of the host's SSE adds (see HostOrderAdd). Compiled by g++
// as well, so that tests/hw/element_math_test.cc checks this very code against the host
// reference on a machine without a GPU.
#ifndef DMALAB_HW_ELEMENT_MATH_H_
#define DMALAB_HW_ELEMENT_MATH_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DMALAB_HD __host__ __device__ __forceinline__
#else
#define DMALAB_HD inline
#endif

namespace dmalab::element_math {

DMALAB_HD uint32_t Bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

DMALAB_HD float FromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

DMALAB_HD bool IsNanBits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

DMALAB_HD int CountLeadingZeros(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __clz(x);
#else
  return __builtin_clz(x);
#endif
}

// bf16 is the upper half of an fp32: exact.
DMALAB_HD float DecodeBF16(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }

// As FloatToBF16 in common/core/dtype.h: round to nearest even; NaN keeps sign and payload,
// quieted.
DMALAB_HD uint16_t EncodeBF16(float f) {
  const uint32_t u = Bits(f);
  if (IsNanBits(u)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// As FP16ToFloat in common/core/dtype.h: exact, subnormals normalised, NaN payload kept.
DMALAB_HD float DecodeFP16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return FromBits(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return FromBits(sign);
  // Subnormal: the leading one at bit p (0..9) becomes the implicit bit of 2^(p - 24).
  const uint32_t p = 31u - static_cast<uint32_t>(CountLeadingZeros(mant));
  return FromBits(sign | ((p + 103u) << 23) | ((mant << (23u - p)) & 0x7fffffu));
}

// As FloatToFP16 in common/core/dtype.h: round to nearest even, subnormals, overflow to infinity.
DMALAB_HD uint16_t EncodeFP16(float f) {
  const uint32_t u = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs >= 0x38800000u) {
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return sign;
  const uint32_t exp = abs >> 23;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rest = mant & ((1u << shift) - 1u);
  uint32_t q = mant >> shift;
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// acc + x as ReduceHost computes it on an x86-64 host (SSE addss with acc as first operand):
// a NaN operand propagates quieted, acc's first; an invalid operation (inf - inf) gives the
// x86 default NaN 0xffc00000; every other sum is the IEEE round-to-nearest-even fp32 sum, which
// __fadd_rn computes on the GPU (never contracted into an FMA, subnormals kept).
DMALAB_HD float HostOrderAdd(float acc, float x) {
  const uint32_t a = Bits(acc);
  const uint32_t b = Bits(x);
  if (IsNanBits(a)) return FromBits(a | 0x00400000u);
  if (IsNanBits(b)) return FromBits(b | 0x00400000u);
#if defined(__CUDA_ARCH__)
  const float sum = __fadd_rn(acc, x);
#else
  const float sum = acc + x;
#endif
  if (IsNanBits(Bits(sum))) return FromBits(0xffc00000u);
  return sum;
}

}  // namespace dmalab::element_math

#endif  // DMALAB_HW_ELEMENT_MATH_H_
