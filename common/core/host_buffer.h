// The host's large scratch buffers (read-backs of tensors, expected values, retained snapshots):
// bytes whose values are unspecified until written, from the process's host block pool when large.
//
// Unspecified: a buffer sized for a read is overwritten whole by it, and zero-filling tens of
// megabytes first would cost as much as the read. From the pool: the first touch of fresh memory
// costs a page fault and the kernel's zeroing per page, which on virtual machines costs several
// times a copy of the page; the pool's blocks are in huge pages and recycled, so a seed campaign
// or a zoo, which replays many scenarios in one process, pays that once, not per replay.
#ifndef DMALAB_COMMON_CORE_HOST_BUFFER_H_
#define DMALAB_COMMON_CORE_HOST_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/core/host_block_pool.h"

namespace dmalab {

class HostBytes {
 public:
  // From this size on, a buffer is a block of the host block pool.
  static constexpr size_t kPooledBytes = size_t{4} << 20;

  // Makes it `n` bytes long; their values are unspecified (those it held may or may not remain).
  // ResourceExhausted when the host cannot map the memory.
  absl::Status Resize(size_t n);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  absl::Span<uint8_t> span() { return {data_, size_}; }
  absl::Span<const uint8_t> span() const { return {data_, size_}; }

 private:
  HostBlock block_;                   // a large buffer's
  std::unique_ptr<uint8_t[]> small_;  // a small one's, small_capacity_ bytes
  size_t small_capacity_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HOST_BUFFER_H_
