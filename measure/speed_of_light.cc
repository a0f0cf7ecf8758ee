#include "measure/speed_of_light.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {

std::vector<std::vector<uint64_t>> PeerCopyBytes(const RingPlan& plan) {
  std::vector<std::vector<uint64_t>> copies(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    for (const PlanOp& op : plan.ranks[r]) {
      if (op.kind == OpKind::kCopy && op.dst.region == Region::kPeerScratch) {
        copies[r].push_back(op.dst.bytes);
      }
    }
  }
  return copies;
}

absl::StatusOr<std::unique_ptr<SpeedOfLight>> SpeedOfLight::Create(Device* device,
                                                                   uint64_t max_bytes,
                                                                   bool graphs) {
  if (device == nullptr) return absl::InvalidArgumentError("speed of light: device is null");
  if (max_bytes == 0) return absl::InvalidArgumentError("speed of light: max_bytes is 0");
  if (graphs && !device->SupportsGraphs()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "speed of light: graphs requested but device '%s' has no graphs", device->name()));
  }
  std::unique_ptr<SpeedOfLight> sol(new SpeedOfLight(device, max_bytes, graphs));
  for (int r = 0; r < device->world_size(); ++r) {
    DMALAB_ASSIGN_OR_RETURN(MemRef src, device->Allocate(r, max_bytes, "speed of light source"));
    sol->src_.push_back(src);
    DMALAB_ASSIGN_OR_RETURN(MemRef dst,
                            device->Allocate(r, max_bytes, "speed of light destination"));
    sol->dst_.push_back(dst);
    DMALAB_ASSIGN_OR_RETURN(StreamId stream,
                            device->CreateStream(r, StreamKind::kCopy, "speed of light"));
    sol->streams_.push_back(stream);
  }
  return sol;
}

SpeedOfLight::~SpeedOfLight() {
  (void)device_->Synchronize();  // best effort: the device may be in an error state
  for (const MemRef& m : src_) (void)device_->Free(m);
  for (const MemRef& m : dst_) (void)device_->Free(m);
}

absl::Status SpeedOfLight::Enqueue(const std::vector<std::vector<uint64_t>>& copies) {
  const int world = device_->world_size();
  if (static_cast<int>(copies.size()) != world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "speed of light: %d ranks' copies for a device of %d ranks", copies.size(), world));
  }
  size_t hops = 0;
  for (int r = 0; r < world; ++r) {
    hops = std::max(hops, copies[r].size());
    for (uint64_t bytes : copies[r]) {
      if (bytes == 0 || bytes > max_bytes_) {
        return absl::InvalidArgumentError(
            absl::StrFormat("speed of light: rank %d has a copy of %d bytes; must be in [1, %d]", r,
                            bytes, max_bytes_));
      }
    }
  }
  // Each rank's copies take consecutive ranges of its buffers, starting over at 0 when the next
  // would run past the end.
  std::vector<uint64_t> offset(world, 0);
  for (size_t j = 0; j < hops; ++j) {
    for (int r = 0; r < world; ++r) {
      if (j >= copies[r].size()) continue;
      const uint64_t bytes = copies[r][j];
      if (offset[r] + bytes > max_bytes_) offset[r] = 0;
      const int successor = (r + 1) % world;
      DMALAB_RETURN_IF_ERROR(device_->Copy(streams_[r], dst_[successor].Slice(offset[r], bytes),
                                           src_[r].Slice(offset[r], bytes), "speed of light"));
      offset[r] += bytes;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> SpeedOfLight::MeasureUs(const RingPlan& plan, const DeviceClock& clock,
                                               int warmup, int iters) {
  const std::vector<std::vector<uint64_t>> copies = PeerCopyBytes(plan);
  if (!graphs_) {
    return TimePerCallUs(*device_, clock, warmup, iters, [&] { return Enqueue(copies); });
  }
  auto it = captured_.find(copies);
  if (it == captured_.end()) {
    DMALAB_ASSIGN_OR_RETURN(GraphId graph, device_->CaptureGraph([&] { return Enqueue(copies); }));
    it = captured_.emplace(copies, graph).first;
  }
  const GraphId graph = it->second;
  return TimePerCallUs(*device_, clock, warmup, iters, [&] { return device_->LaunchGraph(graph); });
}

}  // namespace dmalab
