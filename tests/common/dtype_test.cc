// Conversions of the host reference arithmetic, against values worked out by hand.
#include "common/core/dtype.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

TEST(DTypeTest, NamesRoundTripAndUnknownNamesAreRejected) {
  for (DType t : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    EXPECT_EQ(*ParseDType(DTypeName(t)), t);
  }
  EXPECT_EQ(ParseDType("int8").status().message(),
            "dtype 'int8' is not known; allowed: bf16, fp16, fp32");
}

TEST(BF16Test, RoundsToNearestEven) {
  // 1.0 = 0x3f800000; one bf16 ulp at 1.0 is 2^-7 (0x00010000 in fp32 bits).
  EXPECT_EQ(FloatToBF16(1.0f), 0x3f80);
  // Exactly half an ulp above 1.0: tie, rounds to the even mantissa 0x3f80.
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f808000u)), 0x3f80);
  // Half an ulp above 0x3f81 (odd): tie rounds up to 0x3f82.
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f818000u)), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x3f808001u)), 0x3f81);
  // The largest finite fp32 rounds up to infinity.
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBF16(-0.0f), 0x8000);
}

TEST(BF16Test, NaNStaysQuietNaNAndInfinityStays) {
  EXPECT_EQ(FloatToBF16(BitsToFloat(0x7f800001u)), 0x7fc0);  // signalling NaN becomes quiet
  EXPECT_EQ(FloatToBF16(BitsToFloat(0xffc00000u)), 0xffc0);
  EXPECT_EQ(FloatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(BF16Test, WideningIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = BF16ToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(FloatBits(f), h << 16);
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBF16(f), h);
    }
  }
}

TEST(FP16Test, KnownValues) {
  EXPECT_EQ(FP16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(FP16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(FP16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(FP16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(FP16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(FP16ToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(FP16ToFloat(0x7e00)));
  EXPECT_EQ(FloatToFP16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFP16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFP16(65519.0f), 0x7bff);               // below the midpoint 65520: stays finite
  EXPECT_EQ(FloatToFP16(65520.0f), 0x7c00);               // the midpoint rounds to even: infinity
  EXPECT_EQ(FloatToFP16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 1 ulp: even
  EXPECT_EQ(FloatToFP16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 ulps: even
  EXPECT_EQ(FloatToFP16(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(FloatToFP16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie at 1.0: even
  EXPECT_EQ(FloatToFP16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie at 1+ulp: up to even
}

TEST(FP16Test, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = FP16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToFP16(f), h) << h;
  }
}

TEST(CountNonFiniteTest, CountsWhatConvertingSaysIsNotFinite) {
  // Every bf16 and fp16 pattern, and fp32 patterns around the exponent's edges, against
  // std::isfinite of the widened value.
  for (DType t : {DType::kBF16, DType::kFP16}) {
    std::vector<uint16_t> all(65536);
    for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
    int64_t count = 0, first = -1;
    for (int64_t i = 0; i < 65536; ++i) {
      if (std::isfinite(LoadAsFloat(t, all.data(), i))) continue;
      if (count++ == 0) first = i;
    }
    const NonFiniteCount got = CountNonFinite(t, all.data(), 65536);
    EXPECT_EQ(got.count, count) << DTypeName(t);
    EXPECT_EQ(got.first, first) << DTypeName(t);
  }
  const std::vector<float> f32 = {1.0f,
                                  -0.0f,
                                  std::numeric_limits<float>::max(),
                                  std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(),
                                  -2.5f};
  const NonFiniteCount got = CountNonFinite(DType::kFP32, f32.data(), 8);
  EXPECT_EQ(got.count, 3);
  EXPECT_EQ(got.first, 4);
  EXPECT_EQ(CountNonFinite(DType::kFP32, f32.data(), 4).count, 0);
  EXPECT_EQ(CountNonFinite(DType::kFP32, f32.data(), 4).first, -1);
}

}  // namespace
}  // namespace dmalab
