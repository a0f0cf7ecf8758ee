/* dmalab/plugin.h: the C ABI through which dmalab checks a third-party all-reduce.
 *
 * A plugin is a shared library that dmalab loads with dlopen. It speaks one of two ABIs:
 *
 *  - ABI v2 (SPMD, the way real collectives are written): the library exports
 *    dmalab_plugin_entry_v2, returning a dmalab_plugin_v2 table. dmalab creates one instance per
 *    rank, as ncclCommInitRank does: create receives the rank, the world, the rank's own device
 *    table (dmalab_rank_api) and a bootstrap (all-gather of opaque bytes, barrier). An instance
 *    touches only its rank's streams and memory; it reaches a peer's memory and events only
 *    through IPC handles it exported, all-gathered and opened (as cudaIpcGetMemHandle /
 *    cudaIpcOpenMemHandle). On the simulator every rank has its own address space and the W
 *    instances run as W independent host threads of control, interleaved by the seed.
 *  - ABI v1 (one object for all ranks): the library exports dmalab_plugin_entry, returning a
 *    dmalab_plugin table; one object serves all W ranks from one host thread, and every rank's
 *    memory is addressable by rank and address. v1 plugins keep loading and working.
 *
 * dmalab hands the plugin's calls the scenario's pattern and checks after every step what a model
 * relies on (retained values unchanged, no two live tensors sharing storage, all ranks
 * bit-identical) and, on the simulator, every device checker: races, use after free or reuse,
 * stale IPC mappings, foreign addresses, deadlocks, leaks and resource growth.
 *
 * A plugin written only against the device table runs unchanged on the simulator and on GPUs. A
 * plugin that launches its own CUDA work through the native handles runs on GPUs only; it is
 * still checked for aliasing, retained values and rank consistency.
 *
 * Stability, as NCCL's plugin ABIs: C99, no C++ types. Every table begins with its size, so
 * fields are only ever added at the end. dmalab accepts a table that is older and smaller than
 * its own (missing trailing fields count as absent: NULL) and refuses only a plugin built for a
 * newer major version, naming both. A plugin may test a field of a table dmalab gives it with
 * DMALAB_HAS_FIELD before using it.
 */
#ifndef DMALAB_PLUGIN_H_
#define DMALAB_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI v1's version (the dmalab_plugin table). */
#define DMALAB_PLUGIN_ABI_VERSION 1u
/* ABI v2's version (the dmalab_plugin_v2 table), the newest this header describes. */
#define DMALAB_PLUGIN_ABI_VERSION_2 2u

/* Return codes of every function in every table. On an error the callee's last_error says why.
 * ABI v1 knows only DMALAB_OK and DMALAB_ERROR (every error is the call refusing its input).
 * ABI v2 tells three kinds of error apart, both ways (dmalab's device table returns them too):
 *   DMALAB_ERROR_INTERNAL     the callee failed on valid input (a plugin: the collective's own
 *                             failure, reported as a collective_error finding, exit status 1);
 *   DMALAB_ERROR_BAD_ARGUMENT the caller passed something invalid (a plugin returning it says
 *                             dmalab called it wrongly: bad input, exit status 2);
 *   DMALAB_ERROR_UNSUPPORTED  a valid request the callee does not support (a dtype, a size, a
 *                             form: the scenario cannot run with this collective, exit 2). */
#define DMALAB_OK 0
#define DMALAB_ERROR 1
#define DMALAB_ERROR_INTERNAL 1
#define DMALAB_ERROR_BAD_ARGUMENT 2
#define DMALAB_ERROR_UNSUPPORTED 3

/* Whether `table` (a pointer to a table that begins with its struct_size) has `field`. */
#define DMALAB_HAS_FIELD(table, type, field) \
  ((table)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

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
 * it is the device pointer. alloc_id names the allocation the range lies in (0: unknown); a
 * range passed back with alloc_id 0 is resolved by address to the last range dmalab handed the
 * plugin that covers it (an allocation, a call's tensor), so a raw pointer kept past its
 * allocation's free is still caught. ABI v2: rank is always the instance's own rank (a peer's
 * memory is a mapping in the own rank's address space). */
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

/* ========================================= ABI v1 ========================================= */

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

/* ====================================== ABI v2 (SPMD) ====================================== */

/* A stream and an event of one rank: distinct types, so passing one for the other does not
 * compile. */
typedef struct dmalab_stream {
  int32_t id;
} dmalab_stream;
typedef struct dmalab_event {
  int32_t id;
} dmalab_event;

/* IPC handles: opaque blobs, as cudaIpcMemHandle_t and cudaIpcEventHandle_t; pass them to peers
 * unchanged (through the bootstrap). 128 bytes: on GPUs a CUDA handle (64 bytes) and where the
 * allocation lies in the memory that handle exports. */
#define DMALAB_IPC_HANDLE_BYTES 128
typedef struct dmalab_ipc_mem_handle {
  uint8_t bytes[DMALAB_IPC_HANDLE_BYTES];
} dmalab_ipc_mem_handle;
typedef struct dmalab_ipc_event_handle {
  uint8_t bytes[DMALAB_IPC_HANDLE_BYTES];
} dmalab_ipc_event_handle;

/* The device operations of one rank, as that rank's process sees its GPU. Semantics as
 * dmalab_device_api's, on the own rank only; functions return DMALAB_OK or a DMALAB_ERROR_* code
 * (then last_error(ctx) says why, until the next call). Every call is a point where another
 * rank's host thread may run (the simulator's seed chooses). */
typedef struct dmalab_rank_api {
  uint32_t struct_size; /* sizeof(dmalab_rank_api) of the dmalab that built it */
  uint32_t abi_version; /* DMALAB_PLUGIN_ABI_VERSION_2 */
  void* ctx;            /* pass as the first argument of every function below */
  int32_t rank;         /* this instance's rank */
  int32_t world_size;
  int32_t backend;  /* DMALAB_BACKEND_* */
  int32_t reserved; /* 0 */

  const char* (*last_error)(void* ctx);

  /* Memory of this rank, through the device's caching allocator (a freed block may be handed out
   * again at once). A plugin frees only what it allocated and still owns. While capturing, the
   * simulator allocates from the graph's private pool (a default-form result of a captured call),
   * and frees only what the same capture allocated; the CUDA backend refuses both. */
  int32_t (*allocate)(void* ctx, uint64_t bytes, const char* tag, dmalab_mem* out);
  int32_t (*free)(void* ctx, const dmalab_mem* allocation);

  /* Streams and events of this rank. The compute stream is the caller's: inputs are ready on it
   * when a call starts, and results must be ordered before its later work. What the plugin
   * creates it destroys (at the latest in destroy): anything still held then is a leak. */
  int32_t (*compute_stream)(void* ctx, dmalab_stream* out);
  int32_t (*create_stream)(void* ctx, int32_t kind, const char* name, dmalab_stream* out);
  int32_t (*destroy_stream)(void* ctx, dmalab_stream stream);
  int32_t (*create_event)(void* ctx, dmalab_event* out);
  int32_t (*destroy_event)(void* ctx, dmalab_event event);
  int32_t (*record_event)(void* ctx, dmalab_event event, dmalab_stream stream);
  int32_t (*wait_event)(void* ctx, dmalab_stream stream, dmalab_event event);

  /* Work, as dmalab_device_api's: copy (either side may be a mapping of a peer's memory), reduce
   * (operands in this rank's memory or its mappings), flags (the flag word may be a mapping),
   * immediate-value flags. */
  int32_t (*copy)(void* ctx, dmalab_stream stream, const dmalab_mem* dst, const dmalab_mem* src,
                  const char* label);
  int32_t (*reduce)(void* ctx, dmalab_stream stream, int32_t dtype, const dmalab_mem* dst,
                    const dmalab_mem* terms, int32_t n_terms, int64_t elems, const char* label);
  int32_t (*signal_flag)(void* ctx, dmalab_stream stream, const dmalab_mem* counter,
                         const dmalab_mem* flag, const char* label);
  int32_t (*wait_flag)(void* ctx, dmalab_stream stream, const dmalab_mem* expected,
                       const dmalab_mem* flag, const char* label);
  int32_t (*write_value)(void* ctx, dmalab_stream stream, const dmalab_mem* dst, uint64_t value,
                         const char* label);
  int32_t (*wait_value)(void* ctx, dmalab_stream stream, const dmalab_mem* flag, uint64_t value,
                        const char* label);

  /* Host access to this rank's memory (or a mapping); complete this rank's enqueued work first.
   * Not while capturing. */
  int32_t (*write)(void* ctx, const dmalab_mem* dst, const void* bytes, uint64_t n);
  int32_t (*read)(void* ctx, const dmalab_mem* src, void* bytes, uint64_t n);
  int32_t (*synchronize)(void* ctx);

  /* IPC, as CUDA's. get_mem_handle exports an allocation this rank made (its start, as allocate
   * returned it); open_mem_handle maps a peer's handle into this rank's address space and
   * returns the mapping (another address than the owner's; alloc_id 0); close_mem_handle ends a
   * mapping, by its start. The owner's free does NOT wait for its peers' mappings: a mapping used
   * after the owner freed the allocation is a stale_ipc_mapping finding. Event handles: a peer's
   * event opened here can be waited on (and recorded) by this rank's streams. */
  int32_t (*ipc_get_mem_handle)(void* ctx, const dmalab_mem* allocation,
                                dmalab_ipc_mem_handle* out);
  int32_t (*ipc_open_mem_handle)(void* ctx, const dmalab_ipc_mem_handle* handle,
                                 dmalab_mem* mapping);
  int32_t (*ipc_close_mem_handle)(void* ctx, const dmalab_mem* mapping);
  int32_t (*ipc_get_event_handle)(void* ctx, dmalab_event event, dmalab_ipc_event_handle* out);
  int32_t (*ipc_open_event_handle)(void* ctx, const dmalab_ipc_event_handle* handle,
                                   dmalab_event* out);

  /* 1 while the caller is capturing a graph (the calls' work is then recorded, not run). */
  int32_t (*is_capturing)(void* ctx);

  /* Native handles, GPUs only (NULL or -1 on the simulator). */
  void* (*native_stream)(void* ctx, dmalab_stream stream);
  void* (*native_pointer)(void* ctx, const dmalab_mem* mem);
  int32_t (*native_device)(void* ctx);

  /* --- Added after ABI v2's first table: test with DMALAB_HAS_FIELD(api, dmalab_rank_api, f). ---
   *
   * Deferred peer mappings, as CUDA's virtual memory API (cuMemAddressReserve, cuMemMap,
   * cuMemUnmap, cuMemAddressFree): work may name addresses whose memory is mapped only later. A
   * custom all-reduce under graph capture needs them: the captured kernel reads its peers' inputs
   * through addresses fixed at capture, and the peers' buffers are opened there only after the
   * capture ended (graph_captured: register_graph_buffers).
   *
   * reserve_address reserves `bytes` of this rank's address space (no memory behind it) and
   * returns the range. ipc_open_mem_handle_at maps a peer's handle at the start of a reserved
   * range, which must be large enough and hold no mapping; the mapping it returns is closed with
   * ipc_close_mem_handle, after which the range is unmapped again (and may be mapped anew).
   * release_address ends a reservation, closing the mapping in it. Work that reaches a reserved
   * range where nothing is mapped when it runs (not when it is captured: a graph resolves the
   * range at every launch) is an unmapped_address finding; a reservation still held at destroy is
   * a resource_leak.
   *
   * The simulator has them; a GPU backend may return DMALAB_ERROR_UNSUPPORTED (a plugin then
   * takes another path, or the scenario cannot run with it: exit 2). */
  int32_t (*reserve_address)(void* ctx, uint64_t bytes, dmalab_mem* out);
  int32_t (*ipc_open_mem_handle_at)(void* ctx, const dmalab_ipc_mem_handle* handle,
                                    const dmalab_mem* reserved, dmalab_mem* mapping);
  int32_t (*release_address)(void* ctx, const dmalab_mem* reserved);
} dmalab_rank_api;

/* The ranks' out-of-band channel, as ncclCommInitRank's bootstrap (or torch.distributed's
 * all_gather_object, MPI, a socket store): host-side, blocking, called by every rank in the same
 * order. A call that some ranks never make is reported as a deadlock, naming them. */
typedef struct dmalab_bootstrap {
  uint32_t struct_size;
  uint32_t reserved; /* 0 */
  void* ctx;
  /* Every rank passes `bytes` bytes (the same count on every rank); recv receives
   * world_size * bytes, rank r's at offset r * bytes. */
  int32_t (*allgather)(void* ctx, const void* send, void* recv, uint64_t bytes);
  int32_t (*barrier)(void* ctx);
} dmalab_bootstrap;

/* Log levels of dmalab_rank_config.log. */
#define DMALAB_LOG_ERROR 0
#define DMALAB_LOG_WARN 1
#define DMALAB_LOG_INFO 2
#define DMALAB_LOG_DEBUG 3

/* What dmalab asks of one rank's instance. */
typedef struct dmalab_rank_config {
  uint32_t struct_size;
  int32_t rank;
  int32_t world_size;
  int32_t dtype;       /* the element type of the scenario's tensors */
  uint64_t max_bytes;  /* the largest tensor any call will pass, in bytes */
  const char* options; /* --collective-options text, "" when none; the plugin parses it */
  /* Messages for the user (dmalab prints them on stderr, naming the plugin and the rank). */
  void (*log)(void* log_ctx, int32_t level, const char* message);
  void* log_ctx;
} dmalab_rank_config;

/* A v2 plugin's entry points. */
typedef struct dmalab_plugin_v2 {
  uint32_t struct_size; /* sizeof(dmalab_plugin_v2) */
  uint32_t abi_version; /* DMALAB_PLUGIN_ABI_VERSION_2 */
  const char* name;     /* short name for reports */

  /* Makes rank config->rank's instance. `device` and `bootstrap` outlive it. Every rank's create
   * runs at once (each in its own host thread of control): create may allocate, export and
   * all-gather handles, open peers' handles and write initial flag values. */
  int32_t (*create)(const dmalab_rank_api* device, const dmalab_bootstrap* bootstrap,
                    const dmalab_rank_config* config, void** state);
  /* Releases everything the instance holds (allocations, mappings, events, streams); may use
   * the bootstrap. What is still held afterwards is a resource_leak finding. */
  int32_t (*destroy)(void* state);

  /* Default form: writes to *result fresh storage of input's size holding the sum over all ranks'
   * inputs. The caller owns it from then on: it must be an allocation the instance made and now
   * hands over, never memory it keeps using. */
  int32_t (*all_reduce)(void* state, const dmalab_tensor* input, dmalab_mem* result);
  /* Explicit form: writes the sum into the caller-owned out; out->mem equal to input->mem means
   * in place. */
  int32_t (*all_reduce_into)(void* state, const dmalab_tensor* input, const dmalab_tensor* out);

  /* Why the last call on this state failed (create's failures: NULL state). */
  const char* (*last_error)(void* state);

  /* Optional (NULL: nothing to do): a graph capture that contained this instance's calls has
   * ended, on every rank at once. The buffers those calls used are now fixed; register them with
   * the peers here, as register_graph_buffers does (every rank must register the same number in
   * the same order). */
  int32_t (*graph_captured)(void* state);
} dmalab_plugin_v2;

/* The symbol a plugin exports, one of (dmalab looks for the newest first):
 *   v2: dmalab_plugin_entry_v2(host_abi_version), host_abi_version being the newest version the
 *       loading dmalab speaks (DMALAB_PLUGIN_ABI_VERSION_2 or later);
 *   v1: dmalab_plugin_entry(DMALAB_PLUGIN_ABI_VERSION).
 * Return NULL to refuse the host. */
#if defined(_WIN32)
#define DMALAB_PLUGIN_EXPORT __declspec(dllexport)
#else
#define DMALAB_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif
DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(uint32_t host_abi_version);
DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(uint32_t host_abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DMALAB_PLUGIN_H_ */
