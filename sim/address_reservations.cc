#include "sim/address_reservations.h"

#include <iterator>

#include "absl/strings/str_format.h"
#include "sim/sim_memory.h"

namespace dmalab {
namespace {

// IPC mappings grow from the start of the upper half (SimMemory::kMappingWindowOffset) and stop
// below this window.
constexpr uint64_t kWindowOffset = SimMemory::kReservationWindowOffset;
constexpr uint64_t kAlign = uint64_t{2} << 20;

}  // namespace

std::string Reservation::Describe() const {
  return absl::StrFormat("reserved range #%d [0x%x, 0x%x) of rank %d", id, addr, addr + bytes,
                         rank);
}

AddressReservations::AddressReservations(int world)
    : by_addr_(world), next_addr_(world), live_(world, 0) {
  for (int r = 0; r < world; ++r) next_addr_[r] = SimMemory::RankBase(r) + kWindowOffset;
}

absl::StatusOr<const Reservation*> AddressReservations::Reserve(int rank, uint64_t bytes,
                                                                std::string_view by) {
  if (bytes == 0 || bytes > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "reserve_address on rank %d: %d bytes; a range is 1 .. %d bytes", rank, bytes, kMaxBytes));
  }
  if (table_.size() >= kMaxReservations) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "reserve_address on rank %d refused: %d ranges were reserved on this device already (the "
        "simulator keeps at most %d)",
        rank, table_.size(), kMaxReservations));
  }
  Reservation r;
  r.id = table_.size() + 1;
  r.rank = rank;
  r.addr = next_addr_[rank];
  r.bytes = bytes;
  r.reserved_by = std::string(by);
  next_addr_[rank] += (bytes + kAlign - 1) / kAlign * kAlign;
  by_addr_[rank][r.addr] = r.id;
  ++live_[rank];
  table_.push_back(std::move(r));
  return &table_.back();
}

const Reservation* AddressReservations::At(int rank, uint64_t addr) const {
  const auto& index = by_addr_[rank];
  auto it = index.upper_bound(addr);
  if (it == index.begin()) return nullptr;
  const Reservation& r = table_[std::prev(it)->second - 1];
  return addr < r.addr + r.bytes ? &r : nullptr;
}

absl::StatusOr<const Reservation*> AddressReservations::ForMapping(int rank, uint64_t addr,
                                                                   uint64_t bytes) const {
  const Reservation* r = At(rank, addr);
  if (r == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: 0x%x is not a range this rank reserved (reserve_address)", rank, addr));
  }
  if (r->addr != addr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d: 0x%x lies inside %s; a mapping is placed at a range's start",
                        rank, addr, r->Describe()));
  }
  if (r->released) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: %s was released by '%s'", rank, r->Describe(), r->released_by));
  }
  if (r->bytes < bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: %s is %d bytes; the handle's allocation is %d bytes and does not fit", rank,
        r->Describe(), r->bytes, bytes));
  }
  if (r->mapping != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: %s already holds IPC mapping #%d; close it before mapping another", rank,
        r->Describe(), r->mapping));
  }
  return r;
}

absl::StatusOr<const Reservation*> AddressReservations::Release(int rank, uint64_t addr,
                                                                std::string_view by) {
  const Reservation* found = At(rank, addr);
  if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: 0x%x is not a range this rank reserved (reserve_address)", rank, addr));
  }
  if (found->addr != addr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d: 0x%x lies inside %s; release it by its start address", rank, addr,
                        found->Describe()));
  }
  Reservation& r = table_[found->id - 1];
  if (r.released) {
    return absl::FailedPreconditionError(absl::StrFormat("rank %d: %s was already released by '%s'",
                                                         rank, r.Describe(), r.released_by));
  }
  r.released = true;
  r.released_by = std::string(by);
  --live_[rank];
  return &r;
}

bool AddressReservations::InWindow(int rank, uint64_t addr) {
  const uint64_t lo = SimMemory::RankBase(rank) + kWindowOffset;
  return addr >= lo && addr < SimMemory::RankBase(rank) + SimMemory::kRankSpan;
}

}  // namespace dmalab
