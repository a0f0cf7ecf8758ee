// The device a command runs a collective on (replay, zoo, demo): the simulator with a scheduling
// seed, or the GPUs, behind the schedule-perturbing decorator when a perturbation seed is given
// (measure/perturbing_device.h: spins before enqueued work, host pauses, seeded stream
// priorities).
#ifndef DMALAB_RUNNER_RUN_DEVICE_H_
#define DMALAB_RUNNER_RUN_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dmalab/device.h"
#include "dmalab/replay.h"
#include "measure/perturbing_device.h"
#include "runner/rank_process.h"
#include "sim/sim_device.h"

namespace dmalab {

struct DeviceChoice {
  std::string backend = "sim";            // "sim" or "hw"
  int gpus = 1;                           // hw: GPUs the ranks spread over
  Fidelity fidelity = Fidelity::kValues;  // sim
  // hw: perturb with this seed; unset: no perturbation. Refused on the simulator, whose
  // scheduling seed already chooses every order.
  std::optional<uint64_t> perturb_seed;
  // hw: this process is one rank of a --procs run (runner/rank_process.h); 0: every rank here.
  int procs = 0;
};

class RunDevice {
 public:
  // A fresh device of `world` ranks; `scheduling_seed` seeds the simulator.
  static absl::StatusOr<RunDevice> Make(const DeviceChoice& choice, int world,
                                        uint64_t scheduling_seed);

  Device* get() { return perturbing_ ? static_cast<Device*>(perturbing_.get()) : base_; }
  SimDevice* sim() { return sim_; }  // null on hw
  // Where this process runs one rank of a --procs run: what a plugin's instance runs on; null
  // otherwise.
  SpmdProcess* spmd_process() {
    return rank_process_ != nullptr ? rank_process_->process() : nullptr;
  }
  const PerturbingDevice* perturbing() const { return perturbing_.get(); }
  std::optional<uint64_t> perturb_seed() const { return perturb_seed_; }
  std::optional<uint64_t> scheduling_seed() const { return scheduling_seed_; }

  // Replays `scenario` here, with the simulator's checkers polled into the report and the
  // seeds that reproduce the run recorded in it.
  absl::StatusOr<ReplayReport> Replay(const Scenario& scenario, ReplayOptions options);

 private:
  std::unique_ptr<Device> owned_;
  std::unique_ptr<RankProcessDevice> rank_process_;
  Device* base_ = nullptr;  // owned_ or rank_process_'s
  SimDevice* sim_ = nullptr;
  std::unique_ptr<PerturbingDevice> perturbing_;
  std::optional<uint64_t> perturb_seed_, scheduling_seed_;
};

// The usage error of a choice that cannot hold, naming the flag, or OK: --perturb needs
// --backend=hw.
absl::Status CheckDeviceChoice(const DeviceChoice& choice);

}  // namespace dmalab

#endif  // DMALAB_RUNNER_RUN_DEVICE_H_
