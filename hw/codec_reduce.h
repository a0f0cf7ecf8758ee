// One lane's share of the block-codec Reduce (kernels::BlockReduceArgs), written once for the
// GPU kernel (hw/codec_kernels.cu) and its host emulation (tests/hw/codec_math_test.cc).
//
// A block of 128 values is reduced by 32 lanes, lane l owning values [4 l, 4 l + 4):
//   1. LoadLaneSums: decode the lane's 4 values of every term to fp32 and sum them left to
//      right (element_math::HostOrderAdd), as ReduceHost does.
//   2. The block's amax: the unsigned maximum over all lanes of LaneAmaxBits (a warp reduction
//      on the GPU; order-free, so deterministic).
//   3. StoreLane: encode the lane's sums into dst with the block's scale (the same division in
//      every lane) and, in lane 0, store the scale.
// In place (dst is a term, same codec, same bytes): a lane writes only the value bytes it read
// itself in step 1, and lane 0 writes a block-coded dst's scale only after step 2, which needs
// every lane's sums and hence every lane's read of the old scale. Partial overlaps are refused
// by CudaDevice.
#ifndef DMALAB_HW_CODEC_REDUCE_H_
#define DMALAB_HW_CODEC_REDUCE_H_

#include <cstdint>
#include <cstring>

#include "hw/codec_math.h"
#include "hw/element_math.h"
#include "hw/kernels.h"

namespace dmalab::codec_reduce {

namespace cm = ::dmalab::codec_math;
namespace em = ::dmalab::element_math;

inline constexpr int kBlockElems = 128;
inline constexpr int kLanes = 32;
inline constexpr int kValuesPerLane = kBlockElems / kLanes;

// Little-endian loads and stores of 4 and 8 bytes: one access when kAligned (the address is a
// multiple of the size), byte by byte otherwise. On the host, memcpy either way.
template <bool kAligned>
DMALAB_HD uint32_t Load32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAligned) {
    return *reinterpret_cast<const uint32_t*>(p);
  } else {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }
#else
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

template <bool kAligned>
DMALAB_HD void Store32(uint8_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAligned) {
    *reinterpret_cast<uint32_t*>(p) = v;
  } else {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
#else
  std::memcpy(p, &v, sizeof(v));
#endif
}

template <bool kAligned>
DMALAB_HD uint64_t Load64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAligned) return *reinterpret_cast<const uint64_t*>(p);
#endif
  return static_cast<uint64_t>(Load32<kAligned>(p)) |
         (static_cast<uint64_t>(Load32<kAligned>(p + 4)) << 32);
}

template <bool kAligned>
DMALAB_HD void Store64(uint8_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  if constexpr (kAligned) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
#endif
  Store32<kAligned>(p, static_cast<uint32_t>(v));
  Store32<kAligned>(p + 4, static_cast<uint32_t>(v >> 32));
}

// Where a lane's values and its block's scale lie in an operand of `elems` values.
DMALAB_HD int64_t LaneFirst(int64_t block, int lane) {
  return block * kBlockElems + static_cast<int64_t>(lane) * kValuesPerLane;
}

DMALAB_HD int64_t ScaleOffset(int64_t elems, int64_t block) { return elems + 4 * block; }

// A lane's 4 value codes (little endian, value j in byte j) and its block's scale.
struct LaneCodes {
  uint32_t codes = 0;
  float scale = 1.0f;
};

// Decodes the lane's 4 values of a block-coded operand.
DMALAB_HD void DecodeLaneCodes(kernels::OperandCodec codec, LaneCodes in,
                               float out[kValuesPerLane]) {
  const bool int8 = codec == kernels::OperandCodec::kInt8Block;
  for (int j = 0; j < kValuesPerLane; ++j) {
    const uint8_t q = static_cast<uint8_t>(in.codes >> (8 * j));
    out[j] = int8 ? cm::DecodeInt8(q, in.scale) : cm::DecodeE4M3(q, in.scale);
  }
}

// Encodes the lane's 4 values into a block-coded operand, given the amax of the whole block
// (the maximum of LaneAmaxBits over its lanes): the block's scale and the lane's codes.
DMALAB_HD LaneCodes EncodeLaneCodes(kernels::OperandCodec codec, const float v[kValuesPerLane],
                                    uint32_t block_amax_bits) {
  const bool int8 = codec == kernels::OperandCodec::kInt8Block;
  LaneCodes out;
  if (cm::IsNonFiniteAmax(block_amax_bits)) {
    out.codes = (int8 ? cm::kInt8PoisonByte : cm::kE4M3PoisonByte) * 0x01010101u;
    out.scale = em::FromBits(cm::kCanonicalNaNBits);
    return out;
  }
  out.scale = cm::BlockScale(block_amax_bits, int8 ? cm::kInt8MaxCode : cm::kE4M3MaxCode);
  for (int j = 0; j < kValuesPerLane; ++j) {
    const uint8_t q = int8 ? cm::QuantizeInt8(v[j], out.scale) : cm::QuantizeE4M3(v[j], out.scale);
    out.codes |= static_cast<uint32_t>(q) << (8 * j);
  }
  return out;
}

// The largest |v| of the lane's values as fp32 bits.
DMALAB_HD uint32_t LaneAmaxBits(const float v[kValuesPerLane]) {
  uint32_t amax = 0;
  for (int j = 0; j < kValuesPerLane; ++j) amax = cm::MaxBits(amax, cm::AbsBits(v[j]));
  return amax;
}

// Decodes the lane's 4 values of one operand to fp32.
template <bool kAligned>
DMALAB_HD void DecodeLane(const uint8_t* data, kernels::OperandCodec codec, int64_t elems,
                          int64_t block, int lane, float out[kValuesPerLane]) {
  const int64_t first = LaneFirst(block, lane);
  if (codec == kernels::OperandCodec::kPlainBF16) {
    const uint64_t halves = Load64<kAligned>(data + 2 * first);
    for (int j = 0; j < kValuesPerLane; ++j) {
      out[j] = em::DecodeBF16(static_cast<uint16_t>(halves >> (16 * j)));
    }
    return;
  }
  LaneCodes in;
  in.codes = Load32<kAligned>(data + first);
  in.scale = em::FromBits(Load32<kAligned>(data + ScaleOffset(elems, block)));
  DecodeLaneCodes(codec, in, out);
}

// Step 1: sums[j] = decode(terms[0]) + ... + decode(terms[num_terms - 1]) at value j of the
// lane, left to right.
template <bool kAligned>
DMALAB_HD void LoadLaneSums(const kernels::BlockReduceArgs& a, int64_t block, int lane,
                            float sums[kValuesPerLane]) {
  DecodeLane<kAligned>(static_cast<const uint8_t*>(a.terms[0]), a.term_codecs[0], a.elems, block,
                       lane, sums);
  for (int t = 1; t < a.num_terms; ++t) {
    float term[kValuesPerLane];
    DecodeLane<kAligned>(static_cast<const uint8_t*>(a.terms[t]), a.term_codecs[t], a.elems, block,
                         lane, term);
    for (int j = 0; j < kValuesPerLane; ++j) sums[j] = em::HostOrderAdd(sums[j], term[j]);
  }
}

// Step 3: encodes the lane's sums into dst; `block_amax_bits` (the maximum of LaneAmaxBits over
// the block's lanes) is used only by a block-coded dst.
template <bool kAligned>
DMALAB_HD void StoreLane(const kernels::BlockReduceArgs& a, int64_t block, int lane,
                         const float sums[kValuesPerLane], uint32_t block_amax_bits) {
  uint8_t* dst = static_cast<uint8_t*>(a.dst);
  const int64_t first = LaneFirst(block, lane);
  if (a.dst_codec == kernels::OperandCodec::kPlainBF16) {
    uint64_t halves = 0;
    for (int j = 0; j < kValuesPerLane; ++j) {
      halves |= static_cast<uint64_t>(em::EncodeBF16(sums[j])) << (16 * j);
    }
    Store64<kAligned>(dst + 2 * first, halves);
    return;
  }
  const LaneCodes out = EncodeLaneCodes(a.dst_codec, sums, block_amax_bits);
  Store32<kAligned>(dst + first, out.codes);
  if (lane == 0) Store32<kAligned>(dst + ScaleOffset(a.elems, block), em::Bits(out.scale));
}

}  // namespace dmalab::codec_reduce

#endif  // DMALAB_HW_CODEC_REDUCE_H_
