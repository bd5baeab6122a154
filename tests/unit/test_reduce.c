/* test_reduce.c - the reduction ops (sum prod mean max min argmax argmin any all):
 * static and run-time inference (dtypes, keepdims, negative and duplicate axes, '?',
 * empty reductions) and the reference kernels on small cases, including negative-stride
 * views and 0-size inputs. Expected values are hand-checked and were confirmed with
 * NumPy 1.24 (noted where NumPy differs on purpose).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_testutil.h"

#define F32 TG_DT_F32
#define F64 TG_DT_F64
#define I64 TG_DT_I64

/* [[2,1,0],[5,4,3]]: np.arange(6, dtype=f32).reshape(2,3)[:, ::-1] (negative stride). */
static tg_tensor *mk_x23(tg_tensor **base) {
    *base = mk_arange(F32, SHAPE(2, 3));
    tg_tensor *v = tg_tensor_view(*base, 2, (const int64_t[]){2, 3}, (const int64_t[]){3, -1}, 2);
    assert_non_null(v);
    return v;
}

static tg_tensor *reduce1(const tg_op_def *op, tg_tensor *x, tg_aval axis, bool keep) {
    const tg_aval attrs[2] = {axis, AV_BOOL(keep)};
    run_res r = run_op(op, &x, 1, attrs);
    if (r.st != TG_OK) print_error("%s: %s\n", op->name, r.msg);
    assert_int_equal(r.st, TG_OK);
    return r.out;
}

/* ---- inference ---- */

static void test_infer_shapes(void **state) {
    (void)state;
    const tg_aval all[2] = {AV_NONE, AV_BOOL(0)};
    const tg_aval all_keep[2] = {AV_NONE, AV_BOOL(1)};
    const tg_aval ax1[2] = {AV_INTS(1), AV_BOOL(0)};
    const tg_aval axm1_keep[2] = {AV_INTS(-1), AV_BOOL(1)};
    const tg_aval ax02[2] = {AV_INTS(0, -1), AV_BOOL(0)};
    const tg_aval ax02_keep[2] = {AV_INTS(2, 0), AV_BOOL(1)};
    const tg_aval none_list[2] = {AV_EMPTY, AV_BOOL(0)};
    CHECK_INFER(tg_op_sum, all, "f32[]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_sum, all_keep, "f32[1,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_sum, ax1, "f32[2]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_sum, axm1_keep, "f32[2,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_sum, ax02, "f32[3]", TY(F32, 2, 3, 4));
    CHECK_INFER(tg_op_sum, ax02_keep, "f32[1,3,1]", TY(F32, 2, 3, 4));
    CHECK_INFER(tg_op_sum, none_list, "f32[2,3]", TY(F32, 2, 3)); /* axis=() */
    CHECK_INFER(tg_op_sum, all, "f64[]", TY0(F64));
    /* '?' extents stay '?'; a kept axis is a static 1 */
    CHECK_INFER(tg_op_sum, ax1, "f32[?]", TY(F32, -1, -1));
    CHECK_INFER(tg_op_mean, axm1_keep, "f32[?,1]", TY(F32, -1, 5));
    CHECK_INFER(tg_op_max, ax1, "f32[?]", TY(F32, -1, 3));
    /* argmax/argmin: one axis or none */
    const tg_aval arg_none[2] = {AV_NONE, AV_BOOL(0)};
    const tg_aval arg_none_keep[2] = {AV_NONE, AV_BOOL(1)};
    const tg_aval arg_m1[2] = {AV_INT(-1), AV_BOOL(0)};
    const tg_aval arg_0_keep[2] = {AV_INT(0), AV_BOOL(1)};
    CHECK_INFER(tg_op_argmax, arg_none, "i64[]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_argmax, arg_none_keep, "i64[1,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_argmin, arg_m1, "i64[2]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_argmin, arg_0_keep, "i64[1,?]", TY(TG_DT_I8, 2, -1));
}

static void test_infer_dtypes(void **state) {
    (void)state;
    const tg_aval all[2] = {AV_NONE, AV_BOOL(0)};
    /* NumPy: sum/prod of bool and small ints accumulate in the default int (u8 -> u64 in
     * NumPy; tgraph has no u64: i64) */
    CHECK_INFER(tg_op_sum, all, "i64[]", TY(TG_DT_BOOL, 3));
    CHECK_INFER(tg_op_sum, all, "i64[]", TY(TG_DT_I8, 3));
    CHECK_INFER(tg_op_sum, all, "i64[]", TY(TG_DT_I16, 3));
    CHECK_INFER(tg_op_prod, all, "i64[]", TY(TG_DT_I32, 3));
    CHECK_INFER(tg_op_prod, all, "i64[]", TY(TG_DT_U8, 3));
    CHECK_INFER(tg_op_sum, all, "i64[]", TY(TG_DT_I64, 3));
    CHECK_INFER(tg_op_sum, all, "f32[]", TY(F32, 3));
    CHECK_INFER(tg_op_prod, all, "f64[]", TY(F64, 3));
    CHECK_INFER(tg_op_mean, all, "f64[]", TY(TG_DT_I32, 3));
    CHECK_INFER(tg_op_mean, all, "f64[]", TY(TG_DT_BOOL, 3));
    CHECK_INFER(tg_op_mean, all, "f32[]", TY(F32, 3));
    CHECK_INFER(tg_op_max, all, "i16[]", TY(TG_DT_I16, 3));
    CHECK_INFER(tg_op_min, all, "bool[]", TY(TG_DT_BOOL, 3));
    CHECK_INFER(tg_op_min, all, "u8[]", TY(TG_DT_U8, 3));
    CHECK_INFER(tg_op_any, all, "bool[]", TY(F64, 3));
    CHECK_INFER(tg_op_all, all, "bool[]", TY(TG_DT_I32, 3));
    CHECK_INFER(tg_op_argmax, all, "i64[]", TY(TG_DT_U8, 3));
}

static void test_infer_errors(void **state) {
    (void)state;
    const tg_aval ax2[2] = {AV_INTS(2), AV_BOOL(0)};
    const tg_aval axm3[2] = {AV_INTS(-3), AV_BOOL(0)};
    const tg_aval dup[2] = {AV_INTS(0, -2), AV_BOOL(0)};
    const tg_aval ax0[2] = {AV_INTS(0), AV_BOOL(0)};
    const tg_aval ax1[2] = {AV_INTS(1), AV_BOOL(0)};
    const tg_aval all[2] = {AV_NONE, AV_BOOL(0)};
    CHECK_INFER_FAIL(tg_op_sum, ax2, TG_EINVAL, "axis 2 is out of bounds", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_any, axm3, TG_EINVAL, "axis -3 is out of bounds", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_mean, dup, TG_EINVAL, "duplicate value in 'axis'", TY(F32, 2, 3));
    const tg_aval arg2[2] = {AV_INT(2), AV_BOOL(0)};
    CHECK_INFER_FAIL(tg_op_argmax, arg2, TG_EINVAL, "out of bounds", TY(F32, 2, 3));
    const tg_aval arg01[2] = {AV_INTS(0, 1), AV_BOOL(0)};
    CHECK_INFER_FAIL(tg_op_argmin, arg01, TG_EINVAL, "takes one axis or none", TY(F32, 2, 3));
    const tg_aval arg_list1[2] = {AV_INTS(-1), AV_BOOL(1)};
    CHECK_INFER(tg_op_argmin, arg_list1, "i64[2,1]", TY(F32, 2, 3));
    /* max/min/argmax over a static empty axis: statically an error (NumPy: ValueError) */
    CHECK_INFER_FAIL(tg_op_max, ax0, TG_ESHAPE,
                     "zero-size array to reduction operation max which has no identity",
                     TY(F32, 0, 3));
    CHECK_INFER_FAIL(tg_op_min, all, TG_ESHAPE, "reduction operation min", TY(F32, 3, 0));
    const tg_aval arg1[2] = {AV_INT(1), AV_BOOL(0)};
    CHECK_INFER_FAIL(tg_op_argmax, arg1, TG_ESHAPE, "attempt to get argmax of an empty sequence",
                     TY(F32, 3, 0));
    /* reducing a non-empty axis of an empty array is fine: f32[0,3].max(axis=1) -> [0] */
    CHECK_INFER(tg_op_max, ax1, "f32[0]", TY(F32, 0, 3));
    CHECK_INFER(tg_op_sum, ax0, "f32[3]", TY(F32, 0, 3));
    /* '?' statically; concrete 0 at run time is the error */
    CHECK_INFER(tg_op_max, ax0, "f32[3]", TY(F32, -1, 3));
    tg_type rt = TY(F32, 0, 3);
    infer_res r = infer_op(&tg_op_max, &rt, 1, ax0, true);
    assert_int_equal(r.st, TG_ESHAPE);
}

/* ---- values ---- */

static void test_sum_prod_mean(void **state) {
    (void)state;
    tg_tensor *base, *x = mk_x23(&base); /* [[2,1,0],[5,4,3]] */
    tg_tensor *y;
    y = reduce1(&tg_op_sum, x, AV_INTS(0), false);
    CHECK_T(y, F32, SHAPE(3), VALS(7, 5, 3));
    tg_tensor_free(y);
    y = reduce1(&tg_op_sum, x, AV_INTS(-1), true);
    CHECK_T(y, F32, SHAPE(2, 1), VALS(3, 12));
    tg_tensor_free(y);
    y = reduce1(&tg_op_sum, x, AV_NONE, false);
    CHECK_T(y, F32, SHAPE0, VALS(15));
    tg_tensor_free(y);
    y = reduce1(&tg_op_sum, x, AV_EMPTY, false); /* axis=(): no reduction */
    CHECK_T(y, F32, SHAPE(2, 3), VALS(2, 1, 0, 5, 4, 3));
    tg_tensor_free(y);
    y = reduce1(&tg_op_prod, x, AV_INTS(0), false);
    CHECK_T(y, F32, SHAPE(3), VALS(10, 4, 0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_mean, x, AV_INTS(1), false);
    CHECK_T(y, F32, SHAPE(2), VALS(1, 4));
    tg_tensor_free(y);
    tg_tensor *rev = mk_reversed(x); /* [[3,4,5],[0,1,2]] */
    y = reduce1(&tg_op_sum, rev, AV_INTS(1), false);
    CHECK_T(y, F32, SHAPE(2), VALS(12, 3));
    tg_tensor_free(y);
    tg_tensor_free(rev);
    tg_tensor_free(x);
    tg_tensor_free(base);

    /* several axes, in any order: np.arange(24.).reshape(2,3,4) */
    tg_tensor *w = mk_arange(F64, SHAPE(2, 3, 4));
    y = reduce1(&tg_op_sum, w, AV_INTS(2, 0), true);
    CHECK_T(y, F64, SHAPE(1, 3, 1), VALS(60, 92, 124));
    tg_tensor_free(y);
    y = reduce1(&tg_op_max, w, AV_INTS(-1, 0), false);
    CHECK_T(y, F64, SHAPE(3), VALS(15, 19, 23));
    tg_tensor_free(y);
    tg_tensor_free(w);

    /* integer dtypes: i8 sums in i64 (200, not -56); u8 prod in i64 (400) */
    tg_tensor *i8 = mk_tensor(TG_DT_I8, SHAPE(2), VALS(100, 100));
    y = reduce1(&tg_op_sum, i8, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(200));
    tg_tensor_free(y);
    tg_tensor_free(i8);
    tg_tensor *u8 = mk_tensor(TG_DT_U8, SHAPE(2), VALS(200, 2));
    y = reduce1(&tg_op_prod, u8, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(400));
    tg_tensor_free(y);
    tg_tensor_free(u8);
    /* i64 wraps around like NumPy: INT64_MAX + 1 == INT64_MIN */
    int64_t big[2] = {INT64_MAX, 1};
    tg_tensor *i64 = tg_tensor_from_data(tg_ctx_default(), I64, SHAPE(2), big);
    y = reduce1(&tg_op_sum, i64, AV_NONE, false);
    assert_true(tg_load_i64(tg_tensor_data(y), I64) == INT64_MIN);
    tg_tensor_free(y);
    tg_tensor_free(i64);
    /* mean of ints and bools is f64 */
    tg_tensor *i32 = mk_tensor(TG_DT_I32, SHAPE(2), VALS(1, 2));
    y = reduce1(&tg_op_mean, i32, AV_NONE, false);
    CHECK_T(y, F64, SHAPE0, VALS(1.5));
    tg_tensor_free(y);
    tg_tensor_free(i32);
    tg_tensor *b = mk_tensor(TG_DT_BOOL, SHAPE(3), VALS(1, 0, 1));
    y = reduce1(&tg_op_mean, b, AV_NONE, false);
    check_tensor(y, F64, 0, NULL, VALS(2.0 / 3.0), 1e-15);
    tg_tensor_free(y);
    y = reduce1(&tg_op_sum, b, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(2));
    tg_tensor_free(y);
    tg_tensor_free(b);
    /* f32 accumulates in double and rounds once (NumPy's f32 sum would give 0 here:
     * deliberate difference, documented in reduce.c) */
    tg_tensor *f = mk_tensor(F32, SHAPE(3), VALS(1e8, 1, -1e8));
    y = reduce1(&tg_op_sum, f, AV_NONE, false);
    CHECK_T(y, F32, SHAPE0, VALS(1));
    tg_tensor_free(y);
    tg_tensor_free(f);
}

static void test_max_min_arg(void **state) {
    (void)state;
    tg_tensor *base, *x = mk_x23(&base); /* [[2,1,0],[5,4,3]] */
    tg_tensor *y;
    y = reduce1(&tg_op_max, x, AV_INTS(0), false);
    CHECK_T(y, F32, SHAPE(3), VALS(5, 4, 3));
    tg_tensor_free(y);
    y = reduce1(&tg_op_min, x, AV_INTS(1), true);
    CHECK_T(y, F32, SHAPE(2, 1), VALS(0, 3));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmax, x, AV_INT(1), false);
    CHECK_T(y, I64, SHAPE(2), VALS(0, 0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmax, x, AV_NONE, false); /* flattened, C order */
    CHECK_T(y, I64, SHAPE0, VALS(3));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, x, AV_NONE, true);
    CHECK_T(y, I64, SHAPE(1, 1), VALS(2));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, x, AV_INT(-2), false);
    CHECK_T(y, I64, SHAPE(3), VALS(0, 0, 0));
    tg_tensor_free(y);
    tg_tensor_free(x);
    tg_tensor_free(base);

    /* NaN propagates through max/min and counts as the extreme for arg* (NumPy 1.24:
     * max axis=1 [nan nan], min axis=0 [1 nan nan], argmax axis=1 [1 2], argmin() 1) */
    tg_tensor *n = mk_tensor(F64, SHAPE(2, 3), VALS(1, NAN, 3, 4, 5, NAN));
    y = reduce1(&tg_op_max, n, AV_INTS(1), false);
    CHECK_T(y, F64, SHAPE(2), VALS(NAN, NAN));
    tg_tensor_free(y);
    y = reduce1(&tg_op_min, n, AV_INTS(0), false);
    CHECK_T(y, F64, SHAPE(3), VALS(1, NAN, NAN));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmax, n, AV_INT(1), false);
    CHECK_T(y, I64, SHAPE(2), VALS(1, 2));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, n, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(1));
    tg_tensor_free(y);
    tg_tensor_free(n);

    /* first occurrence wins ties: argmax([3,1,3,1]) == 0, argmin == 1 */
    tg_tensor *t = mk_tensor(TG_DT_I32, SHAPE(4), VALS(3, 1, 3, 1));
    y = reduce1(&tg_op_argmax, t, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, t, AV_INT(0), false);
    CHECK_T(y, I64, SHAPE0, VALS(1));
    tg_tensor_free(y);
    y = reduce1(&tg_op_max, t, AV_NONE, false);
    CHECK_T(y, TG_DT_I32, SHAPE0, VALS(3));
    tg_tensor_free(y);
    tg_tensor_free(t);
    /* negative integers: max of [-5,-2,-9] is -2 */
    tg_tensor *neg = mk_tensor(TG_DT_I8, SHAPE(3), VALS(-5, -2, -9));
    y = reduce1(&tg_op_max, neg, AV_NONE, false);
    CHECK_T(y, TG_DT_I8, SHAPE0, VALS(-2));
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, neg, AV_NONE, false);
    CHECK_T(y, I64, SHAPE0, VALS(2));
    tg_tensor_free(y);
    tg_tensor_free(neg);
}

static void test_any_all(void **state) {
    (void)state;
    /* NaN is true; np.any([[0,0],[nan,0]], axis=1) -> [F, T] */
    tg_tensor *x = mk_tensor(F64, SHAPE(2, 2), VALS(0, 0, NAN, 0));
    tg_tensor *y = reduce1(&tg_op_any, x, AV_INTS(1), false);
    CHECK_T(y, TG_DT_BOOL, SHAPE(2), VALS(0, 1));
    tg_tensor_free(y);
    tg_tensor_free(x);
    x = mk_tensor(TG_DT_I32, SHAPE(2, 2), VALS(1, 2, 0, 3));
    y = reduce1(&tg_op_all, x, AV_INTS(0), false);
    CHECK_T(y, TG_DT_BOOL, SHAPE(2), VALS(0, 1));
    tg_tensor_free(y);
    y = reduce1(&tg_op_all, x, AV_NONE, true);
    CHECK_T(y, TG_DT_BOOL, SHAPE(1, 1), VALS(0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_any, x, AV_NONE, false);
    CHECK_T(y, TG_DT_BOOL, SHAPE0, VALS(1));
    tg_tensor_free(y);
    tg_tensor_free(x);
}

static void test_empty(void **state) {
    (void)state;
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), F32, SHAPE(0, 3));
    assert_non_null(e);
    tg_tensor *y;
    y = reduce1(&tg_op_sum, e, AV_INTS(0), false);
    CHECK_T(y, F32, SHAPE(3), VALS(0, 0, 0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_prod, e, AV_INTS(0), true);
    CHECK_T(y, F32, SHAPE(1, 3), VALS(1, 1, 1));
    tg_tensor_free(y);
    y = reduce1(&tg_op_max, e, AV_INTS(1), false);
    CHECK_T(y, F32, SHAPE(0), NULL);
    tg_tensor_free(y);
    y = reduce1(&tg_op_argmin, e, AV_INT(1), true);
    CHECK_T(y, I64, SHAPE(0, 1), NULL);
    tg_tensor_free(y);
    y = reduce1(&tg_op_any, e, AV_NONE, false);
    CHECK_T(y, TG_DT_BOOL, SHAPE0, VALS(0));
    tg_tensor_free(y);
    y = reduce1(&tg_op_all, e, AV_NONE, false);
    CHECK_T(y, TG_DT_BOOL, SHAPE0, VALS(1));
    tg_tensor_free(y);
    y = reduce1(&tg_op_mean, e, AV_INTS(0), false); /* NumPy: nan (with a warning) */
    CHECK_T(y, F32, SHAPE(3), VALS(NAN, NAN, NAN));
    tg_tensor_free(y);
    /* max over the empty axis: a run-time error naming the operation */
    const tg_aval attrs[2] = {AV_NONE, AV_BOOL(0)};
    run_res r = run_op(&tg_op_max, &e, 1, attrs);
    assert_int_equal(r.st, TG_ESHAPE);
    assert_non_null(strstr(r.msg, "zero-size array to reduction operation max"));
    r = run_op(&tg_op_argmax, &e, 1, attrs);
    assert_int_equal(r.st, TG_ESHAPE);
    assert_non_null(strstr(r.msg, "argmax of an empty sequence"));
    tg_tensor_free(e);
}

/* The kernel alone (without the run-time inference) still refuses an empty max. */
static void test_kernel_guards(void **state) {
    (void)state;
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), F32, SHAPE(3, 0));
    tg_tensor *out = tg_tensor_new(tg_ctx_default(), F32, SHAPE(3));
    const tg_aval attrs[2] = {AV_INTS(1), AV_BOOL(0)};
    tg_type ot = TY(F32, 3);
    tg_kern k = {.ctx = tg_ctx_default(),
                 .attrs = attrs,
                 .in = &e,
                 .nin = 1,
                 .out = &out,
                 .nout = 1,
                 .out_type = &ot};
    assert_int_equal(tg_op_max.ref(&k), TG_ESHAPE);
    assert_non_null(strstr(k.msg, "max"));
    tg_tensor_free(out);
    tg_tensor_free(e);
}

/* ---- through the public API (graph, builder, reference interpreter) ---- */

static void test_api(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(tg_ctx_default(), "f");
    assert_non_null(g);
    tg_var *x = tg_input(g, "x", F32, 2, (const int64_t[]){TG_DIM_UNKNOWN, 3});
    tg_var *s = tg_reduce(g, "sum", x, (const int64_t[]){0}, 1, true);
    tg_attr am[2] = {TG_A_INT("axis", -1), TG_A_INT("axis", 0)};
    tg_var *a = tg_apply(g, "argmax", &x, 1, &am[0], 1);
    tg_var *a0 = tg_apply(g, "argmin", &x, 1, &am[1], 1);
    assert_non_null(a0);
    assert_int_equal(tg_var_dim(a0, 0), 3);
    tg_var *m = tg_reduce(g, "max", x, NULL, -1, false);
    tg_var *sm = tg_reduce(g, "mean", tg_reduce(g, "sum", x, (const int64_t[]){1}, 1, false), NULL,
                           -1, false);
    assert_non_null(s);
    assert_non_null(a);
    assert_non_null(sm);
    assert_int_equal(tg_var_ndim(s), 2);
    assert_int_equal(tg_var_dim(s, 0), 1);
    assert_int_equal(tg_var_dim(s, 1), 3);
    assert_int_equal(tg_var_dim(a, 0), TG_DIM_UNKNOWN);
    assert_int_equal(tg_var_dtype(a), I64);
    tg_tensor *base, *xv = mk_x23(&base); /* [[2,1,0],[5,4,3]] */
    tg_tensor *out[4] = {NULL};
    tg_var *outs[4] = {s, a, m, sm};
    assert_int_equal(call_graph(g, outs, 4, &xv, 1, out), TG_OK);
    CHECK_T(out[0], F32, SHAPE(1, 3), VALS(7, 5, 3));
    CHECK_T(out[1], I64, SHAPE(2), VALS(0, 0));
    CHECK_T(out[2], F32, SHAPE0, VALS(5));
    CHECK_T(out[3], F32, SHAPE0, VALS(7.5));
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    /* the '?' extent is 0 at run time: max has no identity */
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), F32, SHAPE(0, 3));
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    assert_int_equal(tg_fn_call(f, &e, 1, out, 4), TG_ESHAPE);
    assert_non_null(strstr(tg_last_error(), "zero-size array to reduction operation max"));
    tg_fn_free(f);
    tg_tensor_free(e);
    tg_tensor_free(xv);
    tg_tensor_free(base);
    /* builder errors are sticky and name the op */
    tg_var *bad = tg_reduce(g, "sum", x, (const int64_t[]){0, -2}, 2, false);
    assert_null(bad);
    assert_int_equal(tg_graph_status(g), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "sum: duplicate value in 'axis'"));
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer_shapes), cmocka_unit_test(test_infer_dtypes),
        cmocka_unit_test(test_infer_errors), cmocka_unit_test(test_sum_prod_mean),
        cmocka_unit_test(test_max_min_arg),  cmocka_unit_test(test_any_all),
        cmocka_unit_test(test_empty),        cmocka_unit_test(test_kernel_guards),
        cmocka_unit_test(test_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
