#include "common/ring/dma_all_reduce.h"

#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "common/ring/ring_planner.h"

namespace dmalab {
namespace {

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& f, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(f, args...));
}

// Checks a per-rank tensor list against the rank it must sit on.
absl::Status ValidatePerRank(absl::Span<const TensorView> ts, std::string_view what, int world) {
  if (static_cast<int>(ts.size()) != world) {
    return Invalid("all_reduce: %s has %d tensors; need one per rank (world = %d)", what, ts.size(),
                   world);
  }
  for (int r = 0; r < world; ++r) {
    if (ts[r].rank() != r) {
      return Invalid("all_reduce: %s[%d] is on rank %d; must be on rank %d", what, r, ts[r].rank(),
                     r);
    }
    if (!ts[r].contiguous) {
      return Invalid("all_reduce: %s[%d] is not contiguous; must be contiguous", what, r);
    }
    if (ts[r].mem.bytes < ts[r].bytes()) {
      return Invalid("all_reduce: %s[%d] views %d bytes; its shape %s of %s needs %d", what, r,
                     ts[r].mem.bytes, ShapeString(ts[r].shape), DTypeName(ts[r].dtype),
                     ts[r].bytes());
    }
  }
  return absl::OkStatus();
}

}  // namespace

DmaAllReduce::DmaAllReduce(Device* device, const DmaAllReduceOptions& options)
    : device_(device), options_(options), world_(device->world_size()) {}

DmaAllReduce::~DmaAllReduce() {
  // Best effort: the device may already be in an error state.
  (void)device_->Synchronize();
  for (RankState& rs : ranks_) {
    if (rs.slab.bytes) (void)device_->Free(rs.slab);
    for (const MemRef& m : rs.staging) (void)device_->Free(m);
    if (rs.workspace.bytes) (void)device_->Free(rs.workspace);
  }
}

absl::StatusOr<std::unique_ptr<DmaAllReduce>> DmaAllReduce::Create(
    Device* device, const DmaAllReduceOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("DmaAllReduce: device is null");
  const int world = device->world_size();
  if (world < kMinWorld || world > kMaxWorld) {
    return Invalid("DmaAllReduce: world is %d; must be in [%d, %d]", world, kMinWorld, kMaxWorld);
  }
  if (options.max_bytes == 0) return Invalid("DmaAllReduce: max_bytes is 0; must be > 0");
  if (options.min_bytes > options.max_bytes) {
    return Invalid("DmaAllReduce: min_bytes is %d; must be at most max_bytes = %d",
                   options.min_bytes, options.max_bytes);
  }
  if (options.pieces < 1 || options.pieces > kMaxPieces) {
    return Invalid("DmaAllReduce: pieces is %d; must be in [1, %d]", options.pieces, kMaxPieces);
  }
  if (options.graph_cache && !device->SupportsGraphs()) {
    return Invalid("DmaAllReduce: graph_cache is on but device '%s' has no graphs", device->name());
  }
  std::unique_ptr<DmaAllReduce> ar(new DmaAllReduce(device, options));
  DMALAB_RETURN_IF_ERROR(ar->Init());
  return ar;
}

std::string DmaAllReduce::name() const {
  if (options_.wire == WireMode::kNative) return "ring";
  return absl::StrFormat("ring(%s)", WireModeName(options_.wire));
}

uint64_t DmaAllReduce::WorkspaceBytesPerRank(int world, const DmaAllReduceOptions& options) {
  const SlabLayout slab = LayoutSlab(world, options.max_bytes, options.wire);
  uint64_t bytes = slab.slab_bytes + uint64_t(slab.num_staging_areas) * slab.staging_area_bytes;
  if (options.faults.Has(Fault::kPersistentOutput)) bytes += options.max_bytes;
  return bytes;
}

absl::Status DmaAllReduce::Init() {
  const SlabLayout slab = LayoutSlab(world_, options_.max_bytes, options_.wire);
  ranks_.resize(world_);
  for (int r = 0; r < world_; ++r) {
    RankState& rs = ranks_[r];
    DMALAB_ASSIGN_OR_RETURN(rs.slab, device_->Allocate(r, slab.slab_bytes, "all_reduce slab"));
    // Flags, counters and expected values start at zero; scratch needs no initial value.
    const std::vector<uint8_t> zeros(slab.scratch_offset, 0);
    DMALAB_RETURN_IF_ERROR(device_->Write(rs.slab.Slice(0, slab.scratch_offset), zeros));
    rs.streams[static_cast<int>(PlanStream::kCompute)] = device_->ComputeStream(r);
    const std::pair<PlanStream, StreamKind> kinds[] = {{PlanStream::kSend, StreamKind::kCopy},
                                                       {PlanStream::kPlace, StreamKind::kCopy},
                                                       {PlanStream::kFlag, StreamKind::kFlag}};
    for (const auto& [ps, kind] : kinds) {
      DMALAB_ASSIGN_OR_RETURN(
          StreamId s, device_->CreateStream(
                          r, kind, absl::StrCat("all_reduce ", std::string(PlanStreamName(ps)))));
      rs.streams[static_cast<int>(ps)] = s;
    }
    for (int i = 0; i < slab.num_staging_areas; ++i) {
      DMALAB_ASSIGN_OR_RETURN(MemRef st,
                              device_->Allocate(r, slab.staging_area_bytes, "all_reduce staging"));
      rs.staging.push_back(st);
    }
    if (options_.faults.Has(Fault::kPersistentOutput)) {
      DMALAB_ASSIGN_OR_RETURN(
          rs.workspace,
          device_->Allocate(r, options_.max_bytes, "all_reduce persistent workspace (fault)"));
    }
  }
  return absl::OkStatus();
}

absl::Status DmaAllReduce::ValidateInputs(absl::Span<const TensorView> inputs) const {
  DMALAB_RETURN_IF_ERROR(ValidatePerRank(inputs, "inputs", world_));
  const TensorView& in0 = inputs[0];
  for (int r = 1; r < world_; ++r) {
    if (inputs[r].dtype != in0.dtype) {
      return Invalid("all_reduce: inputs[%d] has dtype %s, inputs[0] has %s; must match", r,
                     DTypeName(inputs[r].dtype), DTypeName(in0.dtype));
    }
    if (inputs[r].shape != in0.shape) {
      return Invalid("all_reduce: inputs[%d] has shape %s, inputs[0] has %s; must match", r,
                     ShapeString(inputs[r].shape), ShapeString(in0.shape));
    }
  }
  const int64_t n = in0.elems();
  if (n <= 0 || n % (world_ * 8) != 0) {
    return Invalid("all_reduce: input has %d elements; must be a positive multiple of world*8 = %d",
                   n, world_ * 8);
  }
  const uint64_t bytes = in0.bytes();
  if (bytes < options_.min_bytes || bytes > options_.max_bytes) {
    return Invalid("all_reduce: input is %d bytes; must be in [min_bytes, max_bytes] = [%d, %d]",
                   bytes, options_.min_bytes, options_.max_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<RingPlan> DmaAllReduce::PlanFor(const TensorView& input) const {
  return PlanFor(input, /*in_place=*/false);
}

absl::StatusOr<RingPlan> DmaAllReduce::PlanFor(const TensorView& input, bool in_place) const {
  RingPlanRequest req;
  req.in_place = in_place;
  req.world = world_;
  req.elems = input.elems();
  req.dtype = input.dtype;
  req.pieces = options_.pieces;
  req.wire = options_.wire;
  req.max_bytes = options_.max_bytes;
  req.faults = options_.faults;
  return PlanRing(req);
}

absl::StatusOr<const RingPlan*> DmaAllReduce::CachedPlan(const TensorView& input, bool in_place) {
  const auto key = std::make_tuple(input.elems(), input.dtype, in_place);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    DMALAB_ASSIGN_OR_RETURN(RingPlan plan, PlanFor(input, in_place));
    it = plans_.emplace(key, std::move(plan)).first;
  }
  return &it->second;
}

absl::StatusOr<std::vector<TensorView>> DmaAllReduce::AllReduce(
    absl::Span<const TensorView> inputs) {
  DMALAB_RETURN_IF_ERROR(ValidateInputs(inputs));
  // Inside a graph capture the fresh outputs come from the graph's private pool where the device
  // has one (the simulator); a device without one refuses the allocation.
  DMALAB_ASSIGN_OR_RETURN(const RingPlan* plan, CachedPlan(inputs[0], /*in_place=*/false));
  std::vector<TensorView> outs;
  for (int r = 0; r < world_; ++r) {
    TensorView out = inputs[r];
    out.contiguous = true;
    if (options_.faults.Has(Fault::kPersistentOutput)) {
      // The founding incident: every call returns byte 0 of one channel-owned workspace.
      out.mem = ranks_[r].workspace.Slice(0, inputs[r].bytes());
    } else {
      absl::StatusOr<MemRef> mem = device_->Allocate(r, inputs[r].bytes(), "all_reduce output");
      if (!mem.ok()) {
        for (const TensorView& o : outs) (void)device_->Free(o.mem);
        return mem.status();
      }
      out.mem = *mem;
    }
    outs.push_back(out);
  }
  if (absl::Status s = Run(*plan, inputs, outs); !s.ok()) {
    if (!options_.faults.Has(Fault::kPersistentOutput)) {
      for (const TensorView& o : outs) (void)device_->Free(o.mem);
    }
    return s;
  }
  return outs;
}

absl::Status DmaAllReduce::AllReduce(absl::Span<const TensorView> inputs,
                                     absl::Span<const TensorView> outs) {
  DMALAB_RETURN_IF_ERROR(ValidateInputs(inputs));
  DMALAB_RETURN_IF_ERROR(ValidatePerRank(outs, "outs", world_));
  for (int r = 0; r < world_; ++r) {
    if (outs[r].dtype != inputs[r].dtype) {
      return Invalid("all_reduce: outs[%d] has dtype %s, input has %s; must match", r,
                     DTypeName(outs[r].dtype), DTypeName(inputs[r].dtype));
    }
    if (outs[r].elems() != inputs[r].elems()) {
      return Invalid("all_reduce: outs[%d] has %d elements, input has %d; must match", r,
                     outs[r].elems(), inputs[r].elems());
    }
    if (outs[r].shape != inputs[r].shape) {
      return Invalid("all_reduce: outs[%d] has shape %s, input has %s; must match", r,
                     ShapeString(outs[r].shape), ShapeString(inputs[r].shape));
    }
    const MemRef in = inputs[r].mem.Slice(0, inputs[r].bytes());
    const MemRef out = outs[r].mem.Slice(0, outs[r].bytes());
    if (in.Overlaps(out) && in.addr != out.addr) {
      return Invalid(
          "all_reduce: outs[%d] [0x%x, 0x%x) overlaps inputs[%d] [0x%x, 0x%x) without being "
          "equal; must be disjoint or identical (in place)",
          r, out.addr, out.end(), r, in.addr, in.end());
    }
  }
  const bool in_place = inputs[0].addr() == outs[0].addr();
  DMALAB_ASSIGN_OR_RETURN(const RingPlan* plan, CachedPlan(inputs[0], in_place));
  if (options_.faults.Has(Fault::kGraphOutputFreed)) {
    // As a graph captured on the first call: later calls with these inputs write the outs of
    // that first call, whatever the caller passes now (and whether or not it freed them).
    std::vector<uint64_t> key;
    for (const TensorView& in : inputs) key.push_back(in.addr());
    const std::vector<TensorView>& captured =
        captured_outs_.emplace(key, std::vector<TensorView>(outs.begin(), outs.end()))
            .first->second;
    return Run(*plan, inputs, captured);
  }
  if (options_.graph_cache) return RunCached(*plan, inputs, outs);
  return Run(*plan, inputs, outs);
}

absl::Status DmaAllReduce::RunCached(const RingPlan& plan, absl::Span<const TensorView> inputs,
                                     absl::Span<const TensorView> outs) {
  std::vector<uint64_t> key = {static_cast<uint64_t>(plan.elems),
                               static_cast<uint64_t>(plan.dtype)};
  for (int r = 0; r < world_; ++r) {
    key.push_back(inputs[r].addr());
    key.push_back(outs[r].addr());
  }
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    DMALAB_RETURN_IF_ERROR(EnsureEvents(plan));  // events cannot be created while capturing
    DMALAB_ASSIGN_OR_RETURN(GraphId graph,
                            device_->CaptureGraph([&]() { return Run(plan, inputs, outs); }));
    --calls_;  // capturing ran nothing; the launch below is the call
    it = graphs_.emplace(std::move(key), graph).first;
  }
  ++calls_;
  return device_->LaunchGraph(it->second);
}

absl::Status DmaAllReduce::EnsureEvents(const RingPlan& plan) {
  for (int r = 0; r < world_; ++r) {
    RankState& rs = ranks_[r];
    while (static_cast<int>(rs.events.size()) < plan.num_events) {
      DMALAB_ASSIGN_OR_RETURN(EventId e, device_->CreateEvent(r));
      rs.events.push_back(e);
    }
  }
  return absl::OkStatus();
}

absl::Status DmaAllReduce::Run(const RingPlan& plan, absl::Span<const TensorView> inputs,
                               absl::Span<const TensorView> outs) {
  ++calls_;
  device_->SetContext(absl::StrCat("all_reduce#", calls_));
  const SlabLayout& slab = plan.slab;
  DMALAB_RETURN_IF_ERROR(EnsureEvents(plan));
  for (int r = 0; r < world_; ++r) {
    RankState& rs = ranks_[r];
    auto resolve = [&](const Slice& s) -> MemRef {
      switch (s.region) {
        case Region::kInput:
          return inputs[r].mem.Slice(s.offset, s.bytes);
        case Region::kOutput:
          return outs[r].mem.Slice(s.offset, s.bytes);
        case Region::kScratch:
          return rs.slab.Slice(slab.scratch_offset + s.slot * slab.scratch_area_bytes + s.offset,
                               s.bytes);
        case Region::kPeerScratch:
          return ranks_[s.peer].slab.Slice(
              slab.scratch_offset + s.slot * slab.scratch_area_bytes + s.offset, s.bytes);
        case Region::kStaging:
          return rs.staging[s.slot].Slice(s.offset, s.bytes);
      }
      return MemRef{};
    };
    auto flag_word = [&](int rank, uint64_t base, int flag) {
      return ranks_[rank].slab.Slice(base + 8ull * flag, 8);
    };
    for (const PlanOp& op : plan.ranks[r]) {
      const StreamId stream = rs.streams[static_cast<int>(op.stream)];
      const std::string& label = op.label;
      absl::Status s;
      switch (op.kind) {
        case OpKind::kRecord:
          s = device_->RecordEvent(rs.events[op.event], stream);
          break;
        case OpKind::kWaitEvent:
          s = device_->WaitEvent(stream, rs.events[op.event]);
          break;
        case OpKind::kCopy:
          s = device_->Copy(stream, resolve(op.dst), resolve(op.terms[0]), label);
          break;
        case OpKind::kReduce: {
          absl::InlinedVector<Operand, 4> terms;
          for (const Slice& t : op.terms) terms.push_back(Operand{resolve(t), t.codec});
          s = device_->Reduce(stream, plan.dtype, Operand{resolve(op.dst), op.dst.codec}, terms,
                              op.elems, label);
          break;
        }
        case OpKind::kSignal:
          s = device_->SignalFlag(stream, flag_word(r, slab.counters_offset, op.flag),
                                  flag_word(op.peer, slab.flags_offset, op.flag), label);
          break;
        case OpKind::kWaitFlag:
          s = device_->WaitFlag(stream, flag_word(r, slab.expected_offset, op.flag),
                                flag_word(r, slab.flags_offset, op.flag), label);
          break;
      }
      if (!s.ok()) return Prefixed(absl::StrFormat("all_reduce: rank %d op '%s': ", r, label), s);
    }
  }
  return absl::OkStatus();
}

}  // namespace dmalab
