#include "common/plugin/abi_convert.h"

#include "absl/strings/str_format.h"

namespace dmalab {

absl::StatusOr<DType> DTypeFromAbi(int32_t dtype) {
  switch (dtype) {
    case DMALAB_DTYPE_BF16:
      return DType::kBF16;
    case DMALAB_DTYPE_FP16:
      return DType::kFP16;
    case DMALAB_DTYPE_FP32:
      return DType::kFP32;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "dtype is %d; allowed: DMALAB_DTYPE_BF16 (0), DMALAB_DTYPE_FP16 (1), DMALAB_DTYPE_FP32 (2)",
      dtype));
}

int32_t DTypeToAbi(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return DMALAB_DTYPE_BF16;
    case DType::kFP16:
      return DMALAB_DTYPE_FP16;
    case DType::kFP32:
      return DMALAB_DTYPE_FP32;
  }
  return DMALAB_DTYPE_BF16;
}

absl::StatusOr<StreamKind> StreamKindFromAbi(int32_t kind) {
  switch (kind) {
    case DMALAB_STREAM_COMPUTE:
      return StreamKind::kCompute;
    case DMALAB_STREAM_COPY:
      return StreamKind::kCopy;
    case DMALAB_STREAM_FLAG:
      return StreamKind::kFlag;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "create_stream: kind is %d; allowed: DMALAB_STREAM_COMPUTE (0), DMALAB_STREAM_COPY (1), "
      "DMALAB_STREAM_FLAG (2)",
      kind));
}

dmalab_mem MemToAbi(const MemRef& m) {
  dmalab_mem out{};
  out.rank = m.rank;
  out.addr = m.addr;
  out.bytes = m.bytes;
  out.alloc_id = m.alloc_id;
  return out;
}

std::string LabelFromAbi(const char* label) { return label == nullptr ? "" : std::string(label); }

}  // namespace dmalab
