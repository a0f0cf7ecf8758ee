/* persistent_workspace.c: the founding bug, and (built with EXAMPLE_FIXED) its fix,
 * fresh_output.
 *
 * Bug: the default form returns a view of one workspace per rank, allocated at create. The
 * caller owns a default-form result, so it keeps it (a residual) while the next all-reduce
 * writes the same workspace: the kept value changes under it, and two live results share
 * storage. dmalab reports pointer_alias and retained_mismatch.
 * Fix: allocate a fresh output per call and hand it over; the caller frees it.
 */
#include "common.h"

typedef struct state {
  ex_state ex; /* first */
  dmalab_mem workspace[EX_MAX_RANKS];
} state;

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
#ifndef EXAMPLE_FIXED
  return ex_allocate_all(&st->ex, st->ex.max_bytes, "workspace", st->workspace);
#else
  return DMALAB_OK;
#endif
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->workspace);
  ex_destroy(&st->ex);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  for (int32_t r = 0; r < st->ex.world; ++r) {
#ifndef EXAMPLE_FIXED
    /* BUG: every call's result is the same workspace. */
    results[r] = ex_slice(st->workspace[r], 0, inputs[r].mem.bytes);
#else
    /* FIX: fresh storage per call, handed over to the caller. */
    EX_CHECK(&st->ex,
             st->ex.api->allocate(st->ex.api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
#endif
  }
  return ex_all_reduce(&st->ex, inputs, results);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  return ex_all_reduce_into((ex_state*)p, inputs, outs);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("persistent_workspace")
#else
EX_PLUGIN("fresh_output")
#endif
