/* graph_shared_buffer.c: the NVIDIA/nccl#1924 and TensorRT-LLM#17048 class, and (built with
 * EXAMPLE_FIXED) its fix.
 *
 * Eagerly the plugin reduces straight into the caller's `out`. Under graph capture it instead
 * reduces into one registered buffer per rank (graph-safe: its address never changes) and copies
 * the result to `out` on a side stream. Bug: the compute stream never waits for that copy, so
 * the next all-reduce captured in the same graph reduces into the shared buffer while the
 * previous call's copy may still read it. Eager runs are correct; only replays are wrong.
 * Fix: the missing dependency: the compute stream waits for the side copy before returning.
 */
#include "common.h"

typedef struct state {
  ex_state ex; /* first */
  dmalab_mem shared[EX_MAX_RANKS];
  int32_t side[EX_MAX_RANKS];
  int32_t reduced[EX_MAX_RANKS];
  int32_t copied_out[EX_MAX_RANKS];
} state;

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex,
             api->create_stream(api->ctx, r, DMALAB_STREAM_COPY, "copy_out", &st->side[r]));
    EX_CHECK(&st->ex, api->create_event(api->ctx, r, &st->reduced[r]));
    EX_CHECK(&st->ex, api->create_event(api->ctx, r, &st->copied_out[r]));
  }
  return ex_allocate_all(&st->ex, st->ex.max_bytes, "graph_buffer", st->shared);
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->shared);
  ex_destroy(&st->ex);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  if (!api->is_capturing(api->ctx)) return ex_all_reduce_into(&st->ex, inputs, outs);
  if (ex_check_inputs(&st->ex, inputs) != DMALAB_OK) return DMALAB_ERROR;
  if (ex_gather(&st->ex, inputs) != DMALAB_OK) return DMALAB_ERROR;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    const dmalab_mem buffer = ex_slice(st->shared[r], 0, inputs[r].mem.bytes);
    if (ex_reduce(&st->ex, inputs, r, &buffer) != DMALAB_OK) return DMALAB_ERROR;
    EX_CHECK(&st->ex, api->record_event(api->ctx, st->reduced[r], st->ex.compute[r]));
    EX_CHECK(&st->ex, api->wait_event(api->ctx, st->side[r], st->reduced[r]));
    EX_CHECK(&st->ex, api->copy(api->ctx, st->side[r], &outs[r].mem, &buffer, "copy_out"));
    EX_CHECK(&st->ex, api->record_event(api->ctx, st->copied_out[r], st->side[r]));
#ifdef EXAMPLE_FIXED
    /* FIX: later work on the compute stream (the next call's reduce into the same buffer)
     * starts after the copy out. */
    EX_CHECK(&st->ex, api->wait_event(api->ctx, st->ex.compute[r], st->copied_out[r]));
#endif
    /* BUG (without the fix): nothing orders the copy out before the next call's reduce. */
  }
  return DMALAB_OK;
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex, api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return ex_all_reduce(&st->ex, inputs, results);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("graph_shared_buffer")
#else
EX_PLUGIN("graph_shared_buffer_fixed")
#endif
