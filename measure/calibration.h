// Calibration data: what `dmalab calibrate` measured on a GPU, the timing-model rates fitted to
// it, and the topology YAML (scenarios/topologies format, sim/topology.h) written from them.
// Measuring lives in measure/calibrate.h; this file needs no device, so the fit and the writer
// are tested with made-up measurements.
#ifndef DMALAB_MEASURE_CALIBRATION_H_
#define DMALAB_MEASURE_CALIBRATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "measure/host_cost.h"

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

// `concurrency` int8-block requantizing adds of `bytes` per operand (plain size), one on each of
// as many ranks' compute streams of one GPU, started together.
struct CodecConcurrencySample {
  uint64_t bytes = 0;
  int concurrency = 1;
  double us = 0;  // time until all of them are done (per round, averaged)
};

// Eager all-reduces of `bytes` per rank (bf16, native wire, out of place, as `dmalab sweep` runs
// them) enqueued through HostCostDevice: the host calls they make and their cost in situ.
struct HostCostSample {
  uint64_t bytes = 0;
  int all_reduces = 0;      // all-reduces behind the numbers below
  HostCallTallies tallies;  // their calls, each timed
  double enqueue_us = 0;    // host time to enqueue one all-reduce, calls not timed
  double round_us = 0;      // one all-reduce back to back with the next, until done
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
  // Int8-block requantizing adds, i8 a + bf16 b -> i8 c (the i8_ring's hop kernel); `bytes` is
  // one operand's plain size (elements x 2), so the plain-equivalent traffic is 3 x bytes.
  std::vector<ReduceSample> codec_reduces;
  // The same kernels, several at once on one GPU (as virtual ranks run them): what they share.
  std::vector<CodecConcurrencySample> codec_concurrent;
  // The i8_ring's other coded kernels, alone, `bytes` again one operand's plain size: encodes
  // (bf16 a -> i8 c) and decodes (i8 a -> bf16 c), 2 operands; dequantizing adds (i8 a + bf16 b
  // -> bf16 c), 3. Optional: without them the model gives every kind codec_gbps.
  std::vector<ReduceSample> codec_encodes, codec_decodes, codec_dequantizing_adds;
  // Host time of one call in a loop of that call alone; they also tell which samples above are
  // device-bound (FitRates).
  double copy_enqueue_us = 0;    // Device::Copy
  double kernel_enqueue_us = 0;  // Device::Reduce
  double event_enqueue_us = 0;   // RecordEvent or WaitEvent
  std::vector<HostCostSample> host_costs;
  double flag_hop_us = 0;  // flag ping-pong between two streams: one signal until the peer's
                           // answer may start (signal kernel + store seen by the waiting kernel)
  bool flag_in_graph = false;  // the ping-pong was captured into a graph and replayed
};

// A sample is device-bound, and tells the device's rate, when its round takes at least this many
// times what enqueueing the round costs the host; below, back-to-back rounds time the host.
inline constexpr double kDeviceBoundFactor = 3;

// The timing model's numbers (sim/topology.h names) fitted to the measurements.
struct CalibratedRates {
  int copy_engines = 0;
  // 2 x the best device-bound aggregate copy payload rate (each byte is read and written).
  double memory_gbps = 0;
  // One copy takes latency + bytes / gbps: fitted (relative error) to the device-bound
  // single-copy samples.
  double local_gbps = 0;
  double local_latency_us = 0;
  // A reduce kernel takes overhead + 3 bytes / reduce_gbps: fitted to the device-bound reduces.
  double reduce_gbps = 0;
  double kernel_overhead_us = 0;
  // Coded kernels: plain-equivalent traffic rate fitted to the device-bound requantizing adds
  // (and that fit's intercept, reported only: the model gives every kernel overhead_us).
  double codec_gbps = 0;
  double codec_overhead_us = 0;
  // The best device-bound aggregate plain-equivalent rate of codec kernels running at once on
  // the GPU, at least codec_gbps; 0 without concurrent samples (no shared limit in the model).
  double codec_gpu_gbps = 0;
  // The other coded kinds' rates (plain-equivalent traffic), fitted like codec_gbps; 0 without
  // their samples.
  double codec_encode_gbps = 0;
  double codec_decode_gbps = 0;
  double codec_dequantizing_add_gbps = 0;
  // flag_hop_us - kernel_overhead_us: the model's flag latency after the signal kernel.
  double flag_latency_us = 0;
  // Host costs in situ: each kind's mean timed cost inside the all-reduces, plus the host time
  // between calls (uninstrumented enqueue minus all timed calls) spread evenly over the calls.
  double kernel_launch_us = 0;
  double copy_launch_us = 0;
  double event_us = 0;
  double between_calls_us = 0;  // that spread share, included in the three above
};

// Fits rates; fails when a sample set is missing (device-bound single copies of two sizes,
// device-bound reduces of two sizes, an in-situ host-cost sample with every call kind) or a
// measured number is not positive.
absl::StatusOr<CalibratedRates> FitRates(const CalibrationMeasurements& m);

// t = intercept + x * slope through (x, t) points, minimizing the relative error
// sum(((intercept + x * slope) - t) / t)^2; needs two distinct x.
absl::StatusOr<std::pair<double, double>> FitLineRelative(
    const std::vector<std::pair<double, double>>& points);

// A topology document for one GPU holding `ranks_per_gpu` virtual ranks, in the format of
// scenarios/topologies/h200_virtual_ranks.yaml: a comment header saying when, where and how it
// was measured and listing the samples beside the fitted model, then the fields, each with
// its origin, written by TopologyYaml (sim/topology.h). The result loads with ParseTopology.
absl::StatusOr<std::string> CalibrationYaml(const CalibrationMeasurements& m, int ranks_per_gpu);

}  // namespace dmalab

#endif  // DMALAB_MEASURE_CALIBRATION_H_
