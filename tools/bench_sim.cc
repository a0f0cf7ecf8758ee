// Simulator and planner throughput (Google Benchmark; `--benchmark_format=json` for JSON):
//   - BM_SimAllReduce: a 4-rank DMA ring all-reduce per fidelity in the steady state (buffers
//     made and every page touched before the timed loop), payload bytes per second, and
//     `of_roofline`: the memcpy roofline of the ring's traffic over the time of one all-reduce.
//     The ring moves about 15 S bytes per 4-rank all-reduce of S bytes (copies, reduce reads and
//     writes), so the roofline is the time of 15 memcpy calls of S bytes, measured in the same
//     run just before and just after the timed loop (the mean of both), through 16 buffers of S
//     bytes (about the simulated ranks' memory, so that both run from the same level of the
//     memory hierarchy);
//   - BM_Memcpy: memcpy of 1 MiB to 1 GiB between two warm buffers, the baseline of the
//     simulator's figures (tools/bench_ratios divides by the 1 GiB one);
//   - BM_MemcpyOnThreads: memcpy of 4 and 64 MiB on one thread and on two at once, how the
//     machine's copy rate grows with a second thread (what bounds --jobs' gain);
//   - BM_ReplayScenario: whole-model scenarios (GLM-class and Llama-class TP8 prefill) replayed
//     end to end with every checker on, per fidelity;
//   - BM_FoundingReplay: the founding-incident scenario in the values fidelity, one seed after
//     another in one process, as `dmalab replay --seeds=N` and the zoo run it (the first replay,
//     which touches the process's memory for the first time, is outside the timed loop);
//   - BM_PlanRing: the planner's cost for one all-reduce (plans are built once per shape and
//     cached by DmaAllReduce, so this is a one-time cost per shape).
// Times are wall-clock times. Run from the repository root (scenario paths are relative to it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

Fidelity FidelityArg(int64_t arg) { return arg == 0 ? Fidelity::kValues : Fidelity::kShadow; }

// Seconds of 15 memcpy calls of `bytes` each, through 16 buffers of `bytes` that were touched
// before: the memcpy roofline of one 4-rank ring all-reduce of `bytes`. The mean of 3 rounds.
double MemcpyRooflineSeconds(uint64_t bytes) {
  constexpr int kBuffers = 16, kCopies = 15, kRounds = 3;
  std::vector<std::vector<uint8_t>> buffers;
  for (int b = 0; b < kBuffers; ++b) buffers.emplace_back(bytes, static_cast<uint8_t>(b));
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < kRounds; ++round) {
    for (int c = 0; c < kCopies; ++c) {
      std::memcpy(buffers[(2 * c + 1) % kBuffers].data(), buffers[(2 * c) % kBuffers].data(),
                  bytes);
      benchmark::ClobberMemory();
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kRounds;
}

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
  const auto all_reduce = [&] { return ar->AllReduce(in, out).ok() && dev.Synchronize().ok(); };
  // Outside the timed loop: the first call touches every page of the outputs and the scratch.
  for (int warm = 0; warm < 2; ++warm) {
    if (!all_reduce()) {
      state.SkipWithError("all_reduce failed");
      return;
    }
  }
  const double roofline_before = MemcpyRooflineSeconds(bytes);
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!all_reduce()) {
      state.SkipWithError("all_reduce failed");
      break;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  // The roofline measured on both sides of the timed loop, over the time of one all-reduce.
  const double roofline = (roofline_before + MemcpyRooflineSeconds(bytes)) / 2;
  state.counters["of_roofline"] = roofline / seconds;
}
BENCHMARK(BM_SimAllReduce)
    ->ArgsProduct({{1 << 20, 4 << 20, 16 << 20, 64 << 20}, {0, 1}})
    ->ArgNames({"bytes", "shadow"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)  // at least a few calls at 64 MiB
    ->UseRealTime();

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> a(bytes, 1), b(bytes, 2);  // both touched: no first-touch in the loop
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Memcpy)
    ->RangeMultiplier(4)
    ->Range(1 << 20, 1 << 30)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// memcpy of S bytes between two warm buffers of each thread, on 1 and 2 threads at once: how the
// machine's copy rate grows with a second thread (bytes_per_second counts every thread's). The
// simulator's values fidelity is mostly copies, fills and adds, so this bounds what --jobs=2
// can gain over --jobs=1 in a seed campaign (tools/bench_ratios prints it beside the zoo's).
BENCHMARK(BM_Memcpy)
    ->Name("BM_MemcpyOnThreads")
    ->Arg(4 << 20)
    ->Arg(64 << 20)
    ->Threads(1)
    ->Threads(2)
    ->MinTime(0.5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One replay on a new simulator with the checkers polled after every step, as `dmalab replay`
// runs it.
absl::StatusOr<ReplayReport> ReplayOnSim(const Scenario& scenario, uint64_t seed,
                                         Fidelity fidelity) {
  SimDevice device(scenario.world, seed, fidelity);
  ReplayOptions options;
  options.poll_device_findings = NewFindingsPoller(device);
  return Replay(scenario, &device, options);
}

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
    absl::StatusOr<ReplayReport> report = ReplayOnSim(*scenario, 1, fidelity);
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
    ->MinTime(0.5)  // one replay in the values fidelity, several in the shadow
    ->UseRealTime();

// The founding incident's replay, per seed of a campaign: each iteration builds a device and
// replays the scenario with a new scheduling seed, with every checker on.
void BM_FoundingReplay(benchmark::State& state) {
  absl::StatusOr<Scenario> scenario = LoadScenarioFile("scenarios/glm52_tp4_layer0_residual.yaml");
  if (!scenario.ok()) {
    state.SkipWithError("cannot load the scenario (run from the repository root)");
    return;
  }
  uint64_t seed = 1;
  const auto replay = [&] {
    absl::StatusOr<ReplayReport> report = ReplayOnSim(*scenario, seed++, Fidelity::kValues);
    return report.ok() && report->pass();
  };
  if (!replay()) {  // the campaign's first seed
    state.SkipWithError("the replay failed");
    return;
  }
  for (auto _ : state) {
    if (!replay()) {
      state.SkipWithError("the replay failed");
      break;
    }
  }
}
BENCHMARK(BM_FoundingReplay)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

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
