/* minimal.c: a complete all-reduce plugin in one file (docs/plugins.md shows it).
 *
 * Build: cc -std=c99 -O2 -I include -shared -fPIC -o minimal.so examples/plugins/minimal.c
 * Run:   build/bin/dmalab replay SCENARIO --collective=./minimal.so
 *
 * Every rank copies its peers' inputs into its staging buffer on its compute stream, waits until
 * every peer has copied its own input, and sums the W terms in rank order into a fresh output
 * (the default form) or the caller's `out`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dmalab/plugin.h"

#define MAX_RANKS 16
typedef struct state {
  const dmalab_device_api* api;
  int32_t world, stream[MAX_RANKS], ready[MAX_RANKS], done[MAX_RANKS];
  dmalab_mem staging[MAX_RANKS]; /* (W-1) * max_bytes per rank */
  char error[512];
} state;
static char create_error[512];

#define CHECK(call)                                                                       \
  do {                                                                                    \
    if ((call) != DMALAB_OK) {                                                            \
      snprintf(st->error, sizeof(st->error), "%s: %s", #call, api->last_error(api->ctx)); \
      return DMALAB_ERROR;                                                                \
    }                                                                                     \
  } while (0)

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  if (config->world_size > MAX_RANKS) {
    snprintf(create_error, sizeof(create_error), "world %d; at most %d", config->world_size,
             MAX_RANKS);
    return DMALAB_ERROR;
  }
  state* st = (state*)calloc(1, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  st->api = api;
  st->world = config->world_size;
  *out = st; /* dmalab calls destroy if create fails with a state */
  for (int32_t r = 0; r < st->world; ++r) {
    CHECK(api->compute_stream(api->ctx, r, &st->stream[r]));
    CHECK(api->create_event(api->ctx, r, &st->ready[r]));
    CHECK(api->create_event(api->ctx, r, &st->done[r]));
    CHECK(api->allocate(api->ctx, r, (uint64_t)(st->world - 1) * config->max_bytes, "staging",
                        &st->staging[r]));
  }
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  for (int32_t r = 0; r < st->world; ++r)
    if (st->staging[r].bytes > 0) st->api->free(st->api->ctx, &st->staging[r]);
  free(st);
}

/* dsts[r] = in[0] + ... + in[W-1] on every rank r. */
static int32_t sum_into(state* st, const dmalab_tensor* in, const dmalab_mem* dsts) {
  const dmalab_device_api* api = st->api;
  const uint64_t bytes = in[0].mem.bytes;
  dmalab_mem terms[MAX_RANKS][MAX_RANKS]; /* terms[r][q]: rank q's input as rank r sees it */
  for (int32_t q = 0; q < st->world; ++q)
    CHECK(api->record_event(api->ctx, st->ready[q], st->stream[q]));
  for (int32_t r = 0; r < st->world; ++r) {
    for (int32_t q = 0, slot = 0; q < st->world; ++q) {
      terms[r][q] = in[r].mem;
      if (q == r) continue;
      terms[r][q] = st->staging[r]; /* a slice keeps the allocation id */
      terms[r][q].addr += (uint64_t)slot++ * bytes;
      terms[r][q].bytes = bytes;
      CHECK(api->wait_event(api->ctx, st->stream[r], st->ready[q]));
      CHECK(api->copy(api->ctx, st->stream[r], &terms[r][q], &in[q].mem, "gather"));
    }
    CHECK(api->record_event(api->ctx, st->done[r], st->stream[r]));
  }
  /* Every peer has copied rank r's input before r writes dsts[r] (which may be its input). */
  for (int32_t r = 0; r < st->world; ++r) {
    for (int32_t q = 0; q < st->world; ++q)
      CHECK(api->wait_event(api->ctx, st->stream[r], st->done[q]));
    CHECK(api->reduce(api->ctx, st->stream[r], in[r].dtype, &dsts[r], terms[r], st->world,
                      in[r].elems, "sum"));
  }
  return DMALAB_OK;
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->api;
  for (int32_t r = 0; r < st->world; ++r) /* fresh outputs, handed over to the caller */
    CHECK(api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  return sum_into(st, inputs, results);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  dmalab_mem dsts[MAX_RANKS];
  for (int32_t r = 0; r < st->world; ++r) dsts[r] = outs[r].mem;
  return sum_into(st, inputs, dsts);
}

static const char* last_error(void* p) { return p == NULL ? create_error : ((state*)p)->error; }

static const dmalab_plugin plugin = {sizeof(dmalab_plugin),
                                     DMALAB_PLUGIN_ABI_VERSION,
                                     "minimal",
                                     create,
                                     destroy,
                                     all_reduce,
                                     all_reduce_into,
                                     last_error};

DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == DMALAB_PLUGIN_ABI_VERSION ? &plugin : NULL;
}
