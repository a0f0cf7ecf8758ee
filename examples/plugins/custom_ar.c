/* custom_ar.c: an ABI v2 (SPMD) all-reduce shaped like vLLM's custom all-reduce: each rank copies
 * its input into its IPC-registered buffer, the ranks meet at a barrier of flags in their
 * registered signal areas, and every rank reads its peers' buffers through the mappings it
 * opened: one-shot below 512 KiB (every rank reduces all of it), two-shot above (each rank reduces
 * its slice, then gathers the others'). Sums are in rank order, so bit-identical on every rank.
 *
 * The bug (built without EXAMPLE_FIXED): the ranks all-gather the raw addresses of their buffers
 * instead of IPC handles and use a peer's address as if it were their own, as code written for one
 * process (where every GPU's memory is mapped) does when it moves to one process per GPU. Each
 * rank's address space is its own: the first use is a foreign_address finding.
 */
#include "spmd_common.h"

#define CAR_ONE_SHOT_MAX (512u << 10)

static int32_t car_create(const dmalab_rank_api* api, const dmalab_bootstrap* boot,
                          const dmalab_rank_config* config, void** state) {
  sp_state* st = (sp_state*)calloc(1, sizeof(sp_state));
  int32_t rc;
  if (st == NULL) return DMALAB_ERROR_INTERNAL;
  *state = st;
#ifdef EXAMPLE_FIXED
  rc = sp_init(st, api, boot, config);
#else
  {
    /* sp_init's allocations, but peers' raw addresses instead of handles. */
    dmalab_mem all[SP_MAX_RANKS];
    rc = sp_init(st, api, boot, config);
    if (rc != DMALAB_OK) return rc;
    SP_CHECK(st, sp_close_peers(st, st->peer_buffer));
    SP_CHECK(st, boot->allgather(boot->ctx, &st->buffer, all, sizeof(dmalab_mem)));
    for (int32_t q = 0; q < st->world; ++q) {
      st->peer_buffer[q] = all[q];
      st->peer_buffer[q].rank = st->rank; /* "it is just a pointer" */
    }
  }
#endif
  return rc;
}

static int32_t car_destroy(void* state) {
  sp_state* st = (sp_state*)state;
  int32_t rc;
#ifndef EXAMPLE_FIXED
  /* The raw addresses are no mappings: nothing to close for them. */
  for (int32_t q = 0; q < st->world; ++q) st->peer_buffer[q].bytes = 0;
  st->peer_buffer[st->rank] = st->buffer;
#endif
  rc = sp_release(st);
  free(st);
  return rc;
}

static int32_t car_all_reduce_into(void* state, const dmalab_tensor* input,
                                   const dmalab_tensor* out) {
  sp_state* st = (sp_state*)state;
  const dmalab_rank_api* api = st->api;
  const uint64_t bytes = input->mem.bytes;
  if (bytes > st->max_bytes || out->mem.bytes < bytes || input->dtype != st->dtype) {
    snprintf(st->error, sizeof(st->error), "input of %llu bytes (dtype %d): max %llu, dtype %d",
             (unsigned long long)bytes, input->dtype, (unsigned long long)st->max_bytes, st->dtype);
    return DMALAB_ERROR_BAD_ARGUMENT;
  }
  dmalab_mem staged = sp_slice(st->buffer, 0, bytes);
  SP_CHECK(st, api->copy(api->ctx, st->compute, &staged, &input->mem, "stage input"));
  if (sp_barrier(st, 0) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  return sp_all_reduce(st, st->peer_buffer, &out->mem, bytes, CAR_ONE_SHOT_MAX);
}

static int32_t car_all_reduce(void* state, const dmalab_tensor* input, dmalab_mem* result) {
  sp_state* st = (sp_state*)state;
  dmalab_tensor out = *input;
  SP_CHECK(st, st->api->allocate(st->api->ctx, input->mem.bytes, "custom_ar result", &out.mem));
  *result = out.mem;
  return car_all_reduce_into(state, input, &out);
}

static const char* car_last_error(void* state) {
  return state == NULL ? "allocation of the state failed" : ((sp_state*)state)->error;
}

static const dmalab_plugin_v2 kPlugin = {
    sizeof(dmalab_plugin_v2),
    DMALAB_PLUGIN_ABI_VERSION_2,
#ifdef EXAMPLE_FIXED
    "custom_ar",
#else
    "custom_ar_raw_peer",
#endif
    car_create,
    car_destroy,
    car_all_reduce,
    car_all_reduce_into,
    car_last_error,
    NULL, /* graph_captured: the registered buffer is fixed at create, nothing to register */
};

DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(uint32_t host_abi_version) {
  return host_abi_version >= DMALAB_PLUGIN_ABI_VERSION_2 ? &kPlugin : NULL;
}
