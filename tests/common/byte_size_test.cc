// The one size parser of the command line (demo and sweep): binary suffixes in either case,
// bounds, overflow, and the messages that name the text and what is allowed.
#include "common/core/byte_size.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace dmalab {
namespace {

TEST(ByteSizeTest, ParsesBinarySuffixesInEitherCase) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64K"), 65536u);
  EXPECT_EQ(*ParseByteSize("64k"), 65536u);
  EXPECT_EQ(*ParseByteSize("1M"), 1048576u);
  EXPECT_EQ(*ParseByteSize("1m"), 1048576u);
  EXPECT_EQ(*ParseByteSize("2G"), 2147483648u);
  EXPECT_EQ(*ParseByteSize("2g"), 2147483648u);
  EXPECT_EQ(*ParseByteSize("007"), 7u);
}

TEST(ByteSizeTest, RejectsWhatIsNotAWholeSize) {
  for (const char* bad :
       {"", "M", "1.5M", "-1", "+1", " 1", "1 ", "12X", "1MB", "1MiB", "0x10", "1T", "K1"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << "'" << bad << "'";
  }
  EXPECT_EQ(ParseByteSize("1.5M").status().message(),
            "size '1.5M' is not a whole number of bytes with an optional K, M or G suffix "
            "(binary multiples, either case); allowed: 1 B to 2^64 - 1 B");
}

TEST(ByteSizeTest, ZeroIsRejectedWhereTheMinimumIsOne) {
  EXPECT_EQ(ParseByteSize("0").status().message(), "size '0' is 0 B; allowed: 1 B to 2^64 - 1 B");
  EXPECT_EQ(ParseByteSize("0K").status().message(), "size '0K' is 0 B; allowed: 1 B to 2^64 - 1 B");
  EXPECT_EQ(*ParseByteSize("0", /*min=*/0), 0u);
}

TEST(ByteSizeTest, OverflowIsAnErrorNeverAWrap) {
  EXPECT_EQ(*ParseByteSize("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ParseByteSize("18446744073709551616").status().message(),
            "size '18446744073709551616' is more than 2^64 - 1 bytes; allowed: 1 B to 2^64 - 1 B");
  // 2^34 G = 2^64 bytes: one past the largest.
  EXPECT_FALSE(ParseByteSize("17179869184G").ok());
  EXPECT_EQ(*ParseByteSize("17179869183G"), 17179869183ull << 30);
  EXPECT_EQ(ParseByteSize("999999999999G").status().message(),
            "size '999999999999G' is more than 2^64 - 1 bytes; allowed: 1 B to 2^64 - 1 B");
}

TEST(ByteSizeTest, BoundsNameTheRange) {
  EXPECT_EQ(ParseByteSize("1G", 1, 256ull << 20).status().message(),
            "size '1G' is 1 GiB; allowed: 1 B to 256 MiB");
  EXPECT_EQ(*ParseByteSize("256M", 1, 256ull << 20), 256ull << 20);
}

TEST(ByteSizeTest, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(FormatByteSize(1ull << 30), "1G");
  EXPECT_EQ(FormatByteSize(16ull << 20), "16M");
  EXPECT_EQ(FormatByteSize(1536), "1536");
  EXPECT_EQ(FormatByteSize(3072), "3K");
  EXPECT_EQ(DescribeByteSize(512), "512 B");
  EXPECT_EQ(DescribeByteSize(256ull << 20), "256 MiB");
}

}  // namespace
}  // namespace dmalab
