#include "common/plugin/spmd_process.h"

#include <vector>

#include "absl/strings/str_format.h"

namespace dmalab {

absl::Status RankDevice::Mine(int rank, std::string_view what) const {
  if (rank == rank_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: rank %d; this process runs rank %d of %d (the others' calls are their own processes')",
      what, rank, rank_, world_));
}

absl::StatusOr<MemRef> RankDevice::Down(const MemRef& m, std::string_view what) const {
  if (absl::Status s = Mine(m.rank, what); !s.ok()) return s;
  return Relabel(m, 0);
}

absl::StatusOr<MemRef> RankDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  if (absl::Status s = Mine(rank, "allocate"); !s.ok()) return s;
  absl::StatusOr<MemRef> m = local_->Allocate(0, bytes, tag);
  if (!m.ok()) return m.status();
  return Up(*m);
}

absl::Status RankDevice::Free(const MemRef& allocation) {
  absl::StatusOr<MemRef> m = Down(allocation, "free");
  if (!m.ok()) return m.status();
  return local_->Free(*m);
}

StreamId RankDevice::ComputeStream(int rank) {
  return rank == rank_ ? local_->ComputeStream(0) : StreamId(-1);
}

absl::StatusOr<StreamId> RankDevice::CreateStream(int rank, StreamKind kind,
                                                  std::string_view name) {
  if (absl::Status s = Mine(rank, "create_stream"); !s.ok()) return s;
  return local_->CreateStream(0, kind, name);
}

absl::StatusOr<EventId> RankDevice::CreateEvent(int rank) {
  if (absl::Status s = Mine(rank, "create_event"); !s.ok()) return s;
  return local_->CreateEvent(0);
}

absl::Status RankDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                              std::string_view label) {
  absl::StatusOr<MemRef> d = Down(dst, label);
  if (!d.ok()) return d.status();
  absl::StatusOr<MemRef> s = Down(src, label);
  if (!s.ok()) return s.status();
  return local_->Copy(stream, *d, *s, label);
}

absl::Status RankDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                absl::Span<const Operand> terms, int64_t elems,
                                std::string_view label) {
  absl::StatusOr<MemRef> d = Down(dst.mem, label);
  if (!d.ok()) return d.status();
  std::vector<Operand> local_terms;
  for (const Operand& t : terms) {
    absl::StatusOr<MemRef> m = Down(t.mem, label);
    if (!m.ok()) return m.status();
    local_terms.push_back(Operand{*m, t.codec});
  }
  return local_->Reduce(stream, dtype, Operand{*d, dst.codec}, local_terms, elems, label);
}

absl::Status RankDevice::SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                    std::string_view label) {
  absl::StatusOr<MemRef> c = Down(counter, label);
  if (!c.ok()) return c.status();
  absl::StatusOr<MemRef> f = Down(peer_flag, label);
  if (!f.ok()) return f.status();
  return local_->SignalFlag(stream, *c, *f, label);
}

absl::Status RankDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                  std::string_view label) {
  absl::StatusOr<MemRef> e = Down(expected, label);
  if (!e.ok()) return e.status();
  absl::StatusOr<MemRef> f = Down(flag, label);
  if (!f.ok()) return f.status();
  return local_->WaitFlag(stream, *e, *f, label);
}

absl::Status RankDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                    std::string_view label) {
  absl::StatusOr<MemRef> d = Down(dst, label);
  if (!d.ok()) return d.status();
  return local_->WriteValue(stream, *d, value, label);
}

absl::Status RankDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                   std::string_view label) {
  absl::StatusOr<MemRef> f = Down(flag, label);
  if (!f.ok()) return f.status();
  return local_->WaitValue(stream, *f, value, label);
}

absl::Status RankDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  absl::StatusOr<MemRef> d = Down(dst, "write");
  if (!d.ok()) return d.status();
  return local_->Write(*d, bytes);
}

absl::Status RankDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  absl::StatusOr<MemRef> s = Down(src, "read");
  if (!s.ok()) return s.status();
  return local_->Read(*s, bytes);
}

absl::StatusOr<IpcHandle> RankDevice::ExportMemory(const MemRef& allocation) {
  absl::StatusOr<MemRef> m = Down(allocation, "ipc_get_mem_handle");
  if (!m.ok()) return m.status();
  return local_->ExportMemory(*m);
}

absl::StatusOr<MemRef> RankDevice::OpenMemory(int rank, const IpcHandle& handle) {
  if (absl::Status s = Mine(rank, "ipc_open_mem_handle"); !s.ok()) return s;
  absl::StatusOr<MemRef> m = local_->OpenMemory(0, handle);
  if (!m.ok()) return m.status();
  return Up(*m);
}

absl::Status RankDevice::CloseMemory(const MemRef& mapping) {
  absl::StatusOr<MemRef> m = Down(mapping, "ipc_close_mem_handle");
  if (!m.ok()) return m.status();
  return local_->CloseMemory(*m);
}

absl::StatusOr<EventId> RankDevice::OpenEvent(int rank, const IpcHandle& handle) {
  if (absl::Status s = Mine(rank, "ipc_open_event_handle"); !s.ok()) return s;
  return local_->OpenEvent(0, handle);
}

absl::StatusOr<bool> RankDevice::RankIdle(int rank) {
  if (absl::Status s = Mine(rank, "rank_idle"); !s.ok()) return s;
  return local_->RankIdle(0);
}

absl::Status RankDevice::WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  absl::StatusOr<MemRef> d = Down(dst, "write");
  if (!d.ok()) return d.status();
  return local_->WriteRank(*d, bytes);
}

absl::Status RankDevice::ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) {
  absl::StatusOr<MemRef> s = Down(src, "read");
  if (!s.ok()) return s.status();
  return local_->ReadRank(*s, bytes);
}

void* RankDevice::NativePointer(const MemRef& mem) {
  absl::StatusOr<MemRef> m = Down(mem, "native_pointer");
  return m.ok() ? local_->NativePointer(*m) : nullptr;
}

}  // namespace dmalab
