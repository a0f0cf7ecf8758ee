#include "dmalab/device.h"

#include <algorithm>
#include <vector>

#include "common/core/enum_names.h"
#include "common/core/host_buffer.h"
#include "common/core/status_macros.h"

namespace dmalab {

std::string_view StreamKindName(StreamKind kind) { return kStreamKinds.Name(kind); }

std::string_view CodecName(Codec codec) { return kCodecs.Name(codec); }

uint64_t EncodedBytes(Codec codec, DType dtype, int64_t elems) {
  if (codec == Codec::kPlain) return static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  // 128 one-byte values and one fp32 scale per block.
  return static_cast<uint64_t>(elems) + static_cast<uint64_t>((elems + 127) / 128) * 4;
}

absl::Status Device::ReadPieces(absl::Span<const MemRef> srcs, uint64_t piece_bytes,
                                PieceConsumer consume) {
  if (srcs.empty()) return absl::OkStatus();
  const uint64_t bytes = srcs[0].bytes;
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (srcs[i].bytes != bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "read in pieces: src %d is %d bytes, src 0 %d; must be equal", i, srcs[i].bytes, bytes));
    }
  }
  if (piece_bytes == 0) {
    return absl::InvalidArgumentError("read in pieces: the piece size must be positive");
  }
  return ReadPiecesChecked(srcs, bytes, std::min(piece_bytes, bytes), consume);
}

absl::Status Device::ReadPiecesChecked(absl::Span<const MemRef> srcs, uint64_t bytes,
                                       uint64_t piece_bytes, PieceConsumer consume) {
  std::vector<HostBytes> whole(srcs.size());
  size_t read = 0;
  absl::Status failed;
  for (; read < srcs.size(); ++read) {
    DMALAB_RETURN_IF_ERROR(whole[read].Resize(bytes));
    failed = Read(srcs[read], whole[read].span());
    if (!failed.ok()) break;
  }
  DMALAB_RETURN_IF_ERROR(HandOverPieces(
      read, bytes, piece_bytes,
      [&](size_t i, uint64_t offset, uint64_t n) -> absl::StatusOr<absl::Span<const uint8_t>> {
        return absl::MakeConstSpan(whole[i].data() + offset, n);
      },
      consume));
  return failed;
}

absl::Status Device::HandOverPieces(
    size_t count, uint64_t bytes, uint64_t piece_bytes,
    absl::FunctionRef<absl::StatusOr<absl::Span<const uint8_t>>(size_t, uint64_t, uint64_t)> piece,
    PieceConsumer consume) {
  std::vector<absl::Span<const uint8_t>> pieces(count);
  for (uint64_t offset = 0; count > 0 && offset < bytes; offset += piece_bytes) {
    const uint64_t n = std::min(piece_bytes, bytes - offset);
    for (size_t i = 0; i < count; ++i) {
      DMALAB_ASSIGN_OR_RETURN(pieces[i], piece(i, offset, n));
    }
    DMALAB_RETURN_IF_ERROR(consume(offset, pieces));
  }
  return absl::OkStatus();
}

}  // namespace dmalab
