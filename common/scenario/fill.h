// Deterministic tensor contents for scenario fills: a counter-based generator, so the value of
// every element is a pure function of (scenario seed, step seed, rank, element index) and any
// device, any order of generation and any later tool produce the same bytes.
//
// The generator is SplitMix64: SplitMix64(x) = Finalize(x + 0x9E3779B97F4A7C15), Finalize being
// z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31.
//   key = SplitMix64(SplitMix64(SplitMix64(scenario_seed) ^ step_seed) ^ rank)
//   u_i = SplitMix64(key + i * 0x9E3779B97F4A7C15)   (the (i+1)-th output of a SplitMix64
//                                                     generator seeded with key)
//   int:    v_i = lo + ((u_i >> 32) * (hi - lo + 1)) >> 32        integers in [lo, hi]
//   random: v_i = lo + (u_i >> 40) * 2^-24 * (hi - lo)             computed in double, then
//                                                                  rounded to fp32, then to dtype
// Inside `repeat` blocks the step seed is first mixed with the iteration numbers (FillStepSeed),
// so each iteration of a layer gets fresh contents.
#ifndef DMALAB_COMMON_SCENARIO_FILL_H_
#define DMALAB_COMMON_SCENARIO_FILL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/dtype.h"
#include "dmalab/scenario.h"

namespace dmalab {

inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The step seed of a fill inside repeats whose current iterations (outermost first, 0-based) are
// `iterations`: s = step_seed; for each iteration i: s = SplitMix64(s ^ (i + 1)). Empty
// `iterations` leaves the step seed unchanged.
uint64_t FillStepSeed(uint64_t step_seed, absl::Span<const int64_t> iterations);

// The generator key of one rank's fill (see the file comment).
uint64_t FillKey(uint64_t scenario_seed, uint64_t step_seed, int rank);

// Writes `out.size() / DTypeBytes(dtype)` elements of the fill with this key. For kInt, lo and hi
// are integers with lo <= hi, exact in dtype. On CPUs with AVX-512 the same arithmetic runs as
// vector instructions.
void FillElements(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                  absl::Span<uint8_t> out);
// The same for elements [first, first + out.size() / DTypeBytes(dtype)) of the fill: any piece
// of a fill, generated alone, holds the bytes it holds in the whole.
void FillElements(DType dtype, FillKind kind, double lo, double hi, uint64_t key, int64_t first,
                  absl::Span<uint8_t> out);
// FillElements without vector instructions beyond the build's baseline: the same bytes (tests
// compare the two).
void FillElementsPortable(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                          absl::Span<uint8_t> out);

// Adds coeff * v_i to acc[i] for every i < acc.size(), v_i being the kInt fill's elements with
// this key (the same generator as FillElements): how the replay computes exact expected sums
// without reading the device (common/scenario/known_values.h).
void AccumulateIntFill(double lo, double hi, uint64_t key, int64_t coeff, absl::Span<int64_t> acc);
// The same for elements [first, first + acc.size()) of the fill: acc[i] += coeff * v_(first + i),
// so that a long tensor's sums can be computed a cache-sized piece at a time.
void AccumulateIntFill(double lo, double hi, uint64_t key, int64_t coeff, int64_t first,
                       absl::Span<int64_t> acc);

// The largest integer magnitude every smaller integer of which dtype represents exactly:
// 256 for bf16, 2048 for fp16, 2^24 for fp32.
int64_t ExactIntegerLimit(DType dtype);

}  // namespace dmalab

#endif  // DMALAB_COMMON_SCENARIO_FILL_H_
