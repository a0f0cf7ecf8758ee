// The CUDA kernels of CudaDevice and their launchers: the element-wise Reduce, the block-codec
// Reduce, the one-thread flag kernels and the spin of a schedule perturbation. Plain C++
// declarations (no absl), so that both nvcc and the host compiler read them; CudaDevice turns the
// returned cudaError_t into a Status.
#ifndef DMALAB_HW_KERNELS_H_
#define DMALAB_HW_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dmalab::kernels {

inline constexpr int kMaxReduceTerms = 16;

enum class ElementType : int32_t { kBF16, kFP16, kFP32 };

// dst[i] = encode(decode(terms[0][i]) + ... + decode(terms[num_terms - 1][i])), summed left to
// right in fp32 exactly as ReduceHost does (hw/element_math.h). dst may equal a term (in place).
struct ReduceArgs {
  void* dst = nullptr;
  const void* terms[kMaxReduceTerms] = {};
  int32_t num_terms = 0;
  int64_t elems = 0;
};

// Uses 16-byte vector accesses when every pointer is 16-byte aligned, scalar ones otherwise
// (and for the tail). `max_blocks` caps the grid (a few blocks per multiprocessor).
cudaError_t LaunchReduce(cudaStream_t stream, ElementType type, const ReduceArgs& args,
                         int max_blocks);

// How an operand of the block-codec Reduce is stored: bf16 elements, or 128-value blocks of
// INT8 or E4M3 codes with one fp32 scale each (common/core/codec.h, segment layout included).
enum class OperandCodec : int32_t { kPlainBF16, kInt8Block, kE4M3Block };

// dst = encode(decode(terms[0]) + ... + decode(terms[num_terms - 1])), a 128-value block at a
// time, summed left to right in fp32 exactly as ReduceHost does (hw/codec_reduce.h). elems is
// divisible by 128. dst may equal a term of the same codec (in place).
struct BlockReduceArgs {
  void* dst = nullptr;
  OperandCodec dst_codec = OperandCodec::kPlainBF16;
  const void* terms[kMaxReduceTerms] = {};
  OperandCodec term_codecs[kMaxReduceTerms] = {};
  int32_t num_terms = 0;
  int64_t elems = 0;
};

// One warp per block. Uses 8-byte (bf16) and 4-byte (codes, scales) accesses when every plain
// pointer is 8-byte and every encoded one 4-byte aligned, byte accesses otherwise.
cudaError_t LaunchBlockReduce(cudaStream_t stream, const BlockReduceArgs& args, int max_blocks);

// Loads every kernel on the current GPU now, so no launch has to load a module while a flag
// wait spins (lazy loading could then deadlock).
cudaError_t PreloadKernels();
// PreloadKernels' part for the kernels of hw/codec_kernels.cu.
cudaError_t PreloadBlockReduceKernels();

// c = ++*counter; then a system-scope release store of c to *peer_flag (any GPU's memory).
cudaError_t LaunchSignalFlag(cudaStream_t stream, uint64_t* counter, uint64_t* peer_flag);

// Why a wait kernel gave up.
enum class WaitFailure : uint32_t {
  kNone = 0,
  kTimedOut = 1,   // the flag did not reach the expected value within the timeout
  kAbandoned = 2,  // another wait timed out first; this one stopped waiting early
};

// Written by a wait kernel that gives up, into host-mapped pinned memory. `valid` is stored
// last; the host reads records only after synchronizing the streams.
struct WaitFailureRecord {
  uint32_t valid;
  uint32_t failure;  // WaitFailure
  int32_t rank;
  int32_t stream;  // the device's StreamId
  int32_t label;   // index into the device's table of wait labels
  int32_t reserved;
  uint64_t flag_seen;  // the last value of the flag read
  uint64_t expected;
  uint64_t waited_ns;
};

struct WaitFlagArgs {
  // Local, bumped by the kernel; null for an immediate-value wait, which waits for `immediate`.
  uint64_t* expected = nullptr;
  uint64_t immediate = 0;
  const uint64_t* flag = nullptr;  // local, stored by peers
  uint64_t timeout_ns = 0;
  // Host-mapped: set to 1 by a wait that times out, so that the others give up quickly.
  uint32_t* abort = nullptr;
  // Host-mapped records of this GPU, and the device-memory counter that hands out their slots.
  WaitFailureRecord* records = nullptr;
  uint32_t* record_count = nullptr;
  uint32_t max_records = 0;
  int32_t rank = 0;
  int32_t stream = 0;
  int32_t label = 0;
};

// One thread that spins for `ns` nanoseconds (%globaltimer), delaying the stream's next work.
cudaError_t LaunchSpin(cudaStream_t stream, uint64_t ns);

// A system-scope release store of `value` to *flag (any GPU's memory).
cudaError_t LaunchWriteValue(cudaStream_t stream, uint64_t* flag, uint64_t value);

// e = ++*expected (or e = immediate when expected is null); spins with system-scope acquire
// loads until *flag >= e. Gives up after
// timeout_ns (measured with %globaltimer), or soon after another wait timed out, and then
// writes a WaitFailureRecord and returns.
cudaError_t LaunchWaitFlag(cudaStream_t stream, const WaitFlagArgs& args);

}  // namespace dmalab::kernels

#endif  // DMALAB_HW_KERNELS_H_
