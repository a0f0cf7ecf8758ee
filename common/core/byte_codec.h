// A byte format for messages between dmalab's own processes (a worker's report to its parent,
// rank processes' outcomes, seed-campaign results): fixed-width little-endian integers and
// length-prefixed strings. The reader checks every read, since the writer may be a process a
// collective under test scribbled on: a malformed message is an error, never a crash.
#ifndef DMALAB_COMMON_CORE_BYTE_CODEC_H_
#define DMALAB_COMMON_CORE_BYTE_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"

namespace dmalab {

// Fixed-width little-endian integers and length-prefixed strings.
class ByteWriter {
 public:
  ByteWriter& U64(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
    buf_.append(b, 8);
    return *this;
  }
  ByteWriter& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  ByteWriter& Bool(bool v) { return U64(v ? 1 : 0); }
  ByteWriter& Str(std::string_view s) {
    U64(s.size());
    buf_.append(s);
    return *this;
  }
  std::string Take() { return std::move(buf_); }

 private:
  std::string buf_;
};

// Reads what ByteWriter wrote; the first read past the end, or a value out of its range, sets an
// error and every later read returns zeros.
class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}
  uint64_t U64() {
    if (!error_.empty() || data_.size() < 8) return Fail("the message ends early"), 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(8);
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  bool Bool() { return Below(2, "a boolean") == 1; }
  // A count of items that each take at least `item_bytes`: never more than the message holds.
  uint64_t Count(uint64_t item_bytes) {
    const uint64_t n = U64();
    if (error_.empty() && n > data_.size() / item_bytes) Fail("a count larger than the message");
    return error_.empty() ? n : 0;
  }
  uint64_t Below(uint64_t bound, const char* what) {
    const uint64_t v = U64();
    if (error_.empty() && v >= bound) Fail(absl::StrFormat("%s out of range (%d)", what, v));
    return error_.empty() ? v : 0;
  }
  std::string Str() {
    const uint64_t n = Count(1);
    if (!error_.empty()) return "";
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }
  void Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }
  bool at_end() const { return data_.empty(); }
  const std::string& error() const { return error_; }

 private:
  std::string_view data_;
  std::string error_;
};

}  // namespace dmalab

#endif  // DMALAB_COMMON_CORE_BYTE_CODEC_H_
