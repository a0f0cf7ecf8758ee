// The block-codec Reduce kernel of CudaDevice: one warp per 128-value block, the per-lane steps
// of hw/codec_reduce.h, the block's amax by a warp max reduction. Built with -fmad=false and
// without fast math; every fp32 operation is an explicit round-to-nearest intrinsic anyway.
#include <algorithm>

#include "hw/codec_reduce.h"
#include "hw/kernels.h"

namespace dmalab::kernels {
namespace {

namespace cr = ::dmalab::codec_reduce;

constexpr int kBlockReduceThreads = 256;
constexpr int kWarpsPerCta = kBlockReduceThreads / cr::kLanes;

// No restrict and no read-only (nc) loads: dst may alias a term. The loop bound is the same for
// every lane of a warp, so all 32 lanes take part in the reduction.
template <bool kAligned>
__global__ void __launch_bounds__(kBlockReduceThreads) BlockReduceKernel(BlockReduceArgs a) {
  const int lane = static_cast<int>(threadIdx.x % cr::kLanes);
  const int64_t blocks = a.elems / cr::kBlockElems;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarpsPerCta;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * kWarpsPerCta + threadIdx.x / cr::kLanes;
       b < blocks; b += stride) {
    float sums[cr::kValuesPerLane];
    cr::LoadLaneSums<kAligned>(a, b, lane, sums);
    uint32_t amax = 0;
    if (a.dst_codec != OperandCodec::kPlainBF16) {
      amax = __reduce_max_sync(0xffffffffu, cr::LaneAmaxBits(sums));
    }
    cr::StoreLane<kAligned>(a, b, lane, sums, amax);
  }
}

bool IsAligned(const void* p, OperandCodec codec) {
  const uintptr_t alignment = codec == OperandCodec::kPlainBF16 ? 8 : 4;
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

}  // namespace

cudaError_t LaunchBlockReduce(cudaStream_t stream, const BlockReduceArgs& args, int max_blocks) {
  if (args.num_terms < 1 || args.num_terms > kMaxReduceTerms || args.elems <= 0 ||
      args.elems % cr::kBlockElems != 0) {
    return cudaErrorInvalidValue;
  }
  bool aligned = IsAligned(args.dst, args.dst_codec);
  for (int t = 0; t < args.num_terms; ++t) {
    aligned = aligned && IsAligned(args.terms[t], args.term_codecs[t]);
  }
  const int64_t blocks = args.elems / cr::kBlockElems;
  const int64_t ctas =
      std::clamp<int64_t>((blocks + kWarpsPerCta - 1) / kWarpsPerCta, 1, std::max(max_blocks, 1));
  const unsigned grid = static_cast<unsigned>(ctas);
  if (aligned) {
    BlockReduceKernel<true><<<grid, kBlockReduceThreads, 0, stream>>>(args);
  } else {
    BlockReduceKernel<false><<<grid, kBlockReduceThreads, 0, stream>>>(args);
  }
  return cudaGetLastError();
}

cudaError_t PreloadBlockReduceKernels() {
  cudaFuncAttributes attr;
  const void* kernels[] = {
      reinterpret_cast<const void*>(&BlockReduceKernel<true>),
      reinterpret_cast<const void*>(&BlockReduceKernel<false>),
  };
  for (const void* k : kernels) {
    if (cudaError_t e = cudaFuncGetAttributes(&attr, k); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace dmalab::kernels
