// Compressed wire modes on the simulator: every rank ends bit-identical, the error against an
// fp64 reference stays within each mode's bound, and the bytes on the wire match the formula.
#include <cmath>
#include <random>

#include "absl/strings/str_format.h"
#include "common/core/dtype.h"
#include "common/core/result_checks.h"
#include "common/ring/dma_all_reduce.h"
#include "common/ring/ring_planner.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

struct WireCase {
  int world;
  WireMode wire;
};

void PrintTo(const WireCase& c, std::ostream* os) {
  *os << "W" << c.world << "_" << WireModeName(c.wire);
}

// Documented bounds on the relative L2 error against the exact (fp64) sum, for inputs uniform
// in [-1, 1]: bf16 payloads round once per hop (2^-9 relative each); a block codec adds about
// scale/2 per value per quantization, scale = amax/127 (INT8) or amax/448 with a 3-bit mantissa
// (E4M3), and the _ring modes quantize about 2(W-1) times.
double Bound(WireMode m, int world) {
  switch (m) {
    case WireMode::kNative:
      return 0.004;
    case WireMode::kI8:
    case WireMode::kI8A2A:
      return 0.012;
    case WireMode::kI8Ring:
      return 0.006 * world;
    case WireMode::kE4M3:
    case WireMode::kE4M3A2A:
      return 0.06;
    case WireMode::kE4M3Ring:
      return 0.03 * world;
  }
  return 0;
}

class WireModeTest : public ::testing::TestWithParam<WireCase> {};

TEST_P(WireModeTest, RanksAreBitIdenticalErrorIsBoundedAndWireBytesMatch) {
  const WireCase c = GetParam();
  const int64_t n = int64_t{c.world} * 128 * 2048;  // 2048 blocks per shard: 2 real pieces
  SimDevice dev(c.world, 1);
  DmaAllReduceOptions o;
  o.max_bytes = n * 2;
  o.wire = c.wire;
  auto ar = *DmaAllReduce::Create(&dev, o);
  std::mt19937_64 rng(7);
  std::vector<std::vector<float>> values(c.world, std::vector<float>(n));
  std::vector<TensorView> inputs;
  for (int r = 0; r < c.world; ++r) {
    std::vector<uint8_t> bytes(n * 2);
    for (int64_t i = 0; i < n; ++i) {
      const float x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1p-52 * 2 - 1);
      StoreFromFloat(DType::kBF16, bytes.data(), i, x);
      values[r][i] = LoadAsFloat(DType::kBF16, bytes.data(), i);
    }
    MemRef m = *dev.Allocate(r, n * 2, "input");
    ASSERT_TRUE(dev.Write(m, bytes).ok());
    inputs.push_back(TensorView{m, DType::kBF16, {n}, true});
  }
  absl::StatusOr<std::vector<TensorView>> outs = ar->AllReduce(inputs);
  ASSERT_TRUE(outs.ok()) << outs.status();
  absl::StatusOr<std::vector<int>> differing = RanksDifferingFromRank0(dev, *outs);
  ASSERT_TRUE(differing.ok());
  EXPECT_TRUE(differing->empty());
  EXPECT_TRUE(dev.findings().empty()) << dev.findings().ToString();

  std::vector<uint8_t> got(n * 2);
  ASSERT_TRUE(dev.Read((*outs)[0].mem.Slice(0, n * 2), absl::MakeSpan(got)).ok());
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    double exact = 0;
    for (int r = 0; r < c.world; ++r) exact += values[r][i];
    const double d = LoadAsFloat(DType::kBF16, got.data(), i) - exact;
    err2 += d * d;
    ref2 += exact * exact;
  }
  const double rel = std::sqrt(err2 / ref2);
  RecordProperty("relative_l2_error", absl::StrFormat("%.6f", rel));
  std::printf("wire=%s world=%d relative L2 error %.6f (bound %.3f)\n",
              std::string(WireModeName(c.wire)).c_str(), c.world, rel, Bound(c.wire, c.world));
  EXPECT_LT(rel, Bound(c.wire, c.world));

  // Bytes each rank writes to peers: 2(W-1) chunk payloads, bf16 or 132 bytes per 128 values.
  const absl::StatusOr<RingPlan> plan = ar->PlanFor(inputs[0]);
  const uint64_t chunk_elems = n / c.world;
  const uint64_t plain = chunk_elems * 2, encoded = chunk_elems / 128 * 132;
  uint64_t expect = 0;
  switch (c.wire) {
    case WireMode::kNative:
      expect = 2 * (c.world - 1) * plain;
      break;
    case WireMode::kI8:
    case WireMode::kE4M3:
      expect = (c.world - 1) * (plain + encoded);
      break;
    default:
      expect = 2 * (c.world - 1) * encoded;
      break;
  }
  for (uint64_t sent : plan->wire_bytes_sent) EXPECT_EQ(sent, expect);
}

std::vector<WireCase> WireCases() {
  std::vector<WireCase> cases;
  for (int w : {2, 3, 4, 8}) {
    for (WireMode m : {WireMode::kNative, WireMode::kI8, WireMode::kI8Ring, WireMode::kI8A2A,
                       WireMode::kE4M3, WireMode::kE4M3Ring, WireMode::kE4M3A2A}) {
      cases.push_back({w, m});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllModes, WireModeTest, ::testing::ValuesIn(WireCases()),
                         [](const ::testing::TestParamInfo<WireCase>& info) {
                           return absl::StrFormat("W%d_%s", info.param.world,
                                                  WireModeName(info.param.wire));
                         });

TEST(WireModeRulesTest, CompressedModesSayWhyTheyCannotApply) {
  SimDevice dev(4, 1);
  DmaAllReduceOptions o;
  o.max_bytes = 1 << 20;
  o.wire = WireMode::kI8Ring;
  auto ar = *DmaAllReduce::Create(&dev, o);
  std::vector<TensorView> fp16, odd;
  for (int r = 0; r < 4; ++r) {
    fp16.push_back(TensorView{*dev.Allocate(r, 4096 * 2, "x"), DType::kFP16, {4096}, true});
    odd.push_back(TensorView{*dev.Allocate(r, 4 * 136 * 2, "x"), DType::kBF16, {4 * 136}, true});
  }
  EXPECT_EQ(ar->AllReduce(fp16).status().message(),
            "wire mode i8_ring needs bf16 input; the tensor is fp16");
  EXPECT_EQ(ar->AllReduce(odd).status().message(),
            "wire mode i8_ring needs a shard (elems / world = 544 / 4 = 136) divisible by 128");
}

}  // namespace
}  // namespace dmalab
