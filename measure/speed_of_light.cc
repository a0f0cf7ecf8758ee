#include "measure/speed_of_light.h"

#include "absl/strings/str_format.h"

namespace dmalab {

absl::StatusOr<std::unique_ptr<SpeedOfLight>> SpeedOfLight::Create(Device* device,
                                                                   uint64_t max_bytes) {
  if (device == nullptr) return absl::InvalidArgumentError("speed of light: device is null");
  if (max_bytes == 0) return absl::InvalidArgumentError("speed of light: max_bytes is 0");
  std::unique_ptr<SpeedOfLight> sol(new SpeedOfLight(device, max_bytes));
  for (int r = 0; r < device->world_size(); ++r) {
    absl::StatusOr<MemRef> src = device->Allocate(r, max_bytes, "speed of light source");
    if (!src.ok()) return src.status();
    sol->src_.push_back(*src);
    absl::StatusOr<MemRef> dst = device->Allocate(r, max_bytes, "speed of light destination");
    if (!dst.ok()) return dst.status();
    sol->dst_.push_back(*dst);
    absl::StatusOr<StreamId> stream = device->CreateStream(r, StreamKind::kCopy, "speed of light");
    if (!stream.ok()) return stream.status();
    sol->streams_.push_back(*stream);
  }
  return sol;
}

SpeedOfLight::~SpeedOfLight() {
  (void)device_->Synchronize();  // best effort: the device may be in an error state
  for (const MemRef& m : src_) (void)device_->Free(m);
  for (const MemRef& m : dst_) (void)device_->Free(m);
}

absl::Status SpeedOfLight::Enqueue(uint64_t bytes) {
  const int world = device_->world_size();
  if (bytes == 0 || bytes > max_bytes_ || bytes % world != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "speed of light: size is %d bytes; must be a positive multiple of the world size %d, "
        "at most %d",
        bytes, world, max_bytes_));
  }
  const uint64_t chunk = bytes / world;
  // Hop-major order: every rank's first copy is enqueued before any rank's second, so host
  // enqueue costs delay the ranks' starts as little as possible.
  for (int j = 0; j < 2 * (world - 1); ++j) {
    for (int r = 0; r < world; ++r) {
      const int successor = (r + 1) % world;
      const uint64_t offset = static_cast<uint64_t>(((r - j) % world + world) % world) * chunk;
      if (absl::Status s = device_->Copy(streams_[r], dst_[successor].Slice(offset, chunk),
                                         src_[r].Slice(offset, chunk), "speed of light");
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> SpeedOfLight::MeasureUs(uint64_t bytes, const DeviceClock& clock, int warmup,
                                               int iters) {
  return TimePerCallUs(*device_, clock, warmup, iters, [&] { return Enqueue(bytes); });
}

}  // namespace dmalab
