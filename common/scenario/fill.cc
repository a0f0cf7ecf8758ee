#include "common/scenario/fill.h"

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

// The integer fill's elements: visit(i, v_i) for i < elems.
template <typename Visit>
void GenerateInts(double lo, double hi, uint64_t key, int64_t elems, Visit visit) {
  const uint64_t range =
      static_cast<uint64_t>(static_cast<int64_t>(hi) - static_cast<int64_t>(lo)) + 1;
  const int64_t base = static_cast<int64_t>(lo);
  for (int64_t i = 0; i < elems; ++i) {
    const uint64_t u = SplitMix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    visit(i, base + static_cast<int64_t>(((u >> 32) * range) >> 32));
  }
}

template <typename Store>
void Generate(FillKind kind, double lo, double hi, uint64_t key, int64_t elems, Store store) {
  if (kind == FillKind::kInt) {
    GenerateInts(lo, hi, key, elems,
                 [&](int64_t i, int64_t v) { store(i, static_cast<float>(v)); });
    return;
  }
  const double scale = (hi - lo) / 16777216.0;
  for (int64_t i = 0; i < elems; ++i) {
    const uint64_t u = SplitMix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    store(i, static_cast<float>(lo + static_cast<double>(u >> 40) * scale));
  }
}

}  // namespace

void FillElements(DType dtype, FillKind kind, double lo, double hi, uint64_t key,
                  absl::Span<uint8_t> out) {
  const int64_t elems = static_cast<int64_t>(out.size()) / DTypeBytes(dtype);
  uint8_t* base = out.data();
  // One loop per dtype so the conversion inlines.
  switch (dtype) {
    case DType::kBF16:
      Generate(kind, lo, hi, key, elems, [base](int64_t i, float v) {
        const uint16_t h = FloatToBF16(v);
        std::memcpy(base + 2 * i, &h, 2);
      });
      return;
    case DType::kFP16:
      Generate(kind, lo, hi, key, elems, [base](int64_t i, float v) {
        const uint16_t h = FloatToFP16(v);
        std::memcpy(base + 2 * i, &h, 2);
      });
      return;
    case DType::kFP32:
      Generate(kind, lo, hi, key, elems,
               [base](int64_t i, float v) { std::memcpy(base + 4 * i, &v, 4); });
      return;
  }
}

void AccumulateIntFill(double lo, double hi, uint64_t key, int64_t coeff, absl::Span<int64_t> acc) {
  int64_t* out = acc.data();
  GenerateInts(lo, hi, key, static_cast<int64_t>(acc.size()),
               [out, coeff](int64_t i, int64_t v) { out[i] += coeff * v; });
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
