// Host reference of Device::Reduce: the exact arithmetic every device must reproduce.
//
// For each element: decode every term to fp32, sum left to right in fp32 (acc = t0; acc = acc +
// t1; ...; no fused multiply-add), encode the sum into dst (round to nearest even for plain
// types; block codecs as in common/core/codec.h).
#ifndef DMALAB_COMMON_CORE_REDUCE_HOST_H_
#define DMALAB_COMMON_CORE_REDUCE_HOST_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dmalab/device.h"

namespace dmalab {

// A host-memory operand of ReduceHost.
struct HostOperand {
  const uint8_t* data = nullptr;
  Codec codec = Codec::kPlain;
};

// Checks what Device::Reduce requires of its arguments (shared by all devices): at least one
// term, block codecs only with bf16 and elems divisible by 128, every operand sized for elems, a
// term at dst's address only with dst's codec.
absl::Status ValidateReduce(DType dtype, const Operand& dst, absl::Span<const Operand> terms,
                            int64_t elems);

// dst = encode(sum of decoded terms), a block (128 elements) at a time for block codecs; see
// common/core/codec.h for the block arithmetic and layout. dst may alias a term exactly (same
// address and codec: in place); an aliased term of another codec, or a block codec without bf16
// and whole blocks, is an InvalidArgument error.
absl::Status ReduceHost(DType dtype, uint8_t* dst, Codec dst_codec,
                        absl::Span<const HostOperand> terms, int64_t elems);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_REDUCE_HOST_H_
