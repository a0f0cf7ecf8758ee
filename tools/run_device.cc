#include "tools/run_device.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "measure/hw_backend.h"

namespace dmalab {

absl::Status CheckDeviceChoice(const DeviceChoice& choice) {
  if (choice.backend != "sim" && choice.backend != "hw") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--backend is '%s'; allowed: sim, hw", choice.backend));
  }
  if (choice.perturb_seed && choice.backend != "hw") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--perturb=%d needs --backend=hw: it delays work on real GPUs; on the simulator the "
        "scheduling seed (--seed, --seeds) already chooses every order",
        *choice.perturb_seed));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunDevice> RunDevice::Make(const DeviceChoice& choice, int world,
                                          uint64_t scheduling_seed) {
  if (absl::Status s = CheckDeviceChoice(choice); !s.ok()) return s;
  RunDevice d;
  if (choice.backend == "sim") {
    auto sim = std::make_unique<SimDevice>(world, scheduling_seed, choice.fidelity);
    d.sim_ = sim.get();
    d.base_ = std::move(sim);
    d.scheduling_seed_ = scheduling_seed;
    return d;
  }
  HwDeviceOptions options;
  options.stream_priority_seed = choice.perturb_seed;
  absl::StatusOr<std::unique_ptr<Device>> hw = CreateHwDevice(world, choice.gpus, options);
  if (!hw.ok()) return hw.status();
  d.base_ = *std::move(hw);
  if (choice.perturb_seed) {
    PerturbOptions p;
    p.seed = *choice.perturb_seed;
    Device* base = d.base_.get();
    d.perturbing_ = std::make_unique<PerturbingDevice>(
        *base, p, [base](StreamId stream, uint64_t ns) { return HwSpin(*base, stream, ns); });
    d.perturb_seed_ = choice.perturb_seed;
  }
  return d;
}

absl::StatusOr<ReplayReport> RunDevice::Replay(const Scenario& scenario, ReplayOptions options) {
  if (sim_ != nullptr) options.poll_device_findings = NewFindingsPoller(*sim_);
  absl::StatusOr<ReplayReport> report = dmalab::Replay(scenario, get(), options);
  if (!report.ok()) return report;
  report->scheduling_seed = scheduling_seed_;
  report->perturb_seed = perturb_seed_;
  return report;
}

}  // namespace dmalab
