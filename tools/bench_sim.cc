// Simulator throughput: a 4-rank DMA ring all-reduce in values fidelity, payload bytes per
// second, beside a plain memcpy of the same bytes.
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/dma_all_reduce.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

void BM_SimAllReduce(benchmark::State& state) {
  const int world = 4;
  const uint64_t bytes = static_cast<uint64_t>(state.range(0));
  const int64_t n = static_cast<int64_t>(bytes / 2);
  SimDevice dev(world, 1);
  DmaAllReduceOptions o;
  o.max_bytes = bytes;
  auto ar = *DmaAllReduce::Create(&dev, o);
  std::vector<TensorView> in, out;
  for (int r = 0; r < world; ++r) {
    MemRef a = *dev.Allocate(r, bytes, "in");
    (void)dev.Write(a, std::vector<uint8_t>(bytes, 0x3f));
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
    ->RangeMultiplier(4)
    ->Range(1 << 20, 64 << 20)
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

}  // namespace
}  // namespace dmalab

BENCHMARK_MAIN();
