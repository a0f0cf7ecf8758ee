/* registered_input.c: an ABI v2 (SPMD) all-reduce that reads the caller's input in place instead
 * of copying it into a pre-registered buffer, as custom all-reduces do for large or graph-captured
 * inputs: each call exports the input's IPC handle, all-gathers the handles, opens the peers'
 * inputs and reduces straight from them (spmd_common.h's one-shot and two-shot). One source file,
 * three builds:
 *
 *  - registered_input_fixed (EXAMPLE_FIXED): the call waits for its work, then closes the mappings
 *    it opened. Nothing outlives the call.
 *  - registered_input_leak (EXAMPLE_LEAK, the sglang#34543 class): it never closes them. Every
 *    call adds W-1 mappings to a table of 64; when the table is full the call returns the caller's
 *    input unreduced. resource_growth reports the growth long before the table fills.
 *  - registered_input_cache (the ROCm/aiter#3838 class): it keeps the mappings in a cache keyed by
 *    the input's address and reuses them when an input arrives at a cached address. Once the
 *    caller frees an input, its block is handed to another tensor at the same address, and the
 *    peers read the freed allocation through their old mappings: stale_ipc_mapping.
 */
#include "spmd_common.h"

#define RI_ONE_SHOT_MAX (512u << 10)
#define RI_TABLE 64

typedef struct ri_entry {
  uint64_t addr; /* the own input's address (cache key) */
  dmalab_mem peers[SP_MAX_RANKS];
} ri_entry;

typedef struct ri_state {
  sp_state sp;
  ri_entry table[RI_TABLE];
  int32_t used;
} ri_state;

static int32_t ri_create(const dmalab_rank_api* api, const dmalab_bootstrap* boot,
                         const dmalab_rank_config* config, void** state) {
  ri_state* st = (ri_state*)calloc(1, sizeof(ri_state));
  if (st == NULL) return DMALAB_ERROR_INTERNAL;
  *state = st;
  return sp_init(&st->sp, api, boot, config);
}

static int32_t ri_destroy(void* state) {
  ri_state* st = (ri_state*)state;
  int32_t rc = DMALAB_OK;
  for (int32_t i = 0; i < st->used && rc == DMALAB_OK; ++i) {
    rc = sp_close_peers(&st->sp, st->table[i].peers);
  }
  if (rc == DMALAB_OK) rc = sp_release(&st->sp);
  free(st);
  return rc;
}

/* The peers' mappings of this call's inputs (a new table entry, or a cached one). */
static int32_t ri_register(ri_state* st, const dmalab_mem* input, ri_entry** entry) {
#if !defined(EXAMPLE_FIXED) && !defined(EXAMPLE_LEAK)
  for (int32_t i = 0; i < st->used; ++i) {
    if (st->table[i].addr == input->addr) {
      *entry = &st->table[i];
      return DMALAB_OK;
    }
  }
#endif
  if (st->used == RI_TABLE) {
    *entry = NULL;
    return DMALAB_OK;
  }
  ri_entry* e = &st->table[st->used];
  e->addr = input->addr;
  if (sp_exchange(&st->sp, *input, e->peers) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  ++st->used;
  *entry = e;
  return DMALAB_OK;
}

static int32_t ri_all_reduce_into(void* state, const dmalab_tensor* input,
                                  const dmalab_tensor* out) {
  ri_state* st = (ri_state*)state;
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  const uint64_t bytes = input->mem.bytes;
  ri_entry* e = NULL;
  if (bytes > sp->max_bytes || out->mem.bytes < bytes || input->dtype != sp->dtype) {
    snprintf(sp->error, sizeof(sp->error), "input of %llu bytes (dtype %d): max %llu, dtype %d",
             (unsigned long long)bytes, input->dtype, (unsigned long long)sp->max_bytes, sp->dtype);
    return DMALAB_ERROR_BAD_ARGUMENT;
  }
  if (ri_register(st, &input->mem, &e) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  if (e == NULL) {
    /* The table is full: the input goes back unreduced (the sglang#34543 fallback). */
    if (out->mem.addr != input->mem.addr) {
      SP_CHECK(sp, api->copy(api->ctx, sp->compute, &out->mem, &input->mem, "unreduced copy"));
    }
    return DMALAB_OK;
  }
  if (sp_barrier(sp, 0) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  /* In place, the reduce would overwrite an input the peers still read: reduce into the
   * registered buffer's second half, then copy back after the end barrier. */
  const int in_place = out->mem.addr == input->mem.addr;
  dmalab_mem dst = in_place ? sp_slice(sp->buffer, 0, bytes) : out->mem;
  if (sp_all_reduce(sp, e->peers, &dst, bytes, RI_ONE_SHOT_MAX) != DMALAB_OK) {
    return DMALAB_ERROR_INTERNAL;
  }
  if (in_place) SP_CHECK(sp, api->copy(api->ctx, sp->compute, &out->mem, &dst, "copy back"));
#ifdef EXAMPLE_FIXED
  /* The mappings are used by enqueued work: wait for it, then close them. */
  SP_CHECK(sp, api->synchronize(api->ctx));
  if (sp_close_peers(sp, e->peers) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  --st->used;
#endif
  return DMALAB_OK;
}

static int32_t ri_all_reduce(void* state, const dmalab_tensor* input, dmalab_mem* result) {
  ri_state* st = (ri_state*)state;
  dmalab_tensor out = *input;
  SP_CHECK(&st->sp, st->sp.api->allocate(st->sp.api->ctx, input->mem.bytes,
                                         "registered_input result", &out.mem));
  *result = out.mem;
  return ri_all_reduce_into(state, input, &out);
}

static const char* ri_last_error(void* state) {
  return state == NULL ? "allocation of the state failed" : ((ri_state*)state)->sp.error;
}

static const dmalab_plugin_v2 kPlugin = {
    sizeof(dmalab_plugin_v2),
    DMALAB_PLUGIN_ABI_VERSION_2,
#if defined(EXAMPLE_FIXED)
    "registered_input_fixed",
#elif defined(EXAMPLE_LEAK)
    "registered_input_leak",
#else
    "registered_input_cache",
#endif
    ri_create,
    ri_destroy,
    ri_all_reduce,
    ri_all_reduce_into,
    ri_last_error,
    NULL,
};

DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(uint32_t host_abi_version) {
  return host_abi_version >= DMALAB_PLUGIN_ABI_VERSION_2 ? &kPlugin : NULL;
}
