// The block codec arithmetic of the GPU (hw/codec_math.h, and the lane steps of
// hw/codec_reduce.h), compiled for the host, against the host reference codecs
// (common/core/codec.cc), bit for bit. Runs without a GPU.
#include "hw/codec_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/core/codec.h"
#include "common/core/dtype.h"
#include "gtest/gtest.h"
#include "hw/codec_reduce.h"

namespace dmalab {
namespace {

namespace cm = codec_math;
namespace cr = codec_reduce;

using Block = std::vector<float>;  // kCodecBlockElems values

constexpr Codec kBlockCodecs[] = {Codec::kInt8Block, Codec::kE4M3Block};

kernels::OperandCodec OperandCodecOf(Codec codec) {
  return codec == Codec::kInt8Block ? kernels::OperandCodec::kInt8Block
                                    : kernels::OperandCodec::kE4M3Block;
}

// EncodeBlock by the kernel's lane steps: 32 lanes' amax, reduced, then each lane's codes.
void EncodeBlockByLanes(Codec codec, const float* v, uint8_t* q, float* scale) {
  uint32_t amax = 0;
  for (int lane = 0; lane < cr::kLanes; ++lane) {
    amax = cm::MaxBits(amax, cr::LaneAmaxBits(v + lane * cr::kValuesPerLane));
  }
  for (int lane = 0; lane < cr::kLanes; ++lane) {
    const cr::LaneCodes out =
        cr::EncodeLaneCodes(OperandCodecOf(codec), v + lane * cr::kValuesPerLane, amax);
    std::memcpy(q + lane * cr::kValuesPerLane, &out.codes, 4);
    // Every lane computes the scale; all must agree.
    if (lane > 0) {
      ASSERT_EQ(FloatBits(out.scale), FloatBits(*scale)) << "lane " << lane;
    }
    *scale = out.scale;
  }
}

void DecodeBlockByLanes(Codec codec, const uint8_t* q, float scale, float* out) {
  for (int lane = 0; lane < cr::kLanes; ++lane) {
    cr::LaneCodes in;
    std::memcpy(&in.codes, q + lane * cr::kValuesPerLane, 4);
    in.scale = scale;
    cr::DecodeLaneCodes(OperandCodecOf(codec), in, out + lane * cr::kValuesPerLane);
  }
}

std::string Describe(const Block& v) {
  std::string s;
  for (float x : v) s += absl::StrFormat("%08x ", FloatBits(x));
  return s;
}

// Encodes `v` both ways and compares codes and scale bits, then decodes the codes both ways.
void ExpectBlockMatchesHost(Codec codec, const Block& v) {
  ASSERT_EQ(v.size(), static_cast<size_t>(kCodecBlockElems));
  uint8_t want_q[kCodecBlockElems], got_q[kCodecBlockElems];
  float want_scale = 0, got_scale = 0;
  EncodeBlock(codec, v.data(), want_q, &want_scale);
  EncodeBlockByLanes(codec, v.data(), got_q, &got_scale);
  ASSERT_EQ(FloatBits(got_scale), FloatBits(want_scale)) << CodecName(codec) << ": " << Describe(v);
  ASSERT_EQ(std::memcmp(got_q, want_q, kCodecBlockElems), 0)
      << CodecName(codec) << ": " << Describe(v);
  float want_out[kCodecBlockElems], got_out[kCodecBlockElems];
  DecodeBlock(codec, want_q, want_scale, want_out);
  DecodeBlockByLanes(codec, want_q, want_scale, got_out);
  ASSERT_EQ(std::memcmp(got_out, want_out, sizeof(want_out)), 0)
      << CodecName(codec) << ": " << Describe(v);
}

// Patterns that probe FloatToE4M3's rounding: around every tie and code boundary of the normal
// range (the 20 dropped mantissa bits at and next to 0, the tie and all ones), the subnormal
// grid's multiples of 2^-10 and their neighbours, and a stride through all 2^32 patterns.
std::vector<uint32_t> E4M3ProbePatterns() {
  std::vector<uint32_t> patterns;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (uint32_t top = 0; top < 8; ++top) {
        for (uint32_t low : {0x0u, 0x1u, 0x7ffffu, 0x80000u, 0x80001u, 0xfffffu}) {
          patterns.push_back(sign | (exp << 23) | (top << 20) | low);
        }
      }
    }
    for (int k = 0; k <= 40; ++k) {
      const uint32_t u = FloatBits(std::ldexp(static_cast<float>(k), -10));
      for (uint32_t d : {u - 1, u, u + 1}) patterns.push_back(sign | (d & 0x7fffffffu));
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 997) patterns.push_back(static_cast<uint32_t>(u));
  return patterns;
}

TEST(CodecMathTest, E4M3ToFloatEqualsHostForEveryByte) {
  for (int q = 0; q < 256; ++q) {
    ASSERT_EQ(FloatBits(cm::E4M3ToFloat(static_cast<uint8_t>(q))),
              FloatBits(E4M3ToFloat(static_cast<uint8_t>(q))))
        << std::hex << q;
  }
}

TEST(CodecMathTest, FloatToE4M3EqualsHostAroundEveryTieAndOnAStrideOfAllPatterns) {
  for (uint32_t u : E4M3ProbePatterns()) {
    ASSERT_EQ(cm::FloatToE4M3(BitsToFloat(u)), FloatToE4M3(BitsToFloat(u))) << std::hex << u;
  }
}

TEST(CodecMathTest, FloatToE4M3RoundTripsEveryCode) {
  for (int q = 0; q < 256; ++q) {
    if ((q & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(cm::FloatToE4M3(cm::E4M3ToFloat(static_cast<uint8_t>(q))), q) << std::hex << q;
  }
}

// Random bf16 values with magnitude bits in [0, max_abs], random sign.
uint16_t RandomBF16Below(std::mt19937_64& rng, uint16_t max_abs) {
  const uint16_t abs = static_cast<uint16_t>(rng() % (static_cast<uint64_t>(max_abs) + 1));
  return static_cast<uint16_t>(abs | ((rng() & 1) << 15));
}

TEST(CodecMathTest, EveryBF16PatternAsBlockMaxEncodesAndDecodesAsHost) {
  std::mt19937_64 rng(1);
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t max_abs = static_cast<uint16_t>(h & 0x7fff);
    Block v(kCodecBlockElems);
    for (float& x : v) x = BF16ToFloat(RandomBF16Below(rng, max_abs));
    v[h % kCodecBlockElems] = BF16ToFloat(static_cast<uint16_t>(h));
    for (Codec codec : kBlockCodecs) ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
  }
}

TEST(CodecMathTest, EveryBF16PatternAsOrdinaryValueEncodesAndDecodesAsHost) {
  // Block maxima: ordinary, scale exactly 1 (127, 448), largest bf16, smallest normal, and
  // subnormal ones where the scale is subnormal or the division underflows to 0 (scale 1).
  const uint16_t maxima[] = {0x3f80, 0x42fe, 0x43e0, 0x7f7f, 0x4049, 0x0080,
                             0x0400, 0x0040, 0x0001, 0x3c00, 0x1234, 0x6543};
  for (uint16_t amax : maxima) {
    std::vector<uint16_t> values;
    for (uint32_t h = 0; h <= 0xffff; ++h) {
      if ((h & 0x7fff) <= amax) values.push_back(static_cast<uint16_t>(h));
    }
    for (size_t first = 0; first < values.size(); first += kCodecBlockElems - 1) {
      Block v(kCodecBlockElems, BF16ToFloat(amax));
      for (size_t i = first; i < values.size() && i < first + kCodecBlockElems - 1; ++i) {
        v[i - first + 1] = BF16ToFloat(values[i]);
      }
      for (Codec codec : kBlockCodecs) ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
    }
  }
  // And all 65536 patterns in order, 128 to a block, whatever their maximum.
  for (uint32_t first = 0; first <= 0xffff; first += kCodecBlockElems) {
    Block v(kCodecBlockElems);
    for (int i = 0; i < kCodecBlockElems; ++i) {
      v[i] = BF16ToFloat(static_cast<uint16_t>(first + i));
    }
    for (Codec codec : kBlockCodecs) ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
  }
}

// fp32 sums (not only bf16) at the rounding ties of both codecs: with amax = 127 * 2^e (INT8)
// or 448 * 2^e (E4M3) the scale is 2^e, and the values are the code midpoints times 2^e and
// their fp32 neighbours.
TEST(CodecMathTest, Fp32TiesRoundAsHost) {
  for (int e : {-140, -130, -126, -20, -1, 0, 1, 7, 60, 100}) {
    for (Codec codec : kBlockCodecs) {
      const bool int8 = codec == Codec::kInt8Block;
      std::vector<float> probes;
      for (int q = 0; q < (int8 ? 128 : 0x7e); ++q) {
        float lo, hi;
        if (int8) {
          lo = static_cast<float>(q);
          hi = lo + 1;
        } else {
          lo = E4M3ToFloat(static_cast<uint8_t>(q));
          hi = E4M3ToFloat(static_cast<uint8_t>(q + 1));
        }
        const float mid = std::ldexp((lo + hi) / 2, e);
        for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
          probes.push_back(x);
          probes.push_back(-x);
        }
      }
      const float amax = std::ldexp(int8 ? 127.0f : 448.0f, e);
      for (size_t first = 0; first < probes.size(); first += kCodecBlockElems - 1) {
        Block v(kCodecBlockElems, amax);
        for (size_t i = first; i < probes.size() && i < first + kCodecBlockElems - 1; ++i) {
          v[i - first + 1] = std::fabs(probes[i]) <= amax ? probes[i] : amax;
        }
        ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
      }
    }
  }
}

TEST(CodecMathTest, RandomFp32BlocksOfEveryMagnitudeEncodeAndDecodeAsHost) {
  std::mt19937_64 rng(2);
  for (int n = 0; n < 20'000; ++n) {
    // A random exponent window, so that blocks span subnormal, ordinary and huge magnitudes.
    const uint32_t top = static_cast<uint32_t>(rng() % 255);
    const uint32_t width = static_cast<uint32_t>(rng() % 30);
    Block v(kCodecBlockElems);
    for (float& x : v) {
      const uint32_t exp = top >= width ? top - static_cast<uint32_t>(rng() % (width + 1)) : top;
      const uint32_t bits = static_cast<uint32_t>(((rng() & 1) << 31) | (exp << 23)) |
                            static_cast<uint32_t>(rng() & 0x7fffffu);
      x = BitsToFloat(bits);
    }
    for (Codec codec : kBlockCodecs) ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
  }
}

TEST(CodecMathTest, NonFiniteBlocksArePoisonedAsHost) {
  std::mt19937_64 rng(3);
  const uint32_t non_finite[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                 0x7f800001u, 0xffabcdefu, 0x7fffffffu};
  for (uint32_t bad : non_finite) {
    for (int pos : {0, 1, 3, 4, 31, 64, 127}) {
      Block v(kCodecBlockElems);
      for (float& x : v) x = BF16ToFloat(static_cast<uint16_t>(rng()) & 0x7f7f);
      v[pos] = BitsToFloat(bad);
      for (Codec codec : kBlockCodecs) {
        ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
        uint8_t q[kCodecBlockElems];
        float scale;
        EncodeBlockByLanes(codec, v.data(), q, &scale);
        EXPECT_EQ(FloatBits(scale), 0x7fc00000u);
        for (uint8_t b : q) ASSERT_EQ(b, codec == Codec::kInt8Block ? 0x80 : 0x7f);
        float out[kCodecBlockElems];
        DecodeBlockByLanes(codec, q, scale, out);
        for (float x : out) ASSERT_EQ(FloatBits(x), 0x7fc00000u);
      }
    }
  }
}

TEST(CodecMathTest, AllZeroBlocksHaveScaleOneAndKeepTheSignOnlyInE4M3) {
  std::mt19937_64 rng(4);
  for (int pattern = 0; pattern < 3; ++pattern) {
    Block v(kCodecBlockElems);
    for (float& x : v) x = pattern == 0 ? 0.0f : pattern == 1 ? -0.0f : (rng() & 1 ? -0.0f : 0.0f);
    for (Codec codec : kBlockCodecs) {
      ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(codec, v));
      uint8_t q[kCodecBlockElems];
      float scale;
      EncodeBlockByLanes(codec, v.data(), q, &scale);
      EXPECT_EQ(scale, 1.0f);
      for (int i = 0; i < kCodecBlockElems; ++i) {
        const bool negative = std::signbit(v[i]);
        ASSERT_EQ(q[i], codec == Codec::kE4M3Block && negative ? 0x80 : 0x00);
      }
    }
  }
}

// Every byte with scales that are ordinary, subnormal, huge (products overflow), zero and NaN,
// and random scale bit patterns.
TEST(CodecMathTest, EveryCodeDecodesAsHostWithEveryKindOfScale) {
  std::vector<uint32_t> scales = {0x3f800000u, 0x00000001u, 0x00400000u, 0x007fffffu,
                                  0x7f7fffffu, 0x7e000000u, 0x00000000u, 0x80000000u,
                                  0x7fc00000u, 0x7f800000u, 0xbf800000u, 0x3c010204u};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000; ++i) scales.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t s : scales) {
    for (int half = 0; half < 2; ++half) {
      uint8_t q[kCodecBlockElems];
      for (int i = 0; i < kCodecBlockElems; ++i) q[i] = static_cast<uint8_t>(half * 128 + i);
      for (Codec codec : kBlockCodecs) {
        float want[kCodecBlockElems], got[kCodecBlockElems];
        DecodeBlock(codec, q, BitsToFloat(s), want);
        DecodeBlockByLanes(codec, q, BitsToFloat(s), got);
        ASSERT_EQ(std::memcmp(got, want, sizeof(want)), 0)
            << CodecName(codec) << " scale " << std::hex << s;
      }
    }
  }
}

TEST(CodecMathTest, Int8ValuesQuantizeToTheirOwnCodeWithScaleOne) {
  // amax 127 gives scale 1 exactly; every integer in [-127, 127] is its own code.
  Block v(kCodecBlockElems, 127.0f);
  for (int k = -127; k <= 127; ++k) {
    v[1 + (k + 127) % (kCodecBlockElems - 1)] = static_cast<float>(k);
    if ((k + 127) % (kCodecBlockElems - 1) == kCodecBlockElems - 2 || k == 127) {
      ASSERT_NO_FATAL_FAILURE(ExpectBlockMatchesHost(Codec::kInt8Block, v));
    }
  }
  EXPECT_EQ(cm::QuantizeInt8(-127.0f, 1.0f), 0x81);
  EXPECT_EQ(cm::QuantizeInt8(2.5f, 1.0f), 2);
  EXPECT_EQ(cm::QuantizeInt8(-2.5f, 1.0f), 0xfe);
  EXPECT_EQ(cm::QuantizeInt8(3.5f, 1.0f), 4);
  EXPECT_EQ(cm::QuantizeInt8(200.0f, 1.0f), 127);
  EXPECT_EQ(cm::QuantizeInt8(-200.0f, 1.0f), 0x81);
}

}  // namespace
}  // namespace dmalab
