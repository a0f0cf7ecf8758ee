// The host block pool (common/core/host_block_pool.h): blocks are recycled in any order of sizes
// without touching fresh memory again, the process never holds more than its peak in use, and a
// forked child starts with none of the parent's blocks, kept or in use.
#include "common/core/host_block_pool.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kBlock = kHostBlockAlign;

// How many of the pages of [data, data + bytes) are present in memory (mincore). Asked of the
// kernel rather than counted in page faults, which AddressSanitizer's shadow pages would add to.
uint64_t PresentPages(const uint8_t* data, uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> present((bytes + page - 1) / page);
  if (mincore(const_cast<uint8_t*>(data), bytes, present.data()) != 0) return ~uint64_t{0};
  uint64_t n = 0;
  for (unsigned char p : present) n += p & 1;
  return n;
}

// The exit code of child `pid` once it ends; -1 when it did not exit by itself.
int ExitCodeOf(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Writes `tag` into the first and last byte of every kBlock of [data, data + bytes).
void Tag(uint8_t* data, uint64_t bytes, uint8_t tag) {
  for (uint64_t b = 0; b < bytes; b += kBlock) data[b] = data[b + kBlock - 1] = tag;
}

// A smaller request takes the front of a larger kept block, and its rest serves the next one:
// nothing new is mapped, and the pieces are the block's own bytes.
TEST(HostBlockPoolTest, ASmallerRequestSplitsALargerKeptBlock) {
  TrimHostBlockPool();
  const uint64_t big = 101 * kBlock;
  uint8_t* start = nullptr;
  {
    absl::StatusOr<HostBlock> a = AcquireHostBlock(big);
    ASSERT_TRUE(a.ok());
    start = a->data();
  }  // kept
  const HostBlockPoolStats kept = GetHostBlockPoolStats();
  EXPECT_EQ(kept.kept, big);
  absl::StatusOr<HostBlock> front = AcquireHostBlock(60 * kBlock);
  ASSERT_TRUE(front.ok());
  absl::StatusOr<HostBlock> rest = AcquireHostBlock(41 * kBlock);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(GetHostBlockPoolStats().mapped_total, kept.mapped_total);
  EXPECT_EQ(front->data(), start);
  EXPECT_EQ(rest->data(), start + 60 * kBlock);
  EXPECT_EQ(front->bytes(), 60 * kBlock);
  EXPECT_EQ(rest->bytes(), 41 * kBlock);
  EXPECT_EQ(GetHostBlockPoolStats().in_use, kept.in_use + big);
  EXPECT_EQ(GetHostBlockPoolStats().kept, 0u);
}

// Two pieces of one block, given back in either order, join again: the whole size is served
// from them, at the same address, with nothing mapped or moved.
TEST(HostBlockPoolTest, NeighboursGivenBackJoinIntoOneBlock) {
  TrimHostBlockPool();
  uint8_t* start = nullptr;
  {
    absl::StatusOr<HostBlock> whole = AcquireHostBlock(10 * kBlock);
    ASSERT_TRUE(whole.ok());
    start = whole->data();
  }
  {
    absl::StatusOr<HostBlock> front = AcquireHostBlock(4 * kBlock);
    absl::StatusOr<HostBlock> rest = AcquireHostBlock(6 * kBlock);
    ASSERT_TRUE(front.ok() && rest.ok());
    ASSERT_EQ(rest->data(), start + 4 * kBlock);
    absl::StatusOr<HostBlock> gone = std::move(rest);  // the rest goes back first
  }
  const HostBlockPoolStats before = GetHostBlockPoolStats();
  EXPECT_EQ(before.kept, 10 * kBlock);
  absl::StatusOr<HostBlock> again = AcquireHostBlock(10 * kBlock);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), start);
  EXPECT_EQ(GetHostBlockPoolStats().mapped_total, before.mapped_total);
  EXPECT_EQ(GetHostBlockPoolStats().moved_total, before.moved_total);
}

// A request larger than every kept block takes the kept blocks' pages, largest first, and maps
// fresh memory only for the shortfall: the moved pages hold what was written to them and are
// present in memory already; the fresh rest is not until it is written.
TEST(HostBlockPoolTest, ALargerRequestMovesTheKeptPagesInsteadOfTouchingFreshOnes) {
  TrimHostBlockPool();
  {
    absl::StatusOr<HostBlock> a = AcquireHostBlock(3 * kBlock);
    absl::StatusOr<HostBlock> b = AcquireHostBlock(2 * kBlock);
    ASSERT_TRUE(a.ok() && b.ok());
    std::memset(a->data(), 0, a->bytes());
    std::memset(b->data(), 0, b->bytes());
    Tag(a->data(), a->bytes(), 0xa1);
    Tag(b->data(), b->bytes(), 0xb2);
  }
  const HostBlockPoolStats before = GetHostBlockPoolStats();
  ASSERT_EQ(before.kept, 5 * kBlock);
  absl::StatusOr<HostBlock> big = AcquireHostBlock(7 * kBlock);
  ASSERT_TRUE(big.ok());
  const HostBlockPoolStats after = GetHostBlockPoolStats();
  EXPECT_EQ(after.mapped_total - before.mapped_total, 2 * kBlock);
  EXPECT_EQ(after.moved_total - before.moved_total, 5 * kBlock);
  EXPECT_EQ(after.kept, 0u);
  EXPECT_EQ(after.in_use - before.in_use, 7 * kBlock);
  // The five moved blocks hold their tags: a's three then b's two (largest first), or, where a
  // and b were mapped next to each other and joined on their way back, in address order.
  uint8_t* d = big->data();
  std::string tags;
  for (int blk = 0; blk < 5; ++blk) {
    EXPECT_EQ(d[blk * kBlock], d[blk * kBlock + kBlock - 1]) << "block " << blk;
    tags += d[blk * kBlock] == 0xa1 ? 'a' : d[blk * kBlock] == 0xb2 ? 'b' : '?';
  }
  EXPECT_THAT(tags, ::testing::AnyOf("aaabb", "bbaaa"));
  // The moved pages are present already; the shortfall's are not until written.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(PresentPages(d, 5 * kBlock), 5 * kBlock / page);
  EXPECT_EQ(PresentPages(d + 5 * kBlock, 2 * kBlock), 0u);
  std::memset(d + 5 * kBlock, 1, 2 * kBlock);
  EXPECT_EQ(PresentPages(d + 5 * kBlock, 2 * kBlock), 2 * kBlock / page);
}

// The process never holds more than the most it had in use at once: after a larger request,
// in use plus kept is within the peak.
TEST(HostBlockPoolTest, KeepsNoMoreThanThePeakInUse) {
  TrimHostBlockPool();
  const uint64_t size_a = 5 * kBlock, size_b = 7 * kBlock;
  {
    absl::StatusOr<HostBlock> a = AcquireHostBlock(size_a);
    ASSERT_TRUE(a.ok());
  }  // kept
  const HostBlockPoolStats kept = GetHostBlockPoolStats();
  {
    absl::StatusOr<HostBlock> b = AcquireHostBlock(size_b);  // larger than anything kept
    ASSERT_TRUE(b.ok());
    const HostBlockPoolStats now = GetHostBlockPoolStats();
    EXPECT_LE(now.in_use + now.kept, now.peak_in_use);
    EXPECT_GE(now.peak_in_use, kept.peak_in_use);
    absl::StatusOr<HostBlock> c = AcquireHostBlock(size_a);  // nothing kept: a new mapping
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(GetHostBlockPoolStats().mapped_total - now.mapped_total, size_a);
  }
  const HostBlockPoolStats end = GetHostBlockPoolStats();
  EXPECT_LE(end.in_use + end.kept, end.peak_in_use);
  EXPECT_EQ(TrimHostBlockPool(), end.kept);
  EXPECT_EQ(GetHostBlockPoolStats().kept, 0u);
  EXPECT_EQ(AcquireHostBlock(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AcquireHostBlock(4096).status().code(), absl::StatusCode::kInvalidArgument);
}

// A forked child (a worker process) holds none of the parent's kept blocks, and its pool works.
TEST(HostBlockPoolTest, AForkedChildStartsWithNoKeptBlocks) {
  TrimHostBlockPool();
  {
    absl::StatusOr<HostBlock> a = AcquireHostBlock(4 * kBlock);
    ASSERT_TRUE(a.ok());
    std::memset(a->data(), 3, a->bytes());
  }
  ASSERT_EQ(GetHostBlockPoolStats().kept, 4 * kBlock);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = GetHostBlockPoolStats().kept == 0 ? 0 : 10;
    absl::StatusOr<HostBlock> b = AcquireHostBlock(2 * kBlock);
    if (!b.ok()) code = 11;
    if (code == 0) std::memset(b->data(), 4, b->bytes());
    _exit(code);
  }
  EXPECT_EQ(ExitCodeOf(pid), 0);
  // The parent's kept block is still its own, whole.
  EXPECT_EQ(GetHostBlockPoolStats().kept, 4 * kBlock);
  absl::StatusOr<HostBlock> again = AcquireHostBlock(4 * kBlock);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data()[0], 3);
  EXPECT_EQ(again->data()[4 * kBlock - 1], 3);
}

// A block in use at a fork is not inherited either: the parent's pages stay its own (no
// copy-on-write for its other threads), the child does not have them, and the child's release of
// it (an object destroyed there) does nothing to the child's pool.
TEST(HostBlockPoolTest, ABlockInUseAtAForkIsNotTheChilds) {
  TrimHostBlockPool();
  absl::StatusOr<HostBlock> held = AcquireHostBlock(3 * kBlock);
  ASSERT_TRUE(held.ok());
  std::memset(held->data(), 5, held->bytes());
  const uint8_t* const held_data = held->data();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    if (GetHostBlockPoolStats().in_use != 0) code = 20;
    // Not mapped here: mincore fails (ENOMEM) on an unmapped range.
    if (code == 0 && PresentPages(held_data, 3 * kBlock) != ~uint64_t{0}) code = 21;
    if (code == 0) {
      HostBlock gone = *std::move(held);  // destroyed at the end of this block: a release here
    }
    const HostBlockPoolStats after = GetHostBlockPoolStats();
    if (code == 0 && (after.in_use != 0 || after.kept != 0)) code = 22;
    absl::StatusOr<HostBlock> own = AcquireHostBlock(2 * kBlock);
    if (code == 0 && !own.ok()) code = 23;
    if (code == 0) std::memset(own->data(), 6, own->bytes());
    _exit(code);
  }
  EXPECT_EQ(ExitCodeOf(pid), 0);
  EXPECT_EQ(held->data()[0], 5);
  EXPECT_EQ(held->data()[3 * kBlock - 1], 5);
  EXPECT_EQ(GetHostBlockPoolStats().in_use, 3 * kBlock);
}

TEST(HostBlockPoolTest, AnUnmappableSizeIsAnErrorNotAnAbort) {
  absl::StatusOr<HostBlock> b = AcquireHostBlock(uint64_t{1} << 62);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("cannot map 4611686018427387904 bytes"));
}

}  // namespace
}  // namespace dmalab
