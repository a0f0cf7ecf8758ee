#include "common/ring_planner.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

int Mod(int a, int w) { return ((a % w) + w) % w; }

// Builds one rank's op list; knows the chunk and piece geometry.
class RankPlanBuilder {
 public:
  RankPlanBuilder(const RingPlan& plan, int rank, std::vector<PlanOp>* ops, uint64_t* sent_bytes)
      : plan_(plan), rank_(rank), ops_(ops), sent_bytes_(sent_bytes) {
    const int64_t per_piece = (plan.chunk_elems + plan.pieces - 1) / plan.pieces;
    piece_elems_ = static_cast<int64_t>(RoundUp(static_cast<uint64_t>(per_piece), 8));
  }

  int64_t PieceElems(int p) const {
    const int64_t begin = p * piece_elems_;
    return std::min(piece_elems_, plan_.chunk_elems - begin);
  }
  uint64_t PieceOffsetBytes(int p) const {
    return static_cast<uint64_t>(p * piece_elems_) * DTypeBytes(plan_.dtype);
  }
  uint64_t PieceBytes(int p) const {
    return static_cast<uint64_t>(PieceElems(p)) * DTypeBytes(plan_.dtype);
  }
  uint64_t ChunkBytes() const {
    return static_cast<uint64_t>(plan_.chunk_elems) * DTypeBytes(plan_.dtype);
  }

  // Piece p of chunk c of the input or output tensor.
  Slice Tensor(Region region, int chunk, int p) const {
    return Slice{region, 0, chunk * ChunkBytes() + PieceOffsetBytes(p), PieceBytes(p),
                 Codec::kPlain};
  }
  // Piece p of scratch area `slot` (own or the successor's).
  Slice Scratch(Region region, int slot, int p) const {
    return Slice{region, slot, PieceOffsetBytes(p), PieceBytes(p), Codec::kPlain};
  }

  int NewEvent() { return next_event_++; }
  int events() const { return next_event_; }

  void Record(PlanStream s, Phase ph, int step, int piece, int event) {
    PlanOp op = Base(OpKind::kRecord, s, ph, step, piece);
    op.event = event;
    ops_->push_back(op);
  }
  void WaitEvent(PlanStream s, Phase ph, int step, int piece, int event) {
    PlanOp op = Base(OpKind::kWaitEvent, s, ph, step, piece);
    op.event = event;
    ops_->push_back(op);
  }
  void Copy(PlanStream s, Phase ph, int step, int piece, Slice dst, Slice src) {
    PlanOp op = Base(OpKind::kCopy, s, ph, step, piece);
    if (dst.region == Region::kPeerScratch) *sent_bytes_ += dst.bytes;
    op.dst = dst;
    op.terms = {src};
    ops_->push_back(op);
  }
  void Reduce(PlanStream s, Phase ph, int step, int piece, Slice dst, std::vector<Slice> terms,
              int64_t elems) {
    PlanOp op = Base(OpKind::kReduce, s, ph, step, piece);
    op.dst = dst;
    op.terms = std::move(terms);
    op.elems = elems;
    ops_->push_back(op);
  }
  void Signal(PlanStream s, Phase ph, int step, int piece, int flag, int peer) {
    PlanOp op = Base(OpKind::kSignal, s, ph, step, piece);
    op.flag = flag;
    op.peer = peer;
    ops_->push_back(op);
  }
  void WaitFlag(PlanStream s, Phase ph, int step, int piece, int flag) {
    PlanOp op = Base(OpKind::kWaitFlag, s, ph, step, piece);
    op.flag = flag;
    ops_->push_back(op);
  }

 private:
  static PlanOp Base(OpKind kind, PlanStream s, Phase ph, int step, int piece) {
    PlanOp op;
    op.kind = kind;
    op.stream = s;
    op.phase = ph;
    op.step = step;
    op.piece = piece;
    return op;
  }

  const RingPlan& plan_;
  int rank_;
  std::vector<PlanOp>* ops_;
  uint64_t* sent_bytes_;
  int64_t piece_elems_ = 0;
  int next_event_ = 0;
};

// The uncompressed ring: reduce-scatter with first-touch adds, all-gather with placement
// copies, end-of-call handshake (DESIGN.md section 3).
void PlanNativeRank(const RingPlan& plan, const FaultSet& faults, int r, RankPlanBuilder& b) {
  const int w = plan.world;
  const int np = plan.pieces;
  const int succ = Mod(r + 1, w);
  const int pred = Mod(r - 1, w);
  auto rs_flag = [&](int k, int p) { return k * np + p; };
  auto ag_flag = [&](int g, int p) { return (w - 1) * np + g * np + p; };
  const int hs_flag = 2 * (w - 1) * np;

  const int ev_in = b.NewEvent();
  b.Record(PlanStream::kCompute, Phase::kEntry, 0, 0, ev_in);
  b.WaitEvent(PlanStream::kSend, Phase::kEntry, 0, 0, ev_in);

  // Reduce-scatter: at step k send the partial of chunk (r-k); receive chunk (r-1-k) into
  // scratch slot k and first-touch add the own input chunk into the output.
  std::vector<std::vector<int>> ev_add(w - 1, std::vector<int>(np));
  for (int k = 0; k < w - 1; ++k) {
    const int send_chunk = Mod(r - k, w);
    const int recv_chunk = Mod(r - 1 - k, w);
    for (int p = 0; p < np; ++p) {
      const Phase ph = Phase::kReduceScatter;
      if (k > 0) b.WaitEvent(PlanStream::kSend, ph, k, p, ev_add[k - 1][p]);
      const Region src = k == 0 ? Region::kInput : Region::kOutput;
      b.Copy(PlanStream::kSend, ph, k, p, b.Scratch(Region::kPeerScratch, k, p),
             b.Tensor(src, send_chunk, p));
      const int ev_sent = b.NewEvent();
      b.Record(PlanStream::kSend, ph, k, p, ev_sent);
      b.WaitEvent(PlanStream::kFlag, ph, k, p, ev_sent);
      b.Signal(PlanStream::kFlag, ph, k, p, rs_flag(k, p), succ);
      if (!faults.Has(Fault::kDropCopyWait)) {
        b.WaitFlag(PlanStream::kCompute, ph, k, p, rs_flag(k, p));
      }
      b.Reduce(PlanStream::kCompute, ph, k, p, b.Tensor(Region::kOutput, recv_chunk, p),
               {b.Scratch(Region::kScratch, k, p), b.Tensor(Region::kInput, recv_chunk, p)},
               b.PieceElems(p));
      ev_add[k][p] = b.NewEvent();
      b.Record(PlanStream::kCompute, ph, k, p, ev_add[k][p]);
    }
  }

  // All-gather: at step g forward chunk (r+1-g) to the successor's slot w-1+g; receive chunk
  // (r-g) and place it into the output with a local copy.
  std::vector<std::vector<int>> ev_land(w - 1, std::vector<int>(np));
  for (int g = 0; g < w - 1; ++g) {
    const int send_chunk = Mod(r + 1 - g, w);
    const int recv_chunk = Mod(r - g, w);
    const int slot = w - 1 + g;
    for (int p = 0; p < np; ++p) {
      const Phase ph = Phase::kAllGather;
      Slice src;
      if (g == 0) {
        b.WaitEvent(PlanStream::kSend, ph, g, p, ev_add[w - 2][p]);
        src = b.Tensor(Region::kOutput, send_chunk, p);
      } else {
        b.WaitEvent(PlanStream::kSend, ph, g, p, ev_land[g - 1][p]);
        src = b.Scratch(Region::kScratch, slot - 1, p);
      }
      b.Copy(PlanStream::kSend, ph, g, p, b.Scratch(Region::kPeerScratch, slot, p), src);
      const int ev_sent = b.NewEvent();
      b.Record(PlanStream::kSend, ph, g, p, ev_sent);
      b.WaitEvent(PlanStream::kFlag, ph, g, p, ev_sent);
      b.Signal(PlanStream::kFlag, ph, g, p, ag_flag(g, p), succ);
      b.WaitFlag(PlanStream::kCompute, ph, g, p, ag_flag(g, p));
      ev_land[g][p] = b.NewEvent();
      b.Record(PlanStream::kCompute, ph, g, p, ev_land[g][p]);
      b.WaitEvent(PlanStream::kPlace, ph, g, p, ev_land[g][p]);
      b.Copy(PlanStream::kPlace, ph, g, p, b.Tensor(Region::kOutput, recv_chunk, p),
             b.Scratch(Region::kScratch, slot, p));
    }
  }

  // Exit: join every stream into the compute stream, then the neighbour handshake: tell the
  // predecessor that this rank no longer reads its scratch, wait until the successor says so.
  for (PlanStream s : {PlanStream::kSend, PlanStream::kPlace, PlanStream::kFlag}) {
    const int ev = b.NewEvent();
    b.Record(s, Phase::kExit, 0, 0, ev);
    b.WaitEvent(PlanStream::kCompute, Phase::kExit, 0, 0, ev);
  }
  if (!faults.Has(Fault::kSkipEndHandshake)) {
    const int ev_join = b.NewEvent();
    b.Record(PlanStream::kCompute, Phase::kExit, 0, 0, ev_join);
    b.WaitEvent(PlanStream::kFlag, Phase::kExit, 0, 0, ev_join);
    b.Signal(PlanStream::kFlag, Phase::kExit, 0, 0, hs_flag, pred);
    b.WaitFlag(PlanStream::kCompute, Phase::kExit, 0, 0, hs_flag);
  }
}

}  // namespace

SlabLayout LayoutSlab(int world, uint64_t max_bytes) {
  SlabLayout slab;
  // Flag slots for the most pieces any call may use, so the layout depends on the channel
  // alone and calls of different sizes share one slab.
  slab.num_flags = 2 * (world - 1) * kMaxPieces + 1;
  const uint64_t flag_bytes = RoundUp(slab.num_flags * 8ull, 256);
  slab.flags_offset = 0;
  slab.counters_offset = flag_bytes;
  slab.expected_offset = 2 * flag_bytes;
  slab.scratch_offset = 3 * flag_bytes;
  slab.scratch_area_bytes = ScratchAreaBytes(max_bytes, world);
  slab.num_scratch_areas = 2 * (world - 1);
  slab.slab_bytes = slab.scratch_offset + slab.scratch_area_bytes * slab.num_scratch_areas;
  return slab;
}

int EffectivePieces(int requested, uint64_t chunk_bytes) {
  if (requested <= 1) return 1;
  return chunk_bytes / static_cast<uint64_t>(requested) < kMinPieceBytes ? 1 : requested;
}

uint64_t ScratchAreaBytes(uint64_t max_bytes, int world) {
  return RoundUp((max_bytes + world - 1) / world, 256);
}

absl::StatusOr<RingPlan> PlanRing(const RingPlanRequest& req) {
  if (req.world < kMinWorld || req.world > kMaxWorld) {
    return absl::InvalidArgumentError(absl::StrFormat("plan: world is %d; must be in [%d, %d]",
                                                      req.world, kMinWorld, kMaxWorld));
  }
  if (req.pieces < 1 || req.pieces > kMaxPieces) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: pieces is %d; must be in [1, %d]", req.pieces, kMaxPieces));
  }
  if (req.elems <= 0 || req.elems % (req.world * 8) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: elems is %d; must be a positive multiple of world*8 = %d",
                        req.elems, req.world * 8));
  }
  const uint64_t bytes = static_cast<uint64_t>(req.elems) * DTypeBytes(req.dtype);
  if (bytes > req.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: tensor is %d bytes; must be at most max_bytes = %d", bytes,
                        req.max_bytes));
  }
  if (req.wire != WireMode::kNative) {
    return absl::UnimplementedError(absl::StrFormat(
        "plan: wire mode %s is not built yet; only bf16 runs", WireModeName(req.wire)));
  }

  RingPlan plan;
  plan.world = req.world;
  plan.elems = req.elems;
  plan.dtype = req.dtype;
  plan.wire = req.wire;
  plan.pieces_requested = req.pieces;
  plan.chunk_elems = req.elems / req.world;
  const uint64_t chunk_bytes = static_cast<uint64_t>(plan.chunk_elems) * DTypeBytes(req.dtype);
  plan.pieces = EffectivePieces(req.pieces, chunk_bytes);

  plan.slab = LayoutSlab(req.world, req.max_bytes);

  plan.ranks.resize(req.world);
  plan.wire_bytes_sent.assign(req.world, 0);
  for (int r = 0; r < req.world; ++r) {
    RankPlanBuilder b(plan, r, &plan.ranks[r], &plan.wire_bytes_sent[r]);
    PlanNativeRank(plan, req.faults, r, b);
    plan.num_events = std::max(plan.num_events, b.events());
  }
  return plan;
}

}  // namespace dmalab
