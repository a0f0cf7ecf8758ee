#include "common/core/host_block_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

// Blocks of at least this many bytes are backed by huge pages where the kernel allows.
constexpr uint64_t kHugePageBlockBytes = uint64_t{8} << 20;

class Pool {
 public:
  absl::StatusOr<uint8_t*> Acquire(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    // A kept block of that size, else the front of the smallest larger one, whose rest stays
    // kept (a mapping's pages unmap on their own, so a block splits at any multiple of the
    // alignment): its pages were touched already, where a new mapping's would be first touched.
    if (auto it = kept_.lower_bound(bytes); it != kept_.end()) {
      const uint64_t size = it->first;
      uint8_t* data = it->second;
      kept_.erase(it);
      if (size > bytes) kept_.emplace(size - bytes, data + bytes);
      stats_.kept -= bytes;
      stats_.in_use += bytes;
      return data;
    }
    // Release kept blocks, largest first, until in-use plus kept plus this block fit within the
    // peak in use (or within in-use plus this block, when that is a new peak).
    const uint64_t peak = std::max(stats_.peak_in_use, stats_.in_use + bytes);
    while (!kept_.empty() && stats_.in_use + stats_.kept + bytes > peak) {
      auto largest = std::prev(kept_.end());
      munmap(largest->second, largest->first);
      stats_.kept -= largest->first;
      kept_.erase(largest);
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot map %d bytes (%.1f MiB) of host memory for simulated device memory: %s "
          "(the process holds %d bytes of it in use)",
          bytes, bytes / 1048576.0, std::strerror(err), stats_.in_use));
    }
    // Large blocks in huge pages: a tensor's block is touched whole, and one fault per 2 MiB
    // instead of per 4 KiB makes first touch several times cheaper (page tables, TLB). Small
    // blocks (flags, counters) keep small pages, so that their untouched bytes cost no memory.
    // Only a hint: where the kernel has no huge pages, nothing changes.
    if (bytes >= kHugePageBlockBytes) madvise(p, bytes, MADV_HUGEPAGE);
    stats_.in_use += bytes;
    stats_.peak_in_use = peak;
    stats_.mapped_total += bytes;
    return static_cast<uint8_t*>(p);
  }

  void Release(uint8_t* data, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.in_use -= bytes;
    stats_.kept += bytes;
    kept_.emplace(bytes, data);
  }

  HostBlockPoolStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;
  std::multimap<uint64_t, uint8_t*> kept_;  // by size
  HostBlockPoolStats stats_;
};

// Never destroyed: blocks of objects with static storage may come back after main returns.
Pool& ThePool() {
  static Pool* pool = new Pool;
  return *pool;
}

}  // namespace

HostBlock::HostBlock(HostBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ThePool().Release(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HostBlock::~HostBlock() {
  if (data_ != nullptr) ThePool().Release(data_, bytes_);
}

absl::StatusOr<HostBlock> AcquireHostBlock(uint64_t bytes) {
  if (bytes == 0 || bytes % kHostBlockAlign != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host block of %d bytes: must be a positive multiple of %d", bytes, kHostBlockAlign));
  }
  DMALAB_ASSIGN_OR_RETURN(auto* data, ThePool().Acquire(bytes));
  return HostBlock(data, bytes);
}

HostBlockPoolStats GetHostBlockPoolStats() { return ThePool().Stats(); }

}  // namespace dmalab
