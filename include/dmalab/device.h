// The Device interface: everything the algorithm core needs from a machine of W ranks.
//
// Two implementations exist: SimDevice (sim/), a CPU model with checkers, and CudaDevice (hw/),
// real GPUs. The core never asks which one it runs on. Work is enqueued on streams and runs
// asynchronously; the host-side calls (Read, Write, Synchronize) first complete all queued work.
#ifndef DMALAB_DEVICE_H_
#define DMALAB_DEVICE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "dmalab/dtype.h"
#include "dmalab/ids.h"
#include "dmalab/provenance.h"
#include "dmalab/tensor.h"

namespace dmalab {

// What a stream is for. On hardware, copy streams drive the DMA engines and use no SMs.
enum class StreamKind { kCompute, kCopy, kFlag };

std::string_view StreamKindName(StreamKind kind);

// How the elements of an operand are stored.
enum class Codec {
  kPlain,      // elements of the operation's dtype
  kInt8Block,  // 128-value blocks: int8 values, one fp32 scale per block (common/core/codec.h)
  kE4M3Block,  // 128-value blocks: E4M3 values, one fp32 scale per block
};

std::string_view CodecName(Codec codec);

// Bytes that `elems` elements of `dtype` occupy when stored with `codec`.
uint64_t EncodedBytes(Codec codec, DType dtype, int64_t elems);

// An operand of Device::Reduce: memory and how it is encoded.
struct Operand {
  MemRef mem;
  Codec codec = Codec::kPlain;
};

// An inter-process handle (memory or event), as CUDA's cudaIpcMemHandle_t: opaque bytes that one
// rank exports and passes to its peers through any channel. 128 of them: a CUDA handle (64) and
// where the allocation lies in the memory the CUDA handle exports (an allocator's segment).
inline constexpr size_t kIpcHandleBytes = 128;
struct IpcHandle {
  std::array<uint8_t, kIpcHandleBytes> bytes{};
  bool operator==(const IpcHandle&) const = default;
};

// Content that a device may produce when it is read rather than when it is written
// (Device::WriteGenerated): a deterministic function of the byte offset, as a seeded fill is.
class GeneratedContent {
 public:
  virtual ~GeneratedContent() = default;
  // The content's bytes come in units of this many (its element size, at most 64).
  virtual uint64_t grain() const = 0;
  // Writes bytes [offset, offset + out.size()) of the content; offset and out.size() are
  // multiples of grain().
  virtual void Generate(uint64_t offset, absl::Span<uint8_t> out) const = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  // Number of ranks; ranks are 0..world_size()-1.
  virtual int world_size() const = 0;
  // "sim" or "cuda", for reports.
  virtual std::string name() const = 0;
  // The seed of a deterministic device (the simulator's scheduling seed): host-side choices that
  // must be reproducible (the interleaving of SPMD ranks' host threads) derive from it. 0 for
  // other devices.
  virtual uint64_t seed() const { return 0; }

  // Allocates `bytes` on `rank` through the device's caching allocator (freed blocks are
  // reused). `tag` names the allocation in reports.
  virtual absl::StatusOr<MemRef> Allocate(int rank, uint64_t bytes, std::string_view tag) = 0;
  // Returns an allocation (as returned by Allocate) to the allocator.
  virtual absl::Status Free(const MemRef& allocation) = 0;

  // The rank's compute stream: the stream the caller's own work runs on.
  virtual StreamId ComputeStream(int rank) = 0;
  virtual absl::StatusOr<StreamId> CreateStream(int rank, StreamKind kind,
                                                std::string_view name) = 0;
  virtual absl::StatusOr<EventId> CreateEvent(int rank) = 0;
  // Marks the point in `stream` that later waits on `event` refer to.
  virtual absl::Status RecordEvent(EventId event, StreamId stream) = 0;
  // Work enqueued on `stream` after this call starts after the event's last recorded point.
  virtual absl::Status WaitEvent(StreamId stream, EventId event) = 0;

  // DMA copy of src.bytes bytes from src to dst (same size); one of them is on the stream's
  // rank, the other may be on any rank.
  virtual absl::Status Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                            std::string_view label) = 0;

  // Kernel: for each element, decodes every term to fp32, sums them in order (fp32, left to
  // right), and encodes the sum into dst. One plain term is a conversion, two are an add.
  // Plain operands hold `dtype`; block-coded ones require dtype bf16.
  virtual absl::Status Reduce(StreamId stream, DType dtype, const Operand& dst,
                              absl::Span<const Operand> terms, int64_t elems,
                              std::string_view label) = 0;

  // Flag kernel: increments the uint64 `counter` (on the stream's rank) and stores the new
  // value to `peer_flag` (any rank) with system-scope release semantics.
  virtual absl::Status SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                  std::string_view label) = 0;
  // Flag kernel: increments the uint64 `expected` (on the stream's rank) and spins with acquire
  // loads until the uint64 `flag` (on the stream's rank) is at least the new value.
  virtual absl::Status WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                std::string_view label) = 0;
  // Immediate-value flags (cuStreamWriteValue64 / cuStreamWaitValue64): WriteValue stores
  // `value` to the uint64 `dst` (any rank) with release semantics; WaitValue spins with acquire
  // loads until the uint64 `flag` (on the stream's rank) is at least `value`. The value is fixed
  // at the call: a graph that captured it replays it unchanged. The ring uses the counter forms
  // above; plugins (include/dmalab/plugin.h) may use either.
  virtual absl::Status WriteValue(StreamId /*stream*/, const MemRef& /*dst*/, uint64_t /*value*/,
                                  std::string_view /*label*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' has no immediate-value flag writes", name()));
  }
  virtual absl::Status WaitValue(StreamId /*stream*/, const MemRef& /*flag*/, uint64_t /*value*/,
                                 std::string_view /*label*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' has no immediate-value flag waits", name()));
  }

  // Completes all enqueued work. Fails (naming ranks, streams, flag values) when work can
  // never complete, instead of hanging.
  virtual absl::Status Synchronize() = 0;
  // Host access; both complete all enqueued work first.
  virtual absl::Status Write(const MemRef& dst, absl::Span<const uint8_t> bytes) = 0;
  virtual absl::Status Read(const MemRef& src, absl::Span<uint8_t> bytes) = 0;
  // As Write of dst.bytes bytes of `content` (a multiple of its grain): every later read sees
  // exactly those bytes. A device may produce them only when something reads them, and never
  // hold what nothing reads (the simulator does); by default it generates them and writes.
  virtual absl::Status WriteGenerated(const MemRef& dst,
                                      std::shared_ptr<const GeneratedContent> content) {
    std::vector<uint8_t> bytes(dst.bytes);
    content->Generate(0, absl::MakeSpan(bytes));
    return Write(dst, bytes);
  }

  // Host reads of several ranges of one size a piece at a time, for a caller that checks bytes
  // without holding whole ranges: as Read of each src in turn (the same waits, checks, findings
  // and errors), but the bytes go to `consume` once per piece of at most `piece_bytes` bytes in
  // offset order, with every src's bytes of that piece (`pieces[i]` src i's, valid during the
  // call). When src i fails as its Read would, srcs 0..i-1 are still consumed whole (`pieces`
  // holds theirs), then that error is returned; an error of `consume` stops the reads and is
  // returned. Srcs of different sizes or a piece size of 0 are an InvalidArgument error.
  using PieceConsumer = absl::FunctionRef<absl::Status(
      uint64_t offset, absl::Span<const absl::Span<const uint8_t>> pieces)>;
  absl::Status ReadPieces(absl::Span<const MemRef> srcs, uint64_t piece_bytes,
                          PieceConsumer consume);

  // Fidelity. A device holds values unless it says otherwise. A shadow device (the simulator's
  // shadow fidelity) keeps no payload, only where each byte came from
  // (include/dmalab/provenance.h): Read fails, Write records the bytes' contents (keeping only
  // small writes' values, for flag words), and large host data is written with WriteShadow.
  virtual bool HoldsValues() const { return true; }
  // Shadow devices: dst now holds host data identified by `content`: equal contents for equal
  // tokens, as a fill from the same parameters.
  virtual absl::Status WriteShadow(const MemRef& /*dst*/, uint64_t /*content*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' holds values: it has no shadow writes", name()));
  }
  // Shadow devices: the provenance of src's bytes.
  virtual absl::StatusOr<Provenance> ReadProvenance(const MemRef& /*src*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' holds values: it keeps no provenance", name()));
  }

  // Names the work enqueued from now on in reports (e.g. "all_reduce#3"); informational.
  virtual void SetContext(std::string_view /*context*/) {}

  // True while `stream` is being captured into a graph (hardware only); fresh allocations
  // are then not allowed.
  virtual bool IsCapturing(StreamId /*stream*/) const { return false; }

  // Graphs (optional; SupportsGraphs() says whether this device has them). CaptureGraph runs
  // `body` and records the work it enqueues on every rank's streams into a graph instead of
  // running it; LaunchGraph enqueues one replay of it, after the work already enqueued on every
  // rank's compute stream and before the work enqueued on them later.
  virtual bool SupportsGraphs() const { return false; }
  virtual absl::StatusOr<GraphId> CaptureGraph(const std::function<absl::Status()>& /*body*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no graphs", name()));
  }
  virtual absl::Status LaunchGraph(GraphId /*graph*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no graphs", name()));
  }

  // IPC, as CUDA's (optional; SupportsIpc() says whether this device has it). A rank reaches a
  // peer's memory only through a mapping it opened: ExportMemory gives the handle of an
  // allocation (as Allocate returned it); OpenMemory maps a peer's handle into `rank`'s address
  // space and returns the mapping, a range on `rank` (at another address than the owner's) whose
  // bytes are the owner's; CloseMemory ends a mapping. The owner's Free does not wait for its
  // peers' mappings. ExportEvent and OpenEvent give `rank` a handle to a peer's event.
  virtual bool SupportsIpc() const { return false; }
  virtual absl::StatusOr<IpcHandle> ExportMemory(const MemRef& /*allocation*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no IPC", name()));
  }
  virtual absl::StatusOr<MemRef> OpenMemory(int /*rank*/, const IpcHandle& /*handle*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no IPC", name()));
  }
  virtual absl::Status CloseMemory(const MemRef& /*mapping*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no IPC", name()));
  }
  virtual absl::StatusOr<IpcHandle> ExportEvent(EventId /*event*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no IPC", name()));
  }
  virtual absl::StatusOr<EventId> OpenEvent(int /*rank*/, const IpcHandle& /*handle*/) {
    return absl::UnimplementedError(absl::StrFormat("device '%s' has no IPC", name()));
  }

  // Deferred mappings, as CUDA's virtual memory API (optional; Unimplemented where absent).
  // ReserveAddress reserves `bytes` of `rank`'s address space with nothing behind it;
  // OpenMemoryAt maps a peer's handle at the start of `reserved` (a reserved range, large enough,
  // holding no mapping) and returns the mapping, which CloseMemory ends (the range is unmapped
  // again); ReleaseAddress ends a reservation (closing its mapping). Work reaching a reserved
  // range where nothing is mapped when it runs fails; captured work resolves the range at every
  // launch, so a graph may be captured before its peers' memory is mapped.
  virtual absl::StatusOr<MemRef> ReserveAddress(int /*rank*/, uint64_t /*bytes*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' has no address reservations", name()));
  }
  virtual absl::StatusOr<MemRef> OpenMemoryAt(int /*rank*/, const IpcHandle& /*handle*/,
                                              const MemRef& /*reserved*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' has no address reservations", name()));
  }
  virtual absl::Status ReleaseAddress(const MemRef& /*reserved*/) {
    return absl::UnimplementedError(
        absl::StrFormat("device '%s' has no address reservations", name()));
  }

  // Allocations live on `rank` (handed out, not freed), or -1 where the device does not count
  // them; the replay reads collectives' resource growth from it.
  virtual int64_t LiveAllocations(int /*rank*/) const { return -1; }

  // Runs what can run without more host calls; true when all work enqueued on `rank`'s streams
  // has completed. A rank's own host thread polls this where Synchronize would wait, when other
  // ranks' threads may still have to enqueue what its work waits for (SPMD collectives).
  virtual absl::StatusOr<bool> RankIdle(int /*rank*/) {
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    return true;
  }

  // Host access for one rank's host thread of an SPMD collective, after RankIdle(rank) returned
  // true: like Write and Read, but without waiting for other ranks' work (their host threads may
  // still have to enqueue what it waits for).
  virtual absl::Status WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) {
    return Write(dst, bytes);
  }
  virtual absl::Status ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) {
    return Read(src, bytes);
  }

  // Native handles for collectives that launch their own work (hardware only; the simulator
  // has none): the backend's stream object (cudaStream_t), the pointer behind a range (a device
  // pointer), the backend's device ordinal of a rank.
  virtual void* NativeStream(StreamId /*stream*/) { return nullptr; }
  virtual void* NativePointer(const MemRef& /*mem*/) { return nullptr; }
  virtual int NativeDeviceOrdinal(int /*rank*/) { return -1; }

 protected:
  // ReadPieces once its arguments passed (srcs not empty, all of `bytes` bytes; piece_bytes at
  // most bytes). This default reads each src whole with Read, then hands the pieces over: host
  // memory of every range at once. A device that can copy a piece at a time overrides it.
  virtual absl::Status ReadPiecesChecked(absl::Span<const MemRef> srcs, uint64_t bytes,
                                         uint64_t piece_bytes, PieceConsumer consume);
  // Hands pieces of `count` srcs of `bytes` bytes to `consume`, in offset order; piece(i, offset,
  // n) gives src i's bytes [offset, offset + n), valid until the next call.
  static absl::Status HandOverPieces(size_t count, uint64_t bytes, uint64_t piece_bytes,
                                     absl::FunctionRef<absl::StatusOr<absl::Span<const uint8_t>>(
                                         size_t i, uint64_t offset, uint64_t n)>
                                         piece,
                                     PieceConsumer consume);
};

}  // namespace dmalab

#endif  // DMALAB_DEVICE_H_
