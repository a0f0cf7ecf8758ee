// HostBytes: small buffers from the heap, large ones from the host block pool, recycled.
#include "common/core/host_buffer.h"

#include <cstring>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostBytesTest, SizesAndWritableBytes) {
  HostBytes b;
  EXPECT_EQ(b.size(), 0u);
  for (size_t n : {size_t{1}, size_t{4096}, HostBytes::kPooledBytes - 1, HostBytes::kPooledBytes,
                   9 * kMiB + 3, size_t{100}}) {
    ASSERT_TRUE(b.Resize(n).ok()) << n;
    EXPECT_EQ(b.size(), n);
    EXPECT_EQ(b.span().size(), n);
    std::memset(b.data(), 0x5a, n);
    EXPECT_EQ(b.data()[n - 1], 0x5a);
  }
}

TEST(HostBytesTest, LargeBuffersComeFromThePoolAndGoBackToIt) {
  const uint64_t in_use = GetHostBlockPoolStats().in_use;
  uint64_t mapped = 0;
  {
    HostBytes b;
    ASSERT_TRUE(b.Resize(10 * kMiB + 1).ok());
    // Rounded up to whole 2 MiB blocks.
    EXPECT_EQ(GetHostBlockPoolStats().in_use, in_use + 12 * kMiB);
    // A size within the same blocks keeps them.
    const uint8_t* data = b.data();
    ASSERT_TRUE(b.Resize(11 * kMiB).ok());
    EXPECT_EQ(b.data(), data);
    EXPECT_EQ(GetHostBlockPoolStats().in_use, in_use + 12 * kMiB);
    // A small size gives them back.
    ASSERT_TRUE(b.Resize(kMiB).ok());
    EXPECT_EQ(GetHostBlockPoolStats().in_use, in_use);
    ASSERT_TRUE(b.Resize(11 * kMiB).ok());
    mapped = GetHostBlockPoolStats().mapped_total;
  }
  EXPECT_EQ(GetHostBlockPoolStats().in_use, in_use);
  // The next replay's buffer of that size is the kept block: nothing new is mapped.
  HostBytes again;
  ASSERT_TRUE(again.Resize(11 * kMiB).ok());
  EXPECT_EQ(GetHostBlockPoolStats().mapped_total, mapped);
}

}  // namespace
}  // namespace dmalab
