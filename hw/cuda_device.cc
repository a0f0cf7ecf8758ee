#include "hw/cuda_device.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/core/reduce_host.h"
#include "common/core/status_macros.h"
#include "hw/cuda_status.h"
#include "hw/kernels.h"

namespace dmalab {
namespace {

// Reduce grid: enough blocks of 256 threads to keep every multiprocessor's memory pipe busy.
constexpr int kReduceBlocksPerSm = 8;

void* Ptr(const MemRef& m) { return reinterpret_cast<void*>(static_cast<uintptr_t>(m.addr)); }

kernels::ElementType ElementTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return kernels::ElementType::kBF16;
    case DType::kFP16:
      return kernels::ElementType::kFP16;
    case DType::kFP32:
      return kernels::ElementType::kFP32;
  }
  return kernels::ElementType::kFP32;
}

kernels::OperandCodec OperandCodecOf(Codec codec) {
  switch (codec) {
    case Codec::kPlain:
      return kernels::OperandCodec::kPlainBF16;
    case Codec::kInt8Block:
      return kernels::OperandCodec::kInt8Block;
    case Codec::kE4M3Block:
      return kernels::OperandCodec::kE4M3Block;
  }
  return kernels::OperandCodec::kPlainBF16;
}

// Streams beyond the GPU's hardware work queues share queues, and a spinning wait kernel then
// blocks whatever is queued behind it, possibly the very signal it waits for. Virtual ranks
// put many streams on one GPU, so ask for the most queues (32; the default is 8). Read when a
// CUDA context is created: effective only if no context exists yet in this process.
// Both take effect only before the process first initializes CUDA; PreloadKernels covers the
// module loading when they come too late.
void RequestMostHardwareQueues() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*replace=*/0);
  setenv("CUDA_MODULE_LOADING", "EAGER", /*replace=*/0);
}

}  // namespace

std::string CudaDevice::OperandName::ToString() const {
  std::string s(op);
  if (!label.empty()) s += absl::StrFormat(" '%s'", label);
  s += absl::StrFormat(" %s", role);
  if (index >= 0) s += absl::StrFormat("[%d]", index);
  return s;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int world, int gpus,
                                                               const CudaDeviceOptions& options) {
  if (world < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuda device: world is %d; must be >= 1", world));
  }
  if (options.first_gpu < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cuda device: first GPU is %d; must be >= 0", options.first_gpu));
  }
  if (gpus < 1 || gpus > world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cuda device: gpus is %d with world %d; must be in [1, world]", gpus, world));
  }
  RequestMostHardwareQueues();
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrFormat("no CUDA device: cudaGetDeviceCount: %s (%s)",
                                                  cudaGetErrorName(error),
                                                  cudaGetErrorString(error)));
  }
  DMALAB_CUDA_RETURN_IF_ERROR(error, "cuda device: count GPUs");
  if (count == 0) return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found 0");
  if (count < gpus) {
    return absl::UnavailableError(absl::StrFormat(
        "no CUDA device for every rank group: %d ranks on %d GPUs need %d GPUs, found %d", world,
        gpus, gpus, count));
  }
  std::unique_ptr<CudaDevice> device(new CudaDevice(options));
  DMALAB_RETURN_IF_ERROR(device->Init(world, gpus, count));
  return device;
}

absl::Status CudaDevice::Init(int world, int gpus, int visible) {
  std::vector<int> ordinals;
  for (int i = 0; i < gpus; ++i) {
    const int g = (options_.first_gpu + i) % visible;
    cudaDeviceProp prop;
    DMALAB_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, g), "cuda device: query GPU %d", g);
    if (prop.major < 9) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cuda device: GPU %d (%s) has compute capability %d.%d; dmalab_hw is built for sm_90 "
          "and newer",
          g, prop.name, prop.major, prop.minor));
    }
    if (!prop.unifiedAddressing) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cuda device: GPU %d (%s) lacks unified addressing", g, prop.name));
    }
    gpus_.push_back(Gpu{g, prop.multiProcessorCount * kReduceBlocksPerSm});
    ordinals.push_back(g);
  }
  DMALAB_RETURN_IF_ERROR(EnablePeerAccess());
  for (const int ordinal : ordinals) {
    DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "cuda device: GPU %d", ordinal);
    DMALAB_CUDA_RETURN_IF_ERROR(kernels::PreloadKernels(), "cuda device: load kernels on GPU %d",
                                ordinal);
  }
  DMALAB_ASSIGN_OR_RETURN(wait_log_, WaitFailureLog::Create(ordinals));

  ranks_.resize(world);
  for (int r = 0; r < world; ++r) {
    Rank& rank = ranks_[r];
    rank.gpu = static_cast<int>(static_cast<int64_t>(r) * gpus / world);
    const int ordinal = gpus_[rank.gpu].ordinal;
    rank.allocator = std::make_unique<CachingAllocator>(
        absl::StrFormat("rank %d (GPU %d)", r, ordinal),
        [ordinal](uint64_t bytes) -> absl::StatusOr<uint64_t> {
          void* p = nullptr;
          DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "GPU %d", ordinal);
          DMALAB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes), "segment of %d bytes on GPU %d", bytes,
                                      ordinal);
          return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
        },
        [ordinal](uint64_t addr) {
          cudaSetDevice(ordinal);
          cudaFree(reinterpret_cast<void*>(static_cast<uintptr_t>(addr)));
        });
    DMALAB_ASSIGN_OR_RETURN(rank.compute_stream, NewStream(r, StreamKind::kCompute, "compute"));
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(ranks_[0].gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming),
                              "cuda device: capture fork event");
  return absl::OkStatus();
}

absl::Status CudaDevice::EnablePeerAccess() {
  for (size_t a = 0; a < gpus_.size(); ++a) {
    for (size_t b = 0; b < gpus_.size(); ++b) {
      if (a == b) continue;
      const int from = gpus_[a].ordinal;
      const int to = gpus_[b].ordinal;
      int can = 0;
      DMALAB_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, from, to),
                                  "cuda device: can GPU %d access GPU %d", from, to);
      if (!can) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "cuda device: GPU %d cannot access GPU %d as a peer; ranks on several GPUs of one "
            "process need peer access between every pair",
            from, to));
      }
      DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(from), "cuda device: GPU %d", from);
      const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        continue;
      }
      DMALAB_CUDA_RETURN_IF_ERROR(e, "cuda device: enable peer access GPU %d -> GPU %d", from, to);
    }
  }
  return absl::OkStatus();
}

CudaDevice::~CudaDevice() {
  // Best effort: a spinning wait ends by its timeout at the latest.
  for (const Gpu& gpu : gpus_) {
    cudaSetDevice(gpu.ordinal);
    cudaDeviceSynchronize();
  }
  for (Event& e : events_) {
    cudaSetDevice(gpus_[e.gpu].ordinal);
    cudaEventDestroy(e.event);
  }
  for (Stream& s : streams_) {
    cudaSetDevice(gpus_[s.gpu].ordinal);
    cudaEventDestroy(s.join_event);
    if (s.owns_stream) cudaStreamDestroy(s.stream);
  }
  if (fork_event_ != nullptr) cudaEventDestroy(fork_event_);
  CloseAllMappings();
  for (Rank& r : ranks_) r.allocator.reset();
  wait_log_.reset();
  cudaGetLastError();
}

absl::Status CudaDevice::UseGpu(int gpu) {
  const int ordinal = gpus_[gpu].ordinal;
  int current = -1;
  DMALAB_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current), "cuda device: current GPU");
  if (current != ordinal) {
    DMALAB_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "cuda device: make GPU %d current",
                                ordinal);
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::CheckRank(int rank, std::string_view what) const {
  if (rank < 0 || rank >= world_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank %d is out of range [0, %d)", what, rank, world_size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const CudaDevice::Stream*> CudaDevice::GetStream(StreamId id,
                                                                std::string_view what) const {
  if (id.value() < 0 || id.value() >= static_cast<int32_t>(streams_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: stream %d does not exist", what, id));
  }
  return &streams_[id.value()];
}

absl::Status CudaDevice::CheckLive(const MemRef& mem, const OperandName& name) const {
  if (mem.rank < 0 || mem.rank >= world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: rank %d is out of range [0, %d)",
                                                      name.ToString(), mem.rank, world_size()));
  }
  if (mem.via_mapping != 0) return CheckMapping(mem, name);
  const std::map<uint64_t, LiveAllocation>& live = ranks_[mem.rank].live;
  auto it = live.upper_bound(mem.addr);
  if (it != live.begin()) {
    --it;
    const bool inside = mem.addr + mem.bytes <= it->first + it->second.bytes;
    const bool same = mem.alloc_id == 0 || mem.alloc_id == it->second.alloc_id;
    if (inside && same) return absl::OkStatus();
    // A view of freed memory is a use after free by whoever enqueues it (DataLoss): the replay
    // reports it as a finding against the collective, not as bad input.
    if (inside) {
      return absl::DataLossError(absl::StrFormat(
          "%s: [0x%x, +%d) on rank %d belongs to allocation %d, which was freed; the memory is "
          "now allocation %d (use after free)",
          name.ToString(), mem.addr, mem.bytes, mem.rank, mem.alloc_id, it->second.alloc_id));
    }
  }
  // Ids are handed out in order: an issued id that no live allocation of the rank holds was
  // freed (this is the error path only, so the scan costs nothing in a correct run).
  bool id_live = false;
  for (const auto& [addr, a] : live) id_live = id_live || a.alloc_id == mem.alloc_id;
  if (mem.alloc_id != 0 && mem.alloc_id < next_alloc_id_ && !id_live) {
    return absl::DataLossError(
        absl::StrFormat("%s: [0x%x, +%d) on rank %d belongs to allocation %d, which was freed (use "
                        "after free)",
                        name.ToString(), mem.addr, mem.bytes, mem.rank, mem.alloc_id));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: [0x%x, +%d) on rank %d (allocation %d) is not inside a live allocation",
                      name.ToString(), mem.addr, mem.bytes, mem.rank, mem.alloc_id));
}

absl::Status CudaDevice::CheckFlagWord(const MemRef& mem, const OperandName& name) const {
  if (mem.bytes != sizeof(uint64_t) || mem.addr % alignof(uint64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: flag word at 0x%x is %d bytes; must be one 8-byte-aligned uint64",
                        name.ToString(), mem.addr, mem.bytes));
  }
  return CheckLive(mem, name);
}

absl::Status CudaDevice::RefuseDuringCapture(std::string_view what) const {
  if (!capturing_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s during CUDA graph capture; do it before Capture (graphs use caller-owned memory "
      "allocated up front)",
      what));
}

absl::StatusOr<MemRef> CudaDevice::Allocate(int rank, uint64_t bytes, std::string_view tag) {
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "allocate"));
  DMALAB_RETURN_IF_ERROR(
      RefuseDuringCapture(absl::StrFormat("allocate: %d bytes '%s' on rank %d", bytes, tag, rank)));
  if (IsCapturing(ranks_[rank].compute_stream)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "allocate: %d bytes '%s' on rank %d while its compute stream is being captured", bytes, tag,
        rank));
  }
  absl::StatusOr<uint64_t> addr = ranks_[rank].allocator->Allocate(bytes);
  if (!addr.ok()) return Prefixed(absl::StrFormat("allocate '%s': ", tag), addr.status());
  const uint64_t id = next_alloc_id_++;
  ranks_[rank].live[*addr] = LiveAllocation{bytes, id};
  return MemRef{rank, *addr, bytes, id};
}

absl::Status CudaDevice::Free(const MemRef& allocation) {
  DMALAB_RETURN_IF_ERROR(CheckRank(allocation.rank, "free"));
  Rank& rank = ranks_[allocation.rank];
  auto it = rank.live.find(allocation.addr);
  if (it == rank.live.end() ||
      (allocation.alloc_id != 0 && allocation.alloc_id != it->second.alloc_id)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "free: address 0x%x on rank %d (allocation %d) is not a live allocation (double free, "
        "or a view instead of the allocation)",
        allocation.addr, allocation.rank, allocation.alloc_id));
  }
  rank.live.erase(it);
  return rank.allocator->Free(allocation.addr);
}

absl::Status CudaDevice::Copy(StreamId stream, const MemRef& dst, const MemRef& src,
                              std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "copy"));
  if (dst.bytes != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy '%s': dst is %d bytes, src is %d; must be equal", label, dst.bytes, src.bytes));
  }
  if (dst.rank != s->rank && src.rank != s->rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy '%s': on a stream of rank %d, but dst is on rank %d and src on rank %d; one must be "
        "on the stream's rank",
        label, s->rank, dst.rank, src.rank));
  }
  if (dst.Overlaps(src)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("copy '%s': dst and src overlap on rank %d", label, dst.rank));
  }
  DMALAB_RETURN_IF_ERROR(CheckLive(dst, {"copy", label, "dst"}));
  DMALAB_RETURN_IF_ERROR(CheckLive(src, {"copy", label, "src"}));
  if (dst.bytes == 0) return absl::OkStatus();
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(Ptr(dst), Ptr(src), dst.bytes, cudaMemcpyDefault, s->stream),
      "copy '%s' on rank %d stream '%s': %d bytes from rank %d to rank %d", label, s->rank, s->name,
      dst.bytes, src.rank, dst.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::Reduce(StreamId stream, DType dtype, const Operand& dst,
                                absl::Span<const Operand> terms, int64_t elems,
                                std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "reduce"));
  DMALAB_RETURN_IF_ERROR(ValidateReduce(dtype, dst, terms, elems));
  if (terms.size() > static_cast<size_t>(kernels::kMaxReduceTerms)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reduce '%s': %d terms; the CUDA kernel takes at most %d", label,
                        terms.size(), kernels::kMaxReduceTerms));
  }
  DMALAB_RETURN_IF_ERROR(CheckLive(dst.mem, {"reduce", label, "dst"}));
  for (size_t t = 0; t < terms.size(); ++t) {
    DMALAB_RETURN_IF_ERROR(
        CheckLive(terms[t].mem, {"reduce", label, "terms", static_cast<int>(t)}));
  }
  bool block_coded = dst.codec != Codec::kPlain;
  for (const Operand& t : terms) block_coded = block_coded || t.codec != Codec::kPlain;
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  if (block_coded) return ReduceBlockCoded(*s, dst, terms, elems, label);
  kernels::ReduceArgs args;
  args.dst = Ptr(dst.mem);
  for (size_t t = 0; t < terms.size(); ++t) args.terms[t] = Ptr(terms[t].mem);
  args.num_terms = static_cast<int32_t>(terms.size());
  args.elems = elems;
  DMALAB_CUDA_RETURN_IF_ERROR(
      kernels::LaunchReduce(s->stream, ElementTypeOf(dtype), args, gpus_[s->gpu].max_reduce_blocks),
      "reduce '%s' on rank %d stream '%s': %d terms of %d %s", label, s->rank, s->name,
      terms.size(), elems, DTypeName(dtype));
  return absl::OkStatus();
}

absl::Status CudaDevice::ReduceBlockCoded(const Stream& stream, const Operand& dst,
                                          absl::Span<const Operand> terms, int64_t elems,
                                          std::string_view label) {
  // The kernel reads a whole block of every term before it writes dst's block: exact aliases of
  // one codec are in place; anything else that overlaps dst would read half-written blocks.
  for (size_t t = 0; t < terms.size(); ++t) {
    const MemRef& m = terms[t].mem;
    if (!m.Overlaps(dst.mem)) continue;
    if (m.addr == dst.mem.addr && m.bytes == dst.mem.bytes && terms[t].codec == dst.codec) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "reduce '%s': terms[%d] ([0x%x, +%d), codec %s) overlaps dst ([0x%x, +%d), codec %s); a "
        "term that overlaps dst must be dst itself, with dst's codec",
        label, t, m.addr, m.bytes, CodecName(terms[t].codec), dst.mem.addr, dst.mem.bytes,
        CodecName(dst.codec)));
  }
  kernels::BlockReduceArgs args;
  args.dst = Ptr(dst.mem);
  args.dst_codec = OperandCodecOf(dst.codec);
  for (size_t t = 0; t < terms.size(); ++t) {
    args.terms[t] = Ptr(terms[t].mem);
    args.term_codecs[t] = OperandCodecOf(terms[t].codec);
  }
  args.num_terms = static_cast<int32_t>(terms.size());
  args.elems = elems;
  DMALAB_CUDA_RETURN_IF_ERROR(
      kernels::LaunchBlockReduce(stream.stream, args, gpus_[stream.gpu].max_reduce_blocks),
      "reduce '%s' on rank %d stream '%s': %d terms of %d bf16 into %s", label, stream.rank,
      stream.name, terms.size(), elems, CodecName(dst.codec));
  return absl::OkStatus();
}

absl::Status CudaDevice::SignalFlag(StreamId stream, const MemRef& counter, const MemRef& peer_flag,
                                    std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "signal flag"));
  if (counter.rank != s->rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "signal '%s': counter is on rank %d, the stream on rank %d; must be the stream's rank",
        label, counter.rank, s->rank));
  }
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(counter, {"signal", label, "counter"}));
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(peer_flag, {"signal", label, "flag"}));
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(
      kernels::LaunchSignalFlag(s->stream, static_cast<uint64_t*>(Ptr(counter)),
                                static_cast<uint64_t*>(Ptr(peer_flag))),
      "signal '%s' on rank %d stream '%s' to rank %d", label, s->rank, s->name, peer_flag.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::WaitFlag(StreamId stream, const MemRef& expected, const MemRef& flag,
                                  std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "wait flag"));
  if (expected.rank != s->rank || flag.rank != s->rank) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "wait '%s': expected is on rank %d and flag on rank %d; both must be on the stream's "
        "rank %d",
        label, expected.rank, flag.rank, s->rank));
  }
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(expected, {"wait", label, "expected"}));
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(flag, {"wait", label, "flag"}));
  kernels::WaitFlagArgs args;
  args.expected = static_cast<uint64_t*>(Ptr(expected));
  args.flag = static_cast<const uint64_t*>(Ptr(flag));
  return LaunchWait(*s, stream, args, "wait", label);
}

absl::Status CudaDevice::WriteValue(StreamId stream, const MemRef& dst, uint64_t value,
                                    std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "write value"));
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(dst, {"write value", label, "flag"}));
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(
      kernels::LaunchWriteValue(s->stream, static_cast<uint64_t*>(Ptr(dst)), value),
      "write value '%s' on rank %d stream '%s' to rank %d", label, s->rank, s->name, dst.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::Spin(StreamId stream, uint64_t ns) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "spin"));
  DMALAB_RETURN_IF_ERROR(UseGpu(s->gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(kernels::LaunchSpin(s->stream, ns),
                              "spin of %d ns on rank %d stream '%s'", ns, s->rank, s->name);
  return absl::OkStatus();
}

absl::Status CudaDevice::WaitValue(StreamId stream, const MemRef& flag, uint64_t value,
                                   std::string_view label) {
  DMALAB_ASSIGN_OR_RETURN(const Stream* s, GetStream(stream, "wait value"));
  if (flag.rank != s->rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("wait value '%s': the flag is on rank %d, the stream on rank %d; a wait "
                        "reads its own rank's memory",
                        label, flag.rank, s->rank));
  }
  DMALAB_RETURN_IF_ERROR(CheckFlagWord(flag, {"wait value", label, "flag"}));
  kernels::WaitFlagArgs args;
  args.immediate = value;
  args.flag = static_cast<const uint64_t*>(Ptr(flag));
  return LaunchWait(*s, stream, args, "wait value", label);
}

absl::Status CudaDevice::LaunchWait(const Stream& s, StreamId stream, kernels::WaitFlagArgs args,
                                    std::string_view what, std::string_view label) {
  args.timeout_ns = options_.flag_wait_timeout_ns;
  args.rank = s.rank;
  args.stream = stream.value();
  args.label = wait_log_->InternLabel(label);
  wait_log_->FillWaitArgs(s.gpu, args);
  DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(kernels::LaunchWaitFlag(s.stream, args),
                              "%s '%s' on rank %d stream '%s'", what, label, s.rank, s.name);
  return absl::OkStatus();
}

void* CudaDevice::NativeStream(StreamId stream) {
  if (stream.value() < 0 || stream.value() >= static_cast<int32_t>(streams_.size())) return nullptr;
  return streams_[stream.value()].stream;
}

void* CudaDevice::NativePointer(const MemRef& mem) {
  if (mem.rank < 0 || mem.rank >= world_size()) return nullptr;
  return Ptr(mem);
}

int CudaDevice::NativeDeviceOrdinal(int rank) {
  if (rank < 0 || rank >= world_size()) return -1;
  return gpu_of_rank(rank);
}

absl::Status CudaDevice::Synchronize() {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("synchronize"));
  for (const Stream& s : streams_) {
    DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
    DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.stream), "synchronize rank %d stream '%s'",
                                s.rank, s.name);
  }
  return TakeWaitFailures();
}

absl::Status CudaDevice::Write(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("write"));
  if (bytes.size() != dst.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "write: dst is %d bytes, the host buffer %d; must be equal", dst.bytes, bytes.size()));
  }
  DMALAB_RETURN_IF_ERROR(CheckLive(dst, {"write", "", "dst"}));
  DMALAB_RETURN_IF_ERROR(Synchronize());
  if (bytes.empty()) return absl::OkStatus();
  DMALAB_RETURN_IF_ERROR(UseGpu(ranks_[dst.rank].gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaMemcpy(Ptr(dst), bytes.data(), bytes.size(), cudaMemcpyDefault),
                              "write %d bytes to rank %d", bytes.size(), dst.rank);
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the DMA into
  // device memory lands, and on the legacy stream, which our non-blocking streams do not wait
  // for: without this, work enqueued next can read the old contents (seen on an H200).
  DMALAB_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "write %d bytes to rank %d: complete",
                              bytes.size(), dst.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::Read(const MemRef& src, absl::Span<uint8_t> bytes) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("read"));
  if (bytes.size() != src.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "read: src is %d bytes, the host buffer %d; must be equal", src.bytes, bytes.size()));
  }
  DMALAB_RETURN_IF_ERROR(CheckLive(src, {"read", "", "src"}));
  DMALAB_RETURN_IF_ERROR(Synchronize());
  if (bytes.empty()) return absl::OkStatus();
  DMALAB_RETURN_IF_ERROR(UseGpu(ranks_[src.rank].gpu));
  DMALAB_CUDA_RETURN_IF_ERROR(cudaMemcpy(bytes.data(), Ptr(src), bytes.size(), cudaMemcpyDefault),
                              "read %d bytes from rank %d", bytes.size(), src.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::TakeWaitFailures() {
  return wait_log_->TakeFailures(
      [this](int32_t id) {
        return id >= 0 && id < static_cast<int32_t>(streams_.size()) ? streams_[id].name
                                                                     : std::string("?");
      },
      options_.flag_wait_timeout_ns);
}

absl::StatusOr<bool> CudaDevice::RankIdle(int rank) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture("synchronize"));
  DMALAB_RETURN_IF_ERROR(CheckRank(rank, "rank idle"));
  for (const Stream& s : streams_) {
    if (s.rank != rank || s.stream == nullptr) continue;
    DMALAB_RETURN_IF_ERROR(UseGpu(s.gpu));
    const cudaError_t e = cudaStreamQuery(s.stream);
    if (e == cudaErrorNotReady) return false;
    DMALAB_CUDA_RETURN_IF_ERROR(e, "query rank %d stream '%s'", s.rank, s.name);
  }
  DMALAB_RETURN_IF_ERROR(TakeWaitFailures());
  return true;
}

absl::Status CudaDevice::CopyRank(const MemRef& mem, void* host, size_t n, bool to_device,
                                  std::string_view what) {
  DMALAB_RETURN_IF_ERROR(RefuseDuringCapture(what));
  if (n != mem.bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the range is %d bytes, the host buffer %d; must be equal", what, mem.bytes, n));
  }
  DMALAB_RETURN_IF_ERROR(CheckLive(mem, {what, "", to_device ? "dst" : "src"}));
  if (n == 0) return absl::OkStatus();
  // On one of the rank's own (non-blocking) streams, waited for alone: a device-wide
  // synchronization would wait for the other ranks' flag waits too.
  const Stream* own = nullptr;
  for (const Stream& s : streams_) {
    if (s.rank == mem.rank && s.stream != nullptr) {
      own = &s;
      break;
    }
  }
  if (own == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: rank %d has no stream to copy on", what, mem.rank));
  }
  DMALAB_RETURN_IF_ERROR(UseGpu(own->gpu));
  void* dst = to_device ? Ptr(mem) : host;
  const void* src = to_device ? static_cast<const void*>(host) : Ptr(mem);
  DMALAB_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, own->stream),
                              "%s %d bytes of rank %d", what, n, mem.rank);
  DMALAB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(own->stream),
                              "%s %d bytes of rank %d: complete", what, n, mem.rank);
  return absl::OkStatus();
}

absl::Status CudaDevice::WriteRank(const MemRef& dst, absl::Span<const uint8_t> bytes) {
  return CopyRank(dst, const_cast<uint8_t*>(bytes.data()), bytes.size(), /*to_device=*/true,
                  "write");
}

absl::Status CudaDevice::ReadRank(const MemRef& src, absl::Span<uint8_t> bytes) {
  return CopyRank(src, bytes.data(), bytes.size(), /*to_device=*/false, "read");
}

}  // namespace dmalab
