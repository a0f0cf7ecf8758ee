#include "dmalab/device.h"

namespace dmalab {

std::string_view StreamKindName(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kCopy:
      return "copy";
    case StreamKind::kFlag:
      return "flag";
  }
  return "?";
}

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kPlain:
      return "plain";
    case Codec::kInt8Block:
      return "int8-block";
    case Codec::kE4M3Block:
      return "e4m3-block";
  }
  return "?";
}

uint64_t EncodedBytes(Codec codec, DType dtype, int64_t elems) {
  if (codec == Codec::kPlain) return static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  // 128 one-byte values and one fp32 scale per block.
  return static_cast<uint64_t>(elems) + static_cast<uint64_t>((elems + 127) / 128) * 4;
}

}  // namespace dmalab
