/* test_collective.c - the collectives of pmap run (docs/pmap.md, "Collectives").
 *
 * Cases: every collective (psum, pmean, pmax, pmin, all_gather stacked at 0 and -1 and
 * tiled, psum_scatter plain and tiled, ppermute with a rank that receives nothing, and two
 * equal psums) against a serial loop over the slices in C, computed in the dtype in rank
 * order, so equality is exact: for N = 1, 2 and 4, f32 and f64, slices that are strided
 * views (in_axes=1), in the reference, vm, c and debug modes, without host devices and on
 * four; bit-identical results over repeated calls; nested pmaps with two axis names (a
 * collective over the outer axis inside the inner body meets the inner ranks of the same
 * index); one body mapped over two sizes in one function; a rank that fails (a take out of
 * range on one rank) fails the call with that rank's message while the others wait in a
 * collective, in every mode, at any depth, and the next call succeeds; four threads calling
 * one function at once; perm checked at run time against the axis size; and a ppermute
 * built through the C API.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgraph.h"

enum { C = 4 }; /* the last extent of a slice */

static const tg_mode MODES[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C, TG_MODE_DEBUG};
static const char *const MODE_NAMES[] = {"reference", "vm", "c", "debug"};
enum { NMODES = 4 };

static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "test.tg", &m) != TG_OK)
        fail_msg("parse: %s\n%s", tg_last_error(), src);
    return m;
}

static tg_fn *compile(tg_module *m, const char *name, tg_mode mode) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_find(m, name), &o, &f) != TG_OK)
        fail_msg("compile: %s", tg_last_error());
    return f;
}

/* v rounded to dt: sums of two values of dt computed in double and rounded once are the
 * sums computed in dt. */
static double rnd(tg_dtype dt, double v) { return dt == TG_DT_F32 ? (double)(float)v : v; }

/* A tensor of dt with element e = rnd(sin(1.3 e + seed) * 10). */
static tg_tensor *values(tg_dtype dt, int ndim, const int64_t *shape, double seed) {
    tg_tensor *t = tg_tensor_new(NULL, dt, ndim, shape);
    for (int64_t e = 0; e < tg_tensor_size(t); e++) {
        double v = rnd(dt, sin(1.3 * (double)e + seed) * 10);
        if (dt == TG_DT_F32)
            ((float *)tg_tensor_data(t))[e] = (float)v;
        else
            ((double *)tg_tensor_data(t))[e] = v;
    }
    return t;
}

/* ---- every collective against a loop over the slices ---- */

enum { NOUT = 11 };
static const char *const OUT_NAMES[NOUT] = {"s",  "mn", "mx", "mi", "g0", "g2",
                                            "gt", "sc", "st", "pp", "pc"};

static void body_source(char *buf, size_t cap, int n, const char *dt) {
    char perm[256] = "";
    for (int r = 0; r + 1 < n; r++) /* a shift right: rank 0 receives nothing */
        snprintf(perm + strlen(perm), sizeof perm - strlen(perm), "%s[%d, %d]", r ? ", " : "", r,
                 r + 1);
    snprintf(buf, cap,
             "func main(xs: %s[%d,%d,%d]) {\n"
             "  s, mn, mx, mi, g0, g2, gt, sc, st, pp, pc = pmap(@body, xs, in_axes=[1], "
             "axis_name=\"i\")\n"
             "  return s, mn, mx, mi, g0, g2, gt, sc, st, pp, pc\n"
             "}\n"
             "func body(x: %s[%d,%d]) {\n"
             "  s = psum(x, axis_name=\"i\")\n"
             "  mn = pmean(x, axis_name=\"i\")\n"
             "  mx = pmax(x, axis_name=\"i\")\n"
             "  mi = pmin(x, axis_name=\"i\")\n"
             "  g0 = all_gather(x, axis_name=\"i\")\n"
             "  g2 = all_gather(x, axis_name=\"i\", axis=-1)\n"
             "  gt = all_gather(x, axis_name=\"i\", axis=1, tiled=true)\n"
             "  sc = psum_scatter(x, axis_name=\"i\")\n"
             "  st = psum_scatter(x, axis_name=\"i\", scatter_dimension=1, tiled=true)\n"
             "  pp = ppermute(x, axis_name=\"i\", perm=[%s])\n"
             "  pc = psum(x, axis_name=\"i\")\n"
             "  return s, mn, mx, mi, g0, g2, gt, sc, st, pp, pc\n"
             "}\n",
             dt, n, n, C, dt, n, C, perm);
}

/* Element [i, c] of rank k's slice: xs[i, k, c]. */
static double xk(const tg_tensor *xs, int n, int k, int i, int c) {
    return tg_tensor_get_f64(xs, ((int64_t)i * n + k) * C + c);
}

/* The sum over ranks of element [i, c], in rank order, in the dtype. */
static double ranksum(const tg_tensor *xs, int n, int i, int c) {
    tg_dtype dt = tg_tensor_dtype(xs);
    double s = xk(xs, n, 0, i, c);
    for (int k = 1; k < n; k++) s = rnd(dt, s + xk(xs, n, k, i, c));
    return s;
}

/* What output o holds at multi-index ix (rank first). */
static double expected(const tg_tensor *xs, int n, int o, const int64_t *ix) {
    tg_dtype dt = tg_tensor_dtype(xs);
    int r = (int)ix[0];
    double m;
    switch (o) {
    case 0:
    case 10:
        return ranksum(xs, n, (int)ix[1], (int)ix[2]);
    case 1:
        return rnd(dt, ranksum(xs, n, (int)ix[1], (int)ix[2]) / n);
    case 2:
    case 3:
        m = xk(xs, n, 0, (int)ix[1], (int)ix[2]);
        for (int k = 1; k < n; k++) {
            double v = xk(xs, n, k, (int)ix[1], (int)ix[2]);
            m = o == 2 ? fmax(m, v) : fmin(m, v);
        }
        return m;
    case 4: /* [r, k, i, c] */
        return xk(xs, n, (int)ix[1], (int)ix[2], (int)ix[3]);
    case 5: /* [r, i, c, k] */
        return xk(xs, n, (int)ix[3], (int)ix[1], (int)ix[2]);
    case 6: /* [r, i, k * C + c] */
        return xk(xs, n, (int)ix[2] / C, (int)ix[1], (int)ix[2] % C);
    case 7: /* [r, c]: block r of dimension 0 */
        return ranksum(xs, n, r, (int)ix[1]);
    case 8: /* [r, i, c']: block r of dimension 1 */
        return ranksum(xs, n, (int)ix[1], r * (C / n) + (int)ix[2]);
    case 9: /* [r, i, c]: rank r - 1's, zeros on rank 0 */
        return r == 0 ? 0.0 : xk(xs, n, r - 1, (int)ix[1], (int)ix[2]);
    }
    return NAN;
}

static void check_outputs(const tg_tensor *xs, int n, tg_tensor *const *out, const char *what) {
    static const int ndims[NOUT] = {3, 3, 3, 3, 4, 4, 3, 2, 3, 3, 3};
    for (int o = 0; o < NOUT; o++) {
        const int64_t *shape = tg_tensor_shape(out[o]);
        int64_t want[NOUT][4] = {{n, n, C},     {n, n, C},    {n, n, C},     {n, n, C},
                                 {n, n, n, C},  {n, n, C, n}, {n, n, n * C}, {n, C},
                                 {n, n, C / n}, {n, n, C},    {n, n, C}};
        assert_int_equal(tg_tensor_ndim(out[o]), ndims[o]);
        assert_int_equal(tg_tensor_dtype(out[o]), tg_tensor_dtype(xs));
        for (int d = 0; d < ndims[o]; d++)
            if (shape[d] != want[o][d])
                fail_msg("%s: %s has extent %lld at %d, want %lld", what, OUT_NAMES[o],
                         (long long)shape[d], d, (long long)want[o][d]);
        int64_t ix[4] = {0};
        for (int64_t e = 0; e < tg_tensor_size(out[o]); e++) {
            for (int d = ndims[o] - 1, rest = (int)e; d >= 0; d--) {
                ix[d] = rest % shape[d];
                rest /= (int)shape[d];
            }
            double got = tg_tensor_get_f64(out[o], e), exp = expected(xs, n, o, ix);
            if (got != exp)
                fail_msg("%s: %s[%lld]: got %.17g, want %.17g", what, OUT_NAMES[o], (long long)e,
                         got, exp);
        }
    }
}

/* Whether a and b hold the same bytes. */
static bool same_bits(const tg_tensor *a, const tg_tensor *b) {
    size_t bytes = (size_t)tg_tensor_size(a) * (tg_tensor_dtype(a) == TG_DT_F32 ? 4 : 8);
    return tg_tensor_size(a) == tg_tensor_size(b) &&
           memcmp(tg_tensor_data(a), tg_tensor_data(b), bytes) == 0;
}

static void check_all(const tg_mode *modes, int nmodes, const char *const *names) {
    static const int ns[] = {1, 2, 4};
    static const tg_dtype dts[] = {TG_DT_F32, TG_DT_F64};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++) {
            int n = ns[a];
            char src[4096];
            body_source(src, sizeof src, n, b ? "f64" : "f32");
            tg_module *m = parse(src);
            tg_tensor *xs = values(dts[b], 3, (int64_t[]){n, n, C}, n + b);
            for (int md = 0; md < nmodes; md++) {
                char what[64];
                snprintf(what, sizeof what, "%s, N=%d, %s", names[md], n, b ? "f64" : "f32");
                tg_fn *f = compile(m, "main", modes[md]);
                tg_tensor *first[NOUT];
                for (int call = 0; call < 3; call++) {
                    tg_tensor *out[NOUT];
                    if (tg_fn_call(f, &xs, 1, out, NOUT) != TG_OK)
                        fail_msg("%s: %s", what, tg_last_error());
                    if (call == 0) {
                        check_outputs(xs, n, out, what);
                        memcpy(first, out, sizeof out);
                        continue;
                    }
                    for (int o = 0; o < NOUT; o++) {
                        if (!same_bits(first[o], out[o]))
                            fail_msg("%s: %s differs between calls", what, OUT_NAMES[o]);
                        tg_tensor_free(out[o]);
                    }
                }
                for (int o = 0; o < NOUT; o++) tg_tensor_free(first[o]);
                tg_fn_free(f);
            }
            tg_tensor_free(xs);
            tg_module_free(m);
        }
}

static void test_results_threads(void **state) {
    (void)state;
    check_all(MODES, NMODES, MODE_NAMES);
}

static void test_results_devices(void **state) {
    (void)state;
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    check_all((const tg_mode[]){TG_MODE_VM, TG_MODE_DEBUG}, 2,
              (const char *const[]){"vm on devices", "debug on devices"});
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- nested pmaps ---- */

static const char *NESTED =
    "func main(xs: f64[2,3,4]) {\n"
    "  a, b, g, p = pmap(@mid, xs, axis_name=\"i\")\n"
    "  return a, b, g, p\n"
    "}\n"
    "func mid(x: f64[3,4]) {\n"
    "  s = psum(x, axis_name=\"i\")\n"
    "  a, b, g, p = pmap(@leaf, s, x, axis_name=\"j\")\n"
    "  return a, b, g, p\n"
    "}\n"
    "func leaf(s: f64[4], x: f64[4]) {\n"
    "  a = pmax(x, axis_name=\"i\")\n"
    "  b = psum(psum(x, axis_name=\"j\"), axis_name=\"i\")\n"
    "  g = all_gather(x, axis_name=\"i\")\n"
    "  p = ppermute(add(x, s), axis_name=\"j\", perm=[[0, 2], [2, 1], [1, 0]])\n"
    "  return a, b, g, p\n"
    "}\n";

/* xs[i, j, c]: rank (i, j) of the inner pmaps holds row j of outer rank i's slice. */
static void check_nested(tg_mode mode, const char *what) {
    tg_module *m = parse(NESTED);
    tg_tensor *xs = values(TG_DT_F64, 3, (int64_t[]){2, 3, 4}, 0.5), *out[4];
    tg_fn *f = compile(m, "main", mode);
    if (tg_fn_call(f, &xs, 1, out, 4) != TG_OK) fail_msg("%s: %s", what, tg_last_error());
#define X(i, j, c) tg_tensor_get_f64(xs, ((i)*3 + (j)) * 4 + (c))
    static const int from[3] = {1, 2, 0}; /* perm: rank dst gets rank from[dst]'s */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int c = 0; c < 4; c++) {
                int64_t e = (i * 3 + j) * 4 + c;
                double all = 0;
                for (int jj = 0; jj < 3; jj++) /* psum over j first, then over i */
                    all += X(0, jj, c);
                double all1 = 0;
                for (int jj = 0; jj < 3; jj++) all1 += X(1, jj, c);
                assert_true(tg_tensor_get_f64(out[0], e) == fmax(X(0, j, c), X(1, j, c)));
                assert_true(tg_tensor_get_f64(out[1], e) == all + all1);
                for (int k = 0; k < 2; k++) /* g[i, j, k, c] */
                    assert_true(tg_tensor_get_f64(out[2], ((i * 3 + j) * 2 + k) * 4 + c) ==
                                X(k, j, c));
                int f0 = from[j];
                assert_true(tg_tensor_get_f64(out[3], e) ==
                            X(i, f0, c) + (X(0, f0, c) + X(1, f0, c)));
            }
#undef X
    for (int o = 0; o < 4; o++) tg_tensor_free(out[o]);
    tg_tensor_free(xs);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_nested(void **state) {
    (void)state;
    for (int md = 0; md < NMODES; md++) check_nested(MODES[md], MODE_NAMES[md]);
    assert_int_equal(tg_devices_configure(2, 0), TG_OK); /* the outer on cpu:0, cpu:1 */
    check_nested(TG_MODE_VM, "vm on devices");
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* One body mapped over 2 and over 4 ranks in one function: its plans differ by size. */
static void test_two_sizes(void **state) {
    (void)state;
    tg_module *m = parse("func main(a: f32[2,3], b: f32[4,3]) {\n"
                         "  x = pmap(@g, a, axis_name=\"i\")\n"
                         "  y = pmap(@g, b, axis_name=\"i\")\n"
                         "  return x, y\n"
                         "}\n"
                         "func g(v: f32[3]) {\n"
                         "  return all_gather(v, axis_name=\"i\", tiled=true)\n"
                         "}\n");
    tg_tensor *in[2] = {values(TG_DT_F32, 2, (int64_t[]){2, 3}, 1),
                        values(TG_DT_F32, 2, (int64_t[]){4, 3}, 2)};
    for (int md = 0; md < NMODES; md++) {
        tg_fn *f = compile(m, "main", MODES[md]);
        for (int call = 0; call < 2; call++) {
            tg_tensor *out[2];
            if (tg_fn_call(f, in, 2, out, 2) != TG_OK)
                fail_msg("%s: %s", MODE_NAMES[md], tg_last_error());
            for (int k = 0; k < 2; k++) {
                int n = k ? 4 : 2;
                assert_int_equal(tg_tensor_shape(out[k])[1], 3 * n);
                for (int64_t e = 0; e < tg_tensor_size(out[k]); e++)
                    assert_true(tg_tensor_get_f64(out[k], e) ==
                                tg_tensor_get_f64(in[k], e % (3 * n)));
                tg_tensor_free(out[k]);
            }
        }
        tg_fn_free(f);
    }
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_module_free(m);
}

/* ---- a rank that fails ---- */

/* Rank `bad` (an input) takes element 3 of 3 between two psums: it fails, the others wait
 * for it in the second psum and must return. */
static const char *FAILING = "func main(xs: f32[?,3], bad: i64[]) {\n"
                             "  y = pmap(@body, xs, bad, in_axes=[0, none], axis_name=\"i\")\n"
                             "  return y\n"
                             "}\n"
                             "func body(x: f32[3], bad: i64[]) {\n"
                             "  s = psum(x, axis_name=\"i\")\n"
                             "  k = mul(eq(axis_index(axis_name=\"i\"), bad), 3)\n"
                             "  t = take(s, k)\n"
                             "  return psum(add(s, t), axis_name=\"i\")\n"
                             "}\n"
                             "func outer_fn(xs: f32[2,?,3], bad: i64[]) {\n"
                             "  y = pmap(@main, xs, bad, in_axes=[0, none], axis_name=\"o\")\n"
                             "  return y\n"
                             "}\n";

static void check_failing(tg_mode mode, const char *what) {
    tg_module *m = parse(FAILING);
    tg_fn *f = compile(m, "main", mode), *g = compile(m, "outer_fn", mode);
    for (int n = 2; n <= 4; n += 2)
        for (int bad = -1; bad < n; bad++) { /* -1: no rank fails */
            tg_tensor *in[2] = {values(TG_DT_F32, 2, (int64_t[]){n, 3}, 0),
                                tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &(int64_t){bad})};
            tg_tensor *out = NULL;
            tg_status st = tg_fn_call(f, in, 2, &out, 1);
            char want[64];
            snprintf(want, sizeof want, "pmap rank %d: test.tg:8:7: take: index 3", bad);
            if (bad < 0 && st != TG_OK) fail_msg("%s: %s", what, tg_last_error());
            if (bad >= 0 && (st == TG_OK || !strstr(tg_last_error(), want)))
                fail_msg("%s, N=%d: want '%s', got '%s'", what, n, want,
                         st == TG_OK ? "success" : tg_last_error());
            tg_tensor_free(out);
            tg_tensor_free(in[0]);
            /* the same one level down: the message of the inner rank, through the outer */
            in[0] = values(TG_DT_F32, 3, (int64_t[]){2, n, 3}, 0);
            out = NULL;
            st = tg_fn_call(g, in, 2, &out, 1);
            if (bad < 0 && st != TG_OK) fail_msg("%s: %s", what, tg_last_error());
            if (bad >= 0 && (st == TG_OK || !strstr(tg_last_error(), want)))
                fail_msg("%s, nested, N=%d: want '%s', got '%s'", what, n, want,
                         st == TG_OK ? "success" : tg_last_error());
            tg_tensor_free(out);
            tg_tensor_free(in[0]);
            tg_tensor_free(in[1]);
        }
    tg_fn_free(g);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_failing_rank(void **state) {
    (void)state;
    for (int md = 0; md < NMODES; md++) check_failing(MODES[md], MODE_NAMES[md]);
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    check_failing(TG_MODE_VM, "vm on devices");
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* perm is checked against the number of ranks, here only known when the call runs. */
static void test_perm_at_run_time(void **state) {
    (void)state;
    tg_module *m = parse("func main(xs: f64[?,3]) {\n"
                         "  return pmap(@body, xs, axis_name=\"i\")\n"
                         "}\n"
                         "func body(x: f64[3]) {\n"
                         "  return ppermute(x, axis_name=\"i\", perm=[[0, 1], [1, 3]])\n"
                         "}\n");
    for (int md = 0; md < NMODES; md++) {
        tg_fn *f = compile(m, "main", MODES[md]);
        for (int n = 2; n <= 4; n += 2) {
            tg_tensor *x = values(TG_DT_F64, 2, (int64_t[]){n, 3}, 0), *y = NULL;
            tg_status st = tg_fn_call(f, &x, 1, &y, 1);
            if (n == 2 && (st == TG_OK || !strstr(tg_last_error(), "destination 3 of pair 1")))
                fail_msg("%s: got '%s'", MODE_NAMES[md], st ? tg_last_error() : "success");
            if (n == 4) {
                if (st != TG_OK) fail_msg("%s: %s", MODE_NAMES[md], tg_last_error());
                for (int64_t e = 0; e < 12; e++) { /* rank 1 gets 0's, 3 gets 1's */
                    int r = (int)(e / 3);
                    double want = r == 1   ? tg_tensor_get_f64(x, e - 3)
                                  : r == 3 ? tg_tensor_get_f64(x, e - 6)
                                           : 0.0;
                    assert_true(tg_tensor_get_f64(y, e) == want);
                }
            }
            tg_tensor_free(y);
            tg_tensor_free(x);
        }
        tg_fn_free(f);
    }
    tg_module_free(m);
}

/* ---- threads calling one function at once ---- */

typedef struct thread_arg {
    tg_fn *f;
    tg_tensor *in;
    tg_tensor *const *want;
    int bad;
} thread_arg;

static void *caller(void *p) {
    thread_arg *a = p;
    for (int i = 0; i < 30; i++) {
        tg_tensor *got[NOUT];
        if (tg_fn_call(a->f, &a->in, 1, got, NOUT) != TG_OK) {
            a->bad++;
            continue;
        }
        for (int o = 0; o < NOUT; o++) {
            a->bad += !same_bits(got[o], a->want[o]);
            tg_tensor_free(got[o]);
        }
    }
    return NULL;
}

enum { NTHREADS = 4 };

static void check_threads(tg_mode mode, const char *what) {
    char src[4096];
    body_source(src, sizeof src, 4, "f32");
    tg_module *m = parse(src);
    tg_fn *f = compile(m, "main", mode);
    tg_tensor *xs = values(TG_DT_F32, 3, (int64_t[]){4, 4, C}, 3), *want[NOUT];
    assert_int_equal(tg_fn_call(f, &xs, 1, want, NOUT), TG_OK);
    check_outputs(xs, 4, want, what);
    thread_arg a[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (thread_arg){.f = f, .in = xs, .want = want};
        assert_int_equal(pthread_create(&th[t], NULL, caller, &a[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        if (a[t].bad) fail_msg("%s: thread %d: %d bad calls", what, t, a[t].bad);
    }
    for (int o = 0; o < NOUT; o++) tg_tensor_free(want[o]);
    tg_tensor_free(xs);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_threads(void **state) {
    (void)state;
    check_threads(TG_MODE_VM, "vm");
    check_threads(TG_MODE_REFERENCE, "reference");
    check_threads(TG_MODE_DEBUG, "debug");
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    check_threads(TG_MODE_VM, "vm on devices");
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- the C API ---- */

static void test_c_api(void **state) {
    (void)state;
    tg_graph *body = tg_graph_new(NULL, "body");
    tg_var *x = tg_input(body, "x", TG_DT_F64, 1, (int64_t[]){2});
    const int64_t perm[] = {0, 1, 1, 0};
    tg_var *bad = tg_apply(body, "ppermute", &x, 1,
                           (tg_attr[]){TG_A_STR("axis_name", "i"), TG_A_INTS("perm", perm, 3)}, 2);
    assert_null(bad);
    assert_non_null(strstr(tg_graph_error(body), "a list of pairs"));
    tg_graph_free(body);

    body = tg_graph_new(NULL, "body");
    x = tg_input(body, "x", TG_DT_F64, 1, (int64_t[]){2});
    tg_var *y = tg_apply(body, "ppermute", &x, 1,
                         (tg_attr[]){TG_A_STR("axis_name", "i"), TG_A_INTS("perm", perm, 4)}, 2);
    assert_non_null(y);
    assert_int_equal(tg_graph_set_outputs(body, &y, 1), TG_OK);
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *xs = tg_input(g, "xs", TG_DT_F64, 2, (int64_t[]){2, 2});
    tg_var *ys = tg_apply(g, "pmap", &xs, 1,
                          (tg_attr[]){TG_A_FUNC("body", body), TG_A_STR("axis_name", "i")}, 2);
    assert_non_null(ys);
    assert_int_equal(tg_graph_set_outputs(g, &ys, 1), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, &o, &f), TG_OK);
    double xv[4] = {1, 2, 3, 4};
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){2, 2}, xv), *out = NULL;
    assert_int_equal(tg_fn_call(f, &in, 1, &out, 1), TG_OK);
    double want[4] = {3, 4, 1, 2};
    for (int e = 0; e < 4; e++) assert_true(tg_tensor_get_f64(out, e) == want[e]);
    tg_tensor_free(out);
    tg_tensor_free(in);
    tg_fn_free(f);
    tg_graph_free(g);
    tg_graph_free(body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_threads), cmocka_unit_test(test_results_devices),
        cmocka_unit_test(test_nested),          cmocka_unit_test(test_two_sizes),
        cmocka_unit_test(test_failing_rank),    cmocka_unit_test(test_perm_at_run_time),
        cmocka_unit_test(test_threads),         cmocka_unit_test(test_c_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
