// dmalab_bench_codec: throughput of the host reference block codecs (quantize, dequantize and the
// fused dequantize + add + quantize of an i8_ring / e4m3_ring hop), all through ReduceHost, next
// to a plain std::memcpy of the same bf16 bytes as the baseline. Bytes processed are the bf16
// bytes in (2 per element), so the rates compare directly with memcpy's.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/core/codec.h"
#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "dmalab/device.h"

namespace dmalab {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// `bytes` of bf16 values, normally distributed with a magnitude that changes block to block.
std::vector<uint8_t> RandomBF16(int64_t bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<uint8_t> out(bytes);
  float magnitude = 1.0f;
  for (int64_t i = 0; i < bytes / 2; ++i) {
    if (i % kCodecBlockElems == 0) magnitude = static_cast<float>(1 + rng() % 1000) / 100.0f;
    StoreFromFloat(DType::kBF16, out.data(), i, normal(rng) * magnitude);
  }
  return out;
}

std::vector<uint8_t> Encoded(Codec codec, const std::vector<uint8_t>& bf16) {
  const int64_t elems = static_cast<int64_t>(bf16.size()) / 2;
  std::vector<uint8_t> out(EncodedBytes(codec, DType::kBF16, elems));
  const HostOperand term{bf16.data(), Codec::kPlain};
  if (!ReduceHost(DType::kBF16, out.data(), codec, {term}, elems).ok()) std::abort();
  return out;
}

// Runs dst = reduce(terms) once per iteration; records the bf16 bytes of `elems` elements.
void RunReduce(benchmark::State& state, uint8_t* dst, Codec dst_codec,
               absl::Span<const HostOperand> terms, int64_t elems) {
  for (auto _ : state) {
    const absl::Status s = ReduceHost(DType::kBF16, dst, dst_codec, terms, elems);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * elems * 2);
}

void BM_Memcpy(benchmark::State& state) {
  const std::vector<uint8_t> src = RandomBF16(state.range(0));
  std::vector<uint8_t> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

// bf16 -> block.
void BM_Quantize(benchmark::State& state, Codec codec) {
  const std::vector<uint8_t> src = RandomBF16(state.range(0));
  const int64_t elems = state.range(0) / 2;
  std::vector<uint8_t> dst(EncodedBytes(codec, DType::kBF16, elems));
  const HostOperand terms[] = {{src.data(), Codec::kPlain}};
  RunReduce(state, dst.data(), codec, terms, elems);
}

// block -> bf16.
void BM_Dequantize(benchmark::State& state, Codec codec) {
  const std::vector<uint8_t> src = Encoded(codec, RandomBF16(state.range(0)));
  const int64_t elems = state.range(0) / 2;
  std::vector<uint8_t> dst(elems * 2);
  const HostOperand terms[] = {{src.data(), codec}};
  RunReduce(state, dst.data(), Codec::kPlain, terms, elems);
}

// block + bf16 -> block: one reduce-scatter hop of a requantizing ring.
void BM_DequantAddQuantize(benchmark::State& state, Codec codec) {
  const std::vector<uint8_t> input = RandomBF16(state.range(0));
  const std::vector<uint8_t> landed = Encoded(codec, RandomBF16(state.range(0)));
  const int64_t elems = state.range(0) / 2;
  std::vector<uint8_t> dst(landed.size());
  const HostOperand terms[] = {{landed.data(), codec}, {input.data(), Codec::kPlain}};
  RunReduce(state, dst.data(), codec, terms, elems);
}

// bf16 + bf16 -> bf16: the plain ring hop, for comparison.
void BM_PlainAdd(benchmark::State& state) {
  const std::vector<uint8_t> a = RandomBF16(state.range(0));
  const std::vector<uint8_t> b = RandomBF16(state.range(0));
  const int64_t elems = state.range(0) / 2;
  std::vector<uint8_t> dst(a.size());
  const HostOperand terms[] = {{a.data(), Codec::kPlain}, {b.data(), Codec::kPlain}};
  RunReduce(state, dst.data(), Codec::kPlain, terms, elems);
}

BENCHMARK(BM_Memcpy)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK(BM_PlainAdd)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_Quantize, int8, Codec::kInt8Block)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_Quantize, e4m3, Codec::kE4M3Block)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_Dequantize, int8, Codec::kInt8Block)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_Dequantize, e4m3, Codec::kE4M3Block)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_DequantAddQuantize, int8, Codec::kInt8Block)->Arg(kMiB)->Arg(16 * kMiB);
BENCHMARK_CAPTURE(BM_DequantAddQuantize, e4m3, Codec::kE4M3Block)->Arg(kMiB)->Arg(16 * kMiB);

}  // namespace
}  // namespace dmalab

BENCHMARK_MAIN();
