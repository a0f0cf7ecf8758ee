/* dmalab/plugin.h: the C ABI through which dmalab checks a third-party all-reduce.
 *
 * A plugin is a shared library that exports one function, dmalab_plugin_entry, returning a
 * table of its entry points (dmalab_plugin). dmalab loads it with dlopen, hands it a table of
 * device operations (dmalab_device_api) and calls its all-reduce in the scenario's pattern,
 * checking after every step what a model relies on: retained values unchanged, no two live
 * tensors sharing storage, all ranks bit-identical.
 *
 * One plugin object serves all W ranks of one device from one host thread, as dmalab's own
 * ring does: a call receives one tensor per rank and enqueues work on every rank's streams;
 * it returns without waiting, and the results are ordered on each rank's compute stream.
 *
 * A plugin written only against dmalab_device_api runs unchanged on the simulator (every
 * checker: races, use after free, deadlocks) and on GPUs. A plugin that launches its own CUDA
 * work through the native handles runs on GPUs only; it is still checked for aliasing, retained
 * values and rank consistency.
 *
 * Stability: C99, no C++ types. Every struct begins with its size, so fields can only be added
 * at the end; an incompatible change raises DMALAB_PLUGIN_ABI_VERSION, and dmalab refuses a
 * plugin built against another version, naming both.
 */
#ifndef DMALAB_PLUGIN_H_
#define DMALAB_PLUGIN_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DMALAB_PLUGIN_ABI_VERSION 1u

/* Return codes of every function in both tables. On DMALAB_ERROR the callee's last_error
 * says why. */
#define DMALAB_OK 0
#define DMALAB_ERROR 1

/* Element types (dmalab_tensor.dtype, reduce's dtype). */
#define DMALAB_DTYPE_BF16 0
#define DMALAB_DTYPE_FP16 1
#define DMALAB_DTYPE_FP32 2

/* What a stream is for (create_stream's kind). On GPUs copy streams drive the DMA engines. */
#define DMALAB_STREAM_COMPUTE 0
#define DMALAB_STREAM_COPY 1
#define DMALAB_STREAM_FLAG 2

/* dmalab_device_api.backend. */
#define DMALAB_BACKEND_SIM 0
#define DMALAB_BACKEND_CUDA 1

/* A byte range [addr, addr + bytes) in the address space of one rank. On the simulator addr
 * is a simulated address: never dereference it; move bytes with copy, read and write. On GPUs
 * it is the device pointer. alloc_id names the allocation the range lies in (0: unknown);
 * keep it when slicing (offset addr, shrink bytes), so the checkers can tell a use after free
 * from a legal access. */
typedef struct dmalab_mem {
  int32_t rank;
  uint32_t reserved; /* 0 */
  uint64_t addr;
  uint64_t bytes;
  uint64_t alloc_id;
} dmalab_mem;

/* A dense, contiguous tensor on one rank. shape points to ndim extents, valid during the
 * call only. */
typedef struct dmalab_tensor {
  dmalab_mem mem;
  int32_t dtype; /* DMALAB_DTYPE_* */
  int32_t ndim;
  int64_t elems;
  const int64_t* shape;
} dmalab_tensor;

/* The device operations a plugin may use. All stream and event ids are dmalab's; work is
 * asynchronous unless said otherwise. Functions return DMALAB_OK or DMALAB_ERROR (then
 * last_error(ctx) says why, until the next call). */
typedef struct dmalab_device_api {
  uint32_t struct_size; /* sizeof(dmalab_device_api) of the dmalab that built it */
  uint32_t abi_version; /* DMALAB_PLUGIN_ABI_VERSION */
  void* ctx;            /* pass as the first argument of every function below */
  int32_t world_size;   /* ranks 0..world_size-1 */
  int32_t backend;      /* DMALAB_BACKEND_* */

  const char* (*last_error)(void* ctx);

  /* Memory, through the device's caching allocator: a freed block may be handed out again at
   * once (free is ordered on the rank's compute stream). A plugin may free only what it
   * allocated and still owns: freeing anything else is refused and reported as a finding.
   * Not allowed while capturing a graph. */
  int32_t (*allocate)(void* ctx, int32_t rank, uint64_t bytes, const char* tag, dmalab_mem* out);
  int32_t (*free)(void* ctx, const dmalab_mem* allocation);

  /* Streams and events. The compute stream is where the caller's own work runs: inputs are
   * ready on it when a call starts, and results must be ordered before its later work. */
  int32_t (*compute_stream)(void* ctx, int32_t rank, int32_t* stream);
  int32_t (*create_stream)(void* ctx, int32_t rank, int32_t kind, const char* name,
                           int32_t* stream);
  int32_t (*create_event)(void* ctx, int32_t rank, int32_t* event);
  int32_t (*record_event)(void* ctx, int32_t event, int32_t stream);
  int32_t (*wait_event)(void* ctx, int32_t stream, int32_t event);

  /* DMA copy of src->bytes bytes (dst->bytes must be equal); one side on the stream's rank,
   * the other on any rank. */
  int32_t (*copy)(void* ctx, int32_t stream, const dmalab_mem* dst, const dmalab_mem* src,
                  const char* label);
  /* Kernel: dst[i] = terms[0][i] + ... + terms[n-1][i] for i < elems, each term widened to
   * fp32 and summed left to right in fp32, then rounded to dtype. One term is a copy. All
   * operands on the stream's rank. */
  int32_t (*reduce)(void* ctx, int32_t stream, int32_t dtype, const dmalab_mem* dst,
                    const dmalab_mem* terms, int32_t n_terms, int64_t elems, const char* label);

  /* Flags: 8-byte unsigned words. signal_flag increments the counter word (stream's rank) and
   * stores the new value to peer_flag (any rank) with release semantics; wait_flag increments
   * the expected word (stream's rank) and waits, with acquire loads, until flag (stream's rank)
   * is at least the new value. Both counters live in device memory, so a graph replays them
   * correctly. */
  int32_t (*signal_flag)(void* ctx, int32_t stream, const dmalab_mem* counter,
                         const dmalab_mem* peer_flag, const char* label);
  int32_t (*wait_flag)(void* ctx, int32_t stream, const dmalab_mem* expected,
                       const dmalab_mem* flag, const char* label);
  /* Immediate-value flags, as cuStreamWriteValue64 / cuStreamWaitValue64: store `value` to dst
   * (any rank) with release semantics; wait until flag (stream's rank) is at least `value`.
   * The value is fixed when the call is made: captured into a graph, every replay uses it. */
  int32_t (*write_value)(void* ctx, int32_t stream, const dmalab_mem* dst, uint64_t value,
                         const char* label);
  int32_t (*wait_value)(void* ctx, int32_t stream, const dmalab_mem* flag, uint64_t value,
                        const char* label);

  /* Host access: completes all enqueued work first. Not allowed while capturing. */
  int32_t (*write)(void* ctx, const dmalab_mem* dst, const void* bytes, uint64_t n);
  int32_t (*read)(void* ctx, const dmalab_mem* src, void* bytes, uint64_t n);
  int32_t (*synchronize)(void* ctx);

  /* Graphs. capture_graph runs body(user) and records the work it enqueues on every rank's
   * streams, with its arguments and addresses, instead of running it; launch_graph enqueues
   * one replay, after the work already on every rank's compute stream. is_capturing is 1 while
   * the caller (a scenario step, or the plugin itself) is capturing. */
  int32_t (*supports_graphs)(void* ctx);
  int32_t (*capture_graph)(void* ctx, int32_t (*body)(void* user), void* user, int32_t* graph);
  int32_t (*launch_graph)(void* ctx, int32_t graph);
  int32_t (*is_capturing)(void* ctx);

  /* Native handles, GPUs only (NULL or -1 on the simulator): the cudaStream_t behind a
   * stream, the device pointer of a range, the CUDA device ordinal of a rank. */
  void* (*native_stream)(void* ctx, int32_t stream);
  void* (*native_pointer)(void* ctx, const dmalab_mem* mem);
  int32_t (*native_device)(void* ctx, int32_t rank);
} dmalab_device_api;

/* What dmalab asks of one collective object. */
typedef struct dmalab_collective_config {
  uint32_t struct_size;
  int32_t world_size;
  uint64_t max_bytes;  /* the largest tensor any call will pass, in bytes */
  int32_t dtype;       /* the element type of the scenario's tensors */
  int32_t reserved;    /* 0 */
  const char* options; /* --collective-options text, "" when none; the plugin parses it */
} dmalab_collective_config;

/* A plugin's entry points. */
typedef struct dmalab_plugin {
  uint32_t struct_size; /* sizeof(dmalab_plugin) */
  uint32_t abi_version; /* DMALAB_PLUGIN_ABI_VERSION the plugin was built against */
  const char* name;     /* short name for reports, e.g. "my_allreduce" */

  /* Makes one collective for `device` (which outlives it) and `config`. May allocate, create
   * streams and events, and write initial flag values. */
  int32_t (*create)(const dmalab_device_api* device, const dmalab_collective_config* config,
                    void** state);
  void (*destroy)(void* state);

  /* Default form: for each rank r, writes to results[r] fresh storage holding the sum of
   * inputs[0..W-1], of inputs[r]'s size. The caller owns each result from then on and returns
   * it with the device's free: results must be allocations the plugin made (and now hands
   * over), never memory it keeps using. */
  int32_t (*all_reduce)(void* state, const dmalab_tensor* inputs, dmalab_mem* results);
  /* Explicit form: writes the sum into caller-owned outs[r]; outs[r].mem equal to
   * inputs[r].mem means in place. */
  int32_t (*all_reduce_into)(void* state, const dmalab_tensor* inputs, const dmalab_tensor* outs);

  /* Why the last call on this state failed (create's failures: NULL state). */
  const char* (*last_error)(void* state);
} dmalab_plugin;

/* The symbol every plugin exports. host_abi_version is the loading dmalab's
 * DMALAB_PLUGIN_ABI_VERSION; return NULL to refuse it. */
#if defined(_WIN32)
#define DMALAB_PLUGIN_EXPORT __declspec(dllexport)
#else
#define DMALAB_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif
DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(uint32_t host_abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DMALAB_PLUGIN_H_ */
