/* test_sort.c - sorting, selection and order statistics (sort argsort topk searchsorted
 * quantile median): inference (dtypes, flattening, the q axis, keepdims, errors: k larger
 * than the axis, q outside [0, 1], an empty quantile, a not 1-D, side), the reference
 * kernels against plain C (a stable insertion sort with NaN last, a linear search, NumPy's
 * interpolation on a sorted copy) on several dtypes, axes and negative-stride views, with
 * ties, NaN and signed zeros, and the gradients: finite differences away from ties
 * (tg_grad_check) and the documented choices at ties checked exactly.
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

/* ---- helpers ---- */

/* Runs op on x (one input) with both outputs of topk or the one of the others: run-time
 * inference, then the kernel. */
static tg_status run2(const tg_op_def *op, tg_tensor *const *in, int nin, const tg_aval *attrs,
                      tg_tensor **out, char *msg) {
    tg_type tin[2], tout[TG_MAX_OUTS];
    for (int i = 0; i < nin; i++) tin[i] = type_of(in[i]);
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = nin,
                   .attrs = attrs,
                   .out = tout,
                   .nout = op->nout,
                   .runtime = true};
    if (op->infer(&ic) != TG_OK) {
        snprintf(msg, 512, "%s", ic.msg);
        return ic.status;
    }
    for (int o = 0; o < op->nout; o++) {
        out[o] = tg_tensor_new(NULL, (tg_dtype)tout[o].dtype, tout[o].ndim, tout[o].shape);
        assert_non_null(out[o]);
    }
    tg_kern k = {.ctx = tg_ctx_default(),
                 .attrs = attrs,
                 .in = in,
                 .nin = nin,
                 .out = out,
                 .nout = op->nout,
                 .out_type = tout};
    tg_status st = op->ref(&k);
    if (st != TG_OK) snprintf(msg, 512, "%s", k.msg);
    return st;
}

static int64_t flat_i64(const tg_tensor *t, int64_t i) {
    int64_t idx[TG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    return tg_load_i64(tg_tensor_at(t, idx), t->dtype);
}

static const char *flat_at(const tg_tensor *t, int64_t i) {
    int64_t idx[TG_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    return tg_tensor_at(t, idx);
}

/* Plain order: NaN last, -0.0 == 0.0. */
static int plain_cmp(double a, double b) {
    if (isnan(a) || isnan(b)) return (isnan(a) != 0) - (isnan(b) != 0);
    return (a > b) - (a < b);
}

/* Values with ties, some NaN, signed zeros (floats) or small integers, in C order. */
static tg_tensor *sample(tg_dtype dt, int nd, const int64_t *shape, uint64_t seed) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t r = (int64_t)(seed >> 33) % 11 - 5;
        double v = (double)r;
        if (tg_dtype_is_float(dt)) {
            v = r == 5 ? NAN : r == 0 ? ((seed >> 20) & 1 ? -0.0 : 0.0) : r * 0.5;
        }
        tg_store_f64((char *)tg_tensor_data(t) + i * (int64_t)tg_dtype_size(dt), dt, v);
    }
    return t;
}

/* The line of x (C-order positions base + j * s, j < n) sorted stably: idx receives the
 * positions j in order. `desc`: largest first (NaN first), ties by position. */
static void plain_argsort(const tg_tensor *x, int64_t base, int64_t s, int64_t n, bool desc,
                          int64_t *idx) {
    for (int64_t j = 0; j < n; j++) {
        int64_t v = j, i = j;
        double xv = tg_load_f64(flat_at(x, base + v * s), x->dtype);
        while (i > 0) {
            double pv = tg_load_f64(flat_at(x, base + idx[i - 1] * s), x->dtype);
            int c = plain_cmp(pv, xv);
            if (desc ? c >= 0 : c <= 0) break;
            idx[i] = idx[i - 1];
            i--;
        }
        idx[i] = v;
    }
}

/* ---- inference ---- */

static void test_infer(void **state) {
    (void)state;
    const tg_aval axm1[1] = {AV_INT(-1)}, ax_none[1] = {AV_NONE}, ax2[1] = {AV_INT(2)};
    CHECK_INFER(tg_op_sort, axm1, "f32[2,?]", TY(F32, 2, -1));
    CHECK_INFER(tg_op_sort, ax_none, "i8[6]", TY(TG_DT_I8, 2, 3));
    CHECK_INFER(tg_op_argsort, axm1, "i64[2,3]", TY(TG_DT_BOOL, 2, 3));
    CHECK_INFER(tg_op_argsort, ax_none, "i64[?]", TY(F64, 2, -1));
    CHECK_INFER_FAIL(tg_op_sort, ax2, TG_EINVAL, "axis 2 is out of bounds", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_argsort, axm1, TG_EINVAL, "dimension 0", TY0(F32));
    CHECK_INFER(tg_op_sort, ax_none, "f32[1]", TY0(F32));
    /* topk: the values and i64 indices, k along axis */
    const tg_aval k2[2] = {AV_INT(2), AV_INT(-1)}, k0a0[2] = {AV_INT(0), AV_INT(0)};
    const tg_aval k5[2] = {AV_INT(5), AV_INT(1)}, kneg[2] = {AV_INT(-1), AV_INT(0)};
    const tg_aval kax[2] = {AV_INT(1), AV_INT(3)};
    tg_type tin = TY(F32, 3, 4), tout[TG_MAX_OUTS];
    tg_infer ic = {.op = &tg_op_topk, .in = &tin, .nin = 1, .attrs = k2, .out = tout, .nout = 2};
    assert_int_equal(tg_op_topk.infer(&ic), TG_OK);
    char s0[TG_TYPE_STR_MAX], s1[TG_TYPE_STR_MAX];
    assert_string_equal(tg_type_str(&tout[0], s0, sizeof s0), "f32[3,2]");
    assert_string_equal(tg_type_str(&tout[1], s1, sizeof s1), "i64[3,2]");
    CHECK_INFER(tg_op_topk, k0a0, "f64[0,4]", TY(F64, 3, 4));
    CHECK_INFER(tg_op_topk, k5, "u8[?,5]", TY(TG_DT_U8, -1, -1)); /* checked at run time */
    CHECK_INFER_FAIL(tg_op_topk, k5, TG_ESHAPE, "k = 5 is larger than the extent 4 of axis 1",
                     TY(F32, 3, 4));
    CHECK_INFER_FAIL(tg_op_topk, kneg, TG_EINVAL, "k must be at least 0", TY(F32, 3, 4));
    CHECK_INFER_FAIL(tg_op_topk, kax, TG_EINVAL, "axis 3 is out of bounds", TY(F32, 3, 4));
    /* searchsorted */
    const tg_aval left[1] = {{.kind = TG_ATTR_STR, .s = "left"}};
    const tg_aval up[1] = {{.kind = TG_ATTR_STR, .s = "up"}};
    CHECK_INFER(tg_op_searchsorted, left, "i64[2,?]", TY(F64, 5), TY(F64, 2, -1));
    CHECK_INFER(tg_op_searchsorted, left, "i64[]", TY(TG_DT_I32, -1), TY0(TG_DT_I32));
    CHECK_INFER_FAIL(tg_op_searchsorted, left, TG_ESHAPE, "a must be one-dimensional",
                     TY(F64, 2, 2), TY(F64, 3));
    CHECK_INFER_FAIL(tg_op_searchsorted, up, TG_EINVAL, "side must be \"left\" or \"right\"",
                     TY(F64, 2), TY(F64, 3));
    /* quantile: q, axis, keepdims */
    const double qs[3] = {0.1, 0.5, 1.0}, bad[2] = {0.5, 1.5};
    const tg_aval q1[3] = {{.kind = TG_ATTR_FLOAT, .f = 0.25}, AV_NONE, AV_BOOL(0)};
    const tg_aval q3[3] = {{.kind = TG_ATTR_FLOATS, .floats = qs, .n = 3}, AV_INTS(1), AV_BOOL(0)};
    const tg_aval q3k[3] = {
        {.kind = TG_ATTR_FLOATS, .floats = qs, .n = 3}, AV_INTS(0, 2), AV_BOOL(1)};
    const tg_aval qbad[3] = {{.kind = TG_ATTR_FLOATS, .floats = bad, .n = 2}, AV_NONE, AV_BOOL(0)};
    const tg_aval qnan[3] = {{.kind = TG_ATTR_FLOAT, .f = NAN}, AV_NONE, AV_BOOL(0)};
    CHECK_INFER(tg_op_quantile, q1, "f32[]", TY(F32, 3, 4));
    CHECK_INFER(tg_op_quantile, q1, "f64[]", TY(TG_DT_I32, 3, 4));
    CHECK_INFER(tg_op_quantile, q3, "f64[3,2,5]", TY(F64, 2, 4, 5));
    CHECK_INFER(tg_op_quantile, q3k, "f64[3,1,4,1]", TY(TG_DT_BOOL, 2, 4, 5));
    CHECK_INFER_FAIL(tg_op_quantile, qbad, TG_EINVAL, "in the range [0, 1], got q = 1.5",
                     TY(F32, 3));
    CHECK_INFER_FAIL(tg_op_quantile, qnan, TG_EINVAL, "in the range [0, 1]", TY(F32, 3));
    CHECK_INFER_FAIL(tg_op_quantile, q3, TG_ESHAPE, "empty axis", TY(F32, 3, 0));
    /* the q axis on top of a rank TG_MAX_DIMS input kept whole */
    int64_t ones[TG_MAX_DIMS];
    for (int d = 0; d < TG_MAX_DIMS; d++) ones[d] = 2;
    tg_type big = mk_type(F64, TG_MAX_DIMS, ones);
    CHECK_INFER_FAIL(tg_op_quantile, q3k, TG_ELIMIT, "dimensions", big);
    const tg_aval m_all[2] = {AV_NONE, AV_BOOL(0)}, m1k[2] = {AV_INTS(-1), AV_BOOL(1)};
    CHECK_INFER(tg_op_median, m_all, "f64[]", TY(TG_DT_U8, 3, 0)); /* NaN, as np.median */
    CHECK_INFER(tg_op_median, m1k, "f32[?,1]", TY(F32, -1, 7));
}

/* ---- kernels against plain C ---- */

static void test_sort_kernels(void **state) {
    (void)state;
    static const tg_dtype dts[] = {F64, F32, TG_DT_I32, TG_DT_U8, TG_DT_BOOL, TG_DT_I8, I64};
    const int64_t shape[2] = {5, 13}, n = 65;
    int64_t idx[65];
    for (size_t d = 0; d < TG_COUNTOF(dts); d++) {
        tg_tensor *base = sample(dts[d], 2, shape, 3 + d);
        tg_tensor *x = mk_reversed(base);
        size_t esz = tg_dtype_size(dts[d]);
        for (int axis = -1; axis < 2; axis++) {
            const tg_aval attrs[1] = {axis < 0 ? AV_NONE : AV_INT(axis)};
            tg_tensor *sv = NULL, *si = NULL;
            char msg[512];
            assert_int_equal(run2(&tg_op_sort, &x, 1, attrs, &sv, msg), TG_OK);
            assert_int_equal(run2(&tg_op_argsort, &x, 1, attrs, &si, msg), TG_OK);
            int64_t nl = axis < 0 ? 1 : shape[1 - axis], len = axis < 0 ? n : shape[axis];
            for (int64_t l = 0; l < nl; l++) {
                int64_t b = axis == 0 ? l : axis == 1 ? l * shape[1] : 0;
                int64_t s = axis == 0 ? shape[1] : 1;
                plain_argsort(x, b, s, len, false, idx);
                for (int64_t j = 0; j < len; j++) {
                    assert_int_equal(flat_i64(si, b + j * s), idx[j]);
                    /* the values bit for bit: signed zeros and NaN in x's order */
                    assert_memory_equal(flat_at(sv, b + j * s), flat_at(x, b + idx[j] * s), esz);
                }
            }
            tg_tensor_free(sv);
            tg_tensor_free(si);
            /* topk along the axis: the first k of the descending stable order */
            for (int64_t k = 0; axis >= 0 && k <= len; k += 3) {
                const tg_aval ka[2] = {AV_INT(k), AV_INT(axis)};
                tg_tensor *out[2] = {NULL, NULL};
                assert_int_equal(run2(&tg_op_topk, &x, 1, ka, out, msg), TG_OK);
                for (int64_t l = 0; l < nl; l++) {
                    int64_t b = axis == 0 ? l : l * shape[1], s = axis == 0 ? shape[1] : 1;
                    int64_t ob = axis == 0 ? l : l * k, os = axis == 0 ? shape[1] : 1;
                    plain_argsort(x, b, s, len, true, idx);
                    for (int64_t j = 0; j < k; j++) {
                        assert_int_equal(flat_i64(out[1], ob + j * os), idx[j]);
                        assert_memory_equal(flat_at(out[0], ob + j * os),
                                            flat_at(x, b + idx[j] * s), esz);
                    }
                }
                tg_tensor_free(out[0]);
                tg_tensor_free(out[1]);
            }
        }
        tg_tensor_free(x);
        tg_tensor_free(base);
    }
}

static void test_searchsorted_kernel(void **state) {
    (void)state;
    /* a sorted with repeats and NaN last, read through a negative stride */
    tg_tensor *ab = mk_tensor(F64, SHAPE(8), VALS(NAN, NAN, 7, 3, 3, 3, -1, -INFINITY));
    tg_tensor *a = mk_reversed(ab);
    tg_tensor *v =
        mk_tensor(F64, SHAPE(2, 5), VALS(3, -5, -INFINITY, NAN, 8, 7, -1, 0, 3.5, INFINITY));
    for (int right = 0; right < 2; right++) {
        const tg_aval side[1] = {{.kind = TG_ATTR_STR, .s = right ? "right" : "left"}};
        tg_tensor *out[1] = {NULL}, *in[2] = {a, v};
        char msg[512];
        assert_int_equal(run2(&tg_op_searchsorted, in, 2, side, out, msg), TG_OK);
        for (int64_t i = 0; i < 10; i++) {
            double vi = tg_tensor_get_f64(v, i);
            int64_t want = 0;
            for (int64_t j = 0; j < 8; j++) {
                int c = plain_cmp(tg_tensor_get_f64(a, j), vi);
                want += right ? c <= 0 : c < 0;
            }
            assert_int_equal(flat_i64(out[0], i), want);
        }
        tg_tensor_free(out[0]);
    }
    tg_tensor_free(v);
    tg_tensor_free(a);
    tg_tensor_free(ab);
    /* empty a: every v goes to 0 */
    a = tg_tensor_new(NULL, TG_DT_I32, 1, (const int64_t[]){0});
    v = mk_tensor(TG_DT_I32, SHAPE(2), VALS(1, -1));
    tg_tensor *in[2] = {a, v}, *out[1] = {NULL};
    char msg[512];
    const tg_aval left[1] = {{.kind = TG_ATTR_STR, .s = "left"}};
    assert_int_equal(run2(&tg_op_searchsorted, in, 2, left, out, msg), TG_OK);
    CHECK_T(out[0], I64, SHAPE(2), VALS(0, 0));
    tg_tensor_free(out[0]);
    tg_tensor_free(a);
    tg_tensor_free(v);
}

/* NumPy's linear method on the sorted slice s[0..n) (no NaN). */
static double plain_quantile(const double *s, int64_t n, double q) {
    double vi = (double)(n - 1) * q;
    int64_t lo = (int64_t)floor(vi), hi = lo + 1 < n ? lo + 1 : n - 1;
    double t = vi - floor(vi), a = s[lo], b = s[hi], d = b - a;
    return t >= 0.5 ? b - d * (1.0 - t) : a + d * t;
}

static void test_quantile_kernels(void **state) {
    (void)state;
    static const tg_dtype dts[] = {F64, F32, TG_DT_I16, TG_DT_U8, TG_DT_BOOL, I64};
    static const double qs[] = {0.0, 0.1, 0.25, 0.5, 0.77, 1.0};
    const int64_t shape[3] = {3, 4, 5};
    for (size_t d = 0; d < TG_COUNTOF(dts); d++) {
        tg_tensor *base = sample(dts[d], 3, shape, 21 + d);
        tg_tensor *x = mk_reversed(base);
        /* reduce axes 0 and 2 (kept: axis 1), keepdims */
        const tg_aval attrs[3] = {
            {.kind = TG_ATTR_FLOATS, .floats = qs, .n = 6}, AV_INTS(2, 0), AV_BOOL(1)};
        const tg_aval mattrs[2] = {AV_INTS(0, 2), AV_BOOL(1)};
        tg_tensor *qo[1] = {NULL}, *mo[1] = {NULL};
        char msg[512];
        assert_int_equal(run2(&tg_op_quantile, &x, 1, attrs, qo, msg), TG_OK);
        assert_int_equal(run2(&tg_op_median, &x, 1, mattrs, mo, msg), TG_OK);
        assert_int_equal(qo[0]->ndim, 4);
        assert_int_equal(qo[0]->shape[0], 6);
        for (int64_t c = 0; c < 4; c++) {
            double s[15];
            int64_t n = 0;
            bool nan = false;
            for (int64_t a0 = 0; a0 < 3; a0++)
                for (int64_t a2 = 0; a2 < 5; a2++) {
                    double v = tg_load_f64(flat_at(x, a0 * 20 + c * 5 + a2), dts[d]);
                    nan = nan || isnan(v);
                    int64_t i = n++;
                    while (i > 0 && s[i - 1] > v) {
                        s[i] = s[i - 1];
                        i--;
                    }
                    s[i] = v;
                }
            for (int k = 0; k < 6; k++) {
                double want = nan ? NAN : plain_quantile(s, n, qs[k]);
                if (dts[d] == F32) want = (float)want;
                double got = tg_tensor_get_f64(qo[0], k * 4 + c);
                assert_true(nan ? isnan(got) : got == want);
            }
            double med = nan ? NAN : s[7]; /* 15 elements: the 8th */
            if (dts[d] == F32) med = (float)med;
            double got = tg_tensor_get_f64(mo[0], c);
            assert_true(nan ? isnan(got) : got == med);
        }
        tg_tensor_free(qo[0]);
        tg_tensor_free(mo[0]);
        tg_tensor_free(x);
        tg_tensor_free(base);
    }
    /* the median of an even count is the mean of the middle two; of nothing, NaN */
    tg_tensor *x = mk_tensor(F64, SHAPE(2, 4), VALS(4, 1, 3, 2, INFINITY, 1, INFINITY, 0));
    const tg_aval m1[2] = {AV_INTS(1), AV_BOOL(0)};
    run_res r = run_op(&tg_op_median, &x, 1, m1);
    assert_true(tg_tensor_get_f64(r.out, 0) == 2.5 && tg_tensor_get_f64(r.out, 1) == INFINITY);
    tg_tensor_free(r.out);
    tg_tensor_free(x);
    x = tg_tensor_new(NULL, F32, 2, (const int64_t[]){2, 0});
    r = run_op(&tg_op_median, &x, 1, m1);
    CHECK_T(r.out, F32, SHAPE(2), VALS(NAN, NAN));
    tg_tensor_free(r.out);
    tg_tensor_free(x);
}

/* ---- gradients ---- */

static tg_var *sort_op(tg_graph *g, const char *op, tg_var *x, int axis, bool none) {
    tg_attr a = none ? TG_A_NONE("axis") : TG_A_INT("axis", axis);
    return tg_apply(g, op, &x, 1, &a, 1);
}

static tg_var *topk(tg_graph *g, tg_var *x, int64_t k, int axis, tg_var **ind) {
    tg_attr a[2] = {TG_A_INT("k", k), TG_A_INT("axis", axis)};
    tg_var *out[2];
    int nout = 2;
    if (tg_apply_multi(g, "topk", &x, 1, a, 2, out, &nout) != TG_OK) return NULL;
    if (ind) *ind = out[1];
    return out[0];
}

static tg_var *quantile(tg_graph *g, tg_var *x, const double *q, int nq, const int64_t *axes,
                        int naxes, bool keep) {
    tg_attr a[3] = {nq < 0 ? TG_A_FLOAT("q", q[0])
                           : (tg_attr){.name = "q", .kind = TG_ATTR_FLOATS, .floats = q, .n = nq},
                    naxes < 0 ? TG_A_NONE("axis") : TG_A_INTS("axis", axes, naxes),
                    TG_A_BOOL("keepdims", keep)};
    return tg_apply(g, "quantile", &x, 1, a, 3);
}

static tg_var *median(tg_graph *g, tg_var *x, const int64_t *axes, int naxes, bool keep) {
    tg_attr a[2] = {naxes < 0 ? TG_A_NONE("axis") : TG_A_INTS("axis", axes, naxes),
                    TG_A_BOOL("keepdims", keep)};
    return tg_apply(g, "median", &x, 1, a, 2);
}

static void test_sort_topk_grad(void **state) {
    (void)state;
    for (int a = 0; a < 3; a++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3, 5));
        check(g, sort_op(g, "sort", x, a == 2 ? 0 : a, a == 2),
              (tg_tensor *[]){rnd(1 + a, F64, SH(3, 5))}, 1, "sort");
        g = graph();
        x = input(g, "x", F64, SH(Q, 5));
        check(g, sort_op(g, "sort", x, -2, a == 2), (tg_tensor *[]){rnd(5 + a, F64, SH(4, 5))}, 1,
              "sort ?");
        for (int k = 0; k <= 3; k++) {
            g = graph();
            x = input(g, "x", F64, SH(3, Q));
            check(g, topk(g, x, k, a == 2 ? -1 : a, NULL),
                  (tg_tensor *[]){rnd(9 + (uint64_t)k, F64, SH(3, 4))}, 1, "topk");
        }
    }
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F32, SH(7));
    check(g, topk(g, x, 3, 0, NULL), (tg_tensor *[]){rnd(20, F32, SH(7))}, 1, "topk f32");
    /* ties: each element gets the cotangent of the place it was sorted to (stable) */
    g = graph();
    x = input(g, "x", F64, SH(4));
    tg_tensor *in[] = {tensor(F64, SH(4), V(2, 1, 2, NAN))};
    tg_tensor *gx = vjp_value(g, sort_op(g, "sort", x, 0, false), x,
                              tensor(F64, SH(4), V(10, 20, 30, 40)), in, 1);
    expect(gx, SH(4), V(20, 10, 30, 40), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
    g = graph();
    x = input(g, "x", F64, SH(5));
    in[0] = tensor(F64, SH(5), V(1, 3, 3, 2, 3));
    gx = vjp_value(g, topk(g, x, 2, 0, NULL), x, tensor(F64, SH(2), V(5, 7)), in, 1);
    expect(gx, SH(5), V(0, 5, 7, 0, 0), 0.0); /* the lowest indices among the ties */
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
}

static void test_order_stat_grad(void **state) {
    (void)state;
    const double q1[] = {0.3}, q3[] = {0.0, 0.45, 1.0};
    for (int keep = 0; keep < 2; keep++) {
        tg_graph *g = graph(); /* every axis, a scalar q */
        tg_var *x = input(g, "x", F64, SH(3, 4));
        check(g, quantile(g, x, q1, -1, NULL, -1, keep), (tg_tensor *[]){rnd(31, F64, SH(3, 4))}, 1,
              "quantile");
        g = graph(); /* a list of q over two axes: the reduced axes moved last */
        x = input(g, "x", F64, SH(2, 3, 4));
        check(g, quantile(g, x, q3, 3, (const int64_t[]){0, 2}, 2, keep),
              (tg_tensor *[]){rnd(32, F64, SH(2, 3, 4))}, 1, "quantile list");
        g = graph(); /* '?' extents: lo, hi and t computed in the graph */
        x = input(g, "x", F64, SH(Q, Q));
        check(g, quantile(g, x, q3, 3, (const int64_t[]){1}, 1, keep),
              (tg_tensor *[]){rnd(33, F64, SH(3, 6))}, 1, "quantile ?");
        for (int64_t n = 1; n <= 4; n++) { /* odd and even counts */
            g = graph();
            x = input(g, "x", F64, SH(2, Q));
            check(g, median(g, x, (const int64_t[]){-1}, 1, keep),
                  (tg_tensor *[]){rnd(40 + (uint64_t)n, F64, SH(2, n))}, 1, "median");
        }
        g = graph();
        x = input(g, "x", F32, SH(5, 2));
        check(g, median(g, x, NULL, -1, keep), /* elements far apart for f32's steps */
              (tg_tensor *[]){
                  tensor(F32, SH(5, 2), V(0.5, -1.25, 2, 0.75, -0.5, 1.5, -2, 0.25, 1, -1.75))},
              1, "median f32");
        g = graph(); /* axis=[]: each element is its own slice */
        x = input(g, "x", F64, SH(2, 3));
        check(g, median(g, x, NULL, 0, keep), (tg_tensor *[]){rnd(51, F64, SH(2, 3))}, 1,
              "median of nothing reduced");
    }
    /* ties: ranks come from the stable argsort. [3, 1, 2, 2]: sorted 1, 2, 2, 3; the median
     * takes ranks 1 and 2 (x[2] and x[3]) at 1/2 each; q = 0.9 takes ranks 2 and 3 at 0.3
     * and 0.7 (t = 2.7 - 2). */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(4));
    tg_tensor *in[] = {tensor(F64, SH(4), V(3, 1, 2, 2))};
    tg_tensor *gx = vjp_value(g, median(g, x, NULL, -1, false), x, tensor(F64, SH0, V(2)), in, 1);
    expect(gx, SH(4), V(0, 0, 1, 1), 0.0);
    tg_tensor_free(gx);
    g = graph();
    x = input(g, "x", F64, SH(4));
    gx = vjp_value(g, quantile(g, x, (const double[]){0.9}, -1, NULL, -1, false), x,
                   tensor(F64, SH0, V(1)), in, 1);
    expect(gx, SH(4), V(0.7, 0, 0, 0.3), 1e-15);
    tg_tensor_free(gx);
    tg_tensor_free(in[0]);
}

/* argsort and searchsorted have integer results: nothing flows. */
static void test_no_grad(void **state) {
    (void)state;
    assert_int_equal(tg_op_argsort.grad, TG_GRAD_NONE);
    assert_int_equal(tg_op_searchsorted.grad, TG_GRAD_NONE);
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3));
    tg_var *cost =
        tg_reduce(g, "sum", tg_cast(g, sort_op(g, "argsort", x, 0, false), F64), NULL, -1, false);
    tg_var *gx = NULL;
    assert_int_not_equal(tg_grad(g, cost, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_graph_free(g);
    /* topk's indices carry nothing either: a cost of the indices alone is disconnected */
    g = graph();
    x = input(g, "x", F64, SH(3));
    tg_var *ind = NULL;
    assert_non_null(topk(g, x, 2, 0, &ind));
    cost = tg_reduce(g, "sum", tg_cast(g, ind, F64), NULL, -1, false);
    assert_int_not_equal(tg_grad(g, cost, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer),
        cmocka_unit_test(test_sort_kernels),
        cmocka_unit_test(test_searchsorted_kernel),
        cmocka_unit_test(test_quantile_kernels),
        cmocka_unit_test(test_sort_topk_grad),
        cmocka_unit_test(test_order_stat_grad),
        cmocka_unit_test(test_no_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
