#include "tools/calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/str_format.h"

namespace dmalab {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

// A payload rate in GB/s of `bytes` moved in `us`.
double Gbps(double bytes, double us) { return bytes / (us * 1e3); }

std::string TopologyName(const std::string& gpu_name) {
  std::string name = "calibrated";
  bool gap = true;
  for (char c : gpu_name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      if (gap) name += '_';
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      gap = false;
    } else {
      gap = true;
    }
  }
  return name;
}

}  // namespace

absl::StatusOr<std::pair<double, double>> FitLineRelative(
    const std::vector<std::pair<double, double>>& points) {
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& [x, t] : points) {
    if (!(t > 0) || !(x >= 0)) {
      return Invalid(absl::StrFormat("fit: point (%g, %g) needs x >= 0 and t > 0", x, t));
    }
    const double w = 1.0 / (t * t);
    sw += w;
    sx += w * x;
    sxx += w * x * x;
    st += w * t;
    sxt += w * x * t;
  }
  const double det = sw * sxx - sx * sx;
  if (points.size() < 2 || !(det > 1e-12 * sw * sxx)) {
    return Invalid(absl::StrFormat("fit: %d points with fewer than two distinct x", points.size()));
  }
  double intercept = (st * sxx - sx * sxt) / det;
  double slope = (sw * sxt - sx * st) / det;
  if (intercept < 0) {  // a rate that ramps up with size: the line through the origin instead
    intercept = 0;
    slope = sxt / sxx;
  }
  if (!(slope > 0)) return Invalid(absl::StrFormat("fit: slope %g is not positive", slope));
  return std::make_pair(intercept, slope);
}

absl::StatusOr<CalibratedRates> FitRates(const CalibrationMeasurements& m) {
  CalibratedRates r;
  if (m.copy_engines < 1) {
    return Invalid(
        absl::StrFormat("calibration: copy_engines is %d; must be >= 1", m.copy_engines));
  }
  r.copy_engines = m.copy_engines;
  std::vector<std::pair<double, double>> single;
  double best_aggregate_gbps = 0;
  for (const CopySample& c : m.copies) {
    if (!(c.us > 0) || c.concurrency < 1) {
      return Invalid(absl::StrFormat("calibration: copy of %d bytes x%d took %g us", c.bytes,
                                     c.concurrency, c.us));
    }
    if (c.concurrency == 1) single.emplace_back(static_cast<double>(c.bytes), c.us);
    best_aggregate_gbps =
        std::max(best_aggregate_gbps, Gbps(c.concurrency * double(c.bytes), c.us));
  }
  absl::StatusOr<std::pair<double, double>> copy_fit = FitLineRelative(single);
  if (!copy_fit.ok()) {
    return Invalid(absl::StrFormat("calibration: single copies: %s", copy_fit.status().message()));
  }
  r.local_latency_us = copy_fit->first;
  r.local_gbps = 1.0 / (copy_fit->second * 1e3);
  // A copy's bytes are read and written: the memory carries twice the payload. At least what the
  // fitted single copy needs, so that one copy alone is never memory-bound in the model.
  r.memory_gbps = std::max(2 * best_aggregate_gbps, 2 * r.local_gbps);

  std::vector<std::pair<double, double>> kernels;
  for (const ReduceSample& s : m.reduces) {
    if (!(s.us > 0)) {
      return Invalid(absl::StrFormat("calibration: reduce of %d bytes took %g us", s.bytes, s.us));
    }
    kernels.emplace_back(3.0 * static_cast<double>(s.bytes), s.us);
  }
  absl::StatusOr<std::pair<double, double>> reduce_fit = FitLineRelative(kernels);
  if (!reduce_fit.ok()) {
    return Invalid(absl::StrFormat("calibration: reduces: %s", reduce_fit.status().message()));
  }
  r.kernel_overhead_us = reduce_fit->first;
  r.reduce_gbps = 1.0 / (reduce_fit->second * 1e3);
  for (const auto& [name, v] : {std::pair{"copy enqueue", m.copy_enqueue_us},
                                {"kernel enqueue", m.kernel_enqueue_us},
                                {"event enqueue", m.event_enqueue_us},
                                {"flag hop", m.flag_hop_us}}) {
    if (!(v > 0)) return Invalid(absl::StrFormat("calibration: %s is %g us; must be > 0", name, v));
  }
  r.kernel_launch_us = m.kernel_enqueue_us;
  r.copy_launch_us = m.copy_enqueue_us;
  r.event_us = m.event_enqueue_us;
  // The model's hop: the signal kernel (overhead) and then the store's latency to the waiter.
  r.flag_latency_us = std::max(0.01, m.flag_hop_us - r.kernel_overhead_us);
  return r;
}

absl::StatusOr<std::string> CalibrationYaml(const CalibrationMeasurements& m, int ranks_per_gpu) {
  if (ranks_per_gpu < 1) {
    return Invalid(
        absl::StrFormat("calibration: ranks_per_gpu is %d; must be >= 1", ranks_per_gpu));
  }
  absl::StatusOr<CalibratedRates> fit = FitRates(m);
  if (!fit.ok()) return fit.status();
  const CalibratedRates& r = *fit;
  std::string y = absl::StrFormat(
      "# Calibrated by `%s`\n"
      "# at %s on one %s (%d SMs, %d async copy engines; CUDA runtime %d, driver %d), through\n"
      "# CudaDevice with %d virtual ranks on that GPU (tools/calibrate.h). Copies: same-GPU\n"
      "# Device::Copy on 1, 2 or 4 streams at once, host wall clock around back-to-back rounds\n"
      "# between two synchronizes. Reduces: bf16 a+b->c Device::Reduce back to back, same clock.\n"
      "# Host costs: host time to enqueue calls without waiting. Flag hop: SignalFlag/WaitFlag\n"
      "# ping-pong between two flag streams%s.\n#\n",
      m.command, m.when_utc, m.gpu_name, m.sms, m.copy_engines, m.cuda_runtime, m.cuda_driver,
      m.ranks, m.flag_in_graph ? ", captured into a graph and replayed" : ", enqueued eagerly");
  y += "# copies:     bytes  streams     us/round  payload GB/s   model us (fit, 1 stream)\n";
  for (const CopySample& c : m.copies) {
    const double model_us = r.local_latency_us + c.bytes / (r.local_gbps * 1e3);
    y += absl::StrFormat("#   %14d  %7d  %11.2f  %12.1f  %s\n", c.bytes, c.concurrency, c.us,
                         Gbps(c.concurrency * double(c.bytes), c.us),
                         c.concurrency == 1 ? absl::StrFormat("%11.2f", model_us) : "");
  }
  y += "# reduces:    bytes/operand        us/kernel  traffic GB/s   model us (fit)\n";
  for (const ReduceSample& s : m.reduces) {
    y += absl::StrFormat("#   %14d  %18.2f  %12.1f  %11.2f\n", s.bytes, s.us,
                         Gbps(3.0 * s.bytes, s.us),
                         r.kernel_overhead_us + 3.0 * s.bytes / (r.reduce_gbps * 1e3));
  }
  y += absl::StrFormat(
      "# host enqueue us: copy %.3f, reduce kernel %.3f, event %.3f; flag hop %.3f us\n",
      m.copy_enqueue_us, m.kernel_enqueue_us, m.event_enqueue_us, m.flag_hop_us);
  y += absl::StrFormat("name: %s\n", TopologyName(m.gpu_name));
  y += "gpus: 1\n";
  y += absl::StrFormat("ranks_per_gpu: %d\n", ranks_per_gpu);
  y += absl::StrFormat("copy_engines: %d          # measured: cudaDeviceProp::asyncEngineCount\n",
                       r.copy_engines);
  y += absl::StrFormat(
      "memory_gbps: %.6g        # measured: 2 x the best aggregate copy payload rate (read +\n"
      "                         # written), at least 2 x links.local.gbps\n",
      r.memory_gbps);
  y += absl::StrFormat(
      "links:\n  local:\n    gbps: %.6g           # fit: one copy takes latency_us + bytes / gbps\n"
      "    latency_us: %.6g     # (least relative squares over the 1-stream copies above)\n",
      r.local_gbps, r.local_latency_us);
  y += absl::StrFormat(
      "kernel:\n  launch_us: %.6g        # measured: host time of one Device::Reduce enqueue\n"
      "  overhead_us: %.6g      # fit: a reduce takes overhead_us + traffic / reduce_gbps\n"
      "  reduce_gbps: %.6g      # (traffic = 2 operands read + 1 written)\n",
      r.kernel_launch_us, r.kernel_overhead_us, r.reduce_gbps);
  y += absl::StrFormat(
      "flag:\n  latency_us: %.6g       # measured flag hop minus kernel.overhead_us\n",
      r.flag_latency_us);
  y += absl::StrFormat(
      "host:\n  copy_us: %.6g          # measured: host time of one Device::Copy enqueue\n"
      "  event_us: %.6g         # measured: host time of one RecordEvent or WaitEvent\n",
      r.copy_launch_us, r.event_us);
  return y;
}

}  // namespace dmalab
