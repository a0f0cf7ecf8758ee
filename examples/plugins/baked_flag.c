/* baked_flag.c: the vLLM#46913 class, and (built with EXAMPLE_FIXED) its fix.
 *
 * Peers tell each other "my input is ready" through flag words instead of events. Bug: the flag
 * value is an epoch counted on the host (write_value / wait_value of `epoch`). Eagerly every call
 * uses a new epoch and all is well; captured into a graph the epoch is baked in, so in replay
 * N+1 the wait for epoch E is satisfied at once by replay N's store of E, and a rank copies a
 * peer's input before the peer has produced it: a race, which the simulator's race checker
 * reports (the satisfied wait acquires only what replay N released).
 * Fix: device-side counters (signal_flag / wait_flag): the counter and the expected value live
 * in device memory and advance in every replay.
 */
#include "common.h"

typedef struct state {
  ex_state ex;                       /* first */
  dmalab_mem flags[EX_MAX_RANKS];    /* on rank r: word q is set by peer q */
  dmalab_mem counters[EX_MAX_RANKS]; /* on rank q: word r counts q's signals to r */
  dmalab_mem expected[EX_MAX_RANKS]; /* on rank r: word q counts r's waits for q */
  uint64_t epoch;                    /* host-side: the bug */
} state;

static dmalab_mem word(const dmalab_mem* m, int32_t i) { return ex_slice(*m, 8u * (uint64_t)i, 8); }

#ifndef EXAMPLE_FIXED
/* BUG: the value waited for is fixed when the call is made (and when it is captured). */
static int32_t signal_ready(ex_state* ex, int32_t q, int32_t r) {
  state* st = (state*)ex;
  const dmalab_mem flag = word(&st->flags[r], q);
  EX_CHECK(ex, ex->api->write_value(ex->api->ctx, ex->compute[q], &flag, st->epoch, "ready"));
  return DMALAB_OK;
}
static int32_t wait_ready(ex_state* ex, int32_t r, int32_t q) {
  state* st = (state*)ex;
  const dmalab_mem flag = word(&st->flags[r], q);
  EX_CHECK(ex, ex->api->wait_value(ex->api->ctx, ex->copy[r], &flag, st->epoch, "wait_ready"));
  return DMALAB_OK;
}
#else
/* FIX: counters in device memory advance in every replay. */
static int32_t signal_ready(ex_state* ex, int32_t q, int32_t r) {
  state* st = (state*)ex;
  const dmalab_mem counter = word(&st->counters[q], r), flag = word(&st->flags[r], q);
  EX_CHECK(ex, ex->api->signal_flag(ex->api->ctx, ex->compute[q], &counter, &flag, "ready"));
  return DMALAB_OK;
}
static int32_t wait_ready(ex_state* ex, int32_t r, int32_t q) {
  state* st = (state*)ex;
  const dmalab_mem expected = word(&st->expected[r], q), flag = word(&st->flags[r], q);
  EX_CHECK(ex, ex->api->wait_flag(ex->api->ctx, ex->copy[r], &expected, &flag, "wait_ready"));
  return DMALAB_OK;
}
#endif

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  st->ex.hooks.signal_ready = signal_ready;
  st->ex.hooks.wait_ready = wait_ready;
  const uint64_t bytes = 8u * (uint64_t)st->ex.world;
  dmalab_mem* arrays[3] = {st->flags, st->counters, st->expected};
  for (int i = 0; i < 3; ++i) {
    if (ex_allocate_all(&st->ex, bytes, "flags", arrays[i]) != DMALAB_OK) return DMALAB_ERROR;
    for (int32_t r = 0; r < st->ex.world; ++r) {
      if (ex_zero_words(&st->ex, &arrays[i][r], st->ex.world) != DMALAB_OK) return DMALAB_ERROR;
    }
  }
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->flags);
  ex_free_all(&st->ex, st->counters);
  ex_free_all(&st->ex, st->expected);
  ex_destroy(&st->ex);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  ++st->epoch;
  return ex_all_reduce_into(&st->ex, inputs, outs);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex, api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  ++st->epoch;
  return ex_all_reduce(&st->ex, inputs, results);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("baked_flag")
#else
EX_PLUGIN("baked_flag_fixed")
#endif
