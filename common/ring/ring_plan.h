// A ring all-reduce plan: per rank, the ordered list of operations to enqueue.
//
// The plan is data, not calls: it names memory symbolically (input, output, own scratch
// areas, the successor's scratch areas), so it can be printed, checked, diffed and executed by
// any Device. RingPlanner (common/ring/ring_planner.h) makes plans; DmaAllReduce executes them.
#ifndef DMALAB_COMMON_RING_RING_PLAN_H_
#define DMALAB_COMMON_RING_RING_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/dtype.h"
#include "dmalab/device.h"
#include "dmalab/wire.h"

namespace dmalab {

// The streams a rank's plan uses. kCompute is the caller's stream.
enum class PlanStream { kCompute, kSend, kPlace, kFlag };
inline constexpr int kNumPlanStreams = 4;
std::string_view PlanStreamName(PlanStream s);

// Where a slice of memory lives, relative to the executing rank.
enum class Region {
  kInput,        // the caller's input tensor
  kOutput,       // the call's output tensor
  kScratch,      // one of the rank's own scratch areas (slot)
  kPeerScratch,  // one of the successor's scratch areas (slot)
  kStaging,      // one of the rank's own staging areas (slot), never exported
};

struct Slice {
  Region region = Region::kInput;
  int slot = 0;         // scratch or staging area index
  int peer = 0;         // kPeerScratch: the rank whose scratch it is
  uint64_t offset = 0;  // bytes from the region's start
  uint64_t bytes = 0;   // bytes covered (encoded size for block codecs)
  Codec codec = Codec::kPlain;
};

enum class OpKind {
  kRecord,     // record plan event `event` on `stream`
  kWaitEvent,  // `stream` waits for plan event `event`
  kCopy,       // DMA copy src -> dst
  kReduce,     // dst = encode(sum of decoded terms), `elems` elements
  kSignal,     // bump the counter of flag `flag` and store it to `peer`'s flag `flag`
  kWaitFlag,   // bump the expected value of flag `flag` and wait for the own flag to reach it
};

enum class Phase { kEntry, kReduceScatter, kAllGather, kExit };
std::string_view PhaseName(Phase p);

struct PlanOp {
  OpKind kind = OpKind::kCopy;
  PlanStream stream = PlanStream::kCompute;
  Phase phase = Phase::kEntry;
  int step = 0;
  int piece = 0;
  int event = -1;            // kRecord, kWaitEvent
  int flag = -1;             // kSignal, kWaitFlag: flag slot index
  int peer = -1;             // kSignal: the rank whose flag is stored
  Slice dst;                 // kCopy, kReduce
  std::vector<Slice> terms;  // kCopy: one source; kReduce: the summed terms
  int64_t elems = 0;         // kReduce

  // "rs.k1.p0 copy" style label used in reports.
  std::string Label() const;
  std::string label;  // Label(), made once by the planner (plans are cached; calls reuse it)
};

// Sizes of the per-rank slab that peers write into (exported memory).
struct SlabLayout {
  int num_flags = 0;             // flag slots
  uint64_t flags_offset = 0;     // uint64 flags written by peers
  uint64_t counters_offset = 0;  // uint64 send counters (local)
  uint64_t expected_offset = 0;  // uint64 expected values of waits (local)
  uint64_t scratch_offset = 0;   // first scratch area
  uint64_t scratch_area_bytes = 0;
  int num_scratch_areas = 0;
  uint64_t slab_bytes = 0;
  uint64_t staging_area_bytes = 0;  // per staging area, separate allocation
  int num_staging_areas = 0;
};

struct RingPlan {
  int world = 0;
  int64_t elems = 0;
  DType dtype = DType::kBF16;
  WireMode wire = WireMode::kNative;
  int pieces_requested = 0;
  int pieces = 0;  // effective
  int64_t chunk_elems = 0;
  SlabLayout slab;
  int num_events = 0;  // plan events per rank
  std::vector<std::vector<PlanOp>> ranks;
  std::vector<uint64_t> wire_bytes_sent;  // per rank, bytes its copies write to peers

  // Human-readable listing of the whole plan.
  std::string ToString() const;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_RING_RING_PLAN_H_
