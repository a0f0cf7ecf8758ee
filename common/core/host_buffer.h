// An allocator for the host's large scratch buffers (read-backs of tensors, expected values,
// retained snapshots): it leaves new elements uninitialized, and backs large buffers with huge
// pages.
//
// Uninitialized: a buffer grown for a read is overwritten whole by it, and zero-filling tens of
// megabytes first would cost as much as the read. Huge pages: the first touch of fresh memory
// costs a page fault and the kernel's zeroing per page, which on virtual machines costs several
// times a copy of the page; one fault per 2 MiB instead of per 4 KiB makes it several times
// cheaper. Only a hint: where the kernel has no huge pages, nothing changes.
#ifndef DMALAB_COMMON_CORE_HOST_BUFFER_H_
#define DMALAB_COMMON_CORE_HOST_BUFFER_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace dmalab {

template <typename T>
struct HostBufferAllocator : std::allocator<T> {
  // From this size on, a buffer is mapped whole, in huge pages.
  static constexpr size_t kHugeBytes = size_t{4} << 20;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HostBufferAllocator() = default;
  template <typename U>
  HostBufferAllocator(const HostBufferAllocator<U>&) noexcept {}  // NOLINT: as std::allocator

  template <typename U>
  struct rebind {
    using other = HostBufferAllocator<U>;
  };

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugeBytes) return std::allocator<T>::allocate(n);
    // Mapped with a huge page's slack, then trimmed to a huge-page-aligned range.
    const size_t mapped = Mapped(bytes);
    void* p = ::mmap(nullptr, mapped + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) ::munmap(p, aligned - start);
    if (const size_t tail = start + mapped + kHugePage - (aligned + mapped); tail > 0) {
      ::munmap(reinterpret_cast<void*>(aligned + mapped), tail);
    }
    ::madvise(reinterpret_cast<void*>(aligned), mapped, MADV_HUGEPAGE);
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugeBytes) return std::allocator<T>::deallocate(p, n);
    ::munmap(p, Mapped(bytes));
  }

  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <typename U>
  bool operator==(const HostBufferAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static size_t Mapped(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
};

// A byte buffer of the host's: uninitialized growth, huge pages when large.
using HostBytes = std::vector<uint8_t, HostBufferAllocator<uint8_t>>;

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HOST_BUFFER_H_
