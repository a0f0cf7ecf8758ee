#include "common/plugin/rank_api.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/status_macros.h"
#include "common/plugin/abi_convert.h"

namespace dmalab {

static_assert(DMALAB_IPC_HANDLE_BYTES == kIpcHandleBytes,
              "the ABI's IPC handles carry a device's IpcHandle unchanged");

namespace {

RankApi* Self(void* ctx) { return static_cast<RankApi*>(ctx); }

int32_t Null(void* ctx, const char* function, const char* argument) {
  return Self(ctx)->Done(
      absl::InvalidArgumentError(absl::StrFormat("%s: argument '%s' is NULL", function, argument)));
}

// --- dmalab_rank_api -------------------------------------------------------------------------

const char* ApiLastError(void* ctx) { return Self(ctx)->last_error(); }

int32_t ApiAllocate(void* ctx, uint64_t bytes, const char* tag, dmalab_mem* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (out == nullptr) return Null(ctx, "allocate", "out");
  absl::StatusOr<MemRef> m = self->device()->Allocate(self->rank(), bytes, LabelFromAbi(tag));
  if (!m.ok()) return self->Done(m.status());
  self->allocations[m->addr] = absl::StrFormat("'%s' (%d bytes)", LabelFromAbi(tag), m->bytes);
  self->Handed(*m);
  *out = MemToAbi(*m);
  return DMALAB_OK;
}

int32_t ApiFree(void* ctx, const dmalab_mem* allocation) {
  RankApi* self = Self(ctx);
  self->Step();
  if (allocation == nullptr) return Null(ctx, "free", "allocation");
  absl::StatusOr<MemRef> m = self->FromPlugin(allocation, "free");
  if (!m.ok()) return self->Done(m.status());
  if (self->allocations.erase(m->addr) == 0) {
    const std::string why = absl::StrFormat(
        "free of rank %d address 0x%x (%d bytes) refused: the instance does not own it (it frees "
        "only allocations it made and has not handed over as default-form results)",
        m->rank, m->addr, m->bytes);
    self->violations_.push_back(why);
    return self->Done(absl::InvalidArgumentError(why));
  }
  return self->Done(self->device()->Free(*m));
}

int32_t ApiComputeStream(void* ctx, dmalab_stream* out) {
  RankApi* self = Self(ctx);
  if (out == nullptr) return Null(ctx, "compute_stream", "out");
  out->id = self->device()->ComputeStream(self->rank()).value();
  return DMALAB_OK;
}

int32_t ApiCreateStream(void* ctx, int32_t kind, const char* name, dmalab_stream* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (out == nullptr) return Null(ctx, "create_stream", "out");
  absl::StatusOr<StreamKind> k = StreamKindFromAbi(kind);
  if (!k.ok()) return self->Done(k.status());
  absl::StatusOr<StreamId> s = self->device()->CreateStream(self->rank(), *k, LabelFromAbi(name));
  if (!s.ok()) return self->Done(s.status());
  self->streams.insert(s->value());
  out->id = s->value();
  return DMALAB_OK;
}

int32_t ApiDestroyStream(void* ctx, dmalab_stream stream) {
  RankApi* self = Self(ctx);
  self->Step();
  if (self->streams.erase(stream.id) == 0) {
    return self->Done(absl::InvalidArgumentError(absl::StrFormat(
        "destroy_stream: stream %d is not one this instance created (or it was destroyed "
        "already)",
        stream.id)));
  }
  return DMALAB_OK;
}

int32_t ApiCreateEvent(void* ctx, dmalab_event* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (out == nullptr) return Null(ctx, "create_event", "out");
  absl::StatusOr<EventId> e = self->device()->CreateEvent(self->rank());
  if (!e.ok()) return self->Done(e.status());
  self->events.insert(e->value());
  out->id = e->value();
  return DMALAB_OK;
}

int32_t ApiDestroyEvent(void* ctx, dmalab_event event) {
  RankApi* self = Self(ctx);
  self->Step();
  if (self->events.erase(event.id) == 0) {
    return self->Done(absl::InvalidArgumentError(absl::StrFormat(
        "destroy_event: event %d is not one this instance created or opened (or it was "
        "destroyed already)",
        event.id)));
  }
  return DMALAB_OK;
}

int32_t ApiRecordEvent(void* ctx, dmalab_event event, dmalab_stream stream) {
  RankApi* self = Self(ctx);
  self->Step();
  if (absl::Status s = self->CheckEvent(event, "record_event"); !s.ok()) return self->Done(s);
  if (absl::Status s = self->CheckStream(stream, "record_event"); !s.ok()) return self->Done(s);
  return self->Done(self->device()->RecordEvent(EventId(event.id), StreamId(stream.id)));
}

int32_t ApiWaitEvent(void* ctx, dmalab_stream stream, dmalab_event event) {
  RankApi* self = Self(ctx);
  self->Step();
  if (absl::Status s = self->CheckEvent(event, "wait_event"); !s.ok()) return self->Done(s);
  if (absl::Status s = self->CheckStream(stream, "wait_event"); !s.ok()) return self->Done(s);
  return self->Done(self->device()->WaitEvent(StreamId(stream.id), EventId(event.id)));
}

int32_t ApiCopy(void* ctx, dmalab_stream stream, const dmalab_mem* dst, const dmalab_mem* src,
                const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (dst == nullptr) return Null(ctx, "copy", "dst");
  if (src == nullptr) return Null(ctx, "copy", "src");
  if (absl::Status s = self->CheckStream(stream, "copy"); !s.ok()) return self->Done(s);
  absl::StatusOr<MemRef> d = self->FromPlugin(dst, "copy dst");
  if (!d.ok()) return self->Done(d.status());
  absl::StatusOr<MemRef> s = self->FromPlugin(src, "copy src");
  if (!s.ok()) return self->Done(s.status());
  return self->Done(self->device()->Copy(StreamId(stream.id), *d, *s, LabelFromAbi(label)));
}

int32_t ApiReduce(void* ctx, dmalab_stream stream, int32_t dtype, const dmalab_mem* dst,
                  const dmalab_mem* terms, int32_t n_terms, int64_t elems, const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (dst == nullptr) return Null(ctx, "reduce", "dst");
  if (terms == nullptr) return Null(ctx, "reduce", "terms");
  if (absl::Status s = self->CheckStream(stream, "reduce"); !s.ok()) return self->Done(s);
  absl::StatusOr<DType> t = DTypeFromAbi(dtype);
  if (!t.ok()) return self->Done(t.status());
  if (n_terms < 1 || n_terms > 64) {
    return self->Done(absl::InvalidArgumentError(
        absl::StrFormat("reduce: n_terms is %d; allowed 1..64", n_terms)));
  }
  absl::StatusOr<MemRef> d = self->FromPlugin(dst, "reduce dst");
  if (!d.ok()) return self->Done(d.status());
  std::vector<Operand> operands;
  for (int32_t i = 0; i < n_terms; ++i) {
    absl::StatusOr<MemRef> m = self->FromPlugin(&terms[i], "reduce term");
    if (!m.ok()) return self->Done(m.status());
    operands.push_back(Operand{*m});
  }
  return self->Done(self->device()->Reduce(StreamId(stream.id), *t, Operand{*d}, operands, elems,
                                           LabelFromAbi(label)));
}

int32_t ApiSignalFlag(void* ctx, dmalab_stream stream, const dmalab_mem* counter,
                      const dmalab_mem* flag, const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (counter == nullptr) return Null(ctx, "signal_flag", "counter");
  if (flag == nullptr) return Null(ctx, "signal_flag", "flag");
  if (absl::Status s = self->CheckStream(stream, "signal_flag"); !s.ok()) return self->Done(s);
  absl::StatusOr<MemRef> c = self->FromPlugin(counter, "signal_flag counter");
  if (!c.ok()) return self->Done(c.status());
  absl::StatusOr<MemRef> f = self->FromPlugin(flag, "signal_flag flag");
  if (!f.ok()) return self->Done(f.status());
  return self->Done(self->device()->SignalFlag(StreamId(stream.id), *c, *f, LabelFromAbi(label)));
}

int32_t ApiWaitFlag(void* ctx, dmalab_stream stream, const dmalab_mem* expected,
                    const dmalab_mem* flag, const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (expected == nullptr) return Null(ctx, "wait_flag", "expected");
  if (flag == nullptr) return Null(ctx, "wait_flag", "flag");
  if (absl::Status s = self->CheckStream(stream, "wait_flag"); !s.ok()) return self->Done(s);
  absl::StatusOr<MemRef> e = self->FromPlugin(expected, "wait_flag expected");
  if (!e.ok()) return self->Done(e.status());
  absl::StatusOr<MemRef> f = self->FromPlugin(flag, "wait_flag flag");
  if (!f.ok()) return self->Done(f.status());
  return self->Done(self->device()->WaitFlag(StreamId(stream.id), *e, *f, LabelFromAbi(label)));
}

int32_t ApiWriteValue(void* ctx, dmalab_stream stream, const dmalab_mem* dst, uint64_t value,
                      const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (dst == nullptr) return Null(ctx, "write_value", "dst");
  if (absl::Status s = self->CheckStream(stream, "write_value"); !s.ok()) return self->Done(s);
  absl::StatusOr<MemRef> d = self->FromPlugin(dst, "write_value dst");
  if (!d.ok()) return self->Done(d.status());
  return self->Done(
      self->device()->WriteValue(StreamId(stream.id), *d, value, LabelFromAbi(label)));
}

int32_t ApiWaitValue(void* ctx, dmalab_stream stream, const dmalab_mem* flag, uint64_t value,
                     const char* label) {
  RankApi* self = Self(ctx);
  self->Step();
  if (flag == nullptr) return Null(ctx, "wait_value", "flag");
  if (absl::Status s = self->CheckStream(stream, "wait_value"); !s.ok()) return self->Done(s);
  absl::StatusOr<MemRef> f = self->FromPlugin(flag, "wait_value flag");
  if (!f.ok()) return self->Done(f.status());
  return self->Done(self->device()->WaitValue(StreamId(stream.id), *f, value, LabelFromAbi(label)));
}

int32_t ApiWrite(void* ctx, const dmalab_mem* dst, const void* bytes, uint64_t n) {
  RankApi* self = Self(ctx);
  self->Step();
  if (dst == nullptr) return Null(ctx, "write", "dst");
  if (bytes == nullptr && n > 0) return Null(ctx, "write", "bytes");
  absl::StatusOr<MemRef> d = self->FromPlugin(dst, "write dst");
  if (!d.ok()) return self->Done(d.status());
  if (absl::Status s = self->SyncRank(); !s.ok()) return self->Done(s);
  return self->Done(
      self->device()->WriteRank(*d, absl::MakeConstSpan(static_cast<const uint8_t*>(bytes), n)));
}

int32_t ApiRead(void* ctx, const dmalab_mem* src, void* bytes, uint64_t n) {
  RankApi* self = Self(ctx);
  self->Step();
  if (src == nullptr) return Null(ctx, "read", "src");
  if (bytes == nullptr && n > 0) return Null(ctx, "read", "bytes");
  absl::StatusOr<MemRef> s = self->FromPlugin(src, "read src");
  if (!s.ok()) return self->Done(s.status());
  if (absl::Status st = self->SyncRank(); !st.ok()) return self->Done(st);
  return self->Done(self->device()->ReadRank(*s, absl::MakeSpan(static_cast<uint8_t*>(bytes), n)));
}

int32_t ApiSynchronize(void* ctx) {
  RankApi* self = Self(ctx);
  self->Step();
  return self->Done(self->SyncRank());
}

int32_t ApiIpcGetMemHandle(void* ctx, const dmalab_mem* allocation, dmalab_ipc_mem_handle* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (allocation == nullptr) return Null(ctx, "ipc_get_mem_handle", "allocation");
  if (out == nullptr) return Null(ctx, "ipc_get_mem_handle", "out");
  absl::StatusOr<MemRef> m = self->FromPlugin(allocation, "ipc_get_mem_handle");
  if (!m.ok()) return self->Done(m.status());
  absl::StatusOr<IpcHandle> h = self->device()->ExportMemory(*m);
  if (!h.ok()) return self->Done(h.status());
  std::memcpy(out->bytes, h->bytes.data(), DMALAB_IPC_HANDLE_BYTES);
  return DMALAB_OK;
}

int32_t ApiIpcOpenMemHandle(void* ctx, const dmalab_ipc_mem_handle* handle, dmalab_mem* mapping) {
  RankApi* self = Self(ctx);
  self->Step();
  if (handle == nullptr) return Null(ctx, "ipc_open_mem_handle", "handle");
  if (mapping == nullptr) return Null(ctx, "ipc_open_mem_handle", "mapping");
  IpcHandle h;
  std::memcpy(h.bytes.data(), handle->bytes, DMALAB_IPC_HANDLE_BYTES);
  absl::StatusOr<MemRef> m = self->device()->OpenMemory(self->rank(), h);
  if (!m.ok()) return self->Done(m.status());
  self->Handed(*m);  // ranges inside it resolve to the mapping
  self->mappings.emplace(m->addr, absl::StrFormat("[0x%x, 0x%x)", m->addr, m->end()));
  *mapping = MemToAbi(*m);
  return DMALAB_OK;
}

int32_t ApiIpcCloseMemHandle(void* ctx, const dmalab_mem* mapping) {
  RankApi* self = Self(ctx);
  self->Step();
  if (mapping == nullptr) return Null(ctx, "ipc_close_mem_handle", "mapping");
  absl::StatusOr<MemRef> m = self->FromPlugin(mapping, "ipc_close_mem_handle");
  if (!m.ok()) return self->Done(m.status());
  if (absl::Status s = self->device()->CloseMemory(*m); !s.ok()) return self->Done(s);
  if (auto it = self->mappings.find(m->addr); it != self->mappings.end()) self->mappings.erase(it);
  return DMALAB_OK;
}

int32_t ApiReserveAddress(void* ctx, uint64_t bytes, dmalab_mem* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (out == nullptr) return Null(ctx, "reserve_address", "out");
  absl::StatusOr<MemRef> m = self->device()->ReserveAddress(self->rank(), bytes);
  if (!m.ok()) return self->Done(m.status());
  self->reservations[m->addr] = absl::StrFormat("[0x%x, 0x%x)", m->addr, m->end());
  *out = MemToAbi(*m);
  return DMALAB_OK;
}

int32_t ApiIpcOpenMemHandleAt(void* ctx, const dmalab_ipc_mem_handle* handle,
                              const dmalab_mem* reserved, dmalab_mem* mapping) {
  RankApi* self = Self(ctx);
  self->Step();
  if (handle == nullptr) return Null(ctx, "ipc_open_mem_handle_at", "handle");
  if (reserved == nullptr) return Null(ctx, "ipc_open_mem_handle_at", "reserved");
  if (mapping == nullptr) return Null(ctx, "ipc_open_mem_handle_at", "mapping");
  absl::StatusOr<MemRef> at = self->FromPlugin(reserved, "ipc_open_mem_handle_at");
  if (!at.ok()) return self->Done(at.status());
  IpcHandle h;
  std::memcpy(h.bytes.data(), handle->bytes, DMALAB_IPC_HANDLE_BYTES);
  absl::StatusOr<MemRef> m = self->device()->OpenMemoryAt(self->rank(), h, *at);
  if (!m.ok()) return self->Done(m.status());
  self->Handed(*m);  // as ipc_open_mem_handle: ranges inside it resolve to the mapping
  self->mappings.emplace(m->addr,
                         absl::StrFormat("[0x%x, 0x%x) in a reserved range", m->addr, m->end()));
  *mapping = MemToAbi(*m);
  return DMALAB_OK;
}

int32_t ApiReleaseAddress(void* ctx, const dmalab_mem* reserved) {
  RankApi* self = Self(ctx);
  self->Step();
  if (reserved == nullptr) return Null(ctx, "release_address", "reserved");
  absl::StatusOr<MemRef> m = self->FromPlugin(reserved, "release_address");
  if (!m.ok()) return self->Done(m.status());
  if (absl::Status s = self->device()->ReleaseAddress(*m); !s.ok()) return self->Done(s);
  // Releasing closed the mapping placed there, if any.
  self->reservations.erase(m->addr);
  self->mappings.erase(m->addr);
  return DMALAB_OK;
}

int32_t ApiIpcGetEventHandle(void* ctx, dmalab_event event, dmalab_ipc_event_handle* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (out == nullptr) return Null(ctx, "ipc_get_event_handle", "out");
  if (absl::Status s = self->CheckEvent(event, "ipc_get_event_handle"); !s.ok()) {
    return self->Done(s);
  }
  absl::StatusOr<IpcHandle> h = self->device()->ExportEvent(EventId(event.id));
  if (!h.ok()) return self->Done(h.status());
  std::memcpy(out->bytes, h->bytes.data(), DMALAB_IPC_HANDLE_BYTES);
  return DMALAB_OK;
}

int32_t ApiIpcOpenEventHandle(void* ctx, const dmalab_ipc_event_handle* handle, dmalab_event* out) {
  RankApi* self = Self(ctx);
  self->Step();
  if (handle == nullptr) return Null(ctx, "ipc_open_event_handle", "handle");
  if (out == nullptr) return Null(ctx, "ipc_open_event_handle", "out");
  IpcHandle h;
  std::memcpy(h.bytes.data(), handle->bytes, DMALAB_IPC_HANDLE_BYTES);
  absl::StatusOr<EventId> e = self->device()->OpenEvent(self->rank(), h);
  if (!e.ok()) return self->Done(e.status());
  self->events.insert(e->value());
  out->id = e->value();
  return DMALAB_OK;
}

int32_t ApiIsCapturing(void* ctx) {
  RankApi* self = Self(ctx);
  return self->device()->IsCapturing(self->device()->ComputeStream(self->rank())) ? 1 : 0;
}

void* ApiNativeStream(void* ctx, dmalab_stream stream) {
  return Self(ctx)->device()->NativeStream(StreamId(stream.id));
}

void* ApiNativePointer(void* ctx, const dmalab_mem* mem) {
  if (mem == nullptr) return nullptr;
  absl::StatusOr<MemRef> m = Self(ctx)->FromPlugin(mem, "native_pointer");
  return m.ok() ? Self(ctx)->device()->NativePointer(*m) : nullptr;
}

int32_t ApiNativeDevice(void* ctx) {
  return Self(ctx)->device()->NativeDeviceOrdinal(Self(ctx)->rank());
}

}  // namespace

RankApi::RankApi(SpmdHost* host, int rank) : host_(host), rank_(rank) {
  api_.struct_size = sizeof(dmalab_rank_api);
  api_.abi_version = DMALAB_PLUGIN_ABI_VERSION_2;
  api_.ctx = this;
  api_.rank = rank;
  api_.world_size = host->device->world_size();
  api_.backend = host->device->name() == "sim" ? DMALAB_BACKEND_SIM : DMALAB_BACKEND_CUDA;
  api_.last_error = ApiLastError;
  api_.allocate = ApiAllocate;
  api_.free = ApiFree;
  api_.compute_stream = ApiComputeStream;
  api_.create_stream = ApiCreateStream;
  api_.destroy_stream = ApiDestroyStream;
  api_.create_event = ApiCreateEvent;
  api_.destroy_event = ApiDestroyEvent;
  api_.record_event = ApiRecordEvent;
  api_.wait_event = ApiWaitEvent;
  api_.copy = ApiCopy;
  api_.reduce = ApiReduce;
  api_.signal_flag = ApiSignalFlag;
  api_.wait_flag = ApiWaitFlag;
  api_.write_value = ApiWriteValue;
  api_.wait_value = ApiWaitValue;
  api_.write = ApiWrite;
  api_.read = ApiRead;
  api_.synchronize = ApiSynchronize;
  api_.ipc_get_mem_handle = ApiIpcGetMemHandle;
  api_.ipc_open_mem_handle = ApiIpcOpenMemHandle;
  api_.ipc_close_mem_handle = ApiIpcCloseMemHandle;
  api_.ipc_get_event_handle = ApiIpcGetEventHandle;
  api_.ipc_open_event_handle = ApiIpcOpenEventHandle;
  api_.is_capturing = ApiIsCapturing;
  api_.native_stream = ApiNativeStream;
  api_.native_pointer = ApiNativePointer;
  api_.native_device = ApiNativeDevice;
  api_.reserve_address = ApiReserveAddress;
  api_.ipc_open_mem_handle_at = ApiIpcOpenMemHandleAt;
  api_.release_address = ApiReleaseAddress;
}

void RankApi::Step() {
  ++host_->epoch;
  if (host_->threads != nullptr) host_->threads->Yield(rank_);
}

int32_t RankApi::Done(const absl::Status& s) {
  if (s.ok()) return DMALAB_OK;
  error_ = std::string(s.message());
  if (absl::IsUnimplemented(s)) return DMALAB_ERROR_UNSUPPORTED;
  if (absl::IsInvalidArgument(s) || absl::IsOutOfRange(s) || absl::IsFailedPrecondition(s) ||
      absl::IsNotFound(s)) {
    return DMALAB_ERROR_BAD_ARGUMENT;
  }
  return DMALAB_ERROR_INTERNAL;
}

absl::StatusOr<MemRef> RankApi::FromPlugin(const dmalab_mem* m, std::string_view what) const {
  if (m->rank != rank_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the range is on rank %d; rank %d's instance addresses only its own rank's memory "
        "(a peer's memory through an IPC mapping, which is a range on the own rank)",
        what, m->rank, rank_));
  }
  return origins_.Resolve(MemRef{m->rank, m->addr, m->bytes, m->alloc_id});
}

absl::Status RankApi::CheckStream(dmalab_stream s, std::string_view what) const {
  if (s.id == device()->ComputeStream(rank_).value() || streams.contains(s.id)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: stream %d is not one of rank %d's instance (its compute stream or a stream it "
      "created and has not destroyed)",
      what, s.id, rank_));
}

absl::Status RankApi::CheckEvent(dmalab_event e, std::string_view what) const {
  if (events.contains(e.id)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: event %d is not one of rank %d's instance (an event it created or opened and has not "
      "destroyed)",
      what, e.id, rank_));
}

absl::Status RankApi::HandOver(const MemRef& result, std::string_view call) {
  if (result.rank == rank_ && allocations.erase(result.addr) > 0) return absl::OkStatus();
  return absl::AbortedError(absl::StrFormat(
      "%s: rank %d's result [0x%x, +%d) is not an allocation the instance made and owns: a "
      "default-form result is fresh storage handed to the caller",
      call, rank_, result.addr, result.bytes));
}

absl::Status RankApi::SyncRank() {
  Device* d = device();
  // A deterministic device (the simulator) progresses only when a host enqueues: wait for
  // another rank's host call. A real GPU progresses by itself: just let the others run.
  // A rank process: the peers are other processes that progress by themselves, and the device is
  // this rank's alone; its Synchronize waits, bounded by the device (a flag that never comes is
  // its error, not a hang).
  if (host_->threads == nullptr) return d->Synchronize();
  const bool simulated = d->seed() != 0 || d->name() == "sim";
  while (true) {
    DMALAB_ASSIGN_OR_RETURN(bool idle, d->RankIdle(rank_));
    if (idle) return absl::OkStatus();
    if (!simulated) {
      host_->threads->Yield(rank_);
      continue;
    }
    const uint64_t seen = host_->epoch;
    if (!host_->threads->Block(rank_, [&] { return host_->epoch != seen; })) {
      // Nobody can enqueue anything any more: the device reports the deadlock.
      return d->Synchronize();
    }
  }
}

HeldResources RankApi::held() const {
  return HeldResources{static_cast<int64_t>(allocations.size()),
                       static_cast<int64_t>(mappings.size()), static_cast<int64_t>(streams.size()),
                       static_cast<int64_t>(events.size()),
                       static_cast<int64_t>(reservations.size())};
}

std::string RankApi::DescribeHeld() const {
  std::vector<std::string> parts;
  auto list = [](const auto& m) {
    std::vector<std::string> v;
    for (const auto& [addr, text] : m) v.push_back(text);
    return absl::StrJoin(v, ", ");
  };
  if (!allocations.empty()) {
    parts.push_back(
        absl::StrFormat("%d allocation(s) (%s)", allocations.size(), list(allocations)));
  }
  if (!mappings.empty()) {
    parts.push_back(absl::StrFormat("%d IPC mapping(s) (%s)", mappings.size(), list(mappings)));
  }
  if (!reservations.empty()) {
    parts.push_back(absl::StrFormat("%d reserved address range(s) (%s)", reservations.size(),
                                    list(reservations)));
  }
  if (!streams.empty()) parts.push_back(absl::StrFormat("%d stream(s)", streams.size()));
  if (!events.empty()) parts.push_back(absl::StrFormat("%d event(s)", events.size()));
  return absl::StrJoin(parts, ", ");
}

}  // namespace dmalab
