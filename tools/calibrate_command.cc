#include "tools/calibrate_command.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "dmalab/hw.h"
#include "measure/calibrate.h"
#include "measure/calibration.h"
#include "measure/device_timer.h"
#include "sim/topology.h"
#include "tools/command.h"
#include "tools/output_file.h"

namespace dmalab {

int RunCalibrateCommand(const CalibrateCommand& c) {
  if (c.gpus != 1) {
    return FailUsage("calibrate", absl::InvalidArgumentError(absl::StrFormat(
                                      "--gpus is %d; calibrate measures one GPU (same-GPU copies, "
                                      "virtual ranks): use --gpus=1",
                                      c.gpus)));
  }
  if (c.ranks < 4 || c.ranks > 8) {
    return FailUsage(
        "calibrate",
        absl::InvalidArgumentError(absl::StrFormat(
            "--ranks is %d; must be in [4, 8]: 4 concurrent copies need 4 ranks' streams",
            c.ranks)));
  }
  if (c.out.empty())
    return FailUsage("calibrate", absl::InvalidArgumentError("--out=FILE.yaml is required"));
  absl::StatusOr<std::unique_ptr<Device>> device = CreateHwDevice(c.ranks, c.gpus);
  if (!device.ok()) return FailUsage("calibrate", device.status());
  absl::StatusOr<GpuProperties> gpu = HwGpuProperties(0);
  if (!gpu.ok()) return FailUsage("calibrate", gpu.status());
  std::fprintf(stderr, "dmalab calibrate: measuring %s (takes about a minute)\n",
               gpu->name.c_str());
  absl::StatusOr<CalibrationMeasurements> m =
      MeasureCalibration(**device, WallClock(), DefaultCalibrationPlan());
  if (!m.ok()) return FailUsage("calibrate", m.status());
  m->gpu_name = gpu->name;
  m->copy_engines = gpu->copy_engines;
  m->sms = gpu->sms;
  m->cuda_runtime = gpu->cuda_runtime;
  m->cuda_driver = gpu->cuda_driver;
  m->command = c.command_line;
  absl::StatusOr<std::string> yaml = CalibrationYaml(*m, /*ranks_per_gpu=*/8);
  if (!yaml.ok()) return FailUsage("calibrate", yaml.status());
  if (absl::StatusOr<Topology> t = ParseTopology(*yaml, c.out); !t.ok()) {
    return FailUsage("calibrate",
                     absl::InternalError(absl::StrFormat("the written topology does not load: %s",
                                                         t.status().message())));
  }
  if (absl::Status s = WriteTextFile(c.out, *yaml); !s.ok()) return FailUsage("calibrate", s);
  std::fputs(yaml->c_str(), stdout);
  std::fprintf(stderr, "dmalab calibrate: wrote %s\n", c.out.c_str());
  return 0;
}

}  // namespace dmalab
