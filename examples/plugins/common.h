/* common.h: the part every example plugin shares, written against <dmalab/plugin.h> only.
 *
 * A one-shot "gather then reduce" all-reduce over the device API. For every rank r:
 *   1. each rank q records `ready[q]` on its compute stream: its input is ready there;
 *   2. r's copy stream waits until every peer's input is ready (events by default; a plugin may
 *      signal with flags instead, see ex_hooks), copies each peer's input into r's staging
 *      buffer and records `copied[r]`;
 *   3. r's compute stream waits `copied[q]` of every rank q (so no rank overwrites its input
 *      while a peer still copies it, and r's own copies are done), then reduces the W terms in
 *      rank order 0..W-1 into the destination.
 * Sums are therefore bit-identical on every rank. Staging is (W-1) * max_bytes per rank,
 * allocated once at create; a call's copies wait for the rank's previous reduce (step 1 orders
 * them after it), so reusing staging is safe.
 */
#ifndef DMALAB_EXAMPLES_PLUGINS_COMMON_H_
#define DMALAB_EXAMPLES_PLUGINS_COMMON_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmalab/plugin.h"

#define EX_MAX_RANKS 16

typedef struct ex_state ex_state;

/* How rank r's copy stream learns that peer q's input is ready. NULL functions: events. */
typedef struct ex_hooks {
  /* Enqueued on q's compute stream once its input is ready, once per peer r != q. */
  int32_t (*signal_ready)(ex_state* st, int32_t q, int32_t r);
  /* Enqueued on r's copy stream before it copies q's input. */
  int32_t (*wait_ready)(ex_state* st, int32_t r, int32_t q);
} ex_hooks;

struct ex_state {
  const dmalab_device_api* api;
  int32_t world;
  uint64_t max_bytes;
  int32_t compute[EX_MAX_RANKS];
  int32_t copy[EX_MAX_RANKS];
  int32_t ready[EX_MAX_RANKS];  /* events */
  int32_t copied[EX_MAX_RANKS]; /* events */
  dmalab_mem staging[EX_MAX_RANKS];
  ex_hooks hooks;
  char error[512];
};

/* Records why the call failed (for last_error) and returns DMALAB_ERROR. */
static inline int32_t ex_fail(ex_state* st, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(st->error, sizeof(st->error), format, args);
  va_end(args);
  return DMALAB_ERROR;
}

/* Runs a device call; on failure records the call and the device's message. */
#define EX_CHECK(st, call)                                                                 \
  do {                                                                                     \
    if ((call) != DMALAB_OK) {                                                             \
      return ex_fail((st), "%s failed: %s", #call, (st)->api->last_error((st)->api->ctx)); \
    }                                                                                      \
  } while (0)

/* A slice of `m`: `bytes` bytes from `offset`, keeping its allocation id. */
static inline dmalab_mem ex_slice(dmalab_mem m, uint64_t offset, uint64_t bytes) {
  m.addr += offset;
  m.bytes = bytes;
  return m;
}

/* Allocates `bytes` on every rank into out[0..W-1]. */
static inline int32_t ex_allocate_all(ex_state* st, uint64_t bytes, const char* tag,
                                      dmalab_mem* out) {
  for (int32_t r = 0; r < st->world; ++r) {
    EX_CHECK(st, st->api->allocate(st->api->ctx, r, bytes, tag, &out[r]));
  }
  return DMALAB_OK;
}

/* Writes `words` zero words at the start of m (flag words start at 0). */
static inline int32_t ex_zero_words(ex_state* st, const dmalab_mem* m, int32_t words) {
  uint64_t zeros[EX_MAX_RANKS + 1];
  memset(zeros, 0, sizeof(zeros));
  if (words > EX_MAX_RANKS + 1) return ex_fail(st, "ex_zero_words: %d words", words);
  dmalab_mem w = ex_slice(*m, 0, 8u * (uint64_t)words);
  EX_CHECK(st, st->api->write(st->api->ctx, &w, zeros, w.bytes));
  return DMALAB_OK;
}

/* Streams, events and staging for `config`; staging_extra bytes follow the (W-1) slots. */
static inline int32_t ex_init(ex_state* st, const dmalab_device_api* api,
                              const dmalab_collective_config* config, uint64_t staging_extra) {
  memset(st, 0, sizeof(*st));
  st->api = api;
  st->world = config->world_size;
  st->max_bytes = config->max_bytes;
  if (st->world < 2 || st->world > EX_MAX_RANKS) {
    return ex_fail(st, "world size %d; this plugin supports 2..%d", st->world, EX_MAX_RANKS);
  }
  for (int32_t r = 0; r < st->world; ++r) {
    EX_CHECK(st, api->compute_stream(api->ctx, r, &st->compute[r]));
    EX_CHECK(st, api->create_stream(api->ctx, r, DMALAB_STREAM_COPY, "gather", &st->copy[r]));
    EX_CHECK(st, api->create_event(api->ctx, r, &st->ready[r]));
    EX_CHECK(st, api->create_event(api->ctx, r, &st->copied[r]));
  }
  return ex_allocate_all(st, (uint64_t)(st->world - 1) * st->max_bytes + staging_extra, "staging",
                         st->staging);
}

static inline void ex_free_all(ex_state* st, dmalab_mem* mems) {
  for (int32_t r = 0; r < st->world; ++r) {
    if (mems[r].bytes > 0) st->api->free(st->api->ctx, &mems[r]);
  }
}

/* Checks what every call needs: W dense tensors of one size and dtype within max_bytes. */
static inline int32_t ex_check_inputs(ex_state* st, const dmalab_tensor* inputs) {
  for (int32_t r = 0; r < st->world; ++r) {
    if (inputs[r].mem.bytes != inputs[0].mem.bytes || inputs[r].dtype != inputs[0].dtype) {
      return ex_fail(st, "inputs differ in size or dtype (rank 0: %llu bytes, rank %d: %llu)",
                     (unsigned long long)inputs[0].mem.bytes, r,
                     (unsigned long long)inputs[r].mem.bytes);
    }
  }
  if (inputs[0].mem.bytes > st->max_bytes) {
    return ex_fail(st, "input of %llu bytes; created for at most %llu",
                   (unsigned long long)inputs[0].mem.bytes, (unsigned long long)st->max_bytes);
  }
  return DMALAB_OK;
}

/* The staging slot of peer q on rank r (q != r). */
static inline dmalab_mem ex_slot(const ex_state* st, int32_t r, int32_t q, uint64_t bytes) {
  const uint64_t slot = (uint64_t)(q < r ? q : q - 1);
  return ex_slice(st->staging[r], slot * bytes, bytes);
}

/* Step 1 and 2: every rank's copy stream gathers its peers' inputs into staging. */
static inline int32_t ex_gather(ex_state* st, const dmalab_tensor* inputs) {
  const dmalab_device_api* api = st->api;
  const uint64_t bytes = inputs[0].mem.bytes;
  for (int32_t q = 0; q < st->world; ++q) {
    EX_CHECK(st, api->record_event(api->ctx, st->ready[q], st->compute[q]));
    if (st->hooks.signal_ready == NULL) continue;
    for (int32_t r = 0; r < st->world; ++r) {
      if (r != q && st->hooks.signal_ready(st, q, r) != DMALAB_OK) return DMALAB_ERROR;
    }
  }
  for (int32_t r = 0; r < st->world; ++r) {
    /* After r's previous reduce, which read staging. */
    EX_CHECK(st, api->wait_event(api->ctx, st->copy[r], st->ready[r]));
    for (int32_t q = 0; q < st->world; ++q) {
      if (q == r) continue;
      if (st->hooks.wait_ready != NULL) {
        if (st->hooks.wait_ready(st, r, q) != DMALAB_OK) return DMALAB_ERROR;
      } else {
        EX_CHECK(st, api->wait_event(api->ctx, st->copy[r], st->ready[q]));
      }
      const dmalab_mem slot = ex_slot(st, r, q, bytes);
      EX_CHECK(st, api->copy(api->ctx, st->copy[r], &slot, &inputs[q].mem, "gather"));
    }
    EX_CHECK(st, api->record_event(api->ctx, st->copied[r], st->copy[r]));
  }
  return DMALAB_OK;
}

/* Step 3 on rank r: dst = inputs[0] + ... + inputs[W-1], in rank order, on r's compute stream.
 * Call after ex_gather, for every rank. */
static inline int32_t ex_reduce(ex_state* st, const dmalab_tensor* inputs, int32_t r,
                                const dmalab_mem* dst) {
  const dmalab_device_api* api = st->api;
  dmalab_mem terms[EX_MAX_RANKS];
  for (int32_t q = 0; q < st->world; ++q) {
    EX_CHECK(st, api->wait_event(api->ctx, st->compute[r], st->copied[q]));
    terms[q] = q == r ? inputs[r].mem : ex_slot(st, r, q, inputs[0].mem.bytes);
  }
  EX_CHECK(st, api->reduce(api->ctx, st->compute[r], inputs[r].dtype, dst, terms, st->world,
                           inputs[r].elems, "sum"));
  return DMALAB_OK;
}

/* The whole all-reduce into dsts[0..W-1] (each inputs[r]'s size). */
static inline int32_t ex_all_reduce(ex_state* st, const dmalab_tensor* inputs,
                                    const dmalab_mem* dsts) {
  if (ex_check_inputs(st, inputs) != DMALAB_OK) return DMALAB_ERROR;
  if (ex_gather(st, inputs) != DMALAB_OK) return DMALAB_ERROR;
  for (int32_t r = 0; r < st->world; ++r) {
    if (ex_reduce(st, inputs, r, &dsts[r]) != DMALAB_OK) return DMALAB_ERROR;
  }
  return DMALAB_OK;
}

/* Explicit form through ex_all_reduce. */
static inline int32_t ex_all_reduce_into(ex_state* st, const dmalab_tensor* inputs,
                                         const dmalab_tensor* outs) {
  dmalab_mem dsts[EX_MAX_RANKS];
  for (int32_t r = 0; r < st->world; ++r) dsts[r] = outs[r].mem;
  return ex_all_reduce(st, inputs, dsts);
}

/* The plugin table; every example defines create, destroy, all_reduce, all_reduce_into. */
#define EX_PLUGIN(NAME)                                                             \
  static const char* ex_last_error(void* state) {                                   \
    return state == NULL ? ex_create_error : ((ex_state*)state)->error;             \
  }                                                                                 \
  static const dmalab_plugin ex_plugin = {sizeof(dmalab_plugin),                    \
                                          DMALAB_PLUGIN_ABI_VERSION,                \
                                          NAME,                                     \
                                          create,                                   \
                                          destroy,                                  \
                                          all_reduce,                               \
                                          all_reduce_into,                          \
                                          ex_last_error};                           \
  DMALAB_PLUGIN_EXPORT const dmalab_plugin* dmalab_plugin_entry(uint32_t version) { \
    return version == DMALAB_PLUGIN_ABI_VERSION ? &ex_plugin : NULL;                \
  }

/* create's failures, when it has no state to hold them. */
static char ex_create_error[512];

/* Allocates a state of `size` bytes (an ex_state first) and initializes it (ex_init); on
 * failure returns NULL with the reason in ex_create_error. */
static inline void* ex_create_with(const dmalab_device_api* api,
                                   const dmalab_collective_config* config, size_t size,
                                   uint64_t staging_extra) {
  ex_state* st = (ex_state*)calloc(1, size);
  if (st == NULL) {
    snprintf(ex_create_error, sizeof(ex_create_error), "out of host memory");
    return NULL;
  }
  if (ex_init(st, api, config, staging_extra) != DMALAB_OK) {
    snprintf(ex_create_error, sizeof(ex_create_error), "%s", st->error);
    ex_free_all(st, st->staging);
    free(st);
    return NULL;
  }
  return st;
}

static inline void* ex_create(const dmalab_device_api* api, const dmalab_collective_config* config,
                              size_t size) {
  return ex_create_with(api, config, size, 0);
}

static inline void ex_destroy(ex_state* st) {
  ex_free_all(st, st->staging);
  free(st);
}

#endif /* DMALAB_EXAMPLES_PLUGINS_COMMON_H_ */
