#include "common/plugin/spmd_process.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

absl::Status RankDevice::Mine(int rank, std::string_view what) const {
  if (rank == rank_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: rank %d; this process runs rank %d of %d (the others' calls are their own processes')",
      what, rank, rank_, world_));
}

absl::StatusOr<MemRef> RankDevice::Down(const MemRef& m, std::string_view what) const {
  DMALAB_RETURN_IF_ERROR(Mine(m.rank, what));
  return Relabel(m, 0);
}

absl::StatusOr<MemRef> RankDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "allocate"));
  DMALAB_ASSIGN_OR_RETURN(const MemRef m, local_->Allocate(0, bytes, tag));
  return Up(m);
}

absl::Status RankDevice::Free(const MemRef& allocation) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef m, Down(allocation, "free"));
  return local_->Free(m);
}

StreamId RankDevice::ComputeStream(int rank) {
  return rank == rank_ ? local_->ComputeStream(0) : StreamId(-1);
}

absl::StatusOr<StreamId> RankDevice::CreateStream(int rank, StreamKind kind,
                                                  std::string_view name) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "create_stream"));
  return local_->CreateStream(0, kind, name);
}

absl::StatusOr<EventId> RankDevice::CreateEvent(int rank) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "create_event"));
  return local_->CreateEvent(0);
}

absl::Status RankDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                              std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef d, Down(dst, label));
  DMALAB_ASSIGN_OR_RETURN(const MemRef s, Down(src, label));
  return local_->Copy(stream, d, s, label);
}

absl::Status RankDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                absl::Span<const Operand> terms, int64_t elems,
                                std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef d, Down(dst.mem, label));
  std::vector<Operand> local_terms;
  for (const Operand& t : terms) {
    DMALAB_ASSIGN_OR_RETURN(const MemRef m, Down(t.mem, label));
    local_terms.push_back(Operand{m, t.codec});
  }
  return local_->Reduce(stream, dtype, Operand{d, dst.codec}, local_terms, elems, label);
}

absl::Status RankDevice::SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                    std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef c, Down(counter, label));
  DMALAB_ASSIGN_OR_RETURN(const MemRef f, Down(peer_flag, label));
  return local_->SignalFlag(stream, c, f, label);
}

absl::Status RankDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                  std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef e, Down(expected, label));
  DMALAB_ASSIGN_OR_RETURN(const MemRef f, Down(flag, label));
  return local_->WaitFlag(stream, e, f, label);
}

absl::Status RankDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                    std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef d, Down(dst, label));
  return local_->WriteValue(stream, d, value, label);
}

absl::Status RankDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                   std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef f, Down(flag, label));
  return local_->WaitValue(stream, f, value, label);
}

absl::Status RankDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef d, Down(dst, "write"));
  return local_->Write(d, bytes);
}

absl::Status RankDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef s, Down(src, "read"));
  return local_->Read(s, bytes);
}

absl::StatusOr<IpcHandle> RankDevice::ExportMemory(const MemRef& allocation) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef m, Down(allocation, "ipc_get_mem_handle"));
  return local_->ExportMemory(m);
}

absl::StatusOr<MemRef> RankDevice::OpenMemory(int rank, const IpcHandle& handle) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "ipc_open_mem_handle"));
  DMALAB_ASSIGN_OR_RETURN(const MemRef m, local_->OpenMemory(0, handle));
  return Up(m);
}

absl::Status RankDevice::CloseMemory(const MemRef& mapping) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef m, Down(mapping, "ipc_close_mem_handle"));
  return local_->CloseMemory(m);
}

absl::StatusOr<EventId> RankDevice::OpenEvent(int rank, const IpcHandle& handle) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "ipc_open_event_handle"));
  return local_->OpenEvent(0, handle);
}

absl::StatusOr<bool> RankDevice::RankIdle(int rank) {
  DMALAB_RETURN_IF_ERROR(Mine(rank, "rank_idle"));
  return local_->RankIdle(0);
}

absl::Status RankDevice::WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef d, Down(dst, "write"));
  return local_->WriteRank(d, bytes);
}

absl::Status RankDevice::ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) {
  DMALAB_ASSIGN_OR_RETURN(const MemRef s, Down(src, "read"));
  return local_->ReadRank(s, bytes);
}

void* RankDevice::NativePointer(const MemRef& mem) {
  absl::StatusOr<MemRef> m = Down(mem, "native_pointer");
  return m.ok() ? local_->NativePointer(*m) : nullptr;
}

}  // namespace dmalab
