#include "sim/sim_device.h"

#include <bit>
#include <cstring>
#include <memory>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/hash.h"
#include "common/core/reduce_host.h"

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

// A set of streams (Synchronize's bookkeeping), as bits.
class StreamBits {
 public:
  explicit StreamBits(StreamId n) : n_(n), words_((n + 63) / 64, 0) {}
  void Set(StreamId i) { words_[i / 64] |= Bit(i); }
  void Clear(StreamId i) { words_[i / 64] &= ~Bit(i); }
  bool Test(StreamId i) const { return (words_[i / 64] & Bit(i)) != 0; }
  // The first member at or after `from`; n when there is none.
  StreamId Next(StreamId from) const {
    if (from >= n_) return n_;
    size_t w = static_cast<size_t>(from) / 64;
    uint64_t bits = words_[w] & (~uint64_t{0} << (from % 64));
    while (bits == 0) {
      if (++w == words_.size()) return n_;
      bits = words_[w];
    }
    return static_cast<StreamId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
  }
  // The k-th member (from 0) in stream order; k is below the number of members.
  StreamId Nth(uint64_t k) const {
    size_t w = 0;
    for (; k >= static_cast<uint64_t>(std::popcount(words_[w])); ++w) {
      k -= static_cast<uint64_t>(std::popcount(words_[w]));
    }
    uint64_t bits = words_[w];
    for (; k > 0; --k) bits &= bits - 1;
    return static_cast<StreamId>(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
  }

 private:
  static uint64_t Bit(StreamId i) { return uint64_t{1} << (i % 64); }
  StreamId n_;
  std::vector<uint64_t> words_;
};

}  // namespace

std::string_view FidelityName(Fidelity fidelity) {
  return fidelity == Fidelity::kValues ? "values" : "shadow";
}

absl::StatusOr<Fidelity> ParseFidelity(std::string_view text) {
  if (text == "values") return Fidelity::kValues;
  if (text == "shadow") return Fidelity::kShadow;
  return absl::InvalidArgumentError(
      absl::StrFormat("fidelity is '%s'; allowed: values, shadow", text));
}

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
    : world_(world), seed_(seed), fidelity_(fidelity), rng_(seed), races_(world) {
  if (fidelity == Fidelity::kShadow) shadow_.resize(world);
  for (int r = 0; r < world; ++r) {
    memory_.emplace_back(r, world, /*with_payload=*/fidelity == Fidelity::kValues);
    compute_streams_.push_back(static_cast<StreamId>(streams_.size()));
    streams_.push_back(Stream{r, StreamKind::kCompute, "compute", {}, {}});
  }
}

SimDevice::~SimDevice() = default;

absl::Status SimDevice::CheckStream(StreamId s) const {
  if (s < 0 || s >= static_cast<StreamId>(streams_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("stream %d does not exist", s));
  }
  return absl::OkStatus();
}

uint8_t* SimDevice::HostPtr(const MemRef& m) {
  absl::StatusOr<uint8_t*> p = memory_[m.rank].Bytes(m.addr, m.bytes);
  return p.ok() ? *p : nullptr;
}

absl::Status SimDevice::CheckMem(const MemRef& m, std::string_view what) const {
  if (m.rank < 0 || m.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is on rank %d; ranks are 0..%d", what, m.rank, world_ - 1));
  }
  if (absl::Status s = memory_[m.rank].CheckRange(m.addr, m.bytes); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", what, s.message()));
  }
  return absl::OkStatus();
}

absl::Status SimDevice::RefuseDuringCapture(std::string_view what) const {
  if (capture_ == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s during graph capture; graphs replay captured work on caller-owned memory: allocate, "
      "free, read, write and synchronize before or after the capture",
      what));
}

absl::StatusOr<MemRef> SimDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  if (absl::Status s = RefuseDuringCapture(
          absl::StrFormat("allocate: %d bytes '%s' on rank %d", bytes, tag, rank));
      !s.ok()) {
    return s;
  }
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  return memory_[rank].Allocate(bytes, tag);
}

absl::Status SimDevice::Free(const MemRef& allocation) {
  if (absl::Status s = RefuseDuringCapture(
          absl::StrFormat("free: rank %d address 0x%x", allocation.rank, allocation.addr));
      !s.ok()) {
    return s;
  }
  if (allocation.rank < 0 || allocation.rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("free: rank is %d; ranks are 0..%d", allocation.rank, world_ - 1));
  }
  const AllocationInfo* info = memory_[allocation.rank].Find(allocation.alloc_id);
  const uint64_t bytes = info ? info->bytes : allocation.bytes;
  if (absl::Status s = memory_[allocation.rank].Free(allocation, context_); !s.ok()) return s;
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
  return static_cast<StreamId>(streams_.size() - 1);
}

absl::StatusOr<EventId> SimDevice::CreateEvent(int rank) {
  if (rank < 0 || rank >= world_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create event: rank is %d; ranks are 0..%d", rank, world_ - 1));
  }
  events_.push_back(Event{rank, 0, 0, {}, {}});
  return static_cast<EventId>(events_.size() - 1);
}

absl::Status SimDevice::Enqueue(StreamId s, Op op, std::string_view label) {
  if (capture_ != nullptr) {
    if (op.kind == OpKind::kRecord) capture_->recorded.insert(op.event);
    capture_->ops.push_back(CapturedOp{s, std::move(op), std::string(label)});
    return absl::OkStatus();
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
  op_labels_.push_back(OpLabel{streams_[s].rank, s, context, InternLabel(label)});
  while (static_cast<int64_t>(op_labels_.size()) > kOpLabelWindow) {
    op_labels_.pop_front();
    ++first_op_id_;
  }
  // Contexts older than the oldest kept op's are no longer needed (the current one always is).
  const int64_t oldest = op_labels_.front().context;
  while (oldest >= 0 && first_context_ < oldest && contexts_.size() > 1) {
    contexts_.pop_front();
    ++first_context_;
  }
  op.host_clock = host_clock_;
  if (timing_) op.host_us = launching_ ? timing_->now_us() : timing_->Enqueue(TimedKind(op.kind));
  streams_[s].queue.push_back(std::move(op));
  ++pending_;
  return absl::OkStatus();
}

absl::Status SimDevice::RecordEvent(EventId event, StreamId stream) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (event < 0 || event >= static_cast<EventId>(events_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("record: event %d does not exist", event));
  }
  Op op;
  op.kind = OpKind::kRecord;
  op.event = event;
  if (capture_ == nullptr) op.event_seq = ++events_[event].records;  // at launch when captured
  return Enqueue(stream, std::move(op), absl::StrCat("record ev", event));
}

absl::Status SimDevice::WaitEvent(StreamId stream, EventId event) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (event < 0 || event >= static_cast<EventId>(events_.size())) {
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
  op.event_seq = events_[event].records;  // CUDA semantics: the latest record at enqueue time
  if (op.event_seq > 0) ++events_[event].waiting[op.event_seq];
  return Enqueue(stream, std::move(op), absl::StrCat("wait ev", event));
}

absl::Status SimDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                             std::string_view label) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (dst.bytes != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy '%s': dst is %d bytes, src is %d; must match", label, dst.bytes, src.bytes));
  }
  const int rank = streams_[stream].rank;
  if (dst.rank != rank && src.rank != rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy '%s': stream is on rank %d, dst on %d, src on %d; one must be the stream's rank",
        label, rank, dst.rank, src.rank));
  }
  if (absl::Status s = CheckMem(dst, "copy dst"); !s.ok()) return s;
  if (absl::Status s = CheckMem(src, "copy src"); !s.ok()) return s;
  Op op;
  op.kind = OpKind::kCopy;
  op.dst = dst;
  op.src = src;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                               absl::Span<const Operand> terms, int64_t elems,
                               std::string_view label) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (absl::Status s = ValidateReduce(dtype, dst, terms, elems); !s.ok()) return s;
  const int rank = streams_[stream].rank;
  std::vector<const Operand*> operands = {&dst};
  for (const Operand& t : terms) operands.push_back(&t);
  for (const Operand* o : operands) {
    if (o->mem.rank != rank) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "reduce '%s': an operand is on rank %d; kernels on rank %d read and write only its "
          "own memory",
          label, o->mem.rank, rank));
    }
    if (absl::Status s = CheckMem(o->mem, "reduce operand"); !s.ok()) return s;
  }
  Op op;
  op.kind = OpKind::kReduce;
  op.dtype = dtype;
  op.dst_operand = dst;
  op.terms.assign(terms.begin(), terms.end());
  op.elems = elems;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                   std::string_view label) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (counter.bytes != 8 || peer_flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("signal '%s': counter and flag must be 8 bytes", label));
  }
  if (absl::Status s = CheckMem(counter, "signal counter"); !s.ok()) return s;
  if (absl::Status s = CheckMem(peer_flag, "signal flag"); !s.ok()) return s;
  Op op;
  op.kind = OpKind::kSignal;
  op.dst = counter;
  op.src = peer_flag;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                 std::string_view label) {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (expected.bytes != 8 || flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait '%s': expected and flag must be 8 bytes", label));
  }
  if (absl::Status s = CheckMem(expected, "wait expected"); !s.ok()) return s;
  if (absl::Status s = CheckMem(flag, "wait flag"); !s.ok()) return s;
  Op op;
  op.kind = OpKind::kWaitFlag;
  op.dst = expected;
  op.src = flag;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::CheckValueFlag(StreamId stream, const MemRef& flag, std::string_view what,
                                       std::string_view label) const {
  if (absl::Status s = CheckStream(stream); !s.ok()) return s;
  if (flag.bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s '%s': the flag must be 8 bytes, is %d", what, label, flag.bytes));
  }
  return CheckMem(flag, absl::StrFormat("%s flag", what));
}

absl::Status SimDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                   std::string_view label) {
  if (absl::Status s = CheckValueFlag(stream, dst, "write value", label); !s.ok()) return s;
  Op op;
  op.kind = OpKind::kWriteValue;
  op.src = dst;
  op.wait_target = value;
  return Enqueue(stream, std::move(op), label);
}

absl::Status SimDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                  std::string_view label) {
  if (absl::Status s = CheckValueFlag(stream, flag, "wait value", label); !s.ok()) return s;
  if (flag.rank != streams_[stream].rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait value '%s': the flag is on rank %d, the stream on rank %d; a wait "
                        "reads its own rank's memory",
                        label, flag.rank, streams_[stream].rank));
  }
  Op op;
  op.kind = OpKind::kWaitValue;
  op.src = flag;
  op.wait_target = value;
  op.wait_armed = true;
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
  shadow_[m.rank].Assign(m.addr, m.addr + 8, MakeOrigin({kWordTag, v}), 0);
  shadow_[m.rank].StoreWord(m.addr, v);
}

void SimDevice::ShadowCopy(const Op& op) {
  shadow_[op.dst.rank].CopyFrom(shadow_[op.src.rank], op.src.addr, op.dst.addr, op.dst.bytes);
}

// A kernel's output is a function of its inputs' contents and of what it computes, never of where
// they are: its origin mixes the operation with every term's provenance.
void SimDevice::ShadowReduce(const Op& op) {
  std::vector<uint64_t> mix = {kReduceTag, static_cast<uint64_t>(op.dtype),
                               static_cast<uint64_t>(op.dst_operand.codec),
                               static_cast<uint64_t>(op.elems), op.terms.size()};
  for (const Operand& t : op.terms) {
    const Provenance p = shadow_[t.mem.rank].Get(t.mem.addr, t.mem.end());
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
      return op.event_seq == 0 || events_[op.event].completed >= op.event_seq;
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
  auto it = label_ids_.find(label);
  if (it != label_ids_.end()) return it->second;
  if (labels_.size() >= kMaxInternedLabels) {
    // More distinct labels than any run uses; describe the rest alike rather than grow.
    label = "(label not kept: too many distinct labels)";
    if (auto full = label_ids_.find(label); full != label_ids_.end()) return full->second;
  }
  labels_.emplace_back(label);
  const int32_t id = static_cast<int32_t>(labels_.size() - 1);
  label_ids_.emplace(std::string(label), id);
  return id;
}

void SimDevice::PruneEventClocks(Event& e) {
  for (auto it = e.clocks.begin(); it != e.clocks.end() && it->first < e.completed;) {
    it = e.waiting.count(it->first) > 0 ? std::next(it) : e.clocks.erase(it);
  }
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
  return absl::StrFormat("rank %d stream '%s' op '%s'", l.rank, streams_[l.stream].name, OpText(l));
}

FindingOp SimDevice::OpOf(int64_t op_id, std::string access) const {
  if (op_id < 0) return FindingOp{-1, "", "host", std::move(access)};
  if (op_id < first_op_id_) {
    // Older than the label window: known by number only.
    return FindingOp{-1, "", absl::StrFormat("op #%d", op_id), std::move(access)};
  }
  const OpLabel& l = op_labels_[op_id - first_op_id_];
  return FindingOp{l.rank, streams_[l.stream].name, OpText(l), std::move(access)};
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
  const Stream& s = streams_[sid];
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
  if (m.alloc_id == 0) return;
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
  Stream& s = streams_[sid];
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
        const uint8_t* src = HostPtr(op.src);  // first: its fresh bytes are filled before dst
        std::memmove(Overwritten(memory_[op.dst.rank], op.dst), src, op.dst.bytes);
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
      std::vector<HostOperand> terms;
      for (const Operand& t : op.terms) terms.push_back(HostOperand{HostPtr(t.mem), t.codec});
      // Arguments were validated at enqueue; the host reference cannot fail here.
      (void)ReduceHost(op.dtype, Overwritten(memory_[op.dst_operand.mem.rank], op.dst_operand.mem),
                       op.dst_operand.codec, terms, op.elems);
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
      s.clock.Join(flag_clocks_[{op.src.rank, op.src.addr}]);  // acquire
      break;
    case OpKind::kRecord: {
      Event& e = events_[op.event];
      e.completed = std::max(e.completed, op.event_seq);
      e.clocks[op.event_seq] = s.clock;
      PruneEventClocks(e);
      break;
    }
    case OpKind::kWaitEvent:
      if (op.event_seq > 0) {
        Event& e = events_[op.event];
        s.clock.Join(e.clocks[op.event_seq]);
        if (auto w = e.waiting.find(op.event_seq); w != e.waiting.end() && --w->second == 0) {
          e.waiting.erase(w);
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
  for (StreamId sid = 0; sid < static_cast<StreamId>(streams_.size()); ++sid) {
    Stream& s = streams_[sid];
    if (s.queue.empty()) continue;
    const Op& op = s.queue.front();
    absl::StrAppendFormat(&text, " [%s waits", DescribeOp(op.id));
    if (op.kind == OpKind::kWaitFlag || op.kind == OpKind::kWaitValue) {
      absl::StrAppendFormat(&text, " for flag at rank %d 0x%x = %d to reach %d", op.src.rank,
                            op.src.addr, LoadU64(op.src), op.wait_target);
    } else if (op.kind == OpKind::kWaitEvent) {
      absl::StrAppendFormat(&text, " for event %d record %d (completed %d)", op.event, op.event_seq,
                            events_[op.event].completed);
    }
    absl::StrAppendFormat(&text, "; %d ops queued]", s.queue.size());
  }
  return text;
}

absl::Status SimDevice::Synchronize() {
  if (absl::Status s = RefuseDuringCapture("synchronize"); !s.ok()) return s;
  // Whether each stream's front can run is kept rather than asked of every stream at every step:
  // the answer changes only when the front changes, when an event the front waits for is
  // recorded, or when a write reaches the flag word the front waits on. Only then is a stream
  // asked again, in stream order as all were, so the seed draws the same choice from the same
  // ready streams.
  const StreamId n = static_cast<StreamId>(streams_.size());
  StreamBits is_ready(n), ask(n), waits_flag(n), waits_event(n);
  for (StreamId sid = 0; sid < n; ++sid) ask.Set(sid);
  std::vector<MemRef> flag(n);    // the word a flag-waiting front reads
  std::vector<EventId> event(n);  // the event an event-waiting front waits for
  uint64_t ready_count = 0;
  const auto written = [&](const MemRef& w) {  // flag waits reading w are asked again
    for (StreamId sid = waits_flag.Next(0); sid < n; sid = waits_flag.Next(sid + 1)) {
      const MemRef& f = flag[sid];
      if (f.rank == w.rank && f.addr < w.end() && w.addr < f.end()) ask.Set(sid);
    }
  };
  while (pending_ > 0) {
    // Streams asked for again during the pass are asked in it if they come later in stream
    // order, else at the next step: as when every stream was asked in order at every step.
    for (StreamId sid = ask.Next(0); sid < n; sid = ask.Next(sid + 1)) {
      ask.Clear(sid);
      Stream& s = streams_[sid];
      ready_count -= is_ready.Test(sid);
      is_ready.Clear(sid);
      waits_flag.Clear(sid);
      waits_event.Clear(sid);
      if (s.queue.empty()) continue;
      Op& op = s.queue.front();
      const bool armed = op.wait_armed;
      if (Ready(s, op)) {
        is_ready.Set(sid);
        ++ready_count;
      }
      if (op.kind == OpKind::kWaitFlag || op.kind == OpKind::kWaitValue) {
        waits_flag.Set(sid);
        flag[sid] = op.src;
      }
      if (op.kind == OpKind::kWaitEvent) {
        waits_event.Set(sid);
        event[sid] = op.event;
      }
      if (!armed && op.wait_armed) written(op.dst);  // arming stored the expected value
    }
    if (ready_count == 0) {
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
    const StreamId pick = is_ready.Nth(rng_() % ready_count);
    Op& op = streams_[pick].queue.front();
    Execute(pick, op);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kSignal) written(op.dst);
    if (op.kind == OpKind::kSignal || op.kind == OpKind::kWriteValue) written(op.src);
    if (op.kind == OpKind::kReduce) written(op.dst_operand.mem);
    for (StreamId sid = waits_event.Next(0); op.kind == OpKind::kRecord && sid < n;
         sid = waits_event.Next(sid + 1)) {
      if (event[sid] == op.event) ask.Set(sid);
    }
    streams_[pick].queue.pop_front();
    ask.Set(pick);
    --pending_;
  }
  for (const Stream& s : streams_) host_clock_.Join(s.clock);
  host_clock_.Tick(kHostTimeline);
  if (timing_) timing_->Synchronize();
  return absl::OkStatus();
}

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
  t.stream = sid;
  t.rank = streams_[sid].rank;
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
      t.event = op.event;
      t.event_seq = op.event_seq;
      break;
    case OpKind::kFree:
      break;
  }
  timing_->Executed(t);
}

absl::Status SimDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  if (absl::Status s = RefuseDuringCapture("write"); !s.ok()) return s;
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  if (absl::Status s = CheckMem(dst, "write dst"); !s.ok()) return s;
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

absl::Status SimDevice::CheckShadowCall(std::string_view what, const MemRef& m) const {
  if (fidelity_ != Fidelity::kShadow) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the simulator runs in the values fidelity; it keeps bytes, not "
                        "provenance (use Read and Write)",
                        what));
  }
  return CheckMem(m, what);
}

absl::Status SimDevice::WriteShadow(const MemRef& dst, uint64_t content) {
  if (absl::Status s = RefuseDuringCapture("shadow write"); !s.ok()) return s;
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  if (absl::Status s = CheckShadowCall("shadow write dst", dst); !s.ok()) return s;
  CheckLifetime(-1, dst);
  races_.Write(dst.rank, dst.addr, dst.end(),
               dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  shadow_[dst.rank].Assign(dst.addr, dst.end(), MakeOrigin({kHostContentTag, content}), 0);
  return absl::OkStatus();
}

absl::StatusOr<Provenance> SimDevice::ReadProvenance(const MemRef& src) {
  if (absl::Status s = RefuseDuringCapture("provenance read"); !s.ok()) return s;
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  if (absl::Status s = CheckShadowCall("provenance read src", src); !s.ok()) return s;
  CheckLifetime(-1, src);
  races_.Read(src.rank, src.addr, src.end(),
              dmalab::Access{kHostTimeline, host_clock_.Get(kHostTimeline), -1}, host_clock_);
  return shadow_[src.rank].Get(src.addr, src.end());
}

absl::Status SimDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  if (absl::Status s = RefuseDuringCapture("read"); !s.ok()) return s;
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  if (absl::Status s = CheckMem(src, "read src"); !s.ok()) return s;
  if (bytes.size() != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "read: src is %d bytes, buffer is %d; must match", src.bytes, bytes.size()));
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
  std::memcpy(bytes.data(), HostPtr(src), bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<GraphId> SimDevice::CaptureGraph(const std::function<absl::Status()>& body) {
  if (capture_ != nullptr) {
    return absl::FailedPreconditionError("capture graph: a graph is already being captured");
  }
  Graph graph;
  capture_ = &graph;
  absl::Status s = body();
  capture_ = nullptr;
  if (!s.ok()) return s;
  graphs_.push_back(std::move(graph));
  return static_cast<GraphId>(graphs_.size() - 1);
}

absl::StatusOr<EventId> SimDevice::LaunchEvent(std::map<int, EventId>& pool, int key, int rank) {
  if (auto it = pool.find(key); it != pool.end()) return it->second;
  absl::StatusOr<EventId> e = CreateEvent(rank);
  if (e.ok()) pool[key] = *e;
  return e;
}

absl::Status SimDevice::LaunchGraph(GraphId graph) {
  if (absl::Status s = RefuseDuringCapture("launch graph"); !s.ok()) return s;
  if (graph < 0 || graph >= static_cast<GraphId>(graphs_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "launch graph: graph %d does not exist (%d captured)", graph, graphs_.size()));
  }
  const Graph& g = graphs_[graph];
  if (timing_) timing_->LaunchGraph();
  launching_ = true;
  absl::Cleanup done = [this] { launching_ = false; };
  // Fork: every stream the graph uses starts after the work already on its rank's compute
  // stream; join: later work on the compute stream starts after all of the graph's.
  std::set<StreamId> side;
  for (const CapturedOp& c : g.ops) {
    if (c.stream != compute_streams_[streams_[c.stream].rank]) side.insert(c.stream);
  }
  std::set<int> forked;
  for (StreamId sid : side) {
    const int rank = streams_[sid].rank;
    absl::StatusOr<EventId> fork = LaunchEvent(fork_events_, rank, rank);
    if (!fork.ok()) return fork.status();
    if (forked.insert(rank).second) {
      if (absl::Status s = RecordEvent(*fork, compute_streams_[rank]); !s.ok()) return s;
    }
    if (absl::Status s = WaitEvent(sid, *fork); !s.ok()) return s;
  }
  const std::string prefix = absl::StrFormat("graph %d:", graph);
  for (const CapturedOp& c : g.ops) {
    Op op = c.op;
    if (op.kind == OpKind::kRecord) op.event_seq = ++events_[op.event].records;
    if (op.kind == OpKind::kWaitEvent) op.event_seq = events_[op.event].records;
    if (absl::Status s = Enqueue(c.stream, std::move(op), absl::StrCat(prefix, " ", c.label));
        !s.ok()) {
      return s;
    }
  }
  for (StreamId sid : side) {
    const int rank = streams_[sid].rank;
    absl::StatusOr<EventId> join = LaunchEvent(join_events_, sid, rank);
    if (!join.ok()) return join.status();
    if (absl::Status s = RecordEvent(*join, sid); !s.ok()) return s;
    if (absl::Status s = WaitEvent(compute_streams_[rank], *join); !s.ok()) return s;
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
