/* test_pool.c - the persistent thread pool (src/parallel/pool.c): every ith runs exactly
 * once per task and the caller sees every write afterwards, many tasks in a row, fewer
 * threads than the pool has, nested and concurrent use (serialized on the calling
 * thread), workers that fell asleep wake up for the next task, the thread count from
 * TGRAPH_NUM_THREADS, the work split helper, and allocation failures.
 * Runs under ThreadSanitizer in CI (.ci/run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "parallel/parallel.h"

enum { MAXT = 16 };

typedef struct counts {
    atomic_int calls[MAXT];  /* per ith */
    atomic_int bad;          /* calls with an unexpected nth or ith */
    int want_nth;            /* expected nth (0: any) */
    int64_t data[MAXT * 64]; /* each thread writes its own slice (plain stores) */
} counts;

static void count_fn(void *arg, int ith, int nth) {
    counts *c = arg;
    if (ith < 0 || ith >= nth || nth > MAXT || (c->want_nth && nth != c->want_nth))
        atomic_fetch_add(&c->bad, 1);
    else
        atomic_fetch_add(&c->calls[ith], 1);
    for (int k = 0; k < 64; k++) c->data[ith * 64 + k] += ith + 1;
}

static void reset(counts *c, int want_nth) {
    memset(c, 0, sizeof *c);
    c->want_nth = want_nth;
}

static void test_every_ith_once(void **state) {
    (void)state;
    for (int n = 1; n <= 8; n++) {
        tg_pool *p = tg_pool_new(NULL, n);
        assert_non_null(p);
        assert_int_equal(tg_pool_size(p), n);
        counts c;
        reset(&c, n);
        const int runs = n <= 2 ? 2000 : 300; /* more threads than this machine's cores */
        for (int r = 0; r < runs; r++) assert_int_equal(tg_pool_run(p, count_fn, &c), n);
        assert_int_equal(atomic_load(&c.bad), 0);
        for (int i = 0; i < MAXT; i++) {
            assert_int_equal(atomic_load(&c.calls[i]), i < n ? runs : 0);
            /* plain writes of the workers are visible to the caller */
            for (int k = 0; k < 64; k++)
                assert_true(c.data[i * 64 + k] == (i < n ? (int64_t)runs * (i + 1) : 0));
        }
        tg_pool_free(p);
    }
    tg_pool_free(NULL);
}

static void test_run_n_fewer_threads(void **state) {
    (void)state;
    tg_pool *p = tg_pool_new(NULL, 4);
    assert_non_null(p);
    for (int nmax = -1; nmax <= 6; nmax++) {
        int want = nmax < 1 ? 1 : nmax > 4 ? 4 : nmax;
        counts c;
        reset(&c, want);
        for (int r = 0; r < 100; r++) assert_int_equal(tg_pool_run_n(p, nmax, count_fn, &c), want);
        assert_int_equal(atomic_load(&c.bad), 0);
        for (int i = 0; i < MAXT; i++)
            assert_int_equal(atomic_load(&c.calls[i]), i < want ? 100 : 0);
    }
    /* a NULL pool runs on the caller */
    counts c;
    reset(&c, 1);
    assert_int_equal(tg_pool_run(NULL, count_fn, &c), 1);
    assert_int_equal(atomic_load(&c.calls[0]), 1);
    tg_pool_free(p);
}

/* Like count_fn without the plain stores (several threads run it as ith 0 at once). */
static void count_only_fn(void *arg, int ith, int nth) {
    counts *c = arg;
    if (ith != 0 || nth != 1)
        atomic_fetch_add(&c->bad, 1);
    else
        atomic_fetch_add(&c->calls[0], 1);
}

typedef struct nested {
    tg_pool *pool;
    atomic_int inner_nth_sum; /* sum of the nth the inner runs returned */
    counts inner;
} nested;

static void outer_fn(void *arg, int ith, int nth) {
    nested *ns = arg;
    (void)nth;
    /* every thread of the task asks the same pool again: refused, runs inline */
    int got = tg_pool_run(ns->pool, count_only_fn, &ns->inner);
    atomic_fetch_add(&ns->inner_nth_sum, got);
    (void)ith;
}

static void test_nested_use_is_serialized(void **state) {
    (void)state;
    tg_pool *p = tg_pool_new(NULL, 3);
    assert_non_null(p);
    nested ns;
    memset(&ns, 0, sizeof ns);
    ns.pool = p;
    reset(&ns.inner, 1);
    for (int r = 0; r < 50; r++) assert_int_equal(tg_pool_run(p, outer_fn, &ns), 3);
    /* each of the 3 threads ran the inner task alone (nth 1, ith 0) */
    assert_int_equal(atomic_load(&ns.inner_nth_sum), 50 * 3);
    assert_int_equal(atomic_load(&ns.inner.calls[0]), 50 * 3);
    assert_int_equal(atomic_load(&ns.inner.bad), 0);
    /* the pool still works normally afterwards */
    counts c;
    reset(&c, 3);
    assert_int_equal(tg_pool_run(p, count_fn, &c), 3);
    assert_int_equal(atomic_load(&c.calls[2]), 1);
    tg_pool_free(p);
}

typedef struct concurrent {
    tg_pool *pool;
    atomic_long total; /* sum over all runs of nth */
    atomic_long calls; /* fn calls seen */
} concurrent;

static void add_fn(void *arg, int ith, int nth) {
    concurrent *cc = arg;
    (void)ith;
    (void)nth;
    atomic_fetch_add(&cc->calls, 1);
}

static void *hammer(void *arg) {
    concurrent *cc = arg;
    for (int r = 0; r < 3000; r++) atomic_fetch_add(&cc->total, tg_pool_run(cc->pool, add_fn, cc));
    return NULL;
}

static void test_concurrent_callers(void **state) {
    (void)state;
    tg_pool *p = tg_pool_new(NULL, 2);
    assert_non_null(p);
    concurrent cc = {.pool = p};
    atomic_init(&cc.total, 0);
    atomic_init(&cc.calls, 0);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) assert_int_equal(pthread_create(&t[i], NULL, hammer, &cc), 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    /* every run called fn once per thread it reported, whether parallel or serialized */
    assert_true(atomic_load(&cc.calls) == atomic_load(&cc.total));
    assert_true(atomic_load(&cc.total) >= 3 * 3000);
    tg_pool_free(p);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void test_sleep_and_wake(void **state) {
    (void)state;
    tg_pool *p = tg_pool_new(NULL, 3);
    assert_non_null(p);
    counts c;
    reset(&c, 3);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(tg_pool_run(p, count_fn, &c), 3);
        /* idle long past the spin: both workers end up asleep */
        int asleep = 0;
        for (int w = 0; w < 200 && asleep < 2; w++) {
            sleep_ms(5);
            asleep = tg_pool_sleeping(p);
        }
        assert_int_equal(asleep, 2);
        /* the next task wakes them */
    }
    assert_int_equal(tg_pool_run(p, count_fn, &c), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(atomic_load(&c.calls[i]), 4);
    assert_int_equal(atomic_load(&c.bad), 0);
    tg_pool_free(p);
    /* a pool freed while its workers sleep, and one freed right after creation */
    p = tg_pool_new(NULL, 4);
    assert_non_null(p);
    sleep_ms(20);
    tg_pool_free(p);
    tg_pool_free(tg_pool_new(NULL, 4));
}

static void test_thread_count_default(void **state) {
    (void)state;
    const char *old = getenv("TGRAPH_NUM_THREADS");
    char *saved = old ? strdup(old) : NULL;
    setenv("TGRAPH_NUM_THREADS", "3", 1);
    assert_int_equal(tg_pool_default_threads(), 3);
    tg_pool *p = tg_pool_new(NULL, 0);
    assert_non_null(p);
    assert_int_equal(tg_pool_size(p), 3);
    tg_pool_free(p);
    p = tg_pool_new(NULL, 2); /* an explicit count wins */
    assert_int_equal(tg_pool_size(p), 2);
    tg_pool_free(p);
    setenv("TGRAPH_NUM_THREADS", "lots", 1); /* not a number: the core count */
    int cores = tg_pool_default_threads();
    assert_true(cores >= 1);
    setenv("TGRAPH_NUM_THREADS", "0", 1);
    assert_int_equal(tg_pool_default_threads(), cores);
    unsetenv("TGRAPH_NUM_THREADS");
    assert_int_equal(tg_pool_default_threads(), cores);
    if (saved) {
        setenv("TGRAPH_NUM_THREADS", saved, 1);
        free(saved);
    }
    assert_null(tg_pool_new(NULL, 100000));
    assert_non_null(strstr(tg_last_error(), "threads"));
}

static void test_share(void **state) {
    (void)state;
    const int64_t ns[] = {0, 1, 3, 7, 8, 9, 64, 1023, 1025, 100003};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        for (int64_t align = 1; align <= 64; align *= 4) {
            for (int nth = 1; nth <= 7; nth++) {
                int64_t next = 0;
                for (int ith = 0; ith < nth; ith++) {
                    int64_t lo, hi;
                    tg_pool_share(ns[a], ith, nth, align, &lo, &hi);
                    assert_true(lo == next && lo <= hi && hi <= ns[a]);
                    if (hi < ns[a]) assert_true(hi % align == 0);
                    next = hi;
                }
                assert_true(next == ns[a]);
            }
        }
    }
}

/* An allocator that fails after a number of successful allocations. */
typedef struct failer {
    int left;
} failer;

static void *fail_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    failer *f = ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (f->left-- <= 0) return NULL;
    return realloc(ptr, nsize);
}

static void test_allocation_failures(void **state) {
    (void)state;
    for (int k = 0; k < 4; k++) {
        failer fl = {.left = 1}; /* the context itself */
        tg_ctx *ctx = tg_ctx_new(fail_alloc, &fl);
        assert_non_null(ctx);
        fl.left = k;
        tg_pool *p = tg_pool_new(ctx, 3);
        if (k < 3) {
            assert_null(p);
            assert_int_equal(strstr(tg_last_error(), "out of memory") != NULL, 1);
        } else {
            assert_non_null(p);
            counts c;
            reset(&c, 3);
            assert_int_equal(tg_pool_run(p, count_fn, &c), 3);
            tg_pool_free(p);
        }
        tg_ctx_free(ctx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_ith_once),
        cmocka_unit_test(test_run_n_fewer_threads),
        cmocka_unit_test(test_nested_use_is_serialized),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_sleep_and_wake),
        cmocka_unit_test(test_thread_count_default),
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
