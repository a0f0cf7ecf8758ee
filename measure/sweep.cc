#include "measure/sweep.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_format.h"
#include "common/core/byte_size.h"
#include "common/core/collective.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "measure/speed_of_light.h"
#include "sim/predict.h"

namespace dmalab {
namespace {

// Rank r's input element i: a small integer that depends on i only through i % kPeriod, so
// every sum is exact in every dtype and the expected value is a table lookup.
constexpr int64_t kPeriod = 17;
int64_t InputValue(int rank, int64_t i) { return (i * 7 + rank * 13) % kPeriod - 8; }

// The payload that marks a status as the collective's failure (IsCollectiveFailure).
constexpr char kCollectiveFailureUrl[] = "dmalab.measure.sweep/collective_failure";

// `s` (not OK), from the collective's call or from the device while it ran, as the collective's
// failure at `bytes` in `phase`: the message names both; the code is kept.
absl::Status CollectiveFailure(const absl::Status& s, uint64_t bytes, std::string_view phase) {
  absl::Status marked(s.code(), absl::StrFormat("the all-reduce of %s (%s) failed: %s",
                                                DescribeByteSize(bytes), phase, s.message()));
  marked.SetPayload(kCollectiveFailureUrl,
                    absl::Cord(absl::string_view(phase.data(), phase.size())));
  return marked;
}

// Per-rank buffers sized for the largest tensor; every size uses their prefixes.
struct SweepBuffers {
  std::vector<MemRef> input, output, in_place;
};

// Zeros: written as bytes, or on a shadow device as host data of one fixed content.
absl::Status WriteZeros(Device& device, const MemRef& mem) {
  if (!device.HoldsValues()) return device.WriteShadow(mem, /*content=*/0);
  return device.Write(mem, std::vector<uint8_t>(mem.bytes, 0));
}

absl::StatusOr<SweepBuffers> AllocateBuffers(Device& device, uint64_t bytes) {
  SweepBuffers b;
  for (int r = 0; r < device.world_size(); ++r) {
    const std::pair<std::vector<MemRef>*, const char*> lists[] = {
        {&b.input, "sweep input"}, {&b.output, "sweep output"}, {&b.in_place, "sweep in-place"}};
    for (const auto& [list, tag] : lists) {
      DMALAB_ASSIGN_OR_RETURN(MemRef m, device.Allocate(r, bytes, tag));
      DMALAB_RETURN_IF_ERROR(WriteZeros(device, m));
      list->push_back(m);
    }
  }
  return b;
}

void FreeBuffers(Device& device, const SweepBuffers& b) {
  (void)device.Synchronize();
  for (const auto* list : {&b.input, &b.output, &b.in_place}) {
    for (const MemRef& m : *list) (void)device.Free(m);
  }
}

// Fills every rank's view with the pattern InputValue(rank, i), or with zeros.
absl::Status WriteInputs(Device& device, absl::Span<const TensorView> views, bool zeros) {
  for (const TensorView& v : views) {
    if (zeros) {
      DMALAB_RETURN_IF_ERROR(WriteZeros(device, v.mem));
      continue;
    }
    std::vector<uint8_t> bytes(v.bytes(), 0);
    const int esize = DTypeBytes(v.dtype);
    uint8_t period[kPeriod * 4];
    for (int64_t k = 0; k < kPeriod; ++k) {
      StoreFromFloat(v.dtype, period, k, static_cast<float>(InputValue(v.rank(), k)));
    }
    for (int64_t i = 0; i < v.elems(); ++i) {
      std::memcpy(bytes.data() + i * esize, period + (i % kPeriod) * esize, esize);
    }
    DMALAB_RETURN_IF_ERROR(device.Write(v.mem, bytes));
  }
  return absl::OkStatus();
}

// Writes the integer inputs into `ins`, runs one all-reduce into `outs` and counts wrong (and,
// for compressed wires, rounded) elements as SweepTiming documents.
absl::Status Check(Device& device, Collective& ar, absl::Span<const TensorView> ins,
                   absl::Span<const TensorView> outs, WireMode wire, SweepTiming& timing) {
  const int world = device.world_size();
  DMALAB_RETURN_IF_ERROR(WriteInputs(device, ins, /*zeros=*/false));
  absl::Status call = ar.AllReduce(ins, outs);
  if (call.ok()) call = device.Synchronize();
  if (!call.ok()) return CollectiveFailure(call, outs[0].bytes(), "check");
  float expected[kPeriod];
  for (int64_t k = 0; k < kPeriod; ++k) {
    int64_t sum = 0;
    for (int r = 0; r < world; ++r) sum += InputValue(r, k);
    expected[k] = static_cast<float>(sum);
  }
  const DType dtype = outs[0].dtype;
  const int64_t n = outs[0].elems();
  const int esize = DTypeBytes(dtype);
  int64_t off_sum = 0, off_rank0 = 0;
  std::vector<uint8_t> rank0(outs[0].bytes()), got(outs[0].bytes());
  for (int r = 0; r < world; ++r) {
    std::vector<uint8_t>& bytes = r == 0 ? rank0 : got;
    DMALAB_RETURN_IF_ERROR(device.Read(outs[r].mem, absl::MakeSpan(bytes)));
    for (int64_t i = 0; i < n; ++i) {
      off_sum += LoadAsFloat(dtype, bytes.data(), i) != expected[i % kPeriod];
      if (r > 0) {
        off_rank0 += std::memcmp(bytes.data() + i * esize, rank0.data() + i * esize, esize) != 0;
      }
    }
  }
  if (wire == WireMode::kNative) {
    timing.wrong = off_sum;
  } else {
    timing.wrong = off_rank0;
    timing.rounded = off_sum;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SweepCounts(const SweepOptions& o, int world) {
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sweep: -b is %d bytes and -e %d; need 0 < b <= e", o.min_bytes, o.max_bytes));
  }
  if (o.factor < 2) {
    return absl::InvalidArgumentError(absl::StrFormat("sweep: -f is %d; must be >= 2", o.factor));
  }
  const int64_t granule = world * (o.wire == WireMode::kNative ? 8 : kCodecBlockElems);
  std::vector<int64_t> counts;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const int64_t count = static_cast<int64_t>(bytes / DTypeBytes(o.dtype)) / granule * granule;
    if (count > 0 && (counts.empty() || counts.back() != count)) counts.push_back(count);
    if (bytes > o.max_bytes / o.factor) break;  // the next size would overflow or exceed e
  }
  if (counts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sweep: no size in [%d, %d] bytes holds a multiple of %d %s elements",
                        o.min_bytes, o.max_bytes, granule, DTypeName(o.dtype)));
  }
  DMALAB_RETURN_IF_ERROR(CheckWireApplies(o.wire, world, counts.front(), o.dtype));
  return counts;
}

absl::Status CheckSweepOptions(const SweepOptions& o, const Device& device) {
  DMALAB_RETURN_IF_ERROR(SweepCounts(o, device.world_size()).status());
  if (o.check && !device.HoldsValues()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sweep: -c 1 compares results with the exact sum, but device '%s' runs in the shadow "
        "fidelity and keeps no values; use -c 0 (times only)",
        device.name()));
  }
  if (o.graph && o.warmup < 1) {
    return absl::InvalidArgumentError(
        "sweep: -G needs -w >= 1, so that the graph is captured outside the timed calls");
  }
  const bool ring = o.collective == kRingCollective;
  if (o.graph && !ring) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sweep: -G replays the ring's own captured graphs; collective '%s' is timed eagerly "
        "(leave -G out)",
        o.collective));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SweepRow>> RunSweep(Device& device, const DeviceClock& clock,
                                               const SweepOptions& o,
                                               const SweepObserver& observer) {
  const int world = device.world_size();
  DMALAB_RETURN_IF_ERROR(CheckSweepOptions(o, device));
  DMALAB_ASSIGN_OR_RETURN(std::vector<int64_t> counts, SweepCounts(o, world));
  const bool ring = o.collective == kRingCollective;
  const uint64_t max_bytes = static_cast<uint64_t>(counts.back()) * DTypeBytes(o.dtype);
  DmaAllReduceOptions ar_options;
  ar_options.max_bytes = max_bytes;
  ar_options.wire = o.wire;
  ar_options.pieces = o.pieces;
  ar_options.graph_cache = o.graph;
  std::unique_ptr<Collective> ar;
  if (ring) {
    DMALAB_ASSIGN_OR_RETURN(ar, DmaAllReduce::Create(&device, ar_options));
  } else {
    CollectiveParams params;
    params.max_bytes = max_bytes;
    params.dtype = o.dtype;
    params.wire = o.wire;
    params.pieces = o.pieces;
    params.process = o.spmd_process;
    DMALAB_ASSIGN_OR_RETURN(ar, OpenCollective(&device, o.collective, params));
  }
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<SpeedOfLight> sol,
                          SpeedOfLight::Create(&device, max_bytes, /*graphs=*/o.graph));
  DMALAB_ASSIGN_OR_RETURN(SweepBuffers buffers, AllocateBuffers(device, max_bytes));

  std::vector<SweepRow> rows;
  absl::Status status;
  const int total = static_cast<int>(counts.size());
  const auto progress = [&](int index, uint64_t bytes, std::string_view phase) {
    if (observer.progress) observer.progress(index, total, bytes, phase);
  };
  for (int index = 0; index < total && status.ok(); ++index) {
    SweepRow row;
    row.count = counts[index];
    row.bytes = static_cast<uint64_t>(row.count) * DTypeBytes(o.dtype);
    row.dtype = o.dtype;
    row.wire = o.wire;
    const std::vector<TensorView> ins = ContiguousViews(buffers.input, o.dtype, row.count);
    const std::vector<TensorView> outs = ContiguousViews(buffers.output, o.dtype, row.count);
    const std::vector<TensorView> in_place = ContiguousViews(buffers.in_place, o.dtype, row.count);
    const auto measure = [&](absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                             std::string_view phase, SweepTiming& t) -> absl::Status {
      // Everything TimePerCallUs does is the collective's: its calls and the synchronizes that
      // wait for them.
      absl::StatusOr<double> us =
          TimePerCallUs(device, clock, o.warmup, o.iters, [&] { return ar->AllReduce(in, out); });
      if (!us.ok()) return CollectiveFailure(us.status(), row.bytes, phase);
      t.time_us = *us;
      t.algbw_gbps = static_cast<double>(row.bytes) / (*us * 1e3);
      t.busbw_gbps = AllReduceBusGbps(row.bytes, world, *us);
      return absl::OkStatus();
    };
    progress(index, row.bytes, "out-of-place");
    status = measure(ins, outs, "out of place", row.out_of_place);
    if (!status.ok()) break;
    progress(index, row.bytes, "in-place");
    // A check of the previous size left sums in the in-place buffer: time zeros again.
    status = WriteInputs(device, in_place, /*zeros=*/true);
    if (status.ok()) status = measure(in_place, in_place, "in place", row.in_place);
    if (!status.ok()) break;
    progress(index, row.bytes, "speed of light");
    // The ring's plan at this size, the speed of light's copies (for a plugin too: a reference).
    RingPlanRequest request;
    request.world = world;
    request.elems = row.count;
    request.dtype = o.dtype;
    request.pieces = o.pieces;
    request.wire = o.wire;
    request.max_bytes = max_bytes;
    absl::StatusOr<RingPlan> plan = PlanRing(request);
    if (!plan.ok()) {
      status = plan.status();
      break;
    }
    absl::StatusOr<double> sol_us = sol->MeasureUs(*plan, clock, o.warmup, o.iters);
    if (!sol_us.ok()) {
      status = sol_us.status();
      break;
    }
    row.sol_us = *sol_us;
    row.sol_busbw_gbps = AllReduceBusGbps(row.bytes, world, *sol_us);
    row.pct_sol = *sol_us / row.out_of_place.time_us * 100.0;
    if (o.check) {
      progress(index, row.bytes, "check");
      status = Check(device, *ar, ins, outs, o.wire, row.out_of_place);
      if (status.ok()) status = Check(device, *ar, in_place, in_place, o.wire, row.in_place);
      if (!status.ok()) break;
    }
    if (observer.row) observer.row(row);
    rows.push_back(row);
  }
  FreeBuffers(device, buffers);
  if (!status.ok()) return status;
  return rows;
}

absl::StatusOr<uint64_t> SweepMemoryBytes(const SweepOptions& o, int world) {
  DMALAB_ASSIGN_OR_RETURN(std::vector<int64_t> counts, SweepCounts(o, world));
  if (counts.empty()) return 0;
  const long double max_bytes = static_cast<long double>(counts.back()) * DTypeBytes(o.dtype);
  long double workspace = 0;
  if (o.collective == kRingCollective) {
    DmaAllReduceOptions ar;
    ar.max_bytes = static_cast<uint64_t>(max_bytes);
    ar.wire = o.wire;
    ar.pieces = o.pieces;
    workspace = static_cast<long double>(DmaAllReduce::WorkspaceBytesPerRank(world, ar));
  }
  // Per rank: 3 sweep buffers and 2 speed-of-light buffers of max_bytes; on the host: an input
  // being written and two results read back, each max_bytes.
  const long double need = world * (5 * max_bytes + workspace) + 3 * max_bytes;
  return need >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(need);
}

bool IsCollectiveFailure(const absl::Status& status) {
  return status.GetPayload(kCollectiveFailureUrl).has_value();
}

}  // namespace dmalab
