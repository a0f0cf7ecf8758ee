#include "runner/run_device.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "dmalab/hw.h"

namespace dmalab {

absl::Status CheckDeviceChoice(const DeviceChoice& choice) {
  if (choice.backend != "sim" && choice.backend != "hw") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--backend is '%s'; allowed: sim, hw", choice.backend));
  }
  if (choice.procs > 0 && choice.backend != "hw") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--procs=%d needs --backend=hw: it runs one process per GPU rank; the simulator runs "
        "every rank in one process",
        choice.procs));
  }
  if (choice.procs > 0 && choice.gpus != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--procs=%d with --gpus=%d: each rank process drives one GPU (its local rank modulo the "
        "GPUs it sees); drop --gpus",
        choice.procs, choice.gpus));
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
  DMALAB_RETURN_IF_ERROR(CheckDeviceChoice(choice));
  RunDevice d;
  if (choice.backend == "sim") {
    auto sim = std::make_unique<SimDevice>(world, scheduling_seed, choice.fidelity);
    d.sim_ = sim.get();
    d.base_ = sim.get();
    d.owned_ = std::move(sim);
    d.scheduling_seed_ = scheduling_seed;
    return d;
  }
  std::function<absl::Status(StreamId, uint64_t)> spin;
  if (choice.procs > 0) {
    RankProcessDevice::Options options;
    options.world = world;
    options.stream_priority_seed = choice.perturb_seed;
    DMALAB_ASSIGN_OR_RETURN(d.rank_process_, RankProcessDevice::Create(options));
    d.base_ = d.rank_process_->get();
    RankProcessDevice* r = d.rank_process_.get();
    spin = [r](StreamId stream, uint64_t ns) { return r->Spin(stream, ns); };
  } else {
    HwDeviceOptions options;
    options.stream_priority_seed = choice.perturb_seed;
    DMALAB_ASSIGN_OR_RETURN(d.owned_, CreateHwDevice(world, choice.gpus, options));
    d.base_ = d.owned_.get();
    Device* base = d.base_;
    spin = [base](StreamId stream, uint64_t ns) { return HwSpin(*base, stream, ns); };
  }
  if (choice.perturb_seed) {
    PerturbOptions p;
    p.seed = *choice.perturb_seed;
    d.perturbing_ = std::make_unique<PerturbingDevice>(*d.base_, p, spin);
    d.perturb_seed_ = choice.perturb_seed;
  }
  return d;
}

absl::StatusOr<ReplayReport> RunDevice::Replay(const Scenario& scenario, ReplayOptions options) {
  if (sim_ != nullptr) options.poll_device_findings = NewFindingsPoller(*sim_);
  options.spmd_process = spmd_process();
  DMALAB_ASSIGN_OR_RETURN(ReplayReport report, dmalab::Replay(scenario, get(), options));
  report.scheduling_seed = scheduling_seed_;
  report.perturb_seed = perturb_seed_;
  return report;
}

}  // namespace dmalab
