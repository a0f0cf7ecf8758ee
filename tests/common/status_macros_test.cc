// DMALAB_RETURN_IF_ERROR and DMALAB_ASSIGN_OR_RETURN: early returns on errors, values otherwise;
// Prefixed: an error that says where it happened.
#include "common/core/status_macros.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

absl::StatusOr<int> Half(int n) {
  if (n % 2 != 0) return absl::InvalidArgumentError(absl::StrCat(n, " is odd"));
  return n / 2;
}

absl::Status CheckEven(int n) {
  DMALAB_RETURN_IF_ERROR(Half(n).status());
  return absl::OkStatus();
}

// Declares one variable and assigns an existing one, as call sites do.
absl::StatusOr<int> Quarter(int n) {
  DMALAB_ASSIGN_OR_RETURN(const int half, Half(n));
  int quarter = 0;
  DMALAB_ASSIGN_OR_RETURN(quarter, Half(half));
  return quarter;
}

absl::StatusOr<std::unique_ptr<int>> Boxed(int n) {
  if (n < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(n);
}

// The value is moved out, so move-only types work.
absl::StatusOr<int> Unboxed(int n) {
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<int> box, Boxed(n));
  return *box;
}

// Braced arguments hold commas outside parentheses; the macros take them whole.
absl::Status CheckPair(std::pair<int, int> p) { return CheckEven(p.first + p.second); }
absl::StatusOr<int> HalfPair(std::pair<int, int> p) { return Half(p.first + p.second); }
absl::StatusOr<int> Braced(int a, int b) {
  DMALAB_RETURN_IF_ERROR(CheckPair({a, b}));
  DMALAB_ASSIGN_OR_RETURN(const int half, HalfPair({a, b}));
  return half;
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsOnlyErrors) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "3 is odd");
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresOrAssignsAndReturnsTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(3).status().message(), "3 is odd");
  EXPECT_EQ(Quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(*Unboxed(7), 7);
  EXPECT_EQ(Unboxed(-1).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(StatusMacrosTest, MacrosTakeBracedArguments) {
  EXPECT_EQ(*Braced(1, 3), 2);
  EXPECT_EQ(Braced(1, 2).status().message(), "3 is odd");
}

TEST(StatusMacrosTest, PrefixedKeepsTheCodeAndOk) {
  const absl::Status s = Prefixed("close: ", absl::NotFoundError("no mapping"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "close: no mapping");
  EXPECT_TRUE(Prefixed("close: ", absl::OkStatus()).ok());
}

}  // namespace
}  // namespace dmalab
