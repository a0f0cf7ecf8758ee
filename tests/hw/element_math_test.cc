// The Reduce kernel's element arithmetic (hw/element_math.h), compiled for the host: its
// conversions against their definitions, its adds against the host reference
// (common/core/reduce_host.h). Runs without a GPU.
#include "hw/element_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

namespace em = element_math;

// The conversions (common/core/float_bits.h, which the host reference shares) against
// definitions computed another way: a bit pattern's value by its fields, rounding by comparing
// the distances to the two neighbours in double.

// The value of a binary16 or bfloat16 pattern with `mant_bits` mantissa bits and an exponent
// bias of `bias`, from its fields (NaN: any NaN).
double ValueOf(uint32_t h, int mant_bits, int exp_bits, int bias) {
  const bool negative = (h >> (mant_bits + exp_bits)) & 1;
  const uint32_t exp = (h >> mant_bits) & ((1u << exp_bits) - 1);
  const uint32_t mant = h & ((1u << mant_bits) - 1);
  double v;
  if (exp == (1u << exp_bits) - 1) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant + (1u << mant_bits)),
                   static_cast<int>(exp) - bias - mant_bits);
  }
  return negative ? -v : v;
}
double BF16Value(uint16_t h) { return ValueOf(h, 7, 8, 127); }
double FP16Value(uint16_t h) { return ValueOf(h, 10, 5, 15); }

TEST(ElementMathTest, DecodeGivesEveryPatternsValue) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto h16 = static_cast<uint16_t>(h);
    for (auto [got, want] : {std::pair{static_cast<double>(em::DecodeBF16(h16)), BF16Value(h16)},
                             std::pair{static_cast<double>(em::DecodeFP16(h16)), FP16Value(h16)}}) {
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      } else {
        ASSERT_EQ(got, want) << std::hex << h;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;  // -0 stays -0
      }
    }
  }
}

// The 16-bit pattern nearest to finite x (ties to the even pattern), given the value of each
// non-negative pattern; `largest` is the largest finite pattern, `inf` infinity's. Past the
// largest, IEEE rounding goes to infinity from half an ulp above it (a tie: to even, infinity).
uint16_t NearestPattern(double x, double (*value)(uint16_t), uint16_t largest, uint16_t inf) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;  // bit 15 in both formats
  const double a = std::fabs(x);
  // Binary search for the largest non-negative pattern whose value is at most a.
  uint32_t lo = 0, hi = largest;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (value(static_cast<uint16_t>(mid)) <= a) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const double below = value(static_cast<uint16_t>(lo));
  // The next pattern up; past the largest finite one, where infinity starts under IEEE rounding
  // (the value one ulp above the largest).
  const double above = lo < largest
                           ? value(static_cast<uint16_t>(lo + 1))
                           : 2 * value(largest) - value(static_cast<uint16_t>(largest - 1));
  uint32_t pick;
  if (a - below < above - a) {
    pick = lo;
  } else if (a - below > above - a) {
    pick = lo + 1;
  } else {
    pick = (lo & 1) ? lo + 1 : lo;
  }
  if (pick > largest) pick = inf;
  return static_cast<uint16_t>(sign | pick);
}

// Float bit patterns that exercise rounding: every upper half with lower halves at and around
// the bf16 tie, a stride through all 2^32 patterns, and fp16's ties around every exponent.
std::vector<uint32_t> EncodeProbePatterns() {
  std::vector<uint32_t> patterns;
  for (uint32_t hi = 0; hi <= 0xffff; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      patterns.push_back((hi << 16) | lo);
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) patterns.push_back(static_cast<uint32_t>(u));
  for (uint32_t exp = 0; exp < 256; ++exp) {
    for (uint32_t m : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x2fffu, 0x3000u, 0x7fffffu}) {
      for (uint32_t sign : {0u, 0x80000000u}) patterns.push_back(sign | (exp << 23) | m);
    }
  }
  return patterns;
}

TEST(ElementMathTest, EncodeRoundsToTheNearestPatternTiesToEven) {
  for (uint32_t u : EncodeProbePatterns()) {
    const float f = BitsToFloat(u);
    const uint16_t bf16 = em::EncodeBF16(f), fp16 = em::EncodeFP16(f);
    if (std::isnan(f)) {
      // Quiet NaN, sign and the payload's top bits kept.
      ASSERT_EQ(bf16, static_cast<uint16_t>((u >> 16) | 0x0040u)) << std::hex << u;
      ASSERT_EQ(fp16, static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu)))
          << std::hex << u;
      continue;
    }
    if (std::isinf(f)) {
      ASSERT_EQ(bf16, static_cast<uint16_t>(u >> 16)) << std::hex << u;
      ASSERT_EQ(fp16, static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7c00u)) << std::hex << u;
      continue;
    }
    ASSERT_EQ(bf16, NearestPattern(f, BF16Value, 0x7f7f, 0x7f80)) << std::hex << u;
    ASSERT_EQ(fp16, NearestPattern(f, FP16Value, 0x7bff, 0x7c00)) << std::hex << u;
  }
}

// Special fp32 values: NaNs of both signs with and without payload (signalling and quiet),
// infinities, zeros, subnormals, extremes.
std::vector<uint32_t> SpecialFloats() {
  return {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u,
          0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
          0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fc0abcdu, 0xffffffffu,
          0x7fffffffu, 0x33800000u, 0x477fe000u, 0x38800000u, 0x3f808000u, 0x3f818000u};
}

TEST(ElementMathTest, HostOrderAddEqualsHostReduceOnSpecialValues) {
  const std::vector<uint32_t> specials = SpecialFloats();
  std::vector<uint32_t> a, b;
  for (uint32_t x : specials) {
    for (uint32_t y : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  std::vector<uint32_t> out(a.size());
  const HostOperand terms[] = {{reinterpret_cast<const uint8_t*>(a.data())},
                               {reinterpret_cast<const uint8_t*>(b.data())}};
  ASSERT_TRUE(ReduceHost(DType::kFP32, reinterpret_cast<uint8_t*>(out.data()), Codec::kPlain, terms,
                         static_cast<int64_t>(a.size()))
                  .ok());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(em::Bits(em::HostOrderAdd(BitsToFloat(a[i]), BitsToFloat(b[i]))), out[i])
        << std::hex << a[i] << " + " << b[i];
  }
}

// The kernel's scalar path, run on the host.
void EmulatedReduce(DType dtype, const std::vector<const uint8_t*>& terms, uint8_t* dst,
                    int64_t elems) {
  auto load = [&](const uint8_t* p, int64_t i) {
    uint16_t h;
    uint32_t u;
    switch (dtype) {
      case DType::kBF16:
        std::memcpy(&h, p + 2 * i, 2);
        return em::DecodeBF16(h);
      case DType::kFP16:
        std::memcpy(&h, p + 2 * i, 2);
        return em::DecodeFP16(h);
      case DType::kFP32:
        std::memcpy(&u, p + 4 * i, 4);
        return em::FromBits(u);
    }
    return 0.0f;
  };
  for (int64_t i = 0; i < elems; ++i) {
    float acc = load(terms[0], i);
    for (size_t t = 1; t < terms.size(); ++t) acc = em::HostOrderAdd(acc, load(terms[t], i));
    if (dtype == DType::kFP32) {
      const uint32_t u = em::Bits(acc);
      std::memcpy(dst + 4 * i, &u, 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? em::EncodeBF16(acc) : em::EncodeFP16(acc);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
}

TEST(ElementMathTest, EmulatedKernelEqualsHostReduceOnRandomBitPatterns) {
  std::mt19937_64 rng(7);
  constexpr int64_t kElems = 50'000;
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    for (int num_terms = 1; num_terms <= 4; ++num_terms) {
      const size_t bytes = static_cast<size_t>(kElems) * DTypeBytes(dtype);
      std::vector<std::vector<uint8_t>> data(num_terms, std::vector<uint8_t>(bytes));
      std::vector<const uint8_t*> ptrs;
      std::vector<HostOperand> operands;
      for (auto& d : data) {
        for (auto& byte : d) byte = static_cast<uint8_t>(rng());
        ptrs.push_back(d.data());
        operands.push_back({d.data()});
      }
      std::vector<uint8_t> want(bytes), got(bytes);
      ASSERT_TRUE(ReduceHost(dtype, want.data(), Codec::kPlain, operands, kElems).ok());
      EmulatedReduce(dtype, ptrs, got.data(), kElems);
      ASSERT_EQ(got, want) << DTypeName(dtype) << " with " << num_terms << " terms";
    }
  }
}

}  // namespace
}  // namespace dmalab
