// The size-regime family (common/scenario/size_family.h): which worlds, token counts, hidden
// sizes, byte thresholds and forms its generated scenarios cover, that each loads, and that the
// ring passes each (shadow fidelity here, for speed; the Zoo test replays them with values).
#include "common/scenario/size_family.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::ElementsAre;

std::vector<Scenario> LoadAll() {
  std::vector<Scenario> all;
  for (const SizeFamilyMember& m : SizeFamily()) {
    absl::StatusOr<Scenario> s = ParseScenario(m.yaml, m.file);
    EXPECT_TRUE(s.ok()) << m.file << ": " << s.status();
    if (s.ok()) {
      EXPECT_EQ(s->world, m.world);
      all.push_back(*std::move(s));
    }
  }
  return all;
}

// Every all-reduce step, captured ones included, with its input's declaration.
void AllReduces(const Scenario& s, const std::vector<Step>& steps,
                std::vector<std::pair<const Step*, const TensorDecl*>>* out) {
  for (const Step& step : steps) {
    if (step.kind == StepKind::kAllReduce) out->emplace_back(&step, s.FindTensor(step.input));
    AllReduces(s, step.body, out);
  }
}

TEST(SizeFamilyTest, FiveRegimesAtTwoThreeFourAndEightRanks) {
  std::vector<std::string> files;
  for (const SizeFamilyMember& m : SizeFamily()) files.push_back(m.file);
  ASSERT_EQ(files.size(), 20u);
  EXPECT_THAT(
      std::vector<std::string>(files.begin(), files.begin() + 5),
      ElementsAre("sizes/w2_decode.yaml", "sizes/w2_decode_graph.yaml", "sizes/w2_batch.yaml",
                  "sizes/w2_prefill.yaml", "sizes/w2_thresholds.yaml"));
  EXPECT_EQ(files.back(), "sizes/w8_thresholds.yaml");
  EXPECT_EQ(SizeFamily()[0].yaml, SizeFamily()[0].yaml);  // the same text every call
}

TEST(SizeFamilyTest, TokensFromOneTo8192AtEveryHiddenSizeInEveryForm) {
  std::map<int, std::set<int64_t>> tokens, hiddens;  // by world
  std::map<int, std::set<AllReduceForm>> forms;
  for (const Scenario& s : LoadAll()) {
    std::vector<std::pair<const Step*, const TensorDecl*>> calls;
    AllReduces(s, s.steps, &calls);
    for (const auto& [step, decl] : calls) {
      forms[s.world].insert(step->form);
      if (decl->shape.size() != 2) continue;
      tokens[s.world].insert(decl->shape[0]);
      hiddens[s.world].insert(decl->shape[1]);
    }
  }
  const std::set<int64_t> all_tokens = {1,   2,   4,   8,    16,   32,   64,
                                        128, 256, 512, 1024, 2048, 4096, 8192};
  const std::set<int64_t> all_hiddens = {2048, 4096, 5120, 6144, 7168, 8192};
  for (int world : {2, 4, 8}) {
    EXPECT_EQ(tokens[world], all_tokens) << world;
    EXPECT_EQ(hiddens[world], all_hiddens) << world;
  }
  // At 3 ranks the ring's rule (elements divisible by 24) leaves hidden 6144 for the token
  // counts that are powers of two, which within 32 MiB reach 2048 tokens.
  EXPECT_EQ(tokens[3], std::set<int64_t>(all_tokens.begin(), all_tokens.find(4096)));
  EXPECT_EQ(hiddens[3], std::set<int64_t>{6144});
  for (int world : {2, 3, 4, 8}) {
    EXPECT_EQ(forms[world], (std::set<AllReduceForm>{AllReduceForm::kDefault, AllReduceForm::kOut,
                                                     AllReduceForm::kInPlace}))
        << world;
  }
}

TEST(SizeFamilyTest, BothSidesOfEveryPowerOfTwoFromOneKiBTo64MiB) {
  for (const Scenario& s : LoadAll()) {
    if (s.name.find("thresholds") == std::string::npos) continue;
    std::vector<std::pair<const Step*, const TensorDecl*>> calls;
    AllReduces(s, s.steps, &calls);
    std::set<uint64_t> bytes;
    for (const auto& [step, decl] : calls) bytes.insert(decl->bytes());
    const uint64_t largest = s.world == 8 ? 16ull << 20 : 64ull << 20;
    const uint64_t step = 16ull * s.world;  // 8 W bf16 elements
    for (uint64_t p = 1024; p <= largest; p *= 2) {
      const uint64_t at = p / step * step;
      EXPECT_TRUE(bytes.count(at)) << s.name << " " << p;
      EXPECT_EQ(bytes.count(at + step), p <= largest / 4 ? 1u : 0u) << s.name << " " << p;
    }
    EXPECT_EQ(*bytes.rbegin(), largest / step * step) << s.name;
  }
}

// Every fill is an integer fill within 256 / W in magnitude (a produced input is a sum of two
// fills within half of it), so every all-reduce's sum is exact in bf16 and checked.
void CheckFills(const Scenario& s, const std::vector<Step>& steps) {
  for (const Step& step : steps) {
    if (step.kind == StepKind::kFill) {
      EXPECT_EQ(step.fill_kind, FillKind::kInt) << s.name << " " << step.Describe();
      EXPECT_LE(std::max(-step.lo, step.hi), 256 / s.world) << s.name << " " << step.Describe();
    }
    CheckFills(s, step.body);
  }
}

TEST(SizeFamilyTest, EveryAllReduceHasIntegerInputsWhoseSumIsExact) {
  for (const Scenario& s : LoadAll()) CheckFills(s, s.steps);
}

TEST(SizeFamilyTest, TheRingPassesEveryMember) {
  for (const Scenario& s : LoadAll()) {
    SimDevice device(s.world, 1, Fidelity::kShadow);
    ReplayOptions o;
    o.poll_device_findings = NewFindingsPoller(device);
    absl::StatusOr<ReplayReport> r = Replay(s, &device, o);
    ASSERT_TRUE(r.ok()) << s.name << ": " << r.status();
    EXPECT_TRUE(r->pass()) << s.name;
    EXPECT_GT(r->all_reduces_total, 0) << s.name;
  }
}

}  // namespace
}  // namespace dmalab
