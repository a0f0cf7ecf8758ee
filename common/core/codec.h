// Host reference block codecs (INT8 and OCP FP8 E4M3FN): the exact arithmetic the CUDA quantize
// and dequantize kernels must reproduce bit for bit (docs/design.md section 3, "Block format").
//
// A block is 128 consecutive values with one fp32 scale. Every step below is one IEEE 754
// binary32 operation, rounded to nearest even, with subnormals kept (no flush-to-zero: the
// default on x86-64 SSE and for CUDA without -ftz=true / --use_fast_math).
//
// Encode (both codecs):
//   amax_bits = max_i (bits(v[i]) & 0x7fffffff)   // |v[i]| as integers: NaN > inf > finite
//   if amax_bits >= 0x7f800000: non-finite block, see below.
//   amax  = float(amax_bits)
//   scale = amax / 127.0f      (INT8)    one fp32 division
//   scale = amax / 448.0f      (E4M3)    one fp32 division
//   if scale == 0.0f: scale = 1.0f       // all-zero block, or amax < 63.5 (INT8) / 224 (E4M3)
//                                        // times 2^-149, where the division underflows to 0
//   x[i] = v[i] / scale        one fp32 division per value: a true division, never a
//                              multiplication by a reciprocal (CUDA: __fdiv_rn or `/` with
//                              -prec-div=true, the default)
//   INT8: q[i] = int8(min(max(rint(x[i]), -127), 127))   rint = nearest, ties to even (CUDA:
//              __float2int_rn, then clamp; clamping first gives the same). |x[i]| < 2^22 always
//              (below 1.5 * 127 even with a subnormal scale). -128 (0x80) is never written for
//              a finite block.
//   E4M3: q[i] = FloatToE4M3(x[i])   nearest, ties to even, |x| > 448 saturates to +-448
//              (CUDA: __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)).
//
// Decode (both codecs):
//   out[i] = float(q[i]) * scale      INT8: the int8 value; E4M3: E4M3ToFloat(q[i]).
//                                     One fp32 multiply (CUDA: __fmul_rn, so that it is never
//                                     contracted with a following add into an FMA). A NaN
//                                     result is written as the canonical quiet NaN 0x7fc00000.
//   On the host no fused multiply-add can arise: DecodeBlock is compiled in codec.cc and only
//   stores products; ReduceHost adds them in another translation unit (no LTO), so the result
//   does not depend on -ffp-contract or -mfma.
//
// Non-finite blocks: if any value of a block is NaN or +-inf, the whole block is poisoned:
// scale = NaN (bits 0x7fc00000) and every value byte is a code no finite block uses (INT8 0x80,
// i.e. -128; E4M3 0x7f, its NaN). Every value of such a block decodes to NaN 0x7fc00000; the
// sign of an infinity is not kept. Deterministic on every device, and it keeps a NaN or an
// overflow visible after the all-reduce instead of hiding it in a finite block.
//
// Zeros: INT8 has one zero; every value that rounds to 0 (-0.0 included) decodes to +0.0.
// E4M3 keeps the sign: -0.0, and negative values that round to zero, encode as 0x80 and decode
// to -0.0. An all-zero block (of +0.0 and/or -0.0) has scale 1.0f.
//
// Subnormal inputs (bf16 or fp32) follow the same sequence. When amax is small enough that
// `scale` is an fp32 subnormal, scale carries fewer than 24 significant bits, so amax / scale can
// exceed 127 or 448 and is clamped; the error bound below then grows only by the fp32 subnormal
// spacing (2^-149) of the final product.
//
// Error bound for finite blocks (|v| <= amax), checked exhaustively over all bf16 values by
// tests/common/codec_test.cc, with h the half step in units of the scale:
//   |decode - v| <= scale * h * (1 + 2^-20) + 2^-22 * |v| + 2^-149
//   INT8: h = 1/2.  E4M3: h(y) = 2^(floor(log2 y) - 4) for y = |v| / scale >= 2^-6, 2^-10 below.
// The 2^-22 |v| term is the rounding of v / scale and of the decode multiply (a tie that
// v / scale rounds onto then goes the far way), the 2^-149 one the fp32 subnormal spacing.
// Measured worst case: 1 + 3.8e-6 half steps (INT8), 1 + 2.1e-6 (E4M3).
//
// Segment layout: an encoded segment of `elems` values (elems divisible by 128) is `elems`
// value bytes (block b at [128 b, 128 b + 128)), followed by elems / 128 fp32 scales, little
// endian (block b's at elems + 4 b): EncodedBytes(codec, DType::kBF16, elems) = elems +
// elems / 128 * 4, i.e. 132 bytes per 128 values.
#ifndef DMALAB_COMMON_CORE_CODEC_H_
#define DMALAB_COMMON_CORE_CODEC_H_

#include <bit>
#include <cstdint>
#include <cstring>

#include "dmalab/device.h"

namespace dmalab {

static_assert(std::endian::native == std::endian::little,
              "block scales are stored little endian by memcpy");

// Values per block of a block codec.
inline constexpr int64_t kCodecBlockElems = 128;

// Encodes 128 values `v` of a block into 128 bytes `q` and the block's `scale`, as described
// above. `codec` must be a block codec; `v` and `q` must not overlap.
void EncodeBlock(Codec codec, const float* v, uint8_t* q, float* scale);

// Decodes 128 bytes `q` with `scale` into 128 fp32 values `out`. `codec` must be a block codec;
// `q` and `out` must not overlap.
void DecodeBlock(Codec codec, const uint8_t* q, float scale, float* out);

// fp32 to E4M3FN: round to nearest even, |x| > 448 (infinities included) saturates to +-448
// (0x7e / 0xfe), the sign of zero is kept, NaN becomes 0x7f.
uint8_t FloatToE4M3(float x);

// E4M3FN to fp32, exact. 0x7f and 0xff (NaN) give the quiet NaN 0x7fc00000.
float E4M3ToFloat(uint8_t q);

// The scale of block `block` in an encoded segment of `elems` values.
inline float LoadBlockScale(const uint8_t* segment, int64_t elems, int64_t block) {
  float scale;
  std::memcpy(&scale, segment + elems + 4 * block, sizeof(scale));
  return scale;
}

// Stores the scale of block `block` in an encoded segment of `elems` values.
inline void StoreBlockScale(uint8_t* segment, int64_t elems, int64_t block, float scale) {
  std::memcpy(segment + elems + 4 * block, &scale, sizeof(scale));
}

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_CODEC_H_
