// Schedule perturbation at the device-API boundary: a Device decorator that forwards every call
// and, drawn from a seed, delays work before it is enqueued, so that a dependency the collective
// forgot shows on real GPUs (docs/design.md section 7). GPUs tend to run work in one order (a
// small copy finishes before the flag kernel enqueued after it on another stream announces it);
// a missing event wait then passes every run. Delaying one stream and not another brings out the
// other orders: the wrong value, changed retained tensor or rank inconsistency the replay checks.
//
// Before each enqueued operation (event record and wait, copy, reduce, flag and value kernels)
// the decorator draws, independently:
//   - a spin on the operation's stream: a kernel that holds the stream for one of spin_ns
//     (hw: CudaDevice::Spin through include/dmalab/hw.h), with probability spin_percent;
//   - a host pause before the call, one of pause_ns, with probability pause_percent.
// And at every step boundary (SetContext, which the replay calls before each step) the same draws
// for every rank's compute stream: the ranks' own work, a plugin's native kernels included, then
// starts at different times on different ranks, which is how collectives that launch their own
// work are perturbed "around their calls".
// Draws are a pure function of the seed and the operation's ordinal: the same seed and the same
// calls give the same perturbation, so a failing seed replays. Stream priorities, the third
// perturbation, are the device's own (HwDeviceOptions::stream_priority_seed). Work captured into
// a graph captures its spins too: every launch replays them.
#ifndef DMALAB_MEASURE_PERTURBING_DEVICE_H_
#define DMALAB_MEASURE_PERTURBING_DEVICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dmalab/device.h"

namespace dmalab {

struct PerturbOptions {
  uint64_t seed = 1;
  int spin_percent = 30;
  std::vector<uint64_t> spin_ns = {2'000, 20'000, 200'000};
  int pause_percent = 10;
  std::vector<uint64_t> pause_ns = {10'000, 100'000};
};

// What a PerturbingDevice did.
struct PerturbTally {
  int64_t ops = 0;  // enqueued operations seen
  int64_t spins = 0;
  uint64_t spin_ns = 0;
  int64_t pauses = 0;
  uint64_t pause_ns = 0;
};

class PerturbingDevice : public Device {
 public:
  // Enqueues a delay of `ns` on `stream` of the inner device.
  using SpinFn = std::function<absl::Status(StreamId stream, uint64_t ns)>;
  // Holds the host for `ns` (default: a busy wait on the steady clock, exact at microseconds).
  using PauseFn = std::function<void(uint64_t ns)>;

  PerturbingDevice(Device& inner, PerturbOptions options, SpinFn spin, PauseFn pause = nullptr);

  const PerturbTally& tally() const { return tally_; }
  const PerturbOptions& options() const { return options_; }

  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return inner_.name(); }
  absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) override {
    return inner_.Allocate(rank, bytes, tag);
  }
  absl::Status Free(const MemRef& allocation) override { return inner_.Free(allocation); }
  StreamId ComputeStream(int rank) override { return inner_.ComputeStream(rank); }
  absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind, std::string_view name) override {
    return inner_.CreateStream(rank, kind, name);
  }
  absl::StatusOr<EventId> CreateEvent(int rank) override { return inner_.CreateEvent(rank); }
  absl::Status RecordEvent(EventId event, StreamId stream) override;
  absl::Status WaitEvent(StreamId stream, EventId event) override;
  absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                    std::string_view label) override;
  absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                      absl::Span<const Operand> terms, int64_t elems,
                      std::string_view label) override;
  absl::Status SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                          std::string_view label) override;
  absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                        std::string_view label) override;
  absl::Status WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                          std::string_view label) override;
  absl::Status WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                         std::string_view label) override;
  absl::Status Synchronize() override { return inner_.Synchronize(); }
  absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) override {
    return inner_.Write(dst, bytes);
  }
  absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) override {
    return inner_.Read(src, bytes);
  }
  bool HoldsValues() const override { return inner_.HoldsValues(); }
  absl::Status WriteShadow(const MemRef& dst, uint64_t content) override {
    return inner_.WriteShadow(dst, content);
  }
  absl::StatusOr<Provenance> ReadProvenance(const MemRef& src) override {
    return inner_.ReadProvenance(src);
  }
  // Forwards, then perturbs every rank's compute stream; a failing spin is returned by the next
  // enqueued operation (SetContext returns nothing).
  void SetContext(std::string_view context) override;
  bool IsCapturing(StreamId stream) const override { return inner_.IsCapturing(stream); }
  bool SupportsGraphs() const override { return inner_.SupportsGraphs(); }
  absl::StatusOr<GraphId> CaptureGraph(const std::function<absl::Status()>& body) override {
    return inner_.CaptureGraph(body);
  }
  absl::Status LaunchGraph(GraphId graph) override { return inner_.LaunchGraph(graph); }
  void* NativeStream(StreamId stream) override { return inner_.NativeStream(stream); }
  void* NativePointer(const MemRef& mem) override { return inner_.NativePointer(mem); }
  int NativeDeviceOrdinal(int rank) override { return inner_.NativeDeviceOrdinal(rank); }

 private:
  // Draws and applies the perturbation of the next operation, enqueued on `stream`.
  absl::Status Perturb(StreamId stream);

  Device& inner_;
  PerturbOptions options_;
  SpinFn spin_;
  PauseFn pause_;
  PerturbTally tally_;
  absl::Status deferred_;  // a spin that failed in SetContext
};

}  // namespace dmalab

#endif  // DMALAB_MEASURE_PERTURBING_DEVICE_H_
