// dmalab: the command line. `dmalab help` lists the commands.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "common/core/result_checks.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "sim/sim_device.h"
#include "tools/calibrate_command.h"
#include "tools/replay_command.h"
#include "tools/sweep_command.h"
#include "tools/zoo.h"

ABSL_FLAG(int, ranks, 4, "number of ranks (world size), 2..16");
ABSL_FLAG(std::string, dtype, "bf16", "element type: bf16, fp16, fp32");
ABSL_FLAG(std::string, wire, "bf16",
          "wire mode: bf16, i8, i8_ring, i8_a2a, e4m3, e4m3_ring, e4m3_a2a");
ABSL_FLAG(int, pieces, 2, "pieces per chunk, 1..8 (1 is used when a piece would be under 512 KiB)");
ABSL_FLAG(int64_t, elems, 4096, "plan: elements of the tensor");
ABSL_FLAG(uint64_t, seed, 0,
          "simulator seed: fixes every scheduling choice (replay: default the scenario's seed; "
          "demo, sweep: default 1)");
ABSL_FLAG(std::string, backend, "sim", "replay, sweep: sim (CPU simulator) or hw (CUDA GPUs)");
ABSL_FLAG(std::string, fidelity, "values",
          "replay, zoo, sweep (sim): values (real bytes and arithmetic) or shadow (no payload, "
          "only each byte's provenance: much faster, no numeric checks)");
ABSL_FLAG(int, gpus, 1, "replay, sweep, calibrate (hw): number of GPUs the ranks spread over");
ABSL_FLAG(std::string, json, "", "replay, sweep: also write the report as JSON to this path");
ABSL_FLAG(std::string, dump, "",
          "replay: write every live tensor per rank after the last step as DIR/NAME.rankR.npy "
          "(float32)");
ABSL_FLAG(std::string, inject, "",
          "faults to inject, comma-separated: persistent-output, drop-copy-wait, "
          "skip-end-handshake, early-return, flag-ready-not-consumed, graph-output-freed, "
          "inplace-alias-ring, owner-keeps-prequant");
ABSL_FLAG(int, seeds, 0,
          "replay: replay seeds 1..N on the simulator and list failing seeds; zoo: seeds per "
          "fault and scenario (default 20)");
ABSL_FLAG(bool, check_determinism, false,
          "replay: replay one seed twice on the simulator and compare the reports byte for byte "
          "(also --check-determinism)");
ABSL_FLAG(std::string, b, "1M", "demo, sweep: smallest size in bytes (K, M, G suffixes)");
ABSL_FLAG(std::string, e, "16M", "demo, sweep: largest size in bytes");
ABSL_FLAG(int, f, 4, "demo, sweep: size multiplication factor");
ABSL_FLAG(int, n, 20, "sweep: timed iterations per size");
ABSL_FLAG(int, w, 5, "sweep: warm-up iterations per size");
ABSL_FLAG(int, c, 1, "sweep: check results against the exact sum (0 or 1)");
ABSL_FLAG(int, G, 0, "sweep: > 0 replays a captured graph per call (graph cache; hw only)");
ABSL_FLAG(std::string, topology, "", "sweep (sim): topology YAML the timing model uses");
ABSL_FLAG(std::string, csv, "", "sweep: write the table as CSV to this path");
ABSL_FLAG(std::string, out, "", "calibrate: topology YAML to write");

namespace dmalab {
namespace {

constexpr char kUsage[] = R"(dmalab: a testbed for copy-engine (DMA) all-reduce collectives.

usage: dmalab <command> [flags]

commands:
  replay  replay a scenario (scenarios/*.yaml) and check what a model relies on: retained
          values unchanged, no two live results sharing storage, ranks bit-identical
          e.g. dmalab replay scenarios/glm52_tp4_layer0_residual.yaml --inject=persistent-output
          flags: --backend=sim|hw --fidelity=values|shadow --seed=N --inject=NAME --json=PATH
                 --dump=DIR --gpus=N --seeds=N (sweep seeds 1..N) --check-determinism
  demo    run the DMA ring all-reduce on the simulator over a range of sizes and print a table:
          wrong elements against the exact sum, rank consistency, checker findings
          e.g. dmalab demo --ranks=4 --dtype=bf16 --b=1M --e=16M --f=4 --seed=1
  sweep   time the all-reduce over a range of sizes beside its speed of light (nccl-tests style)
          e.g. dmalab sweep --backend=sim --topology=scenarios/topologies/h200_virtual_ranks.yaml
               --ranks=4 -b 1M -e 64M -f 2 -n 5 -w 1 -c 1 --csv=sweep.csv   (docs/bandwidth.md)
  calibrate  measure this GPU through CudaDevice and write a topology YAML for the simulator
          e.g. dmalab calibrate --gpus=1 --ranks=4 --out=h200_calibrated.yaml
  zoo     run every fault injection against the zoo scenarios over seeds 1..N and the correct
          implementation over the same seeds: which checker caught each fault, false positives
          e.g. dmalab zoo --seeds=20
  plan    print the ring plan (every rank's operations) for one tensor size
          e.g. dmalab plan --ranks=4 --elems=4096 --pieces=2
  help    this text; `dmalab <command> --help` lists every flag

exit status: 0 success, 1 a check failed, 2 bad input or usage)";

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("size is empty");
  uint64_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
      mult = 1ull << 10;
      break;
    case 'M':
      mult = 1ull << 20;
      break;
    case 'G':
      mult = 1ull << 30;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(
          absl::StrFormat("size '%s' is not a number with an optional K, M or G suffix", text));
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v * mult;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "dmalab: %s\n", std::string(s.message()).c_str());
  return 2;
}

int RunPlan() {
  RingPlanRequest req;
  req.world = absl::GetFlag(FLAGS_ranks);
  req.elems = absl::GetFlag(FLAGS_elems);
  absl::StatusOr<DType> dtype = ParseDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(dtype.status());
  req.dtype = *dtype;
  absl::StatusOr<WireMode> wire = ParseWireMode(absl::GetFlag(FLAGS_wire));
  if (!wire.ok()) return Fail(wire.status());
  req.wire = *wire;
  req.pieces = absl::GetFlag(FLAGS_pieces);
  req.max_bytes = static_cast<uint64_t>(req.elems) * DTypeBytes(req.dtype);
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(absl::GetFlag(FLAGS_inject));
  if (!faults.ok()) return Fail(faults.status());
  req.faults = *faults;
  absl::StatusOr<RingPlan> plan = PlanRing(req);
  if (!plan.ok()) return Fail(plan.status());
  std::fputs(plan->ToString().c_str(), stdout);
  return 0;
}

int RunDemo() {
  const int world = absl::GetFlag(FLAGS_ranks);
  absl::StatusOr<DType> dtype = ParseDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(dtype.status());
  absl::StatusOr<uint64_t> lo = ParseSize(absl::GetFlag(FLAGS_b));
  if (!lo.ok()) return Fail(lo.status());
  absl::StatusOr<uint64_t> hi = ParseSize(absl::GetFlag(FLAGS_e));
  if (!hi.ok()) return Fail(hi.status());
  absl::StatusOr<FaultSet> faults = FaultSet::Parse(absl::GetFlag(FLAGS_inject));
  if (!faults.ok()) return Fail(faults.status());
  if (absl::GetFlag(FLAGS_f) < 2) return Fail(absl::InvalidArgumentError("--f must be >= 2"));
  if (world < kMinWorld || world > kMaxWorld) {
    return Fail(absl::InvalidArgumentError(
        absl::StrFormat("--ranks is %d; must be in [%d, %d]", world, kMinWorld, kMaxWorld)));
  }
  SimDevice dev(world, absl::GetFlag(FLAGS_seed) == 0 ? 1 : absl::GetFlag(FLAGS_seed));
  DmaAllReduceOptions opts;
  opts.max_bytes = *hi;
  opts.pieces = absl::GetFlag(FLAGS_pieces);
  opts.faults = *faults;
  absl::StatusOr<WireMode> wire = ParseWireMode(absl::GetFlag(FLAGS_wire));
  if (!wire.ok()) return Fail(wire.status());
  opts.wire = *wire;
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar = DmaAllReduce::Create(&dev, opts);
  if (!ar.ok()) return Fail(ar.status());

  std::printf(
      "# dmalab demo: simulated DMA ring all-reduce, %d ranks, %s, wire %s, seed %llu, inject %s\n",
      world, std::string(DTypeName(*dtype)).c_str(), std::string(WireModeName(*wire)).c_str(),
      static_cast<unsigned long long>(dev.seed()), faults->ToString().c_str());
  std::printf(
      "# inputs are small integers, so the exact sum is known and #wrong counts every\n"
      "# element of every rank that differs from it (compressed wires round: #wrong > 0)\n");
  std::printf("%12s %12s %6s %7s %8s %10s %10s %10s\n", "size(B)", "count", "type", "pieces",
              "#wrong", "rank_cons", "findings", "sim_ms");
  bool failed = false;
  const int esize = DTypeBytes(*dtype);
  for (uint64_t size = *lo; size <= *hi; size *= absl::GetFlag(FLAGS_f)) {
    const int64_t n = static_cast<int64_t>(size / esize / (world * 8) * (world * 8));
    if (n == 0) continue;
    std::vector<TensorView> inputs;
    std::vector<std::vector<int64_t>> ints(world, std::vector<int64_t>(n));
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t> bytes(n * esize);
      for (int64_t i = 0; i < n; ++i) {
        ints[r][i] = static_cast<int64_t>((i * 7 + r * 13) % 17) - 8;
        StoreFromFloat(*dtype, bytes.data(), i, static_cast<float>(ints[r][i]));
      }
      absl::StatusOr<MemRef> mem = dev.Allocate(r, bytes.size(), "demo input");
      if (!mem.ok()) return Fail(mem.status());
      if (absl::Status s = dev.Write(*mem, bytes); !s.ok()) return Fail(s);
      inputs.push_back(TensorView{*mem, *dtype, {n}, true});
    }
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<TensorView>> outs = (*ar)->AllReduce(inputs);
    if (!outs.ok()) return Fail(outs.status());
    if (absl::Status s = dev.Synchronize(); !s.ok()) return Fail(s);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    int64_t wrong = 0;
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t> bytes(n * esize);
      if (absl::Status s = dev.Read((*outs)[r].mem.Slice(0, bytes.size()), absl::MakeSpan(bytes));
          !s.ok()) {
        return Fail(s);
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t sum = 0;
        for (int q = 0; q < world; ++q) sum += ints[q][i];
        wrong += LoadAsFloat(*dtype, bytes.data(), i) != static_cast<float>(sum);
      }
    }
    absl::StatusOr<std::vector<int>> differing = RanksDifferingFromRank0(dev, *outs);
    if (!differing.ok()) return Fail(differing.status());
    const RingPlan plan = *(*ar)->PlanFor(inputs[0]);
    const int findings = static_cast<int>(dev.findings().findings().size());
    std::printf("%12llu %12lld %6s %7d %8lld %10s %10d %10.1f\n",
                static_cast<unsigned long long>(n * esize), static_cast<long long>(n),
                std::string(DTypeName(*dtype)).c_str(), plan.pieces, static_cast<long long>(wrong),
                differing->empty() ? "true" : "false", findings, ms);
    // Compressed wires round by design: their wrong count is information, not a failure.
    failed |= (*wire == WireMode::kNative && wrong > 0) || !differing->empty() || findings > 0;
    for (int r = 0; r < world; ++r) {
      if (!faults->Has(Fault::kPersistentOutput)) (void)dev.Free((*outs)[r].mem);
      (void)dev.Free(inputs[r].mem);
    }
  }
  if (!dev.findings().empty()) std::fputs(dev.findings().ToString().c_str(), stdout);
  std::printf("status=%s\n", failed ? "FAIL" : "PASS");
  return failed ? 1 : 0;
}

SweepCommand SweepFlags() {
  return SweepCommand{
      absl::GetFlag(FLAGS_b),        absl::GetFlag(FLAGS_e),
      absl::GetFlag(FLAGS_f),        absl::GetFlag(FLAGS_n),
      absl::GetFlag(FLAGS_w),        absl::GetFlag(FLAGS_c),
      absl::GetFlag(FLAGS_G),        absl::GetFlag(FLAGS_dtype),
      absl::GetFlag(FLAGS_wire),     absl::GetFlag(FLAGS_pieces),
      absl::GetFlag(FLAGS_backend),  absl::GetFlag(FLAGS_fidelity),
      absl::GetFlag(FLAGS_ranks),    absl::GetFlag(FLAGS_gpus),
      absl::GetFlag(FLAGS_topology), absl::GetFlag(FLAGS_seed) == 0 ? 1 : absl::GetFlag(FLAGS_seed),
      absl::GetFlag(FLAGS_csv),      absl::GetFlag(FLAGS_json)};
}

CalibrateCommand CalibrateFlags(int argc, char** argv) {
  std::string line = "dmalab";
  for (int i = 1; i < argc; ++i) line += std::string(" ") + argv[i];
  return CalibrateCommand{absl::GetFlag(FLAGS_gpus), absl::GetFlag(FLAGS_ranks),
                          absl::GetFlag(FLAGS_out), line};
}

}  // namespace
}  // namespace dmalab

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(dmalab::kUsage);
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    std::puts(dmalab::kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  std::vector<char*> args = {argv[0]};
  std::vector<std::string> flags;  // --check-determinism spelled as absl spells it
  flags.reserve(argc);
  for (int i = 2; i < argc; ++i) {
    flags.push_back(argv[i]);
    if (flags.back() == "--check-determinism") flags.back() = "--check_determinism";
    args.push_back(flags.back().data());
  }
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (command == "replay") {
    dmalab::ReplayCommand c;
    if (rest.size() != 2) {
      std::fprintf(stderr, "dmalab replay: need exactly one scenario FILE; run `dmalab help`\n");
      return 2;
    }
    c.file = rest[1];
    c.backend = absl::GetFlag(FLAGS_backend);
    c.fidelity = absl::GetFlag(FLAGS_fidelity);
    if (absl::GetFlag(FLAGS_seed) != 0) c.seed = absl::GetFlag(FLAGS_seed);
    c.inject = absl::GetFlag(FLAGS_inject);
    c.json_path = absl::GetFlag(FLAGS_json);
    c.dump_dir = absl::GetFlag(FLAGS_dump);
    c.gpus = absl::GetFlag(FLAGS_gpus);
    c.pieces = absl::GetFlag(FLAGS_pieces);
    c.seeds = absl::GetFlag(FLAGS_seeds);
    c.check_determinism = absl::GetFlag(FLAGS_check_determinism);
    return dmalab::RunReplayCommand(c);
  }
  if (rest.size() > 1) {
    std::fprintf(stderr, "dmalab %s: unexpected argument '%s'\n", command.c_str(), rest[1]);
    return 2;
  }
  if (command == "demo") return dmalab::RunDemo();
  if (command == "plan") return dmalab::RunPlan();
  if (command == "sweep") return dmalab::RunSweepCommand(dmalab::SweepFlags());
  if (command == "calibrate")
    return dmalab::RunCalibrateCommand(dmalab::CalibrateFlags(argc, argv));
  if (command == "zoo") {
    dmalab::ZooOptions options;
    options.seeds = absl::GetFlag(FLAGS_seeds) ? absl::GetFlag(FLAGS_seeds) : 20;
    absl::StatusOr<dmalab::Fidelity> fidelity =
        dmalab::ParseFidelity(absl::GetFlag(FLAGS_fidelity));
    if (!fidelity.ok()) {
      std::fprintf(stderr, "dmalab zoo: --%s\n", std::string(fidelity.status().message()).c_str());
      return 2;
    }
    options.fidelity = *fidelity;
    return dmalab::RunZooCommand(options);
  }
  std::fprintf(stderr, "dmalab: unknown command '%s'; run `dmalab help`\n", command.c_str());
  return 2;
}
