/* test_comm.c - the collectives between threads (src/parallel/comm.c), on 1, 2, 3, 4 and 8
 * ranks, one thread each (8 threads on a 2-core machine must still make progress): every
 * collective against a serial computation in rank order, bit for bit, on every rank, for
 * each dtype and operation, sizes 0, 1, 7, n-1, n, 2n+1 and odd sizes no rank count
 * divides, in place and not, on both paths (staged copies and direct reads, forced by
 * tg_comm_set_small_max); float sums whose value depends on the order; the same results
 * run after run under random delays; the holders of pmax / pmin (ties, NaN); permute with
 * and without receivers; barriers; aborts releasing waiting and sleeping ranks (a watchdog
 * alarm fails a hang), an abort racing with collectives (every rank stops, the ranks'
 * completed calls equal or within one), and reset. Checked builds also catch ranks that
 * disagree on a count (in a forked child). Runs under ThreadSanitizer (make tsan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault_alloc.h"
#include "parallel/comm.h"

enum { MAXR = 8, BIG = 20011 /* odd, prime: no rank count divides it */ };
static const int rank_counts[] = {1, 2, 3, 4, 8};
static const size_t paths[] = {0, TG_COMM_SMALL_DEFAULT, TG_COMM_STAGE_MAX}; /* small_max */

/* ---- failures seen on rank threads (cmocka's asserts belong to the main thread) ---- */

static atomic_int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static char first_failure[512];

static void fail_at(int line, const char *fmt, ...) TG_PRINTF(2, 3);
static void fail_at(int line, const char *fmt, ...) {
    pthread_mutex_lock(&fail_mu);
    if (atomic_fetch_add(&failures, 1) == 0) {
        int k = snprintf(first_failure, sizeof first_failure, "line %d: ", line);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_failure + k, sizeof first_failure - (size_t)k, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&fail_mu);
}
#define CHECK(c, ...) ((c) ? (void)0 : fail_at(__LINE__, __VA_ARGS__))

static void assert_no_failure(void) {
    if (atomic_load(&failures)) fail_msg("%d failures, the first: %s", failures, first_failure);
}

/* ---- n ranks on n threads ---- */

typedef struct ranks ranks;
typedef void (*rank_fn)(ranks *r, int rank);
struct ranks {
    tg_comm *c;
    int n;
    rank_fn fn;
    void *arg;
};
typedef struct rank_arg {
    ranks *r;
    int rank;
} rank_arg;

static void *rank_main(void *p) {
    rank_arg *a = p;
    a->r->fn(a->r, a->rank);
    return NULL;
}

/* Runs fn(r, rank) on n threads at once and joins them. */
static void run_ranks(tg_comm *c, rank_fn fn, void *arg) {
    ranks r = {c, tg_comm_size(c), fn, arg};
    pthread_t t[MAXR];
    rank_arg a[MAXR];
    for (int k = 0; k < r.n; k++) {
        a[k] = (rank_arg){&r, k};
        assert_int_equal(pthread_create(&t[k], NULL, rank_main, &a[k]), 0);
    }
    for (int k = 0; k < r.n; k++) pthread_join(t[k], NULL);
}

/* Sets the path threshold between collectives: every rank calls it. */
static void set_path(ranks *r, int rank, size_t small_max) {
    CHECK(tg_comm_barrier(r->c, rank) == TG_OK, "barrier");
    if (rank == 0) tg_comm_set_small_max(r->c, small_max);
    CHECK(tg_comm_barrier(r->c, rank) == TG_OK, "barrier");
}

/* ---- inputs: element i of rank k, a function of (seed, k, i) ---- */

static uint64_t mix(uint64_t x) { /* splitmix64 */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ties: few distinct values (0..3), and NaN now and then for floats; else floats of
 * magnitudes 1e-6 to 1e6 with both signs, so that the order of a sum shows, and integers
 * of the whole range, so that sums wrap */
static void gen_one(tg_dtype dt, uint64_t seed, int k, size_t i, bool ties, void *out) {
    static const double scale[13] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1,
                                     1e1,  1e2,  1e3,  1e4,  1e5,  1e6};
    uint64_t u = mix(seed * 0x100000001B3ull ^ ((uint64_t)k << 40) ^ i);
    double f =
        ties ? (double)(u % 4) : (double)((int64_t)(u % 2001) - 1000) * scale[(u >> 20) % 13];
    if (ties && (u >> 8) % 16 == 0) f = NAN;
    switch (dt) {
    case TG_DT_F32:
        *(float *)out = (float)f;
        break;
    case TG_DT_F64:
        *(double *)out = f;
        break;
    case TG_DT_BOOL:
        *(uint8_t *)out = (uint8_t)(u >> 3 & 1);
        break;
    default:
        tg_store_i64(out, dt, ties ? (int64_t)(u % 4) : (int64_t)u);
        break;
    }
}

static void gen(void *buf, tg_dtype dt, uint64_t seed, int k, size_t i0, size_t count, bool ties) {
    size_t es = tg_dtype_size(dt);
    for (size_t i = 0; i < count; i++)
        gen_one(dt, seed, k, i0 + i, ties, (unsigned char *)buf + i * es);
}

/* The expected element i: the inputs of ranks 0..n-1 folded in that order in the dtype
 * (sums wrap, NaN wins max and min, a tie keeps the earlier rank's value), and how many
 * ranks hold the result. */
#define FOLD(T, ISNAN, ADD)                                                                        \
    {                                                                                              \
        T acc, b;                                                                                  \
        gen_one(dt, seed, 0, i, ties, &acc);                                                       \
        for (int k = 1; k < n; k++) {                                                              \
            gen_one(dt, seed, k, i, ties, &b);                                                     \
            if (op == TG_COMM_SUM)                                                                 \
                acc = ADD(T, acc, b);                                                              \
            else if (ISNAN(b) || ISNAN(acc))                                                       \
                acc = ISNAN(b) ? b : acc;                                                          \
            else if (op == TG_COMM_MAX ? b > acc : b < acc)                                        \
                acc = b;                                                                           \
        }                                                                                          \
        memcpy(out, &acc, sizeof acc);                                                             \
        *holders = 0;                                                                              \
        for (int k = 0; k < n; k++) {                                                              \
            gen_one(dt, seed, k, i, ties, &b);                                                     \
            *holders += b == acc || (ISNAN(b) && ISNAN(acc));                                      \
        }                                                                                          \
    }
#define INT_NAN(v)       ((void)(v), 0)
#define FLT_NAN(v)       isnan(v)
#define INT_ADD(T, a, b) (T)((uint64_t)(a) + (uint64_t)(b)) /* wraps */
#define FLT_ADD(T, a, b) (a) + (b)
static void fold_int(tg_dtype dt, tg_comm_op op, int n, uint64_t seed, size_t i, bool ties,
                     void *out, int32_t *holders) {
    switch (dt) {
    case TG_DT_I8:
        FOLD(int8_t, INT_NAN, INT_ADD) break;
    case TG_DT_I16:
        FOLD(int16_t, INT_NAN, INT_ADD) break;
    case TG_DT_I32:
        FOLD(int32_t, INT_NAN, INT_ADD) break;
    case TG_DT_I64:
        FOLD(int64_t, INT_NAN, INT_ADD) break;
    default:
        FOLD(uint8_t, INT_NAN, INT_ADD) break; /* u8, bool */
    }
}
static void ref_elem(tg_dtype dt, tg_comm_op op, int n, uint64_t seed, size_t i, bool ties,
                     void *out, int32_t *holders) {
    if (dt == TG_DT_F32) {
        FOLD(float, FLT_NAN, FLT_ADD)
    } else if (dt == TG_DT_F64) {
        FOLD(double, FLT_NAN, FLT_ADD)
    } else {
        fold_int(dt, op, n, seed, i, ties, out, holders);
    }
}

/* got[0..count) is elements [i0, i0 + count) reduced over the ranks, bit for bit (and
 * holders, when given, their counts). */
static bool reduced_ok(tg_dtype dt, tg_comm_op op, int n, uint64_t seed, size_t i0, size_t count,
                       bool ties, const void *got, const int32_t *holders) {
    size_t es = tg_dtype_size(dt);
    for (size_t i = 0; i < count; i++) {
        unsigned char want[8];
        int32_t h;
        ref_elem(dt, op, n, seed, i0 + i, ties, want, &h);
        if (memcmp(want, (const unsigned char *)got + i * es, es) != 0) return false;
        if (holders && holders[i] != h) return false;
    }
    return true;
}

static const tg_dtype all_dtypes[] = {TG_DT_BOOL, TG_DT_I8, TG_DT_I16, TG_DT_I32,
                                      TG_DT_I64,  TG_DT_U8, TG_DT_F32, TG_DT_F64};
static const char *const op_names[] = {"sum", "max", "min"};

/* The sizes of a test on n ranks: 0, 1, 7, n-1, n, 2n+1 and odd sizes around the staged
 * path's limit and beyond it, none divisible by n > 1. */
static int test_sizes(int n, size_t *s) {
    size_t base[] = {0, 1, 7, (size_t)n - 1, (size_t)n, 2 * (size_t)n + 1, 255, 1021, 4099, BIG};
    memcpy(s, base, sizeof base);
    return (int)TG_COUNTOF(base);
}

/* ---- all_reduce ---- */

static void all_reduce_rank(ranks *r, int rank) {
    size_t sizes[16];
    int nsizes = test_sizes(r->n, sizes);
    unsigned char *send = malloc(BIG * 8), *recv = malloc(BIG * 8);
    uint64_t seed = 1;
    for (size_t p = 0; p < TG_COUNTOF(paths); p++) {
        set_path(r, rank, paths[p]);
        for (size_t d = 0; d < TG_COUNTOF(all_dtypes); d++) {
            tg_dtype dt = all_dtypes[d];
            size_t es = tg_dtype_size(dt);
            for (int op = dt == TG_DT_BOOL ? 1 : 0; op < 3; op++) {
                for (int si = 0; si < nsizes; si++) {
                    size_t count = sizes[si];
                    /* beyond the stage every path is the direct one: test it once */
                    if (count * es > TG_COMM_STAGE_MAX && p > 0) continue;
                    for (int inplace = 0; inplace < 2; inplace++, seed++) {
                        gen(send, dt, seed, rank, 0, count, false);
                        memset(recv, 0xAB, count * es);
                        void *out = inplace ? send : recv;
                        tg_status st =
                            tg_comm_all_reduce(r->c, rank, (tg_comm_op)op, dt, send, out, count);
                        CHECK(st == TG_OK, "all_reduce: %s", tg_last_error());
                        CHECK(
                            reduced_ok(dt, (tg_comm_op)op, r->n, seed, 0, count, false, out, NULL),
                            "all_reduce %s of %s, %zu elements, n=%d, rank %d, small_max %zu, "
                            "in place %d",
                            op_names[op], tg_dtype_name(dt), count, r->n, rank, paths[p], inplace);
                    }
                }
            }
        }
    }
    free(send);
    free(recv);
}

static void test_all_reduce(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, all_reduce_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* A million doubles (8 MB per rank), beyond any cache: the direct path's slices. */
static void big_rank(ranks *r, int rank) {
    enum { N = 1000003 };
    double *x = malloc(N * sizeof *x);
    gen(x, TG_DT_F64, 99, rank, 0, N, false);
    CHECK(tg_comm_all_reduce(r->c, rank, TG_COMM_SUM, TG_DT_F64, x, x, N) == TG_OK, "all_reduce");
    CHECK(reduced_ok(TG_DT_F64, TG_COMM_SUM, r->n, 99, 0, N, false, x, NULL),
          "1000003 doubles, n=%d, rank %d", r->n, rank);
    free(x);
}

static void test_all_reduce_big(void **state) {
    (void)state;
    for (int n = 2; n <= 3; n++) {
        tg_comm *c = tg_comm_new(NULL, n);
        assert_non_null(c);
        run_ranks(c, big_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* ---- float sums in rank order, and the same bits every run ---- */

enum { ORDER_N = 1021, RUNS = 200 };
typedef struct order_case {
    float got[MAXR][ORDER_N]; /* each rank's last result */
} order_case;

static void spin_a_little(uint64_t u) {
    for (volatile unsigned i = 0; i < (unsigned)(u % 2000); i++) continue;
    if (u % 7 == 0) sched_yield();
}

static void order_rank(ranks *r, int rank) {
    order_case *oc = r->arg;
    float first[ORDER_N], x[ORDER_N];
    for (int run = 0; run < RUNS; run++) {
        if (run == RUNS / 2) set_path(r, rank, 0); /* the other path, the same bits */
        gen(x, TG_DT_F32, 7, rank, 0, ORDER_N, false);
        spin_a_little(mix((uint64_t)(run * MAXR + rank))); /* ranks arrive in any order */
        CHECK(tg_comm_all_reduce(r->c, rank, TG_COMM_SUM, TG_DT_F32, x, x, ORDER_N) == TG_OK,
              "all_reduce");
        if (run == 0) memcpy(first, x, sizeof x);
        CHECK(memcmp(first, x, sizeof x) == 0, "run %d differs from the first, rank %d", run, rank);
    }
    memcpy(oc->got[rank], x, sizeof x);
}

static void test_sum_order(void **state) {
    (void)state;
    const int n = 8;
    order_case *oc = calloc(1, sizeof *oc);
    tg_comm *c = tg_comm_new(NULL, n);
    assert_non_null(c);
    tg_comm_set_small_max(c, TG_COMM_STAGE_MAX); /* 4 KiB: staged first */
    run_ranks(c, order_rank, oc);
    tg_comm_free(c);
    assert_no_failure();
    int differs = 0; /* the data makes the order matter: the reverse order differs */
    for (int i = 0; i < ORDER_N; i++) {
        float fwd = 0, rev = 0, x;
        for (int k = 0; k < n; k++) {
            gen_one(TG_DT_F32, 7, k, (size_t)i, false, &x);
            fwd = k == 0 ? x : fwd + x;
        }
        for (int k = n - 1; k >= 0; k--) {
            gen_one(TG_DT_F32, 7, k, (size_t)i, false, &x);
            rev = k == n - 1 ? x : rev + x;
        }
        for (int k = 0; k < n; k++) assert_memory_equal(&oc->got[k][i], &fwd, sizeof fwd);
        differs += memcmp(&fwd, &rev, sizeof fwd) != 0;
    }
    assert_true(differs > ORDER_N / 10);
    free(oc);
}

/* ---- pmax / pmin: the extreme value and how many ranks hold it ---- */

static void extreme_rank(ranks *r, int rank) {
    static const tg_dtype dts[] = {TG_DT_F32, TG_DT_F64, TG_DT_I32, TG_DT_U8};
    size_t sizes[16];
    int nsizes = test_sizes(r->n, sizes);
    unsigned char *send = malloc(BIG * 8), *recv = malloc(BIG * 8);
    int32_t *holders = malloc(BIG * sizeof *holders);
    uint64_t seed = 1000;
    for (size_t p = 0; p < TG_COUNTOF(paths); p++) {
        set_path(r, rank, paths[p]);
        for (size_t d = 0; d < TG_COUNTOF(dts); d++)
            for (int op = TG_COMM_MAX; op <= TG_COMM_MIN; op++)
                for (int si = 0; si < nsizes; si++)
                    for (int inplace = 0; inplace < 2; inplace++, seed++) {
                        tg_dtype dt = dts[d];
                        size_t count = sizes[si];
                        if (count * tg_dtype_size(dt) > TG_COMM_STAGE_MAX && p > 0) continue;
                        gen(send, dt, seed, rank, 0, count, true);
                        void *out = inplace ? send : recv;
                        tg_status st = tg_comm_all_reduce_extreme(r->c, rank, (tg_comm_op)op, dt,
                                                                  send, out, holders, count);
                        CHECK(st == TG_OK, "extreme: %s", tg_last_error());
                        CHECK(reduced_ok(dt, (tg_comm_op)op, r->n, seed, 0, count, true, out,
                                         holders),
                              "extreme %s of %s, %zu elements, n=%d, rank %d, small_max %zu",
                              op_names[op], tg_dtype_name(dt), count, r->n, rank, paths[p]);
                    }
    }
    free(send);
    free(recv);
    free(holders);
}

static void test_extreme(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, extreme_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* The shares the gradient gives: 1/holders to each holder, which sum to one per element
 * (ties split evenly), on 4 ranks with many ties. */
typedef struct share_case {
    float x[4][64], m[4][64];
    int32_t h[4][64];
} share_case;

static void share_rank(ranks *r, int rank) {
    share_case *sc = r->arg;
    for (int i = 0; i < 64; i++) sc->x[rank][i] = (float)((i + rank * (i % 3)) % 3);
    CHECK(tg_comm_all_reduce_extreme(r->c, rank, TG_COMM_MAX, TG_DT_F32, sc->x[rank], sc->m[rank],
                                     sc->h[rank], 64) == TG_OK,
          "extreme");
}

static void test_extreme_shares(void **state) {
    (void)state;
    share_case *sc = calloc(1, sizeof *sc);
    tg_comm *c = tg_comm_new(NULL, 4);
    assert_non_null(c);
    run_ranks(c, share_rank, sc);
    tg_comm_free(c);
    assert_no_failure();
    int ties = 0;
    for (int i = 0; i < 64; i++) {
        double total = 0;
        for (int k = 0; k < 4; k++) {
            assert_true(sc->h[k][i] == sc->h[0][i] && sc->m[k][i] == sc->m[0][i]);
            if (sc->x[k][i] == sc->m[k][i]) total += 1.0 / sc->h[k][i];
        }
        assert_true(fabs(total - 1.0) < 1e-12);
        ties += sc->h[0][i] > 1;
    }
    assert_true(ties > 0);
    free(sc);
}

/* ---- reduce_scatter ---- */

static void reduce_scatter_rank(ranks *r, int rank) {
    static const tg_dtype dts[] = {TG_DT_F32, TG_DT_F64, TG_DT_I32, TG_DT_I8};
    size_t sizes[16];
    int nsizes = test_sizes(r->n, sizes);
    unsigned char *send = malloc((size_t)r->n * BIG * 8), *recv = malloc(BIG * 8);
    uint64_t seed = 2000;
    for (size_t p = 0; p < TG_COUNTOF(paths); p++) {
        set_path(r, rank, paths[p]);
        for (size_t d = 0; d < TG_COUNTOF(dts); d++)
            for (int op = 0; op < 3; op++)
                for (int si = 0; si < nsizes; si++)
                    for (int inplace = 0; inplace < 2; inplace++, seed++) {
                        tg_dtype dt = dts[d];
                        size_t block = sizes[si], es = tg_dtype_size(dt);
                        if (block == BIG) continue; /* n blocks of 4099 go past the stage */
                        if ((size_t)r->n * block * es > TG_COMM_STAGE_MAX && p > 0) continue;
                        gen(send, dt, seed, rank, 0, (size_t)r->n * block, false);
                        void *out = inplace ? send + (size_t)rank * block * es : recv;
                        tg_status st = tg_comm_reduce_scatter(r->c, rank, (tg_comm_op)op, dt, send,
                                                              out, block);
                        CHECK(st == TG_OK, "reduce_scatter: %s", tg_last_error());
                        CHECK(reduced_ok(dt, (tg_comm_op)op, r->n, seed, (size_t)rank * block,
                                         block, false, out, NULL),
                              "reduce_scatter %s of %s, block %zu, n=%d, rank %d, small_max %zu",
                              op_names[op], tg_dtype_name(dt), block, r->n, rank, paths[p]);
                    }
    }
    free(send);
    free(recv);
}

static void test_reduce_scatter(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, reduce_scatter_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* ---- all_gather ---- */

static void all_gather_rank(ranks *r, int rank) {
    size_t sizes[16];
    int nsizes = test_sizes(r->n, sizes);
    unsigned char *send = malloc(BIG), *recv = malloc((size_t)r->n * BIG);
    unsigned char *want = malloc(BIG);
    uint64_t seed = 3000;
    for (size_t p = 0; p < TG_COUNTOF(paths); p++) {
        set_path(r, rank, paths[p]);
        for (int si = 0; si < nsizes; si++)
            for (int inplace = 0; inplace < 2; inplace++, seed++) {
                size_t bytes = sizes[si];
                if (bytes > TG_COMM_STAGE_MAX && p > 0) continue;
                memset(recv, 0xAB, (size_t)r->n * bytes);
                void *in = inplace ? recv + (size_t)rank * bytes : send;
                gen(in, TG_DT_U8, seed, rank, 0, bytes, false);
                CHECK(tg_comm_all_gather(r->c, rank, in, recv, bytes) == TG_OK, "all_gather: %s",
                      tg_last_error());
                for (int k = 0; k < r->n; k++) {
                    gen(want, TG_DT_U8, seed, k, 0, bytes, false);
                    CHECK(bytes == 0 || memcmp(recv + (size_t)k * bytes, want, bytes) == 0,
                          "all_gather %zu bytes, block %d, n=%d, rank %d, small_max %zu, in "
                          "place %d",
                          bytes, k, r->n, rank, paths[p], inplace);
                }
            }
    }
    free(send);
    free(recv);
    free(want);
}

static void test_all_gather(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, all_gather_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* ---- permute ---- */

static void permute_case(ranks *r, int rank, const int *src, const int *dst, int npairs,
                         uint64_t seed, unsigned char *send, unsigned char *recv,
                         unsigned char *want, size_t bytes, const char *what) {
    gen(send, TG_DT_U8, seed, rank, 0, bytes, false);
    memset(recv, 0xAB, bytes);
    CHECK(tg_comm_permute(r->c, rank, src, dst, npairs, send, recv, bytes) == TG_OK, "permute: %s",
          tg_last_error());
    int from = -1;
    for (int p = 0; p < npairs; p++)
        if (dst[p] == rank) from = src[p];
    if (from >= 0)
        gen(want, TG_DT_U8, seed, from, 0, bytes, false);
    else
        memset(want, 0, bytes);
    CHECK(bytes == 0 || memcmp(recv, want, bytes) == 0,
          "permute (%s) %zu bytes, n=%d, rank %d (from %d)", what, bytes, r->n, rank, from);
}

static void permute_rank(ranks *r, int rank) {
    const int n = r->n;
    size_t sizes[16];
    int nsizes = test_sizes(n, sizes);
    unsigned char *send = malloc(BIG), *recv = malloc(BIG), *want = malloc(BIG);
    int shift_src[MAXR], shift_dst[MAXR], half_src[MAXR], half_dst[MAXR], nhalf = 0;
    int bcast_src[MAXR], bcast_dst[MAXR], nbcast = 0;
    for (int k = 0; k < n; k++) { /* everyone receives: k -> k+1 */
        shift_src[k] = k;
        shift_dst[k] = (k + 1) % n;
    }
    for (int k = 0; k + 1 < n; k += 2) { /* even ranks send to the next, which alone receive */
        half_src[nhalf] = k;
        half_dst[nhalf++] = k + 1;
    }
    for (int k = n - 1; k >= 1; k -= 2) { /* one rank sends to several */
        bcast_src[nbcast] = 0;
        bcast_dst[nbcast++] = k;
    }
    uint64_t seed = 4000;
    for (size_t p = 0; p < TG_COUNTOF(paths); p++) {
        set_path(r, rank, paths[p]);
        for (int si = 0; si < nsizes; si++) {
            size_t bytes = sizes[si];
            if (bytes > TG_COMM_STAGE_MAX && p > 0) continue;
            permute_case(r, rank, shift_src, shift_dst, n, seed++, send, recv, want, bytes,
                         "shift");
            permute_case(r, rank, half_src, half_dst, nhalf, seed++, send, recv, want, bytes,
                         "pairs");
            permute_case(r, rank, bcast_src, bcast_dst, nbcast, seed++, send, recv, want, bytes,
                         "one to several");
            permute_case(r, rank, NULL, NULL, 0, seed++, send, recv, want, bytes, "no pairs");
        }
    }
    free(send);
    free(recv);
    free(want);
}

static void test_permute(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, permute_rank, NULL);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* ---- barrier ---- */

typedef struct barrier_case {
    atomic_int arrived;
    int plain[MAXR]; /* written before a barrier, read after it by every rank */
} barrier_case;

static void barrier_rank(ranks *r, int rank) {
    barrier_case *bc = r->arg;
    const int rounds = r->n <= 2 ? 2000 : 300;
    for (int i = 1; i <= rounds; i++) {
        bc->plain[rank] = i;
        atomic_fetch_add(&bc->arrived, 1);
        CHECK(tg_comm_barrier(r->c, rank) == TG_OK, "barrier");
        CHECK(atomic_load(&bc->arrived) >= i * r->n, "a rank left round %d early", i);
        for (int k = 0; k < r->n; k++) CHECK(bc->plain[k] == i, "round %d, rank %d", i, k);
        CHECK(tg_comm_barrier(r->c, rank) == TG_OK, "barrier");
    }
}

static void test_barrier(void **state) {
    (void)state;
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        barrier_case bc = {0};
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        run_ranks(c, barrier_rank, &bc);
        tg_comm_free(c);
        assert_no_failure();
    }
}

/* ---- abort ---- */

typedef struct abort_case {
    int which;    /* 0: all_reduce staged, 1: direct, 2: barrier, 3: permute */
    int delay_ms; /* before the last rank aborts (20 ms: the others sleep by then) */
} abort_case;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static tg_status one_collective(tg_comm *c, int rank, int which, double *buf, size_t count) {
    static const int src[] = {0}, dst[] = {1};
    switch (which) {
    case 0:
    case 1:
        return tg_comm_all_reduce(c, rank, TG_COMM_SUM, TG_DT_F64, buf, buf, count);
    case 2:
        return tg_comm_barrier(c, rank);
    default:
        return tg_comm_permute(c, rank, src, dst, 1, buf, buf + count, count * 8);
    }
}

static void abort_rank(ranks *r, int rank) {
    abort_case *ac = r->arg;
    double buf[2 * 4096] = {0};
    size_t count = ac->which == 1 ? 4096 : 8;
    if (rank == r->n - 1) {
        sleep_ms(ac->delay_ms);
        tg_set_error(TG_EIO, "rank %d: cannot read its input", rank);
        tg_comm_abort(r->c, TG_EIO);
    } else {
        tg_status st = one_collective(r->c, rank, ac->which, buf, count);
        CHECK(st == TG_EIO, "a waiting rank returned %s", tg_status_str(st));
        CHECK(strstr(tg_last_error(), "collective aborted: rank") != NULL, "message: %s",
              tg_last_error());
    }
    /* aborted: every collective fails at once */
    CHECK(one_collective(r->c, rank, ac->which, buf, count) == TG_EIO, "after the abort");
    CHECK(tg_comm_barrier(r->c, rank) == TG_EIO, "barrier after the abort");
}

static void sum_rank(ranks *r, int rank) {
    double x[3] = {rank, 1, 2};
    CHECK(tg_comm_all_reduce(r->c, rank, TG_COMM_SUM, TG_DT_F64, x, x, 3) == TG_OK, "after reset");
    CHECK(x[1] == r->n, "after reset: %g", x[1]);
}

static void test_abort(void **state) {
    (void)state;
    alarm(120); /* a hang fails the test */
    for (size_t i = 0; i < TG_COUNTOF(rank_counts); i++) {
        if (rank_counts[i] < 2) continue;
        tg_comm *c = tg_comm_new(NULL, rank_counts[i]);
        assert_non_null(c);
        for (int which = 0; which < 4; which++)
            for (int delay = 0; delay <= 20; delay += 20) {
                abort_case ac = {.which = which, .delay_ms = delay};
                run_ranks(c, abort_rank, &ac);
                assert_no_failure();
                tg_comm_reset(c);
                run_ranks(c, sum_rank, NULL);
                assert_no_failure();
            }
        tg_comm_free(c);
    }
    alarm(0);
}

/* An abort from another thread while the ranks run collectives back to back: each rank
 * stops with the abort's status after calls that were all correct. With direct
 * collectives only, every rank has completed the same number; staged ones may leave a rank
 * one ahead (comm.c, "Aborting"). */
typedef struct race_case {
    bool direct_only;
    int completed[MAXR];
} race_case;

static void race_rank(ranks *r, int rank) {
    race_case *rc = r->arg;
    double *x = malloc(4096 * sizeof *x);
    for (int i = 0;; i++) {
        size_t count = rc->direct_only || i % 2 ? 4096 : 3; /* 32 KiB: direct */
        for (size_t e = 0; e < count; e++) x[e] = (double)(rank + 1);
        tg_status st = tg_comm_all_reduce(r->c, rank, TG_COMM_SUM, TG_DT_F64, x, x, count);
        if (st != TG_OK) {
            CHECK(st == TG_ECHECK, "status %s", tg_status_str(st));
            rc->completed[rank] = i;
            break;
        }
        CHECK(x[count - 1] == r->n * (r->n + 1) / 2.0, "a result");
    }
    free(x);
}

typedef struct aborter {
    tg_comm *c;
    int delay_us;
} aborter;

static void *abort_later(void *p) {
    aborter *a = p;
    struct timespec ts = {0, (long)a->delay_us * 1000L};
    nanosleep(&ts, NULL);
    tg_set_error(TG_ECHECK, "stopped from outside");
    tg_comm_abort(a->c, TG_ECHECK);
    return NULL;
}

static void test_abort_race(void **state) {
    (void)state;
    alarm(120);
    for (int n = 2; n <= 8; n *= 2)
        for (int trial = 0; trial < 10; trial++) {
            tg_comm *c = tg_comm_new(NULL, n);
            assert_non_null(c);
            race_case rc = {.direct_only = trial % 2 == 0};
            aborter a = {c, (int)(mix((uint64_t)trial) % 3000)};
            pthread_t t;
            assert_int_equal(pthread_create(&t, NULL, abort_later, &a), 0);
            run_ranks(c, race_rank, &rc);
            pthread_join(t, NULL);
            assert_no_failure();
            int lo = rc.completed[0], hi = lo;
            for (int k = 1; k < n; k++) {
                lo = rc.completed[k] < lo ? rc.completed[k] : lo;
                hi = rc.completed[k] > hi ? rc.completed[k] : hi;
            }
            assert_true(hi - lo <= (rc.direct_only ? 0 : 1));
            tg_comm_free(c);
        }
    alarm(0);
}

/* ---- more ranks than cores ---- */

static void many_rank(ranks *r, int rank) {
    for (int i = 0; i < 500; i++) {
        int64_t x = rank + i;
        CHECK(tg_comm_all_reduce(r->c, rank, TG_COMM_MAX, TG_DT_I64, &x, &x, 1) == TG_OK,
              "all_reduce");
        CHECK(x == r->n - 1 + i, "max %lld", (long long)x);
    }
}

static void test_oversubscribed(void **state) {
    (void)state;
    alarm(120);
    tg_comm *c = tg_comm_new(NULL, MAXR);
    assert_non_null(c);
    run_ranks(c, many_rank, NULL);
    tg_comm_free(c);
    assert_no_failure();
    alarm(0);
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    assert_null(tg_comm_new(NULL, 0));
    assert_non_null(strstr(tg_last_error(), "communicator: 0 ranks, expected 1 to"));
    assert_null(tg_comm_new(NULL, TG_COMM_MAX_RANKS + 1));
    for (long k = 1; k <= 3; k++) { /* each allocation refused in turn */
        fail_alloc fa = {0, 0};
        tg_ctx *ctx = tg_ctx_new(failing_alloc, &fa);
        fa = (fail_alloc){0, k};
        assert_null(tg_comm_new(ctx, 4));
        assert_int_equal(fa.count, k);
        tg_ctx_free(ctx);
    }
    tg_comm *c = tg_comm_new(NULL, 1);
    uint8_t b = 1;
    assert_int_equal(tg_comm_all_reduce(c, 0, TG_COMM_SUM, TG_DT_BOOL, &b, &b, 1), TG_EUNSUPPORTED);
    assert_string_equal(tg_last_error(), "all_reduce: sum of bool is not supported");
    assert_int_equal(tg_comm_reduce_scatter(c, 0, TG_COMM_SUM, TG_DT_BOOL, &b, &b, 1),
                     TG_EUNSUPPORTED);
    assert_int_equal(tg_comm_all_reduce(c, 0, TG_COMM_MAX, TG_DT_BOOL, &b, &b, 1), TG_OK);
    tg_comm_free(c);
    tg_comm_free(NULL);
}

#ifndef NDEBUG
static void mismatch_rank(ranks *r, int rank) {
    double x[8] = {0};
    tg_comm_all_reduce(r->c, rank, TG_COMM_SUM, TG_DT_F64, x, x, rank == 0 ? 4 : 5);
}

/* Checked builds: ranks that disagree on a count stop the process (in a child). */
static void test_mismatch_asserts(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(20);
        tg_comm *c = tg_comm_new(NULL, 2);
        run_ranks(c, mismatch_rank, NULL);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_reduce),       cmocka_unit_test(test_all_reduce_big),
        cmocka_unit_test(test_sum_order),        cmocka_unit_test(test_extreme),
        cmocka_unit_test(test_extreme_shares),   cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_all_gather),       cmocka_unit_test(test_permute),
        cmocka_unit_test(test_barrier),          cmocka_unit_test(test_abort),
        cmocka_unit_test(test_abort_race),       cmocka_unit_test(test_oversubscribed),
        cmocka_unit_test(test_errors),
#ifndef NDEBUG
        cmocka_unit_test(test_mismatch_asserts),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
