// Simulator and planner throughput (Google Benchmark; `--benchmark_format=json` for JSON):
//   - BM_SimAllReduce: a 4-rank DMA ring all-reduce per fidelity, payload bytes per second, beside
//     BM_Memcpy of the same bytes in the same run (the values fidelity is quoted as a fraction of
//     this machine's memcpy);
//   - BM_ReplayScenario: whole-model scenarios (GLM-class and Llama-class TP8 prefill) replayed
//     end to end with every checker on, per fidelity;
//   - BM_PlanRing: the planner's cost for one all-reduce (plans are built once per shape and
//     cached by DmaAllReduce, so this is a one-time cost per shape).
// Run from the repository root (scenario paths are relative to it).
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "common/scenario/replay.h"
#include "common/scenario/scenario_loader.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

Fidelity FidelityArg(int64_t arg) { return arg == 0 ? Fidelity::kValues : Fidelity::kShadow; }

void BM_SimAllReduce(benchmark::State& state) {
  const int world = 4;
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  const Fidelity fidelity = FidelityArg(state.range(1));
  state.SetLabel(std::string(FidelityName(fidelity)));
  const int64_t n = static_cast<int64_t>(bytes / 2);
  SimDevice dev(world, 1, fidelity);
  DmaAllReduceOptions o;
  o.max_bytes = bytes;
  auto ar = *DmaAllReduce::Create(&dev, o);
  std::vector<TensorView> in, out;
  for (int r = 0; r < world; ++r) {
    MemRef a = *dev.Allocate(r, bytes, "in");
    const absl::Status filled = fidelity == Fidelity::kValues
                                    ? dev.Write(a, std::vector<uint8_t>(bytes, 0x3f))
                                    : dev.WriteShadow(a, static_cast<uint64_t>(r));
    if (!filled.ok()) {
      state.SkipWithError("fill failed");
      return;
    }
    in.push_back(TensorView{a, DType::kBF16, {n}, true});
    out.push_back(TensorView{*dev.Allocate(r, bytes, "out"), DType::kBF16, {n}, true});
  }
  for (auto _ : state) {
    if (!ar->AllReduce(in, out).ok() || !dev.Synchronize().ok()) {
      state.SkipWithError("all_reduce failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_SimAllReduce)
    ->ArgsProduct({{1 << 20, 4 << 20, 16 << 20, 64 << 20}, {0, 1}})
    ->ArgNames({"bytes", "shadow"})
    ->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> a(bytes, 1), b(bytes);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(1 << 20, 64 << 20)->Unit(benchmark::kMillisecond);

const char* const kScenarios[] = {"scenarios/glm5_tp8_prefill.yaml",
                                  "scenarios/llama70b_tp8_prefill.yaml"};

// A whole-model replay with the simulator's checkers polled after every step, as `dmalab replay`
// runs it. Counters: all-reduces and bytes per rank they reduce, per second.
void BM_ReplayScenario(benchmark::State& state) {
  const char* file = kScenarios[state.range(0)];
  const Fidelity fidelity = FidelityArg(state.range(1));
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(file);
  if (!scenario.ok()) {
    state.SkipWithError("cannot load the scenario (run from the repository root)");
    return;
  }
  state.SetLabel(absl::StrFormat("%s %s", scenario->name, FidelityName(fidelity)));
  int64_t all_reduces = 0;
  uint64_t bytes = 0;
  for (auto _ : state) {
    SimDevice device(scenario->world, 1, fidelity);
    ReplayOptions options;
    options.poll_device_findings = NewFindingsPoller(device);
    absl::StatusOr<ReplayReport> report = Replay(*scenario, &device, options);
    if (!report.ok() || !report->pass()) {
      state.SkipWithError("the replay failed");
      break;
    }
    all_reduces += static_cast<int64_t>(report->all_reduces.size());
    for (const AllReduceRecord& a : report->all_reduces) bytes += a.bytes;
  }
  state.counters["all_reduces"] = static_cast<double>(all_reduces) / state.iterations();
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ReplayScenario)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"scenario", "shadow"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The plan of one all-reduce: every rank's op list, for W ranks and a 16 MiB bf16 tensor.
void BM_PlanRing(benchmark::State& state) {
  RingPlanRequest request;
  request.world = static_cast<int>(state.range(0));
  request.elems = (16 << 20) / 2;
  request.wire = state.range(1) == 0 ? WireMode::kNative : WireMode::kI8Ring;
  request.max_bytes = 16 << 20;
  state.SetLabel(std::string(WireModeName(request.wire)));
  int64_t ops = 0;
  for (auto _ : state) {
    absl::StatusOr<RingPlan> plan = PlanRing(request);
    if (!plan.ok()) {
      state.SkipWithError("planning failed");
      break;
    }
    for (const std::vector<PlanOp>& rank : plan->ranks) ops += static_cast<int64_t>(rank.size());
    benchmark::DoNotOptimize(plan->ranks.data());
  }
  state.counters["ops"] = static_cast<double>(ops) / state.iterations();
}
BENCHMARK(BM_PlanRing)->ArgsProduct({{2, 4, 8, 16}, {0, 1}})->ArgNames({"world", "i8_ring"});

}  // namespace
}  // namespace dmalab

BENCHMARK_MAIN();
