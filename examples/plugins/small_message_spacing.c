/* small_message_spacing.c: the flashinfer-ai/flashinfer#3903 class, and (built with
 * EXAMPLE_FIXED) its fix.
 *
 * Messages of at most SMALL_MAX bytes (16 tokens of a hidden size of 8192 in bf16: the
 * low-latency decode path) take a one-shot path: every rank gathers its peers' inputs into a
 * receive buffer with one slot per possible rank, then reduces them. Larger messages take the
 * gather-then-reduce of common.h, whose staging holds W - 1 slots of max_bytes.
 * Bug: the copies place peer q's data at q * (buffer / EX_MAX_RANKS), the slot spacing the buffer
 * was laid out with, while the reduce reads it at q * (buffer / world): one spacing written,
 * another read. They agree only at world size 16, so a test suite that runs this path at 16 ranks,
 * or only above SMALL_MAX, passes; at any other world size every small all-reduce sums the wrong
 * slots (peer 0's data and never-written zeros): wrong values that differ between ranks. Fix: the
 * reduce reads with the spacing the copies wrote.
 */
#include "common.h"

#define SMALL_MAX (256u * 1024u)

typedef struct state {
  ex_state ex;                    /* first */
  dmalab_mem inbox[EX_MAX_RANKS]; /* EX_MAX_RANKS slots of SMALL_MAX per rank */
} state;

/* Where the copy of peer q's input lands in a rank's inbox. */
static uint64_t write_offset(int32_t q) { return (uint64_t)q * SMALL_MAX; }

/* Where the reduce reads peer q's input in a rank's inbox. */
static uint64_t read_offset(const state* st, int32_t q) {
#ifndef EXAMPLE_FIXED
  const uint64_t spacing = st->inbox[0].bytes / (uint64_t)st->ex.world; /* BUG: per world size */
#else
  const uint64_t spacing = st->inbox[0].bytes / EX_MAX_RANKS; /* FIX: the spacing written */
  (void)st;
#endif
  return (uint64_t)q * spacing;
}

/* The one-shot path into dsts[0..W-1]: the events and streams of common.h, other slots. */
static int32_t small_all_reduce(state* st, const dmalab_tensor* inputs, const dmalab_mem* dsts) {
  ex_state* ex = &st->ex;
  const dmalab_device_api* api = ex->api;
  const uint64_t bytes = inputs[0].mem.bytes;
  for (int32_t q = 0; q < ex->world; ++q) {
    EX_CHECK(ex, api->record_event(api->ctx, ex->ready[q], ex->compute[q]));
  }
  for (int32_t r = 0; r < ex->world; ++r) {
    /* After r's previous reduce, which read the inbox. */
    EX_CHECK(ex, api->wait_event(api->ctx, ex->copy[r], ex->ready[r]));
    for (int32_t q = 0; q < ex->world; ++q) {
      if (q == r) continue;
      EX_CHECK(ex, api->wait_event(api->ctx, ex->copy[r], ex->ready[q]));
      const dmalab_mem slot = ex_slice(st->inbox[r], write_offset(q), bytes);
      EX_CHECK(ex, api->copy(api->ctx, ex->copy[r], &slot, &inputs[q].mem, "small.gather"));
    }
    EX_CHECK(ex, api->record_event(api->ctx, ex->copied[r], ex->copy[r]));
  }
  for (int32_t r = 0; r < ex->world; ++r) {
    dmalab_mem terms[EX_MAX_RANKS];
    for (int32_t q = 0; q < ex->world; ++q) {
      EX_CHECK(ex, api->wait_event(api->ctx, ex->compute[r], ex->copied[q]));
      terms[q] = q == r ? inputs[r].mem : ex_slice(st->inbox[r], read_offset(st, q), bytes);
    }
    EX_CHECK(ex, api->reduce(api->ctx, ex->compute[r], inputs[r].dtype, &dsts[r], terms, ex->world,
                             inputs[r].elems, "small.sum"));
  }
  return DMALAB_OK;
}

static int32_t sum_into(state* st, const dmalab_tensor* inputs, const dmalab_mem* dsts) {
  if (ex_check_inputs(&st->ex, inputs) != DMALAB_OK) return DMALAB_ERROR;
  if (inputs[0].mem.bytes <= SMALL_MAX) return small_all_reduce(st, inputs, dsts);
  return ex_all_reduce(&st->ex, inputs, dsts);
}

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
  if (ex_allocate_all(&st->ex, (uint64_t)EX_MAX_RANKS * SMALL_MAX, "inbox", st->inbox) !=
      DMALAB_OK) {
    return DMALAB_ERROR;
  }
  /* Fresh device memory holds garbage: the inbox starts at zero. */
  void* zeros = calloc(1, st->inbox[0].bytes);
  if (zeros == NULL) return ex_fail(&st->ex, "out of host memory");
  for (int32_t r = 0; r < st->ex.world; ++r) {
    if (api->write(api->ctx, &st->inbox[r], zeros, st->inbox[r].bytes) != DMALAB_OK) {
      free(zeros);
      return ex_fail(&st->ex, "zeroing the inbox: %s", api->last_error(api->ctx));
    }
  }
  free(zeros);
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->inbox);
  ex_destroy(&st->ex);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  dmalab_mem dsts[EX_MAX_RANKS];
  for (int32_t r = 0; r < ((state*)p)->ex.world; ++r) dsts[r] = outs[r].mem;
  return sum_into((state*)p, inputs, dsts);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  const dmalab_device_api* api = st->ex.api;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex, api->allocate(api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return sum_into(st, inputs, results);
}

#ifndef EXAMPLE_FIXED
EX_PLUGIN("small_message_spacing")
#else
EX_PLUGIN("small_message_spacing_fixed")
#endif
