/* shape_overlap.c: the vLLM#25892 class, and (built with EXAMPLE_FIXED) its fix.
 *
 * Each rank's staging buffer also holds the "input ready" flag words its peers set
 * (signal_flag / wait_flag with device counters). Bug: the flags are placed right after the
 * data of the current call's size. When a larger call follows a smaller one, its data covers
 * the smaller call's flag words; when the smaller size comes back, its flags hold data bytes,
 * already "set", and a rank copies a peer's input before the peer produced it: the race checker
 * reports it (and the result may be stale).
 * Fix: a fixed flag region after the largest data (max_bytes), whatever the call's size, zeroed
 * once at create (the bug must zero all of staging: its flags can be anywhere in it).
 */
#include "common.h"

typedef struct state {
  ex_state ex;                       /* first */
  dmalab_mem counters[EX_MAX_RANKS]; /* on rank q: word r counts q's signals to r */
  dmalab_mem expected[EX_MAX_RANKS]; /* on rank r: word q counts r's waits for q */
  uint64_t bytes;                    /* the current call's size */
} state;

/* Peer q's flag word in rank r's staging buffer. */
static dmalab_mem flag_word(const state* st, int32_t r, int32_t q) {
  const uint64_t data = (uint64_t)(st->ex.world - 1);
#ifndef EXAMPLE_FIXED
  const uint64_t flags_at = data * st->bytes; /* BUG: moves with the call's size */
#else
  const uint64_t flags_at = data * st->ex.max_bytes; /* FIX: after the largest data, always */
#endif
  return ex_slice(st->ex.staging[r], flags_at + 8u * (uint64_t)q, 8);
}

static int32_t signal_ready(ex_state* ex, int32_t q, int32_t r) {
  state* st = (state*)ex;
  const dmalab_mem counter = ex_slice(st->counters[q], 8u * (uint64_t)r, 8);
  const dmalab_mem flag = flag_word(st, r, q);
  EX_CHECK(ex, ex->api->signal_flag(ex->api->ctx, ex->compute[q], &counter, &flag, "ready"));
  return DMALAB_OK;
}

static int32_t wait_ready(ex_state* ex, int32_t r, int32_t q) {
  state* st = (state*)ex;
  const dmalab_mem expected = ex_slice(st->expected[r], 8u * (uint64_t)q, 8);
  const dmalab_mem flag = flag_word(st, r, q);
  EX_CHECK(ex, ex->api->wait_flag(ex->api->ctx, ex->copy[r], &expected, &flag, "wait_ready"));
  return DMALAB_OK;
}

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  const uint64_t flag_bytes = 8u * (uint64_t)config->world_size;
  state* st = (state*)ex_create_with(api, config, sizeof(state), flag_bytes);
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  st->ex.hooks.signal_ready = signal_ready;
  st->ex.hooks.wait_ready = wait_ready;
  if (ex_allocate_all(&st->ex, flag_bytes, "counters", st->counters) != DMALAB_OK ||
      ex_allocate_all(&st->ex, flag_bytes, "expected", st->expected) != DMALAB_OK) {
    return DMALAB_ERROR;
  }
#ifndef EXAMPLE_FIXED
  /* Fresh device memory holds garbage: the flags (wherever a call puts them) start at 0. */
  void* zeros = calloc(1, st->ex.staging[0].bytes);
  if (zeros == NULL) return ex_fail(&st->ex, "out of host memory");
  for (int32_t r = 0; r < st->ex.world; ++r) {
    if (api->write(api->ctx, &st->ex.staging[r], zeros, st->ex.staging[r].bytes) != DMALAB_OK) {
      free(zeros);
      return ex_fail(&st->ex, "zeroing staging: %s", api->last_error(api->ctx));
    }
  }
  free(zeros);
#else
  /* The flag region is fixed: its words alone start at 0. */
  for (int32_t r = 0; r < st->ex.world; ++r) {
    const dmalab_mem flags = flag_word(st, r, 0);
    if (ex_zero_words(&st->ex, &flags, st->ex.world) != DMALAB_OK) return DMALAB_ERROR;
  }
#endif
  for (int32_t r = 0; r < st->ex.world; ++r) {
    if (ex_zero_words(&st->ex, &st->counters[r], st->ex.world) != DMALAB_OK ||
        ex_zero_words(&st->ex, &st->expected[r], st->ex.world) != DMALAB_OK) {
      return DMALAB_ERROR;
    }
  }
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->counters);
  ex_free_all(&st->ex, st->expected);
  ex_destroy(&st->ex);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  st->bytes = inputs[0].mem.bytes;
  return ex_all_reduce_into(&st->ex, inputs, outs);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex, api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  st->bytes = inputs[0].mem.bytes;
  return ex_all_reduce(&st->ex, inputs, results);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("shape_overlap")
#else
EX_PLUGIN("shape_overlap_fixed")
#endif
