// AddressReservations: the simulator's deferred mappings, as CUDA's virtual memory API
// (cuMemAddressReserve, cuMemMap, cuMemUnmap, cuMemAddressFree). A rank reserves a range of its
// own address space with nothing behind it; an IPC mapping may later be placed at the range's
// start (IpcTable::MapAt) and closed again. Work can thus name peer memory before it is mapped,
// which is how a custom all-reduce captures a graph whose peers' buffers are registered only
// after the capture. Reserved ranges lie in their own window of each rank's address space, and
// its addresses are never reused, so a released range stays known.
#ifndef DMALAB_SIM_ADDRESS_RESERVATIONS_H_
#define DMALAB_SIM_ADDRESS_RESERVATIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dmalab {

struct Reservation {
  uint64_t id = 0;  // 1-based
  int rank = 0;
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t mapping = 0;         // the IPC mapping placed at addr (IpcMapping::id), 0: unmapped
  uint64_t closed_mapping = 0;  // the last one closed, for findings
  bool released = false;
  std::string reserved_by, released_by;  // contexts
  std::string Describe() const;          // "reservation #3 [0x.., 0x..) of rank 1"
};

class AddressReservations {
 public:
  explicit AddressReservations(int world);

  // A new range of `bytes` (1 .. kMaxBytes) on `rank`. Errors past kMaxReservations.
  absl::StatusOr<const Reservation*> Reserve(int rank, uint64_t bytes, std::string_view by);
  // The reservation (live or released) whose range covers addr on `rank`, or null.
  const Reservation* At(int rank, uint64_t addr) const;
  // The live reservation that starts at addr and can take a mapping of `bytes`: errors say why
  // not (no reservation there, inside one, released, too small, a mapping already placed).
  absl::StatusOr<const Reservation*> ForMapping(int rank, uint64_t addr, uint64_t bytes) const;
  // Records that mapping `mapping` (0: none) is placed in reservation `id`.
  void SetMapping(uint64_t id, uint64_t mapping) {
    Reservation& r = table_[id - 1];
    if (mapping == 0 && r.mapping != 0) r.closed_mapping = r.mapping;
    r.mapping = mapping;
  }
  // Ends the reservation that starts at addr; errors name what addr is instead (inside one, not
  // in any, already released and by whom). Returns the reservation (its mapping still recorded,
  // for the caller to close).
  absl::StatusOr<const Reservation*> Release(int rank, uint64_t addr, std::string_view by);
  // Whether addr lies in `rank`'s reservation window (reserved or not).
  static bool InWindow(int rank, uint64_t addr);
  int64_t Live(int rank) const { return live_[rank]; }

  static constexpr size_t kMaxReservations = size_t{1} << 20;
  static constexpr uint64_t kMaxBytes = uint64_t{1} << 36;  // 64 GiB per range

 private:
  std::vector<Reservation> table_;                     // id - 1
  std::vector<std::map<uint64_t, uint64_t>> by_addr_;  // per rank: start -> id
  std::vector<uint64_t> next_addr_;                    // per rank
  std::vector<int64_t> live_;                          // per rank
};

}  // namespace dmalab

#endif  // DMALAB_SIM_ADDRESS_RESERVATIONS_H_
