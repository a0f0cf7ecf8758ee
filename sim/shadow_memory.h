// The shadow fidelity's memory of one rank (docs/design.md section 6): no payload, only each byte's
// provenance (include/dmalab/provenance.h), plus the values of the 8-byte words that the host or a
// flag kernel wrote, because flag waits must read them to be scheduled.
//
// A word's value is known when the host wrote it in a small write, a flag kernel stored it, or a
// copy moved a known word; bytes nobody ever wrote read as the simulator's fresh-memory pattern
// (all ones), as in the values fidelity. Any other word (written by a kernel or a large host
// write) is unknown, and LoadWord says so instead of guessing.
#ifndef DMALAB_SIM_SHADOW_MEMORY_H_
#define DMALAB_SIM_SHADOW_MEMORY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"
#include "dmalab/provenance.h"

namespace dmalab {

class ShadowMemory {
 public:
  // Bytes [lo, hi) now hold bytes [origin_offset, ...) of `origin`'s output. Known words in the
  // range are forgotten.
  void Assign(uint64_t lo, uint64_t hi, uint64_t origin, uint64_t origin_offset);
  // The provenance of [lo, hi), offsets relative to lo.
  Provenance Get(uint64_t lo, uint64_t hi) const;
  // The same into `out` (cleared first): no heap allocation for a range of up to 4 pieces.
  using FewPieces = absl::InlinedVector<ProvenancePiece, 4>;
  void GetInto(uint64_t lo, uint64_t hi, FewPieces& out) const;
  // Copies bytes [src, src + bytes) of `from` (this memory or another rank's) to [dst, ...):
  // their provenance, and the known words among them.
  void CopyFrom(const ShadowMemory& from, uint64_t src, uint64_t dst, uint64_t bytes);

  // The 8-byte word at `addr` now holds `value`, written by the host or a flag kernel.
  void StoreWord(uint64_t addr, uint64_t value);
  // Assign(addr, addr + 8, origin, 0) then StoreWord(addr, value): a flag kernel's store. A word
  // stored before (a flag stored again) is updated in place.
  void AssignWord(uint64_t addr, uint64_t value, uint64_t origin);
  // The word at `addr`, when known (see the file comment).
  std::optional<uint64_t> LoadWord(uint64_t addr) const;

 private:
  struct Piece {
    uint64_t end;
    uint64_t origin;
    uint64_t origin_offset;
  };
  // Appends the provenance of [lo, hi) to `out` (a vector of ProvenancePiece).
  template <typename Pieces>
  void Collect(uint64_t lo, uint64_t hi, Pieces& out) const;
  // Cuts the piece containing `at` (if any) so that a piece starts at `at`.
  void Split(uint64_t at);
  using PieceMap = absl::btree_map<uint64_t, Piece>;
  // Whether `next` continues `prev`: adjacent, and the same origin's bytes in order.
  static bool Continues(const PieceMap::const_iterator& prev, const PieceMap::const_iterator& next);
  // Merges the piece at `it`, just written, with the pieces beside it where they continue.
  void MergeAround(PieceMap::iterator it);
  void ForgetWords(uint64_t lo, uint64_t hi);
  // words_[addr] = value, widening [words_lo_, words_hi_).
  void KeepWord(uint64_t addr, uint64_t value);

  // B-trees: flag waits look words up at every scheduling step.
  PieceMap pieces_;  // by start; gaps were never written
  absl::btree_map<uint64_t, uint64_t> words_;
  // Bytes every word ever kept lies in (never narrowed): most writes fall outside, and need not
  // look for words to forget.
  uint64_t words_lo_ = ~uint64_t{0}, words_hi_ = 0;
};

}  // namespace dmalab

#endif  // DMALAB_SIM_SHADOW_MEMORY_H_
