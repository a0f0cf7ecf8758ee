#include "dmalab/scenario_loader.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

// The message of a failed parse, or "OK".
std::string ErrorOf(const std::string& yaml) {
  auto s = ParseScenario(yaml, "t.yaml");
  if (s.ok()) return "OK";
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.status().message());
}

constexpr char kValid[] = R"(world: 4
wire: bf16
seed: 7
shapes:
  hidden: [16, 64]
tensors:
  x: hidden
  y: [16, 64]
  r: {shape: hidden, dtype: bf16}
steps:
  - fill: {tensor: x, kind: int, lo: 1, hi: 16, seed: 3}
  - all_reduce: {input: x, result: r, label: embedding}
  - retain: r
  - repeat:
      times: 3
      steps:
        - all_reduce: {input: x, result: y}
        - release: y
  - expect_unchanged: r
  - unretain: r
  - add: {dst: r, a: r, b: x}
  - all_reduce: {input: r, in_place: true}
  - fill: {tensor: y}
  - all_reduce: {input: x, out: y}
  - expect_equal: {a: y, b: y}
  - free: r
expect:
  - {faults: none, status: PASS, pointer_alias: false, retained_mismatches: 0}
  - {faults: persistent-output, status: FAIL}
)";

TEST(ScenarioLoaderTest, ParsesEveryFieldOfAValidScenario) {
  auto s = ParseScenario(kValid, "dir/valid.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "valid");
  EXPECT_EQ(s->file, "dir/valid.yaml");
  EXPECT_EQ(s->world, 4);
  EXPECT_EQ(s->wire, WireMode::kNative);
  EXPECT_EQ(s->seed, 7u);
  EXPECT_EQ(s->tensors.size(), 3u);
  EXPECT_EQ(s->tensors.at("y").shape, (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(s->tensors.at("r").shape, (std::vector<int64_t>{16, 64}));
  ASSERT_EQ(s->steps.size(), 12u);
  const Step& fill = s->steps[0];
  EXPECT_EQ(fill.kind, StepKind::kFill);
  EXPECT_EQ(fill.fill_kind, FillKind::kInt);
  EXPECT_EQ(fill.lo, 1);
  EXPECT_EQ(fill.hi, 16);
  EXPECT_EQ(fill.seed, 3u);
  EXPECT_EQ(fill.loc.ToString(), "dir/valid.yaml:11:5");
  EXPECT_EQ(s->steps[1].form, AllReduceForm::kDefault);
  EXPECT_EQ(s->steps[1].result, "r");
  EXPECT_EQ(s->steps[1].Describe(), "all_reduce 'embedding' at dir/valid.yaml:12:5");
  EXPECT_EQ(s->steps[3].kind, StepKind::kRepeat);
  EXPECT_EQ(s->steps[3].times, 3);
  EXPECT_EQ(s->steps[3].body.size(), 2u);
  EXPECT_EQ(s->steps[7].form, AllReduceForm::kInPlace);
  EXPECT_EQ(s->steps[9].form, AllReduceForm::kOut);
  EXPECT_EQ(s->steps[11].kind, StepKind::kRelease);
  EXPECT_EQ(s->ExpandedStepCount(), 11 + 3 * 2);
  EXPECT_EQ(s->MaxAllReduceBytes(), 16u * 64 * 2);
  ASSERT_EQ(s->expect.size(), 2u);
  EXPECT_TRUE(s->expect[0].pass);
  EXPECT_EQ(s->expect[0].retained_mismatches, 0);
  EXPECT_EQ(s->expect[1].faults, "persistent-output");
  EXPECT_FALSE(s->expect[1].pass);
  EXPECT_FALSE(s->expect[1].pointer_alias.has_value());
}

TEST(ScenarioLoaderTest, MissingFieldNamesTheFieldAtTheEnclosingMap) {
  EXPECT_EQ(ErrorOf("wire: bf16\ntensors: {x: [64]}\nsteps: []\n"),
            "t.yaml:1:1: field 'world': found nothing (the field is missing), allowed an integer "
            "in 2..16");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {kind: int}\n"),
            "t.yaml:4:11: field 'steps[0].fill.tensor': found nothing (the field is missing), "
            "allowed a tensor declared under 'tensors': x");
}

TEST(ScenarioLoaderTest, WrongTypeShowsWhatWasFound) {
  EXPECT_EQ(ErrorOf("world: four\ntensors: {x: [64]}\nsteps: []\n"),
            "t.yaml:1:8: field 'world': found 'four', allowed an integer in 2..16");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps: {fill: x}\n"),
            "t.yaml:3:8: field 'steps': found a map, allowed a list of steps");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x, seed: [1]}\n"),
            "t.yaml:4:29: field 'steps[0].fill.seed': found a list, allowed an integer in "
            "0..18446744073709551615");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n"
                    "  - fill: {tensor: x}\n  - all_reduce: {input: x, in_place: yes}\n"),
            "t.yaml:5:38: field 'steps[1].all_reduce.in_place': found 'yes', allowed true or "
            "false");
}

TEST(ScenarioLoaderTest, UnknownStepListsTheStepKinds) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - allreduce: {input: x}\n"),
            "t.yaml:4:5: field 'steps[0]': found step 'allreduce', allowed fill, all_reduce, "
            "retain, unretain, release, free, add, expect_unchanged, expect_equal, repeat, "
            "capture_graph, launch_graph");
}

TEST(ScenarioLoaderTest, UnknownTensorListsTheDeclaredOnes) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n"
                    "  - fill: {tensor: x}\n  - all_reduce: {input: x, result: z}\n"),
            "t.yaml:5:36: field 'steps[1].all_reduce.result': found unknown tensor 'z', allowed "
            "a tensor declared under 'tensors': x, y");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - retain: q\n"),
            "t.yaml:4:13: field 'steps[0].retain.tensor': found unknown tensor 'q', allowed a "
            "tensor declared under 'tensors': x");
}

TEST(ScenarioLoaderTest, ShapeMustDivideByWorldTimesEight) {
  EXPECT_EQ(ErrorOf("world: 4\ntensors:\n  x: [3, 5]\nsteps: []\n"),
            "t.yaml:3:6: field 'tensors.x': found shape [3, 5] (15 elements), allowed an element "
            "count divisible by world*8 = 32");
}

TEST(ScenarioLoaderTest, NegativeOrZeroSizeIsRejected) {
  EXPECT_EQ(ErrorOf("world: 2\nshapes:\n  h: [16, -4]\ntensors: {x: h}\nsteps: []\n"),
            "t.yaml:3:11: field 'shapes.h[1]': found size -4, allowed a positive integer");
  EXPECT_EQ(ErrorOf("world: 2\ntensors:\n  x: [0, 64]\nsteps: []\n"),
            "t.yaml:3:7: field 'tensors.x[0]': found size 0, allowed a positive integer");
}

TEST(ScenarioLoaderTest, DuplicateNamesAreRejected) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors:\n  x: [64]\n  x: [128]\nsteps: []\n"),
            "t.yaml:4:3: field 'tensors': found duplicate name 'x' (first at line 3), allowed "
            "each name once");
  EXPECT_EQ(ErrorOf("world: 2\nworld: 3\ntensors: {x: [64]}\nsteps: []\n"),
            "t.yaml:2:1: field 'world': found it a second time (first at line 1), allowed each "
            "field once");
}

TEST(ScenarioLoaderTest, BadYamlSyntaxIsLocated) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]\nsteps: []\n"),
            "t.yaml:3:1: field '(document)': found invalid YAML (end of map flow not found), "
            "allowed YAML syntax");
}

TEST(ScenarioLoaderTest, UnknownWireModeAndDtypeListTheAllowedNames) {
  EXPECT_EQ(ErrorOf("world: 2\nwire: int8\ntensors: {x: [64]}\nsteps: []\n"),
            "t.yaml:2:7: field 'wire': found 'int8', allowed bf16, i8, i8_ring, i8_a2a, e4m3, "
            "e4m3_ring, e4m3_a2a");
  EXPECT_EQ(ErrorOf("world: 2\ndtype: f32\ntensors: {x: [64]}\nsteps: []\n"),
            "t.yaml:2:8: field 'dtype': found 'f32', allowed bf16, fp16, fp32");
  EXPECT_EQ(ErrorOf("world: 2\ntensors:\n  x: {shape: [64], dtype: int8}\nsteps: []\n"),
            "t.yaml:3:27: field 'tensors.x.dtype': found 'int8', allowed bf16, fp16, fp32");
}

TEST(ScenarioLoaderTest, WorldMustBeTwoToSixteen) {
  EXPECT_EQ(ErrorOf("world: 17\ntensors: {x: [256]}\nsteps: []\n"),
            "t.yaml:1:8: field 'world': found 17, allowed an integer in 2..16");
  EXPECT_EQ(ErrorOf("world: 1\ntensors: {x: [256]}\nsteps: []\n"),
            "t.yaml:1:8: field 'world': found 1, allowed an integer in 2..16");
}

TEST(ScenarioLoaderTest, UnknownFieldListsTheFieldsOfItsMap) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x, sed: 1}\n"),
            "t.yaml:4:23: field 'steps[0].fill.sed': found an unknown field, allowed fields "
            "tensor, kind, seed, lo, hi, ranks, label");
}

TEST(ScenarioLoaderTest, IntegerFillsMustBeExactInTheDtype) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n"
                    "  - fill: {tensor: x, kind: int, lo: 0, hi: 1000}\n"),
            "t.yaml:4:45: field 'steps[0].fill.hi': found 1000, allowed an integer in -256..256");
}

TEST(ScenarioLoaderTest, AllReduceNeedsExactlyOneOutputForm) {
  EXPECT_EQ(
      ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n"
              "  - fill: {tensor: x}\n  - all_reduce: {input: x, result: y, in_place: true}\n"),
      "t.yaml:5:17: field 'steps[1].all_reduce': found 2 of result, out, in_place: true, "
      "allowed exactly one of result (default form), out (explicit form), in_place: true");
}

TEST(ScenarioLoaderTest, OperandsMustAgreeInShape) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64], y: [128]}\nsteps:\n"
                    "  - fill: {tensor: x}\n  - all_reduce: {input: x, result: y}\n"),
            "t.yaml:5:36: field 'steps[1].all_reduce.result': found 'y' of bf16 [128], allowed a "
            "tensor of bf16 [64] like 'x' (field 'steps[1].all_reduce.input')");
}

TEST(ScenarioLoaderTest, StepsMayOnlyUseLiveTensors) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n"
                    "  - all_reduce: {input: x, result: y}\n"),
            "t.yaml:4:25: field 'steps[0].all_reduce.input': found tensor 'x', which is not live "
            "at this step, allowed a live tensor (made live by fill, add or an all_reduce result, "
            "not yet released)");
  // The second iteration binds y again while the first one's y is still live.
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
                    "  - repeat:\n      times: 2\n      steps:\n"
                    "        - all_reduce: {input: x, result: y}\n"),
            "t.yaml:8:42: field 'steps[1].repeat.steps[0].all_reduce.result': found tensor 'y', "
            "which is still live in iteration 2, allowed a tensor that is not live (release it "
            "first)");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
                    "  - expect_unchanged: x\n"),
            "t.yaml:5:23: field 'steps[1].expect_unchanged.tensor': found tensor 'x', which is "
            "not retained, allowed a tensor retained by an earlier retain step");
}

TEST(ScenarioLoaderTest, HostStepsMayRunOnSomeRanks) {
  absl::StatusOr<Scenario> s = ParseScenario(
      "world: 4\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - release: {tensor: x, ranks: [3, 1]}\n"
      "  - fill: {tensor: x, seed: 2, ranks: [1, 3]}\n"
      "  - add: {dst: x, a: x, b: x, ranks: [0]}\n"
      "  - all_reduce: {input: x, result: y}\n",
      "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps[1].ranks, (std::vector<int>{1, 3}));  // ascending
  EXPECT_EQ(s->steps[2].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(s->steps[3].ranks, (std::vector<int>{0}));
  EXPECT_TRUE(s->steps[0].ranks.empty());
  EXPECT_TRUE(s->steps[1].OnRank(3));
  EXPECT_FALSE(s->steps[1].OnRank(2));
  EXPECT_TRUE(s->steps[0].OnRank(2));
  EXPECT_EQ(s->steps[1].Describe(), "release on ranks 1, 3 at t.yaml:5:5");
  EXPECT_EQ(s->steps[3].Describe(), "add on rank 0 at t.yaml:7:5");
}

TEST(ScenarioLoaderTest, RanksMustBeADistinctListOfTheWorldsRanks) {
  const std::string head = "world: 4\ntensors: {x: [64], y: [64]}\nsteps:\n";
  EXPECT_EQ(ErrorOf(head + "  - fill: {tensor: x, ranks: [4]}\n"),
            "t.yaml:4:31: field 'steps[0].fill.ranks[0]': found 4, allowed an integer in 0..3");
  EXPECT_EQ(ErrorOf(head + "  - fill: {tensor: x, ranks: [1, 1]}\n"),
            "t.yaml:4:34: field 'steps[0].fill.ranks[1]': found rank 1 a second time, allowed a "
            "non-empty list of distinct ranks in 0..3");
  EXPECT_EQ(ErrorOf(head + "  - fill: {tensor: x, ranks: []}\n"),
            "t.yaml:4:30: field 'steps[0].fill.ranks': found an empty list, allowed a non-empty "
            "list of distinct ranks in 0..3");
  EXPECT_THAT(ErrorOf(head + "  - fill: {tensor: x, ranks: 1}\n"),
              HasSubstr("field 'steps[0].fill.ranks': found"));
  // Collective steps run on every rank.
  EXPECT_THAT(ErrorOf(head + "  - fill: {tensor: x}\n  - all_reduce: {input: x, result: y, "
                             "ranks: [0]}\n"),
              HasSubstr("field 'steps[1].all_reduce.ranks': found an unknown field"));
  EXPECT_THAT(ErrorOf(head + "  - fill: {tensor: x}\n  - retain: {tensor: x, ranks: [0]}\n"),
              HasSubstr("field 'steps[1].retain.ranks': found an unknown field"));
}

TEST(ScenarioLoaderTest, ATensorReleasedOnSomeRanksIsNotLiveThere) {
  const std::string head =
      "world: 4\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - release: {tensor: x, ranks: [1, 2]}\n";
  EXPECT_EQ(ErrorOf(head + "  - all_reduce: {input: x, result: y}\n"),
            "t.yaml:6:25: field 'steps[2].all_reduce.input': found tensor 'x', which is not live "
            "on ranks 1, 2 at this step (released there by a step with ranks:), allowed a live "
            "tensor (made live by fill, add or an all_reduce result, not yet released) on every "
            "rank the step runs on");
  // On the ranks where it is live, a host step may use it; a second release there may not.
  EXPECT_EQ(ErrorOf(head + "  - add: {dst: y, a: x, b: x, ranks: [0, 3]}\n"), "OK");
  EXPECT_EQ(ErrorOf(head + "  - release: {tensor: x, ranks: [2]}\n"),
            "t.yaml:6:23: field 'steps[2].release.tensor': found tensor 'x', which is not live "
            "at this step, allowed a live tensor (made live by fill, add or an all_reduce result, "
            "not yet released)");
  // Live again on every rank once refilled there.
  EXPECT_EQ(ErrorOf(head + "  - fill: {tensor: x, ranks: [1, 2]}\n"
                           "  - all_reduce: {input: x, result: y}\n"),
            "OK");
  // A result name live on some ranks is still live.
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
                    "  - fill: {tensor: y, ranks: [1]}\n  - all_reduce: {input: x, result: y}\n"),
            "t.yaml:6:36: field 'steps[2].all_reduce.result': found tensor 'y', which is still "
            "live on rank 1, allowed a tensor that is not live (release it first)");
}

TEST(ScenarioLoaderTest, ARetainedTensorIsReleasedOnEveryRankOrNone) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
                    "  - retain: x\n  - release: {tensor: x, ranks: [0]}\n"),
            "t.yaml:6:33: field 'steps[2].release.ranks': found a release on rank 0 of tensor "
            "'x', which is retained, allowed a release on some ranks of a tensor that is not "
            "retained (a retained tensor is checked on every rank: unretain it first)");
}

TEST(ScenarioLoaderTest, RanksAreRefusedInsideACapture) {
  EXPECT_EQ(
      ErrorOf("world: 2\ntensors: {x: [64], y: [64]}\nsteps:\n  - fill: {tensor: x}\n"
              "  - fill: {tensor: y}\n  - capture_graph:\n      name: g\n      steps:\n"
              "        - add: {dst: y, a: x, b: x, ranks: [1]}\n"),
      "t.yaml:9:44: field 'steps[2].capture_graph.steps[0].add.ranks': found ranks: on "
      "step 'add' inside capture_graph 'g', allowed ranks: outside captures (a graph's launch "
      "replays its device work on every rank)");
}

TEST(ScenarioLoaderTest, ACaptureTakesAllReducesOfEveryFormAndReleasesOfItsOwnResults) {
  constexpr char kHead[] =
      "world: 2\ntensors: {x: [64], y: [64], z: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - capture_graph:\n      name: g\n      steps:\n";
  // A fresh result inside a capture comes from the graph's pool; it may be released there, and
  // the next result may take its block.
  auto s = ParseScenario(absl::StrCat(kHead,
                                      "        - all_reduce: {input: x, result: y}\n"
                                      "        - release: y\n"
                                      "        - all_reduce: {input: x, result: z}\n"
                                      "  - launch_graph: g\n"),
                         "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps[1].body.size(), 3u);
  // A tensor made outside the capture is released before or after it.
  EXPECT_EQ(ErrorOf(absl::StrCat(kHead, "        - release: x\n")),
            "t.yaml:8:20: field 'steps[1].capture_graph.steps[0].release.tensor': found tensor 'x' "
            "inside capture_graph 'g', made outside it, allowed the release of an all_reduce "
            "result made earlier in the same capture (its block returns to the graph's private "
            "pool); release the others before or after the capture");
  // Host steps stay outside.
  EXPECT_EQ(ErrorOf(absl::StrCat(kHead, "        - fill: {tensor: x}\n")),
            "t.yaml:8:11: field 'steps[1].capture_graph.steps[0]': found a fill step, allowed "
            "all_reduce (a fresh result: comes from the graph's private pool), add with a live "
            "dst, and release of a tensor made in this capture (a graph replays device work: no "
            "host access)");
}

TEST(ScenarioLoaderTest, ExpectationsNameKnownFaults) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps: []\n"
                    "expect:\n  - {faults: persistent, status: FAIL}\n"),
            "t.yaml:5:14: field 'expect[0].faults': found 'persistent', allowed none or a "
            "comma-separated list of persistent-output, drop-copy-wait, skip-end-handshake, "
            "early-return, flag-ready-not-consumed, graph-output-freed, inplace-alias-ring, "
            "owner-keeps-prequant");
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps: []\nexpect:\n  - {status: OK}\n"),
            "t.yaml:5:14: field 'expect[0].status': found 'OK', allowed PASS, FAIL");
}

TEST(ScenarioLoaderTest, MissingFileIsNotFound) {
  auto s = LoadScenarioFile("/nonexistent/x.yaml");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent/x.yaml"));
}

TEST(ScenarioLoaderTest, EveryShippedScenarioLoads) {
  for (const char* name :
       {"glm52_tp4_layer0_residual", "glm5_tp8_prefill", "glm5_tp8_decode", "llama70b_tp8_prefill",
        "llama70b_tp8_decode", "mtp_fused_residual_tp4", "explicit_outputs_tp3"}) {
    auto s = LoadScenarioFile(std::string("scenarios/") + name + ".yaml");
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->name, name);
    EXPECT_FALSE(s->expect.empty()) << name;
  }
}

// Issue 15 (a reliability probe), items 1, 2, 12 and 13: inputs that crashed, exhausted memory or
// gave unclear messages are located errors now.
TEST(ScenarioLoaderTest, AnAliasCycleIsALocatedError) {
  // Was endless recursion in the step walk (SIGSEGV).
  EXPECT_EQ(ErrorOf("world: 4\ntensors: {x: [64]}\nsteps: &s\n  - repeat: {times: 2, steps: *s}\n"),
            "t.yaml:4:13: field 'steps[0].repeat.steps': found an alias to a list or map that "
            "contains the alias (a cycle), allowed aliases to nodes outside themselves");
}

TEST(ScenarioLoaderTest, AliasExpansionIsBounded) {
  // 8^6 * 4 fills from a few hundred bytes: was bad_alloc after gigabytes.
  std::string yaml = "world: 2\ntensors: {x: [64]}\na: &a [{fill: x}";
  for (int i = 1; i < 8; ++i) yaml += ", {fill: x}";
  yaml += "]\n";
  for (char level = 'b'; level <= 'f'; ++level) {
    absl::StrAppendFormat(&yaml, "%c: &%c [", level, level);
    for (int i = 0; i < 8; ++i) absl::StrAppendFormat(&yaml, "%s*%c", i ? ", " : "", level - 1);
    yaml += "]\n";
  }
  yaml += "steps: [*f, *f, *f, *f]\n";
  const std::string error = ErrorOf(yaml);
  EXPECT_THAT(error, ::testing::StartsWith("t.yaml:"));
  EXPECT_THAT(error, HasSubstr(": found more than 100000 YAML nodes once aliases are expanded, "
                               "allowed at most 100000 (every use of an alias counts its "
                               "anchor's nodes again)"));
  // Anchors go where the format has a field: a top-level key of their own is unknown.
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\ns: &s [{fill: x}, {release: x}]\n"
                    "steps: [{repeat: {times: 2, steps: *s}}, {repeat: {times: 3, steps: *s}}]\n"),
            "t.yaml:3:1: field 's': found an unknown field, allowed fields name, description, "
            "world, dtype, wire, seed, topology, shapes, tensors, steps, expect");
  // Shared, acyclic aliases within the bound are fine: the same step list twice.
  auto s = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - repeat: {times: 2, steps: &s [{fill: {tensor: "
      "x}}, {release: x}]}\n  - repeat: {times: 3, steps: *s}\n",
      "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ExpandedStepCount(), 10);
}

TEST(ScenarioLoaderTest, TooDeepNestingHasItsOwnMessage) {
  // 80 nested lists: the 63rd inside 'steps' (column 8 + 63) is the 65th level.
  const std::string deep =
      "world: 2\ntensors: {x: [64]}\nsteps: " + std::string(80, '[') + std::string(80, ']') + "\n";
  std::string path = "steps";
  for (int i = 0; i < 63; ++i) path += "[0]";
  EXPECT_EQ(ErrorOf(deep), "t.yaml:3:71: field '" + path +
                               "': found lists and maps nested more than 64 deep, allowed at "
                               "most 64 levels of nesting");
  // Deeper than yaml-cpp's own parser limit (2000): the same message, not "invalid YAML".
  const std::string deeper = "world: 2\ntensors: {x: [64]}\nsteps: " + std::string(3000, '[') +
                             std::string(3000, ']') + "\n";
  const std::string error = ErrorOf(deeper);
  EXPECT_THAT(error, ::testing::StartsWith("t.yaml:3:"));
  EXPECT_THAT(error, ::testing::EndsWith(": field '(document)': found lists and maps nested more "
                                         "than 64 deep, allowed at most 64 levels of nesting"));
}

TEST(ScenarioLoaderTest, ASecondDocumentIsAnError) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps: [{fill: x}]\n---\nworld: 3\n"),
            "t.yaml:5:1: field '(document)': found a second YAML document, allowed one document "
            "per scenario file");
  // A leading document marker is one document.
  EXPECT_EQ(ErrorOf("---\nworld: 2\ntensors: {x: [64]}\nsteps: [{fill: {tensor: x}}]\n"), "OK");
}

TEST(ScenarioLoaderTest, ANonScalarKeyIsALocatedError) {
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {x: [64]}\nsteps: [{fill: x}]\n? [a, b]\n: 1\n"),
            "t.yaml:4:3: field '(document)': found a key that is a list, allowed scalar keys only");
  // Was silently the tensor named "".
  EXPECT_EQ(ErrorOf("world: 2\ntensors: {[a]: [64]}\nsteps: [{fill: x}]\n"),
            "t.yaml:2:11: field 'tensors': found a key that is a list, allowed scalar keys only");
}

TEST(ScenarioLoaderTest, InputSizeIsCapped) {
  EXPECT_EQ(ErrorOf(std::string(kMaxScenarioFileBytes + 1, '#')),
            "t.yaml:1:1: field '(document)': found 4194305 bytes, allowed a scenario of at most "
            "4194304 bytes");
  // An endless file is read no further than the cap.
  auto s = LoadScenarioFile("/dev/zero");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "/dev/zero: found more than 4194304 bytes, allowed a scenario file of at most "
            "4194304 bytes");
}

TEST(ScenarioLoaderTest, ADirectoryIsNamedAsSuch) {
  auto s = LoadScenarioFile("scenarios");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "scenarios: is a directory, allowed a scenario file");
}

TEST(ScenarioLoaderTest, ExpandedStepCountSaturates) {
  // 1 + 10^6^4 steps do not fit in int64 (was signed overflow).
  auto s = ParseScenario(
      "world: 2\ntensors: {x: [64]}\nsteps:\n  - fill: {tensor: x}\n"
      "  - repeat: {times: 1000000, steps: [{repeat: {times: 1000000, steps: [{repeat: {times: "
      "1000000, steps: [{repeat: {times: 1000000, steps: [{fill: {tensor: x}}]}}]}}]}}]}\n",
      "t.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ExpandedStepCount(), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace dmalab
