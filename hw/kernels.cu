// The kernels of CudaDevice. Built with -fmad=false and without fast math: every fp32 operation
// is an explicit round-to-nearest intrinsic anyway (hw/element_math.h), so that the output is
// the host reference's bit for bit.
#include <algorithm>

#include "hw/element_math.h"
#include "hw/kernels.h"

namespace dmalab::kernels {
namespace {

namespace em = ::dmalab::element_math;

constexpr int kReduceThreads = 256;
// How often a waiting kernel looks at the host-mapped abort word (a PCIe read).
constexpr uint64_t kAbortPollNs = 100'000;

// Word k (0..3, a compile-time constant after unrolling) of a 16-byte vector.
__device__ __forceinline__ uint32_t Word(const uint4& w, int k) {
  return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}

__device__ __forceinline__ void SetWord(uint4& w, int k, uint32_t v) {
  if (k == 0) w.x = v;
  if (k == 1) w.y = v;
  if (k == 2) w.z = v;
  if (k == 3) w.w = v;
}

// Element codecs: a storage word per element, 16-byte vectors of kPerVector elements.
struct BF16Elements {
  static constexpr int kPerVector = 8;
  __device__ static float Load(const void* p, int64_t i) {
    return em::DecodeBF16(static_cast<const uint16_t*>(p)[i]);
  }
  __device__ static void Store(void* p, int64_t i, float v) {
    static_cast<uint16_t*>(p)[i] = em::EncodeBF16(v);
  }
  __device__ static float Lane(const uint4& w, int j) {
    const uint32_t word = Word(w, j / 2);
    return em::DecodeBF16(static_cast<uint16_t>(j % 2 == 0 ? word : word >> 16));
  }
  __device__ static void SetLanePair(uint4& w, int j, float lo, float hi) {
    SetWord(w, j / 2,
            static_cast<uint32_t>(em::EncodeBF16(lo)) |
                (static_cast<uint32_t>(em::EncodeBF16(hi)) << 16));
  }
};

struct FP16Elements {
  static constexpr int kPerVector = 8;
  __device__ static float Load(const void* p, int64_t i) {
    return em::DecodeFP16(static_cast<const uint16_t*>(p)[i]);
  }
  __device__ static void Store(void* p, int64_t i, float v) {
    static_cast<uint16_t*>(p)[i] = em::EncodeFP16(v);
  }
  __device__ static float Lane(const uint4& w, int j) {
    const uint32_t word = Word(w, j / 2);
    return em::DecodeFP16(static_cast<uint16_t>(j % 2 == 0 ? word : word >> 16));
  }
  __device__ static void SetLanePair(uint4& w, int j, float lo, float hi) {
    SetWord(w, j / 2,
            static_cast<uint32_t>(em::EncodeFP16(lo)) |
                (static_cast<uint32_t>(em::EncodeFP16(hi)) << 16));
  }
};

struct FP32Elements {
  static constexpr int kPerVector = 4;
  __device__ static float Load(const void* p, int64_t i) {
    return em::FromBits(static_cast<const uint32_t*>(p)[i]);
  }
  __device__ static void Store(void* p, int64_t i, float v) {
    static_cast<uint32_t*>(p)[i] = em::Bits(v);
  }
  __device__ static float Lane(const uint4& w, int j) { return em::FromBits(Word(w, j)); }
  __device__ static void SetLanePair(uint4& w, int j, float lo, float hi) {
    SetWord(w, j, em::Bits(lo));
    SetWord(w, j + 1, em::Bits(hi));
  }
};

// No restrict and no read-only (nc) loads: dst may alias a term. Each thread reads all terms of
// its elements before it writes them, so an exact alias is element-wise in place.
template <typename E>
__global__ void __launch_bounds__(kReduceThreads) ReduceKernel(ReduceArgs a, int64_t vectors) {
  constexpr int kLanes = E::kPerVector;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = first; v < vectors; v += stride) {
    float acc[kLanes];
    const uint4 w0 = static_cast<const uint4*>(a.terms[0])[v];
#pragma unroll
    for (int j = 0; j < kLanes; ++j) acc[j] = E::Lane(w0, j);
#pragma unroll
    for (int t = 1; t < kMaxReduceTerms; ++t) {
      if (t < a.num_terms) {
        const uint4 w = static_cast<const uint4*>(a.terms[t])[v];
#pragma unroll
        for (int j = 0; j < kLanes; ++j) acc[j] = em::HostOrderAdd(acc[j], E::Lane(w, j));
      }
    }
    uint4 out = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kLanes; j += 2) E::SetLanePair(out, j, acc[j], acc[j + 1]);
    static_cast<uint4*>(a.dst)[v] = out;
  }
  for (int64_t i = vectors * kLanes + first; i < a.elems; i += stride) {
    float acc = E::Load(a.terms[0], i);
#pragma unroll
    for (int t = 1; t < kMaxReduceTerms; ++t) {
      if (t < a.num_terms) acc = em::HostOrderAdd(acc, E::Load(a.terms[t], i));
    }
    E::Store(a.dst, i, acc);
  }
}

template <typename E>
cudaError_t Launch(cudaStream_t stream, const ReduceArgs& args, int max_blocks) {
  bool aligned = reinterpret_cast<uintptr_t>(args.dst) % 16 == 0;
  for (int t = 0; t < args.num_terms; ++t) {
    aligned = aligned && reinterpret_cast<uintptr_t>(args.terms[t]) % 16 == 0;
  }
  const int64_t vectors = aligned ? args.elems / E::kPerVector : 0;
  const int64_t scalars = args.elems - vectors * E::kPerVector;
  const int64_t items = std::max<int64_t>(vectors, scalars);
  const int64_t blocks = std::clamp<int64_t>((items + kReduceThreads - 1) / kReduceThreads, 1,
                                             std::max(max_blocks, 1));
  ReduceKernel<E><<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(args, vectors);
  return cudaGetLastError();
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t LoadAcquireSys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreReleaseSys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint32_t LoadRelaxedSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreRelaxedSys(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

// The counter is local and touched only by flag kernels of one stream, which run one after
// the other: a plain read-modify-write suffices. The release store orders every earlier write
// of this thread; the payload copies it announces were ordered before this kernel by the
// stream (the caller makes the flag stream wait on the copy's event), and a kernel starts
// only after the work it depends on has completed and its writes are visible.
__global__ void SignalFlagKernel(uint64_t* counter, uint64_t* peer_flag) {
  const uint64_t c = *counter + 1;
  *counter = c;
  StoreReleaseSys(peer_flag, c);
}

__global__ void WriteValueKernel(uint64_t* flag, uint64_t value) { StoreReleaseSys(flag, value); }

// Holds its stream for `ns` nanoseconds of %globaltimer: a schedule perturbation
// (measure/perturbing_device.h) that delays whatever the stream runs next. One thread: it keeps
// no multiprocessor from other work.
__global__ void SpinKernel(uint64_t ns) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

__global__ void WaitFlagKernel(WaitFlagArgs a) {
  const uint64_t expected = a.expected != nullptr ? *a.expected + 1 : a.immediate;
  if (a.expected != nullptr) *a.expected = expected;
  uint64_t seen = LoadAcquireSys(a.flag);
  if (seen >= expected) return;
  const uint64_t start = GlobalTimerNs();
  uint64_t next_abort_poll = start + kAbortPollNs;
  WaitFailure failure = WaitFailure::kNone;
  uint64_t now = start;
  while (true) {
    seen = LoadAcquireSys(a.flag);
    if (seen >= expected) return;
    now = GlobalTimerNs();
    if (now - start >= a.timeout_ns) {
      failure = WaitFailure::kTimedOut;
      break;
    }
    if (now >= next_abort_poll) {
      if (LoadRelaxedSys(a.abort) != 0) {
        failure = WaitFailure::kAbandoned;
        break;
      }
      next_abort_poll = now + kAbortPollNs;
    }
  }
  if (failure == WaitFailure::kTimedOut) StoreRelaxedSys(a.abort, 1);
  const uint32_t slot = atomicAdd(a.record_count, 1u);
  if (slot >= a.max_records) return;
  volatile WaitFailureRecord* r = a.records + slot;
  r->failure = static_cast<uint32_t>(failure);
  r->rank = a.rank;
  r->stream = a.stream;
  r->label = a.label;
  r->flag_seen = seen;
  r->expected = expected;
  r->waited_ns = now - start;
  __threadfence_system();
  r->valid = 1;
  __threadfence_system();
}

}  // namespace

cudaError_t LaunchReduce(cudaStream_t stream, ElementType type, const ReduceArgs& args,
                         int max_blocks) {
  if (args.num_terms < 1 || args.num_terms > kMaxReduceTerms || args.elems <= 0) {
    return cudaErrorInvalidValue;
  }
  switch (type) {
    case ElementType::kBF16:
      return Launch<BF16Elements>(stream, args, max_blocks);
    case ElementType::kFP16:
      return Launch<FP16Elements>(stream, args, max_blocks);
    case ElementType::kFP32:
      return Launch<FP32Elements>(stream, args, max_blocks);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchSignalFlag(cudaStream_t stream, uint64_t* counter, uint64_t* peer_flag) {
  SignalFlagKernel<<<1, 1, 0, stream>>>(counter, peer_flag);
  return cudaGetLastError();
}

cudaError_t LaunchWriteValue(cudaStream_t stream, uint64_t* flag, uint64_t value) {
  WriteValueKernel<<<1, 1, 0, stream>>>(flag, value);
  return cudaGetLastError();
}

cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns) {
  SpinKernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t LaunchWaitFlag(cudaStream_t stream, const WaitFlagArgs& args) {
  WaitFlagKernel<<<1, 1, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t PreloadKernels() {
  // With lazy module loading (the default since CUDA 12), the first launch of a kernel loads
  // it, which can wait for the device to go idle: behind a spinning flag wait that never
  // happens, and the signal that would end the wait never launches. Load every kernel up front.
  cudaFuncAttributes attr;
  const void* kernels[] = {
      reinterpret_cast<const void*>(&ReduceKernel<BF16Elements>),
      reinterpret_cast<const void*>(&ReduceKernel<FP16Elements>),
      reinterpret_cast<const void*>(&ReduceKernel<FP32Elements>),
      reinterpret_cast<const void*>(&SignalFlagKernel),
      reinterpret_cast<const void*>(&WaitFlagKernel),
      reinterpret_cast<const void*>(&WriteValueKernel),
      reinterpret_cast<const void*>(&SpinKernel),
  };
  for (const void* k : kernels) {
    if (cudaError_t e = cudaFuncGetAttributes(&attr, k); e != cudaSuccess) return e;
  }
  return PreloadBlockReduceKernels();
}

}  // namespace dmalab::kernels
