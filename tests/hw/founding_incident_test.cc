// The founding incident on the GPU: the same scenario files as on the simulator, the same
// verdicts, and output hashes equal to the simulator's. Skips without a GPU.
#include "dmalab/replay.h"
#include "dmalab/scenario_loader.h"
#include "gtest/gtest.h"
#include "sim/sim_device.h"
#include "tests/hw/gpu_test_support.h"

namespace dmalab {
namespace {

class FoundingIncidentTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FoundingIncidentTest, GpuGivesTheSimulatorsVerdictsAndHashes) {
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(GetParam());
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  for (const char* faults : {"none", "persistent-output"}) {
    ReplayOptions options;
    options.faults = *FaultSet::Parse(faults);
    DMALAB_CUDA_DEVICE_OR_SKIP(gpu, scenario->world, 1);
    absl::StatusOr<ReplayReport> on_gpu = Replay(*scenario, gpu.get(), options);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    SimDevice sim(scenario->world, 1);
    absl::StatusOr<ReplayReport> on_sim = Replay(*scenario, &sim, options);
    ASSERT_TRUE(on_sim.ok()) << on_sim.status();

    const bool fault = std::string(faults) != "none";
    EXPECT_EQ(on_gpu->pass(), !fault) << faults;
    EXPECT_EQ(on_gpu->pointer_alias, fault) << faults;
    EXPECT_EQ(on_gpu->retained_mismatches, fault ? 16803840 : 0) << faults;
    EXPECT_EQ(on_gpu->retained_elems, 16803840) << faults;
    EXPECT_TRUE(on_gpu->rank_consistent) << faults;
    ASSERT_EQ(on_gpu->all_reduces.size(), 2u);
    ASSERT_EQ(on_sim->all_reduces.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(on_gpu->all_reduces[i].hash, on_sim->all_reduces[i].hash) << faults << " " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Wires, FoundingIncidentTest,
                         ::testing::Values("scenarios/glm52_tp4_layer0_residual.yaml",
                                           "scenarios/glm52_tp4_layer0_residual_i8_ring.yaml"));

}  // namespace
}  // namespace dmalab
