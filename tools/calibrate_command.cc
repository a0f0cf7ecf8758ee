#include "tools/calibrate_command.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "dmalab/hw.h"
#include "measure/calibrate.h"
#include "measure/calibration.h"
#include "measure/device_timer.h"
#include "sim/topology.h"
#include "tools/command.h"
#include "tools/exit_status.h"
#include "tools/output_file.h"

namespace dmalab {
namespace {

absl::StatusOr<int> Execute(const CalibrateCommand& c) {
  if (c.gpus != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpus is %d; calibrate measures one GPU (same-GPU copies, virtual ranks): use --gpus=1",
        c.gpus));
  }
  if (c.ranks < 4 || c.ranks > 8) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--ranks is %d; must be in [4, 8]: 4 concurrent copies need 4 ranks' streams", c.ranks));
  }
  if (c.out.empty()) return absl::InvalidArgumentError("--out=FILE.yaml is required");
  DMALAB_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateHwDevice(c.ranks, c.gpus));
  DMALAB_ASSIGN_OR_RETURN(const GpuProperties gpu, HwGpuProperties(0));
  std::fprintf(stderr, "dmalab calibrate: measuring %s (takes about a minute)\n", gpu.name.c_str());
  DMALAB_ASSIGN_OR_RETURN(CalibrationMeasurements m,
                          MeasureCalibration(*device, WallClock(), DefaultCalibrationPlan()));
  m.gpu_name = gpu.name;
  m.copy_engines = gpu.copy_engines;
  m.sms = gpu.sms;
  m.cuda_runtime = gpu.cuda_runtime;
  m.cuda_driver = gpu.cuda_driver;
  m.command = c.command_line;
  DMALAB_ASSIGN_OR_RETURN(const std::string yaml, CalibrationYaml(m, /*ranks_per_gpu=*/8));
  if (absl::StatusOr<Topology> t = ParseTopology(yaml, c.out); !t.ok()) {
    return absl::InternalError(
        absl::StrFormat("the written topology does not load: %s", t.status().message()));
  }
  DMALAB_RETURN_IF_ERROR(WriteTextFile(c.out, yaml));
  std::fputs(yaml.c_str(), stdout);
  std::fprintf(stderr, "dmalab calibrate: wrote %s\n", c.out.c_str());
  return cli::kExitPass;
}

}  // namespace

int RunCalibrateCommand(const CalibrateCommand& c) { return ExitStatus("calibrate", Execute(c)); }

}  // namespace dmalab
