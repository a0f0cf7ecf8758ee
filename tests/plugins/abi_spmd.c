/* Tiny ABI v2 (SPMD) plugins, each doing one thing wrong or one thing the loader must accept, for
 * spmd_abi_test.cc. One source, one module per case: the CASE_* macro selects it. Each makes a
 * 4 KiB allocation, exports it and opens every peer's (as a registration would), and in
 * all_reduce_into does its case's thing; the sum itself is never computed (the tests look at the
 * errors and findings, not the values). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dmalab/plugin.h"

#define MAX_RANKS 16

typedef struct state {
  const dmalab_rank_api* api;
  const dmalab_bootstrap* boot;
  int32_t rank, world;
  dmalab_mem mine;
  dmalab_mem peers[MAX_RANKS];
  dmalab_ipc_mem_handle handles[MAX_RANKS]; /* every rank's, as all-gathered */
  char error[512];
} state;

static int32_t fail(state* st, int32_t code, const char* what) {
  snprintf(st->error, sizeof(st->error), "%s: %s", what, st->api->last_error(st->api->ctx));
  return code;
}

static int32_t create(const dmalab_rank_api* api, const dmalab_bootstrap* boot,
                      const dmalab_rank_config* config, void** out) {
  state* st = (state*)calloc(1, sizeof(state));
  dmalab_ipc_mem_handle own;
  dmalab_ipc_mem_handle* all;
  int32_t rc;
  if (st == NULL) return DMALAB_ERROR_INTERNAL;
  *out = st;
  st->api = api;
  st->boot = boot;
  st->rank = config->rank;
  st->world = config->world_size;
  all = st->handles;
#if defined(CASE_OLD_RANK_API)
  /* Built against the first v2 header (tests/plugins/abi_v2_0): this dmalab's table is larger. */
  if (api->struct_size < sizeof(dmalab_rank_api)) {
    snprintf(st->error, sizeof(st->error), "the device table is %u bytes, smaller than %u",
             (unsigned)api->struct_size, (unsigned)sizeof(dmalab_rank_api));
    return DMALAB_ERROR_INTERNAL;
  }
#endif
  if ((rc = api->allocate(api->ctx, 4096, "registered", &st->mine)) != DMALAB_OK) {
    return fail(st, rc, "allocate");
  }
#if defined(CASE_CREATE_FAILS_ON_RANK_1)
  /* Rank 1 gives up before the exchange, leaving the others waiting in the allgather. */
  if (st->rank == 1) {
    snprintf(st->error, sizeof(st->error), "rank 1 refuses to start (test case)");
    return DMALAB_ERROR_INTERNAL;
  }
#endif
  if ((rc = api->ipc_get_mem_handle(api->ctx, &st->mine, &own)) != DMALAB_OK) {
    return fail(st, rc, "ipc_get_mem_handle");
  }
  if ((rc = boot->allgather(boot->ctx, &own, all, sizeof(own))) != DMALAB_OK) {
    return fail(st, rc, "allgather");
  }
  for (int32_t q = 0; q < st->world; ++q) {
    if (q == st->rank) continue;
    if ((rc = api->ipc_open_mem_handle(api->ctx, &all[q], &st->peers[q])) != DMALAB_OK) {
      return fail(st, rc, "ipc_open_mem_handle");
    }
  }
  return DMALAB_OK;
}

static int32_t destroy(void* p) {
  state* st = (state*)p;
  int32_t rc = DMALAB_OK;
#if !defined(CASE_NEVER_CLOSES)
  for (int32_t q = 0; q < st->world && rc == DMALAB_OK; ++q) {
    if (q != st->rank) rc = st->api->ipc_close_mem_handle(st->api->ctx, &st->peers[q]);
  }
  if (rc == DMALAB_OK) rc = st->boot->barrier(st->boot->ctx);
  if (rc == DMALAB_OK) rc = st->api->free(st->api->ctx, &st->mine);
#endif
  free(st);
  return rc;
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* input, const dmalab_tensor* out) {
  state* st = (state*)p;
  const dmalab_rank_api* api = st->api;
  int32_t rc = DMALAB_OK;
  (void)input;
  (void)out;
#if defined(CASE_GARBAGE_HANDLE)
  {
    dmalab_ipc_mem_handle garbage;
    dmalab_mem mapping;
    memset(garbage.bytes, 0xab, sizeof(garbage.bytes));
    if ((rc = api->ipc_open_mem_handle(api->ctx, &garbage, &mapping)) != DMALAB_OK) {
      return fail(st, rc, "ipc_open_mem_handle(garbage)");
    }
  }
#elif defined(CASE_CLOSES_TWICE)
  {
    const int32_t q = (st->rank + 1) % st->world;
    if ((rc = api->ipc_close_mem_handle(api->ctx, &st->peers[q])) != DMALAB_OK) {
      return fail(st, rc, "first close");
    }
    if ((rc = api->ipc_close_mem_handle(api->ctx, &st->peers[q])) != DMALAB_OK) {
      return fail(st, rc, "second close");
    }
  }
#elif defined(CASE_OPEN_AT_UNRESERVED)
  {
    /* The own allocation is no reserved range. */
    dmalab_mem mapping;
    const int32_t q = (st->rank + 1) % st->world;
    if ((rc = api->ipc_open_mem_handle_at(api->ctx, &st->handles[q], &st->mine, &mapping)) !=
        DMALAB_OK) {
      return fail(st, rc, "ipc_open_mem_handle_at(allocation)");
    }
  }
#elif defined(CASE_OPEN_AT_TOO_SMALL)
  {
    /* 1 KiB reserved for a peer's 4 KiB allocation. */
    dmalab_mem range, mapping;
    const int32_t q = (st->rank + 1) % st->world;
    if ((rc = api->reserve_address(api->ctx, 1024, &range)) != DMALAB_OK) {
      return fail(st, rc, "reserve_address");
    }
    rc = api->ipc_open_mem_handle_at(api->ctx, &st->handles[q], &range, &mapping);
    if (rc != DMALAB_OK) {
      fail(st, rc, "ipc_open_mem_handle_at(1 KiB range)");
      api->release_address(api->ctx, &range);
      return rc;
    }
  }
#elif defined(CASE_RELEASES_TWICE)
  {
    dmalab_mem range;
    if ((rc = api->reserve_address(api->ctx, 4096, &range)) != DMALAB_OK) {
      return fail(st, rc, "reserve_address");
    }
    if ((rc = api->release_address(api->ctx, &range)) != DMALAB_OK) {
      return fail(st, rc, "first release");
    }
    if ((rc = api->release_address(api->ctx, &range)) != DMALAB_OK) {
      return fail(st, rc, "second release");
    }
  }
#elif defined(CASE_KEEPS_RESERVATION)
  {
    dmalab_mem range;
    if ((rc = api->reserve_address(api->ctx, 8192, &range)) != DMALAB_OK) {
      return fail(st, rc, "reserve_address");
    }
  }
#elif defined(CASE_USE_AFTER_UNMAP)
  {
    /* Reads a peer's allocation through a reserved range while mapped (fine), then after
     * closing the mapping (the range is unmapped again). */
    dmalab_mem range, mapping;
    dmalab_stream compute;
    const int32_t q = (st->rank + 1) % st->world;
    if ((rc = api->compute_stream(api->ctx, &compute)) != DMALAB_OK) {
      return fail(st, rc, "compute_stream");
    }
    if ((rc = api->reserve_address(api->ctx, 4096, &range)) != DMALAB_OK) {
      return fail(st, rc, "reserve_address");
    }
    if ((rc = api->ipc_open_mem_handle_at(api->ctx, &st->handles[q], &range, &mapping)) !=
        DMALAB_OK) {
      return fail(st, rc, "ipc_open_mem_handle_at");
    }
    if ((rc = api->copy(api->ctx, compute, &st->mine, &range, "while mapped")) != DMALAB_OK) {
      return fail(st, rc, "copy while mapped");
    }
    if ((rc = api->ipc_close_mem_handle(api->ctx, &mapping)) != DMALAB_OK) {
      return fail(st, rc, "close");
    }
    rc = api->copy(api->ctx, compute, &st->mine, &range, "after unmap");
    api->release_address(api->ctx, &range);
    if (rc != DMALAB_OK) return fail(st, rc, "copy after unmap");
  }
#elif defined(CASE_BOOTSTRAP_ON_RANK_0)
  (void)api;
  /* Only rank 0 joins this barrier: the others return and never come. */
  if (st->rank == 0 && (rc = st->boot->barrier(st->boot->ctx)) != DMALAB_OK) {
    return fail(st, rc, "barrier");
  }
#else
  (void)api;
#endif
  return rc;
}

static int32_t all_reduce(void* p, const dmalab_tensor* input, dmalab_mem* result) {
  (void)input;
  (void)result;
  snprintf(((state*)p)->error, sizeof(((state*)p)->error), "the default form is not supported");
  return DMALAB_ERROR_UNSUPPORTED;
}

static const char* last_error(void* p) { return p == NULL ? "no state" : ((state*)p)->error; }

static int32_t graph_captured(void* p) {
  (void)p;
  return DMALAB_OK;
}

static const dmalab_plugin_v2 plugin = {
#if defined(CASE_OLD_TABLE)
    /* Built against an older v2 header that had no graph_captured: a smaller table. */
    offsetof(dmalab_plugin_v2, graph_captured),
#else
    sizeof(dmalab_plugin_v2),
#endif
#if defined(CASE_NEWER_ABI)
    DMALAB_PLUGIN_ABI_VERSION_2 + 1,
#else
    DMALAB_PLUGIN_ABI_VERSION_2,
#endif
    "abi_v2_case",
    create,
    destroy,
    all_reduce,
    all_reduce_into,
    last_error,
    graph_captured};

DMALAB_PLUGIN_EXPORT const dmalab_plugin_v2* dmalab_plugin_entry_v2(uint32_t host_abi_version) {
  (void)host_abi_version;
  return &plugin;
}
