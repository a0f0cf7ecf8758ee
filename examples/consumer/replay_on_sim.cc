// replay_on_sim SCENARIO.yaml [FAULTS]: replays a scenario on dmalab's simulator with the
// scenario's seed, optionally with injected faults ("persistent-output", ...), and prints the
// summary line. Exit status: 0 PASS, 1 a check failed, 2 bad input.
#include <dmalab/faults.h>
#include <dmalab/replay.h>
#include <dmalab/report.h>
#include <dmalab/scenario_loader.h>
#include <dmalab/sim.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: replay_on_sim SCENARIO.yaml [FAULTS]\n");
    return 2;
  }
  absl::StatusOr<dmalab::Scenario> scenario = dmalab::LoadScenarioFile(argv[1]);
  if (!scenario.ok()) {
    std::fprintf(stderr, "replay_on_sim: %s\n", std::string(scenario.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<dmalab::FaultSet> faults = dmalab::FaultSet::Parse(argc == 3 ? argv[2] : "");
  if (!faults.ok()) {
    std::fprintf(stderr, "replay_on_sim: %s\n", std::string(faults.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<dmalab::Device> device = dmalab::NewSimDevice(scenario->world, scenario->seed);
  dmalab::ReplayOptions options;
  options.faults = *faults;
  options.poll_device_findings = dmalab::NewFindingsPoller(*device);
  absl::StatusOr<dmalab::ReplayReport> report = dmalab::Replay(*scenario, device.get(), options);
  if (!report.ok()) {
    std::fprintf(stderr, "replay_on_sim: %s\n", std::string(report.status().message()).c_str());
    return 2;
  }
  std::printf("%s\n", dmalab::SummaryLine(*report).c_str());
  return report->pass() ? 0 : 1;
}
