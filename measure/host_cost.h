// Host costs in situ: a Device decorator that counts and times the host calls an algorithm makes,
// so that `dmalab calibrate` can measure what a copy, kernel or event enqueue costs inside a real
// all-reduce (caches warm with the algorithm's own work, its bookkeeping between calls) rather
// than in a tight loop of one call.
#ifndef DMALAB_MEASURE_HOST_COST_H_
#define DMALAB_MEASURE_HOST_COST_H_

#include <cstdint>
#include <string>
#include <utility>

#include "dmalab/device.h"
#include "measure/device_timer.h"

namespace dmalab {

// Calls of one kind and the host time they took, us.
struct CallTally {
  int64_t calls = 0;
  double us = 0;
};

// The timing model's three host-cost classes (sim/topology.h): copies; kernels (reduce, signal
// and wait flag); events (record and wait).
struct HostCallTallies {
  CallTally copies, kernels, events;
  int64_t calls() const { return copies.calls + kernels.calls + events.calls; }
  void Add(const HostCallTallies& o) {
    for (auto [sum, part] :
         {std::pair{&copies, &o.copies}, {&kernels, &o.kernels}, {&events, &o.events}}) {
      sum->calls += part->calls;
      sum->us += part->us;
    }
  }
  double us() const { return copies.us + kernels.us + events.us; }
};

// Forwards every call to `inner`. While timing is on, each enqueue call is counted and timed with
// `clock` (read before and after the call); while off, it only forwards.
class HostCostDevice : public Device {
 public:
  HostCostDevice(Device& inner, DeviceClock clock) : inner_(inner), clock_(std::move(clock)) {}

  void set_timing(bool on) { timing_ = on; }
  const HostCallTallies& tallies() const { return tallies_; }
  void ResetTallies() { tallies_ = HostCallTallies{}; }

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
  absl::Status RecordEvent(EventId event, StreamId stream) override {
    return Timed(tallies_.events, [&] { return inner_.RecordEvent(event, stream); });
  }
  absl::Status WaitEvent(StreamId stream, EventId event) override {
    return Timed(tallies_.events, [&] { return inner_.WaitEvent(stream, event); });
  }
  absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                    std::string_view label) override {
    return Timed(tallies_.copies, [&] { return inner_.Copy(stream, dst, src, label); });
  }
  absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                      absl::Span<const Operand> terms, int64_t elems,
                      std::string_view label) override {
    return Timed(tallies_.kernels,
                 [&] { return inner_.Reduce(stream, dtype, dst, terms, elems, label); });
  }
  absl::Status SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                          std::string_view label) override {
    return Timed(tallies_.kernels,
                 [&] { return inner_.SignalFlag(stream, counter, peer_flag, label); });
  }
  absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                        std::string_view label) override {
    return Timed(tallies_.kernels, [&] { return inner_.WaitFlag(stream, expected, flag, label); });
  }
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
  void SetContext(std::string_view context) override { inner_.SetContext(context); }
  bool IsCapturing(StreamId stream) const override { return inner_.IsCapturing(stream); }
  bool SupportsGraphs() const override { return inner_.SupportsGraphs(); }
  absl::StatusOr<GraphId> CaptureGraph(const std::function<absl::Status()>& body) override {
    return inner_.CaptureGraph(body);
  }
  absl::Status LaunchGraph(GraphId graph) override { return inner_.LaunchGraph(graph); }

 private:
  template <typename Call>
  absl::Status Timed(CallTally& tally, Call call) {
    if (!timing_) return call();
    const double start_us = clock_();
    absl::Status s = call();
    tally.us += clock_() - start_us;
    ++tally.calls;
    return s;
  }

  Device& inner_;
  DeviceClock clock_;
  bool timing_ = false;
  HostCallTallies tallies_;
};

}  // namespace dmalab

#endif  // DMALAB_MEASURE_HOST_COST_H_
