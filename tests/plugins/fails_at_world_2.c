/* A correct all-reduce (examples/plugins/common.h) whose every call fails at world size 2, as a
 * collective with an unsupported configuration would: for the zoo's test that a failing call is
 * a collective_error finding of the rows it happens in, and the other rows still run. */
#include "common.h"

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  ex_state* st = (ex_state*)ex_create(api, config, sizeof(ex_state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  return DMALAB_OK;
}

static void destroy(void* p) { ex_destroy((ex_state*)p); }

static int32_t refuse_world_2(ex_state* st) {
  return ex_fail(st, "world size 2 is not supported by this all-reduce (it needs 3 or more)");
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  ex_state* st = (ex_state*)p;
  if (st->world == 2) return refuse_world_2(st);
  return ex_all_reduce_into(st, inputs, outs);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  ex_state* st = (ex_state*)p;
  if (st->world == 2) return refuse_world_2(st);
  for (int32_t r = 0; r < st->world; ++r) {
    EX_CHECK(st, st->api->allocate(st->api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return ex_all_reduce(st, inputs, results);
}

EX_PLUGIN("fails_at_world_2")
