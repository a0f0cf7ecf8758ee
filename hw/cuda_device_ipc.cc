// CudaDevice's IPC: memory handles over CUDA IPC (hw/cuda_device.h).
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "common/core/status_macros.h"
#include "hw/cuda_device.h"
#include "hw/cuda_status.h"

namespace dmalab {
namespace {

// The handle's layout: the CUDA handle of the segment, then what this device adds.
constexpr size_t kCudaHandleAt = 0;
constexpr size_t kMagicAt = 64;   // "dmalabIP"
constexpr size_t kOffsetAt = 72;  // the allocation's offset in the segment
constexpr size_t kBytesAt = 80;   // the allocation's size
constexpr size_t kAddrAt = 88;    // the allocation's address in the exporting process
constexpr size_t kPidAt = 96;     // the exporting process
constexpr char kMagic[8] = {'d', 'm', 'a', 'l', 'a', 'b', 'I', 'P'};
static_assert(sizeof(cudaIpcMemHandle_t) == 64, "a CUDA IPC handle is 64 bytes");
static_assert(kPidAt + 8 <= kIpcHandleBytes, "the handle holds the CUDA handle and the range");

// Closed mappings remembered, so that a use after close is named as such; older ones are
// forgotten (a use of one is then an unknown range, still refused).
constexpr size_t kClosedMappingsKept = 4096;

void PutWord(IpcHandle& h, size_t at, uint64_t v) { std::memcpy(h.bytes.data() + at, &v, 8); }
uint64_t Word(const IpcHandle& h, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, h.bytes.data() + at, 8);
  return v;
}

}  // namespace

absl::StatusOr<IpcHandle> CudaDevice::ExportMemory(const MemRef& allocation) {
  DMALAB_RETURN_IF_ERROR(CheckRank(allocation.rank, "ipc export"));
  const Rank& rank = ranks_[allocation.rank];
  auto live = rank.live.find(allocation.addr);
  if (live == rank.live.end() ||
      (allocation.alloc_id != 0 && allocation.alloc_id != live->second.alloc_id)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ipc export: 0x%x on rank %d (allocation %d) is not the start of a live allocation",
        allocation.addr, allocation.rank, allocation.alloc_id));
  }
  const std::optional<std::pair<uint64_t, uint64_t>> segment =
      rank.allocator->SegmentOf(allocation.addr);
  if (!segment.has_value()) {
    return absl::InternalError(absl::StrFormat(
        "ipc export: allocation 0x%x on rank %d lies in no segment of its allocator",
        allocation.addr, allocation.rank));
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(rank.gpu));
  cudaIpcMemHandle_t cuda;
  DMALAB_CUDA_RETURN_IF_ERROR(
      cudaIpcGetMemHandle(&cuda, reinterpret_cast<void*>(static_cast<uintptr_t>(segment->first))),
      "ipc export of rank %d's allocation 0x%x", allocation.rank, allocation.addr);
  IpcHandle h;
  std::memcpy(h.bytes.data() + kCudaHandleAt, &cuda, sizeof(cuda));
  std::memcpy(h.bytes.data() + kMagicAt, kMagic, sizeof(kMagic));
  PutWord(h, kOffsetAt, allocation.addr - segment->first);
  PutWord(h, kBytesAt, live->second.bytes);
  PutWord(h, kAddrAt, allocation.addr);
  PutWord(h, kPidAt, static_cast<uint64_t>(getpid()));
  return h;
}

absl::StatusOr<MemRef> CudaDevice::OpenMemory(int rank, const IpcHandle& handle) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "ipc open"));
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("ipc open"));
  if (std::memcmp(handle.bytes.data() + kMagicAt, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "ipc open: the bytes are not a memory handle of a CUDA device (was it exported by "
        "ExportMemory and passed on unchanged?)");
  }
  const uint64_t offset = Word(handle, kOffsetAt);
  const uint64_t bytes = Word(handle, kBytesAt);
  const bool own_process = Word(handle, kPidAt) == static_cast<uint64_t>(getpid());
  std::array<uint8_t, 64> key;
  std::memcpy(key.data(), handle.bytes.data() + kCudaHandleAt, key.size());
  auto seg = mapped_segments_.find(key);
  if (seg == mapped_segments_.end()) {
    MappedSegment m;
    m.gpu = ranks_[rank].gpu;
    m.foreign = !own_process;
    if (own_process) {
      // CUDA maps a handle only into other processes; here the exporter's address serves.
      m.base = Word(handle, kAddrAt) - offset;
    } else {
      DMALAB_RETURN_IF_ERROR(UseGpu(m.gpu));
      cudaIpcMemHandle_t cuda;
      std::memcpy(&cuda, key.data(), sizeof(cuda));
      void* base = nullptr;
      DMALAB_CUDA_RETURN_IF_ERROR(cudaIpcOpenMemHandle(&base, cuda, cudaIpcMemLazyEnablePeerAccess),
                                  "ipc open on rank %d (a peer's allocation of %d bytes)", rank,
                                  bytes);
      m.base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base));
    }
    seg = mapped_segments_.emplace(key, m).first;
  }
  ++seg->second.mappings;
  const uint64_t number = mappings_.empty() ? 1 : mappings_.rbegin()->first + 1;
  mappings_[number] = Mapping{rank, seg->second.base + offset, bytes, key, true};
  return MemRef{rank, seg->second.base + offset, bytes, 0, number};
}

absl::Status CudaDevice::CloseMemory(const MemRef& mapping) {
  auto it = mappings_.find(mapping.via_mapping);
  if (mapping.via_mapping == 0 || it == mappings_.end() || it->second.addr != mapping.addr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc close: 0x%x on rank %d is not a mapping OpenMemory returned",
                        mapping.addr, mapping.rank));
  }
  if (!it->second.open || it->second.bytes != mapping.bytes) {
    // Opens of one segment share addresses (one process maps a handle once, counted): a plugin
    // that knows its mappings by address closes them one after the other, each by its range.
    const uint64_t alias = OpenAlias(it->second, mapping.addr, mapping.bytes, /*exact=*/true);
    if (alias != 0) it = mappings_.find(alias);
  }
  Mapping& m = it->second;
  if (!m.open) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ipc close: mapping %d (0x%x on rank %d) was closed already",
                        mapping.via_mapping, m.addr, m.rank));
  }
  m.open = false;
  auto seg = mapped_segments_.find(m.segment);
  absl::Status status;
  if (seg != mapped_segments_.end() && --seg->second.mappings == 0) {
    if (seg->second.foreign) {
      status = UseGpu(seg->second.gpu);
      if (status.ok()) {
        const cudaError_t e = cudaIpcCloseMemHandle(
            reinterpret_cast<void*>(static_cast<uintptr_t>(seg->second.base)));
        status = CudaStatus(e, "cudaIpcCloseMemHandle", "ipc close of a peer's segment");
      }
    }
    mapped_segments_.erase(seg);
  }
  // Forget the oldest closed mappings beyond the ones kept.
  size_t closed = 0;
  for (const auto& [n, mm] : mappings_) closed += mm.open ? 0 : 1;
  for (auto c = mappings_.begin(); closed > kClosedMappingsKept && c != mappings_.end();) {
    if (c->second.open) {
      ++c;
      continue;
    }
    c = mappings_.erase(c);
    --closed;
  }
  return status;
}

absl::StatusOr<IpcHandle> CudaDevice::ExportEvent(EventId event) {
  return absl::UnimplementedError(absl::StrFormat(
      "ipc export of event %d: the CUDA device offers no event handles; ranks in separate "
      "processes meet through flags (SignalFlag/WaitFlag, WriteValue/WaitValue)",
      event.value()));
}

absl::StatusOr<EventId> CudaDevice::OpenEvent(int rank, const IpcHandle& /*handle*/) {
  return absl::UnimplementedError(absl::StrFormat(
      "ipc open of an event handle on rank %d: the CUDA device offers no event handles", rank));
}

int CudaDevice::open_mappings() const {
  int n = 0;
  for (const auto& [number, m] : mappings_) n += m.open ? 1 : 0;
  return n;
}

int64_t CudaDevice::LiveAllocations(int rank) const {
  if (rank < 0 || rank >= world_size()) return -1;
  return static_cast<int64_t>(ranks_[rank].live.size());
}

absl::Status CudaDevice::CheckMapping(const MemRef& mem, const OperandName& name) const {
  auto it = mappings_.find(mem.via_mapping);
  if (it == mappings_.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: [0x%x, +%d) on rank %d names IPC mapping %d, which this device never opened (or "
        "closed long ago)",
        name.ToString(), mem.addr, mem.bytes, mem.rank, mem.via_mapping));
  }
  if (!it->second.open) {
    // Closed, but another open of the same segment may cover the range (they share addresses):
    // the range is checked against that one.
    const uint64_t alias = OpenAlias(it->second, mem.addr, mem.bytes, /*exact=*/false);
    if (alias != 0) it = mappings_.find(alias);
  }
  const Mapping& m = it->second;
  if (!m.open) {
    return absl::DataLossError(absl::StrFormat(
        "%s: [0x%x, +%d) on rank %d goes through IPC mapping %d, which was closed (use after "
        "close)",
        name.ToString(), mem.addr, mem.bytes, mem.rank, mem.via_mapping));
  }
  if (mem.rank != m.rank || mem.addr < m.addr || mem.addr + mem.bytes > m.addr + m.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: [0x%x, +%d) on rank %d is not inside IPC mapping %d ([0x%x, +%d) on rank %d)",
        name.ToString(), mem.addr, mem.bytes, mem.rank, mem.via_mapping, m.addr, m.bytes, m.rank));
  }
  return absl::OkStatus();
}

uint64_t CudaDevice::OpenAlias(const Mapping& like, uint64_t addr, uint64_t bytes,
                               bool exact) const {
  for (const auto& [number, m] : mappings_) {
    if (!m.open || m.rank != like.rank || m.segment != like.segment) continue;
    const bool fits = exact ? m.addr == addr && m.bytes == bytes
                            : m.addr <= addr && addr + bytes <= m.addr + m.bytes;
    if (fits) return number;
  }
  return 0;
}

void CudaDevice::CloseAllMappings() {
  for (auto& [key, seg] : mapped_segments_) {
    if (!seg.foreign) continue;
    cudaSetDevice(gpus_[seg.gpu].ordinal);
    cudaIpcCloseMemHandle(reinterpret_cast<void*>(static_cast<uintptr_t>(seg.base)));
  }
  mapped_segments_.clear();
}

}  // namespace dmalab
