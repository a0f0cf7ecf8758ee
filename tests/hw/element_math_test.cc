// The Reduce kernel's element arithmetic (hw/element_math.h), compiled for the host, against the
// host reference (common/core/dtype.h, common/core/reduce_host.h). Runs without a GPU.
#include "hw/element_math.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

namespace em = element_math;

TEST(ElementMathTest, DecodeBF16EqualsHostForEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ASSERT_EQ(em::Bits(em::DecodeBF16(static_cast<uint16_t>(h))),
              FloatBits(BF16ToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
  }
}

TEST(ElementMathTest, DecodeFP16EqualsHostForEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ASSERT_EQ(em::Bits(em::DecodeFP16(static_cast<uint16_t>(h))),
              FloatBits(FP16ToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
  }
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

TEST(ElementMathTest, EncodeBF16EqualsHost) {
  for (uint32_t u : EncodeProbePatterns()) {
    ASSERT_EQ(em::EncodeBF16(BitsToFloat(u)), FloatToBF16(BitsToFloat(u))) << std::hex << u;
  }
}

TEST(ElementMathTest, EncodeFP16EqualsHost) {
  for (uint32_t u : EncodeProbePatterns()) {
    ASSERT_EQ(em::EncodeFP16(BitsToFloat(u)), FloatToFP16(BitsToFloat(u))) << std::hex << u;
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
