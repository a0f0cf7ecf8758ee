// LockstepProcess: the SpmdProcess (common/plugin/spmd_process.h) of a process that runs one
// rank of a LockstepDevice (common/spmd/lockstep_device.h): an ABI v2 plugin's instance of this
// rank runs on the lockstep device's local device, over the bootstrap the lockstep exchange
// uses, and its tensors cross between the two through the lockstep device.
#ifndef DMALAB_COMMON_SPMD_LOCKSTEP_PROCESS_H_
#define DMALAB_COMMON_SPMD_LOCKSTEP_PROCESS_H_

#include "absl/status/statusor.h"
#include "common/plugin/bootstrap.h"
#include "common/plugin/spmd_process.h"
#include "common/spmd/lockstep_device.h"
#include "dmalab/device.h"

namespace dmalab {

class LockstepProcess : public SpmdProcess {
 public:
  // All three outlive it; `local` is the lockstep device's local device, `bootstrap` the one its
  // exchange runs over (the plugin's calls and the lockstep's stay in one order).
  LockstepProcess(LockstepDevice* lockstep, Device* local, Bootstrap* bootstrap)
      : lockstep_(lockstep), local_(local), bootstrap_(bootstrap) {}

  int rank() const override { return lockstep_->rank(); }
  int world() const override { return lockstep_->world_size(); }
  Device* local() override { return local_; }
  Bootstrap* bootstrap() override { return bootstrap_; }
  absl::StatusOr<MemRef> ToLocal(const MemRef& m) override { return lockstep_->ToLocal(m); }
  absl::StatusOr<MemRef> Adopt(int rank, const MemRef& local) override {
    return lockstep_->Adopt(rank, local);
  }

 private:
  LockstepDevice* lockstep_;
  Device* local_;
  Bootstrap* bootstrap_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_SPMD_LOCKSTEP_PROCESS_H_
