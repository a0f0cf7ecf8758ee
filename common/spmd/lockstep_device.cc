#include "common/spmd/lockstep_device.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// Stand-in addresses of peers' allocations: each rank's in a terabyte of its own, far from any
// real device address, 64 KiB apart.
constexpr uint64_t kStandInBase = 0x100000000000ull;
constexpr uint64_t kStandInSpan = uint64_t{1} << 40;
constexpr uint64_t kStandInAlign = 64 * 1024;

// What a broadcast of an owner's outcome carries: a status byte and, when it failed, why.
constexpr size_t kWhyBytes = 240;

}  // namespace

absl::Status AllGatherExchange::Broadcast(int root, absl::Span<uint8_t> data) {
  if (root < 0 || root >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("lockstep broadcast: root is %d; ranks are 0..%d", root, world_ - 1));
  }
  recv_.resize(data.size() * static_cast<size_t>(world_));
  DMALAB_RETURN_IF_ERROR(all_gather_(data, absl::MakeSpan(recv_)));
  if (!data.empty()) {
    std::memcpy(data.data(), recv_.data() + data.size() * static_cast<size_t>(root), data.size());
  }
  return absl::OkStatus();
}

LockstepDevice::LockstepDevice(Device* local, int local_rank, LockstepExchange* exchange,
                               std::string name)
    : local_(local),
      local_rank_(local_rank),
      exchange_(exchange),
      name_(std::move(name)),
      me_(exchange->rank()),
      world_(exchange->world()),
      next_stand_in_(world_),
      compute_(world_) {
  for (int r = 0; r < world_; ++r) {
    next_stand_in_[r] = kStandInBase + static_cast<uint64_t>(r) * kStandInSpan;
  }
}

absl::StatusOr<MemRef> LockstepDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate '%s': rank is %d; ranks are 0..%d", tag, rank, world_ - 1));
  }
  // The owner allocates and tells every instance whether it could.
  std::vector<uint8_t> outcome(1 + kWhyBytes, 0);
  absl::StatusOr<MemRef> mine;
  if (rank == me_) {
    mine = local_->Allocate(local_rank_, bytes, tag);
    if (mine.ok()) {
      outcome[0] = 1;
    } else {
      const std::string why(mine.status().message().substr(0, kWhyBytes - 1));
      std::memcpy(outcome.data() + 1, why.data(), why.size());
    }
  }
  DMALAB_RETURN_IF_ERROR(exchange_->Broadcast(rank, absl::MakeSpan(outcome)));
  if (rank == me_ && !mine.ok()) return mine.status();
  if (outcome[0] == 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate '%s' failed on rank %d: %s", tag, rank,
                        reinterpret_cast<const char*>(outcome.data() + 1)));
  }
  Allocation a;
  a.rank = rank;
  a.bytes = bytes;
  MemRef out;
  if (rank == me_) {
    a.base = mine->addr;
    a.local = *mine;
    out = MemRef{rank, mine->addr, bytes, mine->alloc_id, 0};
  } else {
    a.base = next_stand_in_[rank];
    next_stand_in_[rank] += (bytes + kStandInAlign - 1) / kStandInAlign * kStandInAlign;
    out = MemRef{rank, a.base, bytes, 0, 0};
  }
  allocations_[{rank, a.base}] = std::move(a);
  return out;
}

absl::Status LockstepDevice::Free(const MemRef& allocation) {
  auto it = allocations_.find({allocation.rank, allocation.addr});
  if (it == allocations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("free: 0x%x on rank %d is not an allocation of this lockstep device",
                        allocation.addr, allocation.rank));
  }
  Allocation a = std::move(it->second);
  allocations_.erase(it);
  absl::Status status;
  if (!a.openers.empty()) {
    // The peers close their mappings before the owner frees (every instance knows who opened).
    if (a.mapping.has_value()) status = local_->CloseMemory(*a.mapping);
    if (absl::Status s = exchange_->Barrier(); !s.ok() && status.ok()) status = s;
  }
  if (a.rank == me_) {
    if (absl::Status s = local_->Free(a.local); !s.ok() && status.ok()) status = s;
  }
  return status;
}

absl::StatusOr<MemRef> LockstepDevice::ToLocal(const MemRef& m) const {
  if (m.rank != me_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("to_local: [0x%x, +%d) is rank %d's memory; this instance runs rank %d",
                        m.addr, m.bytes, m.rank, me_));
  }
  return MemRef{local_rank_, m.addr, m.bytes, m.alloc_id, m.via_mapping};
}

absl::StatusOr<MemRef> LockstepDevice::Adopt(int rank, const MemRef& local) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("adopt: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  // The owner's address and size, and whether it had a fit allocation to give.
  struct Wire {
    uint64_t ok = 0, addr = 0, bytes = 0, alloc_id = 0;
  } wire;
  if (rank == me_) {
    const bool fit =
        local.rank == local_rank_ && local.bytes > 0 && !allocations_.contains({rank, local.addr});
    wire = Wire{fit ? 1u : 0u, local.addr, local.bytes, local.alloc_id};
  }
  DMALAB_RETURN_IF_ERROR(
      exchange_->Broadcast(rank, absl::MakeSpan(reinterpret_cast<uint8_t*>(&wire), sizeof(wire))));
  if (wire.ok == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("adopt: rank %d's [0x%x, +%d) is no fresh allocation of its local device",
                        rank, wire.addr, wire.bytes));
  }
  Allocation a;
  a.rank = rank;
  a.bytes = wire.bytes;
  MemRef out;
  if (rank == me_) {
    a.base = local.addr;
    a.local = local;
    out = MemRef{rank, local.addr, local.bytes, local.alloc_id, 0};
  } else {
    a.base = next_stand_in_[rank];
    next_stand_in_[rank] += (wire.bytes + kStandInAlign - 1) / kStandInAlign * kStandInAlign;
    out = MemRef{rank, a.base, wire.bytes, 0, 0};
  }
  allocations_[{rank, a.base}] = std::move(a);
  return out;
}

void LockstepDevice::HandOver(const MemRef& allocation) {
  auto it = allocations_.find({allocation.rank, allocation.addr});
  if (it != allocations_.end() && it->second.openers.empty()) allocations_.erase(it);
}

StreamId LockstepDevice::ComputeStream(int rank) {
  if (rank < 0 || rank >= world_) return StreamId(-1);
  if (!compute_[rank].has_value()) {
    StreamInfo info{rank, rank == me_ ? local_->ComputeStream(local_rank_) : StreamId(-1)};
    compute_[rank] = StreamId(static_cast<int32_t>(streams_.size()));
    streams_.push_back(info);
  }
  return *compute_[rank];
}

absl::StatusOr<StreamId> LockstepDevice::CreateStream(int rank, StreamKind kind,
                                                      std::string_view name) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create_stream '%s': rank is %d; ranks are 0..%d", name, rank, world_ - 1));
  }
  StreamInfo info{rank, StreamId(-1)};
  if (rank == me_) {
    DMALAB_ASSIGN_OR_RETURN(info.local, local_->CreateStream(local_rank_, kind, name));
  }
  streams_.push_back(info);
  return StreamId(static_cast<int32_t>(streams_.size() - 1));
}

absl::StatusOr<EventId> LockstepDevice::CreateEvent(int rank) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create_event: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  EventInfo info{rank, EventId(-1)};
  if (rank == me_) {
    DMALAB_ASSIGN_OR_RETURN(info.local, local_->CreateEvent(local_rank_));
  }
  events_.push_back(info);
  return EventId(static_cast<int32_t>(events_.size() - 1));
}

absl::StatusOr<const LockstepDevice::StreamInfo*> LockstepDevice::GetStream(
    StreamId stream, std::string_view what) const {
  if (stream.value() < 0 || stream.value() >= static_cast<int32_t>(streams_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: stream %d is not a stream of this device", what, stream));
  }
  return &streams_[stream.value()];
}

absl::Status LockstepDevice::RecordEvent(EventId event, StreamId stream) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "record_event"));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record_event: event %d is not an event of this device", event));
  }
  const EventInfo& e = events_[event.value()];
  if (e.rank != s->rank) {
    return absl::UnimplementedError(absl::StrFormat(
        "record_event: event of rank %d on a stream of rank %d; in lockstep an event stays "
        "within its rank (ranks meet through flags)",
        e.rank, s->rank));
  }
  if (e.rank != me_) return absl::OkStatus();
  return local_->RecordEvent(e.local, s->local);
}

absl::Status LockstepDevice::WaitEvent(StreamId stream, EventId event) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "wait_event"));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait_event: event %d is not an event of this device", event));
  }
  const EventInfo& e = events_[event.value()];
  if (e.rank != s->rank) {
    return absl::UnimplementedError(absl::StrFormat(
        "wait_event: event of rank %d waited on a stream of rank %d; in lockstep an event stays "
        "within its rank (ranks meet through flags)",
        e.rank, s->rank));
  }
  if (e.rank != me_) return absl::OkStatus();
  return local_->WaitEvent(s->local, e.local);
}

absl::StatusOr<LockstepDevice::Allocation*> LockstepDevice::Find(const MemRef& m,
                                                                 std::string_view what) {
  auto it = allocations_.upper_bound({m.rank, m.addr});
  if (it != allocations_.begin()) {
    --it;
    Allocation& a = it->second;
    if (a.rank == m.rank && m.addr >= a.base && m.addr + m.bytes <= a.base + a.bytes) return &a;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: [0x%x, 0x%x) on rank %d lies in no allocation made through this lockstep device "
      "(a rank reaches a peer's memory only if it was allocated in lockstep)",
      what, m.addr, m.addr + m.bytes, m.rank));
}

absl::Status LockstepDevice::Map(Allocation& a, int opener, std::string_view what) {
  // The owner exports; every instance takes part in the broadcast; the opener opens.
  std::vector<uint8_t> payload(1 + sizeof(IpcHandle::bytes) + kWhyBytes, 0);
  if (a.rank == me_) {
    absl::StatusOr<IpcHandle> h = local_->ExportMemory(a.local);
    if (h.ok()) {
      payload[0] = 1;
      std::memcpy(payload.data() + 1, h->bytes.data(), h->bytes.size());
    } else {
      const std::string why(h.status().message().substr(0, kWhyBytes - 1));
      std::memcpy(payload.data() + 1 + sizeof(IpcHandle::bytes), why.data(), why.size());
    }
  }
  DMALAB_RETURN_IF_ERROR(exchange_->Broadcast(a.rank, absl::MakeSpan(payload)));
  if (payload[0] == 0) {
    return absl::InternalError(absl::StrFormat(
        "%s: rank %d could not export its allocation for rank %d: %s", what, a.rank, opener,
        reinterpret_cast<const char*>(payload.data() + 1 + sizeof(IpcHandle::bytes))));
  }
  a.openers.insert(opener);
  if (opener != me_) return absl::OkStatus();
  IpcHandle h;
  std::memcpy(h.bytes.data(), payload.data() + 1, h.bytes.size());
  DMALAB_ASSIGN_OR_RETURN(a.mapping, local_->OpenMemory(local_rank_, h));
  return absl::OkStatus();
}

absl::Status LockstepDevice::Reach(int rank, const std::vector<const MemRef*>& mems,
                                   std::string_view what) {
  for (const MemRef* m : mems) {
    if (m->rank == rank) continue;
    DMALAB_ASSIGN_OR_RETURN(auto* a, Find(*m, what));
    if (!a->openers.contains(rank)) DMALAB_RETURN_IF_ERROR(Map(*a, rank, what));
  }
  return absl::OkStatus();
}

absl::Status LockstepDevice::Reach(int rank, std::initializer_list<const MemRef*> mems,
                                   std::string_view what) {
  return Reach(rank, std::vector<const MemRef*>(mems), what);
}

absl::StatusOr<MemRef> LockstepDevice::Local(const MemRef& m, std::string_view what) {
  if (m.rank == me_) return MemRef{local_rank_, m.addr, m.bytes, m.alloc_id, m.via_mapping};
  DMALAB_ASSIGN_OR_RETURN(auto* a, Find(m, what));
  if (!a->mapping.has_value()) {
    return absl::InternalError(absl::StrFormat(
        "%s: rank %d's memory at 0x%x is not mapped on rank %d", what, m.rank, m.addr, me_));
  }
  const MemRef& map = *a->mapping;
  return MemRef{local_rank_, map.addr + (m.addr - a->base), m.bytes, map.alloc_id, map.via_mapping};
}

absl::Status LockstepDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                                  std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "copy"));
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, {&dst, &src}, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef d, Local(dst, label));
  DMALAB_ASSIGN_OR_RETURN(MemRef r, Local(src, label));
  return local_->Copy(s->local, d, r, label);
}

absl::Status LockstepDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                    absl::Span<const Operand> terms, int64_t elems,
                                    std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "reduce"));
  std::vector<const MemRef*> mems = {&dst.mem};
  for (const Operand& t : terms) mems.push_back(&t.mem);
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, mems, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef d, Local(dst.mem, label));
  std::vector<Operand> local_terms;
  for (const Operand& t : terms) {
    DMALAB_ASSIGN_OR_RETURN(MemRef m, Local(t.mem, label));
    local_terms.push_back(Operand{m, t.codec});
  }
  return local_->Reduce(s->local, dtype, Operand{d, dst.codec}, local_terms, elems, label);
}

absl::Status LockstepDevice::SignalFlag(StreamId stream, const MemRef& counter,
                                        const MemRef& peer_flag, std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "signal_flag"));
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, {&counter, &peer_flag}, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef c, Local(counter, label));
  DMALAB_ASSIGN_OR_RETURN(MemRef f, Local(peer_flag, label));
  return local_->SignalFlag(s->local, c, f, label);
}

absl::Status LockstepDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                      std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "wait_flag"));
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, {&expected, &flag}, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef e, Local(expected, label));
  DMALAB_ASSIGN_OR_RETURN(MemRef f, Local(flag, label));
  return local_->WaitFlag(s->local, e, f, label);
}

absl::Status LockstepDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                        std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "write_value"));
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, {&dst}, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef d, Local(dst, label));
  return local_->WriteValue(s->local, d, value, label);
}

absl::Status LockstepDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                       std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const StreamInfo* s, GetStream(stream, "wait_value"));
  DMALAB_RETURN_IF_ERROR(Reach(s->rank, {&flag}, label));
  if (s->rank != me_) return absl::OkStatus();
  DMALAB_ASSIGN_OR_RETURN(MemRef f, Local(flag, label));
  return local_->WaitValue(s->local, f, value, label);
}

absl::Status LockstepDevice::Synchronize() {
  // Every instance meets at the barrier, whatever its own device said, so none waits forever.
  const absl::Status local = local_->Synchronize();
  const absl::Status barrier = exchange_->Barrier();
  return local.ok() ? barrier : local;
}

absl::Status LockstepDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  if (dst.rank != me_) return absl::OkStatus();  // the owner writes the same bytes
  DMALAB_ASSIGN_OR_RETURN(MemRef d, Local(dst, "write"));
  return local_->Write(d, bytes);
}

absl::Status LockstepDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  if (src.rank < 0 || src.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("read: rank is %d; ranks are 0..%d", src.rank, world_ - 1));
  }
  // The owner reads; its outcome and bytes go to every instance.
  std::vector<uint8_t> buf(1 + kWhyBytes + bytes.size(), 0);
  if (src.rank == me_) {
    absl::Status s;
    absl::StatusOr<MemRef> m = Local(src, "read");
    if (m.ok()) {
      s = local_->Read(*m, absl::MakeSpan(buf).subspan(1 + kWhyBytes));
    } else {
      s = m.status();
    }
    if (s.ok()) {
      buf[0] = 1;
    } else {
      const std::string why(s.message().substr(0, kWhyBytes - 1));
      std::memcpy(buf.data() + 1, why.data(), why.size());
    }
  }
  DMALAB_RETURN_IF_ERROR(exchange_->Broadcast(src.rank, absl::MakeSpan(buf)));
  if (buf[0] == 0) {
    return absl::InternalError(absl::StrFormat("read of rank %d's 0x%x failed there: %s", src.rank,
                                               src.addr,
                                               reinterpret_cast<const char*>(buf.data() + 1)));
  }
  if (!bytes.empty()) std::memcpy(bytes.data(), buf.data() + 1 + kWhyBytes, bytes.size());
  return absl::OkStatus();
}

bool LockstepDevice::IsCapturing(StreamId stream) const {
  if (stream.value() < 0 || stream.value() >= static_cast<int32_t>(streams_.size())) return false;
  const StreamInfo& s = streams_[stream.value()];
  return s.rank == me_ && local_->IsCapturing(s.local);
}

int64_t LockstepDevice::LiveAllocations(int rank) const {
  return rank == me_ ? local_->LiveAllocations(local_rank_) : -1;
}

std::optional<StreamId> LockstepDevice::LocalStream(StreamId stream) const {
  if (stream.value() < 0 || stream.value() >= static_cast<int32_t>(streams_.size())) {
    return std::nullopt;
  }
  const StreamInfo& s = streams_[stream.value()];
  if (s.rank != me_) return std::nullopt;
  return s.local;
}

int LockstepDevice::open_mappings() const {
  int n = 0;
  for (const auto& [key, a] : allocations_) n += a.mapping.has_value() ? 1 : 0;
  return n;
}

}  // namespace dmalab
