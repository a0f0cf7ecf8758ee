#include "tests/runner/shm_ipc_device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/core/dtype.h"

namespace dmalab {
namespace {

// What an exported handle holds, at the start of its bytes (the rest is zero).
struct HandleFields {
  uint64_t magic = 0;
  int32_t pid = 0;  // the exporting process
  int32_t fd = 0;   // the allocation's memfd in that process
  uint64_t bytes = 0;
};
static_assert(sizeof(HandleFields) <= kIpcHandleBytes);
// How long Drain waits for queued work (a peer's flag) before it names what waits.
constexpr auto kDrainLimit = std::chrono::seconds(20);

uint64_t* Word(const MemRef& m) { return reinterpret_cast<uint64_t*>(m.addr); }

// "shmipc01" in ASCII: tells a handle of this device from garbage.
constexpr uint64_t kHandleMagic = 0x3130637069686d73ull;

std::string Errno() { return std::strerror(errno); }

// `addr` of `bytes` mapped shared from `fd`, or an error naming `what`.
absl::StatusOr<void*> MapShared(int fd, uint64_t bytes, std::string_view what) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrFormat("%s: mmap of %d bytes: %s", what, bytes, Errno()));
  }
  return p;
}

// The region of `regions` (keyed by address) that holds [addr, addr + bytes), or nullptr.
template <typename Region>
const Region* Holding(const std::map<uint64_t, Region>& regions, uint64_t addr, uint64_t bytes) {
  auto it = regions.upper_bound(addr);
  if (it == regions.begin()) return nullptr;
  --it;
  const uint64_t base = it->first;
  if (addr >= base && addr + bytes >= addr && addr + bytes <= base + it->second.bytes) {
    return &it->second;
  }
  return nullptr;
}

}  // namespace

ShmIpcDevice::ShmIpcDevice() : engine_([this] { Engine(); }) {}

ShmIpcDevice::~ShmIpcDevice() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_one();
  engine_.join();
  for (auto& [addr, r] : mappings_) ::munmap(r.base, r.bytes);
  for (auto& [addr, r] : allocations_) {
    ::munmap(r.base, r.bytes);
    ::close(r.fd);
  }
}

absl::StatusOr<MemRef> ShmIpcDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  std::unique_lock<std::mutex> lock(mu_);
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate '%s': rank is %d; the shm device has only rank 0", tag, rank));
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate '%s': 0 bytes; the shm device maps at least one byte", tag));
  }
  // MFD_CLOEXEC: the memfd is reached by peers through /proc, never inherited by an exec.
  const int fd = ::memfd_create("dmalab-shm", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate '%s': memfd_create: %s", tag, Errno()));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrFormat("allocate '%s': ftruncate to %d bytes: %s", tag, bytes, why));
  }
  absl::StatusOr<void*> p = MapShared(fd, bytes, absl::StrFormat("allocate '%s'", tag));
  if (!p.ok()) {
    ::close(fd);
    return p.status();
  }
  const uint64_t addr = reinterpret_cast<uint64_t>(*p);
  const uint64_t id = next_alloc_id_++;
  allocations_[addr] = Region{*p, bytes, fd, id};
  return MemRef{0, addr, bytes, id, 0};
}

absl::Status ShmIpcDevice::Free(const MemRef& allocation) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = allocations_.find(allocation.addr);
  if (allocation.rank != 0 || it == allocations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("free: 0x%x on rank %d is not a live allocation of the shm device",
                        allocation.addr, allocation.rank));
  }
  // As cudaFree, after the work that may still use it.
  if (absl::Status s = Drain(lock, "free"); !s.ok()) return s;
  ::munmap(it->second.base, it->second.bytes);
  ::close(it->second.fd);
  allocations_.erase(it);
  return absl::OkStatus();
}

StreamId ShmIpcDevice::ComputeStream(int rank) { return rank == 0 ? StreamId(0) : StreamId(-1); }

absl::StatusOr<StreamId> ShmIpcDevice::CreateStream(int rank, StreamKind /*kind*/,
                                                    std::string_view name) {
  std::unique_lock<std::mutex> lock(mu_);
  if (rank != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "create_stream '%s': rank is %d; the shm device has only rank 0", name, rank));
  }
  return StreamId(next_stream_++);
}

absl::StatusOr<EventId> ShmIpcDevice::CreateEvent(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("create_event: rank is %d; the shm device has only rank 0", rank));
  }
  event_recorded_.push_back(0);
  event_pending_.push_back(0);
  return EventId(next_event_++);
}

absl::Status ShmIpcDevice::Enqueue(StreamId stream, std::string_view label, Op op) {
  queues_[stream.value()].emplace_back(std::string(label), std::move(op));
  Progress();
  work_.notify_one();
  return absl::OkStatus();
}

bool ShmIpcDevice::Progress() {
  bool ran = true;
  while (ran) {
    ran = false;
    for (auto& [id, q] : queues_) {
      while (!q.empty() && q.front().second()) {
        q.pop_front();
        ran = true;
      }
    }
  }
  for (const auto& [id, q] : queues_) {
    if (!q.empty()) return false;
  }
  return true;
}

absl::Status ShmIpcDevice::Drain(std::unique_lock<std::mutex>& lock, std::string_view what) {
  const auto start = std::chrono::steady_clock::now();
  while (!Progress()) {
    if (std::chrono::steady_clock::now() - start > kDrainLimit) {
      for (const auto& [id, q] : queues_) {
        if (q.empty()) continue;
        return absl::DeadlineExceededError(absl::StrFormat(
            "%s: stream %d of the shm device still waits after %d s at '%s'", what, id,
            std::chrono::duration_cast<std::chrono::seconds>(kDrainLimit).count(),
            q.front().first));
      }
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
  return absl::OkStatus();
}

void ShmIpcDevice::Engine() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (Progress()) {
      work_.wait(lock);  // until something is enqueued, or the end
    } else {
      // Blocked on a flag a peer process sets: look again soon, as a spinning kernel does.
      work_.wait_for(lock, std::chrono::microseconds(50));
    }
  }
}

absl::Status ShmIpcDevice::Synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  return Drain(lock, "synchronize");
}

absl::StatusOr<bool> ShmIpcDevice::RankIdle(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank_idle: rank is %d; the shm device has only rank 0", rank));
  }
  return Progress();
}

absl::Status ShmIpcDevice::CheckStream(StreamId stream, std::string_view what) const {
  if (stream.value() < 0 || stream.value() >= next_stream_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: stream %d is not a stream of the shm device", what, stream));
  }
  return absl::OkStatus();
}

// A record is numbered when enqueued; a wait waits for the records enqueued before it to run.
absl::Status ShmIpcDevice::RecordEvent(EventId event, StreamId stream) {
  std::unique_lock<std::mutex> lock(mu_);
  if (event.value() < 0 || event.value() >= next_event_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record_event: event %d is not an event of the shm device", event));
  }
  if (absl::Status s = CheckStream(stream, "record_event"); !s.ok()) return s;
  const uint64_t n = ++event_pending_[event.value()];
  const int32_t e = event.value();
  return Enqueue(stream, "record_event", [this, e, n] {
    event_recorded_[e] = std::max(event_recorded_[e], n);
    return true;
  });
}

absl::Status ShmIpcDevice::WaitEvent(StreamId stream, EventId event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (event.value() < 0 || event.value() >= next_event_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait_event: event %d is not an event of the shm device", event));
  }
  if (absl::Status s = CheckStream(stream, "wait_event"); !s.ok()) return s;
  const int32_t e = event.value();
  const uint64_t n = event_pending_[e];
  return Enqueue(stream, "wait_event", [this, e, n] { return event_recorded_[e] >= n; });
}

absl::Status ShmIpcDevice::CheckRange(const MemRef& m, std::string_view what) const {
  if (m.rank == 0 && (Holding(allocations_, m.addr, m.bytes) != nullptr ||
                      Holding(mappings_, m.addr, m.bytes) != nullptr)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: [0x%x, 0x%x) on rank %d lies in no live allocation or open mapping of the shm device",
      what, m.addr, m.addr + m.bytes, m.rank));
}

absl::Status ShmIpcDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                                std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  if (absl::Status s = CheckRange(dst, absl::StrFormat("%s dst", label)); !s.ok()) return s;
  if (absl::Status s = CheckRange(src, absl::StrFormat("%s src", label)); !s.ok()) return s;
  if (dst.bytes != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: dst is %d bytes, src is %d; a copy's must match", label, dst.bytes, src.bytes));
  }
  // memmove: a copy within one allocation may overlap.
  return Enqueue(stream, label, [dst, src] {
    std::memmove(reinterpret_cast<void*>(dst.addr), reinterpret_cast<const void*>(src.addr),
                 dst.bytes);
    return true;
  });
}

absl::Status ShmIpcDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                  absl::Span<const Operand> terms, int64_t elems,
                                  std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  const uint64_t bytes = static_cast<uint64_t>(elems) * DTypeBytes(dtype);
  if (elems < 0 || terms.empty() || dst.mem.bytes < bytes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %d elements of %d terms into %d bytes",
                                                      label, elems, terms.size(), dst.mem.bytes));
  }
  std::vector<MemRef> in;
  for (const Operand& t : terms) {
    if (t.codec != Codec::kPlain) {
      return absl::UnimplementedError(
          absl::StrFormat("%s: the shm device reduces plain operands only", label));
    }
    if (t.mem.bytes < bytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a term of %d bytes for %d", label, t.mem.bytes, bytes));
    }
    if (absl::Status s = CheckRange(t.mem, absl::StrFormat("%s term", label)); !s.ok()) return s;
    in.push_back(t.mem);
  }
  if (dst.codec != Codec::kPlain) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: the shm device reduces plain operands only", label));
  }
  if (absl::Status s = CheckRange(dst.mem, absl::StrFormat("%s dst", label)); !s.ok()) return s;
  const MemRef out = dst.mem;
  // Sums in fp32, terms left to right, as Device::Reduce says.
  return Enqueue(stream, label, [dtype, out, in, elems] {
    for (int64_t i = 0; i < elems; ++i) {
      float sum = 0;
      for (size_t t = 0; t < in.size(); ++t) {
        const float v = LoadAsFloat(dtype, reinterpret_cast<const void*>(in[t].addr), i);
        sum = t == 0 ? v : sum + v;
      }
      StoreFromFloat(dtype, reinterpret_cast<void*>(out.addr), i, sum);
    }
    return true;
  });
}

absl::Status ShmIpcDevice::SignalFlag(StreamId stream, const MemRef& counter,
                                      const MemRef& peer_flag, std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  if (absl::Status s = CheckRange(counter.Slice(0, 8), label); !s.ok()) return s;
  if (absl::Status s = CheckRange(peer_flag.Slice(0, 8), label); !s.ok()) return s;
  return Enqueue(stream, label, [counter, peer_flag] {
    const uint64_t v = ++*Word(counter);
    __atomic_store_n(Word(peer_flag), v, __ATOMIC_RELEASE);
    return true;
  });
}

absl::Status ShmIpcDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                    std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  if (absl::Status s = CheckRange(expected.Slice(0, 8), label); !s.ok()) return s;
  if (absl::Status s = CheckRange(flag.Slice(0, 8), label); !s.ok()) return s;
  // The increment happens once, when the wait reaches the head of its stream.
  auto target = std::make_shared<uint64_t>(0);
  return Enqueue(stream, label, [expected, flag, target] {
    if (*target == 0) *target = ++*Word(expected);
    return __atomic_load_n(Word(flag), __ATOMIC_ACQUIRE) >= *target;
  });
}

absl::Status ShmIpcDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                      std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  if (absl::Status s = CheckRange(dst.Slice(0, 8), label); !s.ok()) return s;
  return Enqueue(stream, label, [dst, value] {
    __atomic_store_n(Word(dst), value, __ATOMIC_RELEASE);
    return true;
  });
}

absl::Status ShmIpcDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                     std::string_view label) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckStream(stream, label); !s.ok()) return s;
  if (absl::Status s = CheckRange(flag.Slice(0, 8), label); !s.ok()) return s;
  return Enqueue(stream, label,
                 [flag, value] { return __atomic_load_n(Word(flag), __ATOMIC_ACQUIRE) >= value; });
}

absl::Status ShmIpcDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckRange(dst, "write"); !s.ok()) return s;
  if (absl::Status s = Drain(lock, "write"); !s.ok()) return s;
  if (bytes.size() != dst.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "write: dst is %d bytes, data is %d; they must match", dst.bytes, bytes.size()));
  }
  if (!bytes.empty()) std::memcpy(reinterpret_cast<void*>(dst.addr), bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status ShmIpcDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckRange(src, "read"); !s.ok()) return s;
  if (absl::Status s = Drain(lock, "read"); !s.ok()) return s;
  if (bytes.size() != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "read: src is %d bytes, buffer is %d; they must match", src.bytes, bytes.size()));
  }
  if (!bytes.empty()) {
    std::memcpy(bytes.data(), reinterpret_cast<const void*>(src.addr), bytes.size());
  }
  return absl::OkStatus();
}

absl::StatusOr<IpcHandle> ShmIpcDevice::ExportMemory(const MemRef& allocation) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = allocations_.find(allocation.addr);
  if (allocation.rank != 0 || it == allocations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("export: 0x%x on rank %d is not a live allocation of the shm device",
                        allocation.addr, allocation.rank));
  }
  HandleFields f;
  f.magic = kHandleMagic;
  f.pid = static_cast<int32_t>(::getpid());
  f.fd = it->second.fd;
  f.bytes = it->second.bytes;
  IpcHandle h;
  std::memcpy(h.bytes.data(), &f, sizeof(f));
  return h;
}

absl::StatusOr<MemRef> ShmIpcDevice::OpenMemory(int rank, const IpcHandle& handle) {
  std::unique_lock<std::mutex> lock(mu_);
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("open: rank is %d; the shm device has only rank 0", rank));
  }
  HandleFields f;
  std::memcpy(&f, handle.bytes.data(), sizeof(f));
  if (f.magic != kHandleMagic || f.pid <= 0 || f.fd < 0 || f.bytes == 0) {
    return absl::InvalidArgumentError("open: not a handle exported by a shm device");
  }
  // The exporter's memfd, reached through its /proc entry: a new open file of the same memory.
  const std::string path = absl::StrFormat("/proc/%d/fd/%d", f.pid, f.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "open: %s: %s (the exporting process ended, or freed the allocation?)", path, Errno()));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < f.bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrFormat("open: %s is not the %d-byte allocation the handle names", path, f.bytes));
  }
  absl::StatusOr<void*> p = MapShared(fd, f.bytes, "open");
  // The mapping keeps the memory; the file is no longer needed.
  ::close(fd);
  if (!p.ok()) return p.status();
  const uint64_t addr = reinterpret_cast<uint64_t>(*p);
  const uint64_t number = next_mapping_++;
  mappings_[addr] = Region{*p, f.bytes, -1, number};
  return MemRef{0, addr, f.bytes, 0, number};
}

absl::Status ShmIpcDevice::CloseMemory(const MemRef& mapping) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = mappings_.find(mapping.addr);
  if (mapping.rank != 0 || it == mappings_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("close: 0x%x on rank %d is not an open mapping of the shm device (closed "
                        "twice, or never opened?)",
                        mapping.addr, mapping.rank));
  }
  if (absl::Status s = Drain(lock, "close"); !s.ok()) return s;
  ::munmap(it->second.base, it->second.bytes);
  mappings_.erase(it);
  return absl::OkStatus();
}

int64_t ShmIpcDevice::LiveAllocations(int rank) const {
  std::unique_lock<std::mutex> lock(mu_);
  return rank == 0 ? static_cast<int64_t>(allocations_.size()) : -1;
}

}  // namespace dmalab
