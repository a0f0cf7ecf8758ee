// Large host memory of one process: page-aligned blocks mapped from the kernel and recycled, behind
// the simulator's segments (values fidelity) and the replay's host buffers (host_buffer.h), across
// the SimDevices and replays of one process.
//
// Why recycle: the first touch of a freshly mapped page costs a page fault and the kernel's
// zeroing, which on virtual machines is slower than copying the page; a seed campaign builds one
// device per seed, and without recycling every seed would pay that again for every byte.
// Recycled blocks hold old bytes; SimMemory tracks which bytes were written and fills the rest
// with its fresh pattern before anything reads them, so nothing can tell a recycled block from
// a new one.
//
// Any order of sizes: a released block joins its neighbours in the address space, and a request
// larger than every kept block is a new mapping into which the kept blocks' pages are moved
// (mremap: page tables change, no byte is copied or faulted), so that only the shortfall is
// fresh memory. So the process holds at most its peak in-use bytes, and touches fresh memory only
// when its use grows past that peak.
//
// Forked children (worker processes) inherit no block, kept or in use (MADV_DONTFORK): a kept
// block would be copy-on-write pages of the parent, dearer to write than fresh ones; and a fork
// that shared the blocks in use would make every later write of the parent's other threads to
// them (a seed campaign's simulators, --jobs) a page fault, and a copy while the child lives. A
// child uses the blocks it acquires itself; one acquired before the fork is not mapped in the
// child, and releasing it there does nothing.
#ifndef DMALAB_COMMON_CORE_HOST_BLOCK_POOL_H_
#define DMALAB_COMMON_CORE_HOST_BLOCK_POOL_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace dmalab {

// One block; returns itself to the pool when destroyed.
class HostBlock {
 public:
  HostBlock() = default;
  HostBlock(HostBlock&& other) noexcept;
  HostBlock& operator=(HostBlock&& other) noexcept;
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock();

  uint8_t* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  friend absl::StatusOr<HostBlock> AcquireHostBlock(uint64_t bytes);
  HostBlock(uint8_t* data, uint64_t bytes, uint64_t process)
      : data_(data), bytes_(bytes), process_(process) {}
  uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t process_ = 0;  // which process of a line of forks acquired it (the pool's count)
};

// A block of exactly `bytes` (a multiple of kHostBlockAlign): a kept one of that size, else the
// front of the smallest larger kept one (its rest stays kept), else a new mapping holding the kept
// blocks' pages. Its contents are unspecified. Fails with ResourceExhausted, naming the size and
// the system's reason, when the host cannot map it; never aborts. Thread-safe.
absl::StatusOr<HostBlock> AcquireHostBlock(uint64_t bytes);

inline constexpr uint64_t kHostBlockAlign = uint64_t{2} << 20;

// Gives the kept blocks back to the system; returns their bytes. For a process about to need its
// memory elsewhere, and for tests that need an empty pool.
uint64_t TrimHostBlockPool();

// What the pool holds now: blocks in use and kept for reuse, in bytes (for tests and reports).
struct HostBlockPoolStats {
  uint64_t in_use = 0;
  uint64_t kept = 0;
  uint64_t peak_in_use = 0;
  uint64_t mapped_total = 0;  // bytes ever mapped fresh
  uint64_t moved_total = 0;   // bytes of kept blocks moved into a larger block
};
HostBlockPoolStats GetHostBlockPoolStats();

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HOST_BLOCK_POOL_H_
