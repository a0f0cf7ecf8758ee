/* ready_unordered.c: a data-ready signal not ordered after the copy it announces, and (built
 * with EXAMPLE_FIXED) its fix.
 *
 * A one-shot push all-reduce: every rank q copies its input into each peer r's staging slot on
 * its copy stream, then tells r "your slot holds my data" with a device counter flag
 * (signal_flag / wait_flag) from its flag stream; r's compute stream waits for every peer's flag
 * and sums its input and the W - 1 slots in rank order.
 * The flag stream waits for an event on the copy stream before it signals.
 * Bug: that event is recorded just before the copy instead of after it, so the signal is ordered
 * after everything the copy waits for (q's input ready, r's previous sum done) but not after the
 * copy, and can overtake the data. GPUs happen to finish the small copy first, so it passes on
 * hardware unless the schedule is perturbed (dmalab replay --backend=hw --perturb=SEED delays the
 * copy stream); the simulator's race checker sees the missing order on every run.
 * Fix: the event is recorded after the copy.
 */
#include "common.h"

typedef struct state {
  ex_state ex;                       /* first; ex.staging holds the W - 1 slots of each rank */
  int32_t flag_stream[EX_MAX_RANKS]; /* per rank: where its signals are enqueued */
  int32_t pushed[EX_MAX_RANKS];      /* events: rank q's copies are done */
  dmalab_mem counters[EX_MAX_RANKS]; /* on rank q: word r counts q's signals to r */
  dmalab_mem expected[EX_MAX_RANKS]; /* on rank r: word q counts r's waits for q */
  dmalab_mem flags[EX_MAX_RANKS];    /* on rank r: word q is set by q */
} state;

static dmalab_mem word(dmalab_mem m, int32_t i) { return ex_slice(m, 8u * (uint64_t)i, 8); }

/* dsts[r] = inputs[0] + ... + inputs[W-1] on every rank r. */
static int32_t push_all_reduce(state* st, const dmalab_tensor* inputs, const dmalab_mem* dsts) {
  ex_state* ex = &st->ex;
  const dmalab_device_api* api = ex->api;
  const uint64_t bytes = inputs[0].mem.bytes;
  if (ex_check_inputs(ex, inputs) != DMALAB_OK) return DMALAB_ERROR;
  /* ready[r]: r's input is ready and r's previous sum (which read its staging) is done. */
  for (int32_t r = 0; r < ex->world; ++r) {
    EX_CHECK(ex, api->record_event(api->ctx, ex->ready[r], ex->compute[r]));
  }
  for (int32_t q = 0; q < ex->world; ++q) {
    for (int32_t r = 0; r < ex->world; ++r) {
      if (r == q) continue;
      const dmalab_mem slot = ex_slot(ex, r, q, bytes);
      EX_CHECK(ex, api->wait_event(api->ctx, ex->copy[q], ex->ready[q]));
      EX_CHECK(ex, api->wait_event(api->ctx, ex->copy[q], ex->ready[r]));
#ifndef EXAMPLE_FIXED
      /* BUG: recorded before the copy it is meant to follow. */
      EX_CHECK(ex, api->record_event(api->ctx, ex->copied[q], ex->copy[q]));
      EX_CHECK(ex, api->copy(api->ctx, ex->copy[q], &slot, &inputs[q].mem, "push"));
#else
      /* FIX: after the copy, so the signal announces landed data. */
      EX_CHECK(ex, api->copy(api->ctx, ex->copy[q], &slot, &inputs[q].mem, "push"));
      EX_CHECK(ex, api->record_event(api->ctx, ex->copied[q], ex->copy[q]));
#endif
      EX_CHECK(ex, api->wait_event(api->ctx, st->flag_stream[q], ex->copied[q]));
      const dmalab_mem counter = word(st->counters[q], r), flag = word(st->flags[r], q);
      EX_CHECK(ex, api->signal_flag(api->ctx, st->flag_stream[q], &counter, &flag, "ready"));
    }
    /* q's input may change once its copies are done. */
    EX_CHECK(ex, api->record_event(api->ctx, st->pushed[q], ex->copy[q]));
  }
  for (int32_t r = 0; r < ex->world; ++r) {
    dmalab_mem terms[EX_MAX_RANKS];
    for (int32_t q = 0; q < ex->world; ++q) {
      terms[q] = inputs[r].mem;
      if (q == r) continue;
      const dmalab_mem expected = word(st->expected[r], q), flag = word(st->flags[r], q);
      EX_CHECK(ex, api->wait_flag(api->ctx, ex->compute[r], &expected, &flag, "wait_ready"));
      terms[q] = ex_slot(ex, r, q, bytes);
    }
    /* In place, the sum overwrites r's input: after r's own copies of it. */
    EX_CHECK(ex, api->wait_event(api->ctx, ex->compute[r], st->pushed[r]));
    EX_CHECK(ex, api->reduce(api->ctx, ex->compute[r], inputs[r].dtype, &dsts[r], terms, ex->world,
                             inputs[r].elems, "sum"));
  }
  return DMALAB_OK;
}

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  ex_state* ex = &st->ex;
  const uint64_t words = 8u * (uint64_t)ex->world;
  for (int32_t r = 0; r < ex->world; ++r) {
    EX_CHECK(ex, api->create_stream(api->ctx, r, DMALAB_STREAM_FLAG, "ready", &st->flag_stream[r]));
    EX_CHECK(ex, api->create_event(api->ctx, r, &st->pushed[r]));
  }
  if (ex_allocate_all(ex, words, "counters", st->counters) != DMALAB_OK ||
      ex_allocate_all(ex, words, "expected", st->expected) != DMALAB_OK ||
      ex_allocate_all(ex, words, "flags", st->flags) != DMALAB_OK) {
    return DMALAB_ERROR;
  }
  for (int32_t r = 0; r < ex->world; ++r) {
    if (ex_zero_words(ex, &st->counters[r], ex->world) != DMALAB_OK ||
        ex_zero_words(ex, &st->expected[r], ex->world) != DMALAB_OK ||
        ex_zero_words(ex, &st->flags[r], ex->world) != DMALAB_OK) {
      return DMALAB_ERROR;
    }
  }
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->counters);
  ex_free_all(&st->ex, st->expected);
  ex_free_all(&st->ex, st->flags);
  ex_destroy(&st->ex);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  dmalab_mem dsts[EX_MAX_RANKS];
  for (int32_t r = 0; r < ((state*)p)->ex.world; ++r) dsts[r] = outs[r].mem;
  return push_all_reduce((state*)p, inputs, dsts);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex, api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return push_all_reduce(st, inputs, results);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("ready_unordered")
#else
EX_PLUGIN("ready_unordered_fixed")
#endif
