// Calibration data: what `dmalab calibrate` measured on a GPU, the timing-model rates fitted to
// it, and the topology YAML (scenarios/topologies format, sim/topology.h) written from them.
// Measuring lives in tools/calibrate.h; this file needs no device, so the fit and the writer
// are tested with made-up measurements.
#ifndef DMALAB_TOOLS_CALIBRATION_H_
#define DMALAB_TOOLS_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dmalab {

// `concurrency` copies of `bytes` each, on as many streams of one GPU, started together.
struct CopySample {
  uint64_t bytes = 0;
  int concurrency = 1;
  double us = 0;  // time until all of them are done (per round, averaged)
};

// One bf16 a + b -> c reduce kernel of `bytes` per operand (traffic: 3 * bytes).
struct ReduceSample {
  uint64_t bytes = 0;
  double us = 0;  // per kernel, back to back
};

struct CalibrationMeasurements {
  // Where and how.
  std::string gpu_name;
  int copy_engines = 0;
  int sms = 0;
  int cuda_runtime = 0, cuda_driver = 0;
  int ranks = 0;         // virtual ranks of the CudaDevice measured through
  std::string when_utc;  // "2025-01-31T12:00:00Z"
  std::string command;   // the command line that measured
  // What.
  std::vector<CopySample> copies;
  std::vector<ReduceSample> reduces;
  double copy_enqueue_us = 0;    // host time of one Device::Copy
  double kernel_enqueue_us = 0;  // host time of one Device::Reduce
  double event_enqueue_us = 0;   // host time of one RecordEvent or WaitEvent
  double flag_hop_us = 0;        // flag ping-pong between two streams: one signal until the peer's
                           // answer may start (signal kernel + store seen by the waiting kernel)
  bool flag_in_graph = false;  // the ping-pong was captured into a graph and replayed
};

// The timing model's numbers (sim/topology.h names) fitted to the measurements.
struct CalibratedRates {
  int copy_engines = 0;
  double memory_gbps = 0;       // 2 x the best aggregate copy payload rate (read + written)
  double local_gbps = 0;        // one copy: t = latency + bytes / gbps, fitted (relative error)
  double local_latency_us = 0;  // over the single-copy samples
  double reduce_gbps = 0;       // kernel: t = overhead + 3 bytes / reduce_gbps, fitted
  double kernel_overhead_us = 0;
  double flag_latency_us = 0;  // flag_hop_us - kernel_overhead_us (the model's signal + latency)
  double kernel_launch_us = 0;
  double copy_launch_us = 0;
  double event_us = 0;
};

// Fits rates; fails when a sample set is missing (no single-copy sample of two sizes, no
// reduce of two sizes) or a measured number is not positive.
absl::StatusOr<CalibratedRates> FitRates(const CalibrationMeasurements& m);

// t = intercept + x * slope through (x, t) points, minimizing the relative error
// sum(((intercept + x * slope) - t) / t)^2; needs two distinct x.
absl::StatusOr<std::pair<double, double>> FitLineRelative(
    const std::vector<std::pair<double, double>>& points);

// A topology document for one GPU holding `ranks_per_gpu` virtual ranks, in the format of
// scenarios/topologies/h200_virtual_ranks.yaml: a comment header saying when, where and how it
// was measured and listing the samples beside the fitted model, then the fields, each with
// its origin. The result loads with ParseTopology.
absl::StatusOr<std::string> CalibrationYaml(const CalibrationMeasurements& m, int ranks_per_gpu);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_CALIBRATION_H_
