/* pool.c - the persistent thread pool (see parallel.h for the contract).
 *
 * One task at a time: the caller publishes {fn, arg, nth} on the cache line of the
 * generation counter `gen` and bumps it; every worker runs its share when it sees a new
 * generation (workers whose ith >= nth only acknowledge), then increments `finished`;
 * the caller runs share 0 and waits until `finished` has grown by the number of workers.
 * A dispatch thus moves two cache lines between cores (gen to the workers, finished
 * back), which is what keeps it near 0.2 us when the workers are spinning.
 *
 * Waiting on both sides spins for about SPIN_NS (yielding the core now and then after
 * YIELD_NS, so that on a busy machine a worker that has not started yet can run on the
 * waiter's core), then sleeps on a condition variable. Kept short because every compiled
 * function owns a pool: a worker still spinning for one function competes for a core with
 * the next function's threads. The price: waking a sleeping worker costs tens of
 * microseconds on a virtual machine (a 2 ms spin made W6's 1 ms step at 2 threads about 6%
 * faster when other work ran between its calls).
 * Lost wake-ups are impossible by a Dekker-style handshake on sequentially consistent
 * atomics: a sleeper first announces itself (sleepers / caller_sleeping) and then checks
 * the condition under the mutex; a waker first makes the condition true and then reads
 * the announcement, signalling under the mutex when it is set. At least one side sees
 * the other's write.
 *
 * Invariants: `busy` is true exactly while a task is dispatched; a run that finds it set
 * (nested or concurrent use) executes inline as fn(arg, 0, 1). The generation advances by
 * one per task and a worker never misses one, because the caller cannot publish a new
 * task before every worker acknowledged the previous one.
 */
#include "parallel.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS     50000 /* how long a waiting thread spins before it sleeps */
#define YIELD_NS    5000  /* then the spin also yields the core now and then */
#define MAX_THREADS 1024

typedef struct worker {
    struct tg_pool *pool;
    int ith;
} worker;

struct tg_pool {
    tg_ctx *ctx;         /* allocator of this object */
    int n;               /* threads, the caller included */
    pthread_t *threads;  /* n - 1 workers */
    worker *workers;     /* their arguments */
    int started;         /* workers created so far */
    pthread_mutex_t mu;  /* guards sleeping on wake / done */
    pthread_cond_t wake; /* workers sleep here */
    pthread_cond_t done; /* the caller sleeps here */
    /* one cache line the caller writes and every worker reads: the generation and the
     * task (written before `gen` is bumped) */
    _Alignas(64) atomic_uint gen; /* task generation */
    tg_pool_fn fn;
    void *arg;
    int nth;
    /* one line the workers write and the caller reads */
    _Alignas(64) atomic_uint finished; /* tasks finished by workers, counting up (wraps) */
    atomic_bool caller_sleeping;       /* the caller waits on `done` */
    _Alignas(64) atomic_int sleepers;  /* workers waiting on `wake` */
    atomic_bool stop;                  /* set once, by tg_pool_free */
    _Alignas(64) atomic_bool busy;     /* a task is in flight (the caller's line) */
    unsigned target;                   /* `finished` once the current task is done */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until ready(arg): true as soon as it is, false once SPIN_NS passed (yielding the
 * core now and then after YIELD_NS). Inlined into each waiter, so the pool's own waits
 * call their predicate directly. */
static inline __attribute__((always_inline)) bool spin(bool (*ready)(void *), void *arg) {
    int64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        if (ready(arg)) return true;
        cpu_relax();
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > SPIN_NS)
                return false;
            else if (t - t0 > YIELD_NS)
                sched_yield(); /* let a starved thread of ours (or anyone) run */
        }
    }
}

bool tg_spin_wait(bool (*ready)(void *arg), void *arg) { return spin(ready, arg); }

typedef struct uint_wait {
    atomic_uint *a;
    unsigned v;
} uint_wait;

static bool uint_differs(void *arg) {
    const uint_wait *w = arg;
    return atomic_load_explicit(w->a, memory_order_acquire) != w->v;
}

static bool uint_equals(void *arg) {
    const uint_wait *w = arg;
    return atomic_load_explicit(w->a, memory_order_acquire) == w->v;
}

/* Spins while *a == v: true as soon as it differs, false once SPIN_NS passed. */
static bool spin_while_uint(atomic_uint *a, unsigned v) {
    uint_wait w = {a, v};
    return spin(uint_differs, &w);
}

/* Spins until *a == v: true once it is, false once SPIN_NS passed. */
static bool spin_until_uint(atomic_uint *a, unsigned v) {
    uint_wait w = {a, v};
    return spin(uint_equals, &w);
}

static void *worker_main(void *argp) {
    worker *w = argp;
    tg_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        if (!spin_while_uint(&p->gen, seen)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        seen = g;
        if (w->ith < p->nth) p->fn(p->arg, w->ith, p->nth);
        atomic_fetch_add(&p->finished, 1);
        if (atomic_load(&p->caller_sleeping)) { /* it re-checks: a spurious wake is harmless */
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

int tg_pool_default_threads(void) {
    const char *env = getenv("TGRAPH_NUM_THREADS");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (errno == 0 && end && *end == '\0' && v >= 1)
            return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    int n = tg_cpu_count();
    return n > MAX_THREADS ? MAX_THREADS : n;
}

int tg_cpu_count(void) {
    int n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c >= 1 ? (c > INT_MAX ? INT_MAX : (int)c) : 1;
    }
    return n;
}

/* Stops and joins the started workers and frees p. */
static void pool_destroy(tg_pool *p) {
    if (p->started > 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        atomic_fetch_add(&p->gen, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    tg_ctx *ctx = p->ctx;
    if (p->threads) tg_mem_free(ctx, p->threads, sizeof *p->threads * (size_t)p->n);
    if (p->workers) tg_mem_free(ctx, p->workers, sizeof *p->workers * (size_t)p->n);
    tg_mem_free(ctx, p, sizeof *p);
}

tg_pool *tg_pool_new(tg_ctx *ctx, int nthreads) {
    if (!ctx) ctx = tg_ctx_default();
    if (nthreads <= 0) nthreads = tg_pool_default_threads();
    if (nthreads > MAX_THREADS) {
        tg_set_error(TG_ELIMIT, "thread pool: %d threads asked for, at most %d", nthreads,
                     MAX_THREADS);
        return NULL;
    }
    tg_pool *p = tg_mem_calloc(ctx, sizeof *p);
    if (!p) return NULL;
    p->ctx = ctx;
    p->n = nthreads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->finished, 0);
    atomic_init(&p->caller_sleeping, false);
    atomic_init(&p->busy, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (nthreads > 1) {
        p->threads = tg_mem_calloc(ctx, sizeof *p->threads * (size_t)nthreads);
        p->workers = tg_mem_calloc(ctx, sizeof *p->workers * (size_t)nthreads);
        if (!p->threads || !p->workers) {
            pool_destroy(p);
            return NULL;
        }
        for (int i = 0; i < nthreads - 1; i++) {
            p->workers[i] = (worker){.pool = p, .ith = i + 1};
            int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]);
            if (rc != 0) {
                pool_destroy(p);
                tg_set_error(TG_ENOMEM, "thread pool: cannot start thread %d of %d: %s", i + 2,
                             nthreads, strerror(rc));
                return NULL;
            }
            p->started++;
        }
    }
    return p;
}

void tg_pool_free(tg_pool *p) {
    if (p) pool_destroy(p);
}

int tg_pool_size(const tg_pool *p) { return p ? p->n : 1; }

int tg_pool_sleeping(tg_pool *p) { return p ? atomic_load(&p->sleepers) : 0; }

int tg_pool_run_n(tg_pool *p, int nmax, tg_pool_fn fn, void *arg) {
    int nth = p ? p->n : 1;
    if (nmax < nth) nth = nmax;
    bool expected = false;
    if (nth <= 1 || !atomic_compare_exchange_strong(&p->busy, &expected, true)) {
        fn(arg, 0, 1); /* small, nested or concurrent: this thread alone */
        return 1;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    p->target += (unsigned)(p->n - 1);
    atomic_fetch_add(&p->gen, 1); /* publishes the task (seq_cst, hence release) */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, nth);
    if (!spin_until_uint(&p->finished, p->target)) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeping, true);
        while (atomic_load(&p->finished) != p->target) pthread_cond_wait(&p->done, &p->mu);
        atomic_store(&p->caller_sleeping, false);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_store_explicit(&p->busy, false, memory_order_release);
    return nth;
}

int tg_pool_run(tg_pool *p, tg_pool_fn fn, void *arg) {
    return tg_pool_run_n(p, p ? p->n : 1, fn, arg);
}
