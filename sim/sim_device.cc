#include "sim/sim_device.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/hash.h"
#include "common/core/reduce_host.h"
#include "common/core/status_macros.h"
#include "sim/enum_names.h"

namespace dmalab {
namespace {

constexpr int kHostTimeline = 0;

// Host writes up to this size keep their words' values in the shadow fidelity (flag words are
// written so); larger ones keep only their provenance.
constexpr uint64_t kShadowKeptWriteBytes = 64 << 10;

// Tags that keep the origins of different kinds of data apart (MakeOrigin's first value).
enum OriginTag : uint64_t { kHostBytesTag = 1, kHostContentTag, kWordTag, kReduceTag };

// Host pointer to bytes the caller writes whole before reading any, so that their fresh pages
// need no filling (sim/sim_memory.h). Ranges were validated at enqueue.
uint8_t* Overwritten(SimMemory& memory, const MemRef& m) {
  absl::StatusOr<uint8_t*> p = memory.BytesToOverwrite(m.addr, m.bytes);
  return p.ok() ? *p : nullptr;
}

// Whether two views share a byte.
bool Overlap(const MemRef& a, const MemRef& b) {
  return a.rank == b.rank && a.addr < b.end() && b.addr < a.end();
}

// A copy's bytes (values fidelity). A source that is one lazy range (sim/sim_memory.h) stays
// lazy at the destination, one with lazy parts is generated straight into it; a source that
// overlaps the destination is produced in place first, as memmove needs.
void CopyBytes(std::vector<SimMemory>& memory, const MemRef& dst, const MemRef& src) {
  SimMemory& from = memory[src.rank];
  if (!Overlap(dst, src) && from.HasLazy(src.addr, src.bytes)) {
    if (auto whole = from.WholeLazy(src.addr, src.bytes)) {
      (void)memory[dst.rank].WriteLazy(dst.addr, dst.bytes, std::move(whole->first), whole->second);
    } else {
      (void)from.CopyOut(src.addr, src.bytes, Overwritten(memory[dst.rank], dst));
    }
    return;
  }
  const uint8_t* p = *from.Bytes(src.addr, src.bytes);  // first: its fresh bytes before dst's
  std::memmove(Overwritten(memory[dst.rank], dst), p, dst.bytes);
}

// Elements a reduce with lazy terms handles at once: a multiple of the codecs' 128-value blocks,
// small enough that its generated terms stay in cache.
constexpr int64_t kLazyReducePiece = 32768;

// A reduce's bytes (values fidelity), the host reference's. Lazy terms are generated a piece at
// a time into a small buffer rather than into device memory (unless one overlaps dst, which
// ReduceHost may read after writing).
void ReduceBytes(std::vector<SimMemory>& memory, DType dtype, const Operand& dst,
                 absl::Span<const Operand> terms, int64_t elems) {
  std::vector<bool> lazy(terms.size());
  bool any = false, overlap = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    lazy[i] = memory[terms[i].mem.rank].HasLazy(terms[i].mem.addr, terms[i].mem.bytes);
    any = any || lazy[i];
    overlap = overlap || (lazy[i] && Overlap(terms[i].mem, dst.mem));
  }
  std::vector<HostOperand> ops;
  for (const Operand& t : terms) {
    const bool generated = any && !overlap && lazy[ops.size()];
    ops.push_back(HostOperand{
        generated ? nullptr : *memory[t.mem.rank].Bytes(t.mem.addr, t.mem.bytes), t.codec});
  }
  uint8_t* out = Overwritten(memory[dst.mem.rank], dst.mem);
  // Arguments were validated at enqueue; the host reference cannot fail here.
  if (!any || overlap) {
    (void)ReduceHost(dtype, out, dst.codec, ops, elems);
    return;
  }
  std::vector<std::vector<uint8_t>> pieces(terms.size());
  std::vector<HostOperand> piece_ops(terms.size());
  for (int64_t first = 0; first < elems; first += kLazyReducePiece) {
    const int64_t n = std::min(kLazyReducePiece, elems - first);
    for (size_t i = 0; i < terms.size(); ++i) {
      const Operand& t = terms[i];
      const uint64_t at = EncodedBytes(t.codec, dtype, first);
      if (!lazy[i]) {
        piece_ops[i] = HostOperand{ops[i].data + at, t.codec};
        continue;
      }
      pieces[i].resize(EncodedBytes(t.codec, dtype, n));
      (void)memory[t.mem.rank].CopyOut(t.mem.addr + at, pieces[i].size(), pieces[i].data());
      piece_ops[i] = HostOperand{pieces[i].data(), t.codec};
    }
    (void)ReduceHost(dtype, out + EncodedBytes(dst.codec, dtype, first), dst.codec, piece_ops, n);
  }
}

}  // namespace

std::string_view FidelityName(Fidelity fidelity) { return kFidelities.Name(fidelity); }

absl::StatusOr<Fidelity> ParseFidelity(std::string_view text) { return kFidelities.Parse(text); }

// Timing: the model sees each op's host enqueue time and, once executed, what it waited for.
TimedOp::Kind SimDevice::TimedKind(OpKind kind) {
  switch (kind) {
    case OpKind::kCopy:
      return TimedOp::Kind::kCopy;
    case OpKind::kReduce:
      return TimedOp::Kind::kReduce;
    case OpKind::kSignal:
    case OpKind::kWriteValue:
      return TimedOp::Kind::kSignal;
    case OpKind::kWaitFlag:
    case OpKind::kWaitValue:
      return TimedOp::Kind::kWaitFlag;
    case OpKind::kRecord:
      return TimedOp::Kind::kRecord;
    case OpKind::kWaitEvent:
      return TimedOp::Kind::kWaitEvent;
    case OpKind::kFree:
      break;
  }
  return TimedOp::Kind::kFree;
}

SimDevice::SimDevice(int world, uint64_t seed, Fidelity fidelity)
    : world_(world),
      seed_(seed),
      fidelity_(fidelity),
      rng_(seed),
      ipc_(world, seed ^ 0x6970635f6e6f6e63ull),
      reservations_(world),
      races_(world) {
  if (fidelity == Fidelity::kShadow) shadow_.resize(world);
  for (int r = 0; r < world; ++r) {
    memory_.emplace_back(r, world, /*with_payload=*/fidelity == Fidelity::kValues);
    compute_streams_.push_back(StreamId(static_cast<int32_t>(streams_.size())));
    streams_.push_back(Stream{r, StreamKind::kCompute, "compute", {}, {}});
  }
}

SimDevice::~SimDevice() = default;

absl::Status SimDevice::CheckStream(StreamId s) const {
  if (s.value() < 0 || s.value() >= static_cast<int32_t>(streams_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("stream %d does not exist", s));
  }
  return absl::OkStatus();
}

uint8_t* SimDevice::HostPtr(const MemRef& m) {
  absl::StatusOr<uint8_t*> p = memory_[m.rank].Bytes(m.addr, m.bytes);
  return p.ok() ? *p : nullptr;
}

absl::Status SimDevice::CheckMem(MemRef& m, std::string_view what) {
  if (m.rank < 0 || m.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is on rank %d; ranks are 0..%d", what, m.rank, world_ - 1));
  }
  // The usual view: inside a live allocation of its rank (never in a window), nothing to resolve.
  if (m.alloc_id != 0 && memory_[m.rank].InsideLive(m.alloc_id, m.addr, m.bytes)) {
    return absl::OkStatus();
  }
  if (AddressReservations::InWindow(m.rank, m.addr)) return ResolveReserved(m, what);
  if (IpcTable::InWindow(m.rank, m.addr)) return ResolveMapping(m, what);
  if (const int owner = SimMemory::RankOfAddress(m.addr, world_); owner >= 0 && owner != m.rank) {
    Finding f = NewFinding(FindingKind::kForeignAddress, owner, m.addr, m.end());
    f.ops = {FindingOp{m.rank, "", context_, ""}};
    f.message = absl::StrFormat(
        "rank %d used 0x%x (%s, %d bytes) as an address of its own, but it lies in rank %d's "
        "address space (%s): a rank reaches a peer's memory only through an IPC mapping it "
        "opened (ipc_open_mem_handle), never through the peer's raw address; in '%s'",
        m.rank, m.addr, what, m.bytes, owner, DescribeMemory(owner, m.addr, m.end()), context_);
    const std::string error = f.message;
    findings_.Add(std::move(f));
    return absl::InvalidArgumentError(error);
  }
  if (absl::Status s = memory_[m.rank].CheckRange(m.addr, m.bytes); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", what, s.message()));
  }
  if (m.alloc_id == 0) {
    // A raw address: its lifetime is the allocation that covers it now.
    if (const AllocationInfo* a = memory_[m.rank].LiveAt(m.addr)) m.alloc_id = a->id;
  } else if (memory_[m.rank].Find(m.alloc_id) == nullptr &&
             !memory_[m.rank].FreedLongAgo(m.alloc_id)) {
    // As a GPU knows no such allocation: the id was made up, or belongs to another rank.
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: [0x%x, +%d) on rank %d names allocation #%d, which rank %d never handed out (a range "
        "carries the id its allocation was given, or 0)",
        what, m.addr, m.bytes, m.rank, m.alloc_id, m.rank));
  }
  return absl::OkStatus();
}

absl::Status SimDevice::ResolveMapping(MemRef& m, std::string_view what) {
  const IpcMapping* map = ipc_.MappingAt(m.rank, m.addr);
  if (map == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: rank %d address 0x%x lies in the rank's IPC mapping window but in no mapping it "
        "opened",
        what, m.rank, m.addr));
  }
  return ResolveThrough(m, *map, what);
}

absl::Status SimDevice::ResolveThrough(MemRef& m, const IpcMapping& mapping,
                                       std::string_view what) {
  const IpcMapping* map = &mapping;
  const IpcExport& e = ipc_.exported(map->export_id);
  const MemRef owner{e.rank, e.addr + (m.addr - map->addr), m.bytes, e.alloc_id, map->id};
  if (!map->open) {
    Finding f = NewFinding(FindingKind::kStaleIpcMapping, e.rank, owner.addr, owner.end());
    f.mem.via_mapping = map->id;
    f.ops = {FindingOp{m.rank, "", context_, ""}};
    f.message = absl::StrFormat(
        "rank %d used IPC mapping #%d [0x%x, 0x%x) of rank %d's allocation #%d '%s' after it "
        "closed the mapping (closed by '%s'; opened by '%s'); in '%s'",
        m.rank, map->id, map->addr, map->addr + map->bytes, e.rank, e.alloc_id, e.tag,
        map->closed_by, map->opened_by, context_);
    const std::string error = f.message;
    findings_.Add(std::move(f));
    return absl::FailedPreconditionError(error);
  }
  CheckExporterAlive(m.rank, *map,
                     MemRef{e.rank, owner.addr, std::min(m.bytes, map->addr + map->bytes - m.addr),
                            e.alloc_id, map->id},
                     "used");
  if (m.end() > map->addr + map->bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: rank %d [0x%x, 0x%x) reaches past the end of IPC mapping #%d [0x%x, 0x%x) of rank "
        "%d's allocation #%d '%s'",
        what, m.rank, m.addr, m.end(), map->id, map->addr, map->addr + map->bytes, e.rank,
        e.alloc_id, e.tag));
  }
  m = owner;
  return absl::OkStatus();
}

absl::Status SimDevice::ResolveReserved(MemRef& m, std::string_view what) {
  const Reservation* r = reservations_.At(m.rank, m.addr);
  if (r == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: rank %d address 0x%x lies in the rank's reserved-address window but in no range it "
        "reserved",
        what, m.rank, m.addr));
  }
  if (m.end() > r->addr + r->bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank %d [0x%x, 0x%x) reaches past the end of %s", what, m.rank, m.addr,
                        m.end(), r->Describe()));
  }
  // A graph names the address; what is mapped there is looked up when it runs.
  if (capture_ != nullptr && !r->released) return absl::OkStatus();
  std::string why;
  if (r->released) {
    why = absl::StrFormat("the range was released by '%s'", r->released_by);
  } else if (r->mapping == 0) {
    why = r->closed_mapping == 0
              ? std::string("no mapping was ever placed in it")
              : absl::StrFormat("its IPC mapping #%d was closed by '%s'", r->closed_mapping,
                                ipc_.mapping(r->closed_mapping).closed_by);
  } else if (const IpcMapping& map = ipc_.mapping(r->mapping); m.end() > map.addr + map.bytes) {
    why = absl::StrFormat(
        "IPC mapping #%d there covers only [0x%x, 0x%x) (rank %d's allocation '%s', opened by "
        "'%s')",
        map.id, map.addr, map.addr + map.bytes, ipc_.exported(map.export_id).rank,
        ipc_.exported(map.export_id).tag, map.opened_by);
  } else {
    return ResolveThrough(m, map, what);
  }
  Finding f = NewFinding(FindingKind::kUnmappedAddress, m.rank, m.addr, m.end());
  f.ops = {FindingOp{m.rank, "", context_, ""}};
  f.message = absl::StrFormat(
      "rank %d reached [0x%x, 0x%x) (%s, %d bytes) in its %s, where nothing is mapped: %s "
      "(reserved by '%s'); in '%s'",
      m.rank, m.addr, m.end(), what, m.bytes, r->Describe(), why, r->reserved_by, context_);
  const std::string error = f.message;
  findings_.Add(std::move(f));
  return absl::FailedPreconditionError(error);
}

absl::Status SimDevice::ResolveDeferred(Op& op) {
  const auto resolve = [&](MemRef& m, std::string_view what) -> absl::Status {
    if (!AddressReservations::InWindow(m.rank, m.addr)) return absl::OkStatus();
    return ResolveReserved(m, what);
  };
  if (op.kind == OpKind::kReduce) {
    DMALAB_RETURN_IF_ERROR(resolve(op.dst_operand.mem, "reduce operand"));
    for (Operand& t : op.terms) {
      DMALAB_RETURN_IF_ERROR(resolve(t.mem, "reduce operand"));
    }
    return absl::OkStatus();
  }
  DMALAB_RETURN_IF_ERROR(resolve(op.dst, "dst"));
  return resolve(op.src, "src");
}

void SimDevice::CheckExporterAlive(int opener, const IpcMapping& map, const MemRef& owner,
                                   std::string_view verb) {
  const IpcExport& e = ipc_.exported(map.export_id);
  const AllocationInfo* a = memory_[e.rank].Find(e.alloc_id);
  if (a != nullptr && a->live) return;
  // A graph's pool block stays the graph's: its replays use it in their own order.
  if (memory_[e.rank].PoolAt(e.addr) != 0) return;
  Finding f = NewFinding(FindingKind::kStaleIpcMapping, e.rank, owner.addr, owner.end());
  f.mem.via_mapping = map.id;
  f.ops = {FindingOp{opener, "", context_, ""}};
  std::string freed =
      a != nullptr ? absl::StrFormat("freed by '%s'", a->freed_by) : std::string("freed long ago");
  f.message = absl::StrFormat(
      "rank %d %s IPC mapping #%d of rank %d's allocation #%d '%s' (exported by '%s', opened by "
      "'%s') after rank %d freed it (%s); the exporter's free does not wait for its peers' "
      "mappings",
      opener, verb, map.id, e.rank, e.alloc_id, e.tag, e.by, map.opened_by, e.rank, freed);
  if (const AllocationInfo* now = memory_[e.rank].LiveAt(owner.addr)) {
    // The aiter#3838 corruption: the caching allocator handed the block to another tensor.
    f.alloc_tag = now->tag;
    f.mem.alloc_id = now->id;
    absl::StrAppendFormat(&f.message,
                          "; the bytes [0x%x, 0x%x) now belong to rank %d's allocation #%d '%s', "
                          "which this access reaches instead",
                          owner.addr, owner.end(), e.rank, now->id, now->tag);
  }
  absl::StrAppendFormat(&f.message, "; in '%s'", context_);
  findings_.Add(std::move(f));
}

absl::Status SimDevice::RefuseDuringCapture(std::string_view what) const {
  if (capture_ == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s during graph capture; graphs replay captured work on caller-owned memory: allocate, "
      "free, read, write and synchronize before or after the capture",
      what));
}

absl::StatusOr<MemRef> SimDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  return memory_[rank].Allocate(bytes, tag, capture_ != nullptr ? capture_->pool : 0);
}

absl::Status SimDevice::Free(const MemRef& allocation) {
  if (allocation.rank < 0 || allocation.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("free: rank is %d; ranks are 0..%d", allocation.rank, world_ - 1));
  }
  if (capture_ != nullptr) {
    if (memory_[allocation.rank].PoolAt(allocation.addr) != capture_->pool) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "free: rank %d address 0x%x during graph capture: only memory allocated in this "
          "capture (the graph's private pool) may be freed while capturing; free the rest "
          "before or after the capture",
          allocation.rank, allocation.addr));
    }
    // Back to the graph's pool at once: later work of the capture is ordered after the work
    // that used it, in every replay too.
    DMALAB_RETURN_IF_ERROR(memory_[allocation.rank].Free(allocation, context_));
    freed_.insert(allocation.alloc_id);
    for (uint64_t id : memory_[allocation.rank].TakeDroppedIds()) freed_.erase(id);
    return absl::OkStatus();
  }
  const AllocationInfo* info = memory_[allocation.rank].Find(allocation.alloc_id);
  const uint64_t bytes = info ? info->bytes : allocation.bytes;
  DMALAB_RETURN_IF_ERROR(memory_[allocation.rank].Free(allocation, context_));
  // Long-freed allocations are known by id alone (CheckLifetime); freed_ keeps recent ones.
  for (uint64_t id : memory_[allocation.rank].TakeDroppedIds()) freed_.erase(id);
  Op op;
  op.kind = OpKind::kFree;
  op.dst = MemRef{allocation.rank, allocation.addr, bytes, allocation.alloc_id};
  return Enqueue(compute_streams_[allocation.rank], std::move(op), "free");
}

absl::StatusOr<StreamId> SimDevice::CreateStream(int rank, StreamKind kind, std::string_view name) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create stream: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  streams_.push_back(Stream{rank, kind, std::string(name), {}, {}});
  return StreamId(static_cast<int32_t>(streams_.size() - 1));
}

absl::StatusOr<EventId> SimDevice::CreateEvent(int rank) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create event: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  events_.emplace_back().rank = rank;
  return EventId(static_cast<int32_t>(events_.size() - 1));
}

absl::Status SimDevice::Enqueue(StreamId s, Op&& op, std::string_view label) {
  if (capture_ != nullptr) {
    if (op.kind == OpKind::kRecord) capture_->recorded.insert(op.event);
    const auto reserved = [](const MemRef& m) {
      return m.bytes > 0 && AddressReservations::InWindow(m.rank, m.addr);
    };
    // The graph owns its pool's blocks: its replays are not checked against the tensors that
    // held them while capturing (a block freed and handed out again inside the capture).
    const auto pool_owned = [&](MemRef& m) {
      if (m.bytes > 0 && m.via_mapping == 0 && m.rank >= 0 && m.rank < world_ &&
          memory_[m.rank].PoolAt(m.addr) != 0) {
        m.alloc_id = 0;
      }
    };
    pool_owned(op.dst);
    pool_owned(op.src);
    pool_owned(op.dst_operand.mem);
    for (Operand& t : op.terms) pool_owned(t.mem);
    op.deferred = reserved(op.dst) || reserved(op.src) || reserved(op.dst_operand.mem) ||
                  std::any_of(op.terms.begin(), op.terms.end(),
                              [&](const Operand& t) { return reserved(t.mem); });
    capture_->ops.push_back(CapturedOp{s, std::move(op), std::string(label)});
    return absl::OkStatus();
  }
  return EnqueueInterned(s, std::move(op), InternLabel(label));
}

absl::Status SimDevice::EnqueueEventOp(StreamId s, Op&& op, const char* verb, int32_t& label) {
  if (capture_ != nullptr) {
    return Enqueue(s, std::move(op), absl::StrCat(verb, " ev", op.event.value()));
  }
  if (label < 0) label = InternLabel(absl::StrCat(verb, " ev", op.event.value()));
  return EnqueueInterned(s, std::move(op), label);
}

absl::Status SimDevice::EnqueueInterned(StreamId s, Op&& op, int32_t label) {
  if (static_cast<int64_t>(op_labels_.size()) == kOpLabelWindow) {  // the oldest is forgotten
    op_labels_.pop_front();
    ++first_op_id_;
  }
  op.id = first_op_id_ + static_cast<int64_t>(op_labels_.size());
  int64_t context = -1;
  if (!context_.empty()) {
    if (!context_stored_) {
      contexts_.push_back(context_);
      context_stored_ = true;
    }
    context = first_context_ + static_cast<int64_t>(contexts_.size()) - 1;
  }
  op_labels_.push_back(OpLabel{streams_[s.value()].rank, s, context, label});
  // Contexts older than the oldest kept op's are no longer needed (the current one always is).
  const int64_t oldest = op_labels_.front().context;
  while (oldest >= 0 && first_context_ < oldest && contexts_.size() > 1) {
    contexts_.pop_front();
    ++first_context_;
  }
  op.host_clock = host_clock_;
  if (timing_) op.host_us = launching_ ? timing_->now_us() : timing_->Enqueue(TimedKind(op.kind));
  streams_[s.value()].queue.push_back(std::move(op));
  ++pending_;
  return absl::OkStatus();
}

absl::Status SimDevice::RecordEvent(EventId event, StreamId stream) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("record: event %d does not exist", event));
  }
  const Event& e = events_[event.value()];
  const int rank = streams_[stream.value()].rank;
  if (e.rank != rank && !e.openers.contains(rank)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "record: event %d belongs to rank %d, stream '%s' to rank %d; an event is recorded on "
        "its own device's streams (a GPU refuses this)",
        event, e.rank, streams_[stream.value()].name, rank));
  }
  Op op;
  op.kind = OpKind::kRecord;
  op.event = event;
  if (capture_ == nullptr)
    op.event_seq = ++events_[event.value()].records;  // at launch when captured
  return EnqueueEventOp(stream, std::move(op), "record", events_[event.value()].record_label);
}

absl::Status SimDevice::WaitEvent(StreamId stream, EventId event) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("wait: event %d does not exist", event));
  }
  if (capture_ != nullptr && !capture_->recorded.contains(event)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "wait on event %d during graph capture: the event was not recorded in this capture "
        "(a graph can only depend on work it contains)",
        event));
  }
  Op op;
  op.kind = OpKind::kWaitEvent;
  op.event = event;
  op.event_seq =
      events_[event.value()].records;  // CUDA semantics: the latest record at enqueue time
  if (op.event_seq > 0) {
    auto& waiting = events_[event.value()].waiting;  // by record number, the latest last
    auto w = std::lower_bound(waiting.begin(), waiting.end(), op.event_seq,
                              [](const auto& entry, uint64_t seq) { return entry.first < seq; });
    if (w != waiting.end() && w->first == op.event_seq) {
      ++w->second;
    } else {
      waiting.insert(w, {op.event_seq, 1});
    }
  }
  return EnqueueEventOp(stream, std::move(op), "wait", events_[event.value()].wait_label);
}

absl::Status SimDevice::Copy(StreamId stream, const MemRef& dst_view, const MemRef& src_view,
                             std::string_view label) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (dst_view.bytes != src_view.bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("copy '%s': dst is %d bytes, src is %d; must match", label, dst_view.bytes,
                        src_view.bytes));
  }
  MemRef dst = dst_view, src = src_view;
  DMALAB_RETURN_IF_ERROR(CheckMem(dst, "copy dst"));
  DMALAB_RETURN_IF_ERROR(CheckMem(src, "copy src"));
  const int rank = streams_[stream.value()].rank;
  if (dst.rank != rank && src.rank != rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy '%s': stream is on rank %d, dst on %d, src on %d; one must be the stream's rank",
        label, rank, dst.rank, src.rank));
  }
  Op op;
  op.kind = OpKind::kCopy;
  op.dst = dst;
  op.src = src;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                               absl::Span<const Operand> terms, int64_t elems,
                               std::string_view label) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  DMALAB_RETURN_IF_ERROR(ValidateReduce(dtype, dst, terms, elems));
  const int rank = streams_[stream.value()].rank;
  Op op;
  op.kind = OpKind::kReduce;
  op.dtype = dtype;
  op.dst_operand = dst;
  op.terms.assign(terms.begin(), terms.end());
  op.elems = elems;
  for (size_t i = 0; i <= op.terms.size(); ++i) {
    Operand* o = i == 0 ? &op.dst_operand : &op.terms[i - 1];
    if (o->mem.rank != rank) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce '%s': an operand is on rank %d; kernels on rank %d read and write only its "
          "own memory and the peers' memory it mapped",
          label, o->mem.rank, rank));
    }
    // A mapping the stream's rank opened resolves to the owner's bytes: kernels may use it.
    DMALAB_RETURN_IF_ERROR(CheckMem(o->mem, "reduce operand"));
  }
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                   std::string_view label) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (counter.bytes != 8 || peer_flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("signal '%s': counter and flag must be 8 bytes", label));
  }
  Op op;
  op.kind = OpKind::kSignal;
  op.dst = counter;
  op.src = peer_flag;
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(op.dst, "signal counter", label));
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(op.src, "signal flag", label));
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                 std::string_view label) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (expected.bytes != 8 || flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait '%s': expected and flag must be 8 bytes", label));
  }
  Op op;
  op.kind = OpKind::kWaitFlag;
  op.dst = expected;
  op.src = flag;
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(op.dst, "wait expected", label));
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(op.src, "wait flag", label));
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::CheckValueFlag(StreamId stream, MemRef& flag, std::string_view what,
                                       std::string_view label) {
  DMALAB_RETURN_IF_ERROR(CheckStream(stream));
  if (flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s': the flag must be 8 bytes, is %d", what, label, flag.bytes));
  }
  return CheckFlagWord(flag, absl::StrFormat("%s flag", what), label);
}

absl::Status SimDevice::CheckFlagWord(MemRef& word, std::string_view what, std::string_view label) {
  if (word.addr % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of '%s' is at 0x%x on rank %d: flag words are 8-byte aligned (a GPU faults on a "
        "misaligned 64-bit atomic)",
        what, label, word.addr, word.rank));
  }
  return CheckMem(word, what);
}

absl::Status SimDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                   std::string_view label) {
  Op op;
  op.kind = OpKind::kWriteValue;
  op.src = dst;
  op.wait_target = value;
  DMALAB_RETURN_IF_ERROR(CheckValueFlag(stream, op.src, "write value", label));
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                  std::string_view label) {
  Op op;
  op.kind = OpKind::kWaitValue;
  op.src = flag;
  op.wait_target = value;
  op.wait_armed = true;
  DMALAB_RETURN_IF_ERROR(CheckValueFlag(stream, op.src, "wait value", label));
  if (op.src.rank != streams_[stream.value()].rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait value '%s': the flag is on rank %d, the stream on rank %d; a wait "
                        "reads its own rank's memory",
                        label, op.src.rank, streams_[stream.value()].rank));
  }
  return Enqueue(stream, std::move(op), label);
}

uint64_t SimDevice::LoadU64(const MemRef& m) {
  if (fidelity_ == Fidelity::kShadow) {
    if (std::optional<uint64_t> v = shadow_[m.rank].LoadWord(m.addr)) return *v;
    if (unknown_words_reported_.insert({m.rank, m.addr}).second) {
      Finding f = NewFinding(FindingKind::kShadowUnknownWord, m.rank, m.addr, m.end());
      f.message = absl::StrFormat(
          "%s is read as a flag but was last written by a kernel or a "
          "large host write, whose values the shadow fidelity does not "
          "keep; it reads as 0 here (replay in the values fidelity)",
          DescribeMemory(m.rank, m.addr, m.end()));
      findings_.Add(std::move(f));
    }
    return 0;
  }
  uint64_t v;
  std::memcpy(&v, HostPtr(m), 8);
  return v;
}

void SimDevice::StoreU64(const MemRef& m, uint64_t v) {
  if (fidelity_ == Fidelity::kShadow) return ShadowStoreU64(m, v);
  std::memcpy(Overwritten(memory_[m.rank], m), &v, 8);
}

void SimDevice::ShadowStoreU64(const MemRef& m, uint64_t v) {
  shadow_[m.rank].AssignWord(m.addr, v, MakeOrigin({kWordTag, v}));
}

void SimDevice::ShadowCopy(const Op& op) {
  shadow_[op.dst.rank].CopyFrom(shadow_[op.src.rank], op.src.addr, op.dst.addr, op.dst.bytes);
}

// A kernel's output is a function of its inputs' contents and of what it computes, never of where
// they are: its origin mixes the operation with every term's provenance.
void SimDevice::ShadowReduce(const Op& op) {
  absl::InlinedVector<uint64_t, 32> mix = {kReduceTag, static_cast<uint64_t>(op.dtype),
                                           static_cast<uint64_t>(op.dst_operand.codec),
                                           static_cast<uint64_t>(op.elems), op.terms.size()};
  ShadowMemory::FewPieces p;
  for (const Operand& t : op.terms) {
    shadow_[t.mem.rank].GetInto(t.mem.addr, t.mem.end(), p);
    mix.push_back(static_cast<uint64_t>(t.codec));
    mix.push_back(p.size());
    for (const ProvenancePiece& piece : p) {
      mix.insert(mix.end(), {piece.offset, piece.bytes, piece.origin, piece.origin_offset});
    }
  }
  const MemRef& d = op.dst_operand.mem;
  shadow_[d.rank].Assign(d.addr, d.end(), MakeOrigin(mix), 0);
}

bool SimDevice::Ready(Stream& /*s*/, Op& op) {
  switch (op.kind) {
    case OpKind::kWaitEvent:
      return op.event_seq == 0 || events_[op.event.value()].completed >= op.event_seq;
    case OpKind::kWaitFlag:
      if (!op.wait_armed) {  // the wait kernel starts: bump the expected value once
        op.wait_target = LoadU64(op.dst) + 1;
        StoreU64(op.dst, op.wait_target);
        op.wait_armed = true;
      }
      [[fallthrough]];
    case OpKind::kWaitValue:  // armed at enqueue: the value is immediate
      return LoadU64(op.src) >= op.wait_target;
    default:
      return true;
  }
}

int32_t SimDevice::InternLabel(std::string_view label) {
  // The entry for this address: the top bits of the address times a large odd number.
  SeenLabel& seen =
      seen_labels_[(reinterpret_cast<uintptr_t>(label.data()) * uint64_t{0x9e3779b97f4a7c15}) >>
                   (64 - kSeenLabelBits)];
  if (seen.id >= 0 && seen.data == label.data() && seen.size == label.size() &&
      labels_[seen.id] == label) {
    return seen.id;
  }
  // absl's own string_view type (Debian builds absl without std::string_view).
  auto it = label_ids_.find(absl::string_view(label.data(), label.size()));
  if (it != label_ids_.end()) {
    seen = SeenLabel{label.data(), static_cast<uint32_t>(label.size()), it->second};
    return it->second;
  }
  if (labels_.size() >= kMaxInternedLabels) {
    // More distinct labels than any run uses; describe the rest alike rather than grow.
    label = "(label not kept: too many distinct labels)";
    if (auto full = label_ids_.find(absl::string_view(label.data(), label.size()));
        full != label_ids_.end()) {
      return full->second;
    }
  }
  labels_.emplace_back(label);
  const int32_t id = static_cast<int32_t>(labels_.size() - 1);
  label_ids_.emplace(std::string(label), id);
  seen = SeenLabel{label.data(), static_cast<uint32_t>(label.size()), id};
  return id;
}

void SimDevice::PruneEventClocks(Event& e) {
  // Sorted by record number: none to drop when the oldest is not older than the latest executed.
  if (e.clocks.empty() || e.clocks.front().first >= e.completed) return;
  const auto waited = [&e](uint64_t seq) {
    return std::any_of(e.waiting.begin(), e.waiting.end(),
                       [seq](const auto& w) { return w.first == seq; });
  };
  const auto dropped = [&](const auto& c) { return c.first < e.completed && !waited(c.first); };
  e.clocks.erase(std::remove_if(e.clocks.begin(), e.clocks.end(), dropped), e.clocks.end());
}

std::string SimDevice::OpText(const OpLabel& l) const {
  const std::string& label = labels_[l.label];
  return l.context < first_context_
             ? label
             : absl::StrFormat("%s %s", contexts_[l.context - first_context_], label);
}

std::string SimDevice::DescribeOp(int64_t op_id) const {
  if (op_id < 0) return "the host";
  if (op_id < first_op_id_) {
    return absl::StrFormat("op #%d (described only for the last %d ops)", op_id, kOpLabelWindow);
  }
  const OpLabel& l = op_labels_[op_id - first_op_id_];
  return absl::StrFormat("rank %d stream '%s' op '%s'", l.rank, streams_[l.stream.value()].name,
                         OpText(l));
}

FindingOp SimDevice::OpOf(int64_t op_id, std::string access) const {
  if (op_id < 0) return FindingOp{-1, "", "host", std::move(access)};
  if (op_id < first_op_id_) {
    // Older than the label window: known by number only.
    return FindingOp{-1, "", absl::StrFormat("op #%d", op_id), std::move(access)};
  }
  const OpLabel& l = op_labels_[op_id - first_op_id_];
  return FindingOp{l.rank, streams_[l.stream.value()].name, OpText(l), std::move(access)};
}

Finding SimDevice::NewFinding(FindingKind kind, int rank, uint64_t lo, uint64_t hi) const {
  Finding f;
  f.kind = kind;
  f.rank = rank;
  f.mem = MemRef{rank, lo, hi - lo, 0};
  if (const AllocationInfo* a = memory_[rank].LiveAt(lo)) {
    f.mem.alloc_id = a->id;
    f.alloc_tag = a->tag;
  }
  return f;
}

std::string SimDevice::DescribeMemory(int rank, uint64_t lo, uint64_t hi) const {
  std::string text = absl::StrFormat("rank %d bytes [0x%x, 0x%x)", rank, lo, hi);
  if (const AllocationInfo* a = memory_[rank].LiveAt(lo)) {
    absl::StrAppendFormat(&text, " of allocation #%d '%s' (+%d)", a->id, a->tag, lo - a->addr);
  }
  return text;
}

void SimDevice::Access(StreamId sid, const Op& op, const MemRef& m, bool write) {
  const Stream& s = streams_[sid.value()];
  const dmalab::Access a{Timeline(sid), s.clock.Get(Timeline(sid)), op.id};
  const std::optional<Conflict> c = write ? races_.Write(m.rank, m.addr, m.end(), a, s.clock)
                                          : races_.Read(m.rank, m.addr, m.end(), a, s.clock);
  if (!c) return;
  const uint64_t lo = std::max(c->lo, m.addr), hi = std::min(c->hi, m.end());
  Finding f = NewFinding(FindingKind::kRace, m.rank, lo, hi);
  f.ops = {OpOf(c->earlier.op, c->earlier_is_write ? "write" : "read"),
           OpOf(op.id, write ? "write" : "read")};
  f.message =
      absl::StrFormat("%s: %s by %s and %s by %s are not ordered by any stream, event or flag",
                      DescribeMemory(m.rank, lo, hi), c->earlier_is_write ? "write" : "read",
                      DescribeOp(c->earlier.op), write ? "write" : "read", DescribeOp(op.id));
  findings_.Add(std::move(f));
}

void SimDevice::CheckLifetime(int64_t op_id, const MemRef& m) {
  // Through an IPC mapping the owner's allocation was checked when the op was enqueued (a stale
  // mapping); a free that runs unordered with the op is a race.
  if (m.alloc_id == 0 || m.via_mapping != 0) return;
  // The usual case: a live allocation (its free not even enqueued), the view inside it.
  if (memory_[m.rank].InsideLive(m.alloc_id, m.addr, m.bytes)) return;
  const AllocationInfo* a = memory_[m.rank].Find(m.alloc_id);
  if (a == nullptr) {
    if (memory_[m.rank].FreedLongAgo(m.alloc_id)) {
      Finding f = NewFinding(FindingKind::kUseAfterFree, m.rank, m.addr, m.end());
      f.mem.alloc_id = m.alloc_id;  // the freed allocation; its tag is no longer kept
      f.ops = {OpOf(op_id, "")};
      f.message = absl::StrFormat(
          "%s: %s uses allocation #%d after it was freed (more than %d frees ago: its tag and "
          "freeing step are no longer kept)",
          DescribeMemory(m.rank, m.addr, m.end()), DescribeOp(op_id), m.alloc_id,
          SimMemory::kFreedRecordsKept);
      findings_.Add(std::move(f));
    }
    return;
  }
  // The usual case (inside the allocation, not freed), before anything is built for a finding.
  if (m.addr >= a->addr && m.end() <= a->addr + a->bytes && !freed_.contains(m.alloc_id)) return;
  Finding f = NewFinding(FindingKind::kOutOfBounds, m.rank, m.addr, m.end());
  f.mem.alloc_id = a->id;  // the allocation the view was made from, live or not
  f.alloc_tag = a->tag;
  f.ops = {OpOf(op_id, "")};
  if (m.addr < a->addr || m.end() > a->addr + a->bytes) {
    f.message = absl::StrFormat("%s by %s reaches outside allocation #%d '%s' [0x%x, 0x%x)",
                                DescribeMemory(m.rank, m.addr, m.end()), DescribeOp(op_id), a->id,
                                a->tag, a->addr, a->addr + a->bytes);
    findings_.Add(std::move(f));
    return;
  }
  if (!freed_.contains(m.alloc_id)) return;
  const AllocationInfo* now = memory_[m.rank].LiveAt(m.addr);
  if (now != nullptr) {
    f.kind = FindingKind::kUseAfterReuse;
    f.message = absl::StrFormat(
        "%s: %s uses allocation #%d '%s' (freed by '%s'), whose bytes now belong to allocation "
        "#%d '%s'",
        DescribeMemory(m.rank, m.addr, m.end()), DescribeOp(op_id), a->id, a->tag, a->freed_by,
        now->id, now->tag);
  } else {
    f.kind = FindingKind::kUseAfterFree;
    f.message = absl::StrFormat("%s: %s uses allocation #%d '%s' after it was freed by '%s'",
                                DescribeMemory(m.rank, m.addr, m.end()), DescribeOp(op_id), a->id,
                                a->tag, a->freed_by);
  }
  findings_.Add(std::move(f));
}

void SimDevice::Execute(StreamId sid, Op& op) {
  Stream& s = streams_[sid.value()];
  s.clock.Join(op.host_clock);
  s.clock.Tick(Timeline(sid));
  switch (op.kind) {
    case OpKind::kCopy:
      CheckLifetime(op.id, op.src);
      CheckLifetime(op.id, op.dst);
      Access(sid, op, op.src, /*write=*/false);
      Access(sid, op, op.dst, /*write=*/true);
      if (fidelity_ == Fidelity::kShadow) {
        ShadowCopy(op);
      } else {
        CopyBytes(memory_, op.dst, op.src);
      }
      break;
    case OpKind::kReduce: {
      for (const Operand& t : op.terms) {
        CheckLifetime(op.id, t.mem);
        Access(sid, op, t.mem, /*write=*/false);
      }
      CheckLifetime(op.id, op.dst_operand.mem);
      Access(sid, op, op.dst_operand.mem, /*write=*/true);
      if (fidelity_ == Fidelity::kShadow) {
        ShadowReduce(op);
        break;
      }
      ReduceBytes(memory_, op.dtype, op.dst_operand, op.terms, op.elems);
      break;
    }
    case OpKind::kSignal: {
      const uint64_t v = LoadU64(op.dst) + 1;
      StoreU64(op.dst, v);
      StoreU64(op.src, v);
      flag_clocks_[{op.src.rank, op.src.addr}].Join(s.clock);  // release
      break;
    }
    case OpKind::kWriteValue:
      StoreU64(op.src, op.wait_target);
      flag_clocks_[{op.src.rank, op.src.addr}].Join(s.clock);  // release
      break;
    case OpKind::kWaitFlag:
    case OpKind::kWaitValue:
      if (auto f = flag_clocks_.find({op.src.rank, op.src.addr}); f != flag_clocks_.end()) {
        s.clock.Join(f->second);  // acquire
      }
      break;
    case OpKind::kRecord: {
      Event& e = events_[op.event.value()];
      e.completed = std::max(e.completed, op.event_seq);
      const auto at =
          std::lower_bound(e.clocks.begin(), e.clocks.end(), op.event_seq,
                           [](const auto& entry, uint64_t seq) { return entry.first < seq; });
      if (at != e.clocks.end() && at->first == op.event_seq) {
        at->second = s.clock;
      } else {
        e.clocks.insert(at, {op.event_seq, s.clock});
      }
      PruneEventClocks(e);
      break;
    }
    case OpKind::kWaitEvent:
      if (op.event_seq > 0) {
        Event& e = events_[op.event.value()];
        for (const auto& [seq, clock] : e.clocks) {
          if (seq == op.event_seq) s.clock.Join(clock);
        }
        for (auto w = e.waiting.begin(); w != e.waiting.end(); ++w) {
          if (w->first == op.event_seq) {
            if (--w->second == 0) e.waiting.erase(w);
            break;
          }
        }
        PruneEventClocks(e);
      }
      break;
    case OpKind::kFree:
      // Giving the bytes back is a write by the freeing stream: unordered users are reported.
      Access(sid, op, op.dst, /*write=*/true);
      freed_.insert(op.dst.alloc_id);
      break;
  }
  if (timing_) Time(sid, op);
  ++ops_executed_;
}

std::string SimDevice::DeadlockReport() {
  std::string text = "deadlock: work remains but no stream can progress;";
  for (StreamId sid(0); sid.value() < static_cast<int32_t>(streams_.size());
       sid = StreamId(sid.value() + 1)) {
    Stream& s = streams_[sid.value()];
    if (s.queue.empty()) continue;
    const Op& op = s.queue.front();
    absl::StrAppendFormat(&text, " [%s waits", DescribeOp(op.id));
    if (op.kind == OpKind::kWaitFlag || op.kind == OpKind::kWaitValue) {
      absl::StrAppendFormat(&text, " for flag at rank %d 0x%x = %d to reach %d", op.src.rank,
                            op.src.addr, LoadU64(op.src), op.wait_target);
    } else if (op.kind == OpKind::kWaitEvent) {
      absl::StrAppendFormat(&text, " for event %d record %d (completed %d)", op.event, op.event_seq,
                            events_[op.event.value()].completed);
    }
    absl::StrAppendFormat(&text, "; %d ops queued]", s.queue.size());
  }
  return text;
}

void SimDevice::RunReady() {
  // Whether each stream's front can run is kept rather than asked of every stream at every step:
  // the answer changes only when the front changes, when an event the front waits for is
  // recorded, or when a write reaches the flag word the front waits on. Only then is a stream
  // asked again, in stream order as all were, so the seed draws the same choice from the same
  // ready streams.
  const size_t n = streams_.size();
  // Kept between calls: no allocation per synchronization.
  StreamBits& is_ready = scheduling_.is_ready;
  StreamBits& ask = scheduling_.ask;
  StreamBits& waits_event = scheduling_.waits_event;
  std::vector<StreamBits>& waits_flag_on = scheduling_.waits_flag_on;
  std::vector<MemRef>& flag = scheduling_.flag;
  std::vector<char>& waits_flag = scheduling_.waits_flag;
  std::vector<EventId>& event = scheduling_.event;
  is_ready.Reset(n);
  ask.Reset(n);
  waits_event.Reset(n);
  waits_flag_on.resize(world_);
  for (StreamBits& on_rank : waits_flag_on) on_rank.Reset(n);
  flag.resize(n);
  waits_flag.assign(n, 0);
  event.resize(n);
  for (size_t i = 0; i < n; ++i) ask.Set(i);
  uint64_t ready_count = 0;
  const auto written = [&](const MemRef& w) {  // flag waits reading w are asked again
    const StreamBits& waiters = waits_flag_on[w.rank];
    for (size_t i = waiters.Next(0); i < n; i = waiters.Next(i + 1)) {
      const MemRef& f = flag[i];
      if (f.addr < w.end() && w.addr < f.end()) ask.Set(i);
    }
  };
  while (pending_ > 0) {
    // Streams asked for again during the pass are asked in it if they come later in stream
    // order, else at the next step: as when every stream was asked in order at every step.
    for (size_t i = ask.Next(0); i < n; i = ask.Next(i + 1)) {
      ask.Clear(i);
      Stream& s = streams_[i];
      ready_count -= is_ready.Test(i);
      is_ready.Clear(i);
      if (waits_flag[i]) {
        waits_flag_on[flag[i].rank].Clear(i);
        waits_flag[i] = 0;
      }
      waits_event.Clear(i);
      if (s.queue.empty()) continue;
      Op& op = s.queue.front();
      const bool armed = op.wait_armed;
      if (Ready(s, op)) {
        is_ready.Set(i);
        ++ready_count;
      }
      if (op.kind == OpKind::kWaitFlag || op.kind == OpKind::kWaitValue) {
        waits_flag[i] = 1;
        flag[i] = op.src;
        waits_flag_on[op.src.rank].Set(i);
      }
      if (op.kind == OpKind::kWaitEvent) {
        waits_event.Set(i);
        event[i] = op.event;
      }
      if (!armed && op.wait_armed) written(op.dst);  // arming stored the expected value
    }
    if (ready_count == 0) return;  // the caller decides whether that is a deadlock
    const size_t pick = is_ready.Nth(rng_() % ready_count);
    Op& op = streams_[pick].queue.front();
    Execute(StreamId(static_cast<int32_t>(pick)), op);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kSignal) written(op.dst);
    if (op.kind == OpKind::kSignal || op.kind == OpKind::kWriteValue) written(op.src);
    if (op.kind == OpKind::kReduce) written(op.dst_operand.mem);
    if (op.kind == OpKind::kRecord) {
      for (size_t i = waits_event.Next(0); i < n; i = waits_event.Next(i + 1)) {
        if (event[i] == op.event) ask.Set(i);
      }
    }
    streams_[pick].queue.pop_front();
    ask.Set(pick);
    --pending_;
  }
}

absl::Status SimDevice::Synchronize() {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("synchronize"));
  RunReady();
  if (pending_ > 0) {
    std::string report = DeadlockReport();
    Finding f;
    f.kind = FindingKind::kDeadlock;
    f.message = report;
    for (const Stream& s : streams_) {
      if (s.queue.empty()) continue;
      if (f.rank < 0) f.rank = s.rank;
      f.ops.push_back(OpOf(s.queue.front().id, ""));
    }
    findings_.Add(std::move(f));
    for (Stream& s : streams_) s.queue.clear();
    pending_ = 0;
    if (timing_) timing_->Synchronize();  // what did run is still timed
    return absl::FailedPreconditionError(absl::StrCat(report, " (seed ", seed_, ")"));
  }
  for (const Stream& s : streams_) host_clock_.Join(s.clock);
  host_clock_.Tick(kHostTimeline);
  if (timing_) timing_->Synchronize();
  return absl::OkStatus();
}

absl::StatusOr<IpcHandle> SimDevice::ExportMemory(const MemRef& allocation) {
  if (allocation.rank < 0 || allocation.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc export: rank is %d; ranks are 0..%d", allocation.rank, world_ - 1));
  }
  const AllocationInfo* a = memory_[allocation.rank].LiveAt(allocation.addr);
  if (a == nullptr || a->addr != allocation.addr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ipc export: rank %d 0x%x is not the start of a live allocation of the rank (export an "
        "allocation as allocate returned it; a mapping of a peer's memory cannot be exported "
        "again)",
        allocation.rank, allocation.addr));
  }
  if (allocation.alloc_id != 0 && allocation.alloc_id != a->id) {
    // A pointer kept past its tensor's free (no reference held): as CUDA, the handle exports
    // whatever allocation holds the address now, which is another tensor's (the aiter#3838 class).
    const AllocationInfo* was = memory_[allocation.rank].Find(allocation.alloc_id);
    Finding f = NewFinding(FindingKind::kUseAfterReuse, allocation.rank, allocation.addr,
                           allocation.addr + a->bytes);
    f.mem.alloc_id = a->id;
    f.alloc_tag = a->tag;
    f.ops = {FindingOp{allocation.rank, "", context_, ""}};
    f.message = absl::StrFormat(
        "rank %d exported an IPC handle of 0x%x as allocation #%d%s after it was freed%s; the "
        "block now belongs to allocation #%d '%s', which the handle exports instead; in '%s'",
        allocation.rank, allocation.addr, allocation.alloc_id,
        was != nullptr ? absl::StrFormat(" '%s'", was->tag) : std::string(),
        was != nullptr ? absl::StrFormat(" (by '%s')", was->freed_by) : std::string(), a->id,
        a->tag, context_);
    findings_.Add(std::move(f));
  }
  IpcExport e;
  e.rank = a->rank;
  e.alloc_id = a->id;
  e.addr = a->addr;
  e.bytes = a->bytes;
  e.tag = a->tag;
  e.by = context_;
  DMALAB_ASSIGN_OR_RETURN(IpcHandleBytes h, ipc_.Export(e));
  return IpcHandle{h};
}

absl::StatusOr<MemRef> SimDevice::OpenMemory(int rank, const IpcHandle& handle) {
  return OpenPeerMemory(rank, handle, nullptr, "ipc open");
}

absl::StatusOr<MemRef> SimDevice::OpenPeerMemory(int rank, const IpcHandle& handle,
                                                 const MemRef* reserved, std::string_view verb) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank is %d; ranks are 0..%d", verb, rank, world_ - 1));
  }
  absl::StatusOr<uint64_t> id = ipc_.Decode(handle.bytes, /*events=*/false);
  if (!id.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s on rank %d: %s", verb, rank, id.status().message()));
  }
  const IpcExport& e = ipc_.exported(*id);
  if (e.rank == rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s on rank %d: the handle is the rank's own allocation #%d '%s'; a process maps only its "
        "peers' memory (CUDA refuses this too): use the allocation itself",
        verb, rank, e.alloc_id, e.tag));
  }
  const IpcMapping* map = nullptr;
  if (reserved == nullptr) {
    DMALAB_ASSIGN_OR_RETURN(map, ipc_.Map(rank, *id, context_));
  } else {
    absl::StatusOr<const Reservation*> r = reservations_.ForMapping(rank, reserved->addr, e.bytes);
    if (!r.ok()) return Prefixed(absl::StrFormat("%s: ", verb), r.status());
    DMALAB_ASSIGN_OR_RETURN(map, ipc_.MapAt(rank, *id, (*r)->addr, context_));
    reservations_.SetMapping((*r)->id, map->id);
  }
  const MemRef owner{e.rank, e.addr, e.bytes, e.alloc_id, map->id};
  CheckExporterAlive(rank, *map, owner, "opened");
  return MemRef{rank, map->addr, map->bytes, 0, 0};
}

absl::Status SimDevice::CloseMemory(const MemRef& mapping) {
  if (mapping.rank < 0 || mapping.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc close: rank is %d; ranks are 0..%d", mapping.rank, world_ - 1));
  }
  DMALAB_RETURN_IF_ERROR(Prefixed("ipc close: ", ipc_.Unmap(mapping.rank, mapping.addr, context_)));
  if (AddressReservations::InWindow(mapping.rank, mapping.addr)) {
    // A mapping placed in a reserved range: the range is unmapped again.
    const Reservation* r = reservations_.At(mapping.rank, mapping.addr);
    if (r != nullptr && r->mapping != 0 && r->addr == mapping.addr) {
      reservations_.SetMapping(r->id, 0);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MemRef> SimDevice::ReserveAddress(int rank, uint64_t bytes) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reserve_address: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  DMALAB_ASSIGN_OR_RETURN(const Reservation* r, reservations_.Reserve(rank, bytes, context_));
  return MemRef{rank, r->addr, r->bytes, 0, 0};
}

absl::StatusOr<MemRef> SimDevice::OpenMemoryAt(int rank, const IpcHandle& handle,
                                               const MemRef& reserved) {
  if (reserved.rank != rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ipc open at: rank is %d, the reserved range's rank %d; both must be the opener's", rank,
        reserved.rank));
  }
  return OpenPeerMemory(rank, handle, &reserved, "ipc open at");
}

absl::Status SimDevice::ReleaseAddress(const MemRef& reserved) {
  if (reserved.rank < 0 || reserved.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("release_address: rank is %d; ranks are 0..%d", reserved.rank, world_ - 1));
  }
  absl::StatusOr<const Reservation*> r =
      reservations_.Release(reserved.rank, reserved.addr, context_);
  if (!r.ok()) return Prefixed("release_address: ", r.status());
  if ((*r)->mapping != 0) {
    // Releasing unmaps, as cuMemUnmap before cuMemAddressFree.
    DMALAB_RETURN_IF_ERROR(ipc_.Unmap(reserved.rank, (*r)->addr, context_));
    reservations_.SetMapping((*r)->id, 0);
  }
  return absl::OkStatus();
}

absl::StatusOr<IpcHandle> SimDevice::ExportEvent(EventId event) {
  if (event.value() < 0 || event.value() >= static_cast<int32_t>(events_.size())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc event export: event %d does not exist", event));
  }
  IpcExport e;
  e.rank = events_[event.value()].rank;
  e.event = event.value();
  e.by = context_;
  DMALAB_ASSIGN_OR_RETURN(IpcHandleBytes h, ipc_.Export(e));
  return IpcHandle{h};
}

absl::StatusOr<EventId> SimDevice::OpenEvent(int rank, const IpcHandle& handle) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc event open: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  absl::StatusOr<uint64_t> id = ipc_.Decode(handle.bytes, /*events=*/true);
  if (!id.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc event open on rank %d: %s", rank, id.status().message()));
  }
  const EventId event(ipc_.exported(*id).event);
  events_[event.value()].openers.insert(rank);
  return event;
}

absl::StatusOr<bool> SimDevice::RankIdle(int rank) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("synchronize"));
  RunReady();
  for (const Stream& s : streams_) {
    if (s.rank == rank && !s.queue.empty()) return false;
  }
  for (const Stream& s : streams_) {
    if (s.rank == rank) host_clock_.Join(s.clock);
  }
  host_clock_.Tick(kHostTimeline);
  return true;
}

absl::Status SimDevice::CompleteForHost() {
  if (!rank_host_access_) return Synchronize();
  RunReady();
  return absl::OkStatus();
}

absl::Status SimDevice::WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  rank_host_access_ = true;
  absl::Status s = Write(dst, bytes);
  rank_host_access_ = false;
  return s;
}

absl::Status SimDevice::ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) {
  rank_host_access_ = true;
  absl::Status s = Read(src, bytes);
  rank_host_access_ = false;
  return s;
}

int64_t SimDevice::LiveAllocations(int rank) const { return memory_[rank].LiveCount(); }

absl::Status SimDevice::SetTopology(const Topology* topology) {
  if (topology == nullptr) {
    timing_.reset();
    return absl::OkStatus();
  }
  if (topology->max_ranks() < world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("set topology: '%s' holds %d ranks; the device has %d", topology->name,
                        topology->max_ranks(), world_));
  }
  timing_ = std::make_unique<TimingModel>(*topology);
  return absl::OkStatus();
}

void SimDevice::Time(StreamId sid, const Op& op) {
  TimedOp t;
  t.kind = TimedKind(op.kind);
  t.stream = sid.value();
  t.rank = streams_[sid.value()].rank;
  t.host_us = op.host_us;
  switch (op.kind) {
    case OpKind::kCopy:
      t.src_rank = op.src.rank;
      t.dst_rank = op.dst.rank;
      t.bytes = op.dst.bytes;
      break;
    case OpKind::kReduce: {
      t.bytes = op.dst_operand.mem.bytes;
      bool coded = op.dst_operand.codec != Codec::kPlain;
      for (const Operand& term : op.terms) {
        t.bytes += term.mem.bytes;
        coded = coded || term.codec != Codec::kPlain;
      }
      if (coded) {
        t.plain_bytes =
            static_cast<uint64_t>(op.elems) * DTypeBytes(op.dtype) * (op.terms.size() + 1);
        const bool coded_dst = op.dst_operand.codec != Codec::kPlain;
        if (op.terms.size() == 1) {
          t.coded = coded_dst ? CodedKernel::kEncode : CodedKernel::kDecode;
        } else {
          t.coded = coded_dst ? CodedKernel::kRequantizingAdd : CodedKernel::kDequantizingAdd;
        }
      }
      break;
    }
    case OpKind::kSignal:
      t.flag = {op.src.rank, op.src.addr};
      t.value = LoadU64(op.src);  // just stored by Execute
      break;
    case OpKind::kWriteValue:
    case OpKind::kWaitFlag:
    case OpKind::kWaitValue:
      t.flag = {op.src.rank, op.src.addr};
      t.value = op.wait_target;
      break;
    case OpKind::kRecord:
    case OpKind::kWaitEvent:
      t.event = op.event.value();
      t.event_seq = op.event_seq;
      break;
    case OpKind::kFree:
      break;
  }
  timing_->Executed(t);
}

absl::Status SimDevice::Write(const MemRef& dst_view, absl::Span<const uint8_t> bytes) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("write"));
  DMALAB_RETURN_IF_ERROR(CompleteForHost());
  MemRef dst = dst_view;
  DMALAB_RETURN_IF_ERROR(CheckMem(dst, "write dst"));
  if (bytes.size() != dst.bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("write: dst is %d bytes, data is %d; must match", dst.bytes, bytes.size()));
  }
  CheckLifetime(-1, dst);
  races_.Write(dst.rank, dst.addr, dst.end(),
               dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  if (fidelity_ == Fidelity::kValues) {
    std::memcpy(Overwritten(memory_[dst.rank], dst), bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  // Shadow: the bytes' contents name their origin; small writes keep their words' values.
  shadow_[dst.rank].Assign(dst.addr, dst.end(), MakeOrigin({kHostBytesTag, Xxh64(bytes)}), 0);
  if (dst.bytes <= kShadowKeptWriteBytes && dst.addr % 8 == 0) {
    for (uint64_t at = 0; at + 8 <= dst.bytes; at += 8) {
      uint64_t v;
      std::memcpy(&v, bytes.data() + at, 8);
      shadow_[dst.rank].StoreWord(dst.addr + at, v);
    }
  }
  return absl::OkStatus();
}

absl::Status SimDevice::WriteGenerated(const MemRef& dst_view,
                                       std::shared_ptr<const GeneratedContent> content) {
  if (fidelity_ != Fidelity::kValues) return Device::WriteGenerated(dst_view, std::move(content));
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("write"));
  DMALAB_RETURN_IF_ERROR(CompleteForHost());
  MemRef dst = dst_view;
  DMALAB_RETURN_IF_ERROR(CheckMem(dst, "write dst"));
  CheckLifetime(-1, dst);
  races_.Write(dst.rank, dst.addr, dst.end(),
               dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  // Produced only where read (sim/sim_memory.h).
  return memory_[dst.rank].WriteLazy(dst.addr, dst.bytes, std::move(content), 0);
}

absl::Status SimDevice::CheckShadowCall(std::string_view what, MemRef& m) {
  if (fidelity_ != Fidelity::kShadow) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the simulator runs in the values fidelity; it keeps bytes, not "
                        "provenance (use Read and Write)",
                        what));
  }
  return CheckMem(m, what);
}

absl::Status SimDevice::WriteShadow(const MemRef& dst_view, uint64_t content) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("shadow write"));
  DMALAB_RETURN_IF_ERROR(CompleteForHost());
  MemRef dst = dst_view;
  DMALAB_RETURN_IF_ERROR(CheckShadowCall("shadow write dst", dst));
  CheckLifetime(-1, dst);
  races_.Write(dst.rank, dst.addr, dst.end(),
               dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  shadow_[dst.rank].Assign(dst.addr, dst.end(), MakeOrigin({kHostContentTag, content}), 0);
  return absl::OkStatus();
}

absl::StatusOr<Provenance> SimDevice::ReadProvenance(const MemRef& src_view) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("provenance read"));
  DMALAB_RETURN_IF_ERROR(CompleteForHost());
  MemRef src = src_view;
  DMALAB_RETURN_IF_ERROR(CheckShadowCall("provenance read src", src));
  CheckLifetime(-1, src);
  races_.Read(src.rank, src.addr, src.end(),
              dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  return shadow_[src.rank].Get(src.addr, src.end());
}

absl::Status SimDevice::StartHostRead(MemRef& src, uint64_t buffer_bytes) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("read"));
  DMALAB_RETURN_IF_ERROR(CompleteForHost());
  DMALAB_RETURN_IF_ERROR(CheckMem(src, "read src"));
  if (buffer_bytes != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "read: src is %d bytes, buffer is %d; must match", src.bytes, buffer_bytes));
  }
  if (fidelity_ == Fidelity::kShadow) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "read of %s: the shadow fidelity keeps no values (read provenance, or replay in the "
        "values fidelity)",
        DescribeMemory(src.rank, src.addr, src.end())));
  }
  CheckLifetime(-1, src);
  races_.Read(src.rank, src.addr, src.end(),
              dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  return absl::OkStatus();
}

absl::Status SimDevice::Read(const MemRef& src_view, absl::Span<uint8_t> bytes) {
  MemRef src = src_view;
  DMALAB_RETURN_IF_ERROR(StartHostRead(src, bytes.size()));
  return memory_[src.rank].CopyOut(src.addr, src.bytes, bytes.data());
}

absl::Status SimDevice::ReadPiecesChecked(absl::Span<const MemRef> srcs, uint64_t bytes,
                                          uint64_t piece_bytes, PieceConsumer consume) {
  // Every check first, in src order as Reads of each would make them: copying changes nothing
  // the checkers see, so their findings are those of a Read per src, whatever the piece size.
  std::vector<MemRef> started;
  absl::Status failed;
  for (const MemRef& view : srcs) {
    MemRef src = view;
    failed = StartHostRead(src, src.bytes);
    if (!failed.ok()) break;
    started.push_back(src);
  }
  read_pieces_.resize(started.size() * piece_bytes);
  DMALAB_RETURN_IF_ERROR(HandOverPieces(
      started.size(), bytes, piece_bytes,
      [&](size_t i, uint64_t offset, uint64_t n) -> absl::StatusOr<absl::Span<const uint8_t>> {
        uint8_t* at = read_pieces_.data() + i * piece_bytes;
        DMALAB_RETURN_IF_ERROR(memory_[started[i].rank].CopyOut(started[i].addr + offset, n, at));
        return absl::MakeConstSpan(at, n);
      },
      consume));
  return failed;
}

absl::StatusOr<GraphId> SimDevice::CaptureGraph(const std::function<absl::Status()>& body) {
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError("capture graph: a graph is already being captured");
  }
  Graph graph;
  graph.pool = static_cast<uint32_t>(graphs_.size() + 1);
  capture_ = &graph;
  absl::Status s = body();
  capture_ = nullptr;
  if (!s.ok()) return s;
  graphs_.push_back(std::move(graph));
  return GraphId(static_cast<int32_t>(graphs_.size() - 1));
}

absl::StatusOr<EventId> SimDevice::LaunchEvent(std::map<int, EventId>& pool, int key, int rank) {
  if (auto it = pool.find(key); it != pool.end()) return it->second;
  absl::StatusOr<EventId> e = CreateEvent(rank);
  if (e.ok()) pool[key] = *e;
  return e;
}

absl::Status SimDevice::LaunchGraph(GraphId graph) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("launch graph"));
  if (graph.value() < 0 || graph.value() >= static_cast<int32_t>(graphs_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch graph: graph %d does not exist (%d captured)", graph, graphs_.size()));
  }
  const Graph& g = graphs_[graph.value()];
  if (timing_) timing_->LaunchGraph();
  launching_ = true;
  absl::Cleanup done = [this] { launching_ = false; };
  // Fork: every stream the graph uses starts after the work already on its rank's compute
  // stream; join: later work on the compute stream starts after all of the graph's.
  std::set<StreamId> side;
  for (const CapturedOp& c : g.ops) {
    if (c.stream != compute_streams_[streams_[c.stream.value()].rank]) side.insert(c.stream);
  }
  std::set<int> forked;
  for (StreamId sid : side) {
    const int rank = streams_[sid.value()].rank;
    DMALAB_ASSIGN_OR_RETURN(EventId fork, LaunchEvent(fork_events_, rank, rank));
    if (forked.insert(rank).second) {
      DMALAB_RETURN_IF_ERROR(RecordEvent(fork, compute_streams_[rank]));
    }
    DMALAB_RETURN_IF_ERROR(WaitEvent(sid, fork));
  }
  const std::string prefix = absl::StrFormat("graph %d:", graph);
  for (const CapturedOp& c : g.ops) {
    Op op = c.op;
    if (op.kind == OpKind::kRecord) op.event_seq = ++events_[op.event.value()].records;
    if (op.kind == OpKind::kWaitEvent) op.event_seq = events_[op.event.value()].records;
    if (op.deferred) {
      // Findings name the captured op; the context of what is enqueued stays the launch's.
      const std::string launch_context = context_;
      context_ = absl::StrFormat("%s %s (%s)", prefix, c.label, launch_context);
      absl::Status resolved = ResolveDeferred(op);
      context_ = launch_context;
      if (!resolved.ok()) return resolved;
    }
    DMALAB_RETURN_IF_ERROR(Enqueue(c.stream, std::move(op), absl::StrCat(prefix, " ", c.label)));
  }
  for (StreamId sid : side) {
    const int rank = streams_[sid.value()].rank;
    DMALAB_ASSIGN_OR_RETURN(EventId join, LaunchEvent(join_events_, sid.value(), rank));
    DMALAB_RETURN_IF_ERROR(RecordEvent(join, sid));
    DMALAB_RETURN_IF_ERROR(WaitEvent(compute_streams_[rank], join));
  }
  return absl::OkStatus();
}

std::function<DeviceFindings()> NewFindingsPoller(const SimDevice& device) {
  struct Seen {
    size_t kept = 0;
    int64_t total = 0;
  };
  auto seen = std::make_shared<Seen>();
  return [&device, seen]() {
    DeviceFindings out;
    const std::vector<Finding>& all = device.findings().findings();
    for (; seen->kept < all.size(); ++seen->kept) {
      out.findings.push_back(all[seen->kept].ToDeviceFinding());
    }
    const int64_t total = device.findings().total();
    out.not_kept = (total - seen->total) - static_cast<int64_t>(out.findings.size());
    seen->total = total;
    return out;
  };
}

}  // namespace dmalab
