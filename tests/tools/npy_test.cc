// .npy files and dump names (issue 15, items 6 and 7): headers valid for every dimension count
// allowed, a clear error beyond it, write errors reported, file names that stay inside the dump
// directory and never merge two tensors.
#include "tools/npy.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/output_file.h"

namespace dmalab {
namespace {

TEST(NpyTest, HeaderIsPaddedAndItsLengthFieldIsRightUpToTheDimensionBound) {
  for (size_t dims : {size_t{1}, size_t{2}, size_t{8}, kMaxNpyDims}) {
    std::vector<int64_t> shape(dims, 1);
    shape.back() = 1099511627776;  // 2^40, the widest size the loader allows
    const std::string h = NpyHeader(shape);
    EXPECT_EQ(h.size() % 64, 0u) << dims;
    EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t len = static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8;
    EXPECT_EQ(len, h.size() - 10) << dims;
    EXPECT_EQ(h.back(), '\n');
  }
  EXPECT_EQ(NpyHeader({2, 3}).substr(10, 59),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
}

TEST(NpyTest, TooManyDimensionsIsAClearError) {
  const std::vector<int64_t> shape(33, 1);
  const absl::Status s = WriteNpy("unused.npy", DType::kFP32, shape, std::vector<uint8_t>(4, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "dump: 'unused.npy': the tensor has 33 dimensions, allowed at most 32 (numpy's limit)");
  EXPECT_EQ(std::fopen("unused.npy", "rb"), nullptr);
}

TEST(NpyTest, WriteErrorsNameThePathAndTheReason) {
  // A dump file replaces a file or a link at its path, never a device (issue 25, item 8).
  const absl::Status full = WriteNpy("/dev/full", DType::kFP32, {16}, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(full.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(full.message(),
            "dump: cannot write '/dev/full': a character device is in the way (a file or a link "
            "there would be replaced)");
  const absl::Status missing =
      WriteNpy("/nonexistent/x.npy", DType::kFP32, {16}, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(missing.message(),
            "dump: cannot write '/nonexistent/x.npy': No such file or directory");
  EXPECT_EQ(WriteTextFile("/dev/full", "{}\n").message(),
            "cannot write '/dev/full': No space left on device");
}

TEST(DumpFileNameTest, NamesStayInsideTheDirectoryAndNeverMerge) {
  EXPECT_EQ(DumpFileName("layer0.residual"), "layer0.residual");
  EXPECT_EQ(DumpFileName("../x"), "%2E.%2Fx");
  EXPECT_EQ(DumpFileName(".."), "%2E.");
  EXPECT_EQ(DumpFileName("/etc/passwd"), "%2Fetc%2Fpasswd");
  EXPECT_EQ(DumpFileName(std::string("a\0b", 3)), "a%00b");
  EXPECT_EQ(DumpFileName("a\nb\x7f"), "a%0Ab%7F");
  EXPECT_EQ(DumpFileName("caf\xc3\xa9"), "caf%C3%A9");
  EXPECT_EQ(DumpFileName("100%"), "100%25");
  // Distinct names, the escapes themselves included, give distinct files.
  const std::vector<std::string> names = {
      "a/b", "a%2Fb", "a%b", std::string("a\0b", 3), std::string("a\0c", 3), "a",
      "A",   ".a",    "%2Ea"};
  std::set<std::string> files;
  for (const std::string& n : names) {
    const std::string f = DumpFileName(n);
    EXPECT_EQ(f.find('/'), std::string::npos) << f;
    EXPECT_NE(f[0], '.') << f;
    files.insert(f);
  }
  EXPECT_EQ(files.size(), names.size());
}

}  // namespace
}  // namespace dmalab
