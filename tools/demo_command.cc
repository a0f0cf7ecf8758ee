#include "tools/demo_command.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/core/byte_size.h"
#include "common/core/dtype.h"
#include "common/core/json_writer.h"
#include "common/core/result_checks.h"
#include "common/core/status_macros.h"
#include "common/plugin/open_collective.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "dmalab/replay.h"
#include "dmalab/report.h"
#include "runner/host_memory.h"
#include "runner/rank_process.h"
#include "runner/run_device.h"
#include "sim/sim_device.h"
#include "tools/command.h"
#include "tools/exit_status.h"
#include "tools/progress.h"

namespace dmalab {
namespace {

// The sizes min, min*f, ... up to max, without overflow.
std::vector<uint64_t> DemoSizes(uint64_t lo, uint64_t hi, int factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = lo; size <= hi; size *= static_cast<uint64_t>(factor)) {
    sizes.push_back(size);
    if (size > hi / static_cast<uint64_t>(factor)) break;
  }
  return sizes;
}

// What the flags ask for. The flag parser (tools/dmalab_main.cc) has checked every value on its
// own: --ranks, -b, -e and -f in their ranges, --dtype, --wire, --inject and --collective by
// their own parsers; DemoSettingsOf checks what takes several flags together.
struct DemoSettings {
  DType dtype = DType::kBF16;
  WireMode wire = WireMode::kNative;
  FaultSet faults;
  DeviceChoice choice;
  std::vector<uint64_t> sizes;
  DmaAllReduceOptions ring;  // the ring's options (what its workspace is sized for)
};

absl::StatusOr<DemoSettings> DemoSettingsOf(const DemoCommand& c) {
  const int world = c.ranks;
  if (c.min_bytes > c.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("-b is %d bytes and -e %d; need 0 < b <= e <= %s", c.min_bytes, c.max_bytes,
                        DescribeByteSize(kDemoMaxBytes)));
  }
  DemoSettings s;
  DMALAB_ASSIGN_OR_RETURN(s.dtype, ParseDType(c.dtype));
  DMALAB_ASSIGN_OR_RETURN(s.faults, FaultSet::Parse(c.inject));
  DMALAB_ASSIGN_OR_RETURN(s.wire, ParseWireMode(c.wire));
  // The smallest all-reduce is W * 8 elements (the ring's rule, which demo applies to any
  // collective); a size below it would run nothing, and a run of nothing is no PASS.
  const uint64_t smallest = static_cast<uint64_t>(world) * 8 * DTypeBytes(s.dtype);
  if (c.min_bytes < smallest) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "-b is %s: an all-reduce over %d ranks takes a multiple of %d elements (%d x 8), at least "
        "%s of %s; allowed: -b >= %s",
        DescribeByteSize(c.min_bytes), world, world * 8, world, DescribeByteSize(smallest),
        DTypeName(s.dtype), DescribeByteSize(smallest)));
  }
  s.choice.backend = c.backend;
  s.choice.gpus = c.gpus;
  s.choice.perturb_seed = c.perturb;
  s.choice.procs = c.procs;
  DMALAB_RETURN_IF_ERROR(CheckDeviceChoice(s.choice));
  if (c.procs > 0 && c.procs != world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--procs is %d and --ranks %d; --procs starts one process per rank", c.procs, world));
  }
  s.ring.max_bytes = c.max_bytes;
  s.ring.pieces = c.pieces;
  s.ring.faults = s.faults;
  s.ring.wire = s.wire;
  s.sizes = DemoSizes(c.min_bytes, c.max_bytes, c.factor);
  return s;
}

// Refuses sizes that cannot fit before allocating: at the largest size, per rank an input, an
// output, the previous size's output still held, and the ring's workspace (a plugin's own is
// not known ahead), plus the host's copies (int64 values, input bytes, this and the previous
// size's output bytes) and the fp32 sums.
absl::Status CheckDemoFits(const DemoCommand& c, const DemoSettings& s) {
  const int world = c.ranks;
  const uint64_t largest =
      s.sizes.back() / DTypeBytes(s.dtype) / (world * 8) * static_cast<uint64_t>(world * 8);
  const long double workspace =
      c.run.collective == kRingCollective
          ? static_cast<long double>(DmaAllReduce::WorkspaceBytesPerRank(world, s.ring))
          : 0.0L;
  const long double need = static_cast<long double>(world) *
                           (3.0L * largest * DTypeBytes(s.dtype) + workspace +
                            largest * (8.0L + 3 * DTypeBytes(s.dtype)) + largest * 4.0L);
  if (const MemoryLimit limit = AvailableMemory();
      c.backend == "sim" && need > static_cast<long double>(limit.bytes)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the largest size (-e %s) needs about %s of memory, more than the %s; use a smaller -e "
        "or fewer --ranks",
        DescribeByteSize(c.max_bytes),
        BytesText(need >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(need)), LimitText(limit)));
  }
  return absl::OkStatus();
}

// One size's row: what the call gave, checked.
struct DemoRow {
  uint64_t bytes = 0;
  int64_t count = 0;
  // The call, or the device while it ran (the synchronize: a deadlock too), failed: the
  // collective's failure (exit 1); the fields below are then unset.
  absl::Status failed;
  double ms = 0;
  int pieces = 0;  // the ring's pieces at this size; 0 for a plugin
  int64_t wrong = 0;
  bool rank_consistent = true;
  int64_t findings = 0;  // the simulator's checkers' findings so far, over every size
  // The previous size's outputs, held across this call (none for the first size): elements
  // changed, ranks whose output shares bytes with this call's, and their size in bytes.
  bool held = false;
  int64_t held_changed = 0;
  int64_t held_elems = 0;
  std::vector<int> aliased_ranks;
  uint64_t held_bytes = 0;
};

// The demo's device and collective, and the previous size's outputs, still held by the caller
// across the next call, as the founding incident holds the embedding result across the o_proj
// all-reduce: a collective whose default output is a view of its own workspace changes them,
// and its next output shares their bytes.
class DemoRun {
 public:
  static absl::StatusOr<std::unique_ptr<DemoRun>> Open(const DemoCommand& c,
                                                       const DemoSettings& s) {
    DMALAB_ASSIGN_OR_RETURN(RunDevice device, RunDevice::Make(s.choice, c.ranks, c.seed));
    auto run = std::unique_ptr<DemoRun>(new DemoRun(c, s, std::move(device)));
    CollectiveParams params;
    params.max_bytes = s.ring.max_bytes;
    params.dtype = s.dtype;
    params.wire = s.ring.wire;
    params.pieces = s.ring.pieces;
    params.faults = s.ring.faults;
    params.options = c.run.collective_options;
    params.process = run->device_.spmd_process();
    DMALAB_ASSIGN_OR_RETURN(run->ar_, OpenCollective(&run->dev_, c.run.collective, params));
    // The ring's plan names its pieces per size; a plugin's inner workings are its own.
    run->ring_ = dynamic_cast<const DmaAllReduce*>(run->ar_.get());
    return run;
  }

  const Collective& collective() const { return *ar_; }
  SimDevice* sim() { return device_.sim(); }
  // Findings of the simulator's checkers so far, over every size (none on GPUs).
  int64_t findings() { return sim() != nullptr ? sim()->findings().total() : 0; }

  // The all-reduce of `n` elements (size `index` of the run): integer inputs, the call, and its
  // checks. An error is bad input (exit 2): the device refusing the demo's own calls, or the
  // ring refusing the call's arguments (IsCollectiveCallBadInput).
  absl::StatusOr<DemoRow> Size(size_t index, int64_t n) {
    const int world = c_.ranks;
    const DType dtype = s_.dtype;
    const int esize = DTypeBytes(dtype);
    DemoRow row;
    row.bytes = static_cast<uint64_t>(n * esize);
    row.count = n;
    // Names the size in findings ("freed by 'demo, 16384 B'").
    dev_.SetContext(absl::StrFormat("demo, %d B", n * esize));
    std::vector<TensorView> inputs;
    std::vector<std::vector<int64_t>> ints(world, std::vector<int64_t>(n));
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t> bytes(n * esize);
      for (int64_t i = 0; i < n; ++i) {
        // Shifted per size, so an output overwritten by the next size's sum reads as changed.
        ints[r][i] =
            static_cast<int64_t>((i * 7 + r * 13 + static_cast<int64_t>(index) * 3) % 17) - 8;
        StoreFromFloat(dtype, bytes.data(), i, static_cast<float>(ints[r][i]));
      }
      DMALAB_ASSIGN_OR_RETURN(const MemRef mem, dev_.Allocate(r, bytes.size(), "demo input"));
      DMALAB_RETURN_IF_ERROR(dev_.Write(mem, bytes));
      inputs.push_back(TensorView{mem, dtype, {n}, true});
    }
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> outs = ar_->AllReduce(inputs);
    // The call, or the device while it ran, failing is the collective's failure, the ring's as
    // a plugin's; only the ring refusing the call's arguments is bad input.
    if (!outs.ok() && IsCollectiveCallBadInput(outs.status(), c_.run.collective)) {
      return outs.status();
    }
    row.failed = outs.status();
    if (row.failed.ok()) row.failed = dev_.Synchronize();
    if (!row.failed.ok()) return row;
    row.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::vector<float> sums(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t sum = 0;
      for (int q = 0; q < world; ++q) sum += ints[q][i];
      sums[i] = static_cast<float>(sum);
    }
    std::vector<std::vector<uint8_t>> out_bytes(world);
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t>& bytes = out_bytes[r];
      bytes.resize(n * esize);
      DMALAB_RETURN_IF_ERROR(
          dev_.Read((*outs)[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes)));
      for (int64_t i = 0; i < n; ++i) row.wrong += LoadAsFloat(dtype, bytes.data(), i) != sums[i];
    }
    // The previous size's outputs, held across this call: unchanged, and sharing no byte with
    // this call's outputs on any rank.
    row.held = !held_.empty();
    row.held_bytes = held_bytes_.empty() ? 0 : held_bytes_[0].size();
    for (size_t r = 0; r < held_.size(); ++r) {
      std::vector<uint8_t> bytes(held_bytes_[r].size());
      DMALAB_RETURN_IF_ERROR(dev_.Read(held_[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes)));
      for (size_t at = 0; at < bytes.size(); at += esize) {
        row.held_changed += std::memcmp(&bytes[at], &held_bytes_[r][at], esize) != 0;
      }
      row.held_elems += static_cast<int64_t>(bytes.size() / esize);
      const std::vector<LiveResult> live = {{"previous", held_[r]}, {"current", (*outs)[r]}};
      if (!FindResultAliases(live).empty()) row.aliased_ranks.push_back(static_cast<int>(r));
    }
    DMALAB_ASSIGN_OR_RETURN(const std::vector<int> differing, RanksDifferingFromRank0(dev_, *outs));
    row.rank_consistent = differing.empty();
    row.pieces = ring_ != nullptr ? ring_->PlanFor(inputs[0])->pieces : 0;
    row.findings = findings();
    // This call's outputs are held across the next.
    ReleaseHeld();
    held_ = *std::move(outs);
    held_bytes_ = std::move(out_bytes);
    for (int r = 0; r < world; ++r) (void)dev_.Free(inputs[r].mem);
    return row;
  }

  // Frees the held outputs; the ring's persistent-output outputs are its workspace, not the
  // caller's to free.
  void ReleaseHeld() {
    if (!s_.faults.Has(Fault::kPersistentOutput)) {
      for (const TensorView& v : held_) (void)dev_.Free(v.mem);
    }
    held_.clear();
  }

 private:
  DemoRun(const DemoCommand& c, const DemoSettings& s, RunDevice device)
      : c_(c), s_(s), device_(std::move(device)), dev_(*device_.get()) {}

  const DemoCommand& c_;
  const DemoSettings& s_;
  RunDevice device_;
  Device& dev_;
  std::unique_ptr<Collective> ar_;  // after device_: destroyed first
  const DmaAllReduce* ring_ = nullptr;
  std::vector<TensorView> held_;
  std::vector<std::vector<uint8_t>> held_bytes_;  // per rank, as read right after their call
};

void PrintRow(const DemoRow& row, DType dtype) {
  std::printf("%12llu %12lld %6s %7s %8lld %10s %10lld %10.1f\n",
              static_cast<unsigned long long>(row.bytes), static_cast<long long>(row.count),
              std::string(DTypeName(dtype)).c_str(),
              row.pieces > 0 ? absl::StrFormat("%d", row.pieces).c_str() : "-",
              static_cast<long long>(row.wrong), row.rank_consistent ? "true" : "false",
              static_cast<long long>(row.findings), row.ms);
  if (row.held_changed > 0 || !row.aliased_ranks.empty()) {
    std::printf("%12llu the %llu B output, held across this call, %s\n",
                static_cast<unsigned long long>(row.bytes),
                static_cast<unsigned long long>(row.held_bytes),
                absl::StrCat(row.held_changed > 0
                                 ? absl::StrFormat("changed in %lld of %lld elements",
                                                   static_cast<long long>(row.held_changed),
                                                   static_cast<long long>(row.held_elems))
                                 : "",
                             row.held_changed > 0 && !row.aliased_ranks.empty() ? " and " : "",
                             row.aliased_ranks.empty()
                                 ? ""
                                 : absl::StrCat("shares bytes with this call's output on rank(s) ",
                                                absl::StrJoin(row.aliased_ranks, ",")))
                    .c_str());
  }
}

void WriteJsonRow(JsonWriter& json, const DemoRow& row, int64_t findings_before) {
  json.BeginObject().Key("size_bytes").UInt(row.bytes).Key("count").Int(row.count);
  json.Key("pieces");
  if (row.pieces > 0) {
    json.Int(row.pieces);
  } else {
    json.Null();
  }
  json.Key("wrong").Int(row.wrong);
  json.Key("rank_consistent").Bool(row.rank_consistent);
  json.Key("new_findings").Int(row.findings - findings_before);
  json.Key("held_changed");
  if (!row.held) {
    json.Null();
  } else {
    json.Int(row.held_changed);
  }
  json.Key("held_aliased");
  if (!row.held) {
    json.Null();
  } else {
    json.Bool(!row.aliased_ranks.empty());
  }
  json.Key("sim_ms").Double(row.ms).EndObject();
}

// The report's header: the table's on stdout, and the JSON object's members before its rows.
void BeginReport(const DemoCommand& c, const DemoSettings& s, DemoRun& run, JsonWriter& json) {
  SimDevice* sim = run.sim();
  const std::string seeds = sim != nullptr ? absl::StrFormat("seed %d", sim->seed())
                            : c.perturb    ? absl::StrFormat("perturb_seed %d", *c.perturb)
                                           : std::string("unperturbed");
  std::printf(
      "# dmalab demo: all-reduce on %s (collective %s), %d ranks, %s, wire %s, %s, inject %s\n",
      sim != nullptr ? "the simulator" : "the GPU", run.collective().name().c_str(), c.ranks,
      std::string(DTypeName(s.dtype)).c_str(), std::string(WireLabel(s.wire, s.dtype)).c_str(),
      seeds.c_str(), s.faults.ToString().c_str());
  std::printf(
      "# inputs are small integers, so the exact sum is known and #wrong counts every\n"
      "# element of every rank that differs from it (compressed wires round: #wrong > 0);\n"
      "# each size's output is held across the next size's call and checked again after it\n");
  std::printf("%12s %12s %6s %7s %8s %10s %10s %10s\n", "size(B)", "count", "type", "pieces",
              "#wrong", "rank_cons", "findings", "sim_ms");
  json.BeginObject();
  WriteJsonPreamble(json, "demo");
  json.Key("collective").String(run.collective().name()).Key("backend").String(c.backend);
  json.Key("scheduling_seed")
      .OptionalUInt(sim != nullptr ? std::optional<uint64_t>(sim->seed()) : std::nullopt);
  json.Key("perturb_seed").OptionalUInt(c.perturb);
  json.Key("ranks").Int(c.ranks);
  json.Key("dtype").String(DTypeName(s.dtype)).Key("wire").String(WireLabel(s.wire, s.dtype));
  json.Key("faults").String(s.faults.ToString()).Key("min_bytes").UInt(c.min_bytes);
  json.Key("max_bytes").UInt(c.max_bytes).Key("factor").Int(c.factor);
  json.Key("rows").BeginArray();
}

// The report's end: the simulator's findings and the verdict, on stdout and in the JSON object.
void FinishReport(DemoRun& run, bool failed, JsonWriter& json) {
  SimDevice* sim = run.sim();
  json.EndArray();
  json.Key("findings").BeginArray();
  if (sim != nullptr) {
    for (const Finding& f : sim->findings().findings()) {
      json.BeginObject().Key("checker").String(FindingKindName(f.kind)).Key("rank").Int(f.rank);
      json.Key("detail").String(f.message).EndObject();
    }
  }
  json.EndArray();
  json.Key("findings_total").Int(run.findings());
  json.Key("status").String(failed ? "FAIL" : "PASS").EndObject();
  if (sim != nullptr && !sim->findings().empty()) {
    std::fputs(sim->findings().ToString().c_str(), stdout);
  }
  std::printf("status=%s\n", failed ? "FAIL" : "PASS");
}

// `dmalab demo`: the flags' settings, the run's device and collective (or the rank processes of
// --procs), then one row per size.
absl::StatusOr<int> Execute(const DemoCommand& c) {
  DMALAB_ASSIGN_OR_RETURN(const DemoSettings s, DemoSettingsOf(c));
  if (c.procs > 0 && !InRankProcess()) {
    DMALAB_RETURN_IF_ERROR(CheckProcsCollective(c.run.collective));
    return LaunchRankProcesses("demo", c.procs);
  }
  DMALAB_RETURN_IF_ERROR(CheckDemoFits(c, s));
  DMALAB_ASSIGN_OR_RETURN(const std::unique_ptr<DemoRun> run, DemoRun::Open(c, s));
  JsonWriter json;
  BeginReport(c, s, *run, json);
  bool failed = false;
  const int esize = DTypeBytes(s.dtype);
  const int64_t multiple = static_cast<int64_t>(c.ranks) * 8;
  Progress progress("demo", "sizes", ProgressWanted(c.run.quiet));
  int64_t findings_before = 0;
  for (size_t index = 0; index < s.sizes.size(); ++index) {
    progress.Update(static_cast<int64_t>(index), static_cast<int64_t>(s.sizes.size()),
                    DescribeByteSize(s.sizes[index]));
    const int64_t n = static_cast<int64_t>(s.sizes[index] / esize / multiple * multiple);
    if (n == 0) continue;
    DMALAB_ASSIGN_OR_RETURN(const DemoRow row, run->Size(index, n));
    progress.Clear();
    if (!row.failed.ok()) {
      std::printf("%12llu the all-reduce failed: %s\n", static_cast<unsigned long long>(row.bytes),
                  std::string(row.failed.message()).c_str());
      failed = true;
      break;
    }
    PrintRow(row, s.dtype);
    WriteJsonRow(json, row, findings_before);
    findings_before = row.findings;
    // Compressed wires round by design: their wrong count is information, not a failure.
    failed |= (s.wire == WireMode::kNative && row.wrong > 0) || !row.rank_consistent ||
              row.findings > 0 || row.held_changed > 0 || !row.aliased_ranks.empty();
  }
  run->ReleaseHeld();
  progress.Clear();
  FinishReport(*run, failed, json);
  if (!c.run.json.empty() && IsLeadProcess()) {
    DMALAB_RETURN_IF_ERROR(Prefixed("--json: ", WriteTextFile(c.run.json, json.str() + "\n")));
  }
  return failed ? cli::kExitFailed : cli::kExitPass;
}

absl::StatusOr<int> Execute(const PlanCommand& c) {
  RingPlanRequest req;
  req.world = c.ranks;
  req.elems = c.elems;
  DMALAB_ASSIGN_OR_RETURN(req.dtype, ParseDType(c.dtype));
  DMALAB_ASSIGN_OR_RETURN(req.wire, ParseWireMode(c.wire));
  req.pieces = c.pieces;
  req.max_bytes = static_cast<uint64_t>(req.elems) * DTypeBytes(req.dtype);
  DMALAB_ASSIGN_OR_RETURN(req.faults, FaultSet::Parse(c.inject));
  DMALAB_ASSIGN_OR_RETURN(const RingPlan plan, PlanRing(req));
  std::fputs(plan.ToString().c_str(), stdout);
  if (!c.json.empty()) {
    JsonWriter w;
    w.BeginObject();
    WriteJsonPreamble(w, "plan");
    w.Key("world").Int(plan.world).Key("elems").Int(plan.elems);
    w.Key("dtype")
        .String(DTypeName(plan.dtype))
        .Key("wire")
        .String(WireLabel(plan.wire, plan.dtype));
    w.Key("pieces_requested").Int(plan.pieces_requested).Key("pieces").Int(plan.pieces);
    w.Key("chunk_elems").Int(plan.chunk_elems).Key("faults").String(req.faults.ToString());
    w.Key("slab_bytes").UInt(plan.slab.slab_bytes).Key("ranks").BeginArray();
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      w.BeginObject().Key("rank").Int(static_cast<int64_t>(r));
      w.Key("wire_bytes_sent").UInt(plan.wire_bytes_sent[r]).Key("ops").BeginArray();
      for (const PlanOp& op : plan.ranks[r]) {
        w.BeginObject().Key("stream").String(PlanStreamName(op.stream));
        w.Key("label").String(op.Label()).Key("step").Int(op.step).Key("piece").Int(op.piece);
        w.Key("elems").Int(op.elems).Key("dst_bytes").UInt(op.dst.bytes).EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    DMALAB_RETURN_IF_ERROR(Prefixed("--json: ", WriteTextFile(c.json, w.str() + "\n")));
  }
  return cli::kExitPass;
}

}  // namespace

int RunDemoCommand(const DemoCommand& c) { return ExitStatus("demo", Execute(c)); }

int RunPlanCommand(const PlanCommand& c) { return ExitStatus("plan", Execute(c)); }

}  // namespace dmalab
