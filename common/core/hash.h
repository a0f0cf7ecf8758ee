// The output hash of scenario reports: XXH64 (seed 0) of a byte string, as specified by the
// xxHash project (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md).
//
// Reports hash the bytes of rank 0's all-reduce output as read back with Device::Read, so the
// same scenario gives the same hash on every device whose outputs are bit-identical.
#ifndef DMALAB_COMMON_CORE_HASH_H_
#define DMALAB_COMMON_CORE_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace dmalab {

uint64_t Xxh64(absl::Span<const uint8_t> bytes, uint64_t seed = 0);

// Xxh64 of a byte string given in pieces: after Update with each piece in order, Digest() equals
// Xxh64 of their concatenation. Lets a caller hash a buffer it never holds whole.
class Xxh64Hasher {
 public:
  explicit Xxh64Hasher(uint64_t seed = 0);

  void Update(absl::Span<const uint8_t> bytes);
  // Of every byte given so far; more may follow.
  uint64_t Digest() const;

 private:
  static constexpr size_t kStripe = 32;  // the bytes one round of the four lanes consumes

  uint64_t seed_;
  uint64_t lanes_[4];
  uint64_t total_ = 0;     // bytes given
  uint8_t tail_[kStripe];  // given bytes not yet consumed by a round: fewer than a stripe
  size_t tail_size_ = 0;
};

// "xxh64:" followed by 16 lower-case hex digits.
std::string HashString(uint64_t hash);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HASH_H_
