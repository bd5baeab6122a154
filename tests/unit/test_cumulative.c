/* test_cumulative.c - the cumulative ops (cumsum cumprod cummax cummin diff): static and
 * run-time inference (NumPy's dtypes, flattening with axis=none, '?' and empty extents,
 * errors), the reference kernels against plain C loops on every dtype, axis and a
 * negative-stride view (and a flattened view whose strides do not collapse), and the
 * gradients: finite differences (tg_grad_check) on seeded inputs, including cumprod on
 * lines with one and several zeros and its second derivative away from zeros, and the
 * documented choices checked exactly (cumprod at zeros, cummax/cummin at ties and NaN).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "grad_testutil.h"
#include "ops_testutil.h"

#define F32 TG_DT_F32
#define F64 TG_DT_F64
#define I64 TG_DT_I64

static const tg_aval ax_none[1] = {AV_NONE};

/* ---- inference ---- */

static void test_infer(void **state) {
    (void)state;
    const tg_aval ax1[1] = {AV_INT(1)}, axm1[1] = {AV_INT(-1)}, ax2[1] = {AV_INT(2)};
    CHECK_INFER(tg_op_cumsum, ax1, "f32[2,3]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_cumsum, ax_none, "f32[6]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_cumsum, ax_none, "i64[6]", TY(TG_DT_I8, 2, 3)); /* NumPy: int64 */
    CHECK_INFER(tg_op_cumprod, axm1, "i64[2,3]", TY(TG_DT_BOOL, 2, 3));
    CHECK_INFER(tg_op_cumsum, axm1, "i64[2,3]", TY(TG_DT_U8, 2, 3)); /* NumPy: uint64 */
    CHECK_INFER(tg_op_cumprod, ax_none, "f64[?]", TY(F64, -1, 3));
    CHECK_INFER(tg_op_cumsum, ax_none, "f64[0]", TY(F64, 0, -1)); /* a 0 wins over '?' */
    CHECK_INFER(tg_op_cumsum, ax_none, "f64[1]", TY0(F64));
    CHECK_INFER(tg_op_cummax, ax1, "i16[?,3]", TY(TG_DT_I16, -1, 3));
    CHECK_INFER(tg_op_cummin, ax_none, "bool[3]", TY(TG_DT_BOOL, 3));
    CHECK_INFER_FAIL(tg_op_cumsum, ax2, TG_EINVAL, "axis 2 is out of bounds", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_cummax, ax1, TG_EINVAL, "dimension 0", TY0(F32));
    /* diff: n (default 1), axis (default -1) */
    const tg_aval d1[2] = {AV_INT(1), AV_INT(-1)}, d2a0[2] = {AV_INT(2), AV_INT(0)};
    const tg_aval d7[2] = {AV_INT(7), AV_INT(1)}, d0[2] = {AV_INT(0), AV_INT(1)};
    const tg_aval dneg[2] = {AV_INT(-1), AV_INT(0)}, dax[2] = {AV_INT(1), AV_INT(-3)};
    CHECK_INFER(tg_op_diff, d1, "f32[2,4]", TY(F32, 2, 5));
    CHECK_INFER(tg_op_diff, d2a0, "i32[1,4]", TY(TG_DT_I32, 3, 4));
    CHECK_INFER(tg_op_diff, d7, "f64[2,0]", TY(F64, 2, 5));
    CHECK_INFER(tg_op_diff, d0, "f64[2,5]", TY(F64, 2, 5));
    CHECK_INFER(tg_op_diff, d1, "bool[?]", TY(TG_DT_BOOL, -1));
    CHECK_INFER_FAIL(tg_op_diff, d1, TG_ESHAPE, "at least one dimensional", TY0(F64));
    CHECK_INFER_FAIL(tg_op_diff, dneg, TG_EINVAL, "order must be non-negative", TY(F64, 3));
    CHECK_INFER_FAIL(tg_op_diff, dax, TG_EINVAL, "axis -3 is out of bounds", TY(F64, 3, 2));
}

/* ---- the kernels against plain C ---- */

/* Element i (C order) of t as int64 / double. */
static int64_t at_i64(const tg_tensor *t, int64_t i) {
    int64_t idx[TG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    return tg_load_i64(tg_tensor_at(t, idx), t->dtype);
}
static double at_f64(const tg_tensor *t, int64_t i) {
    int64_t idx[TG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    return tg_load_f64(tg_tensor_at(t, idx), t->dtype);
}

/* Values of dtype dt in C order: small integers (some repeated, some 0) or floats. */
static tg_tensor *sample(tg_dtype dt, int nd, const int64_t *shape, uint64_t seed) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t r = (int64_t)(seed >> 33) % 13 - 6;
        double v = tg_dtype_is_float(dt) ? (double)r * 0.37 + 0.01 * (double)(i % 7) : (double)r;
        tg_store_f64((char *)tg_tensor_data(t) + i * (int64_t)tg_dtype_size(dt), dt, v);
    }
    return t;
}

typedef enum { K_SUM, K_PROD, K_MAX, K_MIN } kind;

/* The plain loops: one line (n elements at stride s of the C-order arrays) at a time. */
static void plain_cum(kind k, bool fl, const double *xf, const int64_t *xi, double *yf, int64_t *yi,
                      int64_t base, int64_t s, int64_t n) {
    double a = 0;
    uint64_t u = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t p = base + j * s;
        if (fl) {
            double v = xf[p];
            if (j == 0)
                a = v;
            else if (k == K_SUM)
                a = a + v;
            else if (k == K_PROD)
                a = a * v;
            else if (k == K_MAX)
                a = (a >= v || isnan(a)) ? a : v;
            else
                a = (a <= v || isnan(a)) ? a : v;
            yf[p] = a;
        } else {
            int64_t v = xi[p];
            if (j == 0)
                u = (uint64_t)v;
            else if (k == K_SUM)
                u += (uint64_t)v;
            else if (k == K_PROD)
                u *= (uint64_t)v;
            else if (k == K_MAX)
                u = (int64_t)u >= v ? u : (uint64_t)v;
            else
                u = (int64_t)u <= v ? u : (uint64_t)v;
            yi[p] = (int64_t)u;
        }
    }
}

static void test_cum_kernels(void **state) {
    (void)state;
    static const tg_op_def *const ops[] = {&tg_op_cumsum, &tg_op_cumprod, &tg_op_cummax,
                                           &tg_op_cummin};
    static const tg_dtype dts[] = {F64, F32, TG_DT_I32, TG_DT_I8, TG_DT_U8, TG_DT_BOOL, I64};
    const int64_t shape[3] = {3, 4, 5}, n = 60;
    double xf[60], yf[60];
    int64_t xi[60], yi[60];
    for (size_t d = 0; d < TG_COUNTOF(dts); d++) {
        tg_tensor *base = sample(dts[d], 3, shape, 11 + d);
        tg_tensor *x = mk_reversed(base); /* negative strides */
        bool fl = tg_dtype_is_float(dts[d]);
        for (int64_t i = 0; i < n; i++) {
            xf[i] = at_f64(x, i);
            xi[i] = at_i64(x, i);
        }
        for (int o = 0; o < 4; o++) {
            for (int axis = -1; axis < 3; axis++) { /* -1: none */
                const tg_aval attrs[1] = {axis < 0 ? AV_NONE : AV_INT(axis)};
                run_res r = run_op(ops[o], &x, 1, attrs);
                if (r.st != TG_OK) print_error("%s: %s\n", ops[o]->name, r.msg);
                assert_int_equal(r.st, TG_OK);
                if (axis < 0) {
                    plain_cum((kind)o, fl, xf, xi, yf, yi, 0, 1, n);
                } else {
                    int64_t s = 1;
                    for (int e = axis + 1; e < 3; e++) s *= shape[e];
                    for (int64_t b = 0; b < n; b++)
                        if ((b / s) % shape[axis] == 0)
                            plain_cum((kind)o, fl, xf, xi, yf, yi, b, s, shape[axis]);
                }
                for (int64_t i = 0; i < n; i++) {
                    if (fl) {
                        double want = dts[d] == F32 ? (double)(float)yf[i] : yf[i];
                        if (at_f64(r.out, i) != want)
                            print_error("%s %s axis %d [%lld]: %g, want %g\n", ops[o]->name,
                                        tg_dtype_name(dts[d]), axis, (long long)i, at_f64(r.out, i),
                                        want);
                        assert_true(at_f64(r.out, i) == want);
                    } else {
                        /* the plain loop's int64, stored in the output's dtype */
                        char buf[8];
                        tg_store_i64(buf, r.out->dtype, yi[i]);
                        assert_int_equal(at_i64(r.out, i), tg_load_i64(buf, r.out->dtype));
                    }
                }
                tg_tensor_free(r.out);
            }
        }
        tg_tensor_free(x);
        tg_tensor_free(base);
    }
}

/* NumPy's diff: n rounds of x[1:] - x[:-1] (bool: !=), integers wrapping in the dtype. */
static void test_diff_kernel(void **state) {
    (void)state;
    static const tg_dtype dts[] = {F64, F32, TG_DT_I16, TG_DT_U8, TG_DT_BOOL, I64};
    const int64_t shape[2] = {4, 9};
    for (size_t d = 0; d < TG_COUNTOF(dts); d++) {
        tg_tensor *base = sample(dts[d], 2, shape, 5 + d);
        tg_tensor *x = mk_reversed(base);
        for (int axis = 0; axis < 2; axis++) {
            for (int64_t order = 0; order <= 10; order++) {
                const tg_aval attrs[2] = {AV_INT(order), AV_INT(axis - 2)};
                run_res r = run_op(&tg_op_diff, &x, 1, attrs);
                if (r.st != TG_OK) print_error("diff: %s\n", r.msg);
                assert_int_equal(r.st, TG_OK);
                int64_t len = shape[axis], other = shape[1 - axis];
                int64_t m = len > order ? len - order : 0;
                assert_int_equal(r.out->shape[axis], m);
                for (int64_t o = 0; o < other; o++) {
                    double f[9];
                    int64_t v[9];
                    double mag = 0;
                    for (int64_t j = 0; j < len; j++) {
                        int64_t i = axis == 1 ? o * 9 + j : j * 9 + o;
                        f[j] = at_f64(x, i);
                        v[j] = at_i64(x, i);
                        mag += fabs(f[j]);
                    }
                    for (int64_t round = 0; round < order && round < len; round++)
                        for (int64_t j = 0; j + round + 1 < len; j++) {
                            f[j] = f[j + 1] - f[j];
                            v[j] = dts[d] == TG_DT_BOOL
                                       ? v[j + 1] != v[j]
                                       : (int64_t)((uint64_t)v[j + 1] - (uint64_t)v[j]);
                            if (dts[d] == F32) f[j] = (float)f[j];
                        }
                    for (int64_t j = 0; j < m; j++) {
                        int64_t i = axis == 1 ? o * m + j : j * other + o;
                        if (tg_dtype_is_float(dts[d])) {
                            double tol =
                                (dts[d] == F32 ? 1e-5 : 1e-12) * mag * (double)(1 << order);
                            assert_true(fabs(at_f64(r.out, i) - f[j]) <= tol);
                        } else {
                            char buf[8];
                            tg_store_i64(buf, dts[d], v[j]);
                            assert_int_equal(at_i64(r.out, i), tg_load_i64(buf, dts[d]));
                        }
                    }
                }
                tg_tensor_free(r.out);
            }
        }
        tg_tensor_free(x);
        tg_tensor_free(base);
    }
}

/* Values that must come out exactly: -0.0 kept by n = 0 and by the first element of a
 * cumulative sum, int64 wrapping, ties and NaN in the running extremes. */
static void test_exact_values(void **state) {
    (void)state;
    tg_tensor *x = mk_tensor(F64, SHAPE(5), VALS(-0.0, 0.0, NAN, 1.0, -2.0));
    run_res r = run_op(&tg_op_cumsum, &x, 1, ax_none);
    assert_int_equal(r.st, TG_OK);
    assert_true(signbit(tg_tensor_get_f64(r.out, 0)) && !signbit(tg_tensor_get_f64(r.out, 1)));
    assert_true(isnan(tg_tensor_get_f64(r.out, 4)));
    tg_tensor_free(r.out);
    r = run_op(&tg_op_cummax, &x, 1, ax_none); /* 0.0 does not replace -0.0; NaN stays */
    CHECK_T(r.out, F64, SHAPE(5), VALS(-0.0, -0.0, NAN, NAN, NAN));
    assert_true(signbit(tg_tensor_get_f64(r.out, 1)));
    tg_tensor_free(r.out);
    const tg_aval d0[2] = {AV_INT(0), AV_INT(0)};
    r = run_op(&tg_op_diff, &x, 1, d0);
    assert_true(signbit(tg_tensor_get_f64(r.out, 0)));
    tg_tensor_free(r.out);
    tg_tensor_free(x);
    x = mk_tensor(I64, SHAPE(3), VALS(INT64_MAX, 1, -1));
    r = run_op(&tg_op_cumsum, &x, 1, ax_none);
    assert_int_equal(at_i64(r.out, 1), INT64_MIN);
    assert_int_equal(at_i64(r.out, 2), INT64_MAX);
    tg_tensor_free(r.out);
    const tg_aval d1[2] = {AV_INT(1), AV_INT(0)};
    r = run_op(&tg_op_diff, &x, 1, d1);
    assert_int_equal(at_i64(r.out, 0), INT64_MIN + 2); /* 1 - INT64_MAX */
    tg_tensor_free(r.out);
    tg_tensor_free(x);
}

/* axis=none on a transposed view: the flattened line cannot be one stride. */
static void test_flat_view(void **state) {
    (void)state;
    tg_tensor *base = mk_arange(F64, SHAPE(3, 4));
    tg_tensor *xt = tg_tensor_view(base, 2, (const int64_t[]){4, 3}, (const int64_t[]){1, 4}, 0);
    assert_non_null(xt);
    run_res r = run_op(&tg_op_cumsum, &xt, 1, ax_none);
    assert_int_equal(r.st, TG_OK);
    /* xt in C order: 0 4 8 1 5 9 2 6 10 3 7 11 */
    CHECK_T(r.out, F64, SHAPE(12), VALS(0, 4, 12, 13, 18, 27, 29, 35, 45, 48, 55, 66));
    tg_tensor_free(r.out);
    tg_tensor_free(xt);
    tg_tensor_free(base);
}

static void test_empty(void **state) {
    (void)state;
    tg_tensor *x = tg_tensor_new(NULL, F32, 2, (const int64_t[]){2, 0});
    const tg_aval ax1[1] = {AV_INT(1)};
    run_res r = run_op(&tg_op_cumprod, &x, 1, ax1);
    assert_int_equal(r.st, TG_OK);
    CHECK_T(r.out, F32, SHAPE(2, 0), VALS(0));
    tg_tensor_free(r.out);
    r = run_op(&tg_op_cummin, &x, 1, ax_none);
    CHECK_T(r.out, F32, SHAPE(0), VALS(0));
    tg_tensor_free(r.out);
    const tg_aval d[2] = {AV_INT(3), AV_INT(0)};
    r = run_op(&tg_op_diff, &x, 1, d);
    assert_int_equal(r.st, TG_OK);
    CHECK_T(r.out, F32, SHAPE(0, 0), VALS(0));
    tg_tensor_free(r.out);
    tg_tensor_free(x);
}

/* ---- gradients ---- */

static tg_var *along(tg_graph *g, const char *op, tg_var *x, int axis) {
    tg_attr a = axis == INT32_MIN ? TG_A_NONE("axis") : TG_A_INT("axis", axis);
    return tg_apply(g, op, &x, 1, &a, 1);
}

#define NONE INT32_MIN

static void test_grad_check(void **state) {
    (void)state;
    static const char *const ops[] = {"cumsum", "cumprod", "cummax", "cummin"};
    for (int o = 0; o < 4; o++) {
        const int axes[] = {0, 1, -1, NONE};
        for (int a = 0; a < 4; a++) {
            tg_graph *g = graph();
            tg_var *x = input(g, "x", F64, SH(3, 4));
            check(g, along(g, ops[o], x, axes[a]), (tg_tensor *[]){rnd(31 + a, F64, SH(3, 4))}, 1,
                  ops[o]);
        }
        tg_graph *g = graph(); /* '?' extents: shape() paths */
        tg_var *x = input(g, "x", F64, SH(Q, 2, Q));
        check(g, along(g, ops[o], x, 2), (tg_tensor *[]){rnd(41, F64, SH(2, 2, 5))}, 1, ops[o]);
        g = graph();
        x = input(g, "x", F64, SH(Q, 3));
        check(g, along(g, ops[o], x, NONE), (tg_tensor *[]){rnd(42, F64, SH(2, 3))}, 1, ops[o]);
        g = graph();
        x = input(g, "x", F32, SH(6));
        check(g, along(g, ops[o], x, 0), (tg_tensor *[]){rnd(43, F32, SH(6))}, 1, ops[o]);
        g = graph(); /* 0-d, flattened to [1] */
        x = input(g, "x", F64, SH0);
        check(g, along(g, ops[o], x, NONE), (tg_tensor *[]){rnd(44, F64, SH0)}, 1, ops[o]);
    }
}

/* cumprod is a polynomial: its gradient at zeros is smooth, and finite differences see it.
 * Lines with no zero, one zero (first, inside, last) and two or more zeros. */
static void test_cumprod_zeros(void **state) {
    (void)state;
    const double rows[] = {2, 0, 3, 0.5, -1.5, 0,   1.5, 2,    -1, 0.75, 1.2, -0.7, 0.9, 0.8, 0,
                           0, 0, 2, 1,   -2,   1.1, 0,   -0.6, 0,  1.4,  0.5, -1.2, 1.3, 0.9, 0.7};
    for (int a = 0; a < 3; a++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(6, 5));
        check(g, along(g, "cumprod", x, a < 2 ? a : NONE),
              (tg_tensor *[]){tensor(F64, SH(6, 5), rows)}, 1, "cumprod with zeros");
    }
    /* exact: d/dx of sum(cumprod([2, 0, 3, 0.5])) is [1, 2 + 6 + 3, 0, 0], of
     * sum(cumprod([0, 0, 2, 3])) [1, 0, 0, 0] */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 4));
    tg_tensor *in[] = {tensor(F64, SH(2, 4), V(2, 0, 3, 0.5, 0, 0, 2, 3))};
    tg_tensor *gx = vjp_value(g, along(g, "cumprod", x, 1), x,
                              tensor(F64, SH(2, 4), V(1, 1, 1, 1, 1, 1, 1, 1)), in, 1);
    expect(gx, SH(2, 4), V(1, 11, 0, 0, 1, 0, 0, 0), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
    /* the second derivative away from zeros: the checker on the VJP graph */
    g = graph();
    x = input(g, "x", F64, SH(2, 4));
    tg_var *y = along(g, "cumprod", x, 1), *gv = NULL;
    tg_tensor *ct = rnd(51, F64, SH(2, 4));
    tg_var *c = tg_constant(g, ct);
    tg_tensor_free(ct);
    assert_int_equal(tg_vjp(g, &y, &c, 1, &x, 1, TG_DISCONNECTED_ERROR, &gv), TG_OK);
    check(g, gv, (tg_tensor *[]){rnd(52, F64, SH(2, 4))}, 1, "cumprod second order");
}

/* The cotangent goes to the first occurrence of the running extreme; after a NaN, to the
 * first NaN. */
static void test_cumext_ties(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(6));
    tg_tensor *in[] = {tensor(F64, SH(6), V(1, 3, 3, 2, 5, 5))};
    tg_tensor *gx =
        vjp_value(g, along(g, "cummax", x, 0), x, tensor(F64, SH(6), V(1, 2, 3, 4, 5, 6)), in, 1);
    expect(gx, SH(6), V(1, 9, 0, 0, 11, 0), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
    g = graph();
    x = input(g, "x", F64, SH(2, 4));
    in[0] = tensor(F64, SH(2, 4), V(1, NAN, 3, NAN, 2, -0.0, 0.0, -1));
    tg_tensor *cot = tensor(F64, SH(2, 4), V(1, 2, 3, 4, 1, 2, 3, 4));
    gx = vjp_value(g, along(g, "cummax", x, 1), x, cot, in, 1);
    expect(gx, SH(2, 4), V(1, 9, 0, 0, 10, 0, 0, 0), 0.0);
    tg_tensor_free(gx);
    g = graph();
    x = input(g, "x", F64, SH(2, 4));
    cot = tensor(F64, SH(2, 4), V(1, 2, 3, 4, 1, 2, 3, 4));
    gx = vjp_value(g, along(g, "cummin", x, 1), x, cot, in, 1);
    expect(gx, SH(2, 4), V(1, 9, 0, 0, 1, 5, 0, 4), 0.0);
    tg_tensor_free(gx);
    g = graph(); /* along axis 0 and flattened */
    x = input(g, "x", F64, SH(2, 4));
    cot = tensor(F64, SH(8), V(1, 2, 3, 4, 5, 6, 7, 8));
    gx = vjp_value(g, along(g, "cummin", x, NONE), x, cot, in, 1);
    expect(gx, SH(2, 4), V(1, 35, 0, 0, 0, 0, 0, 0), 0.0); /* the NaN at 1 holds the rest */
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
}

static tg_var *diff(tg_graph *g, tg_var *x, int64_t n, int axis) {
    tg_attr a[2] = {TG_A_INT("n", n), TG_A_INT("axis", axis)};
    return tg_apply(g, "diff", &x, 1, a, 2);
}

static void test_diff_grad(void **state) {
    (void)state;
    for (int64_t n = 0; n <= 6; n++) {
        for (int axis = -2; axis < 0; axis++) {
            tg_graph *g = graph();
            tg_var *x = input(g, "x", F64, SH(4, 5));
            check(g, diff(g, x, n, axis), (tg_tensor *[]){rnd(61 + (uint64_t)n, F64, SH(4, 5))}, 1,
                  "diff");
            g = graph(); /* '?' along the axis: min(extent, n) from shape(x) */
            x = input(g, "x", F64, SH(Q, Q));
            check(g, diff(g, x, n, axis), (tg_tensor *[]){rnd(71 + (uint64_t)n, F64, SH(4, 5))}, 1,
                  "diff ?");
        }
    }
    /* the transpose exactly: diff([a, b, c], 2) = a - 2b + c */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3));
    tg_tensor *in[] = {rnd(81, F64, SH(3))};
    tg_tensor *gx = vjp_value(g, diff(g, x, 2, 0), x, tensor(F64, SH(1), V(2)), in, 1);
    expect(gx, SH(3), V(2, -4, 2), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
}

/* Integer results carry nothing: cumsum of i32 is disconnected from x. */
static void test_integer_inputs(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3));
    tg_var *xi = tg_cast(g, x, TG_DT_I32);
    tg_var *loss = tg_reduce(g, "sum", tg_cast(g, along(g, "cumsum", xi, 0), F64), NULL, -1, false);
    tg_var *gx = NULL;
    assert_int_not_equal(tg_grad(g, loss, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer),          cmocka_unit_test(test_cum_kernels),
        cmocka_unit_test(test_diff_kernel),    cmocka_unit_test(test_exact_values),
        cmocka_unit_test(test_flat_view),      cmocka_unit_test(test_empty),
        cmocka_unit_test(test_grad_check),     cmocka_unit_test(test_cumprod_zeros),
        cmocka_unit_test(test_cumext_ties),    cmocka_unit_test(test_diff_grad),
        cmocka_unit_test(test_integer_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
