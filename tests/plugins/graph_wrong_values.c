/* A correct eager all-reduce (examples/plugins/common.h) whose captured calls write the same
 * wrong values on every rank, so that no rank-consistency check can tell: with GRAPH_NAN every
 * captured call writes NaN (copied from a buffer filled at create); otherwise it writes W times
 * rank 0's input. For the replay's wrong_sum and non_finite checks
 * on a graph scenario without expect_equal. */
#include "common.h"

typedef struct state {
  ex_state ex;                   /* first */
  dmalab_mem nans[EX_MAX_RANKS]; /* GRAPH_NAN: max_bytes of bf16 NaN per rank */
} state;

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
#if defined(GRAPH_NAN)
  if (ex_allocate_all(&st->ex, config->max_bytes, "nans", st->nans) != DMALAB_OK) {
    return DMALAB_ERROR;
  }
  uint8_t* bytes = (uint8_t*)malloc(config->max_bytes);
  if (bytes == NULL) return ex_fail(&st->ex, "out of host memory");
  for (uint64_t i = 0; i + 1 < config->max_bytes; i += 2) { /* bf16 quiet NaN 0x7fc0 */
    bytes[i] = 0xc0;
    bytes[i + 1] = 0x7f;
  }
  for (int32_t r = 0; r < st->ex.world; ++r) {
    if (api->write(api->ctx, &st->nans[r], bytes, config->max_bytes) != DMALAB_OK) {
      free(bytes);
      return ex_fail(&st->ex, "writing NaN: %s", api->last_error(api->ctx));
    }
  }
  free(bytes);
#endif
  return DMALAB_OK;
}

static void destroy(void* p) {
  state* st = (state*)p;
  ex_free_all(&st->ex, st->nans);
  ex_destroy(&st->ex);
}

/* Under capture: every rank's output gets the same wrong values, ordered like a real call. */
static int32_t captured_wrong(state* st, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  ex_state* ex = &st->ex;
  const dmalab_device_api* api = ex->api;
  EX_CHECK(ex, api->record_event(api->ctx, ex->ready[0], ex->compute[0]));
  for (int32_t r = 0; r < ex->world; ++r) {
    EX_CHECK(ex, api->wait_event(api->ctx, ex->compute[r], ex->ready[0]));
#if defined(GRAPH_NAN)
    const dmalab_mem nan = ex_slice(st->nans[r], 0, outs[r].mem.bytes);
    EX_CHECK(ex, api->copy(api->ctx, ex->compute[r], &outs[r].mem, &nan, "nan"));
#else
    /* Rank 0's input, then W times itself (a kernel reads only its own rank's memory). */
    EX_CHECK(ex, api->copy(api->ctx, ex->compute[r], &outs[r].mem, &inputs[0].mem, "rank 0's"));
    dmalab_mem terms[EX_MAX_RANKS];
    for (int32_t q = 0; q < ex->world; ++q) terms[q] = outs[r].mem;
    EX_CHECK(ex, api->reduce(api->ctx, ex->compute[r], inputs[r].dtype, &outs[r].mem, terms,
                             ex->world, inputs[r].elems, "wrong sum"));
#endif
  }
  /* Rank 0's input is read by every rank: it may change only after they all have. */
  for (int32_t r = 1; r < ex->world; ++r) {
    EX_CHECK(ex, api->record_event(api->ctx, ex->copied[r], ex->compute[r]));
    EX_CHECK(ex, api->wait_event(api->ctx, ex->compute[0], ex->copied[r]));
  }
  (void)inputs;
  return DMALAB_OK;
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  state* st = (state*)p;
  if (ex_check_inputs(&st->ex, inputs) != DMALAB_OK) return DMALAB_ERROR;
  if (st->ex.api->is_capturing(st->ex.api->ctx)) return captured_wrong(st, inputs, outs);
  return ex_all_reduce_into(&st->ex, inputs, outs);
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex,
             st->ex.api->allocate(st->ex.api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return ex_all_reduce(&st->ex, inputs, results);
}

#if defined(GRAPH_NAN)
EX_PLUGIN("graph_nan")
#else
EX_PLUGIN("graph_wrong_sum")
#endif
