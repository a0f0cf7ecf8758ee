/* Collectives that break their process, one way per module (CASE_*), for the command line's
 * isolation of plugins (runner/isolated_run.h, issue 25 item 3). Each is a correct all-reduce
 * (examples/plugins/common.h) until its second call, or its destroy, where it:
 *   segv_second_call    raises SIGSEGV, as a wild pointer would (raised, not dereferenced, so
 *                       that UBSan's null check cannot turn it into an exit)
 *   abort_in_destroy    calls abort() in destroy, after every step ran (SIGABRT)
 *   exit0_second_call   calls exit(0)
 *   spin_second_call    spins on the host forever
 *   scribble_second_call writes junk to every descriptor 3..255, then crashes
 *   fork_at_create      forks a child that sleeps for an hour (its pid written to the file
 *                       $DMALAB_TEST_CHILD_PID), and is otherwise correct
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

typedef struct state {
  ex_state ex; /* first */
  int calls;
} state;

static void misbehave(state* st) {
  if (++st->calls != 2) return;
#if defined(CASE_SEGV_SECOND_CALL)
  raise(SIGSEGV);
#elif defined(CASE_EXIT0_SECOND_CALL)
  exit(0);
#elif defined(CASE_SPIN_SECOND_CALL)
  for (volatile unsigned long i = 0;; ++i) {
  }
#elif defined(CASE_SCRIBBLE_SECOND_CALL)
  static const char junk[] = "\xff\xff\xff\x7fjunk from a collective";
  for (int fd = 3; fd < 256; ++fd) (void)!write(fd, junk, sizeof(junk));
  raise(SIGSEGV);
#endif
}

static int32_t create(const dmalab_device_api* api, const dmalab_collective_config* config,
                      void** out) {
  state* st = (state*)ex_create(api, config, sizeof(state));
  if (st == NULL) return DMALAB_ERROR;
  *out = st;
#if defined(CASE_FORK_AT_CREATE)
  const pid_t child = fork();
  if (child == 0) {
    sleep(3600);
    _exit(0);
  }
  const char* path = getenv("DMALAB_TEST_CHILD_PID");
  if (path != NULL) {
    FILE* f = fopen(path, "w");
    if (f != NULL) {
      fprintf(f, "%d\n", (int)child);
      fclose(f);
    }
  }
#endif
  return DMALAB_OK;
}

static void destroy(void* p) {
#if defined(CASE_ABORT_IN_DESTROY)
  (void)p;
  abort();
#else
  ex_destroy(&((state*)p)->ex);
#endif
}

static int32_t all_reduce(void* p, const dmalab_tensor* inputs, dmalab_mem* results) {
  state* st = (state*)p;
  misbehave(st);
  for (int32_t r = 0; r < st->ex.world; ++r) {
    EX_CHECK(&st->ex,
             st->ex.api->allocate(st->ex.api->ctx, r, inputs[r].mem.bytes, "result", &results[r]));
  }
  return ex_all_reduce(&st->ex, inputs, results);
}

static int32_t all_reduce_into(void* p, const dmalab_tensor* inputs, const dmalab_tensor* outs) {
  misbehave((state*)p);
  return ex_all_reduce_into(&((state*)p)->ex, inputs, outs);
}

EX_PLUGIN("hostile")
