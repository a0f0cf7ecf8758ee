#include "dmalab/device.h"

#include "common/core/enum_names.h"

namespace dmalab {

std::string_view StreamKindName(StreamKind kind) { return kStreamKinds.Name(kind); }

std::string_view CodecName(Codec codec) { return kCodecs.Name(codec); }

uint64_t EncodedBytes(Codec codec, DType dtype, int64_t elems) {
  if (codec == Codec::kPlain) return static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  // 128 one-byte values and one fp32 scale per block.
  return static_cast<uint64_t>(elems) + static_cast<uint64_t>((elems + 127) / 128) * 4;
}

}  // namespace dmalab
