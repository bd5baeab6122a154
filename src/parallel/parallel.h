/* parallel.h - private header of src/parallel: the persistent thread pool that every
 * parallel kernel takes its share of work from (ith of nth).
 *
 * The pool is an object (no global state): a compiled function owns one, or borrows one
 * given in its compile options. tg_pool_new / tg_pool_free / tg_pool_size are public
 * (tgraph.h); running a task is internal.
 *
 * Invariants:
 *  - tg_pool_run calls fn(arg, ith, nth) exactly once for every ith in [0, nth), the
 *    caller's thread being ith 0, and returns after all of them returned; every write
 *    made by fn on any thread is visible to the caller afterwards.
 *  - A pool runs one task at a time. A run asked for while another one is in flight (from
 *    inside fn, i.e. nested, or from a second thread) is not queued: it runs on the
 *    calling thread alone, as fn(arg, 0, 1). Kernels must therefore be correct for any
 *    nth >= 1, which they are by construction (ith of nth). Concurrent calls of one
 *    compiled function share its pool this way (measured against waiting for the pool
 *    and against a pool per call: docs/vm.md, "Concurrent calls").
 *  - Workers spin on an atomic for a short while after each task, then sleep on a
 *    condition variable; a run wakes only sleeping workers.
 */
#ifndef TG_PARALLEL_H
#define TG_PARALLEL_H

#include "../core/core.h"

/* One thread's share of a task: ith in [0, nth). */
typedef void (*tg_pool_fn)(void *arg, int ith, int nth);

/* Runs fn on every thread of the pool (the caller included). Returns the nth used (1 when
 * the run was serialized, see above). p may be NULL: fn(arg, 0, 1) on the caller. */
int tg_pool_run(tg_pool *p, tg_pool_fn fn, void *arg);
/* The same on at most nmax threads (nmax <= 1 runs inline without waking anyone). */
int tg_pool_run_n(tg_pool *p, int nmax, tg_pool_fn fn, void *arg);

/* Spins, as the pool's threads do between tasks, until ready(arg): true as soon as it is,
 * false after about the pool's spin time (the caller then sleeps on its own condition
 * variable). For other waits that must stay cheap when the answer comes soon (device
 * queues and events, src/device). */
bool tg_spin_wait(bool (*ready)(void *arg), void *arg);

/* Workers asleep on the condition variable right now (for tests and diagnostics). */
int tg_pool_sleeping(tg_pool *p);

/* Thread count when none is given: TGRAPH_NUM_THREADS when it holds a positive integer,
 * else the number of cores this process may run on. Always >= 1. */
int tg_pool_default_threads(void);

/* The number of CPUs this process may run on (its affinity mask, else the online count).
 * Always >= 1. */
int tg_cpu_count(void);

/* The [lo, hi) share of thread ith of nth over n items, boundaries rounded to multiples
 * of `align` (>= 1) so that vector kernels see the same blocks whatever nth is. */
static inline void tg_pool_share(int64_t n, int ith, int nth, int64_t align, int64_t *lo,
                                 int64_t *hi) {
    int64_t units = (n + align - 1) / align;
    int64_t per = units / nth, rem = units % nth;
    int64_t u0 = (int64_t)ith * per + (ith < rem ? ith : rem);
    int64_t u1 = u0 + per + (ith < rem ? 1 : 0);
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

#endif
