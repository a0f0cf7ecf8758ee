// Vector clocks over the simulator's timelines (one per stream, plus the host).
//
// Every enqueued operation carries a copy of the host's clock and every recorded event a copy of
// its stream's, while clocks change only when operations execute. So copies share one
// representation (reference counted, not atomically: a clock belongs to one simulated device,
// which one thread runs), and a clock is copied only when it changes while shared. Each
// representation has an id that changes with its contents and remembers, in a small
// direct-mapped table, the ids of representations its contents already cover: joining one of
// those again (the host's clock, joined by every operation; every stream's clock, joined by the
// host at each synchronization) costs one comparison.
#ifndef DMALAB_SIM_VECTOR_CLOCK_H_
#define DMALAB_SIM_VECTOR_CLOCK_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace dmalab {

class VectorClock {
 public:
  VectorClock() = default;
  VectorClock(const VectorClock& other) : rep_(other.rep_) {
    if (rep_ != nullptr) ++rep_->refs;
  }
  VectorClock(VectorClock&& other) noexcept : rep_(std::exchange(other.rep_, nullptr)) {}
  VectorClock& operator=(const VectorClock& other) {
    VectorClock copy(other);
    std::swap(rep_, copy.rep_);
    return *this;
  }
  VectorClock& operator=(VectorClock&& other) noexcept {
    std::swap(rep_, other.rep_);
    return *this;
  }
  ~VectorClock() {
    if (rep_ != nullptr && --rep_->refs == 0) delete rep_;
  }

  uint32_t Get(int timeline) const {
    return rep_ != nullptr && timeline < static_cast<int>(rep_->c.size()) ? rep_->c[timeline] : 0;
  }
  void Tick(int timeline) {
    Components& c = Own(timeline + 1);
    ++c[timeline];
  }
  // Component-wise maximum: everything `other` has seen, this has now seen.
  void Join(const VectorClock& other) {
    Rep* o = other.rep_;
    if (o == nullptr || o == rep_ || (rep_ != nullptr && rep_->Covered(o->id))) return;
    if (rep_ == nullptr) {  // nothing seen yet: share other's
      *this = other;
      return;
    }
    if (rep_->refs == 1 || !Covers(o->c)) {
      MaxInto(Own(o->c.size()).data(), o->c.data(), o->c.size());
    }
    rep_->absorbed[o->id % kAbsorbed] = o->id;  // no copy when shared: the contents cover o
  }
  // True when the access (timeline, clock) happened before the holder of this clock.
  bool HasSeen(int timeline, uint32_t clock) const { return Get(timeline) >= clock; }

 private:
  static constexpr size_t kPad = 8;  // components are stored in multiples of this
  static constexpr uint64_t kAbsorbed = 64;
  // Inline up to 48 timelines (8 ranks of 5 streams and the host): one allocation per copy.
  using Components = absl::InlinedVector<uint32_t, 48>;
  struct Rep {
    int64_t refs = 1;
    uint64_t id = 0;  // changes whenever c does
    Components c;
    // Ids of representations these contents cover, at id % kAbsorbed (a cache: a miss joins).
    std::array<uint64_t, kAbsorbed> absorbed = {};
    bool Covered(uint64_t other) const { return absorbed[other % kAbsorbed] == other; }
  };
  // c[i] = max(c[i], from[i]) for i < n, n a multiple of kPad.
  static void MaxInto(uint32_t* c, const uint32_t* from, size_t n) {
#ifdef __SSE2__
    // Four at a time; SSE2 compares only signed words, so both sides are biased by 2^31.
    const __m128i bias = _mm_set1_epi32(INT32_MIN);
    for (size_t i = 0; i < n; i += 4) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i));
      const __m128i b_larger = _mm_cmpgt_epi32(_mm_xor_si128(b, bias), _mm_xor_si128(a, bias));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i),
                       _mm_or_si128(_mm_and_si128(b_larger, b), _mm_andnot_si128(b_larger, a)));
    }
#else
    for (size_t i = 0; i < n; ++i) c[i] = std::max(c[i], from[i]);
#endif
  }
  // Unique in the process: one simulated device may be driven from several threads in turn (the
  // rank threads of an SPMD plugin), so a per-thread counter alone would give two contents one
  // id. Each thread takes ids from its own block of 2^20, and blocks from one shared counter: an
  // atomic operation per million ids instead of one per id.
  static uint64_t NewId() {
    static constexpr uint64_t kBlock = uint64_t{1} << 20;
    static std::atomic<uint64_t> blocks{0};
    thread_local uint64_t next = 0, end = 0;
    if (next == end) {
      next = (blocks.fetch_add(1, std::memory_order_relaxed) + 1) * kBlock;  // never 0
      end = next + kBlock;
    }
    return next++;
  }
  // Whether no component of o exceeds this clock's (joining would change nothing).
  bool Covers(const Components& o) const {
    const Components& c = rep_->c;
    for (size_t i = 0; i < o.size(); ++i) {
      if (o[i] > (i < c.size() ? c[i] : 0)) return false;
    }
    return true;
  }
  // The components, about to change: unshared first, at least `size` of them, a new id.
  Components& Own(size_t size) {
    if (rep_ == nullptr) {
      rep_ = new Rep;
    } else if (rep_->refs > 1) {
      Rep* copy = new Rep{1, 0, rep_->c, rep_->absorbed};
      --rep_->refs;
      rep_ = copy;
    }
    rep_->id = NewId();
    if (size > rep_->c.size()) rep_->c.resize((size + kPad - 1) / kPad * kPad, 0);
    return rep_->c;
  }
  Rep* rep_ = nullptr;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_VECTOR_CLOCK_H_
