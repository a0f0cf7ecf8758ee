// The ring planner as a specification: which chunk moves where at which step, sizes, rules.
#include "common/ring/ring_planner.h"

#include "gtest/gtest.h"

namespace dmalab {
namespace {

RingPlanRequest Request(int world, int64_t elems, int pieces = 2) {
  RingPlanRequest r;
  r.world = world;
  r.elems = elems;
  r.dtype = DType::kBF16;
  r.pieces = pieces;
  r.max_bytes = 1ull << 30;
  return r;
}

std::vector<PlanOp> OpsOf(const RingPlan& plan, int rank, OpKind kind, PlanStream stream) {
  std::vector<PlanOp> out;
  for (const PlanOp& op : plan.ranks[rank]) {
    if (op.kind == kind && op.stream == stream) out.push_back(op);
  }
  return out;
}

TEST(RingPlannerTest, ReduceScatterSendsChunkRMinusKAndAddsChunkRMinus1MinusK) {
  // 4 ranks, 4096 elems: chunk = 1024 elems = 2048 bytes, one piece (far under 512 KiB).
  absl::StatusOr<RingPlan> plan = PlanRing(Request(4, 4096));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->pieces, 1);
  EXPECT_EQ(plan->chunk_elems, 1024);
  const int r = 1;
  const std::vector<PlanOp> sends = OpsOf(*plan, r, OpKind::kCopy, PlanStream::kSend);
  ASSERT_EQ(sends.size(), 6u);  // 3 reduce-scatter + 3 all-gather steps
  // Step 0 sends input chunk 1, steps 1 and 2 send output chunks 0 and 3 (the partials).
  EXPECT_EQ(sends[0].terms[0].region, Region::kInput);
  EXPECT_EQ(sends[0].terms[0].offset, 1 * 2048u);
  EXPECT_EQ(sends[1].terms[0].region, Region::kOutput);
  EXPECT_EQ(sends[1].terms[0].offset, 0u);
  EXPECT_EQ(sends[2].terms[0].offset, 3 * 2048u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(sends[k].dst.region, Region::kPeerScratch);
    EXPECT_EQ(sends[k].dst.slot, k);
  }
  // Adds: step k writes output chunk (1-1-k) mod 4 = 0, 3, 2 from scratch slot k + input.
  const std::vector<PlanOp> adds = OpsOf(*plan, r, OpKind::kReduce, PlanStream::kCompute);
  ASSERT_EQ(adds.size(), 3u);
  const uint64_t expect_chunk[] = {0, 3, 2};
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(adds[k].dst.region, Region::kOutput);
    EXPECT_EQ(adds[k].dst.offset, expect_chunk[k] * 2048);
    ASSERT_EQ(adds[k].terms.size(), 2u);
    EXPECT_EQ(adds[k].terms[0].region, Region::kScratch);
    EXPECT_EQ(adds[k].terms[0].slot, k);
    EXPECT_EQ(adds[k].terms[1].region, Region::kInput);
    EXPECT_EQ(adds[k].terms[1].offset, expect_chunk[k] * 2048);
    EXPECT_EQ(adds[k].elems, 1024);
  }
  // All-gather: step 0 forwards the own finished chunk (r+1 = 2) from the output.
  EXPECT_EQ(sends[3].terms[0].region, Region::kOutput);
  EXPECT_EQ(sends[3].terms[0].offset, 2 * 2048u);
  EXPECT_EQ(sends[3].dst.slot, 3);
  // Placements: step g places chunk (1-g) mod 4 = 1, 0, 3 from scratch slots 3, 4, 5.
  const std::vector<PlanOp> places = OpsOf(*plan, r, OpKind::kCopy, PlanStream::kPlace);
  ASSERT_EQ(places.size(), 3u);
  const uint64_t place_chunk[] = {1, 0, 3};
  for (int g = 0; g < 3; ++g) {
    EXPECT_EQ(places[g].dst.offset, place_chunk[g] * 2048);
    EXPECT_EQ(places[g].terms[0].slot, 3 + g);
  }
}

TEST(RingPlannerTest, WireBytesAreTwoWorldMinusOneChunksPerRank) {
  absl::StatusOr<RingPlan> plan = PlanRing(Request(5, 5 * 8 * 1000));
  ASSERT_TRUE(plan.ok());
  for (uint64_t sent : plan->wire_bytes_sent) EXPECT_EQ(sent, 2u * 4 * 8000 * 2);
}

TEST(RingPlannerTest, PiecesFallBackToOneUnder512KiB) {
  // 4 ranks x 2 pieces: a 1 MiB chunk gives 512 KiB pieces: kept.
  EXPECT_EQ(PlanRing(Request(4, 4 * 512 * 1024))->pieces, 2);
  // One element-group less per chunk: pieces would be under 512 KiB: one piece.
  EXPECT_EQ(PlanRing(Request(4, 4 * (512 * 1024 - 8)))->pieces, 1);
  EXPECT_EQ(EffectivePieces(4, 2u << 20), 4);
  EXPECT_EQ(EffectivePieces(8, 2u << 20), 1);
}

TEST(RingPlannerTest, PiecesCoverTheChunkExactly) {
  // 3 ranks, chunk of 600,000 bf16 (1.2 MB): 2 pieces of 300,000 elements.
  absl::StatusOr<RingPlan> plan = PlanRing(Request(3, 3 * 600000));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->pieces, 2);
  const std::vector<PlanOp> adds = OpsOf(*plan, 0, OpKind::kReduce, PlanStream::kCompute);
  ASSERT_EQ(adds.size(), 4u);
  EXPECT_EQ(adds[0].elems + adds[1].elems, 600000);
  EXPECT_EQ(adds[1].dst.offset - adds[0].dst.offset, adds[0].dst.bytes);
}

TEST(RingPlannerTest, HandshakeSignalsPredecessorUnlessSkipped) {
  RingPlanRequest req = Request(3, 3 * 8);
  absl::StatusOr<RingPlan> plan = PlanRing(req);
  ASSERT_TRUE(plan.ok());
  const std::vector<PlanOp> signals = OpsOf(*plan, 0, OpKind::kSignal, PlanStream::kFlag);
  ASSERT_FALSE(signals.empty());
  EXPECT_EQ(signals.back().phase, Phase::kExit);
  EXPECT_EQ(signals.back().peer, 2);  // rank 0's predecessor in a ring of 3
  EXPECT_EQ(signals.front().peer, 1);
  req.faults.Add(Fault::kSkipEndHandshake);
  plan = PlanRing(req);
  EXPECT_NE(OpsOf(*plan, 0, OpKind::kSignal, PlanStream::kFlag).back().phase, Phase::kExit);
}

TEST(RingPlannerTest, SlabHoldsTwoWorldMinusOneScratchAreas) {
  const SlabLayout slab = LayoutSlab(4, 1000000);
  EXPECT_EQ(slab.num_scratch_areas, 6);
  EXPECT_EQ(slab.scratch_area_bytes, 250112u);  // 250,000 rounded up to 256
  EXPECT_EQ(slab.num_flags, 2 * 3 * 8 + 1);
  EXPECT_EQ(slab.slab_bytes, slab.scratch_offset + 6 * 250112u);
}

TEST(RingPlannerTest, RejectsBadRequestsWithTheRule) {
  EXPECT_EQ(PlanRing(Request(1, 64)).status().message(), "plan: world is 1; must be in [2, 16]");
  EXPECT_EQ(PlanRing(Request(17, 17 * 8)).status().message(),
            "plan: world is 17; must be in [2, 16]");
  EXPECT_EQ(PlanRing(Request(4, 100)).status().message(),
            "plan: elems is 100; must be a positive multiple of world*8 = 32");
  EXPECT_EQ(PlanRing(Request(4, 64, 9)).status().message(), "plan: pieces is 9; must be in [1, 8]");
  RingPlanRequest big = Request(2, 1024);
  big.max_bytes = 1024;
  EXPECT_EQ(PlanRing(big).status().message(),
            "plan: tensor is 2048 bytes; must be at most max_bytes = 1024");
}

TEST(RingPlannerTest, PrintsAReadablePlan) {
  absl::StatusOr<RingPlan> plan = PlanRing(Request(2, 16));
  ASSERT_TRUE(plan.ok());
  const std::string text = plan->ToString();
  EXPECT_NE(text.find("ring plan: world=2 elems=16 dtype=bf16 wire=bf16 pieces=1"),
            std::string::npos);
  EXPECT_NE(text.find("send     rs.k0.p0 copy          r1.scratch0[0+16] <- in[0+16]"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace dmalab
