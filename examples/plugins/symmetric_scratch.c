/* symmetric_scratch.c: the vLLM#58154 class, and (built with EXAMPLE_FIXED) its fix.
 *
 * The plugin registers one symmetric scratch buffer per rank at create (EX_SCRATCH_BYTES, as a
 * custom all-reduce registers its IPC buffer). Bug: a default-form output that fits the scratch
 * is returned as the scratch itself, which the next all-reduce overwrites; larger outputs get
 * fresh memory, so the bug shows only for small (decode-sized) tensors.
 * Fix: reduce into the scratch as before, then copy out into fresh memory handed to the caller.
 */
#include "common.h"

#define EX_SCRATCH_BYTES (64u << 10)

typedef struct state {
  ex_state ex; /* first */
  dmalab_mem scratch[EX_MAX_RANKS];
} state;

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  return ex_allocate_all(&st->ex, EX_SCRATCH_BYTES, "symmetric_scratch", st->scratch);
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->scratch);
  ex_destroy(&st->ex);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  const uint64_t bytes = inputs[0].mem.bytes;
  dmalab_mem dsts[EX_MAX_RANKS];
  for (int32_t r = 0; r < st->ex.world; ++r) {
    if (bytes <= EX_SCRATCH_BYTES) {
      dsts[r] = ex_slice(st->scratch[r], 0, bytes);
    } else {
      EX_CHECK(&st->ex, api->allocate(api->ctx, r, bytes, "result", &dsts[r]));
    }
  }
  if (ex_all_reduce(&st->ex, inputs, dsts) != DMALAB_OK) return DMALAB_ERROR;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    results[r] = dsts[r];
#ifdef EXAMPLE_FIXED
    if (bytes <= EX_SCRATCH_BYTES) { /* FIX: copy out of the scratch into fresh memory */
      EX_CHECK(&st->ex, api->allocate(api->ctx, r, bytes, "result", &results[r]));
      EX_CHECK(&st->ex, api->copy(api->ctx, st->ex.compute[r], &results[r], &dsts[r], "copy_out"));
    }
#endif
    /* BUG (without the fix): a small result is the scratch, overwritten by the next call. */
  }
  return DMALAB_OK;
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  return ex_all_reduce_into((ex_state*)p, inputs, outs);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("symmetric_scratch")
#else
EX_PLUGIN("symmetric_scratch_fixed")
#endif
