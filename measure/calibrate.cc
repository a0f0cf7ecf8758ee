#include "measure/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>

#include "absl/strings/str_format.h"
#include "common/core/codec.h"
#include "common/core/status_macros.h"
#include "common/ring/dma_all_reduce.h"
#include "measure/host_cost.h"

namespace dmalab {
namespace {

int RoundsFor(const CalibrationPlan& plan, uint64_t bytes) {
  const uint64_t rounds = plan.bytes_per_sample / std::max<uint64_t>(bytes, 1);
  const uint64_t most = std::max(plan.iters, plan.max_rounds);
  return static_cast<int>(std::clamp<uint64_t>(rounds, plan.iters, most));
}

// The device time of one round of `call`: runs of n and 2n rounds are timed and the difference
// is divided by n, so what every run pays once (the first enqueue before the device starts, the
// synchronizations) cancels out.
absl::StatusOr<double> RoundUs(Device& device, const DeviceClock& clock,
                               const CalibrationPlan& plan, int rounds,
                               const std::function<absl::Status()>& call) {
  DMALAB_ASSIGN_OR_RETURN(double once, TimePerCallUs(device, clock, plan.warmup, rounds, call));
  DMALAB_ASSIGN_OR_RETURN(double twice, TimePerCallUs(device, clock, 0, 2 * rounds, call));
  return (2 * rounds * twice - rounds * once) / rounds;
}

// Buffers and streams of one measurement, freed on destruction.
class Scratch {
 public:
  explicit Scratch(Device& device) : device_(device) {}
  ~Scratch() {
    (void)device_.Synchronize();
    for (const MemRef& m : mems_) (void)device_.Free(m);
  }
  absl::StatusOr<MemRef> Zeroed(int rank, uint64_t bytes, std::string_view tag) {
    DMALAB_ASSIGN_OR_RETURN(MemRef m, device_.Allocate(rank, bytes, tag));
    mems_.push_back(m);
    DMALAB_RETURN_IF_ERROR(device_.Write(m, std::vector<uint8_t>(bytes, 0)));
    return m;
  }

 private:
  Device& device_;
  std::vector<MemRef> mems_;
};

absl::Status MeasureCopies(Device& device, const DeviceClock& clock, const CalibrationPlan& plan,
                           CalibrationMeasurements& m) {
  const int streams = *std::max_element(plan.concurrency.begin(), plan.concurrency.end());
  const uint64_t max_bytes = *std::max_element(plan.copy_bytes.begin(), plan.copy_bytes.end());
  Scratch scratch(device);
  std::vector<MemRef> src, dst;
  std::vector<StreamId> stream;
  for (int r = 0; r < streams; ++r) {
    DMALAB_ASSIGN_OR_RETURN(auto s, scratch.Zeroed(r, max_bytes, "calibrate copy source"));
    DMALAB_ASSIGN_OR_RETURN(auto d, scratch.Zeroed(r, max_bytes, "calibrate copy destination"));
    DMALAB_ASSIGN_OR_RETURN(auto id, device.CreateStream(r, StreamKind::kCopy, "calibrate copy"));
    src.push_back(s);
    dst.push_back(d);
    stream.push_back(id);
  }
  for (uint64_t bytes : plan.copy_bytes) {
    for (int c : plan.concurrency) {
      const auto copies = [&] {
        for (int r = 0; r < c; ++r) {
          DMALAB_RETURN_IF_ERROR(device.Copy(stream[r], dst[r].Slice(0, bytes),
                                             src[r].Slice(0, bytes), "calibrate copy"));
        }
        return absl::OkStatus();
      };
      DMALAB_ASSIGN_OR_RETURN(const double us,
                              RoundUs(device, clock, plan, RoundsFor(plan, bytes * c), copies));
      m.copies.push_back(CopySample{bytes, c, us});
    }
  }
  DMALAB_ASSIGN_OR_RETURN(auto copy_us, EnqueueCostUs(device, clock, plan.enqueue_calls, [&] {
                            return device.Copy(stream[0], dst[0].Slice(0, 4096),
                                               src[0].Slice(0, 4096), "calibrate enqueue");
                          }));
  m.copy_enqueue_us = copy_us;
  return absl::OkStatus();
}

// Requantizing adds on ranks 0..c-1's compute streams at once, each in its own buffers, for every
// c of plan.concurrency and every reduce size: what codec kernels of virtual ranks share.
absl::Status MeasureCodecConcurrency(Device& device, const DeviceClock& clock,
                                     const CalibrationPlan& plan, CalibrationMeasurements& m) {
  const int streams = *std::max_element(plan.concurrency.begin(), plan.concurrency.end());
  const uint64_t max_bytes = *std::max_element(plan.reduce_bytes.begin(), plan.reduce_bytes.end());
  Scratch scratch(device);
  std::vector<MemRef> a, b, c;
  for (int r = 0; r < streams; ++r) {
    DMALAB_ASSIGN_OR_RETURN(auto x, scratch.Zeroed(r, max_bytes, "calibrate codec a"));
    DMALAB_ASSIGN_OR_RETURN(auto y, scratch.Zeroed(r, max_bytes, "calibrate codec b"));
    DMALAB_ASSIGN_OR_RETURN(auto z, scratch.Zeroed(r, max_bytes, "calibrate codec c"));
    a.push_back(x);
    b.push_back(y);
    c.push_back(z);
  }
  for (uint64_t bytes : plan.reduce_bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const uint64_t coded = EncodedBytes(Codec::kInt8Block, DType::kBF16, elems);
    for (int k : plan.concurrency) {
      const auto adds = [&] {
        for (int r = 0; r < k; ++r) {
          const Operand terms[] = {{a[r].Slice(0, coded), Codec::kInt8Block},
                                   {b[r].Slice(0, bytes)}};
          DMALAB_RETURN_IF_ERROR(device.Reduce(device.ComputeStream(r), DType::kBF16,
                                               Operand{c[r].Slice(0, coded), Codec::kInt8Block},
                                               terms, elems,
                                               "calibrate concurrent requantizing add"));
        }
        return absl::OkStatus();
      };
      DMALAB_ASSIGN_OR_RETURN(const double us,
                              RoundUs(device, clock, plan, RoundsFor(plan, 3 * bytes * k), adds));
      m.codec_concurrent.push_back(CodecConcurrencySample{bytes, k, us});
    }
  }
  return absl::OkStatus();
}

absl::Status MeasureKernels(Device& device, const DeviceClock& clock, const CalibrationPlan& plan,
                            CalibrationMeasurements& m) {
  const uint64_t max_bytes = *std::max_element(plan.reduce_bytes.begin(), plan.reduce_bytes.end());
  Scratch scratch(device);
  DMALAB_ASSIGN_OR_RETURN(auto a, scratch.Zeroed(0, max_bytes, "calibrate reduce a"));
  DMALAB_ASSIGN_OR_RETURN(auto b, scratch.Zeroed(0, max_bytes, "calibrate reduce b"));
  DMALAB_ASSIGN_OR_RETURN(auto c, scratch.Zeroed(0, max_bytes, "calibrate reduce c"));
  const StreamId compute = device.ComputeStream(0);
  const auto reduce = [&](uint64_t bytes) {
    const Operand terms[] = {{a.Slice(0, bytes)}, {b.Slice(0, bytes)}};
    return device.Reduce(compute, DType::kBF16, Operand{c.Slice(0, bytes)}, terms,
                         static_cast<int64_t>(bytes / 2), "calibrate reduce");
  };
  // The i8_ring's hop kernel in the same buffers: i8 a + bf16 b -> i8 c. Encoded operands are
  // smaller than plain ones; zeros decode to zeros.
  const auto requantizing_add = [&](uint64_t bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const uint64_t coded = EncodedBytes(Codec::kInt8Block, DType::kBF16, elems);
    const Operand terms[] = {{a.Slice(0, coded), Codec::kInt8Block}, {b.Slice(0, bytes)}};
    return device.Reduce(compute, DType::kBF16, Operand{c.Slice(0, coded), Codec::kInt8Block},
                         terms, elems, "calibrate requantizing add");
  };
  // The i8_ring's other coded kernels, in the same buffers.
  const auto encode = [&](uint64_t bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const uint64_t coded = EncodedBytes(Codec::kInt8Block, DType::kBF16, elems);
    const Operand terms[] = {{a.Slice(0, bytes)}};
    return device.Reduce(compute, DType::kBF16, Operand{c.Slice(0, coded), Codec::kInt8Block},
                         terms, elems, "calibrate encode");
  };
  const auto decode = [&](uint64_t bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const uint64_t coded = EncodedBytes(Codec::kInt8Block, DType::kBF16, elems);
    const Operand terms[] = {{a.Slice(0, coded), Codec::kInt8Block}};
    return device.Reduce(compute, DType::kBF16, Operand{c.Slice(0, bytes)}, terms, elems,
                         "calibrate decode");
  };
  const auto dequantizing_add = [&](uint64_t bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const uint64_t coded = EncodedBytes(Codec::kInt8Block, DType::kBF16, elems);
    const Operand terms[] = {{a.Slice(0, coded), Codec::kInt8Block}, {b.Slice(0, bytes)}};
    return device.Reduce(compute, DType::kBF16, Operand{c.Slice(0, bytes)}, terms, elems,
                         "calibrate dequantizing add");
  };
  // Times `kernel` at every plan size into `samples`.
  const auto measure = [&](const auto& kernel, std::vector<ReduceSample>& samples) {
    for (uint64_t bytes : plan.reduce_bytes) {
      DMALAB_ASSIGN_OR_RETURN(double us, RoundUs(device, clock, plan, RoundsFor(plan, 3 * bytes),
                                                 [&] { return kernel(bytes); }));
      samples.push_back(ReduceSample{bytes, us});
    }
    return absl::OkStatus();
  };
  DMALAB_RETURN_IF_ERROR(measure(reduce, m.reduces));
  DMALAB_RETURN_IF_ERROR(measure(requantizing_add, m.codec_reduces));
  DMALAB_RETURN_IF_ERROR(measure(encode, m.codec_encodes));
  DMALAB_RETURN_IF_ERROR(measure(decode, m.codec_decodes));
  DMALAB_RETURN_IF_ERROR(measure(dequantizing_add, m.codec_dequantizing_adds));
  DMALAB_RETURN_IF_ERROR(MeasureCodecConcurrency(device, clock, plan, m));
  DMALAB_ASSIGN_OR_RETURN(auto kernel_us, EnqueueCostUs(device, clock, plan.enqueue_calls,
                                                        [&] { return reduce(512); }));
  m.kernel_enqueue_us = kernel_us;

  DMALAB_ASSIGN_OR_RETURN(auto event, device.CreateEvent(0));
  DMALAB_ASSIGN_OR_RETURN(auto record_us, EnqueueCostUs(device, clock, plan.enqueue_calls, [&] {
                            return device.RecordEvent(event, compute);
                          }));
  DMALAB_ASSIGN_OR_RETURN(auto wait_us, EnqueueCostUs(device, clock, plan.enqueue_calls, [&] {
                            return device.WaitEvent(compute, event);
                          }));
  m.event_enqueue_us = (record_us + wait_us) / 2;
  return absl::OkStatus();
}

// Eager all-reduces of each plan.host_cost_bytes through HostCostDevice, as `dmalab sweep` runs
// them (bf16, out of place, default options): back-to-back rounds until done, then the host
// time to enqueue them with no call timed, then again with every call timed.
absl::Status MeasureHostCosts(Device& device, const DeviceClock& clock, const CalibrationPlan& plan,
                              CalibrationMeasurements& m) {
  const int world = device.world_size();
  const uint64_t max_bytes =
      *std::max_element(plan.host_cost_bytes.begin(), plan.host_cost_bytes.end());
  Scratch scratch(device);
  std::vector<MemRef> in, out;
  for (int r = 0; r < world; ++r) {
    DMALAB_ASSIGN_OR_RETURN(auto i, scratch.Zeroed(r, max_bytes, "calibrate all-reduce input"));
    DMALAB_ASSIGN_OR_RETURN(auto o, scratch.Zeroed(r, max_bytes, "calibrate all-reduce output"));
    in.push_back(i);
    out.push_back(o);
  }
  HostCostDevice counted(device, clock);
  DmaAllReduceOptions options;
  options.max_bytes = max_bytes;
  DMALAB_ASSIGN_OR_RETURN(auto ar, DmaAllReduce::Create(&counted, options));
  for (uint64_t bytes : plan.host_cost_bytes) {
    const int64_t elems = static_cast<int64_t>(bytes / 2);
    const std::vector<TensorView> ins = ContiguousViews(in, DType::kBF16, elems),
                                  outs = ContiguousViews(out, DType::kBF16, elems);
    const auto call = [&] { return ar->AllReduce(ins, outs); };
    HostCostSample h;
    h.bytes = bytes;
    h.all_reduces = plan.host_cost_all_reduces;
    DMALAB_ASSIGN_OR_RETURN(auto round,
                            TimePerCallUs(counted, clock, plan.warmup, h.all_reduces, call));
    DMALAB_ASSIGN_OR_RETURN(auto enqueue, EnqueueCostUs(counted, clock, h.all_reduces, call));
    counted.ResetTallies();
    counted.set_timing(true);
    absl::StatusOr<double> timed = EnqueueCostUs(counted, clock, h.all_reduces, call);
    counted.set_timing(false);
    if (!timed.ok()) return timed.status();
    h.round_us = round;
    h.enqueue_us = enqueue;
    h.tallies = counted.tallies();
    m.host_costs.push_back(h);
  }
  return counted.Synchronize();
}

// Rank 0 signals rank 1 and waits for its answer, `plan.flag_round_trips` times; one hop is a
// signal until the peer's wait returns. Captured into a graph where the device has graphs, so
// that host launch costs do not pace the hops.
absl::Status MeasureFlagHop(Device& device, const DeviceClock& clock, const CalibrationPlan& plan,
                            CalibrationMeasurements& m) {
  Scratch scratch(device);
  MemRef words[2];  // per rank: counter, expected, flag (uint64 each)
  StreamId stream[2];
  for (int r = 0; r < 2; ++r) {
    DMALAB_ASSIGN_OR_RETURN(auto w, scratch.Zeroed(r, 24, "calibrate flags"));
    DMALAB_ASSIGN_OR_RETURN(auto s, device.CreateStream(r, StreamKind::kFlag, "calibrate flag"));
    words[r] = w;
    stream[r] = s;
  }
  const auto counter = [&](int r) { return words[r].Slice(0, 8); };
  const auto expected = [&](int r) { return words[r].Slice(8, 8); };
  const auto flag = [&](int r) { return words[r].Slice(16, 8); };
  const auto ping_pong = [&]() -> absl::Status {
    for (int i = 0; i < plan.flag_round_trips; ++i) {
      for (absl::Status s : {device.SignalFlag(stream[0], counter(0), flag(1), "ping"),
                             device.WaitFlag(stream[1], expected(1), flag(1), "ping wait"),
                             device.SignalFlag(stream[1], counter(1), flag(0), "pong"),
                             device.WaitFlag(stream[0], expected(0), flag(0), "pong wait")}) {
        if (!s.ok()) return s;
      }
    }
    return absl::OkStatus();
  };
  std::function<absl::Status()> call = ping_pong;
  m.flag_in_graph = device.SupportsGraphs();
  if (m.flag_in_graph) {
    DMALAB_ASSIGN_OR_RETURN(auto graph, device.CaptureGraph(ping_pong));
    call = [&device, id = graph] { return device.LaunchGraph(id); };
  }
  DMALAB_ASSIGN_OR_RETURN(auto us, RoundUs(device, clock, plan, std::max(plan.iters / 4, 2), call));
  m.flag_hop_us = us / (2.0 * plan.flag_round_trips);
  return absl::OkStatus();
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

CalibrationPlan DefaultCalibrationPlan() {
  CalibrationPlan plan;
  for (uint64_t b = 4096; b <= (1ull << 30); b *= 4) plan.copy_bytes.push_back(b);
  plan.reduce_bytes = {4096, 1ull << 20, 16ull << 20, 256ull << 20, 1ull << 30};
  plan.host_cost_bytes = {64ull << 10, 256ull << 10};
  return plan;
}

absl::StatusOr<CalibrationMeasurements> MeasureCalibration(Device& device, const DeviceClock& clock,
                                                           const CalibrationPlan& plan) {
  if (plan.copy_bytes.empty() || plan.concurrency.empty() || plan.reduce_bytes.empty() ||
      plan.host_cost_bytes.empty()) {
    return absl::InvalidArgumentError(
        "calibrate: the plan has no copy, concurrency, reduce or host-cost sizes");
  }
  for (uint64_t bytes : plan.reduce_bytes) {  // the codec kernels run at the reduce sizes
    if (bytes == 0 || bytes % (2 * kCodecBlockElems) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "calibrate: reduce size %d bytes is not a whole number of %d-element bf16 codec blocks",
          bytes, kCodecBlockElems));
    }
  }
  const int streams = *std::max_element(plan.concurrency.begin(), plan.concurrency.end());
  if (device.world_size() < std::max(streams, 2)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "calibrate: the device has %d ranks; %d concurrent copies and the flag ping-pong need %d",
        device.world_size(), streams, std::max(streams, 2)));
  }
  CalibrationMeasurements m;
  m.ranks = device.world_size();
  m.when_utc = UtcNow();
  DMALAB_RETURN_IF_ERROR(MeasureCopies(device, clock, plan, m));
  DMALAB_RETURN_IF_ERROR(MeasureKernels(device, clock, plan, m));
  DMALAB_RETURN_IF_ERROR(MeasureFlagHop(device, clock, plan, m));
  DMALAB_RETURN_IF_ERROR(MeasureHostCosts(device, clock, plan, m));
  return m;
}

}  // namespace dmalab
