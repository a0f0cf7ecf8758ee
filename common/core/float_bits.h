// Bit-exact conversions between fp32 and the 16-bit element types, written once for the host
// and the GPU: common/core/dtype.h (the host reference) and hw/element_math.h (the Reduce kernel)
// both use these. They are integer code because CUDA's own conversions differ from IEEE's
// rules in the NaN they return (the canonical 0x7fff), and the kernels must equal the host bit
// for bit. Rounding is to nearest even; a NaN keeps its sign and payload, quieted; fp16
// overflow rounds to infinity; subnormals are kept.
#ifndef DMALAB_COMMON_CORE_FLOAT_BITS_H_
#define DMALAB_COMMON_CORE_FLOAT_BITS_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DMALAB_HD __host__ __device__ __forceinline__
#else
#define DMALAB_HD inline
#endif

namespace dmalab::float_bits {

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

// Round to nearest even; NaN keeps sign and payload,
// quieted.
DMALAB_HD uint16_t EncodeBF16(float f) {
  const uint32_t u = Bits(f);
  if (IsNanBits(u)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// Exact, subnormals normalised, NaN payload kept.
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

// Round to nearest even, subnormals, overflow to infinity.
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

}  // namespace dmalab::float_bits

#endif  // DMALAB_COMMON_CORE_FLOAT_BITS_H_
