/* custom_ar.c: an ABI v2 (SPMD) all-reduce shaped like vLLM's custom all-reduce: each rank copies
 * its input into its IPC-registered buffer, the ranks meet at a barrier of flags in their
 * registered signal areas, and every rank reads its peers' buffers through the mappings it
 * opened: one-shot below 512 KiB (every rank reduces all of it), two-shot above (each rank reduces
 * its slice, then gathers the others'). Sums are in rank order, so bit-identical on every rank.
 *
 * Under graph capture it works as vLLM's does (register_graph_buffers): a captured call copies
 * nothing; the captured kernel reads the peers' inputs in place through per-call peer ranges
 * (vLLM's RankData entry), reserved at capture (reserve_address) and still empty; the rank records
 * its input in its list of graph buffers, with the input's IPC handle taken while the caller's
 * reference keeps it alive (the capture may free it later: a result freed inside the capture goes
 * back to the graph's pool, whose block the graph keeps). When the capture ends (graph_captured)
 * every rank all-gathers the handles of its recorded buffers and opens peer q's entry k into the
 * ranges of its own call k (ipc_open_mem_handle_at). Every rank must record the same number, in
 * the same order. An in-place call, or a device without address reservations, takes the eager path
 * (the copy into the registered buffer) inside a capture too.
 *
 * Three builds:
 *  - custom_ar (EXAMPLE_FIXED): as above; registration refuses lists of unequal length.
 *  - custom_ar_raw_peer (no define): the ranks all-gather the raw addresses of their buffers
 *    instead of IPC handles and use a peer's address as if it were their own, as code written for
 *    one process (where every GPU's memory is mapped) does when it moves to one process per GPU.
 *    Each rank's address space is its own: the first use is a foreign_address finding.
 *  - custom_ar_graph_count (EXAMPLE_GRAPH_COUNT, the vLLM#39791 class): rank 0's host code runs a
 *    warm-up of its first captured call that its peers do not (per-rank control flow that
 *    diverges) and records one buffer more than they do. Registration pairs entry k of the local
 *    list with entry k of each peer's list up to the LOCAL count: rank 0's call k reads the peers'
 *    buffers of call k+1 (wrong_sum, rank_inconsistent), and its last entry reads past the peers'
 *    lists, whose handles it cannot open and skips, leaving the range unmapped
 *    (unmapped_address when the graph runs).
 *  - custom_ar_graph_output (EXAMPLE_GRAPH_OUTPUT, the ROCm/aiter#3838 class under graphs): it also
 *    registers the outputs of captured default-form calls with its peers, as aiter does for a
 *    two-shot whose gather writes into the peers' outputs (this example's gather still pulls: the
 *    registration is where the class goes wrong). It records each output by pointer, holding no
 *    reference, and exports it after the capture; when the capture freed that output and the
 *    graph's pool handed its block to a later result, the handle exports the other tensor
 *    (use_after_reuse).
 */
#include "spmd_common.h"

#define CAR_ONE_SHOT_MAX (512u << 10)
/* Captured calls per instance: vLLM's RankData table has a fixed size too. */
#define CAR_GRAPH_MAX 64

/* One recorded graph buffer: the own input of a captured call and the ranges through which the
 * captured kernel reads the peers' inputs of the same call. */
typedef struct car_entry {
  dmalab_mem input;
  dmalab_ipc_mem_handle handle; /* the input's, taken when the call was captured */
  dmalab_mem peer[SP_MAX_RANKS]; /* own entry: input; peers: reserved ranges */
  int32_t mapped[SP_MAX_RANKS];  /* a peer's buffer is open in peer[q] */
} car_entry;

typedef struct car_state {
  sp_state sp;
  int32_t reservable; /* the device table has deferred mappings (graph path) */
  int32_t recorded;   /* entries recorded */
  int32_t registered; /* entries whose peers' buffers were opened */
  car_entry graph[CAR_GRAPH_MAX];
#ifdef EXAMPLE_GRAPH_OUTPUT
  dmalab_mem outputs[CAR_GRAPH_MAX]; /* captured default-form outputs, by pointer */
  int32_t outputs_recorded, outputs_registered;
  dmalab_mem output_peer[CAR_GRAPH_MAX][SP_MAX_RANKS]; /* the peers' outputs, opened */
#endif
} car_state;

static int32_t car_create(const dmalab_rank_api* api, const dmalab_bootstrap* boot,
                          const dmalab_rank_config* config, void** state) {
  car_state* st = (car_state*)calloc(1, sizeof(car_state));
  int32_t rc;
  if (st == NULL) return DMALAB_ERROR_INTERNAL;
  *state = st;
#if defined(EXAMPLE_FIXED) || defined(EXAMPLE_GRAPH_COUNT) || defined(EXAMPLE_GRAPH_OUTPUT)
  rc = sp_init(&st->sp, api, boot, config);
#else
  {
    /* sp_init's allocations, but peers' raw addresses instead of handles. */
    sp_state* sp = &st->sp;
    dmalab_mem all[SP_MAX_RANKS];
    rc = sp_init(sp, api, boot, config);
    if (rc != DMALAB_OK) return rc;
    SP_CHECK(sp, sp_close_peers(sp, sp->peer_buffer));
    SP_CHECK(sp, boot->allgather(boot->ctx, &sp->buffer, all, sizeof(dmalab_mem)));
    for (int32_t q = 0; q < sp->world; ++q) {
      sp->peer_buffer[q] = all[q];
      sp->peer_buffer[q].rank = sp->rank; /* "it is just a pointer" */
    }
  }
#endif
  /* Tables of an older dmalab end before the deferred-mapping fields. */
  st->reservable = DMALAB_HAS_FIELD(api, dmalab_rank_api, release_address) &&
                   api->reserve_address != NULL && api->ipc_open_mem_handle_at != NULL &&
                   api->release_address != NULL;
  return rc;
}

/* Closes the peers' buffers opened for the recorded entries and releases their ranges. */
static int32_t car_release_graph(car_state* st) {
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  for (int32_t k = 0; k < st->recorded; ++k) {
    car_entry* e = &st->graph[k];
    for (int32_t q = 0; q < sp->world; ++q) {
      if (q == sp->rank) continue;
      if (e->mapped[q]) SP_CHECK(sp, api->ipc_close_mem_handle(api->ctx, &e->peer[q]));
      e->mapped[q] = 0;
      SP_CHECK(sp, api->release_address(api->ctx, &e->peer[q]));
    }
  }
  st->recorded = st->registered = 0;
#ifdef EXAMPLE_GRAPH_OUTPUT
  for (int32_t k = 0; k < st->outputs_registered; ++k) {
    for (int32_t q = 0; q < sp->world; ++q) {
      if (q == sp->rank) continue;
      SP_CHECK(sp, api->ipc_close_mem_handle(api->ctx, &st->output_peer[k][q]));
    }
  }
  st->outputs_recorded = st->outputs_registered = 0;
#endif
  return DMALAB_OK;
}

static int32_t car_destroy(void* state) {
  car_state* st = (car_state*)state;
  sp_state* sp = &st->sp;
  int32_t rc = car_release_graph(st);
#if !defined(EXAMPLE_FIXED) && !defined(EXAMPLE_GRAPH_COUNT) && !defined(EXAMPLE_GRAPH_OUTPUT)
  /* The raw addresses are no mappings: nothing to close for them. */
  for (int32_t q = 0; q < sp->world; ++q) sp->peer_buffer[q].bytes = 0;
  sp->peer_buffer[sp->rank] = sp->buffer;
#endif
  if (rc == DMALAB_OK) rc = sp_release(sp);
  free(st);
  return rc;
}

/* Records `input` as the next graph buffer with fresh peer ranges; *index is its entry. Returns
 * DMALAB_ERROR_UNSUPPORTED (nothing recorded) when the device has no address reservations. */
static int32_t car_record(car_state* st, const dmalab_mem* input, int32_t* index) {
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  car_entry* e;
  if (st->recorded == CAR_GRAPH_MAX) {
    return sp_fail(sp, "more than %d all-reduces captured: the graph buffer table is full",
                   CAR_GRAPH_MAX);
  }
  e = &st->graph[st->recorded];
  memset(e, 0, sizeof(*e));
  e->input = *input;
  for (int32_t q = 0; q < sp->world; ++q) {
    int32_t rc;
    if (q == sp->rank) {
      e->peer[q] = *input;
      continue;
    }
    rc = api->reserve_address(api->ctx, sp->max_bytes, &e->peer[q]);
    if (rc == DMALAB_ERROR_UNSUPPORTED && q == (sp->rank == 0 ? 1 : 0)) return rc;
    if (rc != DMALAB_OK) {
      return sp_fail(sp, "reserve_address failed: %s", api->last_error(api->ctx));
    }
  }
  SP_CHECK(sp, api->ipc_get_mem_handle(api->ctx, input, &e->handle));
  *index = st->recorded++;
  return DMALAB_OK;
}

static int32_t car_all_reduce_into(void* state, const dmalab_tensor* input,
                                   const dmalab_tensor* out) {
  car_state* st = (car_state*)state;
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  const uint64_t bytes = input->mem.bytes;
  dmalab_mem staged;
  if (bytes > sp->max_bytes || out->mem.bytes < bytes || input->dtype != sp->dtype) {
    snprintf(sp->error, sizeof(sp->error), "input of %llu bytes (dtype %d): max %llu, dtype %d",
             (unsigned long long)bytes, input->dtype, (unsigned long long)sp->max_bytes, sp->dtype);
    return DMALAB_ERROR_BAD_ARGUMENT;
  }
  if (st->reservable && api->is_capturing(api->ctx) && out->mem.addr != input->mem.addr) {
    int32_t k = 0;
    int32_t rc = car_record(st, &input->mem, &k);
#ifdef EXAMPLE_GRAPH_COUNT
    if (rc == DMALAB_OK && sp->rank == 0 && st->recorded == 1) {
      /* The bug: a warm-up of the first captured call on rank 0 only, recorded as well. */
      rc = car_record(st, &input->mem, &k);
    }
#endif
    if (rc == DMALAB_OK) {
      /* The peers' inputs are ready once they passed the start barrier; read them in place. */
      if (sp_barrier(sp, 0) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
      return sp_all_reduce(sp, st->graph[k].peer, &out->mem, bytes, CAR_ONE_SHOT_MAX);
    }
    if (rc != DMALAB_ERROR_UNSUPPORTED) return rc;
    st->reservable = 0; /* the device cannot defer mappings: the eager path, captured */
  }
  staged = sp_slice(sp->buffer, 0, bytes);
  SP_CHECK(sp, api->copy(api->ctx, sp->compute, &staged, &input->mem, "stage input"));
  if (sp_barrier(sp, 0) != DMALAB_OK) return DMALAB_ERROR_INTERNAL;
  return sp_all_reduce(sp, sp->peer_buffer, &out->mem, bytes, CAR_ONE_SHOT_MAX);
}

static int32_t car_all_reduce(void* state, const dmalab_tensor* input, dmalab_mem* result) {
  car_state* st = (car_state*)state;
  dmalab_tensor out = *input;
  SP_CHECK(&st->sp,
           st->sp.api->allocate(st->sp.api->ctx, input->mem.bytes, "custom_ar result", &out.mem));
  *result = out.mem;
#ifdef EXAMPLE_GRAPH_OUTPUT
  if (st->sp.api->is_capturing(st->sp.api->ctx) && st->outputs_recorded < CAR_GRAPH_MAX) {
    /* The bug: a pointer to a tensor the caller owns, kept with no reference. */
    st->outputs[st->outputs_recorded++] = out.mem;
  }
#endif
  return car_all_reduce_into(state, input, &out);
}

#ifdef EXAMPLE_GRAPH_OUTPUT
/* Exports the outputs recorded since the last registration, all-gathers and opens them. Every
 * rank made the same default-form calls, so the counts agree. */
static int32_t car_register_outputs(car_state* st) {
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  for (int32_t k = st->outputs_registered; k < st->outputs_recorded; ++k) {
    dmalab_ipc_mem_handle own, all[SP_MAX_RANKS];
    SP_CHECK(sp, api->ipc_get_mem_handle(api->ctx, &st->outputs[k], &own));
    SP_CHECK(sp, sp->boot->allgather(sp->boot->ctx, &own, all, sizeof(own)));
    for (int32_t q = 0; q < sp->world; ++q) {
      if (q == sp->rank) continue;
      SP_CHECK(sp, api->ipc_open_mem_handle(api->ctx, &all[q], &st->output_peer[k][q]));
    }
    st->outputs_registered = k + 1;
  }
  return DMALAB_OK;
}
#endif

/* register_graph_buffers: the buffers recorded since the last registration, exported,
 * all-gathered and opened into the ranges of the calls that recorded them. */
static int32_t car_graph_captured(void* state) {
  car_state* st = (car_state*)state;
  sp_state* sp = &st->sp;
  const dmalab_rank_api* api = sp->api;
  const int64_t mine = st->recorded - st->registered;
  int64_t counts[SP_MAX_RANKS];
  dmalab_ipc_mem_handle* send;
  dmalab_ipc_mem_handle* all;
  int32_t rc = DMALAB_OK;
  SP_CHECK(sp, sp->boot->allgather(sp->boot->ctx, &mine, counts, sizeof(mine)));
#ifndef EXAMPLE_GRAPH_COUNT
  for (int32_t q = 0; q < sp->world; ++q) {
    if (counts[q] != mine) {
      return sp_fail(sp,
                     "register_graph_buffers: rank %d recorded %lld graph buffers, rank %d %lld: "
                     "every rank must capture the same all-reduces in the same order",
                     sp->rank, (long long)mine, q, (long long)counts[q]);
    }
  }
#endif
  send = (dmalab_ipc_mem_handle*)calloc(CAR_GRAPH_MAX, sizeof(dmalab_ipc_mem_handle));
  all = (dmalab_ipc_mem_handle*)calloc((size_t)CAR_GRAPH_MAX * (size_t)sp->world,
                                       sizeof(dmalab_ipc_mem_handle));
  if (send == NULL || all == NULL) {
    free(send);
    free(all);
    return sp_fail(sp, "register_graph_buffers: out of host memory");
  }
  for (int64_t k = 0; k < mine; ++k) send[k] = st->graph[st->registered + k].handle;
  if (rc == DMALAB_OK &&
      sp->boot->allgather(sp->boot->ctx, send, all, CAR_GRAPH_MAX * sizeof(*send)) != DMALAB_OK) {
    rc = sp_fail(sp, "allgather of graph buffer handles failed: %s", api->last_error(api->ctx));
  }
  /* Entry k of the local list takes entry k of every peer's list. */
  for (int64_t k = 0; k < mine && rc == DMALAB_OK; ++k) {
    car_entry* e = &st->graph[st->registered + k];
    for (int32_t q = 0; q < sp->world && rc == DMALAB_OK; ++q) {
      dmalab_mem mapping;
      if (q == sp->rank) continue;
      if (api->ipc_open_mem_handle_at(api->ctx, &all[(size_t)q * CAR_GRAPH_MAX + (size_t)k],
                                      &e->peer[q], &mapping) == DMALAB_OK) {
        e->mapped[q] = 1;
      } else {
#ifdef EXAMPLE_GRAPH_COUNT
        /* The bug's tolerance: "that peer has nothing to register here"; the range stays
         * unmapped. */
        continue;
#else
        rc = sp_fail(sp, "ipc_open_mem_handle_at of rank %d's graph buffer %lld failed: %s", q,
                     (long long)k, api->last_error(api->ctx));
#endif
      }
    }
  }
  free(send);
  free(all);
  if (rc == DMALAB_OK) st->registered = st->recorded;
#ifdef EXAMPLE_GRAPH_OUTPUT
  if (rc == DMALAB_OK) rc = car_register_outputs(st);
#endif
  return rc;
}

static const char* car_last_error(void* state) {
  return state == NULL ? "allocation of the state failed" : ((car_state*)state)->sp.error;
}

static const dmalab_plugin_v2 kPlugin = {
    sizeof(dmalab_plugin_v2),
    DMALAB_PLUGIN_ABI_VERSION_2,
#if defined(EXAMPLE_FIXED)
    "custom_ar",
#elif defined(EXAMPLE_GRAPH_COUNT)
    "custom_ar_graph_count",
#elif defined(EXAMPLE_GRAPH_OUTPUT)
    "custom_ar_graph_output",
#else
    "custom_ar_raw_peer",
#endif
    car_create,
    car_destroy,
    car_all_reduce,
    car_all_reduce_into,
    car_last_error,
    car_graph_captured,
};

DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(uint32_t host_abi_version) {
  return host_abi_version >= DMALAB_PLUGIN_ABI_VERSION_2 ? &kPlugin : NULL;
}
