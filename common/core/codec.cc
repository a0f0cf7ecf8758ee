#include "common/core/codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>

#include "common/core/dtype.h"

namespace dmalab {
namespace {

constexpr uint32_t kCanonicalNaNBits = 0x7fc00000u;
constexpr uint32_t kInfBits = 0x7f800000u;
constexpr float kInt8Max = 127.0f;
constexpr float kE4M3Max = 448.0f;
// Payload bytes of a non-finite block: codes that no finite block contains.
constexpr uint8_t kInt8PoisonByte = 0x80;  // -128; finite blocks stay within [-127, 127]
constexpr uint8_t kE4M3NaNByte = 0x7f;

// The largest |v[i]| of a block, as fp32 bits. Comparing magnitudes as integers orders them
// like floats and puts NaN above infinity above every finite value.
inline uint32_t BlockAmaxBits(const float* v) {
  uint32_t amax = 0;
  for (int64_t i = 0; i < kCodecBlockElems; ++i) {
    amax = std::max(amax, FloatBits(v[i]) & 0x7fffffffu);
  }
  return amax;
}

// scale = amax / max_code, or 1.0f where that is zero (all-zero block, or underflow).
inline float BlockScale(uint32_t amax_bits, float max_code) {
  const float scale = BitsToFloat(amax_bits) / max_code;
  return scale == 0.0f ? 1.0f : scale;
}

// clamp(rint(x), -127, 127) for |x| < 2^22. Adding 1.5 * 2^23 leaves no fraction bits, so the
// fp32 addition itself rounds to nearest even (default rounding mode, like __float2int_rn), and
// the low mantissa bits are then the signed integer. Clamping after rounding equals rounding
// after clamping (the bounds are integers); doing it on integers keeps the loop free of
// floating-point compares, which GCC does not if-convert, so it vectorizes.
inline uint8_t RoundToInt8(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const int32_t n = static_cast<int32_t>(FloatBits(x + kMagic) - FloatBits(kMagic));
  return static_cast<uint8_t>(std::min(std::max(n, -127), 127));
}

// FloatToE4M3. Branch-free (both ranges are computed, then one is selected) so that block loops
// vectorize.
inline uint8_t RoundToE4M3(float x) {
  const uint32_t bits = FloatBits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7fffffffu;
  // Normal range: keep 3 of the 23 mantissa bits, round to nearest even on the 20 dropped ones
  // (a carry moves into the exponent), rebias the exponent from 127 to 7. Anything that rounds
  // beyond 448 (0x7e), infinity included, saturates to it.
  const uint32_t rounded = abs + 0x7ffffu + ((abs >> 20) & 1u);
  const uint32_t normal = std::min((rounded >> 20) - (120u << 3), 0x7eu);
  // Below 2^-6 the codes are the multiples of 2^-9. Adding 1.5 * 2^14 makes the fp32 ulp 2^-9,
  // so the addition rounds to that grid, ties to even; the count of 2^-9 steps (0..8) is the
  // code, and 8 is the smallest normal 0x08.
  constexpr float kMagic = 24576.0f;  // 1.5 * 2^14
  const uint32_t subnormal = FloatBits(BitsToFloat(abs) + kMagic) - FloatBits(kMagic);
  // Select with masks, not ?: or if: GCC keeps a branch around the fp32 addition (it may raise
  // a floating-point exception, so it is not if-converted) and then does not vectorize.
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(abs < FloatBits(0x1p-6f));
  const uint32_t is_nan = 0u - static_cast<uint32_t>(abs > kInfBits);
  const uint32_t code = sign | (subnormal & is_subnormal) | (normal & ~is_subnormal);
  return static_cast<uint8_t>((code & ~is_nan) | (kE4M3NaNByte & is_nan));
}

// For a finite block |v| / scale < 2^22: with a normal scale it is at most 127 (448) times
// 1 + 2^-23; a subnormal scale is at least 2^-149 and within 2^-150 of amax / 127, so the ratio
// is below 1.5 * 127.
void EncodeInt8(const float* __restrict v, float scale, uint8_t* __restrict q) {
  for (int64_t i = 0; i < kCodecBlockElems; ++i) q[i] = RoundToInt8(v[i] / scale);
}

void EncodeE4M3(const float* __restrict v, float scale, uint8_t* __restrict q) {
  for (int64_t i = 0; i < kCodecBlockElems; ++i) q[i] = RoundToE4M3(v[i] / scale);
}

// float(code) * scale with every NaN written as the canonical quiet NaN.
inline float ScaleCode(float code, float scale) {
  const float r = code * scale;
  return r == r ? r : BitsToFloat(kCanonicalNaNBits);
}

constexpr float E4M3ToFloatUncached(uint8_t q) {
  const uint32_t sign = static_cast<uint32_t>(q & 0x80u) << 24;
  const uint32_t exp = (q >> 3) & 0xfu;
  const uint32_t mant = q & 0x7u;
  if (exp == 0xf && mant == 0x7) return std::bit_cast<float>(kCanonicalNaNBits);
  if (exp == 0) {
    // Subnormal: mant * 2^-9, exact in fp32.
    const float magnitude = static_cast<float>(mant) * 0x1p-9f;
    return sign ? -magnitude : magnitude;
  }
  // Rebias the exponent from 7 to 127 and widen the 3-bit mantissa.
  return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (mant << 20));
}

constexpr std::array<float, 256> MakeE4M3Table() {
  std::array<float, 256> table{};
  for (int q = 0; q < 256; ++q) table[q] = E4M3ToFloatUncached(static_cast<uint8_t>(q));
  return table;
}

constexpr std::array<float, 256> kE4M3Table = MakeE4M3Table();

void DecodeInt8(const uint8_t* __restrict q, float scale, float* __restrict out) {
  for (int64_t i = 0; i < kCodecBlockElems; ++i) {
    out[i] = ScaleCode(static_cast<float>(static_cast<int8_t>(q[i])), scale);
  }
}

void DecodeE4M3(const uint8_t* __restrict q, float scale, float* __restrict out) {
  for (int64_t i = 0; i < kCodecBlockElems; ++i) out[i] = ScaleCode(kE4M3Table[q[i]], scale);
}

}  // namespace

uint8_t FloatToE4M3(float x) { return RoundToE4M3(x); }

float E4M3ToFloat(uint8_t q) { return kE4M3Table[q]; }

void EncodeBlock(Codec codec, const float* v, uint8_t* q, float* scale) {
  const uint32_t amax_bits = BlockAmaxBits(v);
  const bool int8 = codec == Codec::kInt8Block;
  if (amax_bits >= kInfBits) {
    std::memset(q, int8 ? kInt8PoisonByte : kE4M3NaNByte, kCodecBlockElems);
    *scale = BitsToFloat(kCanonicalNaNBits);
    return;
  }
  switch (codec) {
    case Codec::kInt8Block:
      *scale = BlockScale(amax_bits, kInt8Max);
      EncodeInt8(v, *scale, q);
      return;
    case Codec::kE4M3Block:
      *scale = BlockScale(amax_bits, kE4M3Max);
      EncodeE4M3(v, *scale, q);
      return;
    case Codec::kPlain:
      break;
  }
  std::abort();  // not a block codec: a caller bug
}

void DecodeBlock(Codec codec, const uint8_t* q, float scale, float* out) {
  switch (codec) {
    case Codec::kInt8Block:
      DecodeInt8(q, scale, out);
      return;
    case Codec::kE4M3Block:
      DecodeE4M3(q, scale, out);
      return;
    case Codec::kPlain:
      break;
  }
  std::abort();  // not a block codec: a caller bug
}

}  // namespace dmalab
