// RingPlanner: a pure function from (world, elems, dtype, pieces, wire mode, max_bytes) to a
// RingPlan (docs/design.md section 3).
#ifndef DMALAB_COMMON_RING_RING_PLANNER_H_
#define DMALAB_COMMON_RING_RING_PLANNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/core/codec.h"  // kCodecBlockElems
#include "common/ring/ring_plan.h"
#include "dmalab/faults.h"

namespace dmalab {

inline constexpr int kMinWorld = 2;
inline constexpr int kMaxWorld = 16;
inline constexpr int kMaxPieces = 8;
// Pieces smaller than this are not worth overlapping: the plan falls back to one piece.
inline constexpr uint64_t kMinPieceBytes = 512 * 1024;

struct RingPlanRequest {
  int world = 4;
  int64_t elems = 0;
  DType dtype = DType::kBF16;
  int pieces = 2;
  WireMode wire = WireMode::kNative;
  uint64_t max_bytes = 0;  // sizes the scratch areas; at least the tensor's bytes
  FaultSet faults;         // kDropCopyWait, kSkipEndHandshake, ... change the plan
  bool in_place = false;   // the call's output is its input (the plan is the same unless a fault
                           // targets in-place calls)
};

// Effective pieces for a chunk of `chunk_bytes`: `requested`, or 1 when a piece would be under
// kMinPieceBytes.
int EffectivePieces(int requested, uint64_t chunk_bytes);

// Scratch area size for `max_bytes` over `world` ranks: max_bytes / world rounded up to 256 B.
uint64_t ScratchAreaBytes(uint64_t max_bytes, int world);

// The slab of a channel of `world` ranks for tensors up to `max_bytes`: flags for every
// pieces setting, then 2(world-1) scratch areas.
SlabLayout LayoutSlab(int world, uint64_t max_bytes, WireMode wire = WireMode::kNative);

// Whether a compressed wire mode can carry this tensor (bf16, shard divisible by 128); OK for
// the native mode always. The error says which rule fails.
absl::Status CheckWireApplies(WireMode wire, int world, int64_t elems, DType dtype);

// Makes the plan, or says which argument breaks which rule.
absl::StatusOr<RingPlan> PlanRing(const RingPlanRequest& request);

}  // namespace dmalab

#endif  // DMALAB_COMMON_RING_RING_PLANNER_H_
