// Provenance comparisons and digests (include/dmalab/provenance.h), on hand-built piece lists.
#include "dmalab/provenance.h"

#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr uint64_t kA = 101, kB = 202;

TEST(ProvenanceTest, EqualListsChangeNothing) {
  const Provenance a = {{0, 16, kA, 0}};
  int64_t first = 7;
  EXPECT_EQ(CountChangedElems(a, a, 2, &first), 0);
  EXPECT_EQ(first, -1);
}

TEST(ProvenanceTest, CountsEveryElementADifferingPieceTouches) {
  const Provenance a = {{0, 16, kA, 0}};
  // Bytes 4..8 come from elsewhere: bf16 elements 2 and 3.
  const Provenance b = {{0, 4, kA, 0}, {4, 4, kB, 0}, {8, 8, kA, 8}};
  int64_t first = 0;
  EXPECT_EQ(CountChangedElems(a, b, 2, &first), 2);
  EXPECT_EQ(first, 2);
  // As fp32, bytes 4..8 are element 1 alone.
  EXPECT_EQ(CountChangedElems(a, b, 4, &first), 1);
  EXPECT_EQ(first, 1);
}

TEST(ProvenanceTest, APieceStraddlingElementsCountsBothOnce) {
  const Provenance a = {{0, 16, kA, 0}};
  // Bytes 3..5 differ: they touch bf16 elements 1 and 2.
  const Provenance b = {{0, 3, kA, 0}, {3, 2, kB, 7}, {5, 11, kA, 5}};
  int64_t first = 0;
  EXPECT_EQ(CountChangedElems(a, b, 2, &first), 2);
  EXPECT_EQ(first, 1);
  // Bytes 3..4 and 4..5 from two origins still count element 1 and 2 once each.
  const Provenance c = {{0, 3, kA, 0}, {3, 1, kB, 0}, {4, 1, kB + 1, 0}, {5, 11, kA, 5}};
  EXPECT_EQ(CountChangedElems(a, c, 2, &first), 2);
}

TEST(ProvenanceTest, TheSameOriginAtAnotherOffsetIsAChange) {
  const Provenance a = {{0, 8, kA, 0}};
  const Provenance shifted = {{0, 8, kA, 8}};
  EXPECT_EQ(CountChangedElems(a, shifted, 2, nullptr), 4);
}

TEST(ProvenanceTest, UnwrittenBytesAreEqualWhereverTheyLie) {
  // Unwritten memory holds one fill pattern, so its offset does not matter.
  const Provenance a = {{0, 4, kA, 0}, {4, 4, kUnwrittenOrigin, 0}};
  const Provenance b = {{0, 4, kA, 0}, {4, 4, kUnwrittenOrigin, 0}};
  const Provenance c = {{0, 4, kUnwrittenOrigin, 0}, {4, 4, kA, 4}};
  EXPECT_EQ(CountChangedElems(a, b, 2, nullptr), 0);
  EXPECT_EQ(CountChangedElems(a, c, 2, nullptr), 4);
}

TEST(ProvenanceTest, DigestsFollowEquality) {
  const Provenance a = {{0, 4, kA, 0}, {4, 4, kB, 0}};
  const Provenance b = {{0, 4, kA, 0}, {4, 4, kB, 0}};
  const Provenance c = {{0, 4, kA, 0}, {4, 4, kB, 1}};
  EXPECT_EQ(ProvenanceDigest(a), ProvenanceDigest(b));
  EXPECT_NE(ProvenanceDigest(a), ProvenanceDigest(c));
}

TEST(ProvenanceTest, OriginsDependOnEveryValueAndAreNeverUnwritten) {
  EXPECT_EQ(MakeOrigin({1, 2, 3}), MakeOrigin({1, 2, 3}));
  EXPECT_NE(MakeOrigin({1, 2, 3}), MakeOrigin({1, 2, 4}));
  EXPECT_NE(MakeOrigin({1, 2, 3}), MakeOrigin({3, 2, 1}));
  EXPECT_NE(MakeOrigin({}), kUnwrittenOrigin);
}

}  // namespace
}  // namespace dmalab
