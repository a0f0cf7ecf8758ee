// Element arithmetic of the Reduce kernel, written once for the GPU and the host.
//
// The kernel must equal ReduceHost (common/core/reduce_host.h) bit for bit, NaNs included. CUDA's
// own conversions do not: __float2bfloat16_rn and the cvt instructions return the canonical NaN
// 0x7fff, and GPU fp32 adds return the canonical NaN 0x7fffffff, while the host reference keeps
// NaN payloads and signs. So conversions are the integer code of common/core/float_bits.h, which
// the host reference uses too, and the add reproduces the NaN rules of the host's SSE adds (see
// HostOrderAdd). Compiled by g++ as well, so that tests/hw/element_math_test.cc checks this very
// code against the host reference on a machine without a GPU.
#ifndef DMALAB_HW_ELEMENT_MATH_H_
#define DMALAB_HW_ELEMENT_MATH_H_

#include "common/core/float_bits.h"

namespace dmalab::element_math {

using float_bits::Bits;
using float_bits::DecodeBF16;
using float_bits::DecodeFP16;
using float_bits::EncodeBF16;
using float_bits::EncodeFP16;
using float_bits::FromBits;
using float_bits::IsNanBits;

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
