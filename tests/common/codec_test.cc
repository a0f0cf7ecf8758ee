// Specification of the host block codecs (common/core/codec.h) and of ReduceHost on block-coded
// operands. Expected values come from a straightforward reference written here (std::nearbyint,
// a nearest-value search over the E4M3 grid built from its definition) or are derived by hand in
// the comments, never from the code under test.
#include "common/core/codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/reduce_host.h"
#include "dmalab/device.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr int kN = 128;
constexpr uint32_t kNaNBits = 0x7fc00000u;
using Block = std::array<float, kN>;

struct Encoded {
  std::array<uint8_t, kN> q{};
  float scale = 0.0f;
};

// ---------------------------------------------------------------------------------------------
// Reference codecs, written from the definitions in codec.h.

// E4M3FN value of a code: exponent bias 7, 3 mantissa bits, subnormals m * 2^-9.
double RefE4M3Value(uint8_t code) {
  const int e = (code >> 3) & 0xf;
  const int m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The 127 non-negative finite E4M3 values, by code 0x00..0x7e (increasing).
const std::array<double, 127>& PositiveE4M3Grid() {
  static const std::array<double, 127> grid = [] {
    std::array<double, 127> g;
    for (int c = 0; c < 127; ++c) g[c] = RefE4M3Value(static_cast<uint8_t>(c));
    return g;
  }();
  return grid;
}

// Nearest E4M3 code by search of the grid; ties go to the even code; beyond 448 saturates.
uint8_t RefFloatToE4M3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  const std::array<double, 127>& g = PositiveE4M3Grid();
  if (a >= g.back()) return sign | 0x7e;
  const int hi = static_cast<int>(std::lower_bound(g.begin(), g.end(), a) - g.begin());
  if (hi == 0) return sign;  // a == 0
  const int lo = hi - 1;
  const double d_lo = a - g[lo], d_hi = g[hi] - a;
  const int code = d_lo < d_hi ? lo : d_hi < d_lo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint8_t>(sign | code);
}

float CodeMax(Codec codec) { return codec == Codec::kInt8Block ? 127.0f : 448.0f; }

Encoded RefEncode(Codec codec, const float* v) {
  Encoded e;
  float amax = 0.0f;
  for (int i = 0; i < kN; ++i) {
    if (!std::isfinite(v[i])) {  // poisoned block
      e.q.fill(codec == Codec::kInt8Block ? 0x80 : 0x7f);
      e.scale = BitsToFloat(kNaNBits);
      return e;
    }
    amax = std::fmax(amax, std::fabs(v[i]));
  }
  e.scale = amax / CodeMax(codec);
  if (e.scale == 0.0f) e.scale = 1.0f;
  for (int i = 0; i < kN; ++i) {
    const float x = v[i] / e.scale;
    if (codec == Codec::kInt8Block) {
      const float r = std::nearbyint(std::fmin(std::fmax(x, -127.0f), 127.0f));
      e.q[i] = static_cast<uint8_t>(static_cast<int8_t>(r));
    } else {
      e.q[i] = RefFloatToE4M3(x);
    }
  }
  return e;
}

float RefDecodeOne(Codec codec, uint8_t q, float scale) {
  const float code = codec == Codec::kInt8Block ? static_cast<float>(static_cast<int8_t>(q))
                                                : static_cast<float>(RefE4M3Value(q));
  const float r = code * scale;
  return std::isnan(r) ? BitsToFloat(kNaNBits) : r;
}

Encoded Encode(Codec codec, const Block& v) {
  Encoded e;
  EncodeBlock(codec, v.data(), e.q.data(), &e.scale);
  return e;
}

Block Decode(Codec codec, const Encoded& e) {
  Block out;
  DecodeBlock(codec, e.q.data(), e.scale, out.data());
  return out;
}

Block Zeros() {
  Block b;
  b.fill(0.0f);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Error bounds as documented in codec.h, and the worst case seen.

// Half a quantisation step at y = |v| / scale, in units of the scale.
double HalfStep(Codec codec, double y) {
  if (codec == Codec::kInt8Block) return 0.5;
  return y >= 0x1p-6 ? std::ldexp(1.0, std::ilogb(y) - 4) : 0x1p-10;
}

// The documented bound: half a step, plus the rounding of v / scale and of the decode multiply
// (relative to |v|), plus the fp32 subnormal spacing.
double ErrorBound(Codec codec, float v, float scale) {
  const double half_step = scale * HalfStep(codec, std::fabs(v / static_cast<double>(scale)));
  return half_step * (1 + 0x1p-20) + 0x1p-22 * std::fabs(v) + 0x1p-149;
}

// The largest |decode - v| seen, relative to half a step and to the whole bound.
struct WorstError {
  double half_steps = 0.0;
  double of_bound = 0.0;

  void Print(Codec codec) const {
    std::printf("%s worst |decode - v|: %.9f half steps, %.9f of the bound\n",
                std::string(CodecName(codec)).c_str(), half_steps, of_bound);
  }
};

void ExpectWithinBound(Codec codec, float v, float decoded, float scale, WorstError& worst) {
  const double err = std::fabs(static_cast<double>(decoded) - v);
  const double bound = ErrorBound(codec, v, scale);
  EXPECT_LE(err, bound) << CodecName(codec) << " v=" << v << " decoded=" << decoded
                        << " scale=" << scale;
  const double half_step = scale * HalfStep(codec, std::fabs(v / static_cast<double>(scale)));
  worst.half_steps = std::fmax(worst.half_steps, err / half_step);
  worst.of_bound = std::fmax(worst.of_bound, err / bound);
}

// Encodes `v`, demands the reference's exact bytes and scale, and checks every decoded value:
// the documented bound for finite blocks, canonical NaN everywhere for poisoned ones, and the
// documented sign of zero.
void CheckBlock(Codec codec, const Block& v, WorstError& worst) {
  const Encoded got = Encode(codec, v);
  const Encoded want = RefEncode(codec, v.data());
  ASSERT_EQ(FloatBits(got.scale), FloatBits(want.scale)) << CodecName(codec) << " v[0]=" << v[0];
  ASSERT_EQ(got.q, want.q) << CodecName(codec) << " v[0]=" << v[0];
  const Block d = Decode(codec, got);
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(FloatBits(d[i]), FloatBits(RefDecodeOne(codec, got.q[i], got.scale)));
    if (std::isnan(got.scale)) {
      EXPECT_EQ(FloatBits(d[i]), kNaNBits);
      continue;
    }
    ExpectWithinBound(codec, v[i], d[i], got.scale, worst);
    if (d[i] == 0.0f) {
      const bool want_negative = codec == Codec::kE4M3Block && std::signbit(v[i]);
      EXPECT_EQ(std::signbit(d[i]), want_negative) << CodecName(codec) << " v=" << v[i];
    }
  }
}

class BothCodecs : public ::testing::TestWithParam<Codec> {};
INSTANTIATE_TEST_SUITE_P(Codecs, BothCodecs,
                         ::testing::Values(Codec::kInt8Block, Codec::kE4M3Block),
                         [](const auto& info) {
                           return info.param == Codec::kInt8Block ? "Int8" : "E4M3";
                         });

// ---------------------------------------------------------------------------------------------
// Exhaustive over all 65,536 bf16 patterns.

TEST_P(BothCodecs, EveryBF16PatternInItsBinadeBlockMatchesReference) {
  // 128 consecutive bf16 patterns are exactly one binade (7 mantissa bits): every pattern is an
  // ordinary value beside the binade's largest one. Exponent 0xff blocks hold inf and NaN.
  WorstError worst;
  for (uint32_t first = 0; first < 65536; first += kN) {
    Block v;
    for (int i = 0; i < kN; ++i) v[i] = BF16ToFloat(static_cast<uint16_t>(first + i));
    CheckBlock(GetParam(), v, worst);
    if (HasFatalFailure()) return;
  }
  worst.Print(GetParam());
}

TEST_P(BothCodecs, EveryFiniteBF16PatternAsBlockMaxMatchesReference) {
  WorstError worst;
  for (uint32_t p = 0; p < 65536; ++p) {
    const float max = BF16ToFloat(static_cast<uint16_t>(p));
    if (!std::isfinite(max)) continue;
    // Smaller companions j/128 of the max (bf16 rounding cannot exceed |max|); max at p % 128.
    Block v;
    for (int j = 0; j < kN; ++j) v[j] = BF16ToFloat(FloatToBF16(max * (j / 128.0f)));
    v[p % kN] = max;
    CheckBlock(GetParam(), v, worst);
    const float want_scale = std::fabs(max) / CodeMax(GetParam());
    EXPECT_EQ(Encode(GetParam(), v).scale, want_scale == 0.0f ? 1.0f : want_scale) << max;
    if (HasFatalFailure()) return;
  }
  worst.Print(GetParam());
}

TEST_P(BothCodecs, EveryBF16PatternBesideFixedLargerMaxMatchesReference) {
  // 0x7f7f is the largest finite bf16 (about 3.39e38).
  WorstError worst;
  for (const float max : {1.0f, 448.0f, BF16ToFloat(0x7f7f)}) {
    for (uint32_t p = 0; p < 65536; ++p) {
      const float v = BF16ToFloat(static_cast<uint16_t>(p));
      if (!(std::fabs(v) <= max)) continue;  // larger, inf and NaN: covered above
      Block b = Zeros();
      b[0] = max;
      b[1 + p % 120] = v;
      b[127] = -v;
      CheckBlock(GetParam(), b, worst);
      if (HasFatalFailure()) return;
    }
  }
  worst.Print(GetParam());
}

// ---------------------------------------------------------------------------------------------
// Exact values derived by hand.

TEST(Int8Codec, IntegersUpTo127HaveScaleOneAndRoundTripExactly) {
  // amax = 127, scale = 127 / 127 = 1.0 exactly; v / 1 = v, already an integer.
  Block v;
  for (int i = 0; i < 127; ++i) v[i] = static_cast<float>(i + 1);
  v[127] = -127.0f;
  const Encoded e = Encode(Codec::kInt8Block, v);
  EXPECT_EQ(e.scale, 1.0f);
  for (int i = 0; i < 127; ++i) EXPECT_EQ(e.q[i], i + 1);
  EXPECT_EQ(e.q[127], 0x81);  // -127 in two's complement
  EXPECT_EQ(Decode(Codec::kInt8Block, e), v);
}

TEST(Int8Codec, HalfwayValuesRoundToEven) {
  // amax = 254, scale = 2.0 exactly. v / 2: 1 -> 0.5 -> 0; 3 -> 1.5 -> 2; -1 -> -0.5 -> 0;
  // 5 -> 2.5 -> 2; 7 -> 3.5 -> 4; -3 -> -1.5 -> -2. Decode multiplies back by 2.
  Block v = Zeros();
  const float in[] = {254, 1, 3, -1, 5, 7, -3};
  const int8_t q[] = {127, 0, 2, 0, 2, 4, -2};
  const float out[] = {254, 0, 4, 0, 4, 8, -4};
  std::copy(std::begin(in), std::end(in), v.begin());
  const Encoded e = Encode(Codec::kInt8Block, v);
  EXPECT_EQ(e.scale, 2.0f);
  const Block d = Decode(Codec::kInt8Block, e);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(static_cast<int8_t>(e.q[i]), q[i]) << in[i];
    EXPECT_EQ(FloatBits(d[i]), FloatBits(out[i])) << in[i];  // -1 -> 0 decodes to +0
  }
}

TEST(Int8Codec, UnitMaxUsesRoundedScale) {
  // scale = fp32(1 / 127): 2^23 / 127 = 66052.03, so the mantissa is 0x010204 (rounded down),
  // exponent 2^-7: bits 0x3c010204, a little below 1/127.
  // 1.0 / scale = 127.0000005 -> fp32 127.0 -> q 127; 127 * scale = 1 - 2^-28 -> fp32 1.0.
  // 0.5 / scale = 63.50000023 -> fp32 63.5 (ulp 2^-18) -> tie -> 64 (even); 64 * scale is exact:
  // bits 0x3f010204 (0.503937...).
  Block v = Zeros();
  v[0] = 1.0f;
  v[1] = 0.5f;
  v[2] = -1.0f;
  const Encoded e = Encode(Codec::kInt8Block, v);
  EXPECT_EQ(FloatBits(e.scale), 0x3c010204u);
  EXPECT_EQ(static_cast<int8_t>(e.q[0]), 127);
  EXPECT_EQ(static_cast<int8_t>(e.q[1]), 64);
  EXPECT_EQ(static_cast<int8_t>(e.q[2]), -127);
  const Block d = Decode(Codec::kInt8Block, e);
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(FloatBits(d[1]), 0x3f010204u);
  EXPECT_EQ(d[2], -1.0f);
}

TEST(E4M3Codec, MaxOf448HasScaleOneAndRoundsToNearestEven) {
  // amax = 448, scale = 1.0. Codes: 1.0 = 2^0 -> exp 7 -> 0 0111 000 = 0x38. 17 lies halfway
  // between 16 (0x58, mantissa 000) and 18 (0x59) -> 16. 19 between 18 (0x59) and 20 (0x5a) ->
  // 20. 3 * 2^-10 between subnormals 2^-9 (0x01) and 2^-8 (0x02) -> 0x02. -2^-10 between -0 and
  // -2^-9 -> -0 (0x80). 448 = 2^8 * 1.75 -> 0 1111 110 = 0x7e. -448 = 0xfe.
  Block v = Zeros();
  const float in[] = {448, 1, 17, 19, 0x3p-10f, -0x1p-10f, -448};
  const uint8_t q[] = {0x7e, 0x38, 0x58, 0x5a, 0x02, 0x80, 0xfe};
  const float out[] = {448, 1, 16, 20, 0x1p-8f, -0.0f, -448};
  std::copy(std::begin(in), std::end(in), v.begin());
  const Encoded e = Encode(Codec::kE4M3Block, v);
  EXPECT_EQ(e.scale, 1.0f);
  const Block d = Decode(Codec::kE4M3Block, e);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(e.q[i], q[i]) << in[i];
    EXPECT_EQ(FloatBits(d[i]), FloatBits(out[i])) << in[i];
  }
}

TEST(E4M3Codec, UnitMaxUsesRoundedScale) {
  // scale = fp32(1 / 448) = fp32(1/7) * 2^-6; 2^26 / 7 = 9586980.57 -> 9586981 (rounded up):
  // mantissa 0x124925, exponent 2^-9, bits 0x3b124925, a little above 1/448.
  // 1.0 / scale = 447.99998 -> fp32 447.99997 -> nearest E4M3 448 (0x7e); 448 * scale =
  // 1 + 192 * 2^-32 -> fp32 1.0. 0.5 / scale -> 223.99998 -> 224 = 2^7 * 1.75 = 0 1110 110 =
  // 0x76; 224 * scale = 0.5 + 96 * 2^-32 -> fp32 0.5.
  Block v = Zeros();
  v[0] = 1.0f;
  v[1] = 0.5f;
  v[2] = -1.0f;
  const Encoded e = Encode(Codec::kE4M3Block, v);
  EXPECT_EQ(FloatBits(e.scale), 0x3b124925u);
  EXPECT_EQ(e.q[0], 0x7e);
  EXPECT_EQ(e.q[1], 0x76);
  EXPECT_EQ(e.q[2], 0xfe);
  const Block d = Decode(Codec::kE4M3Block, e);
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], 0.5f);
  EXPECT_EQ(d[2], -1.0f);
}

TEST(E4M3Codec, FloatToE4M3HandValues) {
  EXPECT_EQ(FloatToE4M3(1.0f), 0x38);
  EXPECT_EQ(FloatToE4M3(432.0f), 0x7e);     // halfway 416 (0x7d) / 448 (0x7e): even
  EXPECT_EQ(FloatToE4M3(464.0f), 0x7e);     // would round to 480 unbounded: saturates
  EXPECT_EQ(FloatToE4M3(1e30f), 0x7e);      // saturates
  EXPECT_EQ(FloatToE4M3(-1e30f), 0xfe);     // saturates
  EXPECT_EQ(FloatToE4M3(0x7.8p-9f), 0x08);  // 7.5 * 2^-9: halfway 0x07 / 0x08 (2^-6): even
  EXPECT_EQ(FloatToE4M3(0x1.1p-6f), 0x08);  // 2^-6 * 17/16: halfway 0x08 / 0x09: even
  EXPECT_EQ(FloatToE4M3(0x1p-10f), 0x00);   // halfway 0 / 2^-9: even
  EXPECT_EQ(FloatToE4M3(0x1.000002p-10f), 0x01);
  EXPECT_EQ(FloatToE4M3(0x1p-149f), 0x00);  // fp32 subnormal
  EXPECT_EQ(FloatToE4M3(-0.0f), 0x80);
  EXPECT_EQ(FloatToE4M3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(FloatToE4M3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToE4M3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(FloatToE4M3(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(E4M3Codec, EveryCodeDecodesToItsDefinition) {
  for (int c = 0; c < 256; ++c) {
    const double want = RefE4M3Value(static_cast<uint8_t>(c));
    const float got = E4M3ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_EQ(FloatBits(got), kNaNBits) << c;
    } else {
      EXPECT_EQ(FloatBits(got), FloatBits(static_cast<float>(want))) << c;
    }
  }
}

TEST(E4M3Codec, EveryFiniteCodeReencodesToItself) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(FloatToE4M3(E4M3ToFloat(static_cast<uint8_t>(c))), c);
  }
  // Through blocks: codes 0x00..0x7e and their negatives; +-448 present, so the scale is 1.
  for (int half = 0; half < 2; ++half) {
    Block v = Zeros();
    for (int i = 0; i < 127; ++i) {
      v[i] = E4M3ToFloat(static_cast<uint8_t>(i | (half ? 0x80 : 0)));
    }
    const Encoded e = Encode(Codec::kE4M3Block, v);
    EXPECT_EQ(e.scale, 1.0f);
    for (int i = 0; i < 127; ++i) EXPECT_EQ(e.q[i], i | (half ? 0x80 : 0));
  }
}

TEST(E4M3Codec, FloatToE4M3MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(20240611);
  for (int n = 0; n < 200000; ++n) {
    // Exponents around the E4M3 range, all mantissas.
    const uint32_t bits = (rng() & 0x807fffffu) | ((100u + rng() % 45u) << 23);
    const float x = BitsToFloat(bits);
    ASSERT_EQ(FloatToE4M3(x), RefFloatToE4M3(x)) << x;
  }
}

// ---------------------------------------------------------------------------------------------
// Zeros and non-finite values.

TEST_P(BothCodecs, AllZeroBlockHasScaleOne) {
  Block v = Zeros();
  for (int i = 0; i < kN; i += 2) v[i] = -0.0f;
  const Encoded e = Encode(GetParam(), v);
  EXPECT_EQ(e.scale, 1.0f);
  const Block d = Decode(GetParam(), e);
  for (int i = 0; i < kN; ++i) {
    // INT8 has one zero (+0); E4M3 keeps the sign of zero (0x80 is -0).
    const bool negative = GetParam() == Codec::kE4M3Block && i % 2 == 0;
    EXPECT_EQ(e.q[i], negative ? 0x80 : 0x00) << i;
    EXPECT_EQ(FloatBits(d[i]), negative ? 0x80000000u : 0u) << i;
  }
}

TEST_P(BothCodecs, UnderflowingScaleBecomesOneAndFlushesTheBlockToZero) {
  // amax = 2^-149: amax / 127 and amax / 448 are below 2^-150 and round to 0, so scale = 1.
  Block v = Zeros();
  v[5] = 0x1p-149f;
  v[6] = -0x1p-149f;
  const Encoded e = Encode(GetParam(), v);
  EXPECT_EQ(e.scale, 1.0f);
  const Block d = Decode(GetParam(), e);
  EXPECT_EQ(d[5], 0.0f);
  EXPECT_EQ(d[6], 0.0f);
}

TEST_P(BothCodecs, NonFiniteValuePoisonsTheWholeBlock) {
  const uint8_t poison = GetParam() == Codec::kInt8Block ? 0x80 : 0x7f;
  const float kInf = std::numeric_limits<float>::infinity();
  for (const float bad : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(), BitsToFloat(0x7f800001u)}) {
    Block v;
    for (int i = 0; i < kN; ++i) v[i] = static_cast<float>(i) - 64.0f;
    v[77] = bad;
    const Encoded e = Encode(GetParam(), v);
    EXPECT_EQ(FloatBits(e.scale), kNaNBits) << bad;
    for (int i = 0; i < kN; ++i) EXPECT_EQ(e.q[i], poison) << bad;
    for (float d : Decode(GetParam(), e)) EXPECT_EQ(FloatBits(d), kNaNBits) << bad;
  }
}

TEST(E4M3Codec, DecodedNaNCodeIsCanonical) {
  Encoded e;
  e.q.fill(0x38);  // 1.0
  e.q[3] = 0xff;   // -NaN
  e.scale = 2.0f;
  const Block d = Decode(Codec::kE4M3Block, e);
  EXPECT_EQ(d[0], 2.0f);
  EXPECT_EQ(FloatBits(d[3]), kNaNBits);
}

TEST_P(BothCodecs, EveryDecodedNaNIsCanonical) {
  // Not written by EncodeBlock, but decoding must not depend on the device's NaN arithmetic:
  // x86 keeps a NaN operand's payload and makes 0 * inf the negative NaN 0xffc00000, CUDA gives
  // 0x7fffffff.
  Encoded e;
  e.q.fill(0);
  for (const uint32_t scale_bits : {0xffc12345u, 0x7f800001u, 0x7f800000u}) {
    e.scale = BitsToFloat(scale_bits);
    for (float d : Decode(GetParam(), e)) EXPECT_EQ(FloatBits(d), kNaNBits) << scale_bits;
  }
}

// ---------------------------------------------------------------------------------------------
// Segment layout and ReduceHost.

TEST(CodecLayout, BlocksTake132Bytes) {
  EXPECT_EQ(EncodedBytes(Codec::kInt8Block, DType::kBF16, 128), 132u);
  EXPECT_EQ(EncodedBytes(Codec::kE4M3Block, DType::kBF16, 1024), 1056u);  // 8 * 132
  // The founding tensor: 16,803,840 / 128 = 131,280 blocks; 16,803,840 + 4 * 131,280.
  EXPECT_EQ(EncodedBytes(Codec::kInt8Block, DType::kBF16, 16803840), 17328960u);
}

TEST(CodecLayout, ValuesThenLittleEndianScales) {
  // Block 0: amax 127 -> scale 1.0 = 0x3f800000; block 1: amax 254 -> scale 2.0 = 0x40000000.
  std::vector<uint16_t> in(256, 0);
  in[0] = FloatToBF16(127.0f);
  in[128] = FloatToBF16(-254.0f);
  in[129] = FloatToBF16(2.0f);
  std::vector<uint8_t> out(EncodedBytes(Codec::kInt8Block, DType::kBF16, 256));
  const HostOperand term{reinterpret_cast<const uint8_t*>(in.data()), Codec::kPlain};
  ASSERT_TRUE(ReduceHost(DType::kBF16, out.data(), Codec::kInt8Block, {term}, 256).ok());
  EXPECT_EQ(out[0], 127);
  EXPECT_EQ(out[128], 0x81);  // -127
  EXPECT_EQ(out[129], 1);
  const std::vector<uint8_t> scales(out.begin() + 256, out.end());
  EXPECT_EQ(scales, (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40}));
}

// An operand of the ReduceHost tests, owning its bytes.
struct TestOperand {
  Codec codec;
  std::vector<uint8_t> bytes;
  HostOperand host() const { return {bytes.data(), codec}; }
};

// Random bf16 values whose magnitude varies block to block, so blocks get different scales;
// stored plainly or encoded with the reference codec.
TestOperand RandomOperand(std::mt19937& rng, Codec codec, int64_t elems) {
  std::normal_distribution<float> normal;
  std::vector<float> v(elems);
  float magnitude = 1.0f;
  for (int64_t i = 0; i < elems; ++i) {
    if (i % kN == 0) magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
    v[i] = BF16ToFloat(FloatToBF16(normal(rng) * magnitude));
  }
  TestOperand op{codec, std::vector<uint8_t>(EncodedBytes(codec, DType::kBF16, elems))};
  for (int64_t b = 0; b < elems / kN && codec != Codec::kPlain; ++b) {
    const Encoded e = RefEncode(codec, &v[b * kN]);
    std::memcpy(&op.bytes[b * kN], e.q.data(), kN);
    std::memcpy(&op.bytes[elems + 4 * b], &e.scale, 4);
  }
  for (int64_t i = 0; i < elems && codec == Codec::kPlain; ++i) {
    StoreFromFloat(DType::kBF16, op.bytes.data(), i, v[i]);
  }
  return op;
}

// Straightforward ReduceHost: decode each element of each term, add left to right, encode.
std::vector<uint8_t> RefReduce(Codec dst_codec, const std::vector<TestOperand>& terms,
                               int64_t elems) {
  std::vector<float> sum(elems);
  for (int64_t i = 0; i < elems; ++i) {
    for (size_t t = 0; t < terms.size(); ++t) {
      const TestOperand& op = terms[t];
      float x;
      if (op.codec == Codec::kPlain) {
        x = LoadAsFloat(DType::kBF16, op.bytes.data(), i);
      } else {
        float scale;
        std::memcpy(&scale, &op.bytes[elems + 4 * (i / kN)], 4);
        x = RefDecodeOne(op.codec, op.bytes[i], scale);
      }
      sum[i] = t == 0 ? x : sum[i] + x;
    }
  }
  std::vector<uint8_t> out(EncodedBytes(dst_codec, DType::kBF16, elems));
  for (int64_t b = 0; b < elems / kN && dst_codec != Codec::kPlain; ++b) {
    const Encoded e = RefEncode(dst_codec, &sum[b * kN]);
    std::memcpy(&out[b * kN], e.q.data(), kN);
    std::memcpy(&out[elems + 4 * b], &e.scale, 4);
  }
  for (int64_t i = 0; i < elems && dst_codec == Codec::kPlain; ++i) {
    StoreFromFloat(DType::kBF16, out.data(), i, sum[i]);
  }
  return out;
}

struct ReduceCase {
  Codec dst;
  std::vector<Codec> terms;
  bool dst_aliases_term0;
};

TEST(ReduceHostBlocks, MatchesStraightforwardReference) {
  constexpr Codec P = Codec::kPlain, I = Codec::kInt8Block, E = Codec::kE4M3Block;
  const ReduceCase cases[] = {
      {I, {P}, false},        // quantize
      {P, {E}, false},        // dequantize
      {I, {I, P}, false},     // ring hop: dequantize + add + quantize
      {E, {E, P}, false},     // ring hop
      {E, {E, P}, true},      // ring hop in place
      {P, {I, P}, false},     // last ring hop writes bf16
      {P, {P, I, E}, false},  // mixed terms
      {I, {I, I, I}, true},   // in place, several block terms
      {P, {P, P}, true},      // plain in place
  };
  constexpr int64_t kElems = 128 * 37;
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    for (const ReduceCase& c : cases) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " dst " << CodecName(c.dst) << " terms "
                                      << c.terms.size() << " alias " << c.dst_aliases_term0);
      std::mt19937 rng(seed);
      std::vector<TestOperand> terms;
      for (Codec t : c.terms) terms.push_back(RandomOperand(rng, t, kElems));
      const std::vector<uint8_t> want = RefReduce(c.dst, terms, kElems);
      std::vector<HostOperand> host;
      for (const TestOperand& t : terms) host.push_back(t.host());
      std::vector<uint8_t> separate(EncodedBytes(c.dst, DType::kBF16, kElems));
      uint8_t* dst = c.dst_aliases_term0 ? terms[0].bytes.data() : separate.data();
      ASSERT_TRUE(ReduceHost(DType::kBF16, dst, c.dst, host, kElems).ok());
      EXPECT_EQ(c.dst_aliases_term0 ? terms[0].bytes : separate, want);
    }
  }
}

TEST(ReduceHostBlocks, OverflowingSumPoisonsItsBlockOnly) {
  // 0x7f7f + 0x7f7f (about 3.39e38 each) overflows fp32 to +inf in block 1 only.
  std::vector<uint16_t> a(256, FloatToBF16(1.0f)), b(256, FloatToBF16(1.0f));
  a[200] = b[200] = 0x7f7f;
  std::vector<uint8_t> out(EncodedBytes(Codec::kE4M3Block, DType::kBF16, 256));
  const HostOperand terms[] = {{reinterpret_cast<const uint8_t*>(a.data()), Codec::kPlain},
                               {reinterpret_cast<const uint8_t*>(b.data()), Codec::kPlain}};
  ASSERT_TRUE(ReduceHost(DType::kBF16, out.data(), Codec::kE4M3Block, terms, 256).ok());
  EXPECT_EQ(LoadBlockScale(out.data(), 256, 0), 2.0f / 448.0f);
  EXPECT_EQ(FloatBits(LoadBlockScale(out.data(), 256, 1)), kNaNBits);
  EXPECT_EQ(out[0], 0x7e);    // 2.0 is the block max: 448
  EXPECT_EQ(out[128], 0x7f);  // poisoned
}

TEST(ReduceHostPlain, MatchesElementwiseReferenceForEveryDtypeWithTail) {
  constexpr int64_t kElems = 1000;  // not a multiple of 128: the last chunk is partial
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<std::vector<uint8_t>> terms(3, std::vector<uint8_t>(kElems * DTypeBytes(dtype)));
    for (auto& t : terms) {
      for (int64_t i = 0; i < kElems; ++i) StoreFromFloat(dtype, t.data(), i, normal(rng) * 100);
    }
    std::vector<uint8_t> want(kElems * DTypeBytes(dtype));
    for (int64_t i = 0; i < kElems; ++i) {
      float acc = LoadAsFloat(dtype, terms[0].data(), i);
      acc = acc + LoadAsFloat(dtype, terms[1].data(), i);
      acc = acc + LoadAsFloat(dtype, terms[2].data(), i);
      StoreFromFloat(dtype, want.data(), i, acc);
    }
    const HostOperand host[] = {{terms[0].data(), Codec::kPlain},
                                {terms[1].data(), Codec::kPlain},
                                {terms[2].data(), Codec::kPlain}};
    std::vector<uint8_t> got(want.size());
    ASSERT_TRUE(ReduceHost(dtype, got.data(), Codec::kPlain, host, kElems).ok());
    EXPECT_EQ(got, want);
    ASSERT_TRUE(ReduceHost(dtype, terms[0].data(), Codec::kPlain, host, kElems).ok());
    EXPECT_EQ(terms[0], want);  // in place
  }
}

TEST(ReduceHostBlocks, RejectsWhatBlockCodecsCannotDo) {
  std::vector<uint8_t> buf(4096);
  const HostOperand plain{buf.data() + 2048, Codec::kPlain};
  const HostOperand int8{buf.data() + 2048, Codec::kInt8Block};
  // Block codecs need bf16.
  EXPECT_EQ(ReduceHost(DType::kFP16, buf.data(), Codec::kInt8Block, {plain}, 128).code(),
            absl::StatusCode::kInvalidArgument);
  // Block codecs need elems divisible by 128.
  EXPECT_EQ(ReduceHost(DType::kBF16, buf.data(), Codec::kPlain, {int8}, 100).code(),
            absl::StatusCode::kInvalidArgument);
  // An aliased term must share dst's layout.
  const HostOperand aliased{buf.data(), Codec::kInt8Block};
  EXPECT_EQ(ReduceHost(DType::kBF16, buf.data(), Codec::kPlain, {aliased}, 128).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReduceHost(DType::kBF16, buf.data(), Codec::kPlain, {}, 128).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidateReduceTest, ATermAtDstsAddressWithAnotherCodecIsRefusedAtEnqueue) {
  const MemRef dst{1, 0x1000, EncodedBytes(Codec::kPlain, DType::kBF16, 128), 0};
  const MemRef coded{1, 0x1000, EncodedBytes(Codec::kInt8Block, DType::kBF16, 128), 0};
  const Operand plain_dst{dst, Codec::kPlain};
  EXPECT_EQ(
      ValidateReduce(DType::kBF16, plain_dst, {Operand{coded, Codec::kInt8Block}}, 128).message(),
      "reduce: terms[0] aliases dst with codec int8-block, dst has codec plain; an aliased "
      "term must have dst's codec");
  // In place with one layout, and the same address on another rank, are fine.
  EXPECT_TRUE(ValidateReduce(DType::kBF16, plain_dst, {plain_dst, plain_dst}, 128).ok());
  const MemRef other_rank{2, 0x1000, coded.bytes, 0};
  EXPECT_TRUE(
      ValidateReduce(DType::kBF16, plain_dst, {Operand{other_rank, Codec::kInt8Block}}, 128).ok());
}

}  // namespace
}  // namespace dmalab
