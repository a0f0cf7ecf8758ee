// The output hash of scenario reports: XXH64 (seed 0) of a byte string, as specified by the
// xxHash project (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md).
//
// Reports hash the bytes of rank 0's all-reduce output as read back with Device::Read, so the
// same scenario gives the same hash on every device whose outputs are bit-identical.
#ifndef DMALAB_COMMON_CORE_HASH_H_
#define DMALAB_COMMON_CORE_HASH_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace dmalab {

uint64_t Xxh64(absl::Span<const uint8_t> bytes, uint64_t seed = 0);

// "xxh64:" followed by 16 lower-case hex digits.
std::string HashString(uint64_t hash);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_HASH_H_
