#include "common/core/host_buffer.h"

#include "common/core/status_macros.h"

namespace dmalab {

absl::Status HostBytes::Resize(size_t n) {
  if (n < kPooledBytes) {
    if (n > small_capacity_) {
      small_ = std::make_unique_for_overwrite<uint8_t[]>(n);
      small_capacity_ = n;
    }
    block_ = HostBlock();
    data_ = small_.get();
    size_ = n;
    return absl::OkStatus();
  }
  const uint64_t rounded = (n + kHostBlockAlign - 1) / kHostBlockAlign * kHostBlockAlign;
  if (block_.bytes() != rounded) {
    block_ = HostBlock();  // back to the pool first, so that it may serve this very request
    data_ = nullptr;
    size_ = 0;
    DMALAB_ASSIGN_OR_RETURN(block_, AcquireHostBlock(rounded));
  }
  small_.reset();
  small_capacity_ = 0;
  data_ = block_.data();
  size_ = n;
  return absl::OkStatus();
}

}  // namespace dmalab
