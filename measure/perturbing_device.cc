#include "measure/perturbing_device.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

namespace {

// SplitMix64's output function: the n-th draw is Mix(seed + n * golden), independent of
// every other draw.
uint64_t Mix(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void BusyWait(uint64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

PerturbingDevice::PerturbingDevice(Device& inner, PerturbOptions options, SpinFn spin,
                                   PauseFn pause)
    : inner_(inner),
      options_(std::move(options)),
      spin_(std::move(spin)),
      pause_(pause ? std::move(pause) : PauseFn(BusyWait)) {}

absl::Status PerturbingDevice::Perturb(StreamId stream) {
  if (!deferred_.ok()) return std::exchange(deferred_, absl::OkStatus());
  const uint64_t n = static_cast<uint64_t>(++tally_.ops);
  const uint64_t spin = Mix(options_.seed ^ Mix(2 * n));
  const uint64_t pause = Mix(options_.seed ^ Mix(2 * n + 1));
  if (!options_.pause_ns.empty() && static_cast<int>(pause % 100) < options_.pause_percent) {
    const uint64_t ns = options_.pause_ns[(pause >> 8) % options_.pause_ns.size()];
    pause_(ns);
    ++tally_.pauses;
    tally_.pause_ns += ns;
  }
  if (!options_.spin_ns.empty() && static_cast<int>(spin % 100) < options_.spin_percent) {
    const uint64_t ns = options_.spin_ns[(spin >> 8) % options_.spin_ns.size()];
    if (absl::Status s = spin_(stream, ns); !s.ok()) {
      return Prefixed(absl::StrFormat("perturbation (seed %d, operation %d): ", options_.seed, n),
                      s);
    }
    ++tally_.spins;
    tally_.spin_ns += ns;
  }
  return absl::OkStatus();
}

void PerturbingDevice::SetContext(std::string_view context) {
  inner_.SetContext(context);
  for (int rank = 0; rank < inner_.world_size() && deferred_.ok(); ++rank) {
    if (absl::Status s = Perturb(inner_.ComputeStream(rank)); !s.ok()) deferred_ = s;
  }
}

absl::Status PerturbingDevice::RecordEvent(EventId event, StreamId stream) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.RecordEvent(event, stream);
}

absl::Status PerturbingDevice::WaitEvent(StreamId stream, EventId event) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.WaitEvent(stream, event);
}

absl::Status PerturbingDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                                    std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.Copy(stream, dst, src, label);
}

absl::Status PerturbingDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                      absl::Span<const Operand> terms, int64_t elems,
                                      std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.Reduce(stream, dtype, dst, terms, elems, label);
}

absl::Status PerturbingDevice::SignalFlag(StreamId stream, const MemRef& counter,
                                          const MemRef& peer_flag, std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.SignalFlag(stream, counter, peer_flag, label);
}

absl::Status PerturbingDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                        std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.WaitFlag(stream, expected, flag, label);
}

absl::Status PerturbingDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                          std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.WriteValue(stream, dst, value, label);
}

absl::Status PerturbingDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                         std::string_view label) {
  DMALAB_RETURN_IF_ERROR(Perturb(stream));
  return inner_.WaitValue(stream, flag, value, label);
}

}  // namespace dmalab
