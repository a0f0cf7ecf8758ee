#include "sim/ipc_table.h"

#include <cstring>
#include <iterator>

#include "absl/strings/str_format.h"
#include "common/core/hash.h"
#include "sim/sim_memory.h"

namespace dmalab {
namespace {

// The handle's layout: magic (8), nonce (8), export id (8), checksum (8) of the first 24 bytes;
// the rest is zero.
constexpr char kMemoryMagic[8] = {'d', 'm', 'l', 'b', 'i', 'p', 'c', 'm'};
constexpr char kEventMagic[8] = {'d', 'm', 'l', 'b', 'i', 'p', 'c', 'e'};
constexpr uint64_t kMappingAlign = uint64_t{2} << 20;

uint64_t Word(absl::Span<const uint8_t> bytes, size_t at) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

}  // namespace

IpcTable::IpcTable(int world, uint64_t nonce)
    : nonce_(nonce), by_addr_(world), next_addr_(world), open_(world, 0) {
  for (int r = 0; r < world; ++r) {
    next_addr_[r] = SimMemory::RankBase(r) + SimMemory::kMappingWindowOffset;
  }
}

IpcHandleBytes IpcTable::Encode(uint64_t export_id, bool event) const {
  IpcHandleBytes h{};
  std::memcpy(h.data(), event ? kEventMagic : kMemoryMagic, 8);
  std::memcpy(h.data() + 8, &nonce_, 8);
  std::memcpy(h.data() + 16, &export_id, 8);
  const uint64_t sum = Xxh64(absl::MakeConstSpan(h.data(), 24));
  std::memcpy(h.data() + 24, &sum, 8);
  return h;
}

absl::StatusOr<IpcHandleBytes> IpcTable::Export(const IpcExport& e) {
  const bool event = e.event >= 0;
  const std::pair<int, int64_t> key{
      e.rank, event ? -int64_t{e.event} - 1 : static_cast<int64_t>(e.alloc_id)};
  if (auto it = export_of_.find(key); it != export_of_.end()) return Encode(it->second, event);
  if (exports_.size() >= kMaxExports) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rank %d: IPC export refused: %d handles were exported on this device already (the "
        "simulator keeps at most %d)",
        e.rank, exports_.size(), kMaxExports));
  }
  exports_.push_back(e);
  export_of_[key] = exports_.size();
  return Encode(exports_.size(), event);
}

absl::StatusOr<uint64_t> IpcTable::Decode(absl::Span<const uint8_t> handle, bool events) const {
  const std::string_view want = events ? "an event handle" : "a memory handle";
  if (handle.size() != kIpcHandleBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the handle is %d bytes; %s is %d", handle.size(), want, kIpcHandleBytes));
  }
  const bool is_memory = std::memcmp(handle.data(), kMemoryMagic, 8) == 0;
  const bool is_event = std::memcmp(handle.data(), kEventMagic, 8) == 0;
  if (!is_memory && !is_event) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the bytes are not %s of this device: they do not start as a dmalab IPC handle (was it "
        "exported by ipc_get_%s_handle and passed on unchanged?)",
        want, events ? "event" : "mem"));
  }
  if (is_event != events) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the bytes are %s, not %s", is_event ? "an event handle" : "a memory handle", want));
  }
  const uint64_t sum = Xxh64(handle.subspan(0, 24));
  const uint64_t id = Word(handle, 16);
  if (Word(handle, 24) != sum || Word(handle, 8) != nonce_ || id == 0 || id > exports_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the bytes are not %s exported on this device (a corrupted handle, or one of another "
        "run)",
        want));
  }
  return id;
}

absl::StatusOr<const IpcMapping*> IpcTable::Map(int rank, uint64_t export_id, std::string_view by) {
  if (mappings_.size() >= kMaxMappings) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rank %d: IPC open refused: %d mappings were opened on this device already (the "
        "simulator keeps at most %d)",
        rank, mappings_.size(), kMaxMappings));
  }
  const IpcExport& e = exported(export_id);
  const uint64_t span = (e.bytes + kMappingAlign - 1) / kMappingAlign * kMappingAlign;
  if (next_addr_[rank] + span > SimMemory::RankBase(rank) + SimMemory::kReservationWindowOffset) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rank %d: IPC open refused: the rank's mapping window is full (%d mappings opened)", rank,
        mappings_.size()));
  }
  IpcMapping m;
  m.id = mappings_.size() + 1;
  m.rank = rank;
  m.addr = next_addr_[rank];
  m.bytes = e.bytes;
  m.export_id = export_id;
  m.opened_by = std::string(by);
  next_addr_[rank] += span;
  by_addr_[rank][m.addr] = m.id;
  ++open_[rank];
  mappings_.push_back(std::move(m));
  return &mappings_.back();
}

absl::StatusOr<const IpcMapping*> IpcTable::MapAt(int rank, uint64_t export_id, uint64_t addr,
                                                  std::string_view by) {
  if (mappings_.size() >= kMaxMappings) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "rank %d: IPC open refused: %d mappings were opened on this device already (the "
        "simulator keeps at most %d)",
        rank, mappings_.size(), kMaxMappings));
  }
  IpcMapping m;
  m.id = mappings_.size() + 1;
  m.rank = rank;
  m.addr = addr;
  m.bytes = exported(export_id).bytes;
  m.export_id = export_id;
  m.placed = true;
  m.opened_by = std::string(by);
  by_addr_[rank][m.addr] = m.id;
  ++open_[rank];
  mappings_.push_back(std::move(m));
  return &mappings_.back();
}

const IpcMapping* IpcTable::MappingAt(int rank, uint64_t addr) const {
  const auto& index = by_addr_[rank];
  auto it = index.upper_bound(addr);
  if (it == index.begin()) return nullptr;
  const IpcMapping& m = mappings_[std::prev(it)->second - 1];
  return addr < m.addr + m.bytes ? &m : nullptr;
}

absl::Status IpcTable::Unmap(int rank, uint64_t addr, std::string_view by) {
  const IpcMapping* found = MappingAt(rank, addr);
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d: 0x%x is not an IPC mapping this rank opened", rank, addr));
  }
  IpcMapping& m = mappings_[found->id - 1];
  if (m.addr != addr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: 0x%x lies inside IPC mapping #%d [0x%x, 0x%x); close it by its start address",
        rank, addr, m.id, m.addr, m.addr + m.bytes));
  }
  if (!m.open) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank %d: IPC mapping #%d at 0x%x was already closed by '%s'", rank, m.id,
                        addr, m.closed_by));
  }
  m.open = false;
  m.closed_by = std::string(by);
  --open_[rank];
  if (m.placed) by_addr_[rank].erase(m.addr);
  return absl::OkStatus();
}

bool IpcTable::InWindow(int rank, uint64_t addr) {
  const uint64_t lo = SimMemory::RankBase(rank) + SimMemory::kMappingWindowOffset;
  return addr >= lo && addr < SimMemory::RankBase(rank) + SimMemory::kReservationWindowOffset;
}

}  // namespace dmalab
