/* test_blas.c - the lowered BLAS ops (gemm, gemv, ger and the in-place variants) in the VM
 * against the reference kernels, and the VM's in-place memory plan.
 *
 * Graphs written by hand in .tg text run without the rewrite pipeline, in TG_MODE_VM and
 * TG_MODE_REFERENCE, with 1 and 2 threads, and must agree within a relative tolerance:
 * every operand layout of the CBLAS calls (transposed, negative and non-unit steps,
 * broadcast accumulators), beta 0 over an output full of NaN (none may leak), run-time
 * scales of 0 (0 * NaN stays NaN, alpha 0 keeps the product's inf), empty extents, and
 * products large enough to be split over the pool (by rows, by columns, or over the
 * contraction with partial products summed in thread order; 1 to 3 threads). The memory
 * plan: an in-place node shares its accumulator's block (fewer blocks than the plain op),
 * and not when the accumulator is aliased with another input. Also: the op records'
 * destroy maps; tg_vm_gemm, the product every backend calls (libxsmm or CBLAS), against a
 * loop in double; a split product's parts using the whole product's kernel; and the
 * rounding of the pass that applies a product's scales and accumulator, bit for bit. */
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

#include "backend/vm/vm.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "test.tg", &m) != TG_OK)
        fail_msg("parse: %s", tg_last_error());
    return m;
}

static tg_fn *compile(tg_graph *g, tg_mode mode, int nthreads, bool rewrite) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads, .no_rewrite = !rewrite);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

static tg_tensor *random_tensor(tg_dtype dt, int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        if (dt == TG_DT_F32)
            ((float *)tg_tensor_data(t))[i] = (float)urand();
        else
            ((double *)tg_tensor_data(t))[i] = urand();
    }
    return t;
}

static double at(const tg_tensor *t, int64_t i) {
    return tg_tensor_dtype(t) == TG_DT_F32 ? ((const float *)tg_tensor_data(t))[i]
                                           : ((const double *)tg_tensor_data(t))[i];
}

static int64_t size_of(const tg_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < tg_tensor_ndim(t); d++) n *= tg_tensor_shape(t)[d];
    return n;
}

/* got agrees with want: same shape, NaN where want has NaN, else within rtol * (1 + |w|). */
static void expect_close(const tg_tensor *want, const tg_tensor *got, double rtol,
                         const char *what) {
    assert_int_equal(tg_tensor_ndim(want), tg_tensor_ndim(got));
    for (int d = 0; d < tg_tensor_ndim(want); d++)
        assert_int_equal(tg_tensor_shape(want)[d], tg_tensor_shape(got)[d]);
    for (int64_t i = 0; i < size_of(want); i++) {
        double w = at(want, i), g = at(got, i);
        if (isnan(w) != isnan(g) || (!isnan(w) && fabs(w - g) > rtol * (1.0 + fabs(w))))
            fail_msg("%s: element %lld: want %.17g, got %.17g", what, (long long)i, w, g);
    }
}

/* Runs function `name` of src in the reference mode and the VM (1 to maxth threads, no
 * rewrites) on random inputs of the given shapes and compares the outputs. */
static void run_case_n(const char *src, const char *name, int nin, const int64_t (*shapes)[3],
                       const int *nds, tg_dtype dt, int maxth) {
    tg_module *m = parse(src);
    tg_graph *g = tg_module_find(m, name);
    assert_non_null(g);
    tg_tensor *in[8];
    for (int k = 0; k < nin; k++) in[k] = random_tensor(dt, nds[k], shapes[k]);
    tg_fn *ref = compile(g, TG_MODE_REFERENCE, 1, false);
    tg_tensor *want = NULL;
    assert_int_equal(tg_fn_call(ref, in, nin, &want, 1), TG_OK);
    for (int nth = 1; nth <= maxth; nth++) {
        tg_fn *vm = compile(g, TG_MODE_VM, nth, false);
        for (int call = 0; call < 2; call++) { /* a second call reuses the plan's blocks */
            tg_tensor *got = NULL;
            if (tg_fn_call(vm, in, nin, &got, 1) != TG_OK)
                fail_msg("%s: %s", name, tg_last_error());
            char what[128];
            snprintf(what, sizeof what, "%s %s threads=%d", name, tg_dtype_name(dt), nth);
            expect_close(want, got, dt == TG_DT_F32 ? 1e-4 : 1e-11, what);
            tg_tensor_free(got);
        }
        tg_fn_free(vm);
    }
    tg_tensor_free(want);
    for (int k = 0; k < nin; k++) tg_tensor_free(in[k]);
    tg_fn_free(ref);
    tg_module_free(m);
}

static void run_case(const char *src, const char *name, int nin, const int64_t (*shapes)[3],
                     const int *nds, tg_dtype dt) {
    run_case_n(src, name, nin, shapes, nds, dt, 2);
}

static const char *LAYOUTS =
    "func nn(C: f64[5,7], A: f64[5,6], B: f64[6,7]) {\n"
    "  y = gemm(C, A, B, alpha=0.5, beta=-2.0)\n  return y\n}\n"
    "func tt(C: f64[5,7], A: f64[6,5], B: f64[7,6]) {\n"
    "  y = gemm(C, A, B, alpha=1.5, beta=1.0, trans_a=true, trans_b=true)\n  return y\n}\n"
    "func views(C: f64[10,7], A: f64[10,12], B: f64[6,14]) {\n"
    "  y = gemm(C[::-2, ::-1], A[::-2, ::2], B[::-1, ::2], alpha=1.0, beta=1.0)\n"
    "  return y\n}\n"
    "func tviews(C: f64[5,7], A: f64[12,5], B: f64[7,12]) {\n"
    "  y = gemm(C, A[::-2], transpose(B[:, ::-2]), alpha=1.0, beta=1.0, trans_a=true)\n"
    "  return y\n}\n"
    "func row(C: f64[7], A: f64[5,6], B: f64[6,7]) {\n"
    "  y = gemm(C, A, B, alpha=1.0, beta=3.0)\n  return y\n}\n"
    "func column(C: f64[5,1], A: f64[5,6], B: f64[6,7]) {\n"
    "  y = gemm(C, A, B, alpha=1.0, beta=1.0)\n  return y\n}\n"
    "func inplace(C: f64[5,7], A: f64[5,6], B: f64[6,7]) {\n"
    "  e = exp(C)\n  y = gemm_inplace(e, A, B, alpha=1.0, beta=0.25)\n"
    "  z = gemm_inplace(y, A, B, alpha=-1.0, beta=1.0)\n  return z\n}\n"
    "func gemv_n(y: f64[10], A: f64[10,12], x: f64[24]) {\n"
    "  r = gemv(y[::-1], A, x[::-2], alpha=2.0, beta=0.5)\n  return r\n}\n"
    "func gemv_t(y: f64[6], A: f64[12,12], x: f64[12]) {\n"
    "  r = gemv(y, A[::-2, ::2], x[::2], alpha=1.0, beta=1.0, trans_a=true)\n  return r\n}\n"
    "func ger_v(A: f64[6,5], x: f64[12], y: f64[5]) {\n"
    "  r = ger(A[::-1], x[::-2], y[::-1], alpha=0.5, beta=2.0)\n  return r\n}\n"
    "func ger_in(A: f64[6,5], x: f64[6], y: f64[10]) {\n"
    "  e = exp(A)\n  r = ger_inplace(e, x, y[::2], alpha=1.0, beta=1.0)\n"
    "  s = ger_inplace(r, x, y[1::2], alpha=1.0, beta=3.0)\n  return s\n}\n";

static void test_layouts(void **state) {
    (void)state;
    struct {
        const char *name;
        int64_t shapes[3][3];
        int nds[3];
    } cases[] = {
        {"nn", {{5, 7}, {5, 6}, {6, 7}}, {2, 2, 2}},
        {"tt", {{5, 7}, {6, 5}, {7, 6}}, {2, 2, 2}},
        {"views", {{10, 7}, {10, 12}, {6, 14}}, {2, 2, 2}},
        {"tviews", {{5, 7}, {12, 5}, {7, 12}}, {2, 2, 2}},
        {"row", {{7}, {5, 6}, {6, 7}}, {1, 2, 2}},
        {"column", {{5, 1}, {5, 6}, {6, 7}}, {2, 2, 2}},
        {"inplace", {{5, 7}, {5, 6}, {6, 7}}, {2, 2, 2}},
        {"gemv_n", {{10}, {10, 12}, {24}}, {1, 2, 1}},
        {"gemv_t", {{6}, {12, 12}, {12}}, {1, 2, 1}},
        {"ger_v", {{6, 5}, {12}, {5}}, {2, 1, 1}},
        {"ger_in", {{6, 5}, {6}, {10}}, {2, 1, 1}},
    };
    for (int dt = 0; dt < 2; dt++) {
        char src[4096];
        snprintf(src, sizeof src, "%s", LAYOUTS);
        if (dt == 1) /* the same in float32 */
            for (char *p = strstr(src, "f64"); p; p = strstr(p, "f64")) memcpy(p, "f32", 3);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(src, cases[i].name, 3, cases[i].shapes, cases[i].nds,
                     dt ? TG_DT_F32 : TG_DT_F64);
    }
}

/* Large enough for the pool to split rows (and the batched path to stay correct). */
static void test_large(void **state) {
    (void)state;
    const char *src = "func big(C: f64[300,200], A: f64[300,250], B: f64[200,250]) {\n"
                      "  y = gemm(C, A, B, alpha=1.0, beta=1.0, trans_b=true)\n  return y\n}\n"
                      "func bigv(y: f64[700], A: f64[700,900], x: f64[900]) {\n"
                      "  r = gemv(y, A, x, alpha=1.0, beta=1.0)\n  return r\n}\n"
                      "func bigr(A: f64[700,300], x: f64[700], y: f64[300]) {\n"
                      "  r = ger(A, x, y, alpha=1.0, beta=1.0)\n  return r\n}\n"
                      /* outputs over 8 MiB from a kept accumulator: streaming stores */
                      "func bigs(A: f64[1100,1000], x: f64[1100], y: f64[1000]) {\n"
                      "  r = ger(A, x[::-1], y, alpha=0.5, beta=2.0)\n  return r\n}\n"
                      "func bigsf(A: f32[1100,2000], x: f32[1100], y: f32[2000]) {\n"
                      "  r = ger(A, x, y, alpha=-1.5, beta=1.0)\n  return r\n}\n";
    run_case(src, "big", 3, (const int64_t[3][3]){{300, 200}, {300, 250}, {200, 250}},
             (const int[]){2, 2, 2}, TG_DT_F64);
    run_case(src, "bigv", 3, (const int64_t[3][3]){{700}, {700, 900}, {900}},
             (const int[]){1, 2, 1}, TG_DT_F64);
    run_case(src, "bigr", 3, (const int64_t[3][3]){{700, 300}, {700}, {300}},
             (const int[]){2, 1, 1}, TG_DT_F64);
    run_case(src, "bigs", 3, (const int64_t[3][3]){{1100, 1000}, {1100}, {1000}},
             (const int[]){2, 1, 1}, TG_DT_F64);
    run_case(src, "bigsf", 3, (const int64_t[3][3]){{1100, 2000}, {1100}, {2000}},
             (const int[]){2, 1, 1}, TG_DT_F32);
}

/* ger from a kept accumulator whose output is over 8 MiB is written with streaming stores
 * (vm_blas.c, ger_row_stream); its rows have the bits the ordinary path gives the same
 * rows of a small ger. */
static void test_ger_stream_bits(void **state) {
    (void)state;
    for (int f32 = 0; f32 < 2; f32++) {
        int64_t M = 1100, N = f32 ? 2000 : 1000, R = 7; /* 8.8 MB; the small one: R rows */
        char src[512];
        const char *t = f32 ? "f32" : "f64";
        snprintf(src, sizeof src,
                 "func big(A: %s[%lld,%lld], x: %s[%lld], y: %s[%lld]) {\n"
                 "  r = ger(A, x, y, alpha=0.3, beta=1.5)\n  return r\n}\n"
                 "func small(A: %s[%lld,%lld], x: %s[%lld], y: %s[%lld]) {\n"
                 "  r = ger(A, x, y, alpha=0.3, beta=1.5)\n  return r\n}\n",
                 t, (long long)M, (long long)N, t, (long long)M, t, (long long)N, t, (long long)R,
                 (long long)N, t, (long long)R, t, (long long)N);
        tg_module *m = parse(src);
        tg_dtype dt = f32 ? TG_DT_F32 : TG_DT_F64;
        tg_tensor *A = random_tensor(dt, 2, (int64_t[]){M, N}), *x = random_tensor(dt, 1, &M);
        tg_tensor *y = random_tensor(dt, 1, &N);
        tg_tensor *As = tg_tensor_new(NULL, dt, 2, (int64_t[]){R, N}),
                  *xs = tg_tensor_new(NULL, dt, 1, &R);
        size_t es = f32 ? 4 : 8;
        memcpy(tg_tensor_data(As), tg_tensor_data(A), (size_t)(R * N) * es);
        memcpy(tg_tensor_data(xs), tg_tensor_data(x), (size_t)R * es);
        tg_tensor *in_big[3] = {A, x, y}, *in_small[3] = {As, xs, y}, *got[2] = {0};
        for (int k = 0; k < 2; k++) {
            tg_fn *vm = compile(tg_module_find(m, k ? "small" : "big"), TG_MODE_VM, 1, false);
            assert_int_equal(tg_fn_call(vm, k ? in_small : in_big, 3, &got[k], 1), TG_OK);
            tg_fn_free(vm);
        }
        assert_memory_equal(tg_tensor_data(got[0]), tg_tensor_data(got[1]), (size_t)(R * N) * es);
        tg_tensor *all[7] = {A, x, y, As, xs, got[0], got[1]};
        for (int k = 0; k < 7; k++) tg_tensor_free(all[k]);
        tg_module_free(m);
    }
}

/* Empty extents: 0 rows, 0 columns, an empty contraction (beta * C). */
static void test_empty(void **state) {
    (void)state;
    const char *src = "func k0(C: f64[3,4], A: f64[3,0], B: f64[0,4]) {\n"
                      "  y = gemm(C, A, B, alpha=1.0, beta=2.0)\n  return y\n}\n"
                      "func m0(C: f64[0,4], A: f64[0,5], B: f64[5,4]) {\n"
                      "  y = gemm(C, A, B, alpha=1.0, beta=1.0)\n  return y\n}\n"
                      "func k0z(C: f64[3,4], A: f64[3,0], B: f64[0,4]) {\n"
                      "  y = gemm(C, A, B, alpha=1.0, beta=0.0)\n  return y\n}\n"
                      "func v0(y: f64[3], A: f64[3,0], x: f64[0]) {\n"
                      "  r = gemv(y, A, x, alpha=1.0, beta=-1.0)\n  return r\n}\n"
                      "func g0(A: f64[0,3], x: f64[0], y: f64[3]) {\n"
                      "  r = ger(A, x, y, alpha=1.0, beta=1.0)\n  return r\n}\n";
    run_case(src, "k0", 3, (const int64_t[3][3]){{3, 4}, {3, 0}, {0, 4}}, (const int[]){2, 2, 2},
             TG_DT_F64);
    run_case(src, "m0", 3, (const int64_t[3][3]){{0, 4}, {0, 5}, {5, 4}}, (const int[]){2, 2, 2},
             TG_DT_F64);
    run_case(src, "k0z", 3, (const int64_t[3][3]){{3, 4}, {3, 0}, {0, 4}}, (const int[]){2, 2, 2},
             TG_DT_F64);
    run_case(src, "v0", 3, (const int64_t[3][3]){{3}, {3, 0}, {0}}, (const int[]){1, 2, 1},
             TG_DT_F64);
    run_case(src, "g0", 3, (const int64_t[3][3]){{0, 3}, {0}, {3}}, (const int[]){2, 1, 1},
             TG_DT_F64);
}

/* beta 0 never reads the output: NaN in the caller's destination must not leak. A scale
 * of 0 known only at run time keeps IEEE's 0 * NaN = NaN (accumulator) and 0 * inf = NaN
 * (product), as the unlowered graph does. */
static void test_nan_rules(void **state) {
    (void)state;
    const char *src = "func fresh(A: f64[4,3], B: f64[3,5]) {\n"
                      "  y = gemm(0, A, B, alpha=1.0, beta=0.0)\n  return y\n}\n"
                      "func fresh_ger(x: f64[4], y: f64[5]) {\n"
                      "  r = ger(0, x, y, alpha=1.0, beta=0.0)\n  return r\n}\n"
                      "func scaled(C: f64[4,5], A: f64[4,3], B: f64[3,5], a: f64[], b: f64[]) {\n"
                      "  y = gemm(C, A, B, a, b, alpha=1.0, beta=1.0)\n  return y\n}\n";
    tg_module *m = parse(src);
    for (int which = 0; which < 2; which++) {
        tg_graph *g = tg_module_find(m, which ? "fresh_ger" : "fresh");
        tg_tensor *in[2];
        if (which) {
            in[0] = random_tensor(TG_DT_F64, 1, (int64_t[]){4});
            in[1] = random_tensor(TG_DT_F64, 1, (int64_t[]){5});
        } else {
            in[0] = random_tensor(TG_DT_F64, 2, (int64_t[]){4, 3});
            in[1] = random_tensor(TG_DT_F64, 2, (int64_t[]){3, 5});
        }
        tg_tensor *out = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){4, 5});
        for (int i = 0; i < 20; i++) ((double *)tg_tensor_data(out))[i] = NAN;
        tg_fn *vm = compile(g, TG_MODE_VM, 1, false);
        tg_tensor *outs[1] = {out};
        assert_int_equal(tg_fn_call_into(vm, in, 2, outs, 1), TG_OK);
        for (int i = 0; i < 20; i++) assert_false(isnan(((double *)tg_tensor_data(out))[i]));
        tg_fn_free(vm);
        tg_tensor_free(out);
        tg_tensor_free(in[0]);
        tg_tensor_free(in[1]);
    }
    tg_graph *g = tg_module_find(m, "scaled");
    tg_tensor *in[5] = {random_tensor(TG_DT_F64, 2, (int64_t[]){4, 5}),
                        random_tensor(TG_DT_F64, 2, (int64_t[]){4, 3}),
                        random_tensor(TG_DT_F64, 2, (int64_t[]){3, 5}),
                        tg_tensor_new(NULL, TG_DT_F64, 0, NULL),
                        tg_tensor_new(NULL, TG_DT_F64, 0, NULL)};
    ((double *)tg_tensor_data(in[0]))[7] = NAN;      /* C[1, 2] */
    ((double *)tg_tensor_data(in[1]))[0] = INFINITY; /* A[0, 0]: row 0 of A B is inf */
    tg_fn *vm = compile(g, TG_MODE_VM, 1, false), *ref = compile(g, TG_MODE_REFERENCE, 1, false);
    for (int c = 0; c < 3; c++) {
        *(double *)tg_tensor_data(in[3]) = c == 1 ? 0.0 : 1.0; /* a */
        *(double *)tg_tensor_data(in[4]) = c == 2 ? 0.0 : 1.0; /* b */
        tg_tensor *want = NULL, *got = NULL;
        assert_int_equal(tg_fn_call(ref, in, 5, &want, 1), TG_OK);
        assert_int_equal(tg_fn_call(vm, in, 5, &got, 1), TG_OK);
        assert_true(isnan(at(got, 7)));             /* NaN of C stays (b = 0 too) */
        if (c == 1) assert_true(isnan(at(got, 0))); /* 0 * inf */
        expect_close(want, got, 1e-12, "scaled");
        tg_tensor_free(want);
        tg_tensor_free(got);
    }
    for (int k = 0; k < 5; k++) tg_tensor_free(in[k]);
    tg_fn_free(vm);
    tg_fn_free(ref);
    tg_module_free(m);
}

/* The plan gives an in-place node its accumulator's block: a chain of in-place products
 * over a computed value needs fewer blocks than the same chain of plain ones; an
 * accumulator aliased with another input of the node is not overwritten. */
static int blocks_of(const char *src, const char *name, int nin, tg_tensor **in,
                     tg_tensor **result) {
    tg_module *m = parse(src);
    tg_graph *g = tg_module_find(m, name);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 1, .no_rewrite = true);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    assert_int_equal(tg_vm_call(vm, in, nin, result, 1, false), TG_OK);
    tg_vm_stats st;
    tg_vm_get_stats(vm, &st);
    tg_vm_free(vm);
    tg_module_free(m);
    return st.nblocks;
}

static void test_inplace_plan(void **state) {
    (void)state;
    const char *src =
        "func plain(C: f64[64,64], A: f64[64,64]) {\n"
        "  e = exp(C)\n  y = gemm(e, A, A, alpha=1.0, beta=1.0)\n"
        "  z = gemm(y, A, A, alpha=1.0, beta=1.0)\n  w = tanh(z)\n  return w\n}\n"
        "func inplace(C: f64[64,64], A: f64[64,64]) {\n"
        "  e = exp(C)\n  y = gemm_inplace(e, A, A, alpha=1.0, beta=1.0)\n"
        "  z = gemm_inplace(y, A, A, alpha=1.0, beta=1.0)\n  w = tanh(z)\n  return w\n}\n"
        "func aliased(C: f64[64,64], A: f64[64,64]) {\n"
        "  e = exp(C)\n  y = gemm_inplace(e, e, transpose(e), alpha=1.0, beta=1.0)\n"
        "  w = tanh(y)\n  return w\n}\n"
        "func aliased_ref(C: f64[64,64], A: f64[64,64]) {\n"
        "  e = exp(C)\n  y = gemm(e, e, transpose(e), alpha=1.0, beta=1.0)\n"
        "  w = tanh(y)\n  return w\n}\n";
    tg_tensor *in[2] = {random_tensor(TG_DT_F64, 2, (int64_t[]){64, 64}),
                        random_tensor(TG_DT_F64, 2, (int64_t[]){64, 64})};
    tg_tensor *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL;
    int plain = blocks_of(src, "plain", 2, in, &r1);
    int inplace = blocks_of(src, "inplace", 2, in, &r2);
    assert_true(inplace < plain);
    expect_close(r1, r2, 1e-12, "inplace chain");
    blocks_of(src, "aliased", 2, in, &r3);
    blocks_of(src, "aliased_ref", 2, in, &r4);
    expect_close(r4, r3, 1e-12, "aliased");
    tg_tensor_free(r1);
    tg_tensor_free(r2);
    tg_tensor_free(r3);
    tg_tensor_free(r4);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
}

/* Products split over the pool (vm_blas.c, split_of): over N (X θ, X 10000 x 20), over
 * the contraction K with per-thread partial products summed in thread order (rᵀ X, Xᵀ r,
 * a long dot), at 1, 2 and 3 threads, with K not divisible by the thread count, K smaller
 * than the thread count and an empty K; kept accumulators (broadcast, reversed, under a K
 * split) read by each part. */
static const char *SPLITS =
    "func xt(C: f64[1,10001], t: f64[1,20], X: f64[10001,20]) {\n"
    "  y = gemm(C, t, X, alpha=1.0, beta=0.0, trans_b=true)\n  return y\n}\n"
    "func rx(C: f64[1,20], r: f64[1,10001], X: f64[10001,20]) {\n"
    "  e = exp(C)\n  y = gemm_inplace(e, r, X, alpha=-0.5, beta=2.0)\n  return y\n}\n"
    "func xtr(y: f64[20], X: f64[9997,20], r: f64[9997]) {\n"
    "  z = gemv(y, X, r, alpha=1.0, beta=1.0, trans_a=true)\n  return z\n}\n"
    "func xtr_view(y: f64[20], X: f64[19998,20], r: f64[9999]) {\n"
    "  z = gemv(y, X[::-2], r[::-1], alpha=1.0, beta=0.0, trans_a=true)\n  return z\n}\n"
    "func mm(a: f64[4,20001], b: f64[20001,5]) {\n  y = matmul(a, b)\n  return y\n}\n"
    "func vv(a: f64[80001], b: f64[80001]) {\n  y = dot(a, b)\n  return y\n}\n"
    "func k2(C: f64[3,40000], A: f64[3,2], B: f64[2,40000]) {\n"
    "  y = gemm(C, A, B, alpha=1.0, beta=1.0)\n  return y\n}\n"
    "func k0(C: f64[1,100000], A: f64[1,0], B: f64[0,100000]) {\n"
    "  y = gemm(C, A, B, alpha=1.0, beta=3.0)\n  return y\n}\n"
    /* kept accumulators read in place by each thread's part: a broadcast row, reversed
       axes, and a K split (thread 0 adds into a copy of it) */
    "func bias(b: f64[256], A: f64[256,300], B: f64[300,256]) {\n"
    "  y = gemm(b, A, B, alpha=0.5, beta=2.0)\n  return y\n}\n"
    "func rev(C: f64[256,256], A: f64[256,300], B: f64[300,256]) {\n"
    "  y = gemm(C[::-1, ::-1], A, B, alpha=1.0, beta=-1.0)\n  return y\n}\n"
    "func ksrc(C: f64[4,5], A: f64[4,20000], B: f64[20000,5]) {\n"
    "  y = gemm(C, A, B, alpha=1.5, beta=2.0)\n  return y\n}\n";

/* Whether node 'op' of function name splits over nth threads (static types). */
static bool splits(tg_module *m, const char *name, const char *op, int nth) {
    tg_graph *g = tg_module_find(m, name);
    assert_non_null(g);
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *n = ((tg_node **)g->nodes.items)[i];
        if (strcmp(tg_op_table[n->op]->name, op) != 0) continue;
        tg_type in[8], out[1];
        for (int k = 0; k < n->nin && k < 8; k++) in[k] = n->in[k]->type;
        out[0] = n->out[0]->type;
        return tg_vm_blas_splits(n, in, out, nth);
    }
    fail_msg("%s: no %s", name, op);
    return false;
}

static void test_split(void **state) {
    (void)state;
    struct {
        const char *name, *op;
        int64_t shapes[3][3];
        int nds[3];
        int nin;
        bool split; /* at 2 threads */
    } cases[] = {
        {"xt", "gemm", {{1, 10001}, {1, 20}, {10001, 20}}, {2, 2, 2}, 3, true},
        {"rx", "gemm_inplace", {{1, 20}, {1, 10001}, {10001, 20}}, {2, 2, 2}, 3, true},
        {"xtr", "gemv", {{20}, {9997, 20}, {9997}}, {1, 2, 1}, 3, true},
        {"xtr_view", "gemv", {{20}, {19998, 20}, {9999}}, {1, 2, 1}, 3, true},
        {"mm", "matmul", {{4, 20001}, {20001, 5}}, {2, 2}, 2, true},
        {"vv", "dot", {{80001}, {80001}}, {1, 1}, 2, true},
        {"k2", "gemm", {{3, 40000}, {3, 2}, {2, 40000}}, {2, 2, 2}, 3, true},
        {"k0", "gemm", {{1, 100000}, {1, 0}, {0, 100000}}, {2, 2, 2}, 3, false},
        {"bias", "gemm", {{256}, {256, 300}, {300, 256}}, {1, 2, 2}, 3, true},
        {"rev", "gemm", {{256, 256}, {256, 300}, {300, 256}}, {2, 2, 2}, 3, true},
        {"ksrc", "gemm", {{4, 5}, {4, 20000}, {20000, 5}}, {2, 2, 2}, 3, true},
    };
    for (int dt = 0; dt < 2; dt++) {
        static char src[4096];
        snprintf(src, sizeof src, "%s", SPLITS);
        if (dt == 1) /* the same in float32 */
            for (char *p = strstr(src, "f64"); p; p = strstr(p, "f64")) memcpy(p, "f32", 3);
        tg_module *m = parse(src);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            assert_int_equal(splits(m, cases[i].name, cases[i].op, 2), cases[i].split);
            assert_false(splits(m, cases[i].name, cases[i].op, 1));
            run_case_n(src, cases[i].name, cases[i].nin, cases[i].shapes, cases[i].nds,
                       dt ? TG_DT_F32 : TG_DT_F64, 3);
        }
        tg_module_free(m);
    }
}

/* Products that threads run at once (the pool's split parts, batches, concurrent nodes)
 * each get the bits one thread alone gets. OpenBLAS's serial build shares a table of
 * packing buffers between calls; vm_blas.c locks it (test_blas_oldcore runs this on a
 * core whose kernels take a buffer for every call). */
enum { CONC_THREADS = 3, CONC_CALLS = 2000, CONC_M = 4, CONC_N = 5, CONC_K = 6667 };

typedef struct conc_arg {
    float a[CONC_M * CONC_K], b[CONC_K * CONC_N], want[CONC_M * CONC_N];
    int bad;
} conc_arg;

static void *conc_run(void *p) {
    conc_arg *c = p;
    for (int it = 0; it < CONC_CALLS; it++) {
        float got[CONC_M * CONC_N];
        tg_vm_gemm(false, false, false, CONC_M, CONC_N, CONC_K, 1.0, c->a, CONC_K, c->b, CONC_N,
                   0.0, got, CONC_N);
        if (memcmp(got, c->want, sizeof got) != 0) c->bad++;
    }
    return NULL;
}

static void test_concurrent_calls(void **state) {
    (void)state;
    static conc_arg args[CONC_THREADS];
    for (int t = 0; t < CONC_THREADS; t++) {
        conc_arg *c = &args[t];
        for (int i = 0; i < CONC_M * CONC_K; i++) c->a[i] = (float)urand();
        for (int i = 0; i < CONC_K * CONC_N; i++) c->b[i] = (float)urand();
        tg_vm_gemm(false, false, false, CONC_M, CONC_N, CONC_K, 1.0, c->a, CONC_K, c->b, CONC_N,
                   0.0, c->want, CONC_N);
        c->bad = 0;
    }
    pthread_t th[CONC_THREADS];
    for (int t = 0; t < CONC_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, conc_run, &args[t]), 0);
    for (int t = 0; t < CONC_THREADS; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < CONC_THREADS; t++)
        if (args[t].bad)
            fail_msg("thread %d: %d of %d concurrent products differ from one thread's", t,
                     args[t].bad, CONC_CALLS);
}

static void test_records(void **state) {
    (void)state;
    const char *inplace[] = {"gemm_inplace", "gemv_inplace", "ger_inplace"};
    const char *plain[] = {"gemm", "gemv", "ger"};
    for (int i = 0; i < 3; i++) {
        const tg_op_def *p = tg_op_table[tg_op_lookup(plain[i])];
        const tg_op_def *q = tg_op_table[tg_op_lookup(inplace[i])];
        assert_int_equal(p->destroys, 0);
        assert_int_equal(q->destroys, 1u);
        assert_ptr_equal(p->infer, q->infer);
        assert_ptr_equal(p->ref, q->ref);
        assert_int_equal(p->grad, TG_GRAD_UNDEFINED);
    }
    /* only these ops destroy an input */
    for (int i = 0; i < TG_OP_COUNT; i++)
        if (tg_op_table[i]->destroys) assert_non_null(strstr(tg_op_table[i]->name, "_inplace"));
    /* user errors are messages, not crashes */
    tg_module *m = NULL;
    const char *bad = "func f(C: i32[2,2], A: i32[2,2]) {\n"
                      "  y = gemm(C, A, A, alpha=1.0, beta=1.0)\n  return y\n}\n";
    assert_int_not_equal(tg_module_parse(NULL, bad, strlen(bad), "bad.tg", &m), TG_OK);
    assert_non_null(strstr(tg_last_error(), "float32 or float64"));
    const char *shape = "func f(C: f64[3,3], A: f64[2,2]) {\n"
                        "  y = gemm(C, A, A, alpha=1.0, beta=1.0)\n  return y\n}\n";
    assert_int_not_equal(tg_module_parse(NULL, shape, strlen(shape), "bad.tg", &m), TG_OK);
    assert_non_null(strstr(tg_last_error(), "does not broadcast"));
}

/* tg_vm_gemm, the product every backend calls (libxsmm's generated kernels for small
 * products when built with it, else CBLAS), against a loop in double: both dtypes, every
 * transpose pair, leading dimensions wider than the rows, alpha 1 and 0.5, beta 0 (over C
 * full of NaN: none may leak), 1 and 2; extents that use libxsmm's direct kernel, its
 * scratch blocks of rows with a shorter last block (300 columns of f64: 13 rows a block),
 * and extents beyond its bounds (CBLAS). */
static void test_gemm_entry(void **state) {
    (void)state;
    static const int64_t ext[][3] = {{3, 5, 7}, {64, 64, 64}, {100, 300, 37}, {1100, 3, 2}};
    static const double scales[][2] = {{1, 0}, {1, 1}, {0.5, 0}, {0.5, 1}, {1, 2}, {0.5, 2}};
    for (size_t e = 0; e < sizeof ext / sizeof ext[0]; e++) {
        int64_t M = ext[e][0], N = ext[e][1], K = ext[e][2], pad = 3;
        int64_t ldmax = (M > N ? M : N) + pad, big = (ldmax > K + pad ? ldmax : K + pad);
        double *A = malloc(sizeof *A * (size_t)(big * big)),
               *B = malloc(sizeof *B * (size_t)(big * big));
        double *C0 = malloc(sizeof *C0 * (size_t)(M * (N + pad)));
        void *a = malloc(8 * (size_t)(big * big)), *b = malloc(8 * (size_t)(big * big));
        void *c = malloc(8 * (size_t)(M * (N + pad)));
        assert_true(A && B && C0 && a && b && c);
        for (int64_t i = 0; i < big * big; i++) {
            A[i] = (double)((i * 7919) % 23) / 11.0 - 1.0;
            B[i] = (double)((i * 104729) % 19) / 9.0 - 1.0;
        }
        for (int64_t i = 0; i < M * (N + pad); i++) C0[i] = (double)(i % 13) / 6.0 - 1.0;
        for (int f64 = 0; f64 < 2; f64++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (size_t sc = 0; sc < sizeof scales / sizeof scales[0]; sc++) {
                        double alpha = scales[sc][0], beta = scales[sc][1];
                        int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
                        for (int64_t i = 0; i < big * big; i++) {
                            if (f64) {
                                ((double *)a)[i] = A[i];
                                ((double *)b)[i] = B[i];
                            } else {
                                ((float *)a)[i] = (float)A[i];
                                ((float *)b)[i] = (float)B[i];
                            }
                        }
                        for (int64_t i = 0; i < M * ldc; i++) {
                            double v = beta == 0 ? NAN : C0[i];
                            if (f64)
                                ((double *)c)[i] = v;
                            else
                                ((float *)c)[i] = (float)v;
                        }
                        tg_vm_gemm(f64, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
                        double worst = 0;
                        for (int64_t m = 0; m < M; m++)
                            for (int64_t n = 0; n < N; n++) {
                                double acc = 0, mag = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    double x = ta ? A[k * lda + m] : A[m * lda + k];
                                    double y = tb ? B[n * ldb + k] : B[k * ldb + n];
                                    if (!f64) x = (float)x, y = (float)y;
                                    acc += x * y;
                                    mag += fabs(x * y);
                                }
                                double cv = f64 ? C0[m * ldc + n] : (float)C0[m * ldc + n];
                                double want = alpha * acc + (beta == 0 ? 0 : beta * cv);
                                double got =
                                    f64 ? ((double *)c)[m * ldc + n] : ((float *)c)[m * ldc + n];
                                double err = fabs(got - want) / (mag + fabs(beta * cv) + 1e-30);
                                if (!(err <= worst)) worst = err; /* NaN counts */
                            }
                        if (!(worst <= (f64 ? 1e-13 : 1e-5)))
                            fail_msg("gemm %lldx%lldx%lld f%d ta %d tb %d alpha %g beta %g: "
                                     "relative error %g",
                                     (long long)M, (long long)N, (long long)K, f64 ? 64 : 32, ta,
                                     tb, alpha, beta, worst);
                        /* the padding of C is untouched */
                        for (int64_t m = 0; m < M; m++)
                            for (int64_t n = N; n < ldc; n++) {
                                double v =
                                    f64 ? ((double *)c)[m * ldc + n] : ((float *)c)[m * ldc + n];
                                double w = beta == 0
                                               ? NAN
                                               : (f64 ? C0[m * ldc + n] : (float)C0[m * ldc + n]);
                                if (!(v == w || (isnan(v) && isnan(w))))
                                    fail_msg("gemm %lldx%lldx%lld wrote past N", (long long)M,
                                             (long long)N, (long long)K);
                            }
                    }
        free(A);
        free(B);
        free(C0);
        free(a);
        free(b);
        free(c);
    }
}

/* dot(A[M,K], B[K,N]) in f64 split over nth threads has the bits it has on one. */
static void same_bits_split(int64_t M, int64_t K, int64_t N, int nth) {
    char src[256];
    snprintf(src, sizeof src,
             "func f(A: f64[%lld,%lld], B: f64[%lld,%lld]) {\n"
             "  y = dot(A, B)\n  return y\n}\n",
             (long long)M, (long long)K, (long long)K, (long long)N);
    tg_module *m = parse(src);
    tg_graph *g = tg_module_find(m, "f");
    int64_t sa[3] = {M, K}, sb[3] = {K, N};
    tg_tensor *in[2] = {random_tensor(TG_DT_F64, 2, sa), random_tensor(TG_DT_F64, 2, sb)};
    assert_true(splits(m, "f", "dot", nth));
    tg_tensor *got[2] = {0};
    for (int k = 0; k < 2; k++) {
        tg_fn *vm = compile(g, TG_MODE_VM, k ? nth : 1, false);
        assert_int_equal(tg_fn_call(vm, in, 2, &got[k], 1), TG_OK);
        tg_fn_free(vm);
    }
    assert_memory_equal(tg_tensor_data(got[0]), tg_tensor_data(got[1]), (size_t)(M * N) * 8);
    for (int k = 0; k < 2; k++) {
        tg_tensor_free(got[k]);
        tg_tensor_free(in[k]);
    }
    tg_module_free(m);
}

/* Each part of a split product computes its elements as one thread would: a product above
 * libxsmm's bounds (1024 x 256 x 512 = 2^27 multiply-adds) split by rows over 2 threads
 * into halves within them uses the whole product's kernel; 45 rows over 12 threads in
 * chunks of 4 leave the last thread one row, which stays a gemm (a gemv would sum in
 * another order). */
static void test_split_same_kernel(void **state) {
    (void)state;
    same_bits_split(1024, 512, 256, 2);
    same_bits_split(45, 1024, 45, 12);
}

/* The pass that finishes a product, C = alpha P + beta Z, rounds as the formula written
 * plainly does: alpha P rounded, beta Z rounded, then the sum (no contraction into an FMA,
 * whatever instruction set the kernels use). A and B hold small integers, so P is exact
 * and the expected value is computed here; bit for bit, for each kind of accumulator: a
 * full matrix, a broadcast row, a broadcast column, every other column, both axes
 * reversed, and the accumulator overwritten in place (gemm_inplace, its input negated
 * first so that its block is the function's own; not with scales 1 and 1, where the
 * kernel adds the product into C itself and there is no closing pass). */
enum { CP_FULL, CP_ROW, CP_COL, CP_STEP2, CP_REV, CP_INPLACE, CP_KINDS };

static void closing_pass_case(bool f64, int kind, double alpha, double beta) {
    enum { M = 20, N = 40, K = 16 };
    const char *dt = f64 ? "f64" : "f32";
    static const char *const acc[CP_KINDS] = {"C", "C", "C", "C[:, ::2]", "C[::-1, ::-1]", ""};
    int64_t cs[2] = {M, N};
    int cnd = 2;
    if (kind == CP_ROW) cnd = 1, cs[0] = N;
    if (kind == CP_COL) cs[1] = 1;
    if (kind == CP_STEP2) cs[1] = 2 * N;
    char cty[64], src[512];
    if (cnd == 1)
        snprintf(cty, sizeof cty, "%s[%lld]", dt, (long long)cs[0]);
    else
        snprintf(cty, sizeof cty, "%s[%lld,%lld]", dt, (long long)cs[0], (long long)cs[1]);
    if (kind == CP_INPLACE)
        snprintf(src, sizeof src,
                 "func f(C: %s, A: %s[%d,%d], B: %s[%d,%d]) {\n  e = neg(C)\n"
                 "  y = gemm_inplace(e, A, B, alpha=%.17g, beta=%.17g)\n  return neg(y)\n}\n",
                 cty, dt, M, K, dt, K, N, alpha, beta);
    else
        snprintf(src, sizeof src,
                 "func f(C: %s, A: %s[%d,%d], B: %s[%d,%d]) {\n"
                 "  return gemm(%s, A, B, alpha=%.17g, beta=%.17g)\n}\n",
                 cty, dt, M, K, dt, K, N, acc[kind], alpha, beta);
    tg_module *m = parse(src);
    tg_dtype D = f64 ? TG_DT_F64 : TG_DT_F32;
    tg_tensor *in[3] = {random_tensor(D, cnd, cs), tg_tensor_new(NULL, D, 2, (int64_t[]){M, K}),
                        tg_tensor_new(NULL, D, 2, (int64_t[]){K, N})};
    for (int k = 1; k < 3; k++)
        for (int64_t i = 0; i < size_of(in[k]); i++) {
            double v = (double)((int)(urand() * 4.0));
            if (f64)
                ((double *)tg_tensor_data(in[k]))[i] = v;
            else
                ((float *)tg_tensor_data(in[k]))[i] = (float)v;
        }
    tg_fn *vm = compile(tg_module_find(m, "f"), TG_MODE_VM, 1, false);
    tg_tensor *out = NULL;
    assert_int_equal(tg_fn_call(vm, in, 3, &out, 1), TG_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double p = 0.0;
            for (int k = 0; k < K; k++) p += at(in[1], i * K + k) * at(in[2], k * N + j);
            int64_t zi = kind == CP_ROW     ? j
                         : kind == CP_COL   ? i
                         : kind == CP_STEP2 ? i * 2 * N + 2 * j
                         : kind == CP_REV   ? (M - 1 - i) * N + (N - 1 - j)
                                            : i * N + j;
            double z = kind == CP_INPLACE ? -at(in[0], zi) : at(in[0], zi);
            double want, got = at(out, i * N + j);
            if (kind == CP_INPLACE) got = -got;
            if (f64) {
                volatile double ap = alpha * p, bz = beta * z;
                want = ap + bz;
            } else {
                volatile float ap = (float)alpha * (float)p, bz = (float)beta * (float)z;
                want = (float)(ap + bz);
            }
            if (want != got)
                fail_msg("%s kind %d alpha %g beta %g at (%d, %d): %.17g, want %.17g", dt, kind,
                         alpha, beta, i, j, got, want);
        }
    tg_tensor_free(out);
    tg_fn_free(vm);
    for (int k = 0; k < 3; k++) tg_tensor_free(in[k]);
    tg_module_free(m);
}

static void test_closing_pass_bits(void **state) {
    (void)state;
    static const double sc[][2] = {{0.1, 0.3}, {1.0, 0.3}, {0.1, 1.0}, {1.0, 1.0}, {-1.5, -2.0}};
    for (int f64 = 0; f64 < 2; f64++)
        for (int kind = 0; kind < CP_KINDS; kind++)
            for (size_t s = 0; s < sizeof sc / sizeof *sc; s++)
                if (kind != CP_INPLACE || sc[s][0] != 1.0 || sc[s][1] != 1.0)
                    closing_pass_case(f64, kind, sc[s][0], sc[s][1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_same_kernel),
        cmocka_unit_test(test_ger_stream_bits),
        cmocka_unit_test(test_gemm_entry),
        cmocka_unit_test(test_closing_pass_bits),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_nan_rules),
        cmocka_unit_test(test_inplace_plan),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_concurrent_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
