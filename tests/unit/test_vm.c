/* test_vm.c - the VM (src/backend/vm) against the reference interpreter.
 *
 * Every elementwise op in every dtype it takes, reductions, dot and matmul, views,
 * self-allocating ops and fused nodes run through TG_MODE_VM and TG_MODE_REFERENCE on the
 * same inputs and must agree: bit for bit where vkernels.h says so, within documented
 * ULP bounds for SLEEF's transcendentals, within a relative tolerance for float sums and
 * BLAS products. Sizes exercise the vector tails (0, 1, 3, 7, 8, 9, 1023, 1025, 100003),
 * the blocking and the thread split (pools of 1 and 2 threads); layouts include
 * broadcasting, negative strides and transposed inputs. Also: buffers reused across calls,
 * new plans for new shapes of '?' inputs (and eviction), tg_fn_call_into (shapes checked,
 * strided and aliased destinations, in both modes), run-time errors naming the node,
 * profiling, allocation failures, and the accuracy of SLEEF's functions in every kernel
 * table this CPU runs, measured over many values against libm.
 * Runs under AddressSanitizer, UndefinedBehaviorSanitizer and ThreadSanitizer in CI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fault_alloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vm/vm.h"
#include "backend/vm/vkernels.h"

/* Sanitizer builds are 10-20 times slower: they run the large sizes on fewer cases. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

/* ---- helpers ---- */

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double urand(void) { return (double)(rnd() >> 11) * 0x1.0p-53; }
static double uniform(double lo, double hi) { return lo + (hi - lo) * urand(); }

static const int64_t SIZES[] = {0, 1, 3, 7, 8, 9, 1023, 1025, 100003};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* Distance in units in the last place, with -0.0 and +0.0 one apart and NaN equal to
 * NaN (any payload). */
static int64_t key64(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? INT64_MIN - i - 1 : i;
}
static int64_t key32(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i - 1 : i;
}
static uint64_t ulps(double a, double b, tg_dtype dt) {
    if (isnan(a) && isnan(b)) return 0;
    if (isnan(a) || isnan(b)) return UINT64_MAX;
    int64_t ka = dt == TG_DT_F32 ? key32((float)a) : key64(a);
    int64_t kb = dt == TG_DT_F32 ? key32((float)b) : key64(b);
    return ka > kb ? (uint64_t)ka - (uint64_t)kb : (uint64_t)kb - (uint64_t)ka;
}

/* Compares got with ref (same dtype and shape): integers and bool exactly, floats within
 * max_ulps or a relative error rtol (0: ULPs only). */
static void expect_close(const tg_tensor *ref, const tg_tensor *got, uint64_t max_ulps, double rtol,
                         const char *what) {
    assert_non_null(ref);
    assert_non_null(got);
    tg_dtype dt = tg_tensor_dtype(ref);
    if (tg_tensor_dtype(got) != dt || tg_tensor_ndim(got) != tg_tensor_ndim(ref))
        fail_msg("%s: dtype/rank differ", what);
    for (int d = 0; d < tg_tensor_ndim(ref); d++)
        if (tg_tensor_shape(ref)[d] != tg_tensor_shape(got)[d]) fail_msg("%s: shapes differ", what);
    int64_t n = tg_tensor_size(ref);
    for (int64_t i = 0; i < n; i++) {
        double a = tg_tensor_get_f64(ref, i), b = tg_tensor_get_f64(got, i);
        bool ok;
        if (tg_dtype_is_float(dt)) {
            uint64_t u = ulps(a, b, dt);
            ok = u <= max_ulps || (rtol > 0 && fabs(a - b) <= rtol * fmax(fabs(a), 1.0));
            if (!ok && rtol > 0 && isinf(a) && a == b) ok = true;
        } else {
            ok = a == b;
        }
        if (!ok) fail_msg("%s: element %lld: reference %.17g, vm %.17g", what, (long long)i, a, b);
    }
}

static tg_tensor *tensor_of(tg_dtype dt, int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    return t;
}

static void store(tg_tensor *t, int64_t i, double v) {
    tg_dtype dt = tg_tensor_dtype(t);
    char *p = (char *)tg_tensor_data(t) + (size_t)i * tg_dtype_size(dt);
    if (tg_dtype_is_float(dt))
        tg_store_f64(p, dt, v);
    else
        tg_store_i64(p, dt, (int64_t)v);
}

/* Values for op input k: a few special values first, then random ones of a range that
 * suits the op and dtype. */
static void fill_for(tg_tensor *t, const char *op, int k) {
    static const double specials[] = {0.0,  -0.0,      INFINITY, -INFINITY, NAN,      1.0,     -1.0,
                                      0.5,  2.5,       -2.5,     1e-310,    1e300,    -1e300,  3.0,
                                      1e-3, 0x1p-1022, 0x1p1023, 0x1p-1060, 0x1p-140, 0x1p-126};
    tg_dtype dt = tg_tensor_dtype(t);
    int64_t n = tg_tensor_size(t);
    bool fl = tg_dtype_is_float(dt);
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (dt == TG_DT_BOOL) {
            v = (double)(rnd() & 1);
        } else if (!fl) {
            bool shift = strstr(op, "shift") != NULL, pw = strcmp(op, "pow") == 0;
            if (k == 1 && shift)
                v = (double)((int64_t)(rnd() % 80) - 5);
            else if (k == 1 && pw)
                v = (double)(rnd() % 12);
            else if (dt == TG_DT_U8)
                v = (double)(rnd() % 256);
            else if (dt == TG_DT_I8)
                v = (double)((int64_t)(rnd() % 256) - 128);
            else
                v = (double)((int64_t)(rnd() % 2001) - 1000);
        } else if (i < (int64_t)(sizeof specials / sizeof specials[0]) && (i + k) % 3 != 2) {
            v = specials[i];
        } else if (strcmp(op, "pow") == 0) {
            v = k == 0 ? uniform(0.0, 8.0) : uniform(-12.0, 12.0);
        } else {
            v = rnd() % 4 == 0 ? uniform(-500.0, 500.0) : uniform(-6.0, 6.0);
        }
        store(t, i, v);
    }
}

/* Graph: y = op(x0, x1, ...) with inputs of rank 1 and unknown extent. */
static tg_graph *op_graph(const char *op, int nin, const tg_dtype *dts) {
    tg_graph *g = tg_graph_new(NULL, op);
    tg_var *x[4];
    char name[16];
    for (int k = 0; k < nin; k++) {
        snprintf(name, sizeof name, "x%d", k);
        x[k] = tg_input(g, name, dts[k], 1, (int64_t[]){TG_DIM_UNKNOWN});
    }
    tg_var *y = tg_apply(g, op, x, nin, NULL, 0);
    if (!y) {
        tg_graph_free(g);
        return NULL;
    }
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    return g;
}

static tg_fn *compile_mode(tg_graph *g, tg_mode mode, int nthreads, bool rewrite) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads, .no_rewrite = !rewrite);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, &o, &f);
    if (st != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

/* Runs f and r on the same inputs and compares every output. */
static void run_both(tg_fn *vm, tg_fn *ref, tg_tensor *const *in, int nin, int nout,
                     uint64_t max_ulps, double rtol, const char *what) {
    tg_tensor *a[16] = {0}, *b[16] = {0};
    tg_status sr = tg_fn_call(ref, in, nin, a, nout);
    char refmsg[512];
    snprintf(refmsg, sizeof refmsg, "%s", tg_last_error());
    tg_status sv = tg_fn_call(vm, in, nin, b, nout);
    if (sr != sv)
        fail_msg("%s: reference status %d (%s), vm status %d (%s)", what, sr, refmsg, sv,
                 tg_last_error());
    for (int i = 0; i < nout && sr == TG_OK; i++) {
        expect_close(a[i], b[i], max_ulps, rtol, what);
        tg_tensor_free(a[i]);
        tg_tensor_free(b[i]);
    }
}

/* ULP bound of an elementwise op against the reference (vkernels.h). */
static uint64_t op_ulps(const char *op, tg_dtype dt) {
    static const char *const exact[] = {
        "add", "sub",  "mul",  "div",   "int_div", "mod",   "maximum", "minimum", "neg",
        "abs", "sign", "sqrt", "floor", "ceil",    "round", "clip",    "where",   "lt",
        "le",  "gt",   "ge",   "eq",    "ne",      "isnan", "isinf"};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcmp(op, exact[i]) == 0) return 0;
    if (strcmp(op, "rsqrt") == 0) return dt == TG_DT_F32 ? 1 : 0;
    bool composed = strcmp(op, "sigmoid") == 0 || strcmp(op, "softplus") == 0;
    /* without SLEEF: libm per lane, the reference's own result, except that composed ops
     * in f32 round their intermediate steps to f32 */
    if (!tg_vk_have_sleef()) return composed && dt == TG_DT_F32 ? 4 : 0;
    return 4;
}

/* ---- elementwise ---- */

static void check_elementwise_op(const tg_op_def *def, tg_dtype dt, int nthreads) {
    int nin = def->min_in;
    tg_dtype dts[4] = {dt, dt, dt, dt};
    if (def == tg_op_table[TG_OP_WHERE]) dts[0] = TG_DT_BOOL;
    tg_graph *g = op_graph(def->name, nin, dts);
    if (!g) return; /* the op refuses this dtype */
    tg_fn *vm = compile_mode(g, TG_MODE_VM, nthreads, false);
    tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
    char what[128];
    for (int s = 0; s < NSIZES; s++) {
        int64_t n = SIZES[s];
        /* keep the run short: the largest size with two threads, in floats */
        if (n > 2000 && (nthreads == 1 || !tg_dtype_is_float(dt))) continue;
        if (n > 2000 && SLOW_BUILD &&
            (dt != TG_DT_F64 || !strstr("add exp sin pow where", def->name)))
            continue;
        tg_tensor *in[4];
        for (int k = 0; k < nin; k++) {
            in[k] = tensor_of(dts[k], 1, &n);
            fill_for(in[k], def->name, k);
        }
        snprintf(what, sizeof what, "%s %s n=%lld threads=%d", def->name, tg_dtype_name(dt),
                 (long long)n, nthreads);
        tg_dtype odt = tg_var_dtype(tg_graph_output(g, 0));
        run_both(vm, ref, in, nin, 1, op_ulps(def->name, odt), 0, what);
        for (int k = 0; k < nin; k++) tg_tensor_free(in[k]);
    }
    tg_fn_free(vm);
    tg_fn_free(ref);
    tg_graph_free(g);
}

static void test_elementwise_every_op(void **state) {
    (void)state;
    static const tg_dtype dts[] = {TG_DT_F64, TG_DT_F32, TG_DT_I32, TG_DT_I8,
                                   TG_DT_U8,  TG_DT_I64, TG_DT_BOOL};
    int checked = 0;
    for (int op = 0; op < TG_OP_COUNT; op++) {
        const tg_op_def *def = tg_op_table[op];
        if (def->kind != TG_KIND_ELEMWISE || op == TG_OP_CAST) continue;
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            check_elementwise_op(def, dts[d], 2);
            if (dts[d] == TG_DT_F64 || dts[d] == TG_DT_F32) check_elementwise_op(def, dts[d], 1);
        }
        checked++;
    }
    assert_true(checked > 40);
}

static void test_cast_every_pair(void **state) {
    (void)state;
    static const double vals[] = {
        0.0,      -0.0,      1.0,   -1.0,   0.5,       -0.5,  1.5,
        2.5,      127.9,     128.0, -129.0, 255.0,     256.0, 300.7,
        -300.7,   65536.5,   3e9,   -3e9,   1e19,      -1e19, 9007199254740993.0,
        INFINITY, -INFINITY, NAN,   1e-310, 16777217.0};
    int64_t n = (int64_t)(sizeof vals / sizeof vals[0]);
    for (int a = 0; a < TG_DT_COUNT; a++)
        for (int b = 0; b < TG_DT_COUNT; b++) {
            tg_graph *g = tg_graph_new(NULL, "cast");
            tg_var *x = tg_input(g, "x", (tg_dtype)a, 1, (int64_t[]){TG_DIM_UNKNOWN});
            tg_var *y = tg_cast(g, x, (tg_dtype)b);
            assert_non_null(y);
            assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
            tg_fn *vm = compile_mode(g, TG_MODE_VM, 1, false);
            tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
            tg_tensor *in = tensor_of((tg_dtype)a, 1, &n);
            char *p = tg_tensor_data(in);
            for (int64_t i = 0; i < n; i++) {
                if (tg_dtype_is_float((tg_dtype)a))
                    tg_store_f64(p + i * (int64_t)tg_dtype_size((tg_dtype)a), (tg_dtype)a, vals[i]);
                else
                    tg_store_f64(p + i * (int64_t)tg_dtype_size((tg_dtype)a), (tg_dtype)a,
                                 (double)(int64_t)(i * 977 - 10000) * (i % 2 ? 1 : 1e5));
            }
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", tg_dtype_name((tg_dtype)a),
                     tg_dtype_name((tg_dtype)b));
            run_both(vm, ref, &in, 1, 1, 0, 0, what);
            tg_tensor_free(in);
            tg_fn_free(vm);
            tg_fn_free(ref);
            tg_graph_free(g);
        }
}

/* Broadcasting, negative strides and transposed inputs through the strided driver. */
static void test_elementwise_layouts(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "lay");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, (int64_t[]){TG_DIM_UNKNOWN, TG_DIM_UNKNOWN});
    tg_var *y = tg_input(g, "y", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *c = tg_input(g, "c", TG_DT_F64, 2, (int64_t[]){TG_DIM_UNKNOWN, 1});
    tg_var *o[3] = {tg_add(g, x, y), tg_mul(g, tg_exp(g, x), c), tg_pow(g, c, y)};
    assert_int_equal(tg_graph_set_outputs(g, o, 3), TG_OK);
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        static const int64_t dims[][2] = {{1, 1}, {3, 7}, {9, 1025}, {257, 3}, {40, 1000}};
        for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
            int64_t r = dims[s][0], k = dims[s][1];
            for (int layout = 0; layout < 3; layout++) {
                /* 0: contiguous; 1: x and y reversed (negative strides); 2: x transposed */
                tg_tensor *xb =
                    tensor_of(TG_DT_F64, 2, layout == 2 ? (int64_t[]){k, r} : (int64_t[]){r, k});
                tg_tensor *yb = tensor_of(TG_DT_F64, 1, &k);
                tg_tensor *cb = tensor_of(TG_DT_F64, 2, (int64_t[]){r, 1});
                fill_for(xb, "lay", 0);
                fill_for(yb, "pow", 1);
                for (int64_t i = 0; i < r; i++) store(cb, i, uniform(0.1, 3.0));
                tg_tensor *xv = xb, *yv = yb;
                if (layout == 1) {
                    xv = tg_tensor_view(xb, 2, (int64_t[]){r, k}, (int64_t[]){-k, -1}, r * k - 1);
                    yv = tg_tensor_view(yb, 1, &k, (int64_t[]){-1}, k - 1);
                } else if (layout == 2) {
                    xv = tg_tensor_view(xb, 2, (int64_t[]){r, k}, (int64_t[]){1, r}, 0);
                }
                assert_non_null(xv);
                assert_non_null(yv);
                tg_tensor *in[3] = {xv, yv, cb};
                char what[96];
                snprintf(what, sizeof what, "layout %d [%lld,%lld] threads %d", layout,
                         (long long)r, (long long)k, nt);
                run_both(vm, ref, in, 3, 3, op_ulps("exp", TG_DT_F64), 0, what);
                if (xv != xb) tg_tensor_free(xv);
                if (yv != yb) tg_tensor_free(yv);
                tg_tensor_free(xb);
                tg_tensor_free(yb);
                tg_tensor_free(cb);
            }
        }
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    tg_graph_free(g);
}

/* div by a broadcast power of two runs as a multiplication: still bit-identical, for
 * divisors at the edges of the exponent range and results that underflow. */
static void test_div_by_power_of_two(void **state) {
    (void)state;
    static const double ds[] = {2.0,     0.5,      -4.0, 0x1p-1022, 0x1p1023, 0x1p-1060, 0x1p-126,
                                0x1p127, 0x1p-149, 3.0,  -0.0,      INFINITY, 1.0};
    for (int dti = 0; dti < 2; dti++) {
        tg_dtype dt = dti ? TG_DT_F32 : TG_DT_F64;
        tg_graph *g = tg_graph_new(NULL, "div");
        tg_var *x = tg_input(g, "x", dt, 1, (int64_t[]){TG_DIM_UNKNOWN});
        tg_var *d = tg_input(g, "d", dt, 0, NULL);
        tg_var *y = tg_div(g, x, d);
        assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
        tg_fn *vm = compile_mode(g, TG_MODE_VM, 1, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        int64_t n = 1000;
        tg_tensor *xt = tensor_of(dt, 1, &n);
        for (int64_t i = 0; i < n; i++) /* magnitudes from subnormal to huge */
            store(xt, i,
                  (rnd() % 2 ? -1.0 : 1.0) * ldexp(uniform(1.0, 2.0), (int)(rnd() % 2200) - 1100));
        for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
            tg_tensor *dv = tensor_of(dt, 0, NULL);
            store(dv, 0, ds[k]);
            tg_tensor *in[2] = {xt, dv};
            char what[64];
            snprintf(what, sizeof what, "div %s by %a", tg_dtype_name(dt), ds[k]);
            run_both(vm, ref, in, 2, 1, 0, 0, what);
            tg_tensor_free(dv);
        }
        tg_tensor_free(xt);
        tg_fn_free(vm);
        tg_fn_free(ref);
        tg_graph_free(g);
    }
}

/* Instructions of kernel class k in a VM made for g (one thread, no rewriting): which
 * nodes run the VM's own kernels rather than their reference ones. */
static int kind_count(tg_graph *g, vm_kind k) {
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 1, .no_rewrite = true);
    tg_vm *probe = NULL;
    assert_int_equal(tg_vm_new(g, &o, &probe), TG_OK);
    tg_vm_stats st;
    tg_vm_get_stats(probe, &st);
    tg_vm_free(probe);
    return st.kinds[k];
}

/* ---- reductions ---- */

static void test_reductions(void **state) {
    (void)state;
    static const char *const ops[] = {"sum",    "mean",   "max", "min",      "prod",
                                      "argmax", "argmin", "any", "logsumexp"};
    static const int64_t shapes[][3] = {{1, 1, 1},      {3, 7, 9},      {2, 1025, 3}, {5, 3, 1023},
                                        {1, 1, 100003}, {1, 100003, 1}, {200, 350, 1}};
    const size_t nshapes = SLOW_BUILD ? 4 : sizeof shapes / sizeof shapes[0];
    static const int64_t axes[][3] = {{0, 1, 2}, {2, 0, 0}, {0, 0, 0},
                                      {1, 0, 0}, {0, 1, 0}, {1, 2, 0}};
    static const int naxes[] = {3, 1, 1, 1, 2, 2};
    for (int dti = 0; dti < 2; dti++) {
        tg_dtype dt = dti ? TG_DT_F32 : TG_DT_F64;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (size_t a = 0; a < sizeof naxes / sizeof naxes[0]; a++) {
                bool arg = strncmp(ops[o], "arg", 3) == 0;
                if (arg && naxes[a] != 1) continue;
                tg_graph *g = tg_graph_new(NULL, "red");
                tg_var *x = tg_input(g, "x", dt, 3,
                                     (int64_t[]){TG_DIM_UNKNOWN, TG_DIM_UNKNOWN, TG_DIM_UNKNOWN});
                tg_var *y = tg_reduce(g, ops[o], x, axes[a], naxes[a], a % 2 == 1);
                assert_non_null(y);
                assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
                if (strcmp(ops[o], "any") != 0) /* the VM's own kernel, not the reference */
                    assert_int_equal(kind_count(g, VM_REDUCE), 1);
                tg_fn *vm1 = compile_mode(g, TG_MODE_VM, 1, false);
                tg_fn *vm2 = compile_mode(g, TG_MODE_VM, 2, false);
                tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
                bool exact = strcmp(ops[o], "sum") != 0 && strcmp(ops[o], "mean") != 0 &&
                             strcmp(ops[o], "logsumexp") != 0;
                size_t ns = SLOW_BUILD && o == 0 ? nshapes + 1 : nshapes; /* sum: one large */
                for (size_t s = 0; s < ns; s++) {
                    tg_tensor *in = tensor_of(dt, 3, shapes[s]);
                    int64_t n = tg_tensor_size(in);
                    for (int64_t i = 0; i < n; i++) {
                        double v = uniform(-2.0, 2.0);
                        if (strcmp(ops[o], "prod") == 0) v = uniform(0.9, 1.1);
                        if (rnd() % 97 == 0) v = rnd() % 2 ? 0.0 : -0.0; /* ties of zeros */
                        if (n > 50 && rnd() % 5000 == 0) v = NAN;
                        store(in, i, v);
                    }
                    char what[96];
                    snprintf(what, sizeof what, "%s %s shape %lld,%lld,%lld axes %zu", ops[o],
                             tg_dtype_name(dt), (long long)shapes[s][0], (long long)shapes[s][1],
                             (long long)shapes[s][2], a);
                    double rtol = exact ? 0 : (dt == TG_DT_F64 ? 1e-12 : 1e-6);
                    run_both(vm1, ref, &in, 1, 1, 0, rtol, what);
                    run_both(vm2, ref, &in, 1, 1, 0, rtol, what);
                    /* the thread count never changes a result */
                    tg_tensor *r1 = NULL, *r2 = NULL;
                    assert_int_equal(tg_fn_call(vm1, &in, 1, &r1, 1), TG_OK);
                    assert_int_equal(tg_fn_call(vm2, &in, 1, &r2, 1), TG_OK);
                    expect_close(r1, r2, 0, 0, what);
                    tg_tensor_free(r1);
                    tg_tensor_free(r2);
                    tg_tensor_free(in);
                }
                tg_fn_free(vm1);
                tg_fn_free(vm2);
                tg_fn_free(ref);
                tg_graph_free(g);
            }
    }
}

/* ---- dot and matmul ---- */

static void check_product(const char *op, tg_dtype dt, int na, const int64_t *sa, int nb,
                          const int64_t *sb, int layout) {
    tg_graph *g = tg_graph_new(NULL, op);
    int64_t ua[TG_MAX_DIMS], ub[TG_MAX_DIMS];
    for (int d = 0; d < na; d++) ua[d] = TG_DIM_UNKNOWN;
    for (int d = 0; d < nb; d++) ub[d] = TG_DIM_UNKNOWN;
    tg_var *a = tg_input(g, "a", dt, na, ua), *b = tg_input(g, "b", dt, nb, ub);
    tg_var *y = strcmp(op, "dot") == 0 ? tg_dot(g, a, b) : tg_matmul(g, a, b);
    assert_non_null(y);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *ta = tensor_of(dt, na, sa), *tb = tensor_of(dt, nb, sb);
    for (int64_t i = 0; i < tg_tensor_size(ta); i++) store(ta, i, uniform(-1, 1));
    for (int64_t i = 0; i < tg_tensor_size(tb); i++) store(tb, i, uniform(-1, 1));
    tg_tensor *va = ta, *vb = tb;
    int64_t shape[TG_MAX_DIMS], str[TG_MAX_DIMS];
    if (layout == 1 && na >= 2) { /* a as the transpose of a contiguous [.., K, M] tensor */
        for (int d = 0; d < na; d++) shape[d] = sa[d];
        int64_t tmp = shape[na - 1];
        shape[na - 1] = shape[na - 2];
        shape[na - 2] = tmp;
        tg_tensor *base = tensor_of(dt, na, shape);
        for (int64_t i = 0; i < tg_tensor_size(base); i++) store(base, i, uniform(-1, 1));
        memcpy(str, tg_tensor_strides(base), sizeof str);
        tmp = str[na - 1];
        str[na - 1] = str[na - 2];
        str[na - 2] = tmp;
        va = tg_tensor_view(base, na, sa, str, 0);
        tg_tensor_free(base);
    } else if (layout == 2 && tg_tensor_size(tb) > 0) { /* b reversed: a copy for BLAS */
        for (int d = 0; d < nb; d++) str[d] = -tg_tensor_strides(tb)[d];
        vb = tg_tensor_view(tb, nb, sb, str, tg_tensor_size(tb) - 1);
    }
    assert_non_null(va);
    assert_non_null(vb);
    tg_tensor *in[2] = {va, vb};
    char what[96];
    snprintf(what, sizeof what, "%s %s rank %d x %d layout %d", op, tg_dtype_name(dt), na, nb,
             layout);
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        run_both(vm, ref, in, 2, 1, 8, dt == TG_DT_F64 ? 1e-11 : 2e-4, what);
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    if (va != ta) tg_tensor_free(va);
    if (vb != tb) tg_tensor_free(vb);
    tg_tensor_free(ta);
    tg_tensor_free(tb);
    tg_graph_free(g);
}

static void test_dot_matmul(void **state) {
    (void)state;
    for (int dti = 0; dti < 2; dti++) {
        tg_dtype dt = dti ? TG_DT_F32 : TG_DT_F64;
        for (int layout = 0; layout < 3; layout++) {
            check_product("dot", dt, 1, (int64_t[]){1025}, 1, (int64_t[]){1025}, layout);
            check_product("dot", dt, 2, (int64_t[]){37, 19}, 1, (int64_t[]){19}, layout);
            check_product("dot", dt, 1, (int64_t[]){19}, 2, (int64_t[]){19, 23}, layout);
            check_product("dot", dt, 2, (int64_t[]){65, 33}, 2, (int64_t[]){33, 70}, layout);
            if (!SLOW_BUILD || layout == 0)
                check_product("dot", dt, 2, (int64_t[]){300, 200}, 2, (int64_t[]){200, 150},
                              layout);
            check_product("dot", dt, 3, (int64_t[]){4, 5, 6}, 2, (int64_t[]){6, 7}, layout);
            check_product("dot", dt, 2, (int64_t[]){3, 0}, 2, (int64_t[]){0, 4}, layout);
            check_product("matmul", dt, 3, (int64_t[]){5, 8, 9}, 2, (int64_t[]){9, 4}, layout);
            check_product("matmul", dt, 3, (int64_t[]){1, 8, 9}, 3, (int64_t[]){6, 9, 4}, layout);
            check_product("matmul", dt, 1, (int64_t[]){9}, 3, (int64_t[]){3, 9, 4}, layout);
            check_product("matmul", dt, 3, (int64_t[]){3, 4, 9}, 1, (int64_t[]){9}, layout);
            check_product("matmul", dt, 4, (int64_t[]){2, 3, 64, 80}, 2, (int64_t[]){80, 64},
                          layout);
        }
    }
}

/* ---- memory plan ---- */

/* A chain of 40 elementwise ops: the plan needs only a few blocks, reused call after
 * call, with the same results every time. */
static void test_buffers_reused(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "chain");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *v = x;
    for (int i = 0; i < 40; i++)
        v = i % 3 == 0   ? tg_sin(g, v)
            : i % 3 == 1 ? tg_add(g, v, x)
                         : tg_mul(g, v, tg_literal_float(g, 0.5));
    assert_int_equal(tg_graph_set_outputs(g, &v, 1), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 2, .no_rewrite = true);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
    int64_t n = 50000;
    tg_tensor *in = tensor_of(TG_DT_F64, 1, &n);
    fill_for(in, "chain", 0);
    tg_tensor *want = NULL;
    assert_int_equal(tg_fn_call(ref, &in, 1, &want, 1), TG_OK);
    tg_vm_stats st0 = {0}, st;
    for (int call = 0; call < 5; call++) {
        tg_tensor *got = NULL;
        assert_int_equal(tg_vm_call(vm, &in, 1, &got, 1, false), TG_OK);
        expect_close(want, got, op_ulps("sin", TG_DT_F64), 1e-12, "chain");
        tg_tensor_free(got);
        tg_vm_get_stats(vm, &st);
        if (call == 0) st0 = st;
        /* one plan, the same blocks every call */
        assert_int_equal(st.nplans, 1);
        assert_int_equal(st.nblocks, st0.nblocks);
    }
    assert_int_equal(st.nplanned, 39); /* every value but the output */
    /* each elementwise node overwrites the value before it, which dies there: one block */
    assert_int_equal(st.nblocks, 1);
    assert_true(st.bytes >= (size_t)n * 8);
    assert_int_equal(st.nthreads, 2);
    tg_tensor_free(want);
    tg_tensor_free(in);
    tg_vm_free(vm);
    tg_fn_free(ref);
    tg_graph_free(g);
}

/* New shapes of '?' inputs make new plans; more shapes than the cache holds evict old
 * ones; a shape seen before gives the same results again. */
static void test_shape_signatures(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "sig");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, (int64_t[]){TG_DIM_UNKNOWN, 4});
    tg_var *y = tg_input(g, "y", TG_DT_F32, 1, (int64_t[]){4});
    tg_var *z = tg_reduce(g, "sum", tg_tanh(g, tg_add(g, x, y)), (int64_t[]){1}, 1, false);
    tg_var *outs[2] = {z, tg_transpose(g, tg_exp(g, x), NULL)};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 2);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
    int64_t four = 4;
    tg_tensor *yt = tensor_of(TG_DT_F32, 1, &four);
    fill_for(yt, "sig", 1);
    for (int round = 0; round < 2; round++)
        for (int64_t rows = 1; rows <= 12; rows++) {
            tg_tensor *xt = tensor_of(TG_DT_F32, 2, (int64_t[]){rows * 37, 4});
            for (int64_t i = 0; i < tg_tensor_size(xt); i++) store(xt, i, uniform(-3, 3));
            tg_tensor *in[2] = {xt, yt}, *want[2] = {0}, *got[2] = {0};
            assert_int_equal(tg_fn_call(ref, in, 2, want, 2), TG_OK);
            assert_int_equal(tg_vm_call(vm, in, 2, got, 2, false), TG_OK);
            expect_close(want[0], got[0], 4, 1e-6, "sig sum");
            expect_close(want[1], got[1], op_ulps("exp", TG_DT_F32), 0, "sig exp");
            for (int i = 0; i < 2; i++) {
                tg_tensor_free(want[i]);
                tg_tensor_free(got[i]);
            }
            tg_tensor_free(xt);
            tg_vm_stats st;
            tg_vm_get_stats(vm, &st);
            assert_int_equal(st.nplans, rows < 8 && round == 0 ? rows : 8);
        }
    tg_tensor_free(yt);
    tg_vm_free(vm);
    tg_fn_free(ref);
    tg_graph_free(g);
}

/* ---- tg_fn_call_into ---- */

static void test_out_param(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "into");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, (int64_t[]){TG_DIM_UNKNOWN, 3});
    tg_var *y = tg_add(g, tg_mul(g, x, tg_literal_float(g, 2.0)), tg_literal_float(g, 1.0));
    tg_var *outs[3] = {y, tg_transpose(g, y, NULL), x};
    assert_int_equal(tg_graph_set_outputs(g, outs, 3), TG_OK);
    for (int mode = 0; mode < 2; mode++) {
        tg_fn *f = compile_mode(g, mode ? TG_MODE_REFERENCE : TG_MODE_VM, 2, true);
        int64_t shape[2] = {4, 3}, tshape[2] = {3, 4};
        tg_tensor *in = tensor_of(TG_DT_F64, 2, shape);
        for (int64_t i = 0; i < 12; i++) store(in, i, (double)i);
        /* given outputs receive the results in place; a NULL one gets a new tensor */
        tg_tensor *o0 = tensor_of(TG_DT_F64, 2, shape), *o1 = tensor_of(TG_DT_F64, 2, tshape);
        tg_tensor *out[3] = {o0, o1, NULL};
        for (int rep = 0; rep < 3; rep++) {
            out[2] = NULL;
            assert_int_equal(tg_fn_call_into(f, &in, 1, out, 3), TG_OK);
            assert_ptr_equal(out[0], o0);
            assert_ptr_equal(out[1], o1);
            assert_non_null(out[2]);
            for (int64_t i = 0; i < 12; i++) {
                assert_true(tg_tensor_get_f64(o0, i) == 2.0 * (double)i + 1.0);
                assert_true(tg_tensor_get_f64(out[2], i) == (double)i);
            }
            assert_true(tg_tensor_get_f64(o1, 1) == 2.0 * 3 + 1.0); /* transposed [0,1] */
            tg_tensor_free(out[2]);
        }
        /* a strided destination (a transposed view) */
        tg_tensor *big = tensor_of(TG_DT_F64, 2, tshape);
        tg_tensor *view = tg_tensor_view(big, 2, shape, (int64_t[]){1, 4}, 0);
        out[0] = view;
        out[1] = o1;
        out[2] = NULL;
        assert_int_equal(tg_fn_call_into(f, &in, 1, out, 3), TG_OK);
        assert_true(tg_tensor_get_f64(view, 5) == 11.0);
        assert_true(((double *)tg_tensor_data(big))[1] == 2.0 * 3 + 1.0); /* view[1,0] */
        tg_tensor_free(out[2]);
        /* wrong shape or dtype: an error naming the output, no new tensors */
        tg_tensor *bad = tensor_of(TG_DT_F64, 2, (int64_t[]){5, 3});
        out[0] = bad;
        out[1] = o1;
        out[2] = NULL;
        assert_int_equal(tg_fn_call_into(f, &in, 1, out, 3), TG_ESHAPE);
        assert_non_null(strstr(tg_last_error(), "output 0"));
        assert_null(out[2]);
        assert_ptr_equal(out[0], bad);
        tg_tensor_free(bad);
        bad = tensor_of(TG_DT_F32, 2, shape);
        out[0] = bad;
        assert_int_equal(tg_fn_call_into(f, &in, 1, out, 3), TG_ETYPE);
        tg_tensor_free(bad);
        /* in place: the input is also the destination of y and the third output reads it */
        out[0] = in;
        out[1] = o1;
        out[2] = NULL;
        assert_int_equal(tg_fn_call_into(f, &in, 1, out, 3), TG_OK);
        for (int64_t i = 0; i < 12; i++) {
            assert_true(tg_tensor_get_f64(in, i) == 2.0 * (double)i + 1.0);
            assert_true(tg_tensor_get_f64(out[2], i) == (double)i); /* x before the call */
        }
        tg_tensor_free(out[2]);
        /* tg_fn_call ignores whatever out[] holds */
        out[0] = o0;
        out[1] = o1;
        out[2] = o0;
        assert_int_equal(tg_fn_call(f, &in, 1, out, 3), TG_OK);
        assert_ptr_not_equal(out[0], o0);
        for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
        tg_tensor_free(view);
        tg_tensor_free(big);
        tg_tensor_free(o0);
        tg_tensor_free(o1);
        tg_tensor_free(in);
        tg_fn_free(f);
    }
    tg_graph_free(g);
}

/* ---- views, self-allocating ops, errors ---- */

static tg_graph *parse_one(const char *src, tg_module **m) {
    tg_status st = tg_module_parse(NULL, src, strlen(src), "test.tg", m);
    if (st != TG_OK) fail_msg("parse: %s", tg_last_error());
    return tg_module_func(*m, 0);
}

static void test_views_and_dynamic_shapes(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f64[?, 6], k: bool[?, 6]) {\n"
                            "  t = transpose(x)\n"
                            "  s = x[1:, ::-2]\n"
                            "  r = reshape(exp(t), shape=[-1])\n"
                            "  sel = mask_select(x, k)\n"
                            "  q = mul(sel, sum(sel))\n"
                            "  return add(s, 1.0), r, q, t[0]\n"
                            "}\n",
                            &m);
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, true);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, true);
        for (int64_t rows = 1; rows < 300; rows = rows * 3 + 1) {
            tg_tensor *x = tensor_of(TG_DT_F64, 2, (int64_t[]){rows, 6});
            tg_tensor *k = tensor_of(TG_DT_BOOL, 2, (int64_t[]){rows, 6});
            fill_for(x, "v", 0);
            fill_for(k, "v", 1);
            tg_tensor *in[2] = {x, k};
            run_both(vm, ref, in, 2, 4, op_ulps("exp", TG_DT_F64), 1e-12, "views");
            tg_tensor_free(x);
            tg_tensor_free(k);
        }
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    tg_module_free(m);
}

/* A gradient through a '?' extent builds alloc(shape(...)[0]) nodes: the plan evaluates
 * that shape arithmetic, so every node keeps its static kernel and planned buffer (none
 * runs with run-time inference), and the results still equal the reference's. */
static void test_shape_arithmetic_planned(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f64[?, 5], W: f64[5, 3]) {\n"
                            "  h = tanh(dot(x, W))\n"
                            "  l = mean(sum(mul(h, h), axis=[1]))\n"
                            "  gW = grad(l, W)\n"
                            "  return l, gW\n"
                            "}\n",
                            &m);
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 1);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, true);
    int64_t wshape[2] = {5, 3};
    tg_tensor *W = tensor_of(TG_DT_F64, 2, wshape);
    fill_for(W, "W", 0);
    for (int64_t rows = 1; rows < 200; rows = rows * 4 + 3) {
        tg_tensor *x = tensor_of(TG_DT_F64, 2, (int64_t[]){rows, 5});
        fill_for(x, "x", 1);
        tg_tensor *in[2] = {x, W}, *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
        assert_int_equal(tg_fn_call(ref, in, 2, want, 2), TG_OK);
        assert_int_equal(tg_vm_call(vm, in, 2, got, 2, false), TG_OK);
        for (int k = 0; k < 2; k++) {
            expect_close(want[k], got[k], op_ulps("tanh", TG_DT_F64), 1e-12, "shape arithmetic");
            tg_tensor_free(want[k]);
            tg_tensor_free(got[k]);
        }
        tg_vm_stats st;
        tg_vm_get_stats(vm, &st);
        assert_int_equal(st.ndynamic, 0);
        assert_int_equal(st.nallocating, 0); /* the gradient's allocs fill planned buffers */
        assert_true(st.nplanned > 0);
        tg_tensor_free(x);
    }
    tg_tensor_free(W);
    tg_vm_free(vm);
    tg_fn_free(ref);
    tg_module_free(m);
}

static void test_runtime_errors_name_the_node(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f32[?], y: f32[4]) {\n"
                            "  z = add(x, y)\n"
                            "  return z\n"
                            "}\n",
                            &m);
    tg_fn *vm = compile_mode(g, TG_MODE_VM, 2, false);
    int64_t one = 1, four = 4;
    tg_tensor *in[2] = {tensor_of(TG_DT_F32, 1, &one), tensor_of(TG_DT_F32, 1, &four)};
    tg_tensor *out = NULL;
    assert_int_equal(tg_fn_call(vm, in, 2, &out, 1), TG_ESHAPE);
    assert_null(out);
    assert_non_null(strstr(tg_last_error(), "test.tg:2:"));
    assert_non_null(strstr(tg_last_error(), "declare the dimension as 1 to broadcast"));
    tg_tensor_free(in[0]);
    in[0] = tensor_of(TG_DT_F32, 1, &four);
    assert_int_equal(tg_fn_call(vm, in, 2, &out, 1), TG_OK); /* the failed plan was not kept */
    tg_tensor_free(out);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(vm);
    tg_module_free(m);
}

/* ---- fused nodes ---- */

static void test_fused_nodes(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one(
        "func f(x: f64[?, ?], y: f32[?, ?], b: f64[?]) {\n"
        "  a = fused{add(mul(exp(neg(mul(%0, %0))), sin(%0)), div(%0, 2))}(x)\n"
        "  c, d = fused{sum(exp(sub(%0, %1)), axis=[1]); max(mul(%0, %1), axis=[1])}(x, b)\n"
        "  e, h = fused{sum(mul(%0, %0), axis=[0]); mean(tanh(%0), axis=[0])}(x)\n"
        "  m = fused{min(neg(%0), axis=[0], keepdims=true)}(x)\n"
        "  i = fused{sum(sigmoid(%0))}(x)\n"
        "  j, k = fused{where(gt(%0, 0.0), %0, mul(%0, 0.01)); cast(%0, dtype=\"f64\")}(y)\n"
        "  l = fused{prod(add(%0, 1.0), axis=[1])}(y)\n"
        "  return a, c, d, e, h, i, j, k, l, m\n"
        "}\n",
        &m);
    /* every node above runs the VM's blockwise kernel, not the reference */
    assert_int_equal(kind_count(g, VM_FUSED), 7);
    static const int64_t dims[][2] = {{1, 1},      {3, 7},      {2, 1023}, {17, 1025},
                                      {1, 100003}, {100003, 2}, {64, 3000}};
    const size_t ndims = SLOW_BUILD ? 5 : sizeof dims / sizeof dims[0];
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        for (size_t s = 0; s < ndims; s++) {
            int64_t r = dims[s][0], c = dims[s][1];
            tg_tensor *x = tensor_of(TG_DT_F64, 2, dims[s]);
            tg_tensor *y = tensor_of(TG_DT_F32, 2, dims[s]);
            tg_tensor *b = tensor_of(TG_DT_F64, 1, &c);
            for (int64_t i = 0; i < r * c; i++) {
                store(x, i, uniform(-2, 2));
                store(y, i, uniform(-0.001, 0.001));
            }
            for (int64_t i = 0; i < c; i++) store(b, i, uniform(-1, 1));
            tg_tensor *in[3] = {x, y, b};
            char what[64];
            snprintf(what, sizeof what, "fused [%lld,%lld] threads %d", (long long)r, (long long)c,
                     nt);
            run_both(vm, ref, in, 3, 10, op_ulps("exp", TG_DT_F64), 1e-10, what);
            tg_tensor_free(x);
            tg_tensor_free(y);
            tg_tensor_free(b);
        }
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    tg_module_free(m);
}

/* ---- fused nodes over broadcast rows ---- */

/* Fused maps whose inputs are one value per row (e[:, None] as a [K, 1] input, a1 = 1, or
 * as a [K, M] view of stride 0, a1 = ?), one row for all rows (c[None, :]), transposed,
 * strided, reversed, and [K, 1, 1] and [1, P, 1] over [K, P, L]. */
static const char *bcast_text = "func f(a: %s[?, %s], b: %s[?, ?], r: %s[?, ?], qt: %s[?, ?],\n"
                                "       ws: %s[?, ?], u: %s[?, ?], a3: %s[?, ?, ?],\n"
                                "       v: %s[?, ?, ?], d3: %s[?, ?, ?]) {\n"
                                "  y1, y2 = fused{sub(mul(%%0, %%1), div(%%2, %%0)); "
                                "mul(mul(%%0, neg(%%1)), %%3)}(a, r, qt, b)\n"
                                "  y3 = fused{maximum(add(%%0, %%1), %%2)}(a, b, ws)\n"
                                "  y4 = fused{where(gt(%%0, 0.0), sub(%%0, %%1), "
                                "mul(%%2, %%0))}(u, a, b)\n"
                                "  y5 = fused{add(mul(%%0, %%1), %%2)}(a3, v, d3)\n"
                                "  y6 = fused{mul(exp(mul(%%0, %%1)), tanh(add(%%1, %%0)))}(a, r)\n"
                                "  return y1, y2, y3, y4, y5, y6\n"
                                "}\n";

/* The inputs of bcast_text for K rows of M (P = 3, L = M) as views of small tensors kept
 * in own[] (in[0]: a [K, 1] tensor when one_col, else a stride-0 view), and contiguous
 * copies of them in dup[] (a broadcast to [K, M] in both cases). */
static void bcast_inputs(tg_dtype dt, int64_t K, int64_t M, bool one_col, tg_tensor **own,
                         tg_tensor **in, tg_tensor **dup) {
    const int64_t P = 3;
    own[0] = tensor_of(dt, 1, &K);                    /* e */
    own[1] = tensor_of(dt, 1, &M);                    /* c */
    own[2] = tensor_of(dt, 2, (int64_t[]){K, M});     /* r */
    own[3] = tensor_of(dt, 2, (int64_t[]){M, K});     /* q */
    own[4] = tensor_of(dt, 2, (int64_t[]){K, 2 * M}); /* w */
    own[5] = tensor_of(dt, 2, (int64_t[]){K, M});     /* reversed: u */
    own[6] = tensor_of(dt, 3, (int64_t[]){K, P, M});  /* v */
    own[7] = tensor_of(dt, 1, &P);                    /* d */
    for (int i = 0; i < 8; i++) fill_for(own[i], "v", i);
    in[0] = one_col ? tg_tensor_view(own[0], 2, (int64_t[]){K, 1}, NULL, 0)
                    : tg_tensor_view(own[0], 2, (int64_t[]){K, M}, (int64_t[]){1, 0}, 0);
    in[1] = tg_tensor_view(own[1], 2, (int64_t[]){K, M}, (int64_t[]){0, 1}, 0);
    in[2] = tg_tensor_view(own[2], 2, (int64_t[]){K, M}, NULL, 0);
    in[3] = tg_tensor_view(own[3], 2, (int64_t[]){K, M}, (int64_t[]){1, K}, 0);
    in[4] = tg_tensor_view(own[4], 2, (int64_t[]){K, M}, (int64_t[]){2 * M, 2}, 0);
    in[5] = tg_tensor_view(own[5], 2, (int64_t[]){K, M}, (int64_t[]){-M, 1}, (K - 1) * M);
    in[6] = tg_tensor_view(own[0], 3, (int64_t[]){K, P, M}, (int64_t[]){1, 0, 0}, 0);
    in[7] = tg_tensor_view(own[6], 3, (int64_t[]){K, P, M}, NULL, 0);
    in[8] = tg_tensor_view(own[7], 3, (int64_t[]){K, P, M}, (int64_t[]){0, 1, 0}, 0);
    for (int i = 0; i < 9; i++) {
        assert_non_null(in[i]);
        tg_tensor *full =
            i == 0 ? tg_tensor_view(own[0], 2, (int64_t[]){K, M}, (int64_t[]){1, 0}, 0) : NULL;
        dup[i] = tg_tensor_dup(full ? full : in[i]);
        assert_non_null(dup[i]);
        tg_tensor_free(full);
    }
}

/* The blockwise kernel reads such inputs in place along rows (or gathers rows shorter than
 * a block's worth): every output equals the reference's (bit for bit but for exp and tanh,
 * within their bounds) and, bit for bit, the VM's on contiguous copies of the inputs, for
 * K = 1, 2, 3 rows of M = 1 ... 10000 (odd sizes, rows shorter and longer than a block,
 * blocks that straddle rows) and, in f64, outputs large enough to be streamed; f32 and
 * f64, one and two threads. */
static void test_fused_broadcast_rows(void **state) {
    (void)state;
    static const int64_t Ms[] = {1, 7, 255, 256, 300, 513, 1025, 10000};
    const int nms = (int)(sizeof Ms / sizeof Ms[0]);
    for (int gi = 0; gi < 4; gi++) {
        tg_dtype dt = gi < 2 ? TG_DT_F32 : TG_DT_F64;
        bool one_col = gi % 2 == 1;
        const char *t = tg_dtype_name(dt);
        char src[1024], dsrc[1024];
        snprintf(src, sizeof src, bcast_text, t, one_col ? "1" : "?", t, t, t, t, t, t, t, t, t);
        snprintf(dsrc, sizeof dsrc, bcast_text, t, "?", t, t, t, t, t, t, t, t, t);
        tg_module *m, *dm;
        tg_graph *g = parse_one(src, &m), *dg = parse_one(dsrc, &dm);
        assert_int_equal(kind_count(g, VM_FUSED), 5);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        for (int nt = 1; nt <= 2; nt++) {
            tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
            tg_fn *dvm = compile_mode(dg, TG_MODE_VM, nt, false);
            for (int c = 0; c <= 3 * nms; c++) {
                bool big = c == 3 * nms; /* streamed outputs: 2 x 600009 f64 */
                if (big && (dt != TG_DT_F64 || SLOW_BUILD)) continue;
                int64_t K = big ? 3 : 1 + c % 3, M = big ? 200003 : Ms[c / 3];
                tg_tensor *own[8], *in[9], *dup[9], *r[6] = {0}, *x[6] = {0}, *y[6] = {0};
                bcast_inputs(dt, K, M, one_col, own, in, dup);
                if (tg_fn_call(ref, in, 9, r, 6) != TG_OK) fail_msg("%s", tg_last_error());
                assert_int_equal(tg_fn_call(vm, in, 9, x, 6), TG_OK);
                assert_int_equal(tg_fn_call(dvm, dup, 9, y, 6), TG_OK);
                char what[128];
                for (int o = 0; o < 6; o++) {
                    snprintf(what, sizeof what,
                             "broadcast rows %s a[?,%s] [%lld,%lld] threads %d y%d", t,
                             one_col ? "1" : "?", (long long)K, (long long)M, nt, o + 1);
                    /* y6 multiplies exp's and tanh's results: their bounds add, and the
                     * product's rounding */
                    uint64_t tol = op_ulps("exp", dt) + op_ulps("tanh", dt) + 1;
                    expect_close(r[o], x[o], o == 5 ? tol : 0, 0, what);
                    expect_close(y[o], x[o], 0, 0, what);
                    tg_tensor_free(r[o]);
                    tg_tensor_free(x[o]);
                    tg_tensor_free(y[o]);
                }
                for (int i = 0; i < 9; i++) {
                    tg_tensor_free(in[i]);
                    tg_tensor_free(dup[i]);
                }
                for (int i = 0; i < 8; i++) tg_tensor_free(own[i]);
            }
            tg_fn_free(vm);
            tg_fn_free(dvm);
        }
        tg_fn_free(ref);
        tg_module_free(m);
        tg_module_free(dm);
    }
}

/* ---- concurrent branches ---- */

/* Independent nodes (fused maps and reductions, a BLAS product, a chain and a join) of a
 * size that makes one concurrent run (each too small to split over the pool): every thread count,
 * with and without concurrent runs, gives the same bits, equal to the reference within the kernels'
 * bounds; the run executes each of its nodes once per call; a graph too small for concurrency, or a
 * function of one thread, runs none. */
static void test_branches(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f64[?, ?], y: f64[?, ?], A: f64[?, ?], v: f64[?]) {\n"
                            "  a = fused{sum(exp(%0), axis=[1])}(x)\n"
                            "  b = fused{max(sin(%0), axis=[1])}(y)\n"
                            "  c = fused{sum(mul(%0, 2.0), axis=[0])}(x)\n"
                            "  d = fused{add(mul(%0, %0), %1)}(x, y)\n"
                            "  e = dot(A, v)\n"
                            "  t = fused{mul(tanh(%0), 0.5)}(d)\n"
                            "  u = fused{sum(%0, axis=[1])}(t)\n"
                            "  h = fused{add(%0, %1)}(a, b)\n"
                            "  return a, b, c, e, u, h, t\n"
                            "}\n",
                            &m);
    enum { NOUT = 7, NODES = 8 };
    /* 24 x 80: every node is below the size from which its kernel splits over the pool
       (the costliest, tanh then mul, 1,920 x 17 < 32,768), and the run moves about 145 KB
       (VM_BRANCH_MIN is 128 KiB); 3 x 5: too small for a concurrent run */
    static const int64_t sizes[][2] = {{24, 80}, {3, 5}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t r = sizes[s][0], c = sizes[s][1];
        int64_t xs[2] = {r, c}, as[2] = {r, r < 100 ? r : 100}; /* too small to split */
        tg_tensor *x = tensor_of(TG_DT_F64, 2, xs), *y = tensor_of(TG_DT_F64, 2, xs);
        tg_tensor *A = tensor_of(TG_DT_F64, 2, as), *v = tensor_of(TG_DT_F64, 1, &as[1]);
        for (int64_t i = 0; i < r * c; i++) {
            store(x, i, uniform(-2, 2));
            store(y, i, uniform(-3, 3));
        }
        for (int64_t i = 0; i < r * as[1]; i++) store(A, i, uniform(-1, 1));
        for (int64_t i = 0; i < as[1]; i++) store(v, i, uniform(-1, 1));
        tg_tensor *in[4] = {x, y, A, v};
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        tg_tensor *want[NOUT] = {0}, *first[NOUT] = {0};
        assert_int_equal(tg_fn_call(ref, in, 4, want, NOUT), TG_OK);
        bool big = s == 0;
        /* threads 1, 2, 3; then 2 with concurrent runs turned off */
        for (int cfg = 0; cfg < 4; cfg++) {
            int nt = cfg < 3 ? cfg + 1 : 2;
            if (cfg == 3) setenv("TGRAPH_BRANCHES", "0", 1);
            tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = nt, .no_rewrite = true);
            tg_vm *vm = NULL;
            assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
            for (int call = 0; call < 3; call++) {
                tg_tensor *got[NOUT] = {0};
                assert_int_equal(tg_vm_call(vm, in, 4, got, NOUT, false), TG_OK);
                for (int k = 0; k < NOUT; k++) {
                    char what[64];
                    snprintf(what, sizeof what, "branches [%lld,%lld] threads %d out %d",
                             (long long)r, (long long)c, nt, k);
                    expect_close(want[k], got[k], op_ulps("exp", TG_DT_F64), 1e-10, what);
                    if (!first[k]) {
                        first[k] = got[k];
                        continue;
                    }
                    size_t bytes = (size_t)tg_tensor_size(got[k]) * 8;
                    if (memcmp(tg_tensor_data(first[k]), tg_tensor_data(got[k]), bytes) != 0)
                        fail_msg("%s: differs from one thread", what);
                    tg_tensor_free(got[k]);
                }
            }
            tg_vm_stats st;
            tg_vm_get_stats(vm, &st);
            print_message("branches [%lld,%lld] threads %d: %ld runs, %ld nodes, %ld overlapped\n",
                          (long long)r, (long long)c, nt, st.branch_runs, st.branch_nodes,
                          st.branch_overlapped);
            if (big && nt > 1 && cfg < 3) {
                assert_int_equal(st.branch_runs, 3);          /* one run per call, */
                assert_int_equal(st.branch_nodes, 3 * NODES); /* of every node */
                assert_true(st.branch_overlapped <= st.branch_nodes);
            } else {
                assert_int_equal(st.branch_runs, 0);
            }
            tg_vm_free(vm);
            if (cfg == 3) unsetenv("TGRAPH_BRANCHES");
        }
        for (int k = 0; k < NOUT; k++) {
            tg_tensor_free(want[k]);
            tg_tensor_free(first[k]);
        }
        tg_fn_free(ref);
        tg_tensor_free(x);
        tg_tensor_free(y);
        tg_tensor_free(A);
        tg_tensor_free(v);
    }
    tg_module_free(m);
}

/* Two independent maps, each large enough to split over the pool: they run one after the
 * other, each over every thread, never as a concurrent run (on one thread each, the larger
 * would hold up the run). */
static void test_branches_split_alone(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f64[300, 400], y: f64[300, 400]) {\n"
                            "  p = fused{exp(%0)}(x)\n"
                            "  q = fused{sin(%0)}(y)\n"
                            "  return p, q\n"
                            "}\n",
                            &m);
    int64_t xs[2] = {300, 400};
    tg_tensor *x = tensor_of(TG_DT_F64, 2, xs), *y = tensor_of(TG_DT_F64, 2, xs);
    for (int64_t i = 0; i < 300 * 400; i++) {
        store(x, i, uniform(-2, 2));
        store(y, i, uniform(-3, 3));
    }
    tg_tensor *in[2] = {x, y};
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 2, .no_rewrite = true);
    tg_vm *vm = NULL;
    assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
    tg_tensor *got[2] = {0};
    assert_int_equal(tg_vm_call(vm, in, 2, got, 2, false), TG_OK);
    tg_vm_stats st;
    tg_vm_get_stats(vm, &st);
    assert_int_equal(st.branch_runs, 0);
    tg_vm_free(vm);
    tg_tensor_free(got[0]);
    tg_tensor_free(got[1]);
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_module_free(m);
    /* each kernel class's own split rule: an outer product (ger rows), an elementwise op,
       a fused sum over a broadcast iteration space larger than any operand; each beside
       a small independent node (128 KiB moved: enough for a run) it would otherwise
       share a concurrent run with */
    static const char *big[] = {"outer(u, v)", "exp(a)", "fused{sum(mul(%0, %1), axis=[1])}(c, r)"};
    for (int k = 0; k < 3; k++) {
        char src[512];
        snprintf(src, sizeof src,
                 "func f(u: f64[512], v: f64[256], a: f64[300, 400], c: f64[1000, 1], "
                 "r: f64[1, 1000], w: f64[8192]) {\n  p = %s\n  s = add(w, w)\n"
                 "  return p, s\n}\n",
                 big[k]);
        g = parse_one(src, &m);
        static const int64_t shapes[6][2] = {{512},     {256},     {300, 400},
                                             {1000, 1}, {1, 1000}, {8192}};
        static const int nds[6] = {1, 1, 2, 2, 2, 1};
        tg_tensor *args[6];
        for (int i = 0; i < 6; i++) {
            args[i] = tensor_of(TG_DT_F64, nds[i], shapes[i]);
            for (int64_t e = 0; e < tg_tensor_size(args[i]); e++) store(args[i], e, uniform(-1, 1));
        }
        vm = NULL;
        assert_int_equal(tg_vm_new(g, &o, &vm), TG_OK);
        assert_int_equal(tg_vm_call(vm, args, 6, got, 2, false), TG_OK);
        tg_vm_get_stats(vm, &st);
        if (st.branch_runs != 0) fail_msg("%s joined a concurrent run", big[k]);
        tg_vm_free(vm);
        for (int i = 0; i < 2; i++) tg_tensor_free(got[i]);
        for (int i = 0; i < 6; i++) tg_tensor_free(args[i]);
        tg_module_free(m);
    }
}

/* ---- profile ---- */

static void test_profile(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "p");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *y = tg_reduce(g, "sum", tg_exp(g, x), NULL, -1, false);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.profile = true, .no_rewrite = true, .nthreads = 1);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, &o, &f), TG_OK);
    int64_t n = 1000;
    tg_tensor *in = tensor_of(TG_DT_F64, 1, &n), *out = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tg_fn_call(f, &in, 1, &out, 1), TG_OK);
        tg_tensor_free(out);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_int_equal(tg_fn_profile_print(f, mem), TG_OK);
    fclose(mem);
    assert_non_null(strstr(text, "exp"));
    assert_non_null(strstr(text, "sum"));
    assert_non_null(strstr(text, "vector"));
    assert_non_null(strstr(text, "reduce"));
    assert_non_null(strstr(text, "16000")); /* exp reads and writes 8000 bytes per call */
    assert_non_null(strstr(text, "total:"));
    free(text);
    tg_fn_free(f);
    /* a function compiled without profiling, or in reference mode, keeps none */
    f = compile_mode(g, TG_MODE_VM, 1, false);
    assert_int_equal(tg_fn_profile_print(f, stderr), TG_EINVAL);
    tg_fn_free(f);
    tg_tensor_free(in);
    tg_graph_free(g);
}

/* ---- allocation failures ---- */

static tg_status build_run(tg_ctx *ctx) {
    tg_graph *g = tg_graph_new(ctx, "f");
    if (!g) return TG_ENOMEM;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, (int64_t[]){TG_DIM_UNKNOWN, 3});
    tg_var *w = tg_input(g, "w", TG_DT_F64, 2, (int64_t[]){3, 3});
    tg_var *y = tg_reduce(g, "sum", tg_tanh(g, tg_dot(g, tg_transpose(g, x, NULL), x)),
                          (int64_t[]){0}, 1, false);
    tg_var *outs[2] = {y, tg_add(g, w, tg_literal_float(g, 1.0))};
    tg_status st = tg_graph_set_outputs(g, outs, 2);
    tg_fn *f = NULL;
    tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = 2);
    if (st == TG_OK) st = tg_graph_compile(g, &o, &f);
    tg_tensor *in[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
    if (st == TG_OK) {
        in[0] = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){5, 3});
        in[1] = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){3, 3});
        st = in[0] && in[1] ? tg_fn_call(f, in, 2, out, 2) : TG_ENOMEM;
    }
    if (st == TG_OK) st = tg_fn_call_into(f, in, 2, out, 2);
    for (int i = 0; i < 2; i++) {
        tg_tensor_free(in[i]);
        tg_tensor_free(out[i]);
    }
    tg_fn_free(f);
    tg_graph_free(g);
    return st;
}

static void test_allocation_failures(void **state) {
    (void)state;
    fail_alloc fa = {0, 0};
    tg_ctx *ctx = tg_ctx_new(failing_alloc, &fa);
    assert_int_equal(build_run(ctx), TG_OK);
    long total = fa.count;
    assert_true(total > 20);
    for (long k = 1; k <= total; k++) {
        fa.count = 0;
        fa.fail_at = k;
        tg_status st = build_run(ctx);
        if (st != TG_OK && st != TG_ENOMEM)
            fail_msg("allocation %ld: status %d: %s", k, st, tg_last_error());
    }
    fa.fail_at = 0;
    tg_ctx_free(ctx);
}

/* ---- SLEEF accuracy, per kernel table this CPU runs ---- */

typedef struct acc_fn {
    const char *name;
    int op;
    double (*ref)(double);
    double lo, hi;   /* f64 domain */
    double flo, fhi; /* f32 domain */
    bool log_scale;  /* sample |x| log-uniformly */
    uint64_t bound;  /* ULPs allowed against libm (see vkernels.h) */
} acc_fn;

static double r_sigmoid(double v) {
    return v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}
static double r_softplus(double v) { return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)); }

static double sample(const acc_fn *a, bool f32) {
    double lo = f32 ? a->flo : a->lo, hi = f32 ? a->fhi : a->hi;
    if (!a->log_scale) return uniform(lo, hi);
    double e = uniform(log(fmax(lo, 1e-300)), log(hi));
    return exp(e);
}

static void test_sleef_accuracy(void **state) {
    (void)state;
    const acc_fn fns[] = {
        {"exp", TG_OP_EXP, exp, -745, 709, -103, 88, false, 2},
        {"exp2", TG_OP_EXP2, exp2, -1074, 1023, -149, 127, false, 2},
        {"expm1", TG_OP_EXPM1, expm1, -40, 709, -20, 88, false, 2},
        {"log", TG_OP_LOG, log, 1e-320, 1e308, 1e-44, 3e38, true, 2},
        {"log2", TG_OP_LOG2, log2, 1e-320, 1e308, 1e-44, 3e38, true, 2},
        {"log1p", TG_OP_LOG1P, log1p, 1e-300, 1.7e308, 1e-30, 3.4e38, true, 2},
        {"sin", TG_OP_SIN, sin, -1e4, 1e4, -1e4, 1e4, false, 4},
        {"cos", TG_OP_COS, cos, -1e4, 1e4, -1e4, 1e4, false, 4},
        {"tan", TG_OP_TAN, tan, -1e4, 1e4, -1e4, 1e4, false, 2},
        {"sin-large", TG_OP_SIN, sin, 1e4, 1e15, 1e4, 1e7, true, 4},
        {"tanh", TG_OP_TANH, tanh, -20, 20, -10, 10, false, 2},
        {"erf", TG_OP_ERF, erf, -6, 6, -4, 4, false, 2},
        /* SLEEF's 1.5 ULP plus glibc's own error: up to 4 ULP seen in f64 */
        {"erfc", TG_OP_ERFC, erfc, -6, 27, -4, 10, false, 5},
        {"sigmoid", TG_OP_SIGMOID, r_sigmoid, -745, 40, -100, 20, false, 4},
        {"softplus", TG_OP_SOFTPLUS, r_softplus, -40, 1e5, -20, 1e4, false, 4},
    };
    enum { N = 100000 };
    double *xd = malloc(N * sizeof *xd), *yd = malloc(N * sizeof *yd);
    float *xf = malloc(N * sizeof *xf), *yf = malloc(N * sizeof *yf);
    assert_true(xd && yd && xf && yf);
    static const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-310, -1e-310};
    int tables = 0;
    for (int isa = 0; isa < TG_VK_ISA_COUNT; isa++) {
        const tg_vk_table *t = tg_vk_table_get((tg_vk_isa)isa);
        if (!t) continue;
        tables++;
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
            const acc_fn *a = &fns[k];
            for (int f32 = 0; f32 < 2; f32++) {
                for (int i = 0; i < N; i++) {
                    double v = i < 7 ? specials[i] : sample(a, f32);
                    if (a->log_scale && rnd() % 2 && a->op != TG_OP_LOG && a->op != TG_OP_LOG2 &&
                        a->op != TG_OP_LOG1P)
                        v = -v;
                    if (f32)
                        xf[i] = (float)v;
                    else
                        xd[i] = v;
                }
                tg_vk_fn fn = t->f[a->op][f32 ? 0 : 1];
                assert_non_null(fn);
                const void *x[1] = {f32 ? (const void *)xf : (const void *)xd};
                int64_t s[1] = {1};
                fn(NULL, N, f32 ? (void *)yf : (void *)yd, x, s);
                uint64_t worst = 0;
                double at = 0;
                for (int i = 0; i < N; i++) {
                    double in = f32 ? (double)xf[i] : xd[i];
                    double want = a->ref(in), got = f32 ? (double)yf[i] : yd[i];
                    if (f32) want = (double)(float)want;
                    uint64_t u = ulps(want, got, f32 ? TG_DT_F32 : TG_DT_F64);
                    if (u > worst) {
                        worst = u;
                        at = in;
                    }
                }
                bool composed = a->op == TG_OP_SIGMOID || a->op == TG_OP_SOFTPLUS;
                uint64_t bound = tg_vk_have_sleef() || (composed && f32) ? a->bound : 0;
                print_message("%-7s %-10s %s: max %llu ulp (at %.17g)\n", t->name, a->name,
                              f32 ? "f32" : "f64", (unsigned long long)worst, at);
                if (worst > bound)
                    fail_msg("%s %s %s: %llu ulp at %.17g, bound %llu", t->name, a->name,
                             f32 ? "f32" : "f64", (unsigned long long)worst, at,
                             (unsigned long long)bound);
            }
        }
    }
    assert_true(tables >= 1);
    free(xd);
    free(yd);
    free(xf);
    free(yf);
}

/* The tables agree with one another to the same bounds, tails included. */
static void test_tables_agree_and_tails(void **state) {
    (void)state;
    const tg_vk_table *g = tg_vk_table_get(TG_VK_GENERIC);
    assert_non_null(g);
    for (int isa = 1; isa < TG_VK_ISA_COUNT; isa++) {
        const tg_vk_table *t = tg_vk_table_get((tg_vk_isa)isa);
        if (!t) continue;
        for (int op = 0; op < TG_OP_COUNT; op++)
            for (int d = 0; d < 2; d++) {
                if (!t->f[op][d]) {
                    assert_null(g->f[op][d]);
                    continue;
                }
                int nin = tg_op_table[op]->min_in;
                double in[3][37];
                float inf[3][37];
                for (int k = 0; k < nin; k++)
                    for (int i = 0; i < 37; i++) {
                        in[k][i] = k == 0 && op == TG_OP_POW ? uniform(0, 4) : uniform(-3, 3);
                        inf[k][i] = (float)in[k][i];
                    }
                for (int64_t n = 0; n <= 37; n++) {
                    double ya[40], yb[40];
                    float fa[40], fb[40];
                    const void *x[3];
                    int64_t s[3] = {1, n % 2, 1}; /* broadcast one operand sometimes */
                    for (int k = 0; k < nin; k++)
                        x[k] = d ? (const void *)in[k] : (const void *)inf[k];
                    void *pa = d ? (void *)ya : (void *)fa, *pb = d ? (void *)yb : (void *)fb;
                    g->f[op][d](NULL, n, pa, x, s);
                    t->f[op][d](NULL, n, pb, x, s);
                    for (int64_t i = 0; i < n; i++) {
                        double a = d ? ya[i] : fa[i], b = d ? yb[i] : fb[i];
                        uint64_t u = ulps(a, b, d ? TG_DT_F64 : TG_DT_F32);
                        if (u > 2 * op_ulps(tg_op_table[op]->name, d ? TG_DT_F64 : TG_DT_F32))
                            fail_msg("%s vs generic: %s n=%lld i=%lld: %.17g vs %.17g", t->name,
                                     tg_op_table[op]->name, (long long)n, (long long)i, a, b);
                    }
                }
            }
    }
}

/* ---- ISA-neutral kernels (vk_neutral.h), masks and casts in fused nodes, softmax ---- */

/* Casts from every dtype to a float, where with a bool condition and the comparisons of
 * floats, i32 and i64 select a typed kernel of the neutral table of each ISA, never the
 * general element-by-element cast (which made W6's fused u8 -> f32 scaling 20 times slower
 * than its neighbours). */
static void test_neutral_kernels_selected(void **state) {
    (void)state;
    static const int cmps[] = {TG_OP_LT, TG_OP_LE, TG_OP_GT, TG_OP_GE, TG_OP_EQ, TG_OP_NE};
    static const tg_dtype cdts[] = {TG_DT_F32, TG_DT_F64, TG_DT_I32, TG_DT_I64};
    int tables = 0;
    for (int isa = 0; isa < TG_VK_ISA_COUNT; isa++) {
        const tg_vk_ntable *nt = tg_vk_ntable_get((tg_vk_isa)isa);
        if (!nt) continue;
        tables++;
        tg_vk_args a;
        for (int x = 0; x < TG_DT_COUNT; x++)
            for (int y = TG_DT_F32; y <= TG_DT_F64; y++) {
                tg_dtype xd = (tg_dtype)x;
                tg_vk_fn fn = tg_vk_select(&tg_op_cast, 1, &xd, (tg_dtype)y, (tg_vk_isa)isa, &a);
                assert_non_null(nt->cast[x][y]);
                assert_ptr_equal(fn, nt->cast[x][y]);
            }
        for (int d = 0; d < TG_DT_COUNT; d++) {
            tg_dtype idt[3] = {TG_DT_BOOL, (tg_dtype)d, (tg_dtype)d};
            size_t es = tg_dtype_size((tg_dtype)d);
            tg_vk_fn fn = tg_vk_select(&tg_op_where, 3, idt, (tg_dtype)d, (tg_vk_isa)isa, &a);
            assert_ptr_equal(fn, nt->where[es == 8 ? 3 : es == 4 ? 2 : es == 2 ? 1 : 0]);
        }
        for (size_t o = 0; o < sizeof cmps / sizeof cmps[0]; o++)
            for (size_t d = 0; d < sizeof cdts / sizeof cdts[0]; d++) {
                tg_dtype idt[2] = {cdts[d], cdts[d]};
                tg_vk_fn fn =
                    tg_vk_select(tg_op_table[cmps[o]], 2, idt, TG_DT_BOOL, (tg_vk_isa)isa, &a);
                assert_non_null(fn);
                assert_ptr_equal(fn, nt->cmp[cmps[o]][cdts[d]]);
            }
    }
    assert_true(tables >= 1);
}

/* One value of dtype dt for the neutral kernels' inputs: floats from a small set with
 * special values (so that ties occur), integers of any bits, bool bytes 0-3 (stray ones). */
static void neutral_value(char *p, tg_dtype dt) {
    static const double fl[] = {0.0,   -0.0,  1.0,      -1.0,      0.5, 2.5, -7.0,       1e30,
                                -1e30, 1e-40, INFINITY, -INFINITY, NAN, 3e9, 16777217.0, 0.1};
    if (tg_dtype_is_float(dt)) {
        double v = rnd() % 4 ? fl[rnd() % (sizeof fl / sizeof fl[0])] : uniform(-1e3, 1e3);
        tg_store_f64(p, dt, v);
    } else if (dt == TG_DT_BOOL) {
        *(unsigned char *)p = (unsigned char)(rnd() % 4);
    } else {
        uint64_t r = rnd();
        memcpy(p, &r, tg_dtype_size(dt)); /* little-endian: the low bytes */
    }
}

/* A comparison of two loaded values, as the reference's record computes it. */
static bool neutral_cmp(int op, const char *p, const char *q, tg_dtype dt) {
    bool fl = tg_dtype_is_float(dt);
    double a = fl ? tg_load_f64(p, dt) : 0, b = fl ? tg_load_f64(q, dt) : 0;
    int64_t i = fl ? 0 : tg_load_i64(p, dt), j = fl ? 0 : tg_load_i64(q, dt);
    switch (op) {
    case TG_OP_LT:
        return fl ? a < b : i < j;
    case TG_OP_LE:
        return fl ? a <= b : i <= j;
    case TG_OP_GT:
        return fl ? a > b : i > j;
    case TG_OP_GE:
        return fl ? a >= b : i >= j;
    case TG_OP_EQ:
        return fl ? a == b : i == j;
    default:
        return fl ? a != b : i != j;
    }
}

/* Every neutral table gives the reference's bits for sizes around the vector widths and
 * every combination of contiguous and broadcast operands. */
static void test_neutral_kernels_exact(void **state) {
    (void)state;
    enum { NMAX = 600 };
    static const int64_t ns[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 511, 513, 600};
    static const int cmps[] = {TG_OP_LT, TG_OP_LE, TG_OP_GT, TG_OP_GE, TG_OP_EQ, TG_OP_NE};
    static _Alignas(64) char xb[3][NMAX * 8], yk[NMAX * 8 + 8], yr[NMAX * 8 + 8];
    char what[128];
    for (int isa = 0; isa < TG_VK_ISA_COUNT; isa++) {
        const tg_vk_ntable *nt = tg_vk_ntable_get((tg_vk_isa)isa);
        if (!nt) continue;
        for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
            int64_t n = ns[si];
            tg_vk_args a;
            /* casts to floats */
            for (int x = 0; x < TG_DT_COUNT; x++)
                for (int y = TG_DT_F32; y <= TG_DT_F64; y++)
                    for (int64_t s0 = 0; s0 <= 1; s0++) {
                        tg_dtype xd = (tg_dtype)x, yd = (tg_dtype)y;
                        size_t xs = tg_dtype_size(xd), ys = tg_dtype_size(yd);
                        for (int64_t i = 0; i < NMAX; i++)
                            neutral_value(xb[0] + i * (int64_t)xs, xd);
                        tg_vk_fn fn = tg_vk_select(&tg_op_cast, 1, &xd, yd, (tg_vk_isa)isa, &a);
                        memset(yk, 0x5a, sizeof yk);
                        memset(yr, 0x5a, sizeof yr);
                        fn(&a, n, yk, (const void *const[]){xb[0]}, &s0);
                        for (int64_t i = 0; i < n; i++) {
                            const char *px = xb[0] + i * s0 * (int64_t)xs;
                            char *py = yr + i * (int64_t)ys;
                            if (tg_dtype_is_float(xd))
                                tg_store_f64(py, yd, tg_load_f64(px, xd));
                            else
                                tg_store_f64(py, yd,
                                             yd == TG_DT_F32 ? (double)(float)tg_load_i64(px, xd)
                                                             : (double)tg_load_i64(px, xd));
                        }
                        snprintf(what, sizeof what, "%s cast %s -> %s n=%lld s=%lld",
                                 tg_vk_table_get((tg_vk_isa)isa)->name, tg_dtype_name(xd),
                                 tg_dtype_name(yd), (long long)n, (long long)s0);
                        if (memcmp(yk, yr, sizeof yk) != 0) fail_msg("%s: differs", what);
                    }
            /* where, every element size, bool condition of any stride */
            for (int d = 0; d < TG_DT_COUNT; d++)
                for (int comb = 0; comb < 8; comb++) {
                    tg_dtype dt = (tg_dtype)d, idt[3] = {TG_DT_BOOL, dt, dt};
                    int64_t es = (int64_t)tg_dtype_size(dt);
                    int64_t s[3] = {comb & 1, (comb >> 1) & 1, (comb >> 2) & 1};
                    for (int64_t i = 0; i < NMAX; i++) {
                        neutral_value(xb[0] + i, TG_DT_BOOL);
                        neutral_value(xb[1] + i * es, dt);
                        neutral_value(xb[2] + i * es, dt);
                    }
                    tg_vk_fn fn = tg_vk_select(&tg_op_where, 3, idt, dt, (tg_vk_isa)isa, &a);
                    memset(yk, 0x5a, sizeof yk);
                    memset(yr, 0x5a, sizeof yr);
                    fn(&a, n, yk, (const void *const[]){xb[0], xb[1], xb[2]}, s);
                    for (int64_t i = 0; i < n; i++) {
                        bool c = xb[0][i * s[0]] != 0;
                        const char *src = c ? xb[1] + i * s[1] * es : xb[2] + i * s[2] * es;
                        memcpy(yr + i * es, src, (size_t)es);
                        if (dt == TG_DT_BOOL) yr[i] = yr[i] != 0;
                    }
                    snprintf(what, sizeof what, "%s where %s n=%lld strides %d",
                             tg_vk_table_get((tg_vk_isa)isa)->name, tg_dtype_name(dt), (long long)n,
                             comb);
                    if (memcmp(yk, yr, sizeof yk) != 0) fail_msg("%s: differs", what);
                }
            /* comparisons */
            for (size_t o = 0; o < sizeof cmps / sizeof cmps[0]; o++)
                for (int d = 0; d < TG_DT_COUNT; d++)
                    for (int comb = 0; comb < 4; comb++) {
                        tg_dtype dt = (tg_dtype)d, idt[2] = {dt, dt};
                        if (!nt->cmp[cmps[o]][d]) continue;
                        int64_t es = (int64_t)tg_dtype_size(dt), s[2] = {comb & 1, comb >> 1};
                        for (int64_t i = 0; i < NMAX; i++) {
                            neutral_value(xb[0] + i * es, dt);
                            neutral_value(xb[1] + i * es, dt);
                            if (rnd() % 4 == 0) memcpy(xb[1] + i * es, xb[0] + i * es, (size_t)es);
                        }
                        tg_vk_fn fn = tg_vk_select(tg_op_table[cmps[o]], 2, idt, TG_DT_BOOL,
                                                   (tg_vk_isa)isa, &a);
                        memset(yk, 0x5a, sizeof yk);
                        memset(yr, 0x5a, sizeof yr);
                        fn(&a, n, yk, (const void *const[]){xb[0], xb[1]}, s);
                        for (int64_t i = 0; i < n; i++)
                            yr[i] = neutral_cmp(cmps[o], xb[0] + i * s[0] * es,
                                                xb[1] + i * s[1] * es, dt);
                        snprintf(what, sizeof what, "%s %s %s n=%lld strides %d",
                                 tg_vk_table_get((tg_vk_isa)isa)->name, tg_op_table[cmps[o]]->name,
                                 tg_dtype_name(dt), (long long)n, comb);
                        if (memcmp(yk, yr, sizeof yk) != 0) fail_msg("%s: differs", what);
                    }
        }
    }
}

/* Fused programs with casts from integers and bool, comparisons and where (W6's input
 * scaling, relu and its gradient, one-hot labels), and unfused where with a broadcast bool
 * condition: every node runs a VM kernel, with the reference's values, for sizes with
 * vector and block remainders, on one and two threads. */
static void test_fused_masks_and_casts(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g =
        parse_one("func f(x: u8[?, ?], z: f32[?, ?], d: f32[?, ?], k: i64[?, 1], c: i64[?],\n"
                  "       b: bool[?, ?], bc: bool[?, 1]) {\n"
                  "  p = fused{mul(cast(%0, dtype=\"f32\"), 0.003921569)}(x)\n"
                  "  r, s = fused{where(gt(%0, 0.0), %0, 0.0); where(gt(%0, 0.0), %1, 0.0)}(z, d)\n"
                  "  h = fused{cast(eq(%0, %1), dtype=\"f32\")}(k, c)\n"
                  "  w = fused{where(%0, %1, 1.5)}(bc, z)\n"
                  "  v = fused{add(cast(%0, dtype=\"f64\"), cast(%1, dtype=\"f64\"))}(b, x)\n"
                  "  u = where(bc, z, d)\n"
                  "  e = ge(k, c)\n"
                  "  return p, r, s, h, w, v, u, e\n"
                  "}\n",
                  &m);
    assert_int_equal(kind_count(g, VM_FUSED), 5);
    assert_int_equal(kind_count(g, VM_EW), 2);
    static const int64_t dims[][2] = {{1, 1},     {3, 7},      {5, 513},
                                      {17, 1025}, {2, 100003}, {256, 784}};
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        for (size_t q = 0; q < sizeof dims / sizeof dims[0]; q++) {
            int64_t r = dims[q][0], cn = dims[q][1];
            tg_tensor *x = tensor_of(TG_DT_U8, 2, dims[q]);
            tg_tensor *z = tensor_of(TG_DT_F32, 2, dims[q]);
            tg_tensor *d = tensor_of(TG_DT_F32, 2, dims[q]);
            tg_tensor *k = tensor_of(TG_DT_I64, 2, (int64_t[]){r, 1});
            tg_tensor *c = tensor_of(TG_DT_I64, 1, &cn);
            tg_tensor *b = tensor_of(TG_DT_BOOL, 2, dims[q]);
            tg_tensor *bc = tensor_of(TG_DT_BOOL, 2, (int64_t[]){r, 1});
            for (int64_t i = 0; i < r * cn; i++) {
                store(x, i, (double)(rnd() % 256));
                store(z, i, rnd() % 8 == 0 ? 0.0 : uniform(-1, 1));
                store(d, i, uniform(-1, 1));
                ((unsigned char *)tg_tensor_data(b))[i] = (unsigned char)(rnd() % 3);
            }
            for (int64_t i = 0; i < r; i++) {
                store(k, i, (double)(rnd() % 10));
                ((unsigned char *)tg_tensor_data(bc))[i] = (unsigned char)(rnd() % 2);
            }
            for (int64_t i = 0; i < cn; i++) store(c, i, (double)(i % 10));
            tg_tensor *in[7] = {x, z, d, k, c, b, bc};
            char what[64];
            snprintf(what, sizeof what, "masks and casts [%lld,%lld] threads %d", (long long)r,
                     (long long)cn, nt);
            run_both(vm, ref, in, 7, 8, 0, 0, what);
            for (int i = 0; i < 7; i++) tg_tensor_free(in[i]);
        }
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    tg_module_free(m);
}

/* log_softmax and softmax of rows run the VM's kernel (class reduce): short rows (many per
 * call of the exp kernel), rows longer than a block, one long row, special values (NaN,
 * +-inf, all -inf rows), f32 and f64, one and two threads, within the bounds of
 * vm_reduce.c; columns fall back to the reference at run time. */
static void test_softmax_rows(void **state) {
    (void)state;
    tg_module *m;
    tg_graph *g = parse_one("func f(x: f32[?, ?], y: f64[?, ?]) {\n"
                            "  a = log_softmax(x, axis=1)\n"
                            "  b = softmax(x, axis=-1)\n"
                            "  c = log_softmax(y, axis=1)\n"
                            "  d = softmax(y, axis=1)\n"
                            "  e = log_softmax(y, axis=0)\n"
                            "  return a, b, c, d, e\n"
                            "}\n",
                            &m);
    assert_int_equal(kind_count(g, VM_REDUCE), 5);
    static const int64_t dims[][2] = {{1, 1},    {3, 10},    {256, 10}, {7, 513},
                                      {2, 1025}, {1, 70001}, {3001, 3}};
    static const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 88.0, -800.0};
    for (int nt = 1; nt <= 2; nt++) {
        tg_fn *vm = compile_mode(g, TG_MODE_VM, nt, false);
        tg_fn *ref = compile_mode(g, TG_MODE_REFERENCE, 1, false);
        for (size_t q = 0; q < sizeof dims / sizeof dims[0]; q++) {
            int64_t r = dims[q][0], cn = dims[q][1];
            tg_tensor *x = tensor_of(TG_DT_F32, 2, dims[q]);
            tg_tensor *y = tensor_of(TG_DT_F64, 2, dims[q]);
            for (int64_t i = 0; i < r * cn; i++) {
                double v = uniform(-30, 30);
                int64_t row = i / cn;
                if (row % 5 == 1 && i % cn == (row / 5) % cn) /* one special in some rows */
                    v = specials[(row / 5) % (sizeof specials / sizeof specials[0])];
                if (row % 11 == 4) v = -INFINITY; /* whole rows of -inf */
                store(x, i, v);
                store(y, i, v * 10);
            }
            tg_tensor *in[2] = {x, y};
            char what[64];
            snprintf(what, sizeof what, "softmax rows [%lld,%lld] threads %d", (long long)r,
                     (long long)cn, nt);
            run_both(vm, ref, in, 2, 5, 4, 1e-13, what);
            tg_tensor_free(x);
            tg_tensor_free(y);
        }
        tg_fn_free(vm);
        tg_fn_free(ref);
    }
    tg_module_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_every_op),
        cmocka_unit_test(test_cast_every_pair),
        cmocka_unit_test(test_elementwise_layouts),
        cmocka_unit_test(test_div_by_power_of_two),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_dot_matmul),
        cmocka_unit_test(test_buffers_reused),
        cmocka_unit_test(test_shape_signatures),
        cmocka_unit_test(test_out_param),
        cmocka_unit_test(test_views_and_dynamic_shapes),
        cmocka_unit_test(test_shape_arithmetic_planned),
        cmocka_unit_test(test_runtime_errors_name_the_node),
        cmocka_unit_test(test_fused_nodes),
        cmocka_unit_test(test_fused_broadcast_rows),
        cmocka_unit_test(test_branches),
        cmocka_unit_test(test_branches_split_alone),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_sleef_accuracy),
        cmocka_unit_test(test_tables_agree_and_tails),
        cmocka_unit_test(test_neutral_kernels_selected),
        cmocka_unit_test(test_neutral_kernels_exact),
        cmocka_unit_test(test_fused_masks_and_casts),
        cmocka_unit_test(test_softmax_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
