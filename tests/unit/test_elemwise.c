/* test_elemwise.c - the elementwise op family: NEP 50 promotion (strong and weak), the
 * broadcasting rules with '?' and nobcast, each record's promote/infer, and the values
 * of every op through its reference kernel, edge cases included (wrap-around, floor
 * division, NaN propagation, half-to-even rounding, shifts, casts of NaN/inf).
 * Expected values are hand-computed or come from NumPy 1.24 with
 * np._set_promotion_state("weak"), written here as literals; where tgraph deliberately
 * differs from NumPy (no f16, cast of NaN/out-of-range floats) the comment says so.
 * The last tests go through the public API: builders, compile, call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ir/ir.h"
#include "ops/ops.h"

/* ---- helpers ---- */

static tg_type ty(tg_dtype dt, int ndim, const int64_t *shape) {
    tg_type t;
    memset(&t, 0, sizeof t);
    t.dtype = (uint8_t)dt;
    t.ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    return t;
}

static tg_type sc(tg_dtype dt) { return ty(dt, 0, NULL); } /* strong 0-d */

static tg_type weak(tg_dtype dt) {
    tg_type t = ty(dt, 0, NULL);
    t.weak = 1;
    return t;
}

static tg_dtype prom(tg_type a, tg_type b) {
    const tg_type *p[2] = {&a, &b};
    return tg_promote_types(p, 2);
}

static const tg_op_def *opdef(const char *name) {
    int i = tg_op_lookup(name);
    assert_true(i >= 0);
    return tg_op_table[i];
}

/* Calls op->promote; on success `want` holds one dtype per input. */
static tg_status promote_op(const char *name, const tg_type *in, int nin, tg_dtype *want,
                            char *msg) {
    const tg_op_def *op = opdef(name);
    tg_type out[TG_MAX_OUTS];
    tg_infer ic = {.op = op, .in = in, .nin = nin, .out = out, .nout = op->nout};
    for (int i = 0; i < nin; i++) want[i] = (tg_dtype)in[i].dtype;
    assert_non_null(op->promote);
    tg_status st = op->promote(&ic, want);
    if (msg) snprintf(msg, 512, "%s", ic.msg);
    return st;
}

static tg_status infer_op(const char *name, const tg_type *in, int nin, const tg_aval *attrs,
                          tg_type *out, char *msg) {
    const tg_op_def *op = opdef(name);
    tg_infer ic = {.op = op, .in = in, .nin = nin, .attrs = attrs, .out = out, .nout = op->nout};
    tg_status st = op->infer(&ic);
    if (st == TG_OK) assert_int_equal(ic.nout, 1);
    if (msg) snprintf(msg, 512, "%s", ic.msg);
    return st;
}

/* Runs op's reference kernel on tensors as the interpreter does (run-time inference,
 * then a fresh output). Returns the output, or NULL with the message in msg. */
static tg_tensor *run(const char *name, tg_tensor *const *in, int nin, const tg_aval *attrs,
                      char *msg) {
    int opi = tg_op_lookup(name);
    assert_true(opi >= 0);
    const tg_op_def *op = tg_op_table[opi];
    tg_type tin[4], tout[TG_MAX_OUTS];
    assert_true(nin <= 4);
    for (int i = 0; i < nin; i++) tin[i] = ty(in[i]->dtype, in[i]->ndim, in[i]->shape);
    tg_infer ic = {.op = op,
                   .in = tin,
                   .nin = nin,
                   .attrs = attrs,
                   .out = tout,
                   .nout = op->nout,
                   .runtime = true};
    if (op->infer(&ic) != TG_OK) {
        if (msg) snprintf(msg, 512, "%s", ic.msg);
        return NULL;
    }
    tg_tensor *o = tg_tensor_new(NULL, (tg_dtype)tout[0].dtype, tout[0].ndim, tout[0].shape);
    assert_non_null(o);
    tg_node node = {.op = opi, .nin = nin, .nout = 1, .attrs = (tg_aval *)attrs};
    tg_tensor *outs[1] = {o};
    tg_kern k = {.ctx = tg_ctx_default(),
                 .node = &node,
                 .attrs = attrs,
                 .in = in,
                 .nin = nin,
                 .out = outs,
                 .nout = 1,
                 .out_type = tout};
    if (op->ref(&k) != TG_OK) {
        assert_int_not_equal(k.status, TG_OK);
        if (msg) snprintf(msg, 512, "%s", k.msg);
        tg_tensor_free(o);
        return NULL;
    }
    return o;
}

static tg_tensor *vec(tg_dtype dt, int64_t n, const void *data) {
    tg_tensor *t = tg_tensor_from_data(NULL, dt, 1, &n, data);
    assert_non_null(t);
    return t;
}

static tg_tensor *run1(const char *name, tg_tensor *a) {
    char msg[512] = "";
    tg_tensor *o = run(name, &a, 1, NULL, msg);
    if (!o) fail_msg("%s: %s", name, msg);
    return o;
}

static tg_tensor *run2(const char *name, tg_tensor *a, tg_tensor *b) {
    char msg[512] = "";
    tg_tensor *in[2] = {a, b};
    tg_tensor *o = run(name, in, 2, NULL, msg);
    if (!o) fail_msg("%s: %s", name, msg);
    return o;
}

/* The same, freeing the inputs (for inputs made inline). */
static tg_tensor *run1_take(const char *name, tg_tensor *a) {
    tg_tensor *o = run1(name, a);
    tg_tensor_free(a);
    return o;
}

static tg_tensor *run2_take(const char *name, tg_tensor *a, tg_tensor *b) {
    tg_tensor *o = run2(name, a, b);
    tg_tensor_free(a);
    tg_tensor_free(b);
    return o;
}

/* Element at flat C-order index, as int64 (exact for every integer dtype). */
static int64_t geti(const tg_tensor *t, int64_t flat) {
    int64_t idx[TG_MAX_DIMS] = {0};
    for (int i = t->ndim - 1; i >= 0; i--) {
        idx[i] = flat % t->shape[i];
        flat /= t->shape[i];
    }
    return tg_load_i64(tg_tensor_at(t, idx), t->dtype);
}

static void check_i(tg_tensor *t, tg_dtype dt, int64_t n, const int64_t *want) {
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(tg_tensor_size(t), n);
    for (int64_t i = 0; i < n; i++) {
        if (geti(t, i) != want[i])
            fail_msg("element %lld: got %lld, want %lld", (long long)i, (long long)geti(t, i),
                     (long long)want[i]);
    }
    tg_tensor_free(t);
}

/* Exact comparison (NaN equals NaN; -0.0 and 0.0 are told apart when `sign` is set),
 * or relative tolerance tol. */
static void check_f_tol(tg_tensor *t, tg_dtype dt, int64_t n, const double *want, double tol,
                        bool sign) {
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(tg_tensor_size(t), n);
    for (int64_t i = 0; i < n; i++) {
        double g = tg_tensor_get_f64(t, i), w = want[i];
        bool ok = isnan(w)                 ? isnan(g)
                  : tol > 0 && isfinite(w) ? fabs(g - w) <= tol * fmax(1.0, fabs(w))
                                           : g == w;
        if (ok && sign && !isnan(w)) ok = signbit(g) == signbit(w);
        if (!ok) fail_msg("element %lld: got %.17g, want %.17g", (long long)i, g, w);
    }
    tg_tensor_free(t);
}

static void check_f(tg_tensor *t, tg_dtype dt, int64_t n, const double *want) {
    check_f_tol(t, dt, n, want, 0.0, false);
}

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define F64(...) ((const double[]){__VA_ARGS__})
#define NAN_     ((double)NAN)
#define INF_     ((double)INFINITY)

/* ---- promotion ---- */

static void test_promote_strong(void **state) {
    (void)state;
    /* NumPy 1.24 np.result_type on the pairs (and u8+i8 etc.) */
    static const struct {
        tg_dtype a, b, want;
    } cases[] = {
        {TG_DT_I32, TG_DT_F32, TG_DT_F64}, {TG_DT_I64, TG_DT_F32, TG_DT_F64},
        {TG_DT_I8, TG_DT_F32, TG_DT_F32},  {TG_DT_U8, TG_DT_F32, TG_DT_F32},
        {TG_DT_I16, TG_DT_F32, TG_DT_F32}, {TG_DT_U8, TG_DT_I8, TG_DT_I16},
        {TG_DT_I64, TG_DT_U8, TG_DT_I64},  {TG_DT_U8, TG_DT_I16, TG_DT_I16},
        {TG_DT_U8, TG_DT_I32, TG_DT_I32},  {TG_DT_F32, TG_DT_F64, TG_DT_F64},
        {TG_DT_BOOL, TG_DT_I8, TG_DT_I8},  {TG_DT_BOOL, TG_DT_BOOL, TG_DT_BOOL},
        {TG_DT_I8, TG_DT_I16, TG_DT_I16},  {TG_DT_BOOL, TG_DT_F32, TG_DT_F32},
        {TG_DT_U8, TG_DT_U8, TG_DT_U8},    {TG_DT_I32, TG_DT_F64, TG_DT_F64},
        {TG_DT_I8, TG_DT_I64, TG_DT_I64},  {TG_DT_U8, TG_DT_F64, TG_DT_F64},
        {TG_DT_BOOL, TG_DT_U8, TG_DT_U8},
    };
    for (size_t i = 0; i < TG_COUNTOF(cases); i++) {
        assert_int_equal(prom(sc(cases[i].a), sc(cases[i].b)), cases[i].want);
        assert_int_equal(prom(sc(cases[i].b), sc(cases[i].a)), cases[i].want);
    }
    /* typed 0-d values are strong: f32[3] x f64[] -> f64 */
    assert_int_equal(prom(ty(TG_DT_F32, 1, I64(3)), sc(TG_DT_F64)), TG_DT_F64);
    /* three at once, in any order */
    tg_type u8 = sc(TG_DT_U8), i8 = sc(TG_DT_I8), f32 = sc(TG_DT_F32), i32 = sc(TG_DT_I32);
    assert_int_equal(tg_promote_types((const tg_type *[]){&u8, &i8, &f32}, 3), TG_DT_F32);
    assert_int_equal(tg_promote_types((const tg_type *[]){&f32, &u8, &i8}, 3), TG_DT_F32);
    assert_int_equal(tg_promote_types((const tg_type *[]){&u8, &i32, &f32}, 3), TG_DT_F64);
}

static void test_promote_weak(void **state) {
    (void)state;
    /* NumPy 1.24, weak promotion: x + 1, x + 1.0, x + True */
    assert_int_equal(prom(weak(TG_DT_I64), sc(TG_DT_I8)), TG_DT_I8);
    assert_int_equal(prom(sc(TG_DT_U8), weak(TG_DT_I64)), TG_DT_U8);
    assert_int_equal(prom(weak(TG_DT_F64), sc(TG_DT_F32)), TG_DT_F32);
    assert_int_equal(prom(weak(TG_DT_I64), sc(TG_DT_F32)), TG_DT_F32);
    assert_int_equal(prom(weak(TG_DT_F64), sc(TG_DT_I32)), TG_DT_F64);
    assert_int_equal(prom(weak(TG_DT_F64), sc(TG_DT_I8)), TG_DT_F64);
    assert_int_equal(prom(weak(TG_DT_F64), sc(TG_DT_BOOL)), TG_DT_F64);
    assert_int_equal(prom(weak(TG_DT_I64), sc(TG_DT_BOOL)), TG_DT_I64);
    assert_int_equal(prom(weak(TG_DT_BOOL), sc(TG_DT_I8)), TG_DT_I8);
    assert_int_equal(prom(weak(TG_DT_BOOL), sc(TG_DT_BOOL)), TG_DT_BOOL);
    assert_int_equal(prom(weak(TG_DT_F64), sc(TG_DT_F64)), TG_DT_F64);
    /* all weak: the default dtype of the highest category */
    assert_int_equal(prom(weak(TG_DT_I64), weak(TG_DT_I64)), TG_DT_I64);
    assert_int_equal(prom(weak(TG_DT_I64), weak(TG_DT_F64)), TG_DT_F64);
    assert_int_equal(prom(weak(TG_DT_BOOL), weak(TG_DT_BOOL)), TG_DT_BOOL);
    assert_int_equal(prom(weak(TG_DT_BOOL), weak(TG_DT_I64)), TG_DT_I64);
    /* a weak float with a strong i8 and a weak int: the float wins -> f64 */
    tg_type a = weak(TG_DT_I64), b = weak(TG_DT_F64), c = sc(TG_DT_I8);
    assert_int_equal(tg_promote_types((const tg_type *[]){&a, &c, &b}, 3), TG_DT_F64);
    tg_type d = sc(TG_DT_F32);
    assert_int_equal(tg_promote_types((const tg_type *[]){&a, &d, &b}, 3), TG_DT_F32);
}

static void test_ew_promote_wants(void **state) {
    (void)state;
    tg_dtype want[3];
    char msg[512];
    tg_type in[3];

    in[0] = sc(TG_DT_I32), in[1] = sc(TG_DT_F32);
    assert_int_equal(promote_op("add", in, 2, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F64);
    assert_int_equal(want[1], TG_DT_F64);

    in[0] = sc(TG_DT_I8), in[1] = weak(TG_DT_I64);
    assert_int_equal(promote_op("mul", in, 2, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_I8);
    assert_int_equal(want[1], TG_DT_I8);

    /* true division: NumPy gives f64 for any integers or bools */
    in[0] = sc(TG_DT_I8), in[1] = sc(TG_DT_I8);
    assert_int_equal(promote_op("div", in, 2, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F64);
    in[0] = sc(TG_DT_BOOL), in[1] = sc(TG_DT_BOOL);
    assert_int_equal(promote_op("div", in, 2, want, msg), TG_OK);
    assert_int_equal(want[1], TG_DT_F64);
    in[0] = sc(TG_DT_I8), in[1] = sc(TG_DT_F32);
    assert_int_equal(promote_op("div", in, 2, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F32);

    /* unary math: i8/u8/bool -> f32 (NumPy f16), i16 -> f32, i32/i64 -> f64 */
    static const struct {
        tg_dtype in, want;
    } um[] = {
        {TG_DT_BOOL, TG_DT_F32}, {TG_DT_I8, TG_DT_F32},  {TG_DT_U8, TG_DT_F32},
        {TG_DT_I16, TG_DT_F32},  {TG_DT_I32, TG_DT_F64}, {TG_DT_I64, TG_DT_F64},
        {TG_DT_F32, TG_DT_F32},  {TG_DT_F64, TG_DT_F64},
    };
    for (size_t i = 0; i < TG_COUNTOF(um); i++) {
        in[0] = sc(um[i].in);
        assert_int_equal(promote_op("exp", in, 1, want, msg), TG_OK);
        assert_int_equal(want[0], um[i].want);
        assert_int_equal(promote_op("floor", in, 1, want, msg), TG_OK);
        assert_int_equal(want[0], um[i].want);
    }
    in[0] = weak(TG_DT_I64);
    assert_int_equal(promote_op("sqrt", in, 1, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F64);

    /* ops without a bool loop in NumPy compute bools as i8 */
    in[0] = sc(TG_DT_BOOL), in[1] = sc(TG_DT_BOOL);
    const char *booli8[] = {"int_div", "mod", "pow", "left_shift", "right_shift"};
    for (size_t i = 0; i < TG_COUNTOF(booli8); i++) {
        assert_int_equal(promote_op(booli8[i], in, 2, want, msg), TG_OK);
        assert_int_equal(want[0], TG_DT_I8);
        assert_int_equal(want[1], TG_DT_I8);
    }
    /* bools are fine where NumPy has a bool loop */
    const char *boolok[] = {"add", "mul", "maximum", "minimum", "and", "or", "xor", "lt", "eq"};
    for (size_t i = 0; i < TG_COUNTOF(boolok); i++) {
        assert_int_equal(promote_op(boolok[i], in, 2, want, msg), TG_OK);
        assert_int_equal(want[0], TG_DT_BOOL);
    }

    /* refused categories name the dtypes */
    assert_int_equal(promote_op("sub", in, 2, want, msg), TG_ETYPE);
    assert_string_equal(msg, "not supported for dtypes bool and bool");
    assert_int_equal(promote_op("neg", in, 1, want, msg), TG_ETYPE);
    assert_string_equal(msg, "not supported for dtype bool");
    assert_int_equal(promote_op("sign", in, 1, want, msg), TG_ETYPE);
    in[0] = sc(TG_DT_F32);
    assert_int_equal(promote_op("not", in, 1, want, msg), TG_ETYPE);
    assert_non_null(strstr(msg, "f32"));
    in[0] = sc(TG_DT_I8), in[1] = weak(TG_DT_F64);
    assert_int_equal(promote_op("and", in, 2, want, msg), TG_ETYPE);
    assert_string_equal(msg, "not supported for dtypes i8 and f64 literal");
    assert_int_equal(promote_op("left_shift", in, 2, want, msg), TG_ETYPE);
    in[0] = sc(TG_DT_I8), in[1] = sc(TG_DT_I8), in[2] = sc(TG_DT_F32);
    assert_int_equal(promote_op("clip", in, 3, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F32);
    assert_int_equal(want[2], TG_DT_F32);

    /* comparisons promote their operands and give bool */
    tg_type out[TG_MAX_OUTS];
    in[0] = ty(TG_DT_I8, 1, I64(3)), in[1] = sc(TG_DT_F32);
    assert_int_equal(promote_op("lt", in, 2, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_F32);
    assert_int_equal(infer_op("lt", in, 2, NULL, out, msg), TG_OK);
    assert_int_equal(out[0].dtype, TG_DT_BOOL);
    assert_int_equal(out[0].ndim, 1);
    assert_int_equal(out[0].shape[0], 3);
    in[0] = sc(TG_DT_I32);
    assert_int_equal(infer_op("isnan", in, 1, NULL, out, msg), TG_OK);
    assert_int_equal(out[0].dtype, TG_DT_BOOL);

    /* where: cond becomes bool, a and b promote together */
    in[0] = sc(TG_DT_I32), in[1] = ty(TG_DT_F32, 1, I64(2)), in[2] = sc(TG_DT_I64);
    assert_int_equal(promote_op("where", in, 3, want, msg), TG_OK);
    assert_int_equal(want[0], TG_DT_BOOL);
    assert_int_equal(want[1], TG_DT_F64);
    assert_int_equal(want[2], TG_DT_F64);
    in[2] = weak(TG_DT_I64);
    assert_int_equal(promote_op("where", in, 3, want, msg), TG_OK);
    assert_int_equal(want[1], TG_DT_F32);
    assert_int_equal(want[2], TG_DT_F32);
    in[0] = ty(TG_DT_BOOL, 2, I64(4, 1)), in[1] = ty(TG_DT_F32, 1, I64(2)), in[2] = sc(TG_DT_F32);
    assert_int_equal(infer_op("where", in, 3, NULL, out, msg), TG_OK);
    assert_int_equal(out[0].dtype, TG_DT_F32);
    assert_int_equal(out[0].ndim, 2);
    assert_int_equal(out[0].shape[0], 4);
    assert_int_equal(out[0].shape[1], 2);

    /* cast: the attribute decides */
    tg_aval a = {.kind = TG_ATTR_INT, .i = TG_DT_I16};
    in[0] = ty(TG_DT_F64, 2, I64(-1, 3));
    assert_int_equal(infer_op("cast", in, 1, &a, out, msg), TG_OK);
    assert_int_equal(out[0].dtype, TG_DT_I16);
    assert_int_equal(out[0].shape[0], -1);
    assert_int_equal(out[0].shape[1], 3);
    assert_null(opdef("cast")->promote);
}

/* ---- broadcasting ---- */

static tg_status bcast(const tg_type *t, int n, tg_type *out, char *msg) {
    tg_infer ic = {.op = opdef("add"), .in = t, .nin = n};
    const tg_type *p[4];
    for (int i = 0; i < n; i++) p[i] = &t[i];
    bool ok = tg_broadcast_types(&ic, p, n, out);
    snprintf(msg, 512, "%s", ic.msg);
    assert_true(ok == (ic.status == TG_OK));
    return ic.status;
}

static void expect_shape(const tg_type *t, int ndim, const int64_t *shape) {
    assert_int_equal(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
}

static void test_broadcast(void **state) {
    (void)state;
    tg_type in[3], out;
    char msg[512];

    in[0] = ty(TG_DT_F32, 1, I64(3)), in[1] = ty(TG_DT_F32, 1, I64(4));
    assert_int_equal(bcast(in, 2, &out, msg), TG_ESHAPE);
    assert_string_equal(msg, "cannot broadcast f32[3] with f32[4]");

    in[0] = ty(TG_DT_F32, 2, I64(2, 1)), in[1] = ty(TG_DT_F32, 1, I64(3));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 2, I64(2, 3));

    in[0] = ty(TG_DT_F32, 0, NULL), in[1] = ty(TG_DT_F32, 2, I64(2, 3));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 2, I64(2, 3));

    /* '?' rules */
    in[0] = ty(TG_DT_F32, 1, I64(-1)), in[1] = ty(TG_DT_F32, 1, I64(-1));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 1, I64(-1));
    in[1] = ty(TG_DT_F32, 1, I64(5));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 1, I64(5));
    in[1] = ty(TG_DT_F32, 1, I64(1));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 1, I64(-1));
    in[0] = ty(TG_DT_F32, 2, I64(-1, 1)), in[1] = ty(TG_DT_F32, 2, I64(1, -1));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 2, I64(-1, -1));

    /* 0 extents: a broadcasting 1 adopts 0; 0 against 3 is an error */
    in[0] = ty(TG_DT_F32, 2, I64(0, 3)), in[1] = ty(TG_DT_F32, 1, I64(1));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 2, I64(0, 3));
    in[1] = ty(TG_DT_F32, 2, I64(3, 3));
    assert_int_equal(bcast(in, 2, &out, msg), TG_ESHAPE);

    /* three inputs; the message names the two that conflict */
    in[0] = ty(TG_DT_F32, 3, I64(2, 1, 1)), in[1] = ty(TG_DT_I8, 2, I64(3, 1));
    in[2] = ty(TG_DT_F64, 1, I64(4));
    assert_int_equal(bcast(in, 3, &out, msg), TG_OK);
    expect_shape(&out, 3, I64(2, 3, 4));
    in[2] = ty(TG_DT_F64, 2, I64(5, 4));
    assert_int_equal(bcast(in, 3, &out, msg), TG_ESHAPE);
    assert_string_equal(msg, "cannot broadcast i8[3,1] with f64[5,4]");

    /* nobcast: a run-time 1 that was '?' does not broadcast */
    in[0] = ty(TG_DT_F32, 1, I64(1)), in[1] = ty(TG_DT_F32, 1, I64(4));
    in[0].nobcast = 1;
    assert_int_equal(bcast(in, 2, &out, msg), TG_ESHAPE);
    assert_non_null(strstr(msg, "declare the dimension as 1 to broadcast"));
    assert_non_null(strstr(msg, "f32[1]"));
    assert_int_equal(bcast((const tg_type[]){in[1], in[0]}, 2, &out, msg), TG_ESHAPE);
    assert_non_null(strstr(msg, "declare the dimension as 1 to broadcast"));
    /* ... but it meets other 1s: the result stays nobcast */
    in[1] = ty(TG_DT_F32, 2, I64(3, 1));
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    expect_shape(&out, 2, I64(3, 1));
    assert_int_equal(out.nobcast, 2u);
    in[1].nobcast = 2;
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    assert_int_equal(out.nobcast, 2u);
    /* a plain static 1 against a static 1 is not nobcast */
    in[0].nobcast = 0, in[1].nobcast = 0;
    assert_int_equal(bcast(in, 2, &out, msg), TG_OK);
    assert_int_equal(out.nobcast, 0u);

    /* axis normalization */
    int ax = -1;
    assert_true(tg_axis_norm(-1, 3, &ax));
    assert_int_equal(ax, 2);
    assert_true(tg_axis_norm(0, 3, &ax));
    assert_int_equal(ax, 0);
    assert_false(tg_axis_norm(3, 3, &ax));
    assert_false(tg_axis_norm(-4, 3, &ax));
    assert_false(tg_axis_norm(INT64_MIN, 3, &ax));
    assert_false(tg_axis_norm(0, 0, &ax));
}

/* ---- values: integer arithmetic ---- */

static void test_int_wrap(void **state) {
    (void)state;
    /* NumPy: int8 127+1 = -128, etc. */
    check_i(run2_take("add", vec(TG_DT_I8, 2, (int8_t[]){127, -128}),
                      vec(TG_DT_I8, 2, (int8_t[]){1, -1})),
            TG_DT_I8, 2, I64(-128, 127));
    check_i(
        run2_take("add", vec(TG_DT_I16, 1, (int16_t[]){32767}), vec(TG_DT_I16, 1, (int16_t[]){1})),
        TG_DT_I16, 1, I64(-32768));
    check_i(run2_take("add", vec(TG_DT_I32, 1, (int32_t[]){INT32_MAX}),
                      vec(TG_DT_I32, 1, (int32_t[]){1})),
            TG_DT_I32, 1, I64(INT32_MIN));
    check_i(run2_take("add", vec(TG_DT_I64, 2, (int64_t[]){INT64_MAX, INT64_MIN}),
                      vec(TG_DT_I64, 2, (int64_t[]){1, -1})),
            TG_DT_I64, 2, I64(INT64_MIN, INT64_MAX));
    check_i(
        run2_take("add", vec(TG_DT_U8, 1, (uint8_t[]){200}), vec(TG_DT_U8, 1, (uint8_t[]){100})),
        TG_DT_U8, 1, I64(44));
    check_i(run2_take("sub", vec(TG_DT_U8, 1, (uint8_t[]){1}), vec(TG_DT_U8, 1, (uint8_t[]){2})),
            TG_DT_U8, 1, I64(255));
    check_i(run2_take("sub", vec(TG_DT_I64, 1, (int64_t[]){INT64_MIN}),
                      vec(TG_DT_I64, 1, (int64_t[]){1})),
            TG_DT_I64, 1, I64(INT64_MAX));
    check_i(run2_take("sub", vec(TG_DT_I32, 1, (int32_t[]){INT32_MIN}),
                      vec(TG_DT_I32, 1, (int32_t[]){1})),
            TG_DT_I32, 1, I64(INT32_MAX));
    check_i(run2_take("mul", vec(TG_DT_I64, 3, (int64_t[]){(int64_t)1 << 62, INT64_MIN, 3}),
                      vec(TG_DT_I64, 3, (int64_t[]){4, -1, -5})),
            TG_DT_I64, 3, I64(0, INT64_MIN, -15));
    check_i(run2_take("mul", vec(TG_DT_I8, 1, (int8_t[]){100}), vec(TG_DT_I8, 1, (int8_t[]){3})),
            TG_DT_I8, 1, I64(44));
    check_i(
        run2_take("mul", vec(TG_DT_I16, 1, (int16_t[]){300}), vec(TG_DT_I16, 1, (int16_t[]){300})),
        TG_DT_I16, 1, I64(24464));
    check_i(run2_take("mul", vec(TG_DT_I32, 1, (int32_t[]){65536}),
                      vec(TG_DT_I32, 1, (int32_t[]){65536})),
            TG_DT_I32, 1, I64(0));
    check_i(run1_take("neg", vec(TG_DT_I8, 3, (int8_t[]){-128, 5, 0})), TG_DT_I8, 3,
            I64(-128, -5, 0));
    check_i(run1_take("neg", vec(TG_DT_I64, 1, (int64_t[]){INT64_MIN})), TG_DT_I64, 1,
            I64(INT64_MIN));
    check_i(run1_take("neg", vec(TG_DT_U8, 2, (uint8_t[]){1, 0})), TG_DT_U8, 2, I64(255, 0));
    check_i(run1_take("abs", vec(TG_DT_I8, 2, (int8_t[]){-128, -5})), TG_DT_I8, 2, I64(-128, 5));
    check_i(run1_take("abs", vec(TG_DT_I64, 2, (int64_t[]){INT64_MIN, -7})), TG_DT_I64, 2,
            I64(INT64_MIN, 7));
    check_i(run1_take("abs", vec(TG_DT_U8, 1, (uint8_t[]){200})), TG_DT_U8, 1, I64(200));
    check_i(run1_take("sign", vec(TG_DT_I16, 3, (int16_t[]){-300, 0, 7})), TG_DT_I16, 3,
            I64(-1, 0, 1));
    check_i(run1_take("sign", vec(TG_DT_U8, 2, (uint8_t[]){200, 0})), TG_DT_U8, 2, I64(1, 0));
    /* bool: add is or, mul is and, abs is identity, maximum is or */
    tg_tensor *b1 = vec(TG_DT_BOOL, 4, (bool[]){1, 1, 0, 0});
    tg_tensor *b2 = vec(TG_DT_BOOL, 4, (bool[]){1, 0, 1, 0});
    check_i(run2("add", b1, b2), TG_DT_BOOL, 4, I64(1, 1, 1, 0));
    check_i(run2("mul", b1, b2), TG_DT_BOOL, 4, I64(1, 0, 0, 0));
    check_i(run2("maximum", b1, b2), TG_DT_BOOL, 4, I64(1, 1, 1, 0));
    check_i(run2("minimum", b1, b2), TG_DT_BOOL, 4, I64(1, 0, 0, 0));
    check_i(run1("abs", b1), TG_DT_BOOL, 4, I64(1, 1, 0, 0));
    tg_tensor_free(b1);
    tg_tensor_free(b2);
}

static void test_int_div_mod(void **state) {
    (void)state;
    /* NumPy int8: [7,-7,7,-7,5,-128,0] // and % [2,2,-2,-2,0,-1,0] */
    tg_tensor *a = vec(TG_DT_I8, 7, (int8_t[]){7, -7, 7, -7, 5, -128, 0});
    tg_tensor *b = vec(TG_DT_I8, 7, (int8_t[]){2, 2, -2, -2, 0, -1, 0});
    check_i(run2("int_div", a, b), TG_DT_I8, 7, I64(3, -4, -4, 3, 0, -128, 0));
    check_i(run2("mod", a, b), TG_DT_I8, 7, I64(1, 1, -1, -1, 0, 0, 0));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I64, 4, (int64_t[]){INT64_MIN, INT64_MIN, INT64_MAX, -1});
    b = vec(TG_DT_I64, 4, (int64_t[]){-1, 0, -2, INT64_MIN});
    check_i(run2("int_div", a, b), TG_DT_I64, 4, I64(INT64_MIN, 0, -(INT64_MAX / 2) - 1, 0));
    check_i(run2("mod", a, b), TG_DT_I64, 4, I64(0, 0, -1, -1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I32, 2, (int32_t[]){INT32_MIN, -1});
    b = vec(TG_DT_I32, 2, (int32_t[]){-1, 3});
    check_i(run2("int_div", a, b), TG_DT_I32, 2, I64(INT32_MIN, -1));
    check_i(run2("mod", a, b), TG_DT_I32, 2, I64(0, 2));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_U8, 2, (uint8_t[]){200, 200});
    b = vec(TG_DT_U8, 2, (uint8_t[]){3, 7});
    check_i(run2("int_div", a, b), TG_DT_U8, 2, I64(66, 28));
    check_i(run2("mod", a, b), TG_DT_U8, 2, I64(2, 4));
    tg_tensor_free(a);
    tg_tensor_free(b);

    /* floats, NumPy 1.24: floor_divide and remainder */
    a = vec(TG_DT_F64, 11, F64(7.5, -7.5, 7.5, -7.5, 5.0, 0.0, INF_, 1.0, 3.0, -3.0, -1e-20));
    b = vec(TG_DT_F64, 11, F64(2.0, 2.0, -2.0, -2.0, 0.0, 0.0, 2.0, INF_, -INF_, INF_, 3.0));
    check_f(run2("int_div", a, b), TG_DT_F64, 11,
            F64(3, -4, -4, 3, INF_, NAN_, NAN_, 0, -1, -1, -1));
    check_f(run2("mod", a, b), TG_DT_F64, 11,
            F64(1.5, 0.5, -0.5, -1.5, NAN_, NAN_, NAN_, 1.0, -INF_, INF_, 3.0));
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* signs of zero results: the remainder takes the divisor's sign */
    a = vec(TG_DT_F64, 4, F64(0.0, -0.0, 6.0, -6.0));
    b = vec(TG_DT_F64, 4, F64(-3.0, 3.0, -3.0, 3.0));
    check_f_tol(run2("mod", a, b), TG_DT_F64, 4, F64(-0.0, 0.0, -0.0, 0.0), 0, true);
    check_f_tol(run2("int_div", a, b), TG_DT_F64, 4, F64(-0.0, -0.0, -2.0, -2.0), 0, true);
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_F32, 2, (float[]){-7.5f, 7.0f});
    b = vec(TG_DT_F32, 2, (float[]){2.0f, -0.5f});
    check_f(run2("int_div", a, b), TG_DT_F32, 2, F64(-4.0, -14.0));
    check_f(run2("mod", a, b), TG_DT_F32, 2, F64(0.5, -0.0));
    tg_tensor_free(a);
    tg_tensor_free(b);
}

static void test_pow(void **state) {
    (void)state;
    char msg[512];
    /* NumPy int8 power: wraps, 0**0 == 1 */
    tg_tensor *a = vec(TG_DT_I8, 7, (int8_t[]){2, 2, -2, 0, 3, -1, 1});
    tg_tensor *b = vec(TG_DT_I8, 7, (int8_t[]){7, 8, 3, 0, 5, 5, 100});
    check_i(run2("pow", a, b), TG_DT_I8, 7, I64(-128, 0, -8, 1, -13, -1, 1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I64, 2, (int64_t[]){3, -3});
    b = vec(TG_DT_I64, 2, (int64_t[]){41, 41});
    check_i(run2("pow", a, b), TG_DT_I64, 2, I64(-420491770248316829, 420491770248316829));
    tg_tensor_free(b);
    /* NumPy: "Integers to negative integer powers are not allowed." */
    b = vec(TG_DT_I64, 2, (int64_t[]){2, -1});
    tg_tensor *in[2] = {a, b};
    assert_null(run("pow", in, 2, NULL, msg));
    assert_non_null(strstr(msg, "negative integer powers are not allowed"));
    tg_tensor_free(b);
    /* ... but an empty output uses no exponent */
    int64_t zero = 0;
    tg_tensor *e = tg_tensor_new(NULL, TG_DT_I64, 1, &zero);
    b = vec(TG_DT_I64, 1, (int64_t[]){-1});
    in[0] = e, in[1] = b;
    check_i(run("pow", in, 2, NULL, msg), TG_DT_I64, 0, NULL);
    tg_tensor_free(e);
    tg_tensor_free(b);
    tg_tensor_free(a);
    a = vec(TG_DT_F64, 4, F64(-8.0, 0.0, 2.0, 2.0));
    b = vec(TG_DT_F64, 4, F64(1.0 / 3.0, -1.0, 0.5, -2.0));
    check_f_tol(run2("pow", a, b), TG_DT_F64, 4, F64(NAN_, INF_, 1.4142135623730951, 0.25), 1e-15,
                false);
    tg_tensor_free(a);
    tg_tensor_free(b);
}

/* ---- values: float ops ---- */

static void test_div(void **state) {
    (void)state;
    /* direct kernel call with i32 inputs: the kernel reads them as doubles */
    tg_tensor *a = vec(TG_DT_I32, 4, (int32_t[]){1, -1, 0, 7});
    tg_tensor *b = vec(TG_DT_I32, 4, (int32_t[]){0, 0, 0, 2});
    check_f(run2("div", a, b), TG_DT_F64, 4, F64(INF_, -INF_, NAN_, 3.5));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_F32, 1, (float[]){1.0f});
    b = vec(TG_DT_F32, 1, (float[]){3.0f});
    check_f(run2("div", a, b), TG_DT_F32, 1, F64((double)(1.0f / 3.0f)));
    tg_tensor_free(a);
    tg_tensor_free(b);
}

static void test_maximum_minimum_clip_nan(void **state) {
    (void)state;
    /* NumPy: maximum/minimum propagate NaN from either side */
    tg_tensor *a = vec(TG_DT_F64, 3, F64(NAN_, 1.0, 2.0));
    tg_tensor *b = vec(TG_DT_F64, 3, F64(1.0, NAN_, -3.0));
    check_f(run2("maximum", a, b), TG_DT_F64, 3, F64(NAN_, NAN_, 2.0));
    check_f(run2("minimum", a, b), TG_DT_F64, 3, F64(NAN_, NAN_, -3.0));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I16, 2, (int16_t[]){-5, 9});
    b = vec(TG_DT_I16, 2, (int16_t[]){3, -9});
    check_i(run2("maximum", a, b), TG_DT_I16, 2, I64(3, 9));
    check_i(run2("minimum", a, b), TG_DT_I16, 2, I64(-5, -9));
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* NumPy clip: [nan,.5,.5,5] in [0,nan,0,2]..[1,1,nan,1] -> [nan,nan,nan,1] */
    char msg[512];
    tg_tensor *in[3] = {vec(TG_DT_F64, 4, F64(NAN_, 0.5, 0.5, 5.0)),
                        vec(TG_DT_F64, 4, F64(0.0, NAN_, 0.0, 2.0)),
                        vec(TG_DT_F64, 4, F64(1.0, 1.0, NAN_, 1.0))};
    check_f(run("clip", in, 3, NULL, msg), TG_DT_F64, 4, F64(NAN_, NAN_, NAN_, 1.0));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    /* ints, lo > hi gives hi; bounds broadcast */
    in[0] = vec(TG_DT_I64, 4, (int64_t[]){5, 0, 3, -9});
    in[1] = vec(TG_DT_I64, 1, (int64_t[]){-1});
    in[2] = vec(TG_DT_I64, 4, (int64_t[]){2, 2, 4, 4});
    check_i(run("clip", in, 3, NULL, msg), TG_DT_I64, 4, I64(2, 0, 3, -1));
    tg_tensor_free(in[1]);
    in[1] = vec(TG_DT_I64, 1, (int64_t[]){4});
    check_i(run("clip", in, 3, NULL, msg), TG_DT_I64, 4, I64(2, 2, 4, 4));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
}

static void test_rounding(void **state) {
    (void)state;
    /* NumPy rint: half to even, -0.5 -> -0.0 */
    tg_tensor *x =
        vec(TG_DT_F64, 8, F64(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 3.7));
    check_f_tol(run1("round", x), TG_DT_F64, 8, F64(0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 4.0), 0,
                true);
    check_f(run1("floor", x), TG_DT_F64, 8, F64(0, 1, 2, -1, -2, -3, 0, 3));
    check_f(run1("ceil", x), TG_DT_F64, 8, F64(1, 2, 3, -0.0, -1, -2, 1, 4));
    tg_tensor_free(x);
    x = vec(TG_DT_F32, 3, (float[]){2.5f, -3.5f, NAN});
    check_f(run1("round", x), TG_DT_F32, 3, F64(2.0, -4.0, NAN_));
    tg_tensor_free(x);
    /* ints become floats (NumPy 1.24 ufuncs): i32 -> f64 */
    x = vec(TG_DT_I32, 2, (int32_t[]){-3, 4});
    check_f(run1("floor", x), TG_DT_F64, 2, F64(-3.0, 4.0));
    tg_tensor_free(x);
    /* sign: NumPy gives 0.0 for -0.0 and nan for nan */
    x = vec(TG_DT_F64, 5, F64(-0.0, 0.0, NAN_, -INF_, 3.0));
    check_f_tol(run1("sign", x), TG_DT_F64, 5, F64(0.0, 0.0, NAN_, -1.0, 1.0), 0, true);
    check_f_tol(run1("neg", x), TG_DT_F64, 5, F64(0.0, -0.0, NAN_, INF_, -3.0), 0, true);
    check_f_tol(run1("abs", x), TG_DT_F64, 5, F64(0.0, 0.0, NAN_, INF_, 3.0), 0, true);
    tg_tensor_free(x);
}

static void test_unary_math(void **state) {
    (void)state;
    static const struct {
        const char *op;
        double x[4], want[4];
    } cases[] = {
        {"exp", {0.0, 1.0, -INFINITY, 1000.0}, {1.0, 2.718281828459045, 0.0, INFINITY}},
        {"exp2", {3.0, -1.0, 0.5, -INFINITY}, {8.0, 0.5, 1.4142135623730951, 0.0}},
        {"log", {1.0, 0.0, -1.0, 2.718281828459045}, {0.0, -INFINITY, NAN, 1.0}},
        {"log2", {8.0, 0.5, 0.0, 1.0}, {3.0, -1.0, -INFINITY, 0.0}},
        {"log1p", {1e-20, 0.0, -1.0, 1.718281828459045}, {1e-20, 0.0, -INFINITY, 1.0}},
        {"expm1", {1e-20, 0.0, -INFINITY, 1.0}, {1e-20, 0.0, -1.0, 1.718281828459045}},
        {"sqrt", {4.0, 2.0, -1.0, INFINITY}, {2.0, 1.4142135623730951, NAN, INFINITY}},
        {"rsqrt", {4.0, 0.0, -1.0, INFINITY}, {0.5, INFINITY, NAN, 0.0}},
        {"sin", {0.0, 1.5707963267948966, -0.5, INFINITY}, {0.0, 1.0, -0.479425538604203, NAN}},
        {"cos", {0.0, 3.141592653589793, 0.5, NAN}, {1.0, -1.0, 0.8775825618903728, NAN}},
        {"tan", {0.0, 0.7853981633974483, -0.5, NAN}, {0.0, 1.0, -0.5463024898437905, NAN}},
        {"tanh", {0.0, 1000.0, -1000.0, 0.5}, {0.0, 1.0, -1.0, 0.46211715726000974}},
        /* sigmoid/softplus: stable forms (scipy.special.expit, np.logaddexp(0, x)) */
        {"sigmoid", {0.0, -1000.0, 1000.0, 2.0}, {0.5, 0.0, 1.0, 0.8807970779778823}},
        {"softplus",
         {1000.0, -1000.0, 0.0, -2.0},
         {1000.0, 0.0, 0.6931471805599453, 0.12692801104297263}},
        {"erf", {0.0, 0.5, -INFINITY, 3.0}, {0.0, 0.5204998778130465, -1.0, 0.9999779095030014}},
        {"erfc", {0.0, 0.5, INFINITY, 30.0}, {1.0, 0.4795001221869535, 0.0, 0.0}},
    };
    for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
        print_message("%s\n", cases[c].op);
        tg_tensor *x = vec(TG_DT_F64, 4, cases[c].x);
        check_f_tol(run1(cases[c].op, x), TG_DT_F64, 4, cases[c].want, 1e-15, false);
        tg_tensor_free(x);
        /* f32 in, f32 out, rounded once from the double result */
        float xf[4];
        double wf[4];
        for (int i = 0; i < 4; i++) xf[i] = (float)cases[c].x[i];
        x = vec(TG_DT_F32, 4, xf);
        tg_tensor *y = run1(cases[c].op, x);
        tg_tensor *xd = vec(TG_DT_F64, 4, (double[]){xf[0], xf[1], xf[2], xf[3]});
        tg_tensor *yd = run1(cases[c].op, xd);
        for (int i = 0; i < 4; i++) wf[i] = (float)tg_tensor_get_f64(yd, i);
        check_f(y, TG_DT_F32, 4, wf);
        tg_tensor_free(yd);
        tg_tensor_free(xd);
        tg_tensor_free(x);
    }
    /* nothing overflows to nan in the stable forms */
    tg_tensor *x = vec(TG_DT_F64, 4, F64(-INF_, INF_, 710.0, -745.2));
    check_f_tol(run1("sigmoid", x), TG_DT_F64, 4, F64(0.0, 1.0, 1.0, 0.0), 1e-15, false);
    check_f_tol(run1("softplus", x), TG_DT_F64, 4, F64(0.0, INF_, 710.0, 0.0), 1e-15, false);
    tg_tensor_free(x);
}

static void test_compare_logic(void **state) {
    (void)state;
    tg_tensor *a = vec(TG_DT_F64, 4, F64(NAN_, 1.0, 2.0, -0.0));
    tg_tensor *b = vec(TG_DT_F64, 4, F64(NAN_, 2.0, 2.0, 0.0));
    check_i(run2("lt", a, b), TG_DT_BOOL, 4, I64(0, 1, 0, 0));
    check_i(run2("le", a, b), TG_DT_BOOL, 4, I64(0, 1, 1, 1));
    check_i(run2("gt", a, b), TG_DT_BOOL, 4, I64(0, 0, 0, 0));
    check_i(run2("ge", a, b), TG_DT_BOOL, 4, I64(0, 0, 1, 1));
    check_i(run2("eq", a, b), TG_DT_BOOL, 4, I64(0, 0, 1, 1));
    check_i(run2("ne", a, b), TG_DT_BOOL, 4, I64(1, 1, 0, 0));
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* i64 compares exactly (no detour through double) */
    a = vec(TG_DT_I64, 2, (int64_t[]){INT64_MAX, -3});
    b = vec(TG_DT_I64, 2, (int64_t[]){INT64_MAX - 1, -3});
    check_i(run2("gt", a, b), TG_DT_BOOL, 2, I64(1, 0));
    check_i(run2("eq", a, b), TG_DT_BOOL, 2, I64(0, 1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* u8 vs i8 promote to i16: 200 > -1 */
    a = vec(TG_DT_U8, 1, (uint8_t[]){200});
    b = vec(TG_DT_I8, 1, (int8_t[]){-1});
    check_i(run2("gt", a, b), TG_DT_BOOL, 1, I64(1));
    tg_tensor_free(a);
    tg_tensor_free(b);

    a = vec(TG_DT_F32, 4, (float[]){NAN, INFINITY, -INFINITY, 1.0f});
    check_i(run1("isnan", a), TG_DT_BOOL, 4, I64(1, 0, 0, 0));
    check_i(run1("isinf", a), TG_DT_BOOL, 4, I64(0, 1, 1, 0));
    tg_tensor_free(a);
    a = vec(TG_DT_I64, 2, (int64_t[]){0, INT64_MIN});
    check_i(run1("isnan", a), TG_DT_BOOL, 2, I64(0, 0));
    check_i(run1("isinf", a), TG_DT_BOOL, 2, I64(0, 0));
    tg_tensor_free(a);

    /* bitwise on ints (NumPy int8: 3 & 1, -3 & 1, ~1 = -2; uint8 ~1 = 254) */
    a = vec(TG_DT_I8, 3, (int8_t[]){3, -3, -128});
    b = vec(TG_DT_I8, 3, (int8_t[]){1, 1, 127});
    check_i(run2("and", a, b), TG_DT_I8, 3, I64(1, 1, 0));
    check_i(run2("or", a, b), TG_DT_I8, 3, I64(3, -3, -1));
    check_i(run2("xor", a, b), TG_DT_I8, 3, I64(2, -4, -1));
    check_i(run1("not", a), TG_DT_I8, 3, I64(-4, 2, 127));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_U8, 2, (uint8_t[]){1, 255});
    check_i(run1("not", a), TG_DT_U8, 2, I64(254, 0));
    tg_tensor_free(a);
    /* logical on bool */
    a = vec(TG_DT_BOOL, 4, (bool[]){1, 1, 0, 0});
    b = vec(TG_DT_BOOL, 4, (bool[]){1, 0, 1, 0});
    check_i(run2("and", a, b), TG_DT_BOOL, 4, I64(1, 0, 0, 0));
    check_i(run2("or", a, b), TG_DT_BOOL, 4, I64(1, 1, 1, 0));
    check_i(run2("xor", a, b), TG_DT_BOOL, 4, I64(0, 1, 1, 0));
    check_i(run1("not", a), TG_DT_BOOL, 4, I64(0, 0, 1, 1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* refused at run time too if promotion was skipped */
    char msg[512];
    a = vec(TG_DT_F32, 1, (float[]){1.0f});
    assert_null(run("not", &a, 1, NULL, msg));
    assert_string_equal(msg, "not supported for dtype f32");
    tg_tensor_free(a);
}

static void test_shifts(void **state) {
    (void)state;
    /* NumPy 1.24 on x86-64 */
    tg_tensor *a = vec(TG_DT_I8, 6, (int8_t[]){1, 1, 1, 3, -1, 5});
    tg_tensor *b = vec(TG_DT_I8, 6, (int8_t[]){7, 8, 100, 7, -1, -3});
    check_i(run2("left_shift", a, b), TG_DT_I8, 6, I64(-128, 0, 0, -128, 0, 0));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I8, 6, (int8_t[]){-128, -128, 100, -5, 5, -5});
    b = vec(TG_DT_I8, 6, (int8_t[]){7, 8, 100, -1, -1, -100});
    check_i(run2("right_shift", a, b), TG_DT_I8, 6, I64(-1, -1, 0, -1, 0, -1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I64, 4, (int64_t[]){1, 1, 1, -3});
    b = vec(TG_DT_I64, 4, (int64_t[]){63, 64, -1, 2});
    check_i(run2("left_shift", a, b), TG_DT_I64, 4, I64(INT64_MIN, 0, 0, -12));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I64, 5, (int64_t[]){-1, -8, 8, INT64_MIN, -7});
    b = vec(TG_DT_I64, 5, (int64_t[]){64, -1, 65, 63, 1});
    check_i(run2("right_shift", a, b), TG_DT_I64, 5, I64(-1, -1, 0, -1, -4));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_I32, 3, (int32_t[]){1, 1, -1});
    b = vec(TG_DT_I32, 3, (int32_t[]){31, 32, 40});
    check_i(run2("left_shift", a, b), TG_DT_I32, 3, I64(INT32_MIN, 0, 0));
    check_i(run2("right_shift", a, b), TG_DT_I32, 3, I64(0, 0, -1));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_U8, 2, (uint8_t[]){1, 255});
    b = vec(TG_DT_U8, 2, (uint8_t[]){7, 1});
    check_i(run2("left_shift", a, b), TG_DT_U8, 2, I64(128, 254));
    tg_tensor_free(a);
    tg_tensor_free(b);
    a = vec(TG_DT_U8, 3, (uint8_t[]){255, 255, 255});
    b = vec(TG_DT_U8, 3, (uint8_t[]){7, 8, 200});
    check_i(run2("right_shift", a, b), TG_DT_U8, 3, I64(1, 0, 0));
    tg_tensor_free(a);
    tg_tensor_free(b);
}

static void test_where(void **state) {
    (void)state;
    char msg[512];
    tg_tensor *in[3] = {vec(TG_DT_BOOL, 3, (bool[]){1, 0, 1}),
                        vec(TG_DT_F32, 3, (float[]){1.5f, 2.5f, NAN}),
                        vec(TG_DT_F32, 1, (float[]){-1.0f})};
    check_f(run("where", in, 3, NULL, msg), TG_DT_F32, 3, F64(1.5, -1.0, NAN_));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    /* exact for i64 beyond 2^53 */
    in[0] = vec(TG_DT_BOOL, 2, (bool[]){1, 0});
    in[1] = vec(TG_DT_I64, 1, (int64_t[]){INT64_MAX});
    in[2] = vec(TG_DT_I64, 1, (int64_t[]){INT64_MIN + 1});
    check_i(run("where", in, 3, NULL, msg), TG_DT_I64, 2, I64(INT64_MAX, INT64_MIN + 1));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
}

static void test_cast(void **state) {
    (void)state;
    char msg[512];
    tg_aval a = {.kind = TG_ATTR_INT, .i = TG_DT_I8};
    /* NumPy agrees on in-range values (truncation); NaN/inf/out-of-range follow core's
     * rule (NaN -> 0, saturate), where NumPy on x86-64 gives [0,0,0,0,0,44,-2,2] */
    tg_tensor *x = vec(TG_DT_F64, 8, F64(NAN_, INF_, -INF_, 1e20, -1e20, 300.7, -2.9, 2.9));
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I8, 8, I64(0, 127, -128, 127, -128, 127, -2, 2));
    a.i = TG_DT_I32;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I32, 8,
            I64(0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 300, -2, 2));
    a.i = TG_DT_I64;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I64, 8,
            I64(0, INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 300, -2, 2));
    a.i = TG_DT_U8;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_U8, 8, I64(0, 255, 0, 255, 0, 255, 0, 2));
    a.i = TG_DT_BOOL; /* NumPy: bool(nan) is True */
    check_i(run("cast", &x, 1, &a, msg), TG_DT_BOOL, 8, I64(1, 1, 1, 1, 1, 1, 1, 1));
    a.i = TG_DT_F32;
    check_f(run("cast", &x, 1, &a, msg), TG_DT_F32, 8,
            F64(NAN_, INF_, -INF_, (double)1e20f, (double)-1e20f, (double)300.7f, (double)-2.9f,
                (double)2.9f));
    tg_tensor_free(x);
    x = vec(TG_DT_F64, 2, F64(0.0, -0.0));
    a.i = TG_DT_BOOL;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_BOOL, 2, I64(0, 0));
    tg_tensor_free(x);
    /* int -> int wraps (NumPy astype) */
    x = vec(TG_DT_I64, 3, (int64_t[]){300, -129, 65536 + 5});
    a.i = TG_DT_I8;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I8, 3, I64(44, 127, 5));
    a.i = TG_DT_U8;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_U8, 3, I64(44, 127, 5));
    a.i = TG_DT_I16;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I16, 3, I64(300, -129, 5));
    tg_tensor_free(x);
    /* i64 -> f32 rounds once, as NumPy: 2^60 + 2^36 + 1 -> 2^60 + 2^37 (a detour through
     * double would round twice and give 2^60) */
    x = vec(TG_DT_I64, 2, (int64_t[]){((int64_t)1 << 60) + ((int64_t)1 << 36) + 1, -7});
    a.i = TG_DT_F32;
    check_f(run("cast", &x, 1, &a, msg), TG_DT_F32, 2, F64(1152921642045800448.0, -7.0));
    tg_tensor_free(x);
    x = vec(TG_DT_BOOL, 2, (bool[]){1, 0});
    a.i = TG_DT_F64;
    check_f(run("cast", &x, 1, &a, msg), TG_DT_F64, 2, F64(1.0, 0.0));
    a.i = TG_DT_I16;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_I16, 2, I64(1, 0));
    tg_tensor_free(x);
    x = vec(TG_DT_I16, 2, (int16_t[]){0, -2});
    a.i = TG_DT_BOOL;
    check_i(run("cast", &x, 1, &a, msg), TG_DT_BOOL, 2, I64(0, 1));
    tg_tensor_free(x);
    /* a bad dtype attribute is an error, not a crash */
    a.i = 99;
    tg_type in = sc(TG_DT_F32), out[TG_MAX_OUTS];
    assert_int_equal(infer_op("cast", &in, 1, &a, out, msg), TG_EINVAL);
}

/* ---- layouts: broadcasting, negative strides, 0-size, 0-d ---- */

static void test_layouts(void **state) {
    (void)state;
    /* [2,1] + [3] -> [2,3] */
    tg_tensor *a = tg_tensor_from_data(NULL, TG_DT_F64, 2, I64(2, 1), F64(10.0, 20.0));
    tg_tensor *b = vec(TG_DT_F64, 3, F64(1.0, 2.0, 3.0));
    check_f(run2("add", a, b), TG_DT_F64, 6, F64(11, 12, 13, 21, 22, 23));
    tg_tensor_free(a);
    /* a reversed view (negative stride) of a 2x3 matrix, and a transposed one */
    tg_tensor *m =
        tg_tensor_from_data(NULL, TG_DT_I32, 2, I64(2, 3), (int32_t[]){1, 2, 3, 4, 5, 6});
    tg_tensor *rev = tg_tensor_view(m, 2, I64(2, 3), I64(-3, -1), 5); /* m[::-1, ::-1] */
    assert_non_null(rev);
    tg_tensor *c = vec(TG_DT_I32, 3, (int32_t[]){100, 200, 300});
    check_i(run2("sub", rev, c), TG_DT_I32, 6, I64(-94, -195, -296, -97, -198, -299));
    tg_tensor *tr = tg_tensor_view(m, 2, I64(3, 2), I64(1, 3), 0); /* m.T */
    tg_tensor *col = tg_tensor_from_data(NULL, TG_DT_I32, 2, I64(3, 1), (int32_t[]){0, 10, 20});
    check_i(run2("mul", tr, col), TG_DT_I32, 6, I64(0, 0, 20, 50, 60, 120));
    /* a 0-stride (broadcast) view as input */
    tg_tensor *bc = tg_tensor_view(c, 2, I64(2, 3), I64(0, 1), 0);
    check_i(run2("maximum", bc, rev), TG_DT_I32, 6, I64(100, 200, 300, 100, 200, 300));
    tg_tensor_free(bc);
    tg_tensor_free(col);
    tg_tensor_free(tr);
    tg_tensor_free(rev);
    tg_tensor_free(c);
    tg_tensor_free(m);
    /* 0-size: [0,3] + [3] -> [0,3], nothing touched */
    tg_tensor *z = tg_tensor_new(NULL, TG_DT_F64, 2, I64(0, 3));
    tg_tensor *o = run2("add", z, b);
    assert_int_equal(o->ndim, 2);
    assert_int_equal(o->shape[0], 0);
    assert_int_equal(o->shape[1], 3);
    tg_tensor_free(o);
    tg_aval a8 = {.kind = TG_ATTR_INT, .i = TG_DT_I8};
    char msg[512];
    check_i(run("cast", &z, 1, &a8, msg), TG_DT_I8, 0, NULL);
    tg_tensor_free(z);
    tg_tensor_free(b);
    /* 0-d with 0-d, and 0-d with a vector */
    tg_tensor *s = tg_tensor_from_data(NULL, TG_DT_I16, 0, NULL, (int16_t[]){7});
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_I16, 0, NULL, (int16_t[]){-2});
    o = run2("int_div", s, t);
    assert_int_equal(o->ndim, 0);
    check_i(o, TG_DT_I16, 1, I64(-4));
    tg_tensor *v = vec(TG_DT_I16, 2, (int16_t[]){2, 3});
    check_i(run2("mod", s, v), TG_DT_I16, 2, I64(1, 1));
    tg_tensor_free(v);
    tg_tensor_free(t);
    tg_tensor_free(s);
    /* mismatched shapes fail at run-time inference */
    a = vec(TG_DT_F32, 3, (float[]){1, 2, 3});
    b = vec(TG_DT_F32, 4, (float[]){1, 2, 3, 4});
    tg_tensor *in[2] = {a, b};
    assert_null(run("add", in, 2, NULL, msg));
    assert_string_equal(msg, "cannot broadcast f32[3] with f32[4]");
    tg_tensor_free(a);
    tg_tensor_free(b);
}

/* ---- through the public API ---- */

static tg_fn *compile(tg_graph *g, tg_var *const *outs, int n) {
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, outs, n), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    return f;
}

static void test_api_promotion(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_I8, 1, I64(3));
    tg_var *y = tg_input(g, "y", TG_DT_F32, 1, I64(3));
    tg_var *m = tg_mul(g, x, tg_literal_int(g, 2));       /* i8: the literal adopts it */
    tg_var *d = tg_div(g, x, tg_literal_int(g, 2));       /* true division: f64 */
    tg_var *e = tg_exp(g, x);                             /* i8 -> f32 (NumPy: f16) */
    tg_var *s = tg_add(g, y, tg_literal_float(g, 0.25));  /* f32 */
    tg_var *c = tg_lt(g, x, y);                           /* compare in f32: bool */
    tg_var *w = tg_where(g, x, y, tg_literal_int(g, -1)); /* i8 cond -> bool; f32 */
    assert_non_null(w);
    assert_int_equal(tg_var_dtype(m), TG_DT_I8);
    assert_int_equal(tg_var_dtype(d), TG_DT_F64);
    assert_int_equal(tg_var_dtype(e), TG_DT_F32);
    assert_int_equal(tg_var_dtype(s), TG_DT_F32);
    assert_int_equal(tg_var_dtype(c), TG_DT_BOOL);
    assert_int_equal(tg_var_dtype(w), TG_DT_F32);
    tg_fn *f = compile(g, (tg_var *[]){m, d, e, s, c, w}, 6);
    tg_tensor *in[2] = {vec(TG_DT_I8, 3, (int8_t[]){100, -3, 0}),
                        vec(TG_DT_F32, 3, (float[]){0.5f, -2.0f, 7.0f})};
    tg_tensor *out[6];
    assert_int_equal(tg_fn_call(f, in, 2, out, 6), TG_OK);
    check_i(out[0], TG_DT_I8, 3, I64(-56, -6, 0)); /* 200 wraps */
    check_f(out[1], TG_DT_F64, 3, F64(50.0, -1.5, 0.0));
    check_f(out[2], TG_DT_F32, 3, F64(INF_, (double)(float)exp(-3.0), 1.0));
    check_f(out[3], TG_DT_F32, 3, F64(0.75, -1.75, 7.25));
    check_i(out[4], TG_DT_BOOL, 3, I64(0, 1, 1));
    check_f(out[5], TG_DT_F32, 3, F64(0.5, -2.0, -1.0));
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_graph_free(g);

    /* refused dtypes name the op */
    g = tg_graph_new(NULL, "f");
    tg_var *b = tg_input(g, "b", TG_DT_BOOL, 1, I64(3));
    assert_null(tg_sub(g, b, b));
    assert_int_equal(tg_graph_status(g), TG_ETYPE);
    assert_non_null(strstr(tg_graph_error(g), "sub"));
    assert_non_null(strstr(tg_graph_error(g), "bool"));
    tg_graph_free(g);
}

static void test_api_runtime_errors(void **state) {
    (void)state;
    /* a '?' that is 1 at run time does not broadcast against 4 */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, I64(TG_DIM_UNKNOWN));
    tg_var *y = tg_input(g, "y", TG_DT_F32, 1, I64(4));
    tg_var *one = tg_input(g, "one", TG_DT_F32, 1, I64(1));
    tg_var *s = tg_add(g, x, y);
    tg_var *t = tg_add(g, one, x);
    tg_fn *f = compile(g, (tg_var *[]){s, t}, 2);
    float d4[4] = {1, 2, 3, 4}, d1[1] = {10};
    tg_tensor *in[3] = {vec(TG_DT_F32, 1, d1), vec(TG_DT_F32, 4, d4), vec(TG_DT_F32, 1, d1)};
    tg_tensor *out[2] = {NULL, NULL};
    assert_int_equal(tg_fn_call(f, in, 3, out, 2), TG_ESHAPE);
    assert_non_null(strstr(tg_last_error(), "declare the dimension as 1 to broadcast"));
    assert_non_null(strstr(tg_last_error(), "add"));
    tg_tensor_free(in[0]);
    in[0] = vec(TG_DT_F32, 4, d4);
    assert_int_equal(tg_fn_call(f, in, 3, out, 2), TG_OK);
    check_f(out[0], TG_DT_F32, 4, F64(2, 4, 6, 8));
    check_f(out[1], TG_DT_F32, 4, F64(11, 12, 13, 14)); /* the static 1 broadcasts */
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_fn_free(f);
    tg_graph_free(g);

    /* a negative integer exponent is a run-time error naming the node */
    g = tg_graph_new(NULL, "f");
    x = tg_input(g, "x", TG_DT_I32, 1, I64(2));
    y = tg_input(g, "y", TG_DT_I32, 1, I64(2));
    tg_var *p = tg_pow(g, x, y);
    f = compile(g, &p, 1);
    in[0] = vec(TG_DT_I32, 2, (int32_t[]){2, 3});
    in[1] = vec(TG_DT_I32, 2, (int32_t[]){3, -1});
    assert_int_not_equal(tg_fn_call(f, in, 2, out, 1), TG_OK);
    assert_non_null(strstr(tg_last_error(), "pow"));
    assert_non_null(strstr(tg_last_error(), "negative integer powers are not allowed"));
    tg_tensor_free(in[1]);
    in[1] = vec(TG_DT_I32, 2, (int32_t[]){3, 20});
    assert_int_equal(tg_fn_call(f, in, 2, out, 1), TG_OK);
    check_i(out[0], TG_DT_I32, 2, I64(8, -808182895)); /* NumPy: 3**20 wraps in int32 */
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promote_strong),
        cmocka_unit_test(test_promote_weak),
        cmocka_unit_test(test_ew_promote_wants),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_int_wrap),
        cmocka_unit_test(test_int_div_mod),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_div),
        cmocka_unit_test(test_maximum_minimum_clip_nan),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_unary_math),
        cmocka_unit_test(test_compare_logic),
        cmocka_unit_test(test_shifts),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_api_promotion),
        cmocka_unit_test(test_api_runtime_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
