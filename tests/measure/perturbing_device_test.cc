// The schedule-perturbing decorator (measure/perturbing_device.h) on the simulator, with a spin
// that records instead of delaying: it forwards every call unchanged, the perturbation is a pure
// function of the seed and the calls, and a failing spin names the seed and the operation.
#include "measure/perturbing_device.h"

#include <string>
#include <utility>
#include <vector>

#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"

namespace dmalab {
namespace {

using ::testing::HasSubstr;

// (stream, ns) of every spin, and every pause's ns.
struct Recorded {
  std::vector<std::pair<StreamId, uint64_t>> spins;
  std::vector<uint64_t> pauses;
};

PerturbingDevice::SpinFn RecordSpins(Recorded* r) {
  return [r](StreamId stream, uint64_t ns) {
    r->spins.emplace_back(stream, ns);
    return absl::OkStatus();
  };
}

PerturbingDevice::PauseFn RecordPauses(Recorded* r) {
  return [r](uint64_t ns) { r->pauses.push_back(ns); };
}

Scenario Explicit() {
  absl::StatusOr<Scenario> s = LoadScenarioFile("scenarios/explicit_outputs_tp3.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

ReplayReport ReplayThrough(Device& device, SimDevice& sim, const Scenario& s) {
  ReplayOptions o;
  o.poll_device_findings = NewFindingsPoller(sim);
  absl::StatusOr<ReplayReport> r = Replay(s, &device, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayReport{};
}

std::vector<uint64_t> Hashes(const ReplayReport& r) {
  std::vector<uint64_t> h;
  for (const AllReduceRecord& a : r.all_reduces) h.push_back(a.hash);
  return h;
}

TEST(PerturbingDeviceTest, ForwardsEveryCallSoAReplayGivesTheSameBytesAndVerdict) {
  const Scenario s = Explicit();
  SimDevice plain(s.world, 7);
  const ReplayReport expected = ReplayThrough(plain, plain, s);
  ASSERT_TRUE(expected.pass());

  SimDevice inner(s.world, 7);
  Recorded rec;
  PerturbOptions o;
  o.seed = 3;
  PerturbingDevice perturbed(inner, o, RecordSpins(&rec), RecordPauses(&rec));
  const ReplayReport got = ReplayThrough(perturbed, inner, s);
  EXPECT_TRUE(got.pass());
  EXPECT_EQ(Hashes(got), Hashes(expected));
  EXPECT_EQ(inner.ops_executed(), plain.ops_executed());  // the spins went to the recorder
  EXPECT_GT(perturbed.tally().ops, 0);
  EXPECT_EQ(perturbed.tally().spins, static_cast<int64_t>(rec.spins.size()));
  EXPECT_EQ(perturbed.tally().pauses, static_cast<int64_t>(rec.pauses.size()));
}

TEST(PerturbingDeviceTest, TheSameSeedGivesTheSamePerturbationAndAnotherSeedAnother) {
  const Scenario s = Explicit();
  const auto run = [&](uint64_t seed) {
    SimDevice inner(s.world, 1);
    Recorded rec;
    PerturbOptions o;
    o.seed = seed;
    PerturbingDevice perturbed(inner, o, RecordSpins(&rec), RecordPauses(&rec));
    ReplayThrough(perturbed, inner, s);
    return rec;
  };
  const Recorded a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a.spins, b.spins);
  EXPECT_EQ(a.pauses, b.pauses);
  EXPECT_NE(a.spins, c.spins);
  // Drawn with the options' rates and lengths (30% spins, 10% pauses by default).
  ASSERT_FALSE(a.spins.empty());
  ASSERT_FALSE(a.pauses.empty());
  for (const auto& [stream, ns] : a.spins) {
    EXPECT_THAT(PerturbOptions().spin_ns, ::testing::Contains(ns));
  }
  for (uint64_t ns : a.pauses) EXPECT_THAT(PerturbOptions().pause_ns, ::testing::Contains(ns));
}

TEST(PerturbingDeviceTest, RatesOfZeroAndOneHundredPercentAreNoneAndEvery) {
  SimDevice inner(2, 1);
  Recorded rec;
  PerturbOptions o;
  o.spin_percent = 100;
  o.pause_percent = 0;
  o.spin_ns = {1234};
  PerturbingDevice perturbed(inner, o, RecordSpins(&rec), RecordPauses(&rec));
  absl::StatusOr<EventId> e = perturbed.CreateEvent(1);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(perturbed.RecordEvent(*e, perturbed.ComputeStream(1)).ok());
  ASSERT_TRUE(perturbed.WaitEvent(perturbed.ComputeStream(0), *e).ok());
  EXPECT_EQ(rec.spins,
            (std::vector<std::pair<StreamId, uint64_t>>{{perturbed.ComputeStream(1), 1234},
                                                        {perturbed.ComputeStream(0), 1234}}));
  EXPECT_TRUE(rec.pauses.empty());
  EXPECT_EQ(perturbed.tally().spin_ns, 2468u);
}

TEST(PerturbingDeviceTest, AFailingSpinStopsTheOperationNamingTheSeedAndTheOperation) {
  SimDevice inner(2, 1);
  PerturbOptions o;
  o.seed = 9;
  o.spin_percent = 100;
  PerturbingDevice perturbed(
      inner, o, [](StreamId, uint64_t) { return absl::UnavailableError("no GPU"); },
      [](uint64_t) {});
  absl::StatusOr<EventId> e = perturbed.CreateEvent(0);
  ASSERT_TRUE(e.ok());
  const absl::Status s = perturbed.RecordEvent(*e, perturbed.ComputeStream(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "perturbation (seed 9, operation 1): no GPU");
  EXPECT_EQ(inner.ops_executed(), 0);
}

// Before each step (SetContext) every rank's compute stream gets its own draw, so collectives that
// launch their own work see the ranks start at different times; a spin that fails there is
// returned by the next enqueued operation.
TEST(PerturbingDeviceTest, EachStepBoundaryPerturbsEveryRanksComputeStream) {
  SimDevice inner(3, 1);
  Recorded rec;
  PerturbOptions o;
  o.spin_percent = 100;
  o.spin_ns = {5};
  PerturbingDevice perturbed(inner, o, RecordSpins(&rec), RecordPauses(&rec));
  perturbed.SetContext("step 1");
  EXPECT_EQ(rec.spins, (std::vector<std::pair<StreamId, uint64_t>>{{inner.ComputeStream(0), 5},
                                                                   {inner.ComputeStream(1), 5},
                                                                   {inner.ComputeStream(2), 5}}));

  int calls = 0;
  PerturbingDevice failing(
      inner, o,
      [&calls](StreamId, uint64_t) {
        return ++calls == 2 ? absl::InternalError("launch failed") : absl::OkStatus();
      },
      [](uint64_t) {});
  failing.SetContext("step 1");
  EXPECT_EQ(calls, 2);  // stopped at the failing rank
  absl::StatusOr<EventId> e = failing.CreateEvent(0);
  ASSERT_TRUE(e.ok());
  const absl::Status s = failing.RecordEvent(*e, failing.ComputeStream(0));
  EXPECT_EQ(s.message(), "perturbation (seed 1, operation 2): launch failed");
  EXPECT_TRUE(failing.RecordEvent(*e, failing.ComputeStream(0)).ok());  // reported once
}

}  // namespace
}  // namespace dmalab
