#include "common/core/host_block_pool.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"

namespace dmalab {
namespace {

class Pool;
Pool& ThePool();

class Pool {
 public:
  Pool() {
    // A forked child (a worker process) starts with no blocks (they are not mapped there:
    // MADV_DONTFORK), and with the lock free even when another thread held it at the fork.
    pthread_atfork([] { ThePool().mu_.lock(); }, [] { ThePool().mu_.unlock(); },
                   [] { ThePool().ForgetBlocksInChild(); });  // the child's only thread holds it
  }

  // The block's start, and the process (process_) it belongs to.
  absl::StatusOr<std::pair<uint8_t*, uint64_t>> Acquire(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    // A kept block of that size, else the front of the smallest larger one, whose rest stays
    // kept (a mapping's pages unmap on their own, so a block splits at any multiple of the
    // alignment): its pages were touched already, where a new mapping's would be first touched.
    if (auto it = by_size_.lower_bound({bytes, nullptr}); it != by_size_.end()) {
      const auto [size, data] = *it;
      EraseKept(data, size);
      if (size > bytes) InsertKept(data + bytes, size - bytes);
      stats_.kept -= bytes;
      stats_.in_use += bytes;
      return std::make_pair(data, process_);
    }
    // No kept block is large enough: map a new range and move the kept blocks' pages into it,
    // largest first, so that only the shortfall is fresh memory. Moving remaps pages (mremap), it
    // copies nothing, so what the process touched once it never touches fresh again, whatever
    // the order of sizes it asks for.
    DMALAB_ASSIGN_OR_RETURN(uint8_t* const data, MapAligned(bytes));
    uint64_t filled = 0;
    while (filled < bytes && !by_size_.empty()) {
      const auto [size, from] = *std::prev(by_size_.end());
      const uint64_t n = std::min(size, bytes - filled);
      if (mremap(from, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, data + filled) == MAP_FAILED) break;
      EraseKept(from, size);
      if (size > n) InsertKept(from + n, size - n);
      stats_.kept -= n;
      stats_.moved_total += n;
      filled += n;
    }
    stats_.in_use += bytes;
    stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
    stats_.mapped_total += bytes - filled;
    return std::make_pair(data, process_);
  }

  void Release(uint8_t* data, uint64_t bytes, uint64_t process) {
    std::lock_guard<std::mutex> lock(mu_);
    if (process != process_) return;  // acquired before a fork: not mapped in this process
    stats_.in_use -= bytes;
    stats_.kept += bytes;
    // Joined with its neighbours in the address space, so that a larger request can take them
    // as one block.
    if (auto next = by_addr_.find(data + bytes); next != by_addr_.end()) {
      const uint64_t next_size = next->second;
      EraseKept(data + bytes, next_size);
      bytes += next_size;
    }
    if (auto next = by_addr_.lower_bound(data); next != by_addr_.begin()) {
      const auto [prev_data, prev_size] = *std::prev(next);
      if (prev_data + prev_size == data) {
        EraseKept(prev_data, prev_size);
        data = prev_data;
        bytes += prev_size;
      }
    }
    InsertKept(data, bytes);
  }

  uint64_t Trim() {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t released = stats_.kept;
    for (const auto& [data, size] : by_addr_) munmap(data, size);
    by_addr_.clear();
    by_size_.clear();
    stats_.kept = 0;
    return released;
  }

  HostBlockPoolStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // A new mapping of `bytes`, its start aligned to kHostBlockAlign so that its huge pages line
  // up with the kernel's and a move between two blocks keeps them whole.
  absl::StatusOr<uint8_t*> MapAligned(uint64_t bytes) {
    const uint64_t span = bytes + kHostBlockAlign;
    void* p = span < bytes
                  ? MAP_FAILED
                  : mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      const int err = span < bytes ? ENOMEM : errno;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot map %d bytes (%.1f MiB) of host memory for simulated device memory: %s "
          "(the process holds %d bytes of it in use)",
          bytes, bytes / 1048576.0, std::strerror(err), stats_.in_use));
    }
    auto* const raw = static_cast<uint8_t*>(p);
    const uint64_t head =
        (kHostBlockAlign - reinterpret_cast<uintptr_t>(raw) % kHostBlockAlign) % kHostBlockAlign;
    if (head > 0) munmap(raw, head);
    munmap(raw + head + bytes, kHostBlockAlign - head);
    uint8_t* const data = raw + head;
    // In huge pages: one fault per 2 MiB instead of 512. On a virtual machine a small page's
    // first touch costs about as much as a huge page's, and small-page faults of two threads
    // wait for each other (writing 2 GiB in fresh memory took 8.4 s in small pages, 0.84 s in
    // huge ones, and two processes doing so at once took 17 s each in small pages, 1.0 s in huge
    // ones). A block used in part (flags, counters) costs 2 MiB of memory; blocks are few.
    // Only a hint: where the kernel has no huge pages, nothing changes.
    madvise(data, bytes, MADV_HUGEPAGE);
    // Not inherited by forked children (host_block_pool.h). Moving pages (mremap) keeps it.
    madvise(data, bytes, MADV_DONTFORK);
    return data;
  }

  void InsertKept(uint8_t* data, uint64_t bytes) {
    by_addr_.emplace(data, bytes);
    by_size_.emplace(bytes, data);
  }
  void EraseKept(uint8_t* data, uint64_t bytes) {
    by_addr_.erase(data);
    by_size_.erase({bytes, data});
  }

  void ForgetBlocksInChild() {
    by_addr_.clear();
    by_size_.clear();
    stats_.kept = 0;
    stats_.in_use = 0;
    ++process_;
    mu_.unlock();
  }

  std::mutex mu_;
  std::map<uint8_t*, uint64_t> by_addr_;             // kept blocks: start -> size
  std::set<std::pair<uint64_t, uint8_t*>> by_size_;  // kept blocks: (size, start)
  HostBlockPoolStats stats_;
  uint64_t process_ = 0;  // forks in this process's line of descent: blocks of another are not ours
};

// Never destroyed: blocks of objects with static storage may come back after main returns.
Pool& ThePool() {
  static Pool* pool = new Pool;
  return *pool;
}

}  // namespace

HostBlock::HostBlock(HostBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      process_(other.process_) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ThePool().Release(data_, bytes_, process_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    process_ = other.process_;
  }
  return *this;
}

HostBlock::~HostBlock() {
  if (data_ != nullptr) ThePool().Release(data_, bytes_, process_);
}

absl::StatusOr<HostBlock> AcquireHostBlock(uint64_t bytes) {
  if (bytes == 0 || bytes % kHostBlockAlign != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host block of %d bytes: must be a positive multiple of %d", bytes, kHostBlockAlign));
  }
  DMALAB_ASSIGN_OR_RETURN(const auto block, ThePool().Acquire(bytes));
  return HostBlock(block.first, bytes, block.second);
}

uint64_t TrimHostBlockPool() { return ThePool().Trim(); }

HostBlockPoolStats GetHostBlockPoolStats() { return ThePool().Stats(); }

}  // namespace dmalab
