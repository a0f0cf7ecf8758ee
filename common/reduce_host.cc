#include "common/reduce_host.h"

#include <vector>

#include "absl/strings/str_format.h"

namespace dmalab {

absl::Status ValidateReduce(DType dtype, const Operand& dst, absl::Span<const Operand> terms,
                            int64_t elems) {
  if (terms.empty()) return absl::InvalidArgumentError("reduce: terms is empty; need at least 1");
  if (elems <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("reduce: elems is %d; must be > 0", elems));
  }
  auto check = [&](const Operand& op, std::string_view what) -> absl::Status {
    if (op.codec != Codec::kPlain && dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce: %s has codec %s with dtype %s; block codecs need bf16", what,
          CodecName(op.codec), DTypeName(dtype)));
    }
    if (op.codec != Codec::kPlain && elems % 128 != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce: %s has codec %s and elems is %d; must be divisible by 128", what,
          CodecName(op.codec), elems));
    }
    const uint64_t need = EncodedBytes(op.codec, dtype, elems);
    if (op.mem.bytes != need) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce: %s is %d bytes; %d elems of %s as %s need %d", what, op.mem.bytes, elems,
          DTypeName(dtype), CodecName(op.codec), need));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check(dst, "dst"); !s.ok()) return s;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (absl::Status s = check(terms[i], absl::StrFormat("terms[%d]", i)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReduceHost(DType dtype, uint8_t* dst, Codec dst_codec,
                        absl::Span<const HostOperand> terms, int64_t elems) {
  if (dst_codec != Codec::kPlain) {
    return absl::UnimplementedError("reduce: block codecs are not built yet");
  }
  for (const HostOperand& t : terms) {
    if (t.codec != Codec::kPlain) {
      return absl::UnimplementedError("reduce: block codecs are not built yet");
    }
  }
  for (int64_t i = 0; i < elems; ++i) {
    float acc = LoadAsFloat(dtype, terms[0].data, i);
    for (size_t t = 1; t < terms.size(); ++t) acc = acc + LoadAsFloat(dtype, terms[t].data, i);
    StoreFromFloat(dtype, dst, i, acc);
  }
  return absl::OkStatus();
}

}  // namespace dmalab
