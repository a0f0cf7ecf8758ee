#include "measure/calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "sim/topology.h"

namespace dmalab {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

// `v` to 6 significant digits: what the calibrated file states (the fits are no finer).
double Significant(double v) { return std::stod(absl::StrFormat("%.6g", v)); }

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

// Whether a sample times the device rather than the host that enqueues it (kDeviceBoundFactor).
bool CopyIsDeviceBound(const CalibrationMeasurements& m, const CopySample& c) {
  return c.us >= kDeviceBoundFactor * c.concurrency * m.copy_enqueue_us;
}
bool ReduceIsDeviceBound(const CalibrationMeasurements& m, const ReduceSample& s) {
  return s.us >= kDeviceBoundFactor * m.kernel_enqueue_us;
}
bool CodecRoundIsDeviceBound(const CalibrationMeasurements& m, const CodecConcurrencySample& s) {
  return s.us >= kDeviceBoundFactor * s.concurrency * m.kernel_enqueue_us;
}

// A kernel class's `overhead_us + operands x bytes / gbps`, fitted to its device-bound samples.
struct KernelFit {
  double overhead_us = 0, gbps = 0;
};
absl::StatusOr<KernelFit> FitKernels(const CalibrationMeasurements& m,
                                     const std::vector<ReduceSample>& samples,
                                     std::string_view what, int operands = 3) {
  std::vector<std::pair<double, double>> points;
  for (const ReduceSample& s : samples) {
    if (!(s.us > 0)) {
      return Invalid(
          absl::StrFormat("calibration: %s of %d bytes took %g us", what, s.bytes, s.us));
    }
    if (ReduceIsDeviceBound(m, s)) {
      points.emplace_back(operands * static_cast<double>(s.bytes), s.us);
    }
  }
  absl::StatusOr<std::pair<double, double>> fit = FitLineRelative(points);
  if (!fit.ok()) {
    return Invalid(
        absl::StrFormat("calibration: device-bound %ss: %s", what, fit.status().message()));
  }
  return KernelFit{fit->first, 1.0 / (fit->second * 1e3)};
}

// A comment table of kernel samples beside the fitted model's times.
std::string KernelTable(const CalibrationMeasurements& m, std::string_view title,
                        const std::vector<ReduceSample>& samples, double overhead_us, double gbps,
                        int operands = 3) {
  std::string t = absl::StrFormat(
      "# %s:\n#    bytes/operand   us/kernel  traffic GB/s  fit  model us\n", title);
  for (const ReduceSample& s : samples) {
    t += absl::StrFormat("#   %14d  %10.2f  %12.1f  %3s  %8.2f\n", s.bytes, s.us,
                         Gbps(double(operands) * s.bytes, s.us),
                         ReduceIsDeviceBound(m, s) ? "yes" : "no",
                         overhead_us + double(operands) * s.bytes / (gbps * 1e3));
  }
  return t;
}

// The other coded kinds: name, samples, operands, where the rate goes (CalibratedRates), the
// topology field and its note.
struct CodedKind {
  const char* what;
  const std::vector<ReduceSample>* samples;
  int operands;
  double CalibratedRates::*rate;
  const char* field;
  const char* note;
};
std::vector<CodedKind> OtherCodedKinds(const CalibrationMeasurements& m) {
  return {{"codec encode", &m.codec_encodes, 2, &CalibratedRates::codec_encode_gbps,
           "codec_encode_gbps", "fit: int8 encodes bf16 a -> i8 c, likewise"},
          {"codec decode", &m.codec_decodes, 2, &CalibratedRates::codec_decode_gbps,
           "codec_decode_gbps", "fit: int8 decodes i8 a -> bf16 c, likewise"},
          {"codec dequantizing add", &m.codec_dequantizing_adds, 3,
           &CalibratedRates::codec_dequantizing_add_gbps, "codec_dequantizing_add_gbps",
           "fit: dequantizing adds i8 a + bf16 b -> bf16 c, likewise"}};
}

// The in-situ host costs: per kind, the mean timed call; the host time between calls (the
// uninstrumented enqueue minus the timed calls, from the algorithm's own bookkeeping and the
// timing itself) is spread evenly over all calls, since the model charges host time per call.
absl::Status FitHostCosts(const CalibrationMeasurements& m, CalibratedRates& r) {
  if (m.host_costs.empty()) {
    return Invalid(
        "calibration: no in-situ host-cost sample (all-reduces enqueued through "
        "HostCostDevice); the model's host costs are fitted from them");
  }
  HostCallTallies total;
  double enqueue_us = 0;
  for (const HostCostSample& h : m.host_costs) {
    if (h.all_reduces < 1 || !(h.enqueue_us > 0)) {
      return Invalid(absl::StrFormat(
          "calibration: host-cost sample of %d bytes: %d all-reduces enqueued in %g us each",
          h.bytes, h.all_reduces, h.enqueue_us));
    }
    total.Add(h.tallies);
    enqueue_us += h.enqueue_us * h.all_reduces;
  }
  r.between_calls_us = (enqueue_us - total.us()) / static_cast<double>(total.calls());
  for (auto [name, tally, out] : {std::tuple{"copy", &total.copies, &r.copy_launch_us},
                                  {"kernel", &total.kernels, &r.kernel_launch_us},
                                  {"event", &total.events, &r.event_us}}) {
    if (tally->calls < 1) {
      return Invalid(absl::StrFormat(
          "calibration: the host-cost all-reduces made no %s call; every kind is needed", name));
    }
    *out = tally->us / static_cast<double>(tally->calls) + r.between_calls_us;
    if (!(*out > 0)) {
      return Invalid(absl::StrFormat(
          "calibration: in-situ %s cost is %g us (mean %g us, %g us between calls); must be > 0",
          name, *out, tally->us / static_cast<double>(tally->calls), r.between_calls_us));
    }
  }
  return absl::OkStatus();
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
  for (const auto& [name, v] : {std::pair{"copy enqueue", m.copy_enqueue_us},
                                {"kernel enqueue", m.kernel_enqueue_us},
                                {"event enqueue", m.event_enqueue_us},
                                {"flag hop", m.flag_hop_us}}) {
    if (!(v > 0)) return Invalid(absl::StrFormat("calibration: %s is %g us; must be > 0", name, v));
  }
  std::vector<std::pair<double, double>> single;
  double best_aggregate_gbps = 0;
  for (const CopySample& c : m.copies) {
    if (!(c.us > 0) || c.concurrency < 1) {
      return Invalid(absl::StrFormat("calibration: copy of %d bytes x%d took %g us", c.bytes,
                                     c.concurrency, c.us));
    }
    if (!CopyIsDeviceBound(m, c)) continue;
    if (c.concurrency == 1) single.emplace_back(static_cast<double>(c.bytes), c.us);
    best_aggregate_gbps =
        std::max(best_aggregate_gbps, Gbps(c.concurrency * double(c.bytes), c.us));
  }
  absl::StatusOr<std::pair<double, double>> copy_fit = FitLineRelative(single);
  if (!copy_fit.ok()) {
    return Invalid(absl::StrFormat("calibration: device-bound single copies: %s",
                                   copy_fit.status().message()));
  }
  r.local_latency_us = copy_fit->first;
  r.local_gbps = 1.0 / (copy_fit->second * 1e3);
  // A copy's bytes are read and written: the memory carries twice the payload. At least what the
  // fitted single copy needs, so that one copy alone is never memory-bound in the model.
  r.memory_gbps = std::max(2 * best_aggregate_gbps, 2 * r.local_gbps);

  DMALAB_ASSIGN_OR_RETURN(KernelFit reduce_fit, FitKernels(m, m.reduces, "reduce"));
  r.kernel_overhead_us = reduce_fit.overhead_us;
  r.reduce_gbps = reduce_fit.gbps;
  DMALAB_ASSIGN_OR_RETURN(KernelFit codec_fit, FitKernels(m, m.codec_reduces, "codec reduce"));
  r.codec_overhead_us = codec_fit.overhead_us;
  r.codec_gbps = codec_fit.gbps;
  for (const CodedKind& k : OtherCodedKinds(m)) {
    if (k.samples->empty()) continue;
    DMALAB_ASSIGN_OR_RETURN(KernelFit fit, FitKernels(m, *k.samples, k.what, k.operands));
    r.*k.rate = fit.gbps;
  }
  for (const CodecConcurrencySample& c : m.codec_concurrent) {
    if (!(c.us > 0) || c.concurrency < 1) {
      return Invalid(absl::StrFormat("calibration: codec reduce of %d bytes x%d took %g us",
                                     c.bytes, c.concurrency, c.us));
    }
    if (!CodecRoundIsDeviceBound(m, c)) continue;
    // Never below one kernel's fitted rate: one kernel alone is not limited by the GPU's share.
    r.codec_gpu_gbps = std::max({r.codec_gpu_gbps, r.codec_gbps,
                                 Gbps(3.0 * c.concurrency * static_cast<double>(c.bytes), c.us)});
  }
  // The model's hop: the signal kernel (overhead) and then the store's latency to the waiter.
  r.flag_latency_us = std::max(0.01, m.flag_hop_us - r.kernel_overhead_us);
  DMALAB_RETURN_IF_ERROR(FitHostCosts(m, r));
  return r;
}

absl::StatusOr<std::string> CalibrationYaml(const CalibrationMeasurements& m, int ranks_per_gpu) {
  if (ranks_per_gpu < 1) {
    return Invalid(
        absl::StrFormat("calibration: ranks_per_gpu is %d; must be >= 1", ranks_per_gpu));
  }
  DMALAB_ASSIGN_OR_RETURN(const CalibratedRates r, FitRates(m));
  std::string y = absl::StrFormat(
      "# Calibrated by `%s`\n"
      "# at %s on one %s (%d SMs, %d async copy engines; CUDA runtime %d, driver %d), through\n"
      "# CudaDevice with %d virtual ranks on that GPU (measure/calibrate.h). Copies: same-GPU\n"
      "# Device::Copy on 1, 2 or 4 streams at once, host wall clock around back-to-back rounds\n"
      "# between two synchronizes. Reduces: bf16 a+b->c Device::Reduce back to back, same clock;\n"
      "# codec reduces: int8-block requantizing adds i8 a + bf16 b -> i8 c, likewise.\n"
      "# Host costs: host time to enqueue calls without waiting, alone in a loop and in situ\n"
      "# (eager all-reduces, every call timed). Flag hop: SignalFlag/WaitFlag ping-pong between\n"
      "# two flag streams%s.\n"
      "# Fits use device-bound samples only (fit = yes): their round takes at least %g x its\n"
      "# host enqueue cost; shorter rounds time the host, not the device.\n#\n",
      m.command, m.when_utc, m.gpu_name, m.sms, m.copy_engines, m.cuda_runtime, m.cuda_driver,
      m.ranks, m.flag_in_graph ? ", captured into a graph and replayed" : ", enqueued eagerly",
      kDeviceBoundFactor);
  y += "# copies:     bytes  streams     us/round  payload GB/s  fit  model us (1 stream)\n";
  for (const CopySample& c : m.copies) {
    const double model_us = r.local_latency_us + c.bytes / (r.local_gbps * 1e3);
    y += absl::StrFormat("#   %14d  %7d  %11.2f  %12.1f  %3s  %s\n", c.bytes, c.concurrency, c.us,
                         Gbps(c.concurrency * double(c.bytes), c.us),
                         CopyIsDeviceBound(m, c) ? "yes" : "no",
                         c.concurrency == 1 ? absl::StrFormat("%11.2f", model_us) : "");
  }
  y += KernelTable(m, "reduces", m.reduces, r.kernel_overhead_us, r.reduce_gbps);
  y += KernelTable(m, "codec reduces (traffic: plain-equivalent)", m.codec_reduces,
                   r.codec_overhead_us, r.codec_gbps);
  for (const CodedKind& k : OtherCodedKinds(m)) {
    if (k.samples->empty()) continue;
    // The table's model: the kernel overhead the model gives every kernel, then this kind's rate.
    y += KernelTable(m, absl::StrCat(k.what, "s (traffic: plain-equivalent)"), *k.samples,
                     r.kernel_overhead_us, r.*k.rate, k.operands);
  }
  if (!m.codec_concurrent.empty()) {
    y += "# codec reduces at once (one per rank's compute stream):\n"
         "#    bytes/operand  kernels   us/round  traffic GB/s  fit\n";
    for (const CodecConcurrencySample& c : m.codec_concurrent) {
      y += absl::StrFormat("#   %14d  %7d  %9.2f  %12.1f  %3s\n", c.bytes, c.concurrency, c.us,
                           Gbps(3.0 * c.concurrency * double(c.bytes), c.us),
                           CodecRoundIsDeviceBound(m, c) ? "yes" : "no");
    }
  }
  y += absl::StrFormat(
      "# host enqueue us, alone: copy %.3f, reduce kernel %.3f, event %.3f; flag hop %.3f us\n",
      m.copy_enqueue_us, m.kernel_enqueue_us, m.event_enqueue_us, m.flag_hop_us);
  y += "# in situ, per all-reduce:  bytes  copies  kernels  events   enqueue us   timed calls us"
       "   round us\n";
  for (const HostCostSample& h : m.host_costs) {
    const double n = h.all_reduces;
    y += absl::StrFormat("#   %26d  %6.0f  %7.0f  %6.0f  %11.2f  %15.2f  %9.2f\n", h.bytes,
                         h.tallies.copies.calls / n, h.tallies.kernels.calls / n,
                         h.tallies.events.calls / n, h.enqueue_us, h.tallies.us() / n, h.round_us);
  }
  y += absl::StrFormat(
      "# in situ us: copy %.3f, kernel %.3f, event %.3f (each with %.3f us between calls)\n",
      r.copy_launch_us, r.kernel_launch_us, r.event_us, r.between_calls_us);
  Topology t;
  t.name = TopologyName(m.gpu_name);
  t.gpus = 1;
  t.rank_gpus.assign(ranks_per_gpu, 0);
  t.copy_engines = r.copy_engines;
  t.memory_gbps = Significant(r.memory_gbps);
  t.local.gbps = Significant(r.local_gbps);
  t.local.latency_us = Significant(r.local_latency_us);
  t.kernel_launch_us = Significant(r.kernel_launch_us);
  t.kernel_overhead_us = Significant(r.kernel_overhead_us);
  t.reduce_gbps = Significant(r.reduce_gbps);
  t.codec_gbps = Significant(r.codec_gbps);
  t.codec_gpu_gbps = Significant(r.codec_gpu_gbps);
  t.codec_encode_gbps = Significant(r.codec_encode_gbps);
  t.codec_decode_gbps = Significant(r.codec_decode_gbps);
  t.codec_dequantizing_add_gbps = Significant(r.codec_dequantizing_add_gbps);
  t.flag_latency_us = Significant(r.flag_latency_us);
  t.copy_launch_us = Significant(r.copy_launch_us);
  t.event_us = Significant(r.event_us);
  TopologyNotes notes = {
      {"copy_engines", "measured: cudaDeviceProp::asyncEngineCount"},
      {"memory_gbps",
       "measured: 2 x the best device-bound aggregate copy payload\n"
       "rate (read + written), at least 2 x links.local.gbps"},
      {"links.local.gbps", "fit: one copy takes latency_us + bytes / gbps"},
      {"links.local.latency_us", "(least relative squares, device-bound 1-stream copies)"},
      {"kernel.launch_us", "in situ: host time of one kernel enqueue"},
      {"kernel.overhead_us", "fit: a reduce takes overhead_us + traffic / reduce_gbps"},
      {"kernel.reduce_gbps", "(traffic = 2 operands read + 1 written; device-bound)"},
      {"kernel.codec_gbps", "fit: int8 requantizing adds, plain-equivalent traffic"},
      {"kernel.codec_gpu_gbps",
       "measured: the best device-bound aggregate of such adds at once,\n"
       "one per rank's compute stream (at least codec_gbps)"},
      {"flag.latency_us", "measured flag hop minus kernel.overhead_us"},
      {"host.copy_us", "in situ: host time of one Device::Copy enqueue"},
      {"host.event_us", "in situ: host time of one RecordEvent or WaitEvent"},
  };
  for (const CodedKind& k : OtherCodedKinds(m)) {
    notes[absl::StrCat("kernel.", k.field)] = k.note;
  }
  return TopologyYaml(t, y, notes);
}

}  // namespace dmalab
