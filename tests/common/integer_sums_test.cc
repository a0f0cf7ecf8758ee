// Integer fills whose all-reduce sums leave the dtype's exact range: located warnings
// (common/scenario/integer_sums.h), one per all_reduce step, none where the sum stays exact.
#include "common/scenario/integer_sums.h"

#include <string>
#include <vector>

#include "dmalab/scenario_loader.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

std::vector<std::string> WarningsOf(const std::string& yaml) {
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "t.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? IntegerSumWarnings(*s) : std::vector<std::string>{"(not loaded)"};
}

TEST(IntegerSumsTest, AFillWhoseSumPassesTheExactRangeIsNamedAtTheAllReducesInput) {
  // bf16 holds integers up to 256 exactly; 4 ranks of values up to 100 sum up to 400.
  const std::string yaml =
      "world: 4\n"
      "tensors: {x: [64], y: [64]}\n"
      "steps:\n"
      "  - fill: {tensor: x, kind: int, lo: -100, hi: 3}\n"
      "  - repeat:\n"
      "      times: 3\n"
      "      steps:\n"
      "        - all_reduce: {input: x, result: y}\n"
      "        - release: y\n";
  EXPECT_EQ(WarningsOf(yaml),
            std::vector<std::string>{
                "t.yaml:8:31: field 'steps[1].repeat.steps[0].all_reduce.input': tensor 'x' "
                "holds the integers of the fill at t.yaml:4:5, up to 100 in magnitude; their sum "
                "over 4 ranks reaches 400, past bf16's exact integer range (256), so this "
                "all-reduce's output is not checked against its exact sum (wrong_sum); fill "
                "within 64 (256 / 4) to have it checked"});
}

TEST(IntegerSumsTest, SumsWithinTheRangeOfTheTensorsDtypeAreNotNamed) {
  // 4 x 64 = 256 is exact in bf16; 4 x 500 = 2000 is exact in fp16 (2048).
  EXPECT_EQ(WarningsOf("world: 4\n"
                       "tensors: {x: [64], y: [64]}\n"
                       "steps:\n"
                       "  - fill: {tensor: x, kind: int, lo: -64, hi: 64}\n"
                       "  - all_reduce: {input: x, result: y}\n"),
            std::vector<std::string>{});
  EXPECT_EQ(WarningsOf("world: 4\n"
                       "dtype: fp16\n"
                       "tensors: {x: [64], y: [64]}\n"
                       "steps:\n"
                       "  - fill: {tensor: x, kind: int, lo: -500, hi: 500}\n"
                       "  - all_reduce: {input: x, result: y}\n"),
            std::vector<std::string>{});
}

TEST(IntegerSumsTest, OnlyInputsThatHoldOneIntegerFillAreJudged) {
  // A random fill, a compressed wire and an input overwritten since its fill are not exact sums
  // to check in the first place (or are judged by the replay's own bounds).
  EXPECT_EQ(WarningsOf("world: 4\n"
                       "tensors: {x: [64], y: [64], z: [64]}\n"
                       "steps:\n"
                       "  - fill: {tensor: x, lo: -200, hi: 200}\n"
                       "  - all_reduce: {input: x, result: y}\n"
                       "  - fill: {tensor: z, kind: int, lo: -200, hi: 200}\n"
                       "  - fill: {tensor: z, kind: int, lo: -2, hi: 2}\n"
                       "  - all_reduce: {input: z, in_place: true}\n"
                       "  - all_reduce: {input: z, in_place: true}\n"),
            std::vector<std::string>{});
  EXPECT_EQ(WarningsOf("world: 4\n"
                       "wire: i8\n"
                       "tensors: {x: [1024], y: [1024]}\n"
                       "steps:\n"
                       "  - fill: {tensor: x, kind: int, lo: -200, hi: 200}\n"
                       "  - all_reduce: {input: x, result: y}\n"),
            std::vector<std::string>{});
}

}  // namespace
}  // namespace dmalab
