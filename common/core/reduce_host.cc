#include "common/core/reduce_host.h"

#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "common/core/codec.h"
#include "common/core/dtype.h"
#include "common/core/host_simd.h"
#include "common/core/status_macros.h"

namespace dmalab {

namespace {

constexpr int64_t kChunkElems = kCodecBlockElems;

// One chunk of a plain buffer of `dtype` (at `data`), widened exactly to fp32. Fixed trip counts
// and __restrict let GCC vectorize these loops at -O2.
[[gnu::always_inline]] inline void LoadPlainChunk(DType dtype, const uint8_t* __restrict data,
                                                  float* __restrict out) {
  switch (dtype) {
    case DType::kBF16:
      for (int64_t i = 0; i < kChunkElems; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, sizeof(h));
        out[i] = BF16ToFloat(h);
      }
      return;
    case DType::kFP16:
      for (int64_t i = 0; i < kChunkElems; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, sizeof(h));
        out[i] = FP16ToFloat(h);
      }
      return;
    case DType::kFP32:
      std::memcpy(out, data, 4 * kChunkElems);
      return;
  }
}

// Rounds one chunk to `dtype` (nearest even) into a plain buffer at `data`.
[[gnu::always_inline]] inline void StorePlainChunk(DType dtype, const float* __restrict v,
                                                   uint8_t* __restrict data) {
  switch (dtype) {
    case DType::kBF16:
      for (int64_t i = 0; i < kChunkElems; ++i) {
        const uint16_t h = FloatToBF16(v[i]);
        std::memcpy(data + 2 * i, &h, sizeof(h));
      }
      return;
    case DType::kFP16:
      for (int64_t i = 0; i < kChunkElems; ++i) {
        const uint16_t h = FloatToFP16(v[i]);
        std::memcpy(data + 2 * i, &h, sizeof(h));
      }
      return;
    case DType::kFP32:
      std::memcpy(data, v, 4 * kChunkElems);
      return;
  }
}

// Decodes elements [first, first + 128) of an operand of `elems` elements; for a block codec
// that is exactly block first / 128.
[[gnu::always_inline]] inline void LoadChunk(DType dtype, const HostOperand& op, int64_t elems,
                                             int64_t first, float* out) {
  if (op.codec == Codec::kPlain) {
    LoadPlainChunk(dtype, op.data + first * DTypeBytes(dtype), out);
    return;
  }
  DecodeBlock(op.codec, op.data + first, LoadBlockScale(op.data, elems, first / kChunkElems), out);
}

// Encodes 128 sums into elements [first, first + 128) of dst.
[[gnu::always_inline]] inline void StoreChunk(DType dtype, uint8_t* dst, Codec codec, int64_t elems,
                                              int64_t first, const float* sums) {
  if (codec == Codec::kPlain) {
    StorePlainChunk(dtype, sums, dst + first * DTypeBytes(dtype));
    return;
  }
  float scale;
  EncodeBlock(codec, sums, dst + first, &scale);
  StoreBlockScale(dst, elems, first / kChunkElems, scale);
}

[[gnu::always_inline]] inline void AddChunk(float* __restrict acc, const float* __restrict term) {
  for (int64_t i = 0; i < kChunkElems; ++i) acc[i] = acc[i] + term[i];
}

// One chunk (a block, for block codecs) at a time through fp32 buffers: every term of a chunk is
// read before dst's chunk is written, so dst may alias a term, and the dtype and codec dispatch
// happens once per chunk, not per element. Operands were checked.
[[gnu::always_inline]] inline void ReduceChunks(DType dtype, uint8_t* dst, Codec dst_codec,
                                                absl::Span<const HostOperand> terms,
                                                int64_t elems) {
  float acc[kChunkElems];
  float term[kChunkElems];
  const int64_t full_elems = elems - elems % kChunkElems;
  for (int64_t first = 0; first < full_elems; first += kChunkElems) {
    LoadChunk(dtype, terms[0], elems, first, acc);
    for (size_t t = 1; t < terms.size(); ++t) {
      LoadChunk(dtype, terms[t], elems, first, term);
      AddChunk(acc, term);
    }
    StoreChunk(dtype, dst, dst_codec, elems, first, acc);
  }
  // A partial last chunk has plain operands only (block codecs need whole blocks): element-wise,
  // with the same arithmetic.
  for (int64_t i = full_elems; i < elems; ++i) {
    float sum = LoadAsFloat(dtype, terms[0].data, i);
    for (size_t t = 1; t < terms.size(); ++t) sum = sum + LoadAsFloat(dtype, terms[t].data, i);
    StoreFromFloat(dtype, dst, i, sum);
  }
}

void ReduceChunksPortable(DType dtype, uint8_t* dst, Codec dst_codec,
                          absl::Span<const HostOperand> terms, int64_t elems) {
  ReduceChunks(dtype, dst, dst_codec, terms, elems);
}

#ifdef DMALAB_HOST_AVX512
DMALAB_AVX512_TARGET void ReduceChunksAvx512(DType dtype, uint8_t* dst, Codec dst_codec,
                                             absl::Span<const HostOperand> terms, int64_t elems) {
  ReduceChunks(dtype, dst, dst_codec, terms, elems);
}
#endif

// "dst" for -1, else "terms[i]": an operand's name in an error (made only for an error).
std::string OperandName(int term) {
  return term < 0 ? std::string("dst") : absl::StrFormat("terms[%d]", term);
}

// Checks what ReduceHost can do with one operand (`term` names it in the error: OperandName).
absl::Status CheckHostOperand(DType dtype, Codec codec, const uint8_t* data, const uint8_t* dst,
                              Codec dst_codec, int64_t elems, int term) {
  if (codec != Codec::kPlain && (dtype != DType::kBF16 || elems % kCodecBlockElems != 0)) {
    const std::string what = OperandName(term);
    return absl::InvalidArgumentError(
        absl::StrFormat("reduce: %s has codec %s with dtype %s and %d elems; block codecs need "
                        "bf16 and elems divisible by 128",
                        what, CodecName(codec), DTypeName(dtype), elems));
  }
  // Chunk by chunk in place is only correct when both sides share one layout.
  if (data == dst && codec != dst_codec) {
    const std::string what = OperandName(term);
    return absl::InvalidArgumentError(
        absl::StrFormat("reduce: %s aliases dst with codec %s, dst has codec %s; an aliased term "
                        "must have dst's codec",
                        what, CodecName(codec), CodecName(dst_codec)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateReduce(DType dtype, const Operand& dst, absl::Span<const Operand> terms,
                            int64_t elems) {
  if (terms.empty()) return absl::InvalidArgumentError("reduce: terms is empty; need at least 1");
  if (elems <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("reduce: elems is %d; must be > 0", elems));
  }
  auto check = [&](const Operand& op, int term) -> absl::Status {
    if (op.codec != Codec::kPlain && dtype != DType::kBF16) {
      const std::string what = OperandName(term);
      return absl::InvalidArgumentError(
          absl::StrFormat("reduce: %s has codec %s with dtype %s; block codecs need bf16", what,
                          CodecName(op.codec), DTypeName(dtype)));
    }
    if (op.codec != Codec::kPlain && elems % 128 != 0) {
      const std::string what = OperandName(term);
      return absl::InvalidArgumentError(
          absl::StrFormat("reduce: %s has codec %s and elems is %d; must be divisible by 128", what,
                          CodecName(op.codec), elems));
    }
    const uint64_t need = EncodedBytes(op.codec, dtype, elems);
    if (op.mem.bytes != need) {
      const std::string what = OperandName(term);
      return absl::InvalidArgumentError(
          absl::StrFormat("reduce: %s is %d bytes; %d elems of %s as %s need %d", what,
                          op.mem.bytes, elems, DTypeName(dtype), CodecName(op.codec), need));
    }
    return absl::OkStatus();
  };
  DMALAB_RETURN_IF_ERROR(check(dst, -1));
  for (size_t i = 0; i < terms.size(); ++i) {
    DMALAB_RETURN_IF_ERROR(check(terms[i], static_cast<int>(i)));
    // ReduceHost's rule, checked at enqueue so that a device never runs a reduce it cannot do.
    if (terms[i].mem.rank == dst.mem.rank && terms[i].mem.addr == dst.mem.addr &&
        terms[i].codec != dst.codec) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce: terms[%d] aliases dst with codec %s, dst has codec %s; an aliased term must "
          "have dst's codec",
          i, CodecName(terms[i].codec), CodecName(dst.codec)));
    }
  }
  return absl::OkStatus();
}

absl::Status ReduceHost(DType dtype, uint8_t* dst, Codec dst_codec,
                        absl::Span<const HostOperand> terms, int64_t elems) {
  if (terms.empty()) return absl::InvalidArgumentError("reduce: terms is empty; need at least 1");
  DMALAB_RETURN_IF_ERROR(CheckHostOperand(dtype, dst_codec, dst, dst, dst_codec, elems, -1));
  for (size_t i = 0; i < terms.size(); ++i) {
    DMALAB_RETURN_IF_ERROR(CheckHostOperand(dtype, terms[i].codec, terms[i].data, dst, dst_codec,
                                            elems, static_cast<int>(i)));
  }
#ifdef DMALAB_HOST_AVX512
  if (HostHasAvx512()) {
    ReduceChunksAvx512(dtype, dst, dst_codec, terms, elems);
    return absl::OkStatus();
  }
#endif
  ReduceChunksPortable(dtype, dst, dst_codec, terms, elems);
  return absl::OkStatus();
}

}  // namespace dmalab
