// The shadow fidelity's per-rank memory (sim/shadow_memory.h): provenance intervals and known
// flag words.
#include "sim/shadow_memory.h"

#include <random>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr uint64_t kA = 11, kB = 22;

TEST(ShadowMemoryTest, NeverWrittenBytesAreOneUnwrittenPiece) {
  ShadowMemory m;
  EXPECT_EQ(m.Get(100, 164), (Provenance{{0, 64, kUnwrittenOrigin, 0}}));
}

TEST(ShadowMemoryTest, GetReportsPiecesRelativeToItsStart) {
  ShadowMemory m;
  m.Assign(100, 200, kA, 0);
  m.Assign(140, 150, kB, 5);
  EXPECT_EQ(m.Get(120, 160), (Provenance{{0, 20, kA, 20}, {20, 10, kB, 5}, {30, 10, kA, 50}}));
  EXPECT_EQ(m.Get(90, 110), (Provenance{{0, 10, kUnwrittenOrigin, 0}, {10, 10, kA, 0}}));
}

TEST(ShadowMemoryTest, PiecesThatContinueOneAnotherMerge) {
  ShadowMemory m;
  m.Assign(0, 8, kA, 0);
  m.Assign(8, 16, kA, 8);
  m.Assign(16, 24, kA, 100);  // same origin, not continuing
  EXPECT_EQ(m.Get(0, 24), (Provenance{{0, 16, kA, 0}, {16, 8, kA, 100}}));
  // Overwriting the middle of a piece with its own bytes leaves one piece.
  m.Assign(0, 16, kA, 0);
  m.Assign(4, 12, kA, 4);
  EXPECT_EQ(m.Get(0, 16), (Provenance{{0, 16, kA, 0}}));
}

TEST(ShadowMemoryTest, CopiesMoveProvenanceBetweenRanks) {
  ShadowMemory src, dst;
  src.Assign(0, 32, kA, 0);
  src.Assign(16, 24, kB, 0);
  dst.CopyFrom(src, 8, 1000, 24);
  EXPECT_EQ(dst.Get(1000, 1024), (Provenance{{0, 8, kA, 8}, {8, 8, kB, 0}, {16, 8, kA, 24}}));
}

TEST(ShadowMemoryTest, OverlappingCopyWithinOneRankActsAsMemmove) {
  ShadowMemory m;
  m.Assign(0, 16, kA, 0);
  m.CopyFrom(m, 0, 8, 16);
  EXPECT_EQ(m.Get(0, 24), (Provenance{{0, 8, kA, 0}, {8, 16, kA, 0}}));
}

TEST(ShadowMemoryTest, WordsAreKnownUntilDataOverwritesThem) {
  ShadowMemory m;
  EXPECT_EQ(m.LoadWord(64), ~0ull);  // never written: the fresh-memory pattern
  m.StoreWord(64, 5);
  EXPECT_EQ(m.LoadWord(64), 5u);
  m.Assign(60, 66, kA, 0);  // a kernel's bytes cover part of it
  EXPECT_FALSE(m.LoadWord(64).has_value());
}

TEST(ShadowMemoryTest, CopiesCarryKnownWordsAndOnlyWholeOnes) {
  ShadowMemory src, dst;
  src.Assign(0, 24, kA, 0);
  src.StoreWord(0, 7);
  src.StoreWord(8, 9);
  src.StoreWord(16, 3);
  dst.CopyFrom(src, 0, 800, 20);  // the word at 16 is cut
  EXPECT_EQ(dst.LoadWord(800), 7u);
  EXPECT_EQ(dst.LoadWord(808), 9u);
  EXPECT_FALSE(dst.LoadWord(816).has_value());
}

TEST(ShadowMemoryTest, AssignWordIsAssignThenStoreWord) {
  // Random stores, data writes and copies on two memories, one storing words with AssignWord and
  // one with Assign and StoreWord: every byte's provenance and every word read alike throughout.
  // Few origins and offsets, so that pieces continue one another and merge.
  std::mt19937_64 rng(7);
  const auto below = [&rng](uint64_t n) { return rng() % n; };
  ShadowMemory fused, plain;
  constexpr uint64_t kBytes = 256;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t origin = below(3) + 1;  // 1..3
    switch (below(4)) {
      case 0:
      case 1: {  // a word stored, mostly aligned
        const uint64_t addr = below(2) == 0 ? below(kBytes / 8) * 8 : below(kBytes - 8);
        const uint64_t value = below(4);
        fused.AssignWord(addr, value, origin);
        plain.Assign(addr, addr + 8, origin, 0);
        plain.StoreWord(addr, value);
        break;
      }
      case 2: {  // data written over some bytes, possibly continuing a word's piece
        const uint64_t lo = below(kBytes), hi = lo + 1 + below(std::min<uint64_t>(24, kBytes - lo));
        const uint64_t offset = below(2) == 0 ? 8 : below(16);
        fused.Assign(lo, hi, origin, offset);
        plain.Assign(lo, hi, origin, offset);
        break;
      }
      case 3: {  // a copy within the memory
        const uint64_t bytes = 1 + below(32), src = below(kBytes - bytes),
                       dst = below(kBytes - bytes);
        fused.CopyFrom(fused, src, dst, bytes);
        plain.CopyFrom(plain, src, dst, bytes);
        break;
      }
    }
    ASSERT_EQ(fused.Get(0, kBytes), plain.Get(0, kBytes)) << "step " << step;
    for (uint64_t addr = 0; addr + 8 <= kBytes; ++addr) {
      ASSERT_EQ(fused.LoadWord(addr), plain.LoadWord(addr)) << "step " << step << " addr " << addr;
    }
  }
}

}  // namespace
}  // namespace dmalab
