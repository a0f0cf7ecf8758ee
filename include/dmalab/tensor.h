// Views of device memory: a byte range on one rank (MemRef) and a typed tensor over it.
//
// Views carry the id of the allocation they were made from, so a checker can tell a use
// after free or a use after reuse from a legal access, by byte interval, not by address.
#ifndef DMALAB_TENSOR_H_
#define DMALAB_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dmalab/dtype.h"

namespace dmalab {

// A byte range [addr, addr + bytes) in the address space of one rank.
struct MemRef {
  int rank = 0;
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t alloc_id = 0;  // the allocation this view was made from; 0 when unknown
  // Set by a device that resolved an IPC mapping: the mapping (its device's number) through
  // which the owner's bytes [addr, addr + bytes) on `rank` are reached; 0 for direct access.
  uint64_t via_mapping = 0;

  // The sub-range [offset, offset + length) of this one, same allocation.
  MemRef Slice(uint64_t offset, uint64_t length) const {
    return MemRef{rank, addr + offset, length, alloc_id, via_mapping};
  }
  uint64_t end() const { return addr + bytes; }
  bool Overlaps(const MemRef& o) const {
    return rank == o.rank && addr < o.end() && o.addr < end() && bytes > 0 && o.bytes > 0;
  }
  bool operator==(const MemRef& o) const = default;
};

// A dense tensor view on one rank.
struct TensorView {
  MemRef mem;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  bool contiguous = true;

  int64_t elems() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int rank() const { return mem.rank; }
  uint64_t addr() const { return mem.addr; }
  uint64_t bytes() const { return static_cast<uint64_t>(elems()) * DTypeBytes(dtype); }
};

// "[2735, 6144]".
std::string ShapeString(const std::vector<int64_t>& shape);

// One 1-D view of `count` elements of `dtype` at the start of each of `mems` (one per rank).
std::vector<TensorView> ContiguousViews(const std::vector<MemRef>& mems, DType dtype,
                                        int64_t count);

}  // namespace dmalab

#endif  // DMALAB_TENSOR_H_
