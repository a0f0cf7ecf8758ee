/* spmd_common.h: what the ABI v2 (SPMD) example plugins share, written against <dmalab/plugin.h>
 * only, the way a custom all-reduce (vLLM's, SGLang's, TensorRT-LLM's) is written: one instance
 * per rank, its own buffers, peers reached through IPC handles exchanged over the bootstrap.
 *
 * Each rank owns a registered buffer (2 * max_bytes: the input copy, then the two-shot's reduced
 * slice) and a signal area (3 * W flag words: slot q of phase p is where rank q announces phase
 * p). Both are exported, all-gathered and opened by every peer at create. Barriers are counter
 * flags (signal_flag / wait_flag), so a captured graph replays them correctly.
 */
#ifndef DMALAB_EXAMPLES_PLUGINS_SPMD_COMMON_H_
#define DMALAB_EXAMPLES_PLUGINS_SPMD_COMMON_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmalab/plugin.h"

#define SP_MAX_RANKS 16
#define SP_PHASES 3 /* start, middle (two-shot), end */

typedef struct sp_state {
  const dmalab_rank_api* api;
  const dmalab_bootstrap* boot;
  int32_t rank, world, dtype;
  uint64_t max_bytes;
  dmalab_stream compute;
  dmalab_mem buffer;   /* registered: [0, max) the input copy, [max, 2 max) reduced slices */
  dmalab_mem signal;   /* registered: SP_PHASES * W flag words */
  dmalab_mem counters; /* local: sent counters, then expected counters, SP_PHASES * W each */
  dmalab_mem peer_buffer[SP_MAX_RANKS]; /* peers' mappings; the own entry is `buffer` */
  dmalab_mem peer_signal[SP_MAX_RANKS];
  char error[512];
} sp_state;

/* Records why the call failed (for last_error) and returns DMALAB_ERROR_INTERNAL. */
static inline int32_t sp_fail(sp_state* st, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(st->error, sizeof(st->error), format, args);
  va_end(args);
  return DMALAB_ERROR_INTERNAL;
}

/* Runs a device or bootstrap call; on failure records it with dmalab's message. */
#define SP_CHECK(st, call)                                                                 \
  do {                                                                                     \
    if ((call) != DMALAB_OK) {                                                             \
      return sp_fail((st), "%s failed: %s", #call, (st)->api->last_error((st)->api->ctx)); \
    }                                                                                      \
  } while (0)

static inline dmalab_mem sp_slice(dmalab_mem m, uint64_t offset, uint64_t bytes) {
  m.addr += offset;
  m.bytes = bytes;
  return m;
}

static inline uint64_t sp_dtype_bytes(int32_t dtype) { return dtype == DMALAB_DTYPE_FP32 ? 4 : 2; }

/* Exports `mine`, all-gathers the handles and opens every peer's into peers[] (own: mine). */
static inline int32_t sp_exchange(sp_state* st, dmalab_mem mine, dmalab_mem* peers) {
  const dmalab_rank_api* api = st->api;
  dmalab_ipc_mem_handle own, all[SP_MAX_RANKS];
  SP_CHECK(st, api->ipc_get_mem_handle(api->ctx, &mine, &own));
  SP_CHECK(st, st->boot->allgather(st->boot->ctx, &own, all, sizeof(own)));
  for (int32_t q = 0; q < st->world; ++q) {
    if (q == st->rank) {
      peers[q] = mine;
    } else {
      SP_CHECK(st, api->ipc_open_mem_handle(api->ctx, &all[q], &peers[q]));
    }
  }
  return DMALAB_OK;
}

static inline int32_t sp_close_peers(sp_state* st, dmalab_mem* peers) {
  for (int32_t q = 0; q < st->world; ++q) {
    if (q == st->rank || peers[q].bytes == 0) continue;
    SP_CHECK(st, st->api->ipc_close_mem_handle(st->api->ctx, &peers[q]));
    peers[q].bytes = 0;
  }
  return DMALAB_OK;
}

/* Buffers, signal area and counters of this rank, exchanged with the peers. */
static inline int32_t sp_init(sp_state* st, const dmalab_rank_api* api,
                              const dmalab_bootstrap* boot, const dmalab_rank_config* config) {
  uint64_t zeros[SP_PHASES * SP_MAX_RANKS * 2];
  memset(st, 0, sizeof(*st));
  st->api = api;
  st->boot = boot;
  st->rank = config->rank;
  st->world = config->world_size;
  st->dtype = config->dtype;
  st->max_bytes = (config->max_bytes + 511) / 512 * 512;
  if (st->world < 2 || st->world > SP_MAX_RANKS) {
    snprintf(st->error, sizeof(st->error), "world size %d; this plugin supports 2..%d", st->world,
             SP_MAX_RANKS);
    return DMALAB_ERROR_UNSUPPORTED;
  }
  SP_CHECK(st, api->compute_stream(api->ctx, &st->compute));
  SP_CHECK(st, api->allocate(api->ctx, 2 * st->max_bytes, "registered buffer", &st->buffer));
  SP_CHECK(st, api->allocate(api->ctx, 8u * SP_PHASES * (uint64_t)st->world, "signal area",
                             &st->signal));
  SP_CHECK(st, api->allocate(api->ctx, 16u * SP_PHASES * (uint64_t)st->world, "counters",
                             &st->counters));
  memset(zeros, 0, sizeof(zeros));
  SP_CHECK(st, api->write(api->ctx, &st->signal, zeros, st->signal.bytes));
  SP_CHECK(st, api->write(api->ctx, &st->counters, zeros, st->counters.bytes));
  if (sp_exchange(st, st->buffer, st->peer_buffer) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  return sp_exchange(st, st->signal, st->peer_signal);
}

static inline int32_t sp_release(sp_state* st) {
  const dmalab_rank_api* api = st->api;
  if (sp_close_peers(st, st->peer_buffer) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  if (sp_close_peers(st, st->peer_signal) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  /* Every peer closed its mappings before an owner frees. */
  SP_CHECK(st, st->boot->barrier(st->boot->ctx));
  SP_CHECK(st, api->free(api->ctx, &st->buffer));
  SP_CHECK(st, api->free(api->ctx, &st->signal));
  SP_CHECK(st, api->free(api->ctx, &st->counters));
  return DMALAB_OK;
}

/* A device barrier of phase `phase` on the compute stream: tell every peer, wait for every
 * peer. Release and acquire order the data before and after it. */
static inline int32_t sp_barrier(sp_state* st, int32_t phase) {
  const dmalab_rank_api* api = st->api;
  const uint64_t w = (uint64_t)st->world;
  for (int32_t q = 0; q < st->world; ++q) {
    if (q == st->rank) continue;
    dmalab_mem sent = sp_slice(st->counters, 8u * (phase * w + (uint64_t)q), 8);
    dmalab_mem slot = sp_slice(st->peer_signal[q], 8u * (phase * w + (uint64_t)st->rank), 8);
    SP_CHECK(st, api->signal_flag(api->ctx, st->compute, &sent, &slot, "barrier signal"));
  }
  for (int32_t q = 0; q < st->world; ++q) {
    if (q == st->rank) continue;
    dmalab_mem expected = sp_slice(st->counters, 8u * (SP_PHASES * w + phase * w + (uint64_t)q), 8);
    dmalab_mem slot = sp_slice(st->signal, 8u * (phase * w + (uint64_t)q), 8);
    SP_CHECK(st, api->wait_flag(api->ctx, st->compute, &expected, &slot, "barrier wait"));
  }
  return DMALAB_OK;
}

/* out = sum over ranks q (in rank order) of src[q][offset, offset + bytes). */
static inline int32_t sp_reduce(sp_state* st, const dmalab_mem* out, const dmalab_mem* src,
                                uint64_t offset, uint64_t bytes, const char* label) {
  dmalab_mem terms[SP_MAX_RANKS];
  for (int32_t q = 0; q < st->world; ++q) terms[q] = sp_slice(src[q], offset, bytes);
  SP_CHECK(st, st->api->reduce(st->api->ctx, st->compute, st->dtype, out, terms, st->world,
                               (int64_t)(bytes / sp_dtype_bytes(st->dtype)), label));
  return DMALAB_OK;
}

/* The all-reduce of `bytes` bytes whose every rank's data lies in src[q] (own and peers'
 * mappings) from offset 0, into out: one-shot below `one_shot_max` bytes (every rank reduces
 * everything), two-shot above (rank r reduces slice r into its buffer's second half, then every
 * rank gathers the slices). The caller orders src's data before (a start barrier); an end barrier
 * follows, so no rank overwrites its buffer while a peer still reads it. */
static inline int32_t sp_all_reduce(sp_state* st, const dmalab_mem* src, const dmalab_mem* out,
                                    uint64_t bytes, uint64_t one_shot_max) {
  const uint64_t unit = sp_dtype_bytes(st->dtype);
  if (bytes <= one_shot_max) {
    if (sp_reduce(st, out, src, 0, bytes, "one-shot reduce") != DMALAB_OK) {
      return DMALAB_ERROR_INTERNAL;
    }
  } else {
    const uint64_t elems = bytes / unit, per = elems / (uint64_t)st->world;
    for (int32_t q = 0; q < st->world; ++q) {
      if (q != st->rank) continue;
      const uint64_t lo = per * (uint64_t)q * unit;
      const uint64_t n = (q == st->world - 1 ? elems - per * (uint64_t)q : per) * unit;
      dmalab_mem mine = sp_slice(st->buffer, st->max_bytes + lo, n);
      if (sp_reduce(st, &mine, src, lo, n, "two-shot reduce") != DMALAB_OK) {
        return DMALAB_ERROR_INTERNAL;
      }
    }
    if (sp_barrier(st, 1) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
    for (int32_t q = 0; q < st->world; ++q) {
      const uint64_t lo = per * (uint64_t)q * unit;
      const uint64_t n = (q == st->world - 1 ? elems - per * (uint64_t)q : per) * unit;
      dmalab_mem from = sp_slice(st->peer_buffer[q], st->max_bytes + lo, n);
      dmalab_mem to = sp_slice(*out, lo, n);
      SP_CHECK(st, st->api->copy(st->api->ctx, st->compute, &to, &from, "two-shot gather"));
    }
  }
  return sp_barrier(st, 2);
}

#endif /* DMALAB_EXAMPLES_PLUGINS_SPMD_COMMON_H_ */
