// What the replay knows of values without reading them (common/scenario/known_values.h): exact
// integer sums as terms of fills, and magnitude bounds, with exactness lost where a sum could
// round.
#include "common/scenario/known_values.h"

#include <cmath>
#include <vector>

#include "common/scenario/fill.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

std::vector<int64_t> ExactOf(const KnownValues& k, int rank, int64_t elems) {
  std::vector<int64_t> v(elems);
  k.Exact(rank, absl::MakeSpan(v));
  return v;
}

// The fill's elements as the generator writes them (bf16 holds these integers exactly).
std::vector<int64_t> Filled(double lo, double hi, uint64_t key, int64_t elems) {
  std::vector<uint8_t> bytes(2 * elems);
  FillElements(DType::kBF16, FillKind::kInt, lo, hi, key, absl::MakeSpan(bytes));
  std::vector<int64_t> v;
  for (int64_t i = 0; i < elems; ++i) {
    v.push_back(static_cast<int64_t>(LoadAsFloat(DType::kBF16, bytes.data(), i)));
  }
  return v;
}

TEST(KnownValuesTest, AnIntegerFillIsExactlyTheGeneratorsValues) {
  const KnownValues k = KnownValues::Fill(FillKind::kInt, -7, 5, {11, 22});
  ASSERT_TRUE(k.exact());
  EXPECT_EQ(k.bound(), 7);
  EXPECT_EQ(ExactOf(k, 0, 100), Filled(-7, 5, 11, 100));
  EXPECT_EQ(ExactOf(k, 1, 100), Filled(-7, 5, 22, 100));
  EXPECT_FALSE(k.SameAs(0, 1));
}

TEST(KnownValuesTest, AnAllReduceOfExactIntegersIsTheirSumOnEveryRank) {
  const KnownValues in = KnownValues::Fill(FillKind::kInt, -8, 8, {1, 2, 3});
  const KnownValues out = KnownValues::AllReduce(in, 3, DType::kBF16, /*exact_wire=*/true);
  ASSERT_TRUE(out.exact());
  EXPECT_EQ(out.bound(), 24);
  EXPECT_TRUE(out.SameAs(0, 2));
  const std::vector<int64_t> a = Filled(-8, 8, 1, 64), b = Filled(-8, 8, 2, 64),
                             c = Filled(-8, 8, 3, 64);
  const std::vector<int64_t> sum = ExactOf(out, 1, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(sum[i], a[i] + b[i] + c[i]) << i;
}

TEST(KnownValuesTest, AddingATensorToItselfDoublesItsCoefficient) {
  const KnownValues x = KnownValues::Fill(FillKind::kInt, 0, 10, {5, 6});
  const KnownValues twice = KnownValues::Add(x, x, DType::kBF16);
  ASSERT_TRUE(twice.exact());
  EXPECT_EQ(twice.bound(), 20);
  const std::vector<int64_t> v = Filled(0, 10, 6, 32), got = ExactOf(twice, 1, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], 2 * v[i]);
}

// bf16 holds every integer up to 256: a sum that may pass it may round, and is no longer exact.
TEST(KnownValuesTest, ExactnessEndsWhereASumCouldLeaveTheExactRange) {
  const KnownValues in = KnownValues::Fill(FillKind::kInt, -64, 64, {1, 2, 3, 4});
  EXPECT_TRUE(KnownValues::AllReduce(in, 4, DType::kBF16, true).exact());  // 4 x 64 = 256
  const KnownValues big = KnownValues::Fill(FillKind::kInt, -65, 65, {1, 2, 3, 4});
  const KnownValues out = KnownValues::AllReduce(big, 4, DType::kBF16, true);
  EXPECT_FALSE(out.exact());
  EXPECT_EQ(out.bound(), 2 * 4 * 65);  // still bounded: room for any rounding
  EXPECT_TRUE(KnownValues::AllReduce(big, 4, DType::kFP16, true).exact());  // fp16: 2048
  const KnownValues a = KnownValues::Fill(FillKind::kInt, 0, 200, {1, 2});
  EXPECT_FALSE(KnownValues::Add(a, a, DType::kBF16).exact());
}

TEST(KnownValuesTest, ACompressedWireOrRandomFillsGiveABoundOnly) {
  const KnownValues ints = KnownValues::Fill(FillKind::kInt, -4, 4, {1, 2});
  const KnownValues coded = KnownValues::AllReduce(ints, 2, DType::kBF16, /*exact_wire=*/false);
  EXPECT_FALSE(coded.exact());
  EXPECT_EQ(coded.bound(), 16);
  const KnownValues random = KnownValues::Fill(FillKind::kRandom, -1, 1, {1, 2});
  EXPECT_FALSE(random.exact());
  EXPECT_GT(random.bound(), 1.0);  // the dtype's rounding of 1 may pass 1
  EXPECT_LT(random.bound(), 1.01);
}

TEST(KnownValuesTest, NothingKnownIsUnboundedAndStaysSo) {
  const KnownValues unknown;
  EXPECT_FALSE(unknown.exact());
  EXPECT_TRUE(std::isinf(unknown.bound()));
  const KnownValues x = KnownValues::Fill(FillKind::kInt, 0, 1, {1, 2});
  EXPECT_TRUE(std::isinf(KnownValues::Add(x, unknown, DType::kFP32).bound()));
  EXPECT_FALSE(KnownValues::Add(x, unknown, DType::kFP32).exact());
}

TEST(KnownValuesTest, MoreTermsThanTheCapKeepOnlyTheBound) {
  // fp32 holds integers to 2^24: the term count, not the range, ends exactness here.
  KnownValues sum = KnownValues::Fill(FillKind::kInt, 0, 1, {1, 1});
  for (uint64_t key = 2; key <= KnownValues::kMaxTerms; ++key) {
    sum = KnownValues::Add(sum, KnownValues::Fill(FillKind::kInt, 0, 1, {key, key}), DType::kFP32);
    ASSERT_TRUE(sum.exact()) << key;
  }
  const KnownValues over =
      KnownValues::Add(sum, KnownValues::Fill(FillKind::kInt, 0, 1, {999, 999}), DType::kFP32);
  EXPECT_FALSE(over.exact());
  EXPECT_GE(over.bound(), static_cast<double>(KnownValues::kMaxTerms) + 1);
}

TEST(KnownValuesTest, MaxFiniteIsTheDtypesLargestFiniteValue) {
  EXPECT_EQ(MaxFinite(DType::kFP16), 65504.0);
  EXPECT_EQ(MaxFinite(DType::kBF16), 3.3895313892515355e38);
  EXPECT_EQ(MaxFinite(DType::kFP32), 3.4028234663852886e38);
}

}  // namespace
}  // namespace dmalab
