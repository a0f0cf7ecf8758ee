/* Tiny plugins that break the ABI one way each, for plugin_abi_test.cc. One source, one module
 * per case: the CASE_* macro selects what is wrong. */
#include <stddef.h>
#include <string.h>

#include "dmalab/plugin.h"

#if defined(CASE_NO_ENTRY)
/* A shared library that is not a dmalab plugin: it exports something else. */
DMALAB_PLUGIN_EXPORT int not_a_plugin(void) { return 1; }
#else

typedef struct state {
  const dmalab_device_api* api;
  dmalab_mem flag; /* CASE_WAITS_FOREVER: a word nobody ever sets */
  char error[256];
  dmalab_mem kept; /* CASE_KEEPS_RAW_RESULT: rank 0's last result, as a raw pointer */
} state;

static state the_state;

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  (void)config;
#if defined(CASE_CREATE_FAILS)
  (void)api;
  (void)out;
  return DMALAB_ERROR; /* last_error(NULL) says why */
#else
  the_state.api = api;
  *out = &the_state;
#if defined(CASE_WAITS_FOREVER)
  static const uint64_t zero = 0;
  if (api->allocate(api->ctx, 0, 8, "never set", &the_state.flag) != DMALAB_OK ||
      api->write(api->ctx, &the_state.flag, &zero, 8) != DMALAB_OK) {
    return DMALAB_ERROR;
  }
#endif
  return DMALAB_OK;
#endif
}

static void destroy(void* p) { (void)p; }

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
#if defined(CASE_KEEPS_RAW_RESULT)
  /* Hands over fresh results (copies of the inputs: the values do not matter here), but keeps
   * rank 0's as a raw pointer, without its allocation id. */
  state* st = (state*)p;
  for (int32_t r = 0; r < st->api->world_size; ++r) {
    int32_t stream;
    if (st->api->allocate(st->api->ctx, r, inputs[r].mem.bytes, "result", &results[r]) !=
            DMALAB_OK ||
        st->api->compute_stream(st->api->ctx, r, &stream) != DMALAB_OK ||
        st->api->copy(st->api->ctx, stream, &results[r], &inputs[r].mem, "result copy") !=
            DMALAB_OK) {
      strcpy(st->error, st->api->last_error(st->api->ctx));
      return DMALAB_ERROR;
    }
  }
  st->kept = results[0];
  st->kept.alloc_id = 0;
  return DMALAB_OK;
#else
  (void)p;
#if defined(CASE_WAITS_FOREVER)
  /* Results as the ABI wants them, then a wait on rank 0 that nothing will ever satisfy. */
  const dmalab_device_api* api = the_state.api;
  int32_t stream = 0;
  for (int32_t r = 0; r < 2; ++r) {
    if (api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]) != DMALAB_OK) {
      return DMALAB_ERROR;
    }
  }
  if (api->compute_stream(api->ctx, 0, &stream) != DMALAB_OK) return DMALAB_ERROR;
  return api->wait_value(api->ctx, stream, &the_state.flag, 1, "never");
#else
  (void)inputs;
  (void)results;
  strcpy(the_state.error, "the default form is not implemented");
  return DMALAB_ERROR;
#endif
#endif
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  (void)outs;
#if defined(CASE_FREES_INPUT)
  /* Frees memory it does not own: the caller's input on rank 0. */
  if (st->api->free(st->api->ctx, &inputs[0].mem) != DMALAB_OK) {
    strcpy(st->error, st->api->last_error(st->api->ctx));
    return DMALAB_ERROR;
  }
  return DMALAB_OK;
#elif defined(CASE_LEAKS_PER_CALL)
  /* A registration per call that is never released: one more allocation on rank 0 each call. */
  dmalab_mem leaked;
  (void)inputs;
  if (st->api->allocate(st->api->ctx, 0, 512, "per-call registration", &leaked) != DMALAB_OK) {
    strcpy(st->error, st->api->last_error(st->api->ctx));
    return DMALAB_ERROR;
  }
  return DMALAB_OK;
#elif defined(CASE_KEEPS_RAW_RESULT)
  /* Writes through the kept raw pointer of a result the caller owns (and may have freed). */
  int32_t stream;
  if (st->api->compute_stream(st->api->ctx, 0, &stream) != DMALAB_OK ||
      st->api->copy(st->api->ctx, stream, &st->kept, &inputs[0].mem, "stale write") != DMALAB_OK) {
    strcpy(st->error, st->api->last_error(st->api->ctx));
    return DMALAB_ERROR;
  }
  return DMALAB_OK;
#else
  (void)inputs;
  strcpy(st->error, "dtype 0 (bf16) is not supported; this all-reduce takes fp32 only");
  return DMALAB_ERROR;
#endif
}

static const char* last_error(void* p) {
  if (p == NULL) return "no device memory for the 2 GiB workspace";
  return ((state*)p)->error;
}

static const dmalab_plugin plugin = {sizeof(dmalab_plugin),
#if defined(CASE_OTHER_ABI)
                                     DMALAB_PLUGIN_ABI_VERSION + 1,
#else
                                     DMALAB_PLUGIN_ABI_VERSION,
#endif
                                     "abi_case",
                                     create,
                                     destroy,
                                     all_reduce,
#if defined(CASE_NULL_ENTRY_POINT)
                                     NULL,
#else
                                     all_reduce_into,
#endif
                                     last_error};

DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
#if defined(CASE_ENTRY_RETURNS_NULL)
  (void)plugin;
  return NULL;
#else
  return &plugin;
#endif
}
#endif
