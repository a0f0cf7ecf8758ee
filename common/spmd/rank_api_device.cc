#include "common/spmd/rank_api_device.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/plugin/abi_convert.h"

namespace dmalab {
namespace {

dmalab_stream ToStream(StreamId s) { return dmalab_stream{s.value()}; }
dmalab_event ToEvent(EventId e) { return dmalab_event{e.value()}; }

MemRef FromAbi(const dmalab_mem& m) { return MemRef{m.rank, m.addr, m.bytes, m.alloc_id, 0}; }

int32_t AbiStreamKind(StreamKind kind) {
  switch (kind) {
    case StreamKind::kCompute:
      return DMALAB_STREAM_COMPUTE;
    case StreamKind::kCopy:
      return DMALAB_STREAM_COPY;
    case StreamKind::kFlag:
      return DMALAB_STREAM_FLAG;
  }
  return DMALAB_STREAM_COMPUTE;
}

absl::StatusCode CodeOf(int32_t rc) {
  switch (rc) {
    case DMALAB_ERROR_BAD_ARGUMENT:
      return absl::StatusCode::kInvalidArgument;
    case DMALAB_ERROR_UNSUPPORTED:
      return absl::StatusCode::kUnimplemented;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

RankApiDevice::RankApiDevice(const dmalab_rank_api* api) : api_(api) {}

RankApiDevice::~RankApiDevice() {
  for (EventId e : events_) (void)api_->destroy_event(api_->ctx, ToEvent(e));
  for (StreamId s : streams_) (void)api_->destroy_stream(api_->ctx, ToStream(s));
}

std::string RankApiDevice::name() const {
  return api_->backend == DMALAB_BACKEND_SIM ? "sim" : "cuda";
}

absl::Status RankApiDevice::Check(int32_t rc, std::string_view what) const {
  if (rc == DMALAB_OK) return absl::OkStatus();
  const char* why = api_->last_error(api_->ctx);
  return absl::Status(CodeOf(rc), absl::StrFormat("%s on rank %d: %s", what, api_->rank,
                                                  why == nullptr ? "(no reason given)" : why));
}

absl::Status RankApiDevice::CheckRank(int rank, std::string_view what) const {
  if (rank == api_->rank) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: rank %d is not this instance's rank %d (an SPMD instance serves its own "
                      "rank only)",
                      what, rank, api_->rank));
}

absl::StatusOr<MemRef> RankApiDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "allocate"));
  const std::string t(tag);
  dmalab_mem m{};
  DMALAB_RETURN_IF_ERROR(Check(api_->allocate(api_->ctx, bytes, t.c_str(), &m), "allocate"));
  return FromAbi(m);
}

absl::Status RankApiDevice::Free(const MemRef& allocation) {
  DMALAB_RETURN_IF_ERROR(CheckRank(allocation.rank, "free"));
  const dmalab_mem m = MemToAbi(allocation);
  return Check(api_->free(api_->ctx, &m), "free");
}

StreamId RankApiDevice::ComputeStream(int rank) {
  dmalab_stream s{-1};
  if (rank != api_->rank || api_->compute_stream(api_->ctx, &s) != DMALAB_OK) return StreamId(-1);
  return StreamId(s.id);
}

absl::StatusOr<StreamId> RankApiDevice::CreateStream(int rank, StreamKind kind,
                                                     std::string_view name) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "create_stream"));
  const std::string n(name);
  dmalab_stream s{-1};
  DMALAB_RETURN_IF_ERROR(
      Check(api_->create_stream(api_->ctx, AbiStreamKind(kind), n.c_str(), &s), "create_stream"));
  streams_.push_back(StreamId(s.id));
  return StreamId(s.id);
}

absl::StatusOr<EventId> RankApiDevice::CreateEvent(int rank) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "create_event"));
  dmalab_event e{-1};
  DMALAB_RETURN_IF_ERROR(Check(api_->create_event(api_->ctx, &e), "create_event"));
  events_.push_back(EventId(e.id));
  return EventId(e.id);
}

absl::Status RankApiDevice::RecordEvent(EventId event, StreamId stream) {
  return Check(api_->record_event(api_->ctx, ToEvent(event), ToStream(stream)), "record_event");
}

absl::Status RankApiDevice::WaitEvent(StreamId stream, EventId event) {
  return Check(api_->wait_event(api_->ctx, ToStream(stream), ToEvent(event)), "wait_event");
}

absl::Status RankApiDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                                 std::string_view label) {
  const dmalab_mem d = MemToAbi(dst), s = MemToAbi(src);
  const std::string l(label);
  return Check(api_->copy(api_->ctx, ToStream(stream), &d, &s, l.c_str()), "copy");
}

absl::Status RankApiDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                   absl::Span<const Operand> terms, int64_t elems,
                                   std::string_view label) {
  // The table's reduce takes plain operands: block-coded wires are the built-in ring's.
  if (dst.codec != Codec::kPlain) {
    return absl::UnimplementedError(absl::StrFormat(
        "reduce '%s': dst is %s-coded; the plugin device table reduces plain elements only", label,
        CodecName(dst.codec)));
  }
  std::vector<dmalab_mem> t;
  t.reserve(terms.size());
  for (const Operand& o : terms) {
    if (o.codec != Codec::kPlain) {
      return absl::UnimplementedError(absl::StrFormat(
          "reduce '%s': a term is %s-coded; the plugin device table reduces plain elements only",
          label, CodecName(o.codec)));
    }
    t.push_back(MemToAbi(o.mem));
  }
  const dmalab_mem d = MemToAbi(dst.mem);
  const std::string l(label);
  return Check(api_->reduce(api_->ctx, ToStream(stream), DTypeToAbi(dtype), &d, t.data(),
                            static_cast<int32_t>(t.size()), elems, l.c_str()),
               "reduce");
}

absl::Status RankApiDevice::SignalFlag(StreamId stream, const MemRef& counter,
                                       const MemRef& peer_flag, std::string_view label) {
  const dmalab_mem c = MemToAbi(counter), f = MemToAbi(peer_flag);
  const std::string l(label);
  return Check(api_->signal_flag(api_->ctx, ToStream(stream), &c, &f, l.c_str()), "signal_flag");
}

absl::Status RankApiDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                     std::string_view label) {
  const dmalab_mem e = MemToAbi(expected), f = MemToAbi(flag);
  const std::string l(label);
  return Check(api_->wait_flag(api_->ctx, ToStream(stream), &e, &f, l.c_str()), "wait_flag");
}

absl::Status RankApiDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                       std::string_view label) {
  const dmalab_mem d = MemToAbi(dst);
  const std::string l(label);
  return Check(api_->write_value(api_->ctx, ToStream(stream), &d, value, l.c_str()), "write_value");
}

absl::Status RankApiDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                      std::string_view label) {
  const dmalab_mem f = MemToAbi(flag);
  const std::string l(label);
  return Check(api_->wait_value(api_->ctx, ToStream(stream), &f, value, l.c_str()), "wait_value");
}

absl::Status RankApiDevice::Synchronize() {
  return Check(api_->synchronize(api_->ctx), "synchronize");
}

absl::Status RankApiDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  const dmalab_mem d = MemToAbi(dst);
  return Check(api_->write(api_->ctx, &d, bytes.data(), bytes.size()), "write");
}

absl::Status RankApiDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  const dmalab_mem s = MemToAbi(src);
  return Check(api_->read(api_->ctx, &s, bytes.data(), bytes.size()), "read");
}

bool RankApiDevice::IsCapturing(StreamId /*stream*/) const {
  return api_->is_capturing != nullptr && api_->is_capturing(api_->ctx) != 0;
}

absl::StatusOr<IpcHandle> RankApiDevice::ExportMemory(const MemRef& allocation) {
  const dmalab_mem m = MemToAbi(allocation);
  dmalab_ipc_mem_handle h{};
  DMALAB_RETURN_IF_ERROR(Check(api_->ipc_get_mem_handle(api_->ctx, &m, &h), "ipc_get_mem_handle"));
  IpcHandle out;
  std::memcpy(out.bytes.data(), h.bytes, DMALAB_IPC_HANDLE_BYTES);
  return out;
}

absl::StatusOr<MemRef> RankApiDevice::OpenMemory(int rank, const IpcHandle& handle) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "ipc_open_mem_handle"));
  dmalab_ipc_mem_handle h{};
  std::memcpy(h.bytes, handle.bytes.data(), DMALAB_IPC_HANDLE_BYTES);
  dmalab_mem m{};
  DMALAB_RETURN_IF_ERROR(
      Check(api_->ipc_open_mem_handle(api_->ctx, &h, &m), "ipc_open_mem_handle"));
  return FromAbi(m);
}

absl::Status RankApiDevice::CloseMemory(const MemRef& mapping) {
  const dmalab_mem m = MemToAbi(mapping);
  return Check(api_->ipc_close_mem_handle(api_->ctx, &m), "ipc_close_mem_handle");
}

void* RankApiDevice::NativeStream(StreamId stream) {
  return api_->native_stream == nullptr ? nullptr
                                        : api_->native_stream(api_->ctx, ToStream(stream));
}

void* RankApiDevice::NativePointer(const MemRef& mem) {
  const dmalab_mem m = MemToAbi(mem);
  return api_->native_pointer == nullptr ? nullptr : api_->native_pointer(api_->ctx, &m);
}

int RankApiDevice::NativeDeviceOrdinal(int rank) {
  if (rank != api_->rank || api_->native_device == nullptr) return -1;
  return api_->native_device(api_->ctx);
}

}  // namespace dmalab
