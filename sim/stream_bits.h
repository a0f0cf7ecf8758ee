// A set of streams as bits: the simulator's scheduling bookkeeping (SimDevice::RunReady), in
// stream order.
#ifndef DMALAB_SIM_STREAM_BITS_H_
#define DMALAB_SIM_STREAM_BITS_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dmalab {

class StreamBits {
 public:
  StreamBits() = default;
  explicit StreamBits(size_t n) { Reset(n); }
  // Empty, over streams 0..n-1 (no allocation when it held as many before).
  void Reset(size_t n) {
    n_ = n;
    words_.assign((n + 63) / 64, 0);
  }
  void Set(size_t i) { words_[i / 64] |= Bit(i); }
  void Clear(size_t i) { words_[i / 64] &= ~Bit(i); }
  bool Test(size_t i) const { return (words_[i / 64] & Bit(i)) != 0; }
  // The first member at or after `from`; n when there is none.
  size_t Next(size_t from) const {
    if (from >= n_) return n_;
    size_t w = from / 64;
    uint64_t bits = words_[w] & (~uint64_t{0} << (from % 64));
    while (bits == 0) {
      if (++w == words_.size()) return n_;
      bits = words_[w];
    }
    return w * 64 + static_cast<size_t>(std::countr_zero(bits));
  }
  // The k-th member (from 0) in stream order; k is below the number of members.
  size_t Nth(uint64_t k) const {
    size_t w = 0;  // the last word holds the rest: no count needed (up to 64 streams: none)
    for (; w + 1 < words_.size() && k >= static_cast<uint64_t>(std::popcount(words_[w])); ++w) {
      k -= static_cast<uint64_t>(std::popcount(words_[w]));
    }
    uint64_t bits = words_[w];
    for (; k > 0; --k) bits &= bits - 1;
    return w * 64 + static_cast<size_t>(std::countr_zero(bits));
  }

 private:
  static uint64_t Bit(size_t i) { return uint64_t{1} << (i % 64); }
  size_t n_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_STREAM_BITS_H_
