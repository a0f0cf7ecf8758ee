// IpcTable: the simulator's CUDA IPC. A rank exports a memory handle for one of its allocations
// (an opaque 64-byte blob, as cudaIpcGetMemHandle's); a peer opens it into a mapping: a range of
// addresses in the opener's own address space (SimMemory's mapping window) that reaches the
// exporter's bytes. As with CUDA, the exporter's free does not wait for the peers' mappings: the
// table keeps what was exported and mapped, so the device can tell a use through a mapping whose
// allocation was freed (or re-handed to another tensor) from a legal one. Event handles work the
// same way. Addresses in a mapping window are never reused, so a closed mapping stays known.
#ifndef DMALAB_SIM_IPC_TABLE_H_
#define DMALAB_SIM_IPC_TABLE_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dmalab/device.h"

namespace dmalab {

using IpcHandleBytes = std::array<uint8_t, kIpcHandleBytes>;

// What a rank exported: one allocation (memory) or one event.
struct IpcExport {
  int rank = 0;
  uint64_t alloc_id = 0;  // memory: the allocation; events: 0
  uint64_t addr = 0;
  uint64_t bytes = 0;
  int32_t event = -1;  // events: the exporter's event number
  std::string tag;     // the allocation's tag
  std::string by;      // the context that exported it
};

// A peer's mapping of an exported allocation, in the opener's address space.
struct IpcMapping {
  uint64_t id = 0;  // 1-based
  int rank = 0;     // the opener
  uint64_t addr = 0;
  uint64_t bytes = 0;
  uint64_t export_id = 0;
  bool open = true;
  bool placed = false;  // at the start of a reserved range (MapAt): its address is reused
  std::string opened_by, closed_by;  // contexts
};

class IpcTable {
 public:
  // `nonce` tells this device's handles from another's (a handle of another device is garbage).
  IpcTable(int world, uint64_t nonce);

  // The handle of `e` (memory or event); exporting the same allocation or event again gives
  // the same handle, as CUDA does. Errors past kMaxExports exports.
  absl::StatusOr<IpcHandleBytes> Export(const IpcExport& e);
  // The export a handle names; the error says why the bytes are not a handle of this device,
  // or are a handle of the other kind (`events`: an event handle is wanted).
  absl::StatusOr<uint64_t> Decode(absl::Span<const uint8_t> handle, bool events) const;
  const IpcExport& exported(uint64_t export_id) const { return exports_.at(export_id - 1); }

  // A new mapping of memory export `export_id` into `rank`'s mapping window. Errors past
  // kMaxMappings mappings.
  absl::StatusOr<const IpcMapping*> Map(int rank, uint64_t export_id, std::string_view by);
  // A new mapping of memory export `export_id` placed at addr on `rank` (the start of a reserved
  // range, sim/address_reservations.h, which the caller checked). Once closed it is forgotten by
  // address: the range may hold another mapping.
  absl::StatusOr<const IpcMapping*> MapAt(int rank, uint64_t export_id, uint64_t addr,
                                          std::string_view by);
  const IpcMapping& mapping(uint64_t id) const { return mappings_.at(id - 1); }
  // The mapping (open or closed) whose range covers addr on `rank`, or null.
  const IpcMapping* MappingAt(int rank, uint64_t addr) const;
  // Closes the mapping that starts at addr on `rank`; errors name what addr is instead (inside
  // a mapping, not in any, already closed and by whom).
  absl::Status Unmap(int rank, uint64_t addr, std::string_view by);
  // Whether addr lies in `rank`'s mapping window (mapped or not), below the reservations'.
  static bool InWindow(int rank, uint64_t addr);
  // Mappings `rank` holds open.
  int64_t OpenMappings(int rank) const { return open_[rank]; }

  static constexpr size_t kMaxExports = size_t{1} << 20;
  static constexpr size_t kMaxMappings = size_t{1} << 20;

 private:
  IpcHandleBytes Encode(uint64_t export_id, bool event) const;

  uint64_t nonce_;
  std::vector<IpcExport> exports_;                         // export id - 1
  std::map<std::pair<int, int64_t>, uint64_t> export_of_;  // (rank, alloc id or -event-1)
  std::vector<IpcMapping> mappings_;                       // mapping id - 1
  std::vector<std::map<uint64_t, uint64_t>> by_addr_;      // per rank: start address -> id
  std::vector<uint64_t> next_addr_;                        // per rank: next window address
  std::vector<int64_t> open_;                              // per rank
};

}  // namespace dmalab

#endif  // DMALAB_SIM_IPC_TABLE_H_
