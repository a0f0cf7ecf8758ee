#include "common/ring/ring_planner.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

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
    const uint64_t align = plan.wire == WireMode::kNative ? 8 : kCodecBlockElems;
    piece_elems_ = static_cast<int64_t>(RoundUp(static_cast<uint64_t>(per_piece), align));
  }

  int rank() const { return rank_; }
  int world() const { return plan_.world; }
  int pieces() const { return plan_.pieces; }
  int Succ() const { return Mod(rank_ + 1, plan_.world); }
  int Pred() const { return Mod(rank_ - 1, plan_.world); }

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
  // Encoded pieces are laid out one after another, each starting 16-byte aligned.
  uint64_t EncodedPieceOffset(int p) const {
    uint64_t off = 0;
    for (int q = 0; q < p; ++q)
      off += RoundUp(EncodedBytes(codec(), plan_.dtype, PieceElems(q)), 16);
    return off;
  }
  Codec codec() const { return WireCodec(plan_.wire); }

  // Piece p of chunk c of the input or output tensor.
  Slice Tensor(Region region, int chunk, int p) const {
    return Slice{region,       0, 0, chunk * ChunkBytes() + PieceOffsetBytes(p), PieceBytes(p),
                 Codec::kPlain};
  }
  // Piece p of scratch area `slot`: own (kScratch) or rank `peer`'s (kPeerScratch).
  Slice Scratch(Region region, int slot, int p, int peer = 0) const {
    return Slice{region, slot, peer, PieceOffsetBytes(p), PieceBytes(p), Codec::kPlain};
  }
  // The same, holding the block-encoded piece.
  Slice Encoded(Region region, int slot, int p, int peer = 0) const {
    return Slice{region,
                 slot,
                 peer,
                 EncodedPieceOffset(p),
                 EncodedBytes(codec(), plan_.dtype, PieceElems(p)),
                 codec()};
  }

  int NewEvent() { return next_event_++; }
  int events() const { return next_event_; }

  void Record(PlanStream s, Phase ph, int step, int piece, int event) {
    PlanOp op = Base(OpKind::kRecord, s, ph, step, piece);
    op.event = event;
    ops_->push_back(op);
  }
  int RecordNew(PlanStream s, Phase ph, int step, int piece) {
    const int e = NewEvent();
    Record(s, ph, step, piece, e);
    return e;
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
  void Reduce(PlanStream s, Phase ph, int step, int piece, Slice dst, std::vector<Slice> terms) {
    PlanOp op = Base(OpKind::kReduce, s, ph, step, piece);
    op.dst = dst;
    op.terms = std::move(terms);
    op.elems = PieceElems(piece);
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
  // Send stream copies src to the peer's scratch, then the flag stream signals the peer.
  void SendAndSignal(Phase ph, int step, int p, Slice dst, Slice src, int flag, int peer) {
    Copy(PlanStream::kSend, ph, step, p, dst, src);
    const int ev_sent = RecordNew(PlanStream::kSend, ph, step, p);
    WaitEvent(PlanStream::kFlag, ph, step, p, ev_sent);
    Signal(PlanStream::kFlag, ph, step, p, flag, peer);
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

// Flag slot numbering: reduce-scatter (or all-to-all) slots, then all-gather, then handshake.
int RsFlag(const RankPlanBuilder& b, int k, int p) { return k * b.pieces() + p; }
int AgFlag(const RankPlanBuilder& b, int g, int p) {
  return (b.world() - 1) * b.pieces() + g * b.pieces() + p;
}
int HandshakeFlag(const RankPlanBuilder& b) { return 2 * (b.world() - 1) * b.pieces(); }

// Reduce-scatter with a bf16 (native) payload: at step k send the partial of chunk (r-k);
// receive chunk (r-1-k) into scratch slot k and first-touch add the own input chunk into the
// output. Returns, per piece, the event after which the own chunk (r+1) is final.
std::vector<int> PlanReduceScatterNative(RankPlanBuilder& b, const FaultSet& faults) {
  const int w = b.world(), r = b.rank();
  const Phase ph = Phase::kReduceScatter;
  std::vector<int> ev_add(b.pieces(), -1);
  for (int k = 0; k < w - 1; ++k) {
    for (int p = 0; p < b.pieces(); ++p) {
      if (k > 0) b.WaitEvent(PlanStream::kSend, ph, k, p, ev_add[p]);
      const Region src = k == 0 ? Region::kInput : Region::kOutput;
      b.SendAndSignal(ph, k, p, b.Scratch(Region::kPeerScratch, k, p, b.Succ()),
                      b.Tensor(src, Mod(r - k, w), p), RsFlag(b, k, p), b.Succ());
      if (!faults.Has(Fault::kDropCopyWait)) {
        b.WaitFlag(PlanStream::kCompute, ph, k, p, RsFlag(b, k, p));
      }
      const int chunk = Mod(r - 1 - k, w);
      b.Reduce(PlanStream::kCompute, ph, k, p, b.Tensor(Region::kOutput, chunk, p),
               {b.Scratch(Region::kScratch, k, p), b.Tensor(Region::kInput, chunk, p)});
      ev_add[p] = b.RecordNew(PlanStream::kCompute, ph, k, p);
    }
  }
  return ev_add;
}

// Reduce-scatter that requantizes on every hop: the payload of step k is staging slot k; a
// receiver decodes the landed blocks, adds its input in fp32 and encodes the next payload; the
// last hop writes the plain sum into the output.
std::vector<int> PlanReduceScatterRequantized(RankPlanBuilder& b, const FaultSet& faults) {
  const int w = b.world(), r = b.rank();
  const Phase ph = Phase::kReduceScatter;
  std::vector<int> ev_payload(b.pieces(), -1), ev_final(b.pieces(), -1);
  for (int p = 0; p < b.pieces(); ++p) {
    b.Reduce(PlanStream::kCompute, ph, 0, p, b.Encoded(Region::kStaging, 0, p),
             {b.Tensor(Region::kInput, r, p)});
    ev_payload[p] = b.RecordNew(PlanStream::kCompute, ph, 0, p);
  }
  for (int k = 0; k < w - 1; ++k) {
    for (int p = 0; p < b.pieces(); ++p) {
      b.WaitEvent(PlanStream::kSend, ph, k, p, ev_payload[p]);
      b.SendAndSignal(ph, k, p, b.Encoded(Region::kPeerScratch, k, p, b.Succ()),
                      b.Encoded(Region::kStaging, k, p), RsFlag(b, k, p), b.Succ());
      if (!faults.Has(Fault::kDropCopyWait)) {
        b.WaitFlag(PlanStream::kCompute, ph, k, p, RsFlag(b, k, p));
      }
      const int chunk = Mod(r - 1 - k, w);
      const std::vector<Slice> terms = {b.Encoded(Region::kScratch, k, p),
                                        b.Tensor(Region::kInput, chunk, p)};
      if (k < w - 2) {
        b.Reduce(PlanStream::kCompute, ph, k, p, b.Encoded(Region::kStaging, k + 1, p), terms);
        ev_payload[p] = b.RecordNew(PlanStream::kCompute, ph, k, p);
      } else {
        b.Reduce(PlanStream::kCompute, ph, k, p, b.Tensor(Region::kOutput, chunk, p), terms);
        ev_final[p] = b.RecordNew(PlanStream::kCompute, ph, k, p);
      }
    }
  }
  return ev_final;
}

// All-to-all reduce-scatter: every rank encodes each input chunk once and sends it straight
// to the chunk's owner (rank c-1 owns chunk c); the owner sums all ranks' contributions in rank
// order in fp32. Sender r lands in owner t's scratch slot (r-t-1) mod w.
std::vector<int> PlanReduceScatterAllToAll(RankPlanBuilder& b, const FaultSet& faults) {
  const int w = b.world(), r = b.rank();
  const Phase ph = Phase::kReduceScatter;
  for (int j = 0; j < w - 1; ++j) {
    const int owner = Mod(r + 1 + j, w);
    const int slot = Mod(r - owner - 1, w);
    for (int p = 0; p < b.pieces(); ++p) {
      b.Reduce(PlanStream::kCompute, ph, j, p, b.Encoded(Region::kStaging, j, p),
               {b.Tensor(Region::kInput, Mod(owner + 1, w), p)});
      b.WaitEvent(PlanStream::kSend, ph, j, p, b.RecordNew(PlanStream::kCompute, ph, j, p));
      b.SendAndSignal(ph, j, p, b.Encoded(Region::kPeerScratch, slot, p, owner),
                      b.Encoded(Region::kStaging, j, p), RsFlag(b, slot, p), owner);
    }
  }
  std::vector<int> ev_final(b.pieces(), -1);
  const int own = Mod(r + 1, w);
  for (int p = 0; p < b.pieces(); ++p) {
    std::vector<Slice> terms;
    for (int q = 0; q < w; ++q) {
      if (q == r) {
        terms.push_back(b.Tensor(Region::kInput, own, p));
        continue;
      }
      const int slot = Mod(q - r - 1, w);
      if (!faults.Has(Fault::kDropCopyWait)) {
        b.WaitFlag(PlanStream::kCompute, ph, slot, p, RsFlag(b, slot, p));
      }
      terms.push_back(b.Encoded(Region::kScratch, slot, p));
    }
    b.Reduce(PlanStream::kCompute, ph, w - 1, p, b.Tensor(Region::kOutput, own, p), terms);
    ev_final[p] = b.RecordNew(PlanStream::kCompute, ph, w - 1, p);
  }
  return ev_final;
}

// The scratch slot all-gather step g lands in: w-1+g, after the reduce-scatter's slots (the
// flag-ready-not-consumed fault reuses reduce-scatter slot g).
int AgSlot(const RankPlanBuilder& b, int g, const FaultSet& faults) {
  return faults.Has(Fault::kFlagReadyNotConsumed) ? g : b.world() - 1 + g;
}

// All-gather of plain chunks: at step g forward chunk (r+1-g) to the successor's slot w-1+g;
// receive chunk (r-g) and place it into the output with a local copy.
void PlanAllGatherNative(RankPlanBuilder& b, const std::vector<int>& ev_final,
                         const FaultSet& faults, bool in_place) {
  const int w = b.world(), r = b.rank();
  const Phase ph = Phase::kAllGather;
  const bool forward_from_output = in_place && faults.Has(Fault::kInplaceAliasRing);
  std::vector<int> ev_land = ev_final;
  for (int g = 0; g < w - 1; ++g) {
    const int slot = AgSlot(b, g, faults);
    for (int p = 0; p < b.pieces(); ++p) {
      b.WaitEvent(PlanStream::kSend, ph, g, p, ev_land[p]);
      const Slice src = g == 0 || forward_from_output
                            ? b.Tensor(Region::kOutput, Mod(r + 1 - g, w), p)
                            : b.Scratch(Region::kScratch, AgSlot(b, g - 1, faults), p);
      b.SendAndSignal(ph, g, p, b.Scratch(Region::kPeerScratch, slot, p, b.Succ()), src,
                      AgFlag(b, g, p), b.Succ());
      b.WaitFlag(PlanStream::kCompute, ph, g, p, AgFlag(b, g, p));
      ev_land[p] = b.RecordNew(PlanStream::kCompute, ph, g, p);
      b.WaitEvent(PlanStream::kPlace, ph, g, p, ev_land[p]);
      b.Copy(PlanStream::kPlace, ph, g, p, b.Tensor(Region::kOutput, Mod(r - g, w), p),
             b.Scratch(Region::kScratch, slot, p));
    }
  }
}

// All-gather of a chunk quantized once by its owner: the owner encodes its finished chunk into
// staging slot w-1 and decodes its own output from that very payload, so every rank ends
// bit-identical; receivers forward the blocks unchanged and decode them into the output. The
// encode runs on the compute stream, after the final reduce of the own chunk.
void PlanAllGatherQuantized(RankPlanBuilder& b, const FaultSet& faults) {
  const int w = b.world(), r = b.rank();
  const int own = Mod(r + 1, w);
  std::vector<int> ev_land(b.pieces(), -1);
  for (int p = 0; p < b.pieces(); ++p) {
    b.Reduce(PlanStream::kCompute, Phase::kAllGather, 0, p, b.Encoded(Region::kStaging, w - 1, p),
             {b.Tensor(Region::kOutput, own, p)});
    ev_land[p] = b.RecordNew(PlanStream::kCompute, Phase::kAllGather, 0, p);
    if (faults.Has(Fault::kOwnerKeepsPrequant)) continue;
    b.Reduce(PlanStream::kCompute, Phase::kAllGather, 0, p, b.Tensor(Region::kOutput, own, p),
             {b.Encoded(Region::kStaging, w - 1, p)});
  }
  const Phase ph = Phase::kAllGather;
  for (int g = 0; g < w - 1; ++g) {
    const int slot = AgSlot(b, g, faults);
    for (int p = 0; p < b.pieces(); ++p) {
      b.WaitEvent(PlanStream::kSend, ph, g, p, ev_land[p]);
      const Slice src = g == 0 ? b.Encoded(Region::kStaging, w - 1, p)
                               : b.Encoded(Region::kScratch, AgSlot(b, g - 1, faults), p);
      b.SendAndSignal(ph, g, p, b.Encoded(Region::kPeerScratch, slot, p, b.Succ()), src,
                      AgFlag(b, g, p), b.Succ());
      b.WaitFlag(PlanStream::kCompute, ph, g, p, AgFlag(b, g, p));
      ev_land[p] = b.RecordNew(PlanStream::kCompute, ph, g, p);
      b.Reduce(PlanStream::kCompute, ph, g, p, b.Tensor(Region::kOutput, Mod(r - g, w), p),
               {b.Encoded(Region::kScratch, slot, p)});
    }
  }
}

void PlanRank(RankPlanBuilder& b, WireMode wire, const FaultSet& faults, bool in_place) {
  const int ev_in = b.RecordNew(PlanStream::kCompute, Phase::kEntry, 0, 0);
  b.WaitEvent(PlanStream::kSend, Phase::kEntry, 0, 0, ev_in);

  std::vector<int> ev_final;
  switch (wire) {
    case WireMode::kNative:
    case WireMode::kI8:
    case WireMode::kE4M3:
      ev_final = PlanReduceScatterNative(b, faults);
      break;
    case WireMode::kI8Ring:
    case WireMode::kE4M3Ring:
      ev_final = PlanReduceScatterRequantized(b, faults);
      break;
    case WireMode::kI8A2A:
    case WireMode::kE4M3A2A:
      ev_final = PlanReduceScatterAllToAll(b, faults);
      break;
  }
  if (wire == WireMode::kNative) {
    PlanAllGatherNative(b, ev_final, faults, in_place);
  } else {
    PlanAllGatherQuantized(b, faults);
  }

  // Exit: join every stream into the compute stream, then the neighbour handshake: tell the
  // predecessor that this rank no longer reads its scratch, wait until the successor says so.
  const bool early_return = faults.Has(Fault::kEarlyReturn);
  for (PlanStream s : {PlanStream::kSend, PlanStream::kPlace, PlanStream::kFlag}) {
    if (early_return && s != PlanStream::kPlace) continue;
    b.WaitEvent(PlanStream::kCompute, Phase::kExit, 0, 0, b.RecordNew(s, Phase::kExit, 0, 0));
  }
  if (!faults.Has(Fault::kSkipEndHandshake) && !early_return) {
    b.WaitEvent(PlanStream::kFlag, Phase::kExit, 0, 0,
                b.RecordNew(PlanStream::kCompute, Phase::kExit, 0, 0));
    b.Signal(PlanStream::kFlag, Phase::kExit, 0, 0, HandshakeFlag(b), b.Pred());
    b.WaitFlag(PlanStream::kCompute, Phase::kExit, 0, 0, HandshakeFlag(b));
  }
}

}  // namespace

absl::Status CheckWireApplies(WireMode wire, int world, int64_t elems, DType dtype) {
  if (wire == WireMode::kNative) return absl::OkStatus();
  if (dtype != DType::kBF16) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "wire mode %s needs bf16 input; the tensor is %s", WireModeName(wire), DTypeName(dtype)));
  }
  if ((elems / world) % kCodecBlockElems != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("wire mode %s needs a shard (elems / world = %d / %d = %d) divisible by %d",
                        WireModeName(wire), elems, world, elems / world, kCodecBlockElems));
  }
  return absl::OkStatus();
}

SlabLayout LayoutSlab(int world, uint64_t max_bytes, WireMode wire) {
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
  if (wire != WireMode::kNative) {
    // Outgoing encoded payloads: w-1 reduce-scatter (or all-to-all) slots and one all-gather
    // slot, each one chunk of bf16 blocks plus per-piece alignment.
    const int64_t chunk_elems = static_cast<int64_t>(max_bytes / 2 / world);
    slab.staging_area_bytes =
        RoundUp(EncodedBytes(WireCodec(wire), DType::kBF16, chunk_elems) + 16 * kMaxPieces, 256);
    slab.num_staging_areas = world;
  }
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
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: world is %d; must be in [%d, %d]", req.world, kMinWorld, kMaxWorld));
  }
  if (req.pieces < 1 || req.pieces > kMaxPieces) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: pieces is %d; must be in [1, %d]", req.pieces, kMaxPieces));
  }
  if (req.elems <= 0 || req.elems % (req.world * 8) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("plan: elems is %d; must be a positive multiple of world*8 = %d", req.elems,
                        req.world * 8));
  }
  const uint64_t bytes = static_cast<uint64_t>(req.elems) * DTypeBytes(req.dtype);
  if (bytes > req.max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plan: tensor is %d bytes; must be at most max_bytes = %d", bytes, req.max_bytes));
  }
  DMALAB_RETURN_IF_ERROR(CheckWireApplies(req.wire, req.world, req.elems, req.dtype));

  RingPlan plan;
  plan.world = req.world;
  plan.elems = req.elems;
  plan.dtype = req.dtype;
  plan.wire = req.wire;
  plan.pieces_requested = req.pieces;
  plan.chunk_elems = req.elems / req.world;
  const uint64_t chunk_bytes = static_cast<uint64_t>(plan.chunk_elems) * DTypeBytes(req.dtype);
  plan.pieces = EffectivePieces(req.pieces, chunk_bytes);

  plan.slab = LayoutSlab(req.world, req.max_bytes, req.wire);

  plan.ranks.resize(req.world);
  plan.wire_bytes_sent.assign(req.world, 0);
  for (int r = 0; r < req.world; ++r) {
    RankPlanBuilder b(plan, r, &plan.ranks[r], &plan.wire_bytes_sent[r]);
    PlanRank(b, req.wire, req.faults, req.in_place);
    plan.num_events = std::max(plan.num_events, b.events());
    for (PlanOp& op : plan.ranks[r]) op.label = op.Label();
  }
  return plan;
}

}  // namespace dmalab
