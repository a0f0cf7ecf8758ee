// BootstrapExchange: the LockstepExchange of rank processes (common/spmd/lockstep_device.h) over
// the socket bootstrap (common/plugin/socket_bootstrap.h). Broadcasts go as the bootstrap's own
// (the root's bytes to each rank, not an all-gather of W copies), in pieces well within its
// message limit, so that a host read of any size reaches every process.
#ifndef DMALAB_COMMON_SPMD_BOOTSTRAP_EXCHANGE_H_
#define DMALAB_COMMON_SPMD_BOOTSTRAP_EXCHANGE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/status_macros.h"
#include "common/plugin/socket_bootstrap.h"
#include "common/spmd/lockstep_device.h"

namespace dmalab {

class BootstrapExchange : public LockstepExchange {
 public:
  static constexpr size_t kPieceBytes = size_t{256} << 20;
  // `bootstrap` is this process's rank's and outlives the exchange.
  explicit BootstrapExchange(SocketBootstrap* bootstrap) : bootstrap_(bootstrap) {}

  int rank() const override { return bootstrap_->rank(); }
  int world() const override { return bootstrap_->world(); }
  absl::Status Broadcast(int root, absl::Span<uint8_t> data) override {
    if (data.empty()) return bootstrap_->Broadcast(root, data);
    for (size_t at = 0; at < data.size(); at += kPieceBytes) {
      const size_t n = std::min(kPieceBytes, data.size() - at);
      DMALAB_RETURN_IF_ERROR(bootstrap_->Broadcast(root, data.subspan(at, n)));
    }
    return absl::OkStatus();
  }
  absl::Status Barrier() override { return bootstrap_->Barrier(bootstrap_->rank()); }

 private:
  SocketBootstrap* bootstrap_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_SPMD_BOOTSTRAP_EXCHANGE_H_
