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

}  // namespace

int RunDemoCommand(const DemoCommand& c) {
  const auto fail = [](const absl::Status& s) { return FailUsage("demo", s); };
  const int world = c.ranks;
  if (world < kMinWorld || world > kMaxWorld) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("--ranks is %d; must be in [%d, %d]", world, kMinWorld, kMaxWorld)));
  }
  if (c.min_bytes == 0 || c.min_bytes > c.max_bytes || c.max_bytes > kDemoMaxBytes) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("-b is %d bytes and -e %d; need 0 < b <= e <= %s", c.min_bytes, c.max_bytes,
                        DescribeByteSize(kDemoMaxBytes))));
  }
  if (c.factor < 2) return fail(absl::InvalidArgumentError("-f must be >= 2"));
  if (absl::Status s = CheckCollective(c.run.collective); !s.ok()) {
    return fail(absl::InvalidArgumentError(absl::StrCat("--collective: ", s.message())));
  }
  const bool ring = c.run.collective == kRingCollective;
  absl::StatusOr<DType> dtype = ParseDType(c.dtype);
  if (!dtype.ok()) return fail(dtype.status());
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(c.inject);
  if (!faults.ok()) return fail(faults.status());
  absl::StatusOr<WireMode> wire = ParseWireMode(c.wire);
  if (!wire.ok()) return fail(wire.status());
  // The smallest all-reduce is W * 8 elements (the ring's rule, which demo applies to any
  // collective); a size below it would run nothing, and a run of nothing is no PASS.
  const uint64_t smallest = static_cast<uint64_t>(world) * 8 * DTypeBytes(*dtype);
  if (c.min_bytes < smallest) {
    return fail(absl::InvalidArgumentError(absl::StrFormat(
        "-b is %s: an all-reduce over %d ranks takes a multiple of %d elements (%d x 8), at least "
        "%s of %s; allowed: -b >= %s",
        DescribeByteSize(c.min_bytes), world, world * 8, world, DescribeByteSize(smallest),
        DTypeName(*dtype), DescribeByteSize(smallest))));
  }
  DeviceChoice choice;
  choice.backend = c.backend;
  choice.gpus = c.gpus;
  choice.perturb_seed = c.perturb;
  choice.procs = c.procs;
  if (absl::Status s = CheckDeviceChoice(choice); !s.ok()) return fail(s);
  if (c.procs > 0) {
    if (c.procs != world) {
      return fail(absl::InvalidArgumentError(absl::StrFormat(
          "--procs is %d and --ranks %d; --procs starts one process per rank", c.procs, world)));
    }
    if (!InRankProcess()) {
      if (absl::Status s = CheckProcsCollective(c.run.collective); !s.ok()) return fail(s);
      return LaunchRankProcesses("demo", c.procs);
    }
  }
  DmaAllReduceOptions opts;
  opts.max_bytes = c.max_bytes;
  opts.pieces = c.pieces;
  opts.faults = *faults;
  opts.wire = *wire;
  // Refuse sizes that cannot fit before allocating: at the largest size, per rank an input, an
  // output, the previous size's output still held, and the ring's workspace (a plugin's own is
  // not known ahead), plus the host's copies (int64 values, input bytes, this and the previous
  // size's output bytes) and the fp32 sums.
  const std::vector<uint64_t> sizes = DemoSizes(c.min_bytes, c.max_bytes, c.factor);
  const uint64_t largest =
      sizes.back() / DTypeBytes(*dtype) / (world * 8) * static_cast<uint64_t>(world * 8);
  const long double workspace =
      ring ? static_cast<long double>(DmaAllReduce::WorkspaceBytesPerRank(world, opts)) : 0.0L;
  const long double need = static_cast<long double>(world) *
                           (3.0L * largest * DTypeBytes(*dtype) + workspace +
                            largest * (8.0L + 3 * DTypeBytes(*dtype)) + largest * 4.0L);
  if (const MemoryLimit limit = AvailableMemory();
      c.backend == "sim" && need > static_cast<long double>(limit.bytes)) {
    return fail(absl::ResourceExhaustedError(absl::StrFormat(
        "the largest size (-e %s) needs about %s of memory, more than the %s; use a smaller -e "
        "or fewer --ranks",
        DescribeByteSize(c.max_bytes),
        BytesText(need >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(need)), LimitText(limit))));
  }
  absl::StatusOr<RunDevice> run_device = RunDevice::Make(choice, world, c.seed);
  if (!run_device.ok()) return fail(run_device.status());
  Device& dev = *run_device->get();
  SimDevice* sim = run_device->sim();
  // Findings of the simulator's checkers so far, over every size (none on GPUs).
  const auto checker_findings = [sim] { return sim != nullptr ? sim->findings().total() : 0; };
  CollectiveParams params;
  params.max_bytes = opts.max_bytes;
  params.dtype = *dtype;
  params.wire = opts.wire;
  params.pieces = opts.pieces;
  params.faults = opts.faults;
  params.options = c.run.collective_options;
  params.process = run_device->spmd_process();
  absl::StatusOr<std::unique_ptr<Collective>> ar = OpenCollective(&dev, c.run.collective, params);
  if (!ar.ok()) return fail(ar.status());
  // The ring's plan names its pieces per size; a plugin's inner workings are its own.
  const auto* ring_ar = dynamic_cast<const DmaAllReduce*>(ar->get());

  const std::string seeds = sim != nullptr ? absl::StrFormat("seed %d", sim->seed())
                            : c.perturb    ? absl::StrFormat("perturb_seed %d", *c.perturb)
                                           : std::string("unperturbed");
  std::printf(
      "# dmalab demo: all-reduce on %s (collective %s), %d ranks, %s, wire %s, %s, inject %s\n",
      sim != nullptr ? "the simulator" : "the GPU", (*ar)->name().c_str(), world,
      std::string(DTypeName(*dtype)).c_str(), std::string(WireLabel(*wire, *dtype)).c_str(),
      seeds.c_str(), faults->ToString().c_str());
  std::printf(
      "# inputs are small integers, so the exact sum is known and #wrong counts every\n"
      "# element of every rank that differs from it (compressed wires round: #wrong > 0);\n"
      "# each size's output is held across the next size's call and checked again after it\n");
  std::printf("%12s %12s %6s %7s %8s %10s %10s %10s\n", "size(B)", "count", "type", "pieces",
              "#wrong", "rank_cons", "findings", "sim_ms");
  JsonWriter json;
  json.BeginObject();
  WriteJsonPreamble(json, "demo");
  json.Key("collective").String((*ar)->name()).Key("backend").String(c.backend);
  json.Key("scheduling_seed");
  if (sim != nullptr) {
    json.UInt(sim->seed());
  } else {
    json.Null();
  }
  json.Key("perturb_seed");
  if (c.perturb) {
    json.UInt(*c.perturb);
  } else {
    json.Null();
  }
  json.Key("ranks").Int(world);
  json.Key("dtype").String(DTypeName(*dtype)).Key("wire").String(WireLabel(*wire, *dtype));
  json.Key("faults").String(faults->ToString()).Key("min_bytes").UInt(c.min_bytes);
  json.Key("max_bytes").UInt(c.max_bytes).Key("factor").Int(c.factor);
  json.Key("rows").BeginArray();
  bool failed = false;
  const int esize = DTypeBytes(*dtype);
  Progress progress("demo", "sizes", ProgressWanted(c.run.quiet));
  int64_t findings_before = 0;
  // The previous size's outputs, still held by the caller across the next call, as the founding
  // incident holds the embedding result across the o_proj all-reduce: a collective whose default
  // output is a view of its own workspace changes them, and its next output shares their bytes.
  std::vector<TensorView> held;
  std::vector<std::vector<uint8_t>> held_bytes;  // per rank, as read right after their call
  const auto release_held = [&] {
    // The ring's persistent-output outputs are its workspace, not the caller's to free.
    if (!faults->Has(Fault::kPersistentOutput)) {
      for (const TensorView& v : held) (void)dev.Free(v.mem);
    }
    held.clear();
  };
  for (size_t index = 0; index < sizes.size(); ++index) {
    progress.Update(static_cast<int64_t>(index), static_cast<int64_t>(sizes.size()),
                    DescribeByteSize(sizes[index]));
    const int64_t n = static_cast<int64_t>(sizes[index] / esize / (world * 8) * (world * 8));
    if (n == 0) continue;
    // Names the size in findings ("freed by 'demo, 16384 B'").
    dev.SetContext(absl::StrFormat("demo, %d B", n * esize));
    std::vector<TensorView> inputs;
    std::vector<std::vector<int64_t>> ints(world, std::vector<int64_t>(n));
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t> bytes(n * esize);
      for (int64_t i = 0; i < n; ++i) {
        // Shifted per size, so an output overwritten by the next size's sum reads as changed.
        ints[r][i] =
            static_cast<int64_t>((i * 7 + r * 13 + static_cast<int64_t>(index) * 3) % 17) - 8;
        StoreFromFloat(*dtype, bytes.data(), i, static_cast<float>(ints[r][i]));
      }
      absl::StatusOr<MemRef> mem = dev.Allocate(r, bytes.size(), "demo input");
      if (!mem.ok()) return fail(mem.status());
      if (absl::Status s = dev.Write(*mem, bytes); !s.ok()) return fail(s);
      inputs.push_back(TensorView{*mem, *dtype, {n}, true});
    }
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> outs = (*ar)->AllReduce(inputs);
    // The call, or the device while it ran (the synchronize: a deadlock too), failing is the
    // collective's failure (exit 1), the ring's as a plugin's; only the ring refusing the call's
    // arguments is bad input (IsCollectiveCallBadInput).
    if (!outs.ok() && IsCollectiveCallBadInput(outs.status(), c.run.collective)) {
      return fail(outs.status());
    }
    absl::Status ran = outs.status();
    if (ran.ok()) ran = dev.Synchronize();
    if (!ran.ok()) {
      progress.Clear();
      std::printf("%12llu the all-reduce failed: %s\n", static_cast<unsigned long long>(n * esize),
                  std::string(ran.message()).c_str());
      failed = true;
      break;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    int64_t wrong = 0;
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
      if (absl::Status s = dev.Read((*outs)[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
          !s.ok()) {
        return fail(s);
      }
      for (int64_t i = 0; i < n; ++i) wrong += LoadAsFloat(*dtype, bytes.data(), i) != sums[i];
    }
    // The previous size's outputs, held across this call: unchanged, and sharing no byte with
    // this call's outputs on any rank.
    int64_t held_changed = 0;
    std::vector<int> aliased_ranks;
    int64_t held_elems = 0;
    for (size_t r = 0; r < held.size(); ++r) {
      std::vector<uint8_t> bytes(held_bytes[r].size());
      if (absl::Status s = dev.Read(held[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
          !s.ok()) {
        return fail(s);
      }
      for (size_t at = 0; at < bytes.size(); at += esize) {
        held_changed += std::memcmp(&bytes[at], &held_bytes[r][at], esize) != 0;
      }
      held_elems += static_cast<int64_t>(bytes.size() / esize);
      const std::vector<LiveResult> live = {{"previous", held[r]}, {"current", (*outs)[r]}};
      if (!FindResultAliases(live).empty()) aliased_ranks.push_back(static_cast<int>(r));
    }
    absl::StatusOr<std::vector<int>> differing = RanksDifferingFromRank0(dev, *outs);
    if (!differing.ok()) return fail(differing.status());
    const int pieces = ring_ar != nullptr ? ring_ar->PlanFor(inputs[0])->pieces : 0;
    // Findings so far, over every size (the device keeps counting across calls).
    const int64_t findings = checker_findings();
    progress.Clear();
    std::printf("%12llu %12lld %6s %7s %8lld %10s %10lld %10.1f\n",
                static_cast<unsigned long long>(n * esize), static_cast<long long>(n),
                std::string(DTypeName(*dtype)).c_str(),
                pieces > 0 ? absl::StrFormat("%d", pieces).c_str() : "-",
                static_cast<long long>(wrong), differing->empty() ? "true" : "false",
                static_cast<long long>(findings), ms);
    if (held_changed > 0 || !aliased_ranks.empty()) {
      std::printf(
          "%12llu the %llu B output, held across this call, %s\n",
          static_cast<unsigned long long>(n * esize),
          static_cast<unsigned long long>(held_bytes.empty() ? 0 : held_bytes[0].size()),
          absl::StrCat(held_changed > 0 ? absl::StrFormat("changed in %lld of %lld elements",
                                                          static_cast<long long>(held_changed),
                                                          static_cast<long long>(held_elems))
                                        : "",
                       held_changed > 0 && !aliased_ranks.empty() ? " and " : "",
                       aliased_ranks.empty()
                           ? ""
                           : absl::StrCat("shares bytes with this call's output on rank(s) ",
                                          absl::StrJoin(aliased_ranks, ",")))
              .c_str());
    }
    json.BeginObject().Key("size_bytes").UInt(n * esize).Key("count").Int(n);
    json.Key("pieces");
    if (pieces > 0) {
      json.Int(pieces);
    } else {
      json.Null();
    }
    json.Key("wrong").Int(wrong);
    json.Key("rank_consistent").Bool(differing->empty());
    json.Key("new_findings").Int(findings - findings_before);
    json.Key("held_changed");
    if (held.empty()) {
      json.Null();
    } else {
      json.Int(held_changed);
    }
    json.Key("held_aliased");
    if (held.empty()) {
      json.Null();
    } else {
      json.Bool(!aliased_ranks.empty());
    }
    json.Key("sim_ms").Double(ms).EndObject();
    findings_before = findings;
    // Compressed wires round by design: their wrong count is information, not a failure.
    failed |= (*wire == WireMode::kNative && wrong > 0) || !differing->empty() || findings > 0 ||
              held_changed > 0 || !aliased_ranks.empty();
    release_held();
    held = *outs;
    held_bytes = std::move(out_bytes);
    for (int r = 0; r < world; ++r) (void)dev.Free(inputs[r].mem);
  }
  release_held();
  progress.Clear();
  json.EndArray();
  json.Key("findings").BeginArray();
  if (sim != nullptr) {
    for (const Finding& f : sim->findings().findings()) {
      json.BeginObject().Key("checker").String(FindingKindName(f.kind)).Key("rank").Int(f.rank);
      json.Key("detail").String(f.message).EndObject();
    }
  }
  json.EndArray();
  json.Key("findings_total").Int(checker_findings());
  json.Key("status").String(failed ? "FAIL" : "PASS").EndObject();
  if (sim != nullptr && !sim->findings().empty()) {
    std::fputs(sim->findings().ToString().c_str(), stdout);
  }
  std::printf("status=%s\n", failed ? "FAIL" : "PASS");
  if (!c.run.json.empty() && IsLeadProcess()) {
    if (absl::Status s = WriteTextFile(c.run.json, json.str() + "\n"); !s.ok()) {
      return fail(absl::InvalidArgumentError(absl::StrCat("--json: ", s.message())));
    }
  }
  return failed ? 1 : 0;
}

int RunPlanCommand(const PlanCommand& c) {
  const auto fail = [](const absl::Status& s) { return FailUsage("plan", s); };
  RingPlanRequest req;
  req.world = c.ranks;
  req.elems = c.elems;
  absl::StatusOr<DType> dtype = ParseDType(c.dtype);
  if (!dtype.ok()) return fail(dtype.status());
  req.dtype = *dtype;
  absl::StatusOr<WireMode> wire = ParseWireMode(c.wire);
  if (!wire.ok()) return fail(wire.status());
  req.wire = *wire;
  req.pieces = c.pieces;
  req.max_bytes = static_cast<uint64_t>(req.elems) * DTypeBytes(req.dtype);
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(c.inject);
  if (!faults.ok()) return fail(faults.status());
  req.faults = *faults;
  absl::StatusOr<RingPlan> plan = PlanRing(req);
  if (!plan.ok()) return fail(plan.status());
  std::fputs(plan->ToString().c_str(), stdout);
  if (!c.json.empty()) {
    JsonWriter w;
    w.BeginObject();
    WriteJsonPreamble(w, "plan");
    w.Key("world").Int(plan->world).Key("elems").Int(plan->elems);
    w.Key("dtype")
        .String(DTypeName(plan->dtype))
        .Key("wire")
        .String(WireLabel(plan->wire, plan->dtype));
    w.Key("pieces_requested").Int(plan->pieces_requested).Key("pieces").Int(plan->pieces);
    w.Key("chunk_elems").Int(plan->chunk_elems).Key("faults").String(faults->ToString());
    w.Key("slab_bytes").UInt(plan->slab.slab_bytes).Key("ranks").BeginArray();
    for (size_t r = 0; r < plan->ranks.size(); ++r) {
      w.BeginObject().Key("rank").Int(static_cast<int64_t>(r));
      w.Key("wire_bytes_sent").UInt(plan->wire_bytes_sent[r]).Key("ops").BeginArray();
      for (const PlanOp& op : plan->ranks[r]) {
        w.BeginObject().Key("stream").String(PlanStreamName(op.stream));
        w.Key("label").String(op.Label()).Key("step").Int(op.step).Key("piece").Int(op.piece);
        w.Key("elems").Int(op.elems).Key("dst_bytes").UInt(op.dst.bytes).EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    if (absl::Status s = WriteTextFile(c.json, w.str() + "\n"); !s.ok()) {
      return fail(absl::InvalidArgumentError(absl::StrCat("--json: ", s.message())));
    }
  }
  return 0;
}

}  // namespace dmalab
