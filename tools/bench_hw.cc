// dmalab_bench_hw: host enqueue cost of one DmaAllReduce::AllReduce(inputs, outs) call on a
// CudaDevice of 4 virtual ranks on one GPU. Only the enqueue is timed: the device is
// synchronized outside the timed region every kSyncEvery calls. Skips without a GPU.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "common/ring/dma_all_reduce.h"
#include "hw/cuda_device.h"

namespace dmalab {
namespace {

constexpr int kWorld = 4;
constexpr int kSyncEvery = 16;

void BM_AllReduceEnqueue(benchmark::State& state) {
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  absl::StatusOr<std::unique_ptr<CudaDevice>> device = CudaDevice::Create(kWorld, 1);
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  const bool graph_cache = state.range(1) != 0;
  DmaAllReduceOptions options;
  options.max_bytes = bytes;
  options.graph_cache = graph_cache;
  absl::StatusOr<std::unique_ptr<DmaAllReduce>> ar = DmaAllReduce::Create(device->get(), options);
  if (!ar.ok()) {
    state.SkipWithError(std::string(ar.status().message()).c_str());
    return;
  }
  const int64_t elems = static_cast<int64_t>(bytes / 2);
  std::vector<TensorView> inputs, outs;
  for (int r = 0; r < kWorld; ++r) {
    absl::StatusOr<MemRef> in = (*device)->Allocate(r, bytes, "bench input");
    absl::StatusOr<MemRef> out = (*device)->Allocate(r, bytes, "bench output");
    if (!in.ok() || !out.ok()) {
      state.SkipWithError("allocation failed");
      return;
    }
    if (!(*device)->Write(*in, std::vector<uint8_t>(bytes, 0)).ok()) {
      state.SkipWithError("input write failed");
      return;
    }
    inputs.push_back(TensorView{*in, DType::kBF16, {elems}, true});
    outs.push_back(TensorView{*out, DType::kBF16, {elems}, true});
  }
  // Warm up: plan cache, events, first launches.
  if (absl::Status s = (*ar)->AllReduce(inputs, outs);
      !s.ok() || !(s = (*device)->Synchronize()).ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  int since_sync = 0;
  for (auto _ : state) {
    if (absl::Status s = (*ar)->AllReduce(inputs, outs); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    if (++since_sync == kSyncEvery) {
      state.PauseTiming();
      if (absl::Status s = (*device)->Synchronize(); !s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
      }
      since_sync = 0;
      state.ResumeTiming();
    }
  }
  if (absl::Status s = (*device)->Synchronize(); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  if (absl::StatusOr<RingPlan> plan = (*ar)->PlanFor(inputs[0]); plan.ok()) {
    int64_t ops = 0;
    for (const auto& rank_ops : plan->ranks) ops += static_cast<int64_t>(rank_ops.size());
    state.counters["device_ops_per_call"] = static_cast<double>(ops);
    state.counters["pieces"] = plan->pieces;
  }
  state.SetLabel(absl::StrFormat(
      "%d ranks on 1 GPU, bf16, %d MiB, %s", kWorld, bytes >> 20,
      graph_cache ? "graph cache (one launch per call)" : "eager (every op enqueued)"));
}

BENCHMARK(BM_AllReduceEnqueue)
    ->Args({1 << 20, 0})
    ->Args({22 << 20, 0})
    ->Args({1 << 20, 1})
    ->Args({22 << 20, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace dmalab

BENCHMARK_MAIN();
