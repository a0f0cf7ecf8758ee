#include "common/scenario/fill.h"

#include <cstring>

#include "common/core/host_simd.h"

namespace dmalab {

uint64_t FillStepSeed(uint64_t step_seed, absl::Span<const int64_t> iterations) {
  uint64_t s = step_seed;
  for (int64_t i : iterations) s = SplitMix64(s ^ static_cast<uint64_t>(i + 1));
  return s;
}

uint64_t FillKey(uint64_t scenario_seed, uint64_t step_seed, int rank) {
  return SplitMix64(SplitMix64(SplitMix64(scenario_seed) ^ step_seed) ^
                    static_cast<uint64_t>(rank));
}

namespace {

// Elements are generated a block at a time: a fixed trip count that GCC vectorizes at -O2.
constexpr int64_t kBlock = 64;

// The value of element i as fp32 (see the file comment of fill.h): an integer in [base, base +
// range) for kInt, else lo + (u >> 40) * scale.
[[gnu::always_inline]] inline float Value(bool integer, int64_t base, uint64_t range, double lo,
                                          double scale, uint64_t key, int64_t i) {
#ifdef __clang__
#pragma clang fp contract(off)  // clang would fuse lo + x * scale where the AVX-512 copy has FMA
#endif
  const uint64_t u = SplitMix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
  return integer ? static_cast<float>(base + static_cast<int64_t>(((u >> 32) * range) >> 32))
                 : static_cast<float>(lo + static_cast<double>(u >> 40) * scale);
}

// Elements [first, first + n) of a dtype buffer.
template <bool kInteger>
[[gnu::always_inline]] inline void Block(DType dtype, int64_t base, uint64_t range, double lo,
                                         double scale, uint64_t key, int64_t origin, int64_t first,
                                         int64_t n, uint8_t* __restrict out) {
  switch (dtype) {
    case DType::kBF16:
      for (int64_t j = 0; j < n; ++j) {
        const uint16_t h =
            FloatToBF16(Value(kInteger, base, range, lo, scale, key, origin + first + j));
        std::memcpy(out + 2 * (first + j), &h, 2);
      }
      return;
    case DType::kFP16:
      for (int64_t j = 0; j < n; ++j) {
        const uint16_t h =
            FloatToFP16(Value(kInteger, base, range, lo, scale, key, origin + first + j));
        std::memcpy(out + 2 * (first + j), &h, 2);
      }
      return;
    case DType::kFP32:
      for (int64_t j = 0; j < n; ++j) {
        const float v = Value(kInteger, base, range, lo, scale, key, origin + first + j);
        std::memcpy(out + 4 * (first + j), &v, 4);
      }
      return;
  }
}

template <bool kInteger>
[[gnu::always_inline]] inline void FillAll(DType dtype, double lo, double hi, uint64_t key,
                                           int64_t origin, int64_t elems, uint8_t* out) {
  const uint64_t range =
      kInteger ? static_cast<uint64_t>(static_cast<int64_t>(hi) - static_cast<int64_t>(lo)) + 1 : 0;
  const int64_t base = kInteger ? static_cast<int64_t>(lo) : 0;
  const double scale = (hi - lo) / 16777216.0;
  int64_t first = 0;
  for (; first + kBlock <= elems; first += kBlock) {
    Block<kInteger>(dtype, base, range, lo, scale, key, origin, first, kBlock, out);
  }
  Block<kInteger>(dtype, base, range, lo, scale, key, origin, first, elems - first, out);
}

[[gnu::always_inline]] inline void Fill(DType dtype, FillKind kind, double lo, double hi,
                                        uint64_t key, int64_t origin, int64_t elems, uint8_t* out) {
  if (kind == FillKind::kInt) return FillAll<true>(dtype, lo, hi, key, origin, elems, out);
  FillAll<false>(dtype, lo, hi, key, origin, elems, out);
}

void FillPortable(DType dtype, FillKind kind, double lo, double hi, uint64_t key, int64_t origin,
                  int64_t elems, uint8_t* base) {
  Fill(dtype, kind, lo, hi, key, origin, elems, base);
}

#ifdef DMALAB_HOST_AVX512
DMALAB_AVX512_TARGET void FillAvx512(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                                     int64_t origin, int64_t elems, uint8_t* out) {
  Fill(dtype, kind, lo, hi, key, origin, elems, out);
}
#endif

// acc[i] += coeff * v_i of the integer fill (the check's exact sums; the same integer arithmetic
// in both copies).
// Blocks of kBlock, as the fills: a fixed trip count that GCC vectorizes at -O2.
[[gnu::always_inline]] inline void Accumulate(double lo, double hi, uint64_t key, int64_t coeff,
                                              int64_t origin, int64_t elems,
                                              int64_t* __restrict acc) {
  const uint64_t range =
      static_cast<uint64_t>(static_cast<int64_t>(hi) - static_cast<int64_t>(lo)) + 1;
  const int64_t base = static_cast<int64_t>(lo);
  const auto block = [&](int64_t first, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const uint64_t u =
          SplitMix64(key + static_cast<uint64_t>(origin + first + j) * 0x9E3779B97F4A7C15ull);
      acc[first + j] += coeff * (base + static_cast<int64_t>(((u >> 32) * range) >> 32));
    }
  };
  int64_t first = 0;
  for (; first + kBlock <= elems; first += kBlock) block(first, kBlock);
  block(first, elems - first);
}

#ifdef DMALAB_HOST_AVX512
DMALAB_AVX512_TARGET void AccumulateAvx512(double lo, double hi, uint64_t key, int64_t coeff,
                                           int64_t origin, int64_t elems, int64_t* acc) {
  Accumulate(lo, hi, key, coeff, origin, elems, acc);
}
#endif

}  // namespace

void FillElements(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                  absl::Span<uint8_t> out) {
  FillElements(dtype, kind, lo, hi, key, 0, out);
}

void FillElements(DType dtype, FillKind kind, double lo, double hi, uint64_t key, int64_t first,
                  absl::Span<uint8_t> out) {
  const int64_t elems = static_cast<int64_t>(out.size()) / DTypeBytes(dtype);
#ifdef DMALAB_HOST_AVX512
  if (HostHasAvx512()) return FillAvx512(dtype, kind, lo, hi, key, first, elems, out.data());
#endif
  FillPortable(dtype, kind, lo, hi, key, first, elems, out.data());
}

void FillElementsPortable(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                          absl::Span<uint8_t> out) {
  FillPortable(dtype, kind, lo, hi, key, 0, static_cast<int64_t>(out.size()) / DTypeBytes(dtype),
               out.data());
}

void AccumulateIntFill(double lo, double hi, uint64_t key, int64_t coeff, absl::Span<int64_t> acc) {
  AccumulateIntFill(lo, hi, key, coeff, 0, acc);
}

void AccumulateIntFill(double lo, double hi, uint64_t key, int64_t coeff, int64_t first,
                       absl::Span<int64_t> acc) {
#ifdef DMALAB_HOST_AVX512
  if (HostHasAvx512()) {
    return AccumulateAvx512(lo, hi, key, coeff, first, static_cast<int64_t>(acc.size()),
                            acc.data());
  }
#endif
  Accumulate(lo, hi, key, coeff, first, static_cast<int64_t>(acc.size()), acc.data());
}

int64_t ExactIntegerLimit(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 256;
    case DType::kFP16:
      return 2048;
    case DType::kFP32:
      return int64_t{1} << 24;
  }
  return 0;
}

}  // namespace dmalab
