/* cuda_native.cu: a plugin that launches its own CUDA work through the native handles
 * (include/dmalab/plugin.h: native_stream, native_pointer, native_device): peer copies with
 * cudaMemcpyPeerAsync and its own sum kernel. GPUs only: on the simulator create refuses
 * (the handles are NULL there). dmalab still checks it for aliasing, retained values and rank
 * consistency; the simulator's race and lifetime checkers do not see native work.
 *
 * Built only with the CUDA backend (build/examples/cuda_native.so). On a GPU host:
 *   build/bin/dmalab replay scenarios/glm52_tp4_layer0_residual.yaml --backend=hw \
 *       --collective=build/examples/cuda_native.so
 * Expected: PASS, with the same output hashes as the built-in ring's replay of the same file.
 *
 * Ordering uses dmalab's events (record_event / wait_event act on the same CUDA streams as
 * the native work); the algorithm is the minimal plugin's: gather peers' inputs into staging on
 * each rank's compute stream, wait until every peer copied this rank's input, sum in rank order.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "dmalab/plugin.h"

namespace {

constexpr int kMaxRanks = 16;

struct Terms {
  const void* p[kMaxRanks];
  int n;
};

__device__ float Load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ void Store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ void Store(float* p, int64_t i, float v) { p[i] = v; }

// dst[i] = terms[0][i] + ... + terms[n-1][i], in fp32 left to right, rounded once.
template <typename T>
__global__ void Sum(T* dst, Terms terms, int64_t elems) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < elems;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = Load(static_cast<const T*>(terms.p[0]), i);
    for (int k = 1; k < terms.n; ++k) acc += Load(static_cast<const T*>(terms.p[k]), i);
    Store(dst, i, acc);
  }
}

struct State {
  const dmalab_device_api* api;
  int32_t world, stream[kMaxRanks], ready[kMaxRanks], done[kMaxRanks];
  dmalab_mem staging[kMaxRanks];
  char error[512];
};

char create_error[512];

#define CHECK(call)                                                                       \
  do {                                                                                    \
    if ((call) != DMALAB_OK) {                                                            \
      snprintf(st->error, sizeof(st->error), "%s: %s", #call, api->last_error(api->ctx)); \
      return DMALAB_ERROR;                                                                \
    }                                                                                     \
  } while (0)
#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      snprintf(st->error, sizeof(st->error), "%s: %s", #call, cudaGetErrorString(e)); \
      return DMALAB_ERROR;                                                            \
    }                                                                                 \
  } while (0)

int32_t Create(const dmalab_device_api* api, const dmalab_collective_config* config, void** out) {
  if (api->backend != DMALAB_BACKEND_CUDA) {
    snprintf(create_error, sizeof(create_error),
             "cuda_native launches its own CUDA work: it runs on GPUs only (--backend=hw)");
    return DMALAB_ERROR;
  }
  if (config->world_size > kMaxRanks) {
    snprintf(create_error, sizeof(create_error), "world %d; at most %d", config->world_size,
             kMaxRanks);
    return DMALAB_ERROR;
  }
  State* st = static_cast<State*>(calloc(1, sizeof(State)));
  if (st == nullptr) return DMALAB_ERROR;
  st->api = api;
  st->world = config->world_size;
  *out = st;
  for (int32_t r = 0; r < st->world; ++r) {
    CHECK(api->compute_stream(api->ctx, r, &st->stream[r]));
    CHECK(api->create_event(api->ctx, r, &st->ready[r]));
    CHECK(api->create_event(api->ctx, r, &st->done[r]));
    CHECK(api->allocate(api->ctx, r, static_cast<uint64_t>(st->world - 1) * config->max_bytes,
                        "staging", &st->staging[r]));
  }
  return DMALAB_OK;
}

void Destroy(void* p) {
  State* st = static_cast<State*>(p);
  for (int32_t r = 0; r < st->world; ++r) {
    if (st->staging[r].bytes > 0) st->api->free(st->api->ctx, &st->staging[r]);
  }
  free(st);
}

int32_t SumInto(State* st, const dmalab_tensor* in, const dmalab_mem* dsts) {
  const dmalab_device_api* api = st->api;
  const uint64_t bytes = in[0].mem.bytes;
  Terms terms[kMaxRanks];
  for (int32_t q = 0; q < st->world; ++q) {
    CHECK(api->record_event(api->ctx, st->ready[q], st->stream[q]));
  }
  for (int32_t r = 0; r < st->world; ++r) {
    cudaStream_t stream = static_cast<cudaStream_t>(api->native_stream(api->ctx, st->stream[r]));
    terms[r].n = st->world;
    for (int32_t q = 0, slot = 0; q < st->world; ++q) {
      terms[r].p[q] = api->native_pointer(api->ctx, &in[r].mem);
      if (q == r) continue;
      dmalab_mem dst = st->staging[r];
      dst.addr += static_cast<uint64_t>(slot++) * bytes;
      dst.bytes = bytes;
      void* dst_ptr = api->native_pointer(api->ctx, &dst);
      terms[r].p[q] = dst_ptr;
      CHECK(api->wait_event(api->ctx, st->stream[r], st->ready[q]));
      CUDA_CHECK(cudaMemcpyPeerAsync(dst_ptr, api->native_device(api->ctx, r),
                                     api->native_pointer(api->ctx, &in[q].mem),
                                     api->native_device(api->ctx, q), bytes, stream));
    }
    CHECK(api->record_event(api->ctx, st->done[r], st->stream[r]));
  }
  for (int32_t r = 0; r < st->world; ++r) {
    for (int32_t q = 0; q < st->world; ++q) {
      CHECK(api->wait_event(api->ctx, st->stream[r], st->done[q]));
    }
    CUDA_CHECK(cudaSetDevice(api->native_device(api->ctx, r)));
    cudaStream_t stream = static_cast<cudaStream_t>(api->native_stream(api->ctx, st->stream[r]));
    void* dst = api->native_pointer(api->ctx, &dsts[r]);
    const int64_t n = in[r].elems;
    const int threads = 256;
    const int blocks = static_cast<int>(n / threads + 1 < 1024 ? n / threads + 1 : 1024);
    switch (in[r].dtype) {
      case DMALAB_DTYPE_BF16:
        Sum<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), terms[r], n);
        break;
      case DMALAB_DTYPE_FP16:
        Sum<<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), terms[r], n);
        break;
      case DMALAB_DTYPE_FP32:
        Sum<<<blocks, threads, 0, stream>>>(static_cast<float*>(dst), terms[r], n);
        break;
      default:
        snprintf(st->error, sizeof(st->error), "dtype %d is not supported", in[r].dtype);
        return DMALAB_ERROR;
    }
    CUDA_CHECK(cudaGetLastError());
  }
  return DMALAB_OK;
}

int32_t AllReduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  State* st = static_cast<State*>(p);
  const dmalab_device_api* api = st->api;
  for (int32_t r = 0; r < st->world; ++r) {
    CHECK(api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return SumInto(st, inputs, results);
}

int32_t AllReduceInto(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  State* st = static_cast<State*>(p);
  dmalab_mem dsts[kMaxRanks];
  for (int32_t r = 0; r < st->world; ++r) dsts[r] = outs[r].mem;
  return SumInto(st, inputs, dsts);
}

const char* LastError(void* p) {
  return p == nullptr ? create_error : static_cast<State*>(p)->error;
}

const dmalab_plugin kPlugin = {sizeof(dmalab_plugin),
                               DMALAB_PLUGIN_ABI_VERSION,
                               "cuda_native",
                               Create,
                               Destroy,
                               AllReduce,
                               AllReduceInto,
                               LastError};

}  // namespace

extern "C" DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(
    uint32_t host_abi_version) {
  return host_abi_version == DMALAB_PLUGIN_ABI_VERSION ? &kPlugin : nullptr;
}
