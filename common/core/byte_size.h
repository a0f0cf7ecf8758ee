// Byte sizes on the command line: "4096", "64K", "1M", "2G".
//
// A size is a whole decimal number of bytes, optionally followed by one suffix letter for a
// binary multiple: K or k (2^10), M or m (2^20), G or g (2^30), as nccl-tests reads -b and -e.
// Nothing else is accepted: no sign, no spaces, no fraction, no "B" or "iB" after the suffix.
// The value must lie in [min, max]; overflow past 2^64 - 1 is an error, never a wrap.
#ifndef DMALAB_COMMON_CORE_BYTE_SIZE_H_
#define DMALAB_COMMON_CORE_BYTE_SIZE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dmalab {

// The size `text` names, in bytes. The error says what was found and what is allowed, e.g.
// "size '1.5M' is not a whole number of bytes with an optional K, M or G suffix (binary
// multiples, either case)" or "size '0' is 0 bytes; allowed: 1 B to 1 GiB".
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, uint64_t min = 1,
                                       uint64_t max = std::numeric_limits<uint64_t>::max());

// The shortest exact spelling of `bytes` in the syntax above: "1G", "64K", "1000".
std::string FormatByteSize(uint64_t bytes);

// For messages: "1 GiB", "512 KiB", "1000 B" (exact binary multiples only; else bytes).
std::string DescribeByteSize(uint64_t bytes);

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_BYTE_SIZE_H_
