/* test_index.c - the indexing ops (take take_along set_subtensor inc_subtensor set_take
 * inc_take mask_select) through the public API: graphs built with tg_apply, compiled and
 * run by the reference interpreter. Expected values were computed with NumPy 1.24
 * (np._set_promotion_state("weak")) and pasted here as literals; the NumPy expression is
 * given next to each. Also checked: negative indices and strides, repeated indices,
 * 0-size index arrays, broadcasting of y, run-time out-of-range messages, static type
 * errors (bad axis, non-integer indices, y not broadcastable, same_kind casting).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_testutil.h"

/* ---- helpers ---- */

static tg_var *input(tg_graph *g, const char *name, tg_dtype dt, int nd, const int64_t *shape) {
    tg_var *v = tg_input(g, name, dt, nd, shape);
    assert_non_null(v);
    return v;
}

/* Compiles g with outputs outs[0..nout) and calls it; outputs land in res. */
static tg_status run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                     tg_tensor **res) {
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) print_error("builder failed: %s\n", tg_graph_error(g));
        assert_non_null(outs[i]);
    }
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, NULL, &f);
    if (st != TG_OK) print_error("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, nin, res, nout);
    tg_fn_free(f);
    return st;
}

/* Runs and expects success. */
static void run_ok(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                   tg_tensor **res) {
    tg_status st = run(g, outs, nout, in, nin, res);
    if (st != TG_OK) print_error("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
}

/* Runs and expects the status with every `subs` string in tg_last_error(). */
static void run_fail(tg_graph *g, tg_var *out, tg_tensor *const *in, int nin, tg_status want,
                     const char *sub1, const char *sub2) {
    tg_tensor *res = NULL;
    tg_status st = run(g, &out, 1, in, nin, &res);
    if (st == TG_OK) print_error("unexpected success\n");
    assert_int_equal(st, want);
    assert_null(res);
    const char *msg = tg_last_error();
    if (!strstr(msg, sub1) || (sub2 && !strstr(msg, sub2))) print_error("message: %s\n", msg);
    assert_non_null(strstr(msg, sub1));
    if (sub2) assert_non_null(strstr(msg, sub2));
}

/* Expects the builder to have failed with status `want` and `sub` in the message. */
static void expect_build_error(tg_graph *g, tg_var *v, tg_status want, const char *sub) {
    if (v) print_error("unexpected success\n");
    assert_null(v);
    if (!strstr(tg_graph_error(g), sub)) print_error("message: %s\n", tg_graph_error(g));
    assert_int_equal(tg_graph_status(g), want);
    assert_non_null(strstr(tg_graph_error(g), sub));
}

static tg_var *apply2(tg_graph *g, const char *op, tg_var *a, tg_var *b, const tg_attr *at,
                      int nat) {
    return tg_apply(g, op, (tg_var *[]){a, b}, 2, at, nat);
}

static tg_var *apply3(tg_graph *g, const char *op, tg_var *a, tg_var *b, tg_var *c,
                      const tg_attr *at, int nat) {
    return tg_apply(g, op, (tg_var *[]){a, b, c}, 3, at, nat);
}

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

/* An int list attribute with `none` entries where nn[k] (their values are ignored). */
#define A_INTS_NONE(nm, p, nn, cnt)                                                                \
    ((tg_attr){.name = (nm), .kind = TG_ATTR_INTS, .ints = (p), .n = (cnt), .none = (nn)})

/* ---- take ---- */

static void test_take_values(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    tg_var *i0 = input(g, "i0", TG_DT_I32, SHAPE(2, 2));
    tg_var *i1 = input(g, "i1", TG_DT_I64, SHAPE(3));
    tg_var *i2 = input(g, "i2", TG_DT_I16, SHAPE(3));
    tg_var *i3 = input(g, "i3", TG_DT_I64, SHAPE(0));
    tg_var *i4 = input(g, "i4", TG_DT_U8, SHAPE(2));
    tg_attr ax0 = TG_A_INT("axis", 0), ax1 = TG_A_INT("axis", 1), axn = TG_A_NONE("axis");
    tg_attr axm1 = TG_A_INT("axis", -1);
    tg_var *outs[] = {
        apply2(g, "take", x, i0, &ax0, 1),
        apply2(g, "take", x, i1, &axm1, 1),
        apply2(g, "take", x, i2, &axn, 1),
        apply2(g, "take", x, i2, NULL, 0), /* axis defaults to none */
        apply2(g, "take", x, i3, &ax1, 1),
        apply2(g, "take", x, tg_literal_int(g, 1), &ax0, 1),
        apply2(g, "take", x, i4, &ax0, 1),
    };
    assert_int_equal(tg_var_ndim(outs[0]), 3);
    assert_int_equal(tg_var_dim(outs[0], 2), 4);
    assert_int_equal(tg_var_dim(outs[4], 1), 0);
    tg_tensor *in[] = {
        mk_arange(TG_DT_F32, SHAPE(3, 4)),
        mk_tensor(TG_DT_I32, SHAPE(2, 2), VALS(2, -1, 0, -3)),
        mk_tensor(TG_DT_I64, SHAPE(3), VALS(3, -4, 1)),
        mk_tensor(TG_DT_I16, SHAPE(3), VALS(-1, 0, 5)),
        mk_tensor(TG_DT_I64, SHAPE(0), VALS(0)),
        mk_tensor(TG_DT_U8, SHAPE(2), VALS(2, 0)),
    };
    tg_tensor *res[7];
    run_ok(g, outs, 7, in, 6, res);
    /* np.take(x, [[2,-1],[0,-3]], axis=0) */
    CHECK_T(res[0], TG_DT_F32, SHAPE(2, 2, 4),
            VALS(8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3, 0, 1, 2, 3));
    /* np.take(x, [3,-4,1], axis=-1) */
    CHECK_T(res[1], TG_DT_F32, SHAPE(3, 3), VALS(3, 0, 1, 7, 4, 5, 11, 8, 9));
    /* np.take(x, [-1,0,5]) */
    CHECK_T(res[2], TG_DT_F32, SHAPE(3), VALS(11, 0, 5));
    CHECK_T(res[3], TG_DT_F32, SHAPE(3), VALS(11, 0, 5));
    /* np.take(x, np.zeros(0, int), axis=1) */
    CHECK_T(res[4], TG_DT_F32, SHAPE(3, 0), VALS(0));
    /* np.take(x, 1, axis=0) */
    CHECK_T(res[5], TG_DT_F32, SHAPE(4), VALS(4, 5, 6, 7));
    /* np.take(x, np.array([2,0], np.uint8), axis=0) */
    CHECK_T(res[6], TG_DT_F32, SHAPE(2, 4), VALS(8, 9, 10, 11, 0, 1, 2, 3));
    free_all(res, 7);
    free_all(in, 6);
    tg_graph_free(g);
}

static void test_take_negative_strides_and_unknown(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(-1, 4));
    tg_var *i = input(g, "i", TG_DT_I8, SHAPE(-1));
    tg_attr ax1 = TG_A_INT("axis", 1);
    tg_var *out = apply2(g, "take", x, i, &ax1, 1);
    assert_int_equal(tg_var_dim(out, 0), -1);
    assert_int_equal(tg_var_dim(out, 1), -1);
    tg_tensor *base = mk_arange(TG_DT_F32, SHAPE(3, 4));
    tg_tensor *in[] = {mk_reversed(base), mk_tensor(TG_DT_I8, SHAPE(2), VALS(0, -1))};
    tg_tensor *res;
    run_ok(g, &out, 1, in, 2, &res);
    /* np.take(x[::-1, ::-1], np.array([0,-1], np.int8), axis=1) */
    CHECK_T(res, TG_DT_F32, SHAPE(3, 2), VALS(11, 8, 7, 4, 3, 0));
    tg_tensor_free(res);
    free_all(in, 2);
    tg_tensor_free(base);
    tg_graph_free(g);
}

static void test_take_out_of_range(void **state) {
    (void)state;
    tg_attr ax0 = TG_A_INT("axis", 0), ax1 = TG_A_INT("axis", 1);
    struct {
        double v;
        const tg_attr *axis;
        const char *msg;
    } cases[] = {
        {7, &ax0, "index 7 is out of bounds for axis 0 with size 2"},
        {-3, &ax0, "index -3 is out of bounds for axis 0 with size 2"},
        {5, &ax1, "index 5 is out of bounds for axis 1 with size 5"},
        {-6, &ax1, "index -6 is out of bounds for axis 1 with size 5"},
        {10, NULL, "index 10 is out of bounds for axis 0 with size 10"}, /* flattened */
    };
    for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
        tg_graph *g = tg_graph_new(NULL, "f");
        tg_var *x = input(g, "x", TG_DT_I32, SHAPE(2, 5));
        tg_var *i = input(g, "i", TG_DT_I64, SHAPE(2));
        tg_var *out = apply2(g, "take", x, i, cases[c].axis, cases[c].axis ? 1 : 0);
        tg_tensor *in[] = {mk_arange(TG_DT_I32, SHAPE(2, 5)),
                           mk_tensor(TG_DT_I64, SHAPE(2), VALS(0, cases[c].v))};
        run_fail(g, out, in, 2, TG_EINDEX, "take", cases[c].msg);
        free_all(in, 2);
        tg_graph_free(g);
    }
    /* a non-empty take from an empty axis */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F64, SHAPE(0, 3));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(1));
    tg_var *out = apply2(g, "take", x, i, &ax0, 1);
    tg_tensor *in[] = {mk_arange(TG_DT_F64, SHAPE(0, 3)), mk_tensor(TG_DT_I64, SHAPE(1), VALS(0))};
    run_fail(g, out, in, 2, TG_EINDEX, "index 0 is out of bounds for axis 0 with size 0", NULL);
    free_all(in, 2);
    tg_graph_free(g);

    /* an empty result still checks its indices: np.take(np.zeros((3,0)), [5], axis=0) raises
     * "index 5 is out of bounds for axis 0 with size 3"; so do set_take and inc_take */
    for (int c = 0; c < 3; c++) {
        static const char *const ops[] = {"take", "set_take", "inc_take"};
        g = tg_graph_new(NULL, "f");
        x = input(g, "x", TG_DT_F64, SHAPE(3, 0));
        i = input(g, "i", TG_DT_I64, SHAPE(1));
        out = c == 0 ? apply2(g, "take", x, i, &ax0, 1)
                     : apply3(g, ops[c], x, i, tg_literal_float(g, 1.0), &ax0, 1);
        tg_tensor *in2[] = {mk_arange(TG_DT_F64, SHAPE(3, 0)),
                            mk_tensor(TG_DT_I64, SHAPE(1), VALS(5))};
        run_fail(g, out, in2, 2, TG_EINDEX, ops[c],
                 "index 5 is out of bounds for axis 0 with size 3");
        free_all(in2, 2);
        tg_graph_free(g);
    }
}

static void test_take_type_errors(void **state) {
    (void)state;
    tg_attr ax2 = TG_A_INT("axis", 2), axm3 = TG_A_INT("axis", -3);
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(2));
    expect_build_error(g, apply2(g, "take", x, i, &ax2, 1), TG_EINVAL,
                       "take: axis 2 is out of bounds for an array of dimension 2");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_I64, SHAPE(2));
    expect_build_error(g, apply2(g, "take", x, i, &axm3, 1), TG_EINVAL, "axis -3 is out");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_F32, SHAPE(2));
    expect_build_error(g, apply2(g, "take", x, i, NULL, 0), TG_ETYPE,
                       "take: indices must be integers, got f32[2]");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_BOOL, SHAPE(3));
    expect_build_error(g, apply2(g, "take", x, i, NULL, 0), TG_ETYPE, "use mask_select");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    expect_build_error(g, apply2(g, "take", x, tg_literal_float(g, 1.0), NULL, 0), TG_ETYPE,
                       "indices must be integers");
    tg_graph_free(g);

    /* rank of the result above TG_MAX_DIMS */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(1, 1, 1, 1, 1));
    i = input(g, "i", TG_DT_I64, SHAPE(1, 1, 1, 1, 1));
    tg_attr ax0 = TG_A_INT("axis", 0);
    expect_build_error(g, apply2(g, "take", x, i, &ax0, 1), TG_ELIMIT, "9 dimensions");
    tg_graph_free(g);
}

/* ---- take_along ---- */

static void test_take_along(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F64, SHAPE(3, 4));
    tg_var *i0 = input(g, "i0", TG_DT_I64, SHAPE(3, 1));
    tg_var *i1 = input(g, "i1", TG_DT_I32, SHAPE(2, 1));
    tg_var *x1 = input(g, "x1", TG_DT_F64, SHAPE(1, 4));
    tg_var *i2 = input(g, "i2", TG_DT_I64, SHAPE(3, 2));
    tg_var *i3 = input(g, "i3", TG_DT_I64, SHAPE(3));
    tg_attr ax0 = TG_A_INT("axis", 0), ax1 = TG_A_INT("axis", 1), axn = TG_A_NONE("axis");
    tg_var *outs[] = {
        apply2(g, "take_along", x, i0, &ax1, 1),
        apply2(g, "take_along", x, i1, &ax0, 1),
        apply2(g, "take_along", x1, i2, &ax1, 1),
        apply2(g, "take_along", x, i3, &axn, 1),
    };
    assert_int_equal(tg_var_dim(outs[1], 0), 2);
    assert_int_equal(tg_var_dim(outs[1], 1), 4);
    assert_int_equal(tg_var_dim(outs[2], 0), 3);
    tg_tensor *in[] = {
        mk_arange(TG_DT_F64, SHAPE(3, 4)),
        mk_tensor(TG_DT_I64, SHAPE(3, 1), VALS(-1, 0, 2)),
        mk_tensor(TG_DT_I32, SHAPE(2, 1), VALS(2, -3)),
        mk_tensor(TG_DT_F64, SHAPE(1, 4), VALS(10, 20, 30, 40)),
        mk_tensor(TG_DT_I64, SHAPE(3, 2), VALS(3, 0, 1, -1, 2, 2)),
        mk_tensor(TG_DT_I64, SHAPE(3), VALS(-1, 0, 7)),
    };
    tg_tensor *res[4];
    run_ok(g, outs, 4, in, 6, res);
    /* np.take_along_axis(x, [[-1],[0],[2]], axis=1) */
    CHECK_T(res[0], TG_DT_F64, SHAPE(3, 1), VALS(3, 4, 10));
    /* np.take_along_axis(x, [[2],[-3]], axis=0): indices broadcast along axis 1 */
    CHECK_T(res[1], TG_DT_F64, SHAPE(2, 4), VALS(8, 9, 10, 11, 0, 1, 2, 3));
    /* np.take_along_axis([[10,20,30,40]], [[3,0],[1,-1],[2,2]], axis=1): x broadcasts */
    CHECK_T(res[2], TG_DT_F64, SHAPE(3, 2), VALS(40, 10, 20, 40, 30, 30));
    /* np.take_along_axis(x, [-1,0,7], axis=None) */
    CHECK_T(res[3], TG_DT_F64, SHAPE(3), VALS(11, 0, 7));
    free_all(res, 4);
    free_all(in, 6);
    tg_graph_free(g);
}

static void test_take_along_errors(void **state) {
    (void)state;
    tg_attr ax1 = TG_A_INT("axis", 1), axn = TG_A_NONE("axis");
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(3));
    expect_build_error(g, apply2(g, "take_along", x, i, &ax1, 1), TG_ESHAPE,
                       "must have the same number of dimensions");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_I64, SHAPE(3, 1));
    expect_build_error(g, apply2(g, "take_along", x, i, NULL, 0), TG_EINVAL,
                       "missing attribute 'axis'");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_I64, SHAPE(2, 1));
    expect_build_error(g, apply2(g, "take_along", x, i, &ax1, 1), TG_ESHAPE,
                       "do not broadcast against x f32[3,4] outside axis 1");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_I64, SHAPE(3, 1));
    expect_build_error(g, apply2(g, "take_along", x, i, &axn, 1), TG_ESHAPE,
                       "indices must have a single dimension");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(3, 4));
    i = input(g, "i", TG_DT_U8, SHAPE(3, 1));
    tg_var *out = apply2(g, "take_along", x, i, &ax1, 1);
    tg_tensor *in[] = {mk_arange(TG_DT_F32, SHAPE(3, 4)),
                       mk_tensor(TG_DT_U8, SHAPE(3, 1), VALS(0, 4, 1))};
    run_fail(g, out, in, 2, TG_EINDEX, "take_along",
             "index 4 is out of bounds for axis 1 with size 4");
    free_all(in, 2);
    tg_graph_free(g);
}

/* ---- set_subtensor, inc_subtensor ---- */

static void test_subtensor_values(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(4, 3));
    tg_var *row = input(g, "row", TG_DT_F32, SHAPE(3));
    tg_var *blk = input(g, "blk", TG_DT_F32, SHAPE(2, 3));
    tg_var *y3 = input(g, "y3", TG_DT_F32, SHAPE(3));
    tg_var *col = input(g, "col", TG_DT_F32, SHAPE(1, 4));
    /* x[1:3] */
    tg_attr rows[] = {TG_A_INTS("starts", ((int64_t[]){1}), 1),
                      TG_A_INTS("stops", ((int64_t[]){3}), 1)};
    /* x[::-2, ::-1] */
    tg_attr neg[] = {A_INTS_NONE("starts", ((int64_t[]){0, 0}), ((bool[]){1, 1}), 2),
                     A_INTS_NONE("stops", ((int64_t[]){0, 0}), ((bool[]){1, 1}), 2),
                     TG_A_INTS("steps", ((int64_t[]){-2, -1}), 2)};
    /* x[::-1] */
    tg_attr rev[] = {TG_A_INTS("steps", ((int64_t[]){-1}), 1)};
    /* x[1] */
    tg_attr one[] = {TG_A_INTS("starts", ((int64_t[]){1}), 1),
                     TG_A_INTS("index", ((int64_t[]){1}), 1)};
    /* x[:, -1] */
    tg_attr last[] = {A_INTS_NONE("starts", ((int64_t[]){0, -1}), ((bool[]){1, 0}), 2),
                      TG_A_INTS("index", ((int64_t[]){0, 1}), 2)};
    tg_var *outs[] = {
        apply2(g, "set_subtensor", x, row, rows, 2),
        apply2(g, "set_subtensor", x, blk, neg, 3),
        apply2(g, "inc_subtensor", x, y3, rev, 1),
        apply2(g, "set_subtensor", x, tg_literal_int(g, 7), one, 2),
        apply2(g, "inc_subtensor", x, col, last, 2), /* a leading 1 of y is dropped */
    };
    for (int i = 0; i < 5; i++) assert_int_equal(tg_var_dtype(outs[i]), TG_DT_F32);
    tg_tensor *in[] = {
        mk_arange(TG_DT_F32, SHAPE(4, 3)),
        mk_tensor(TG_DT_F32, SHAPE(3), VALS(7, 8, 9)),
        mk_tensor(TG_DT_F32, SHAPE(2, 3), VALS(1, 2, 3, 4, 5, 6)),
        mk_tensor(TG_DT_F32, SHAPE(3), VALS(100, 200, 300)),
        mk_tensor(TG_DT_F32, SHAPE(1, 4), VALS(1, 2, 3, 4)),
    };
    tg_tensor *res[5];
    run_ok(g, outs, 5, in, 5, res);
    /* a = x.copy(); a[1:3] = [7,8,9] */
    CHECK_T(res[0], TG_DT_F32, SHAPE(4, 3), VALS(0, 1, 2, 7, 8, 9, 7, 8, 9, 9, 10, 11));
    /* a[::-2, ::-1] = [[1,2,3],[4,5,6]] */
    CHECK_T(res[1], TG_DT_F32, SHAPE(4, 3), VALS(0, 1, 2, 6, 5, 4, 6, 7, 8, 3, 2, 1));
    /* a[::-1] += [100,200,300] */
    CHECK_T(res[2], TG_DT_F32, SHAPE(4, 3),
            VALS(100, 201, 302, 103, 204, 305, 106, 207, 308, 109, 210, 311));
    /* a[1] = 7 */
    CHECK_T(res[3], TG_DT_F32, SHAPE(4, 3), VALS(0, 1, 2, 7, 7, 7, 6, 7, 8, 9, 10, 11));
    /* a[:, -1] += [[1,2,3,4]] */
    CHECK_T(res[4], TG_DT_F32, SHAPE(4, 3), VALS(0, 1, 3, 3, 4, 7, 6, 7, 11, 9, 10, 15));
    /* the input is untouched */
    CHECK_T(in[0], TG_DT_F32, SHAPE(4, 3), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    free_all(res, 5);
    free_all(in, 5);
    tg_graph_free(g);
}

static void test_subtensor_dtypes(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *xi = input(g, "xi", TG_DT_I32, SHAPE(2, 3));
    tg_var *yf = input(g, "yf", TG_DT_F64, SHAPE(2));
    tg_var *xu = input(g, "xu", TG_DT_U8, SHAPE(3));
    tg_var *xf = input(g, "xf", TG_DT_F32, SHAPE(3));
    tg_var *yd = input(g, "yd", TG_DT_F64, SHAPE(2));
    tg_attr cols[] = {
        A_INTS_NONE("starts", ((int64_t[]){0, 1}), ((bool[]){1, 0}), 2)}; /* x[:, 1:] */
    tg_attr head[] = {TG_A_INTS("stops", ((int64_t[]){2}), 1)};           /* x[:2] */
    tg_attr tail[] = {TG_A_INTS("starts", ((int64_t[]){1}), 1)};          /* x[1:] */
    tg_var *outs[] = {
        apply2(g, "set_subtensor", xi, yf, cols, 1),
        apply2(g, "inc_subtensor", xu, tg_literal_int(g, 10), head, 1),
        apply2(g, "inc_subtensor", xf, yd, tail, 1),
        /* a weak result (2 + 3, not a literal) adopts x's dtype too */
        apply2(g, "inc_subtensor", xu, tg_add(g, tg_literal_int(g, 2), tg_literal_int(g, 3)), head,
               1),
    };
    assert_int_equal(tg_var_dtype(outs[0]), TG_DT_I32);
    assert_int_equal(tg_var_dtype(outs[1]), TG_DT_U8);
    assert_int_equal(tg_var_dtype(outs[2]), TG_DT_F32);
    assert_int_equal(tg_var_dtype(outs[3]), TG_DT_U8);
    tg_tensor *in[] = {
        mk_arange(TG_DT_I32, SHAPE(2, 3)),
        mk_tensor(TG_DT_F64, SHAPE(2), VALS(1.7, -2.9)),
        mk_tensor(TG_DT_U8, SHAPE(3), VALS(250, 3, 7)),
        mk_tensor(TG_DT_F32, SHAPE(3), VALS(1, 2, 3)),
        mk_tensor(TG_DT_F64, SHAPE(2), VALS(1e-8, 0.1)),
    };
    tg_tensor *res[4];
    run_ok(g, outs, 4, in, 5, res);
    /* a = np.arange(6, dtype=np.int32).reshape(2,3); a[:, 1:] = [1.7, -2.9] */
    CHECK_T(res[0], TG_DT_I32, SHAPE(2, 3), VALS(0, 1, -2, 3, 1, -2));
    /* a = np.array([250,3,7], np.uint8); a[0:2] += 10 (wraps) */
    CHECK_T(res[1], TG_DT_U8, SHAPE(3), VALS(4, 13, 7));
    /* a = np.array([1,2,3], np.float32); a[1:] += np.array([1e-8, 0.1]): added in f64,
     * rounded once to f32 -> [1, 2, 3.0999999046325684] */
    CHECK_T(res[2], TG_DT_F32, SHAPE(3), VALS(1, 2, 3.0999999046325684));
    /* a = np.array([250,3,7], np.uint8); a[0:2] += 2 + 3 */
    CHECK_T(res[3], TG_DT_U8, SHAPE(3), VALS(255, 8, 7));
    free_all(res, 4);
    free_all(in, 5);
    tg_graph_free(g);
}

static void test_subtensor_errors(void **state) {
    (void)state;
    tg_attr rows[] = {TG_A_INTS("starts", ((int64_t[]){1}), 1),
                      TG_A_INTS("stops", ((int64_t[]){3}), 1)};
    /* y not broadcastable onto x[1:3] of shape [2,3] */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(4, 3));
    tg_var *y = input(g, "y", TG_DT_F32, SHAPE(2));
    expect_build_error(g, apply2(g, "set_subtensor", x, y, rows, 2), TG_ESHAPE,
                       "set_subtensor: cannot broadcast y f32[2] into the selected shape [2,3]");
    tg_graph_free(g);

    /* y has more dimensions than the selection, not of extent 1 */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(4, 3));
    y = input(g, "y", TG_DT_F32, SHAPE(2, 2, 3));
    expect_build_error(g, apply2(g, "inc_subtensor", x, y, rows, 2), TG_ESHAPE,
                       "cannot broadcast y f32[2,2,3]");
    tg_graph_free(g);

    /* NumPy's same_kind rule for in-place add: float into int is refused */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(4));
    y = input(g, "y", TG_DT_F64, SHAPE(2));
    expect_build_error(g, apply2(g, "inc_subtensor", x, y, rows, 1), TG_ETYPE,
                       "cannot add f64 into i32");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(4));
    expect_build_error(g, apply2(g, "inc_subtensor", x, tg_literal_float(g, 0.5), rows, 1),
                       TG_ETYPE, "cannot add f64 literal into i32");
    tg_graph_free(g);

    /* a weak float result (not a literal) is refused the same way */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(4));
    y = tg_add(g, tg_literal_float(g, 0.5), tg_literal_float(g, 0.25));
    expect_build_error(g, apply2(g, "inc_subtensor", x, y, rows, 1), TG_ETYPE,
                       "cannot add f64 literal into i32");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_U8, SHAPE(4));
    y = input(g, "y", TG_DT_I8, SHAPE(2));
    expect_build_error(g, apply2(g, "inc_subtensor", x, y, rows, 1), TG_ETYPE,
                       "cannot add i8 into u8");
    tg_graph_free(g);

    /* an integer literal out of range of x's dtype */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_U8, SHAPE(4));
    expect_build_error(g, apply2(g, "set_subtensor", x, tg_literal_int(g, 300), rows, 1), TG_ETYPE,
                       "integer literal 300 is out of range for u8");
    tg_graph_free(g);

    /* the slice itself is checked by the slice op's rules */
    tg_attr bad_index[] = {TG_A_INTS("starts", ((int64_t[]){4}), 1),
                           TG_A_INTS("index", ((int64_t[]){1}), 1)};
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(4));
    expect_build_error(g, apply2(g, "set_subtensor", x, tg_literal_int(g, 1), bad_index, 2),
                       TG_EINDEX, "index 4 is out of bounds for axis 0");
    tg_graph_free(g);

    /* run time: a '?' extent of y that does not fit, and one that is 1 (no broadcast) */
    for (int c = 0; c < 2; c++) {
        g = tg_graph_new(NULL, "f");
        x = input(g, "x", TG_DT_F32, SHAPE(4, 3));
        y = input(g, "y", TG_DT_F32, SHAPE(-1));
        tg_var *out = apply2(g, "set_subtensor", x, y, rows, 2);
        assert_non_null(out);
        int64_t n = c == 0 ? 2 : 1;
        tg_tensor *in[] = {mk_arange(TG_DT_F32, SHAPE(4, 3)),
                           mk_tensor(TG_DT_F32, 1, &n, VALS(1, 2))};
        run_fail(g, out, in, 2, TG_ESHAPE, "cannot broadcast y f32[",
                 c == 0 ? "into the selected shape [2,3]" : "declare the dimension as 1");
        free_all(in, 2);
        tg_graph_free(g);
    }
}

/* ---- set_take, inc_take ---- */

static void test_take_assign_values(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F64, SHAPE(5));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(4));
    tg_var *y = input(g, "y", TG_DT_F64, SHAPE(4));
    tg_var *x2 = input(g, "x2", TG_DT_F32, SHAPE(2, 4));
    tg_var *i2 = input(g, "i2", TG_DT_I32, SHAPE(3));
    tg_var *y2 = input(g, "y2", TG_DT_F32, SHAPE(2, 1));
    tg_var *i3 = input(g, "i3", TG_DT_I16, SHAPE(2, 2));
    tg_var *ie = input(g, "ie", TG_DT_I64, SHAPE(0));
    tg_attr ax1 = TG_A_INT("axis", 1), axm1 = TG_A_INT("axis", -1);
    tg_var *outs[] = {
        apply3(g, "inc_take", x, i, tg_literal_float(g, 1.0), NULL, 0),
        apply3(g, "set_take", x, i, y, NULL, 0),
        apply3(g, "set_take", x2, i2, y2, &ax1, 1),
        apply3(g, "inc_take", x2, i2, y2, &axm1, 1),
        apply3(g, "inc_take", x2, i3, tg_literal_int(g, 1), NULL, 0),
        apply3(g, "inc_take", x, ie, tg_literal_float(g, 5.0), NULL, 0),
        apply3(g, "set_take", x2, ie, y2, &ax1, 1),
    };
    tg_tensor *in[] = {
        mk_arange(TG_DT_F64, SHAPE(5)),
        mk_tensor(TG_DT_I64, SHAPE(4), VALS(0, 2, 0, -1)),
        mk_tensor(TG_DT_F64, SHAPE(4), VALS(10, 20, 30, 40)),
        mk_arange(TG_DT_F32, SHAPE(2, 4)),
        mk_tensor(TG_DT_I32, SHAPE(3), VALS(3, -1, 0)),
        mk_tensor(TG_DT_F32, SHAPE(2, 1), VALS(100, 200)),
        mk_tensor(TG_DT_I16, SHAPE(2, 2), VALS(1, 1, 0, 1)),
        mk_tensor(TG_DT_I64, SHAPE(0), VALS(0)),
    };
    tg_tensor *res[7];
    run_ok(g, outs, 7, in, 8, res);
    /* a = np.arange(5.); np.add.at(a, [0,2,0,-1], 1.0): repeated indices accumulate */
    CHECK_T(res[0], TG_DT_F64, SHAPE(5), VALS(2, 1, 3, 3, 5));
    /* a[[0,2,0,-1]] = [10,20,30,40]: the last write wins */
    CHECK_T(res[1], TG_DT_F64, SHAPE(5), VALS(30, 1, 20, 3, 40));
    /* a = np.arange(8, dtype=np.float32).reshape(2,4); a[:, [3,-1,0]] = [[100],[200]] */
    CHECK_T(res[2], TG_DT_F32, SHAPE(2, 4), VALS(100, 1, 2, 100, 200, 5, 6, 200));
    /* np.add.at(a, (slice(None), [3,-1,0]), [[100],[200]]) */
    CHECK_T(res[3], TG_DT_F32, SHAPE(2, 4), VALS(100, 1, 2, 203, 204, 5, 6, 407));
    /* np.add.at(a, ([[1,1],[0,1]],), 1) */
    CHECK_T(res[4], TG_DT_F32, SHAPE(2, 4), VALS(1, 2, 3, 4, 7, 8, 9, 10));
    /* empty index arrays change nothing */
    CHECK_T(res[5], TG_DT_F64, SHAPE(5), VALS(0, 1, 2, 3, 4));
    CHECK_T(res[6], TG_DT_F32, SHAPE(2, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7));
    CHECK_T(in[0], TG_DT_F64, SHAPE(5), VALS(0, 1, 2, 3, 4));
    free_all(res, 7);
    free_all(in, 8);
    tg_graph_free(g);
}

static void test_take_assign_flat_and_ints(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_I32, SHAPE(2, 3));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(2));
    tg_var *y = input(g, "y", TG_DT_I32, SHAPE(2));
    tg_var *b = input(g, "b", TG_DT_I8, SHAPE(2));
    tg_var *j = input(g, "j", TG_DT_U8, SHAPE(2));
    tg_var *w = input(g, "w", TG_DT_I16, SHAPE(2));
    tg_attr axn = TG_A_NONE("axis");
    tg_var *outs[] = {
        apply3(g, "set_take", x, i, y, &axn, 1),
        apply3(g, "inc_take", b, j, w, NULL, 0),
    };
    assert_int_equal(tg_var_dtype(outs[1]), TG_DT_I8);
    tg_tensor *in[] = {
        mk_arange(TG_DT_I32, SHAPE(2, 3)),          mk_tensor(TG_DT_I64, SHAPE(2), VALS(-1, 0)),
        mk_tensor(TG_DT_I32, SHAPE(2), VALS(7, 8)), mk_tensor(TG_DT_I8, SHAPE(2), VALS(120, 0)),
        mk_tensor(TG_DT_U8, SHAPE(2), VALS(0, 0)),  mk_tensor(TG_DT_I16, SHAPE(2), VALS(5, 5)),
    };
    tg_tensor *res[2];
    run_ok(g, outs, 2, in, 6, res);
    /* a = np.arange(6, dtype=np.int32).reshape(2,3); np.put(a, [-1,0], [7,8]) */
    CHECK_T(res[0], TG_DT_I32, SHAPE(2, 3), VALS(8, 1, 2, 3, 4, 7));
    /* b = np.array([120,0], np.int8); np.add.at(b, [0,0], np.array([5,5], np.int16)) */
    CHECK_T(res[1], TG_DT_I8, SHAPE(2), VALS(-126, 0));
    free_all(res, 2);
    free_all(in, 6);
    tg_graph_free(g);
}

static void test_take_assign_errors(void **state) {
    (void)state;
    tg_attr ax2 = TG_A_INT("axis", 2);
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(2, 4));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(3));
    tg_var *y = input(g, "y", TG_DT_F32, SHAPE(2));
    expect_build_error(g, apply3(g, "set_take", x, i, y, NULL, 0), TG_ESHAPE,
                       "set_take: cannot broadcast y f32[2] into the selected shape [3,4]");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 4));
    i = input(g, "i", TG_DT_I64, SHAPE(3));
    expect_build_error(g, apply3(g, "inc_take", x, i, tg_literal_int(g, 1), &ax2, 1), TG_EINVAL,
                       "axis 2 is out of bounds");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 4));
    i = input(g, "i", TG_DT_F64, SHAPE(3));
    expect_build_error(g, apply3(g, "set_take", x, i, tg_literal_int(g, 1), NULL, 0), TG_ETYPE,
                       "indices must be integers");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_BOOL, SHAPE(4));
    i = input(g, "i", TG_DT_I64, SHAPE(3));
    expect_build_error(g, apply3(g, "inc_take", x, i, tg_literal_int(g, 1), NULL, 0), TG_ETYPE,
                       "cannot add i64 literal into bool");
    tg_graph_free(g);

    /* run time: out of range, for both forms */
    for (int c = 0; c < 2; c++) {
        g = tg_graph_new(NULL, "f");
        x = input(g, "x", TG_DT_I64, SHAPE(5));
        i = input(g, "i", TG_DT_I64, SHAPE(2));
        tg_var *out = apply3(g, c ? "inc_take" : "set_take", x, i, tg_literal_int(g, 1), NULL, 0);
        tg_tensor *in[] = {mk_arange(TG_DT_I64, SHAPE(5)),
                           mk_tensor(TG_DT_I64, SHAPE(2), VALS(1, c ? -6 : 5))};
        run_fail(g, out, in, 2, TG_EINDEX, c ? "inc_take" : "set_take",
                 c ? "index -6 is out of bounds for axis 0 with size 5"
                   : "index 5 is out of bounds for axis 0 with size 5");
        free_all(in, 2);
        tg_graph_free(g);
    }
}

/* ---- mask_select ---- */

static void test_mask_select(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_I64, SHAPE(2, 3));
    tg_var *m = input(g, "m", TG_DT_BOOL, SHAPE(2, 3));
    tg_var *r = input(g, "r", TG_DT_BOOL, SHAPE(2));
    tg_var *f = input(g, "f", TG_DT_BOOL, SHAPE(2));
    tg_var *t = input(g, "t", TG_DT_BOOL, SHAPE(2, 3));
    tg_var *outs[] = {
        apply2(g, "mask_select", x, m, NULL, 0),
        apply2(g, "mask_select", x, r, NULL, 0),
        apply2(g, "mask_select", x, f, NULL, 0),
        apply2(g, "mask_select", x, t, NULL, 0),
        apply2(g, "mask_select", x, tg_literal_bool(g, true), NULL, 0),
    };
    assert_int_equal(tg_var_ndim(outs[0]), 1);
    assert_int_equal(tg_var_dim(outs[0], 0), -1);
    assert_int_equal(tg_var_ndim(outs[1]), 2);
    assert_int_equal(tg_var_dim(outs[1], 1), 3);
    assert_int_equal(tg_var_ndim(outs[4]), 3);
    tg_tensor *base = mk_arange(TG_DT_I64, SHAPE(2, 3));
    tg_tensor *in[] = {
        mk_reversed(base), /* x[::-1, ::-1] = [[5,4,3],[2,1,0]] */
        mk_tensor(TG_DT_BOOL, SHAPE(2, 3), VALS(1, 0, 1, 0, 1, 1)),
        mk_tensor(TG_DT_BOOL, SHAPE(2), VALS(0, 1)),
        mk_tensor(TG_DT_BOOL, SHAPE(2), VALS(0, 0)),
        mk_tensor(TG_DT_BOOL, SHAPE(2, 3), VALS(1, 1, 1, 1, 1, 1)),
    };
    tg_tensor *res[5];
    run_ok(g, outs, 5, in, 5, res);
    /* x = np.arange(6).reshape(2,3)[::-1, ::-1]; x[[[T,F,T],[F,T,T]]] */
    CHECK_T(res[0], TG_DT_I64, SHAPE(4), VALS(5, 3, 1, 0));
    /* x[[False, True]] */
    CHECK_T(res[1], TG_DT_I64, SHAPE(1, 3), VALS(2, 1, 0));
    /* x[[False, False]]: all false */
    CHECK_T(res[2], TG_DT_I64, SHAPE(0, 3), VALS(0));
    /* x[np.ones((2,3), bool)]: all true */
    CHECK_T(res[3], TG_DT_I64, SHAPE(6), VALS(5, 4, 3, 2, 1, 0));
    /* x[True] */
    CHECK_T(res[4], TG_DT_I64, SHAPE(1, 2, 3), VALS(5, 4, 3, 2, 1, 0));
    free_all(res, 5);
    free_all(in, 5);
    tg_tensor_free(base);
    tg_graph_free(g);
}

static void test_mask_select_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    tg_var *m = input(g, "m", TG_DT_I64, SHAPE(2));
    expect_build_error(g, apply2(g, "mask_select", x, m, NULL, 0), TG_ETYPE,
                       "mask_select: mask must be bool, got i64[2]");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    m = input(g, "m", TG_DT_BOOL, SHAPE(3));
    expect_build_error(g, apply2(g, "mask_select", x, m, NULL, 0), TG_EINDEX,
                       "boolean index did not match indexed array along dimension 0; "
                       "dimension is 2 but corresponding boolean dimension is 3");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2));
    m = input(g, "m", TG_DT_BOOL, SHAPE(2, 1));
    expect_build_error(g, apply2(g, "mask_select", x, m, NULL, 0), TG_EINDEX, "too many indices");
    tg_graph_free(g);

    /* run time: '?' extents that disagree */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(-1, 3));
    m = input(g, "m", TG_DT_BOOL, SHAPE(-1));
    tg_var *out = apply2(g, "mask_select", x, m, NULL, 0);
    tg_tensor *in[] = {mk_arange(TG_DT_F32, SHAPE(2, 3)),
                       mk_tensor(TG_DT_BOOL, SHAPE(3), VALS(1, 0, 1))};
    run_fail(g, out, in, 2, TG_EINDEX, "mask_select",
             "dimension is 2 but corresponding boolean dimension is 3");
    free_all(in, 2);
    tg_graph_free(g);
}

/* Clone re-runs promotion and inference from the normalized attributes. */
/* ---- index, set_index, inc_index and tg_index_apply / tg_index_update ---- */

#define ARR(v)   ((tg_index){.array = (v)})
#define INT_(i)  ((tg_index){.slice = {.start = (i), .is_index = true}})
#define ALL_     ((tg_index){.slice = {.omit = TG_SLICE_OMIT_ALL}})
#define FROM_(a) ((tg_index){.slice = {.start = (a), .omit = TG_SLICE_NO_STOP | TG_SLICE_NO_STEP}})

static void test_index_values(void **state) {
    (void)state;
    /* x = np.arange(24).reshape(2, 3, 4); r = [1, -1, 0]; c = [[2], [0]] */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_I32, SHAPE(2, 3, 4));
    tg_var *r = input(g, "r", TG_DT_I64, SHAPE(3));
    tg_var *c = input(g, "c", TG_DT_I8, SHAPE(2, 1));
    tg_var *outs[5] = {
        tg_index_apply(g, x, (tg_index[]){ARR(r), ARR(c)}, 2),        /* x[r, c]: (2, 3, 4) */
        tg_index_apply(g, x, (tg_index[]){ARR(r), ALL_, ARR(c)}, 3),  /* x[r, :, c]: (2, 3, 3) */
        tg_index_apply(g, x, (tg_index[]){ALL_, INT_(1), ARR(r)}, 3), /* x[:, 1, r]: (2, 3) */
        tg_index_apply(g, x, (tg_index[]){INT_(-1), FROM_(1), ARR(r)},
                       3), /* x[-1, 1:, r]: (3, 2) */
        tg_index_update(g, x, (tg_index[]){ARR(r), ARR(c)}, 2, tg_literal_int(g, 100), true),
    };
    const int64_t want_nd[4] = {3, 3, 2, 2};
    const int64_t want_shape[4][3] = {{2, 3, 4}, {2, 3, 3}, {2, 3}, {3, 2}};
    for (int k = 0; k < 4; k++) {
        assert_non_null(outs[k]);
        assert_int_equal(tg_var_ndim(outs[k]), want_nd[k]);
        for (int d = 0; d < want_nd[k]; d++)
            assert_int_equal(tg_var_dim(outs[k], d), want_shape[k][d]);
    }
    tg_tensor *in[] = {mk_arange(TG_DT_I32, SHAPE(2, 3, 4)),
                       mk_tensor(TG_DT_I64, SHAPE(3), VALS(1, -1, 0)),
                       mk_tensor(TG_DT_I8, SHAPE(2, 1), VALS(2, 0))};
    tg_tensor *res[5] = {NULL};
    run_ok(g, outs, 5, in, 3, res);
    /* x[r, c] */
    check_tensor(res[0], TG_DT_I32, SHAPE(2, 3, 4),
                 VALS(20, 21, 22, 23, 20, 21, 22, 23, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15,
                      0, 1, 2, 3),
                 0);
    /* x[r, :, c] */
    check_tensor(res[1], TG_DT_I32, SHAPE(2, 3, 3),
                 VALS(14, 18, 22, 14, 18, 22, 2, 6, 10, 12, 16, 20, 12, 16, 20, 0, 4, 8), 0);
    check_tensor(res[2], TG_DT_I32, SHAPE(2, 3), VALS(5, 7, 4, 17, 19, 16), 0); /* x[:, 1, r] */
    check_tensor(res[3], TG_DT_I32, SHAPE(3, 2), VALS(17, 21, 19, 23, 16, 20),
                 0); /* x[-1, 1:, r] */
    /* np.add.at(x, (r, c), 100): (1, 2) and (1, 0) twice each (r = -1 is row 1), (0, 2) and
     * (0, 0) once */
    check_tensor(res[4], TG_DT_I32, SHAPE(2, 3, 4),
                 VALS(100, 101, 102, 103, 4, 5, 6, 7, 108, 109, 110, 111, 212, 213, 214, 215, 16,
                      17, 18, 19, 220, 221, 222, 223),
                 0);
    free_all(in, 3);
    free_all(res, 5);
    tg_graph_free(g);
}

#define NEW_ ((tg_index){.slice = {.omit = TG_INDEX_NEWAXIS}})
#define ELL_ ((tg_index){.slice = {.omit = TG_INDEX_ELLIPSIS}})

/* None and ... among the items, as NumPy takes them (x = np.arange(24).reshape(2, 3, 4),
 * r = [1, 0]); an update through a new axis leaves x's shape. */
static void test_index_newaxis_ellipsis(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_I32, SHAPE(2, 3, 4));
    tg_var *r = input(g, "r", TG_DT_I64, SHAPE(2));
    tg_var *outs[5] = {
        tg_index_apply(g, x, (tg_index[]){ELL_, INT_(1)}, 2),         /* x[..., 1]: (2, 3) */
        tg_index_apply(g, x, (tg_index[]){NEW_, INT_(1)}, 2),         /* x[None, 1]: (1, 3, 4) */
        tg_index_apply(g, x, (tg_index[]){ARR(r), ELL_, INT_(2)}, 3), /* x[r, ..., 2]: (2, 3) */
        tg_index_apply(g, x, (tg_index[]){ALL_, NEW_, ARR(r)}, 3),    /* x[:, None, r] */
        tg_index_update(g, x, (tg_index[]){NEW_, INT_(0), FROM_(2)}, 3, tg_literal_int(g, -1),
                        false), /* x[None, 0, 2:] = -1 */
    };
    const int64_t want_nd[5] = {2, 3, 2, 4, 3};
    const int64_t want_shape[5][4] = {{2, 3}, {1, 3, 4}, {2, 3}, {2, 1, 2, 4}, {2, 3, 4}};
    for (int k = 0; k < 5; k++) {
        assert_non_null(outs[k]);
        assert_int_equal(tg_var_ndim(outs[k]), want_nd[k]);
        for (int d = 0; d < want_nd[k]; d++)
            assert_int_equal(tg_var_dim(outs[k], d), want_shape[k][d]);
    }
    tg_tensor *in[] = {mk_arange(TG_DT_I32, SHAPE(2, 3, 4)),
                       mk_tensor(TG_DT_I64, SHAPE(2), VALS(1, 0))};
    tg_tensor *res[5] = {NULL};
    run_ok(g, outs, 5, in, 2, res);
    check_tensor(res[0], TG_DT_I32, SHAPE(2, 3), VALS(1, 5, 9, 13, 17, 21), 0);
    check_tensor(res[1], TG_DT_I32, SHAPE(1, 3, 4),
                 VALS(12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23), 0);
    check_tensor(res[2], TG_DT_I32, SHAPE(2, 3), VALS(14, 18, 22, 2, 6, 10), 0);
    check_tensor(res[3], TG_DT_I32, SHAPE(2, 1, 2, 4),
                 VALS(4, 5, 6, 7, 0, 1, 2, 3, 16, 17, 18, 19, 12, 13, 14, 15), 0);
    check_tensor(res[4], TG_DT_I32, SHAPE(2, 3, 4),
                 VALS(0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                      21, 22, 23),
                 0);
    free_all(in, 2);
    free_all(res, 5);
    /* two ellipses; a new axis given to tg_slice_apply */
    assert_null(tg_index_apply(g, x, (tg_index[]){ELL_, ELL_}, 2));
    assert_non_null(strstr(tg_last_error(), "a single ellipsis"));
    tg_graph_free(g);
    /* x[:, r, ..., r] on a 3-d x: the '...' stands for no axes, and NumPy still counts the
       arrays as separated (their axes first): refused rather than placed in between */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(2, 3, 4));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    assert_null(tg_index_apply(g, x, (tg_index[]){ALL_, ARR(r), ELL_, ARR(r)}, 4));
    assert_non_null(strstr(tg_last_error(), "stands for no axes between index arrays"));
    tg_graph_free(g);
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(2, 3, 4));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    assert_non_null(tg_index_apply(g, x, (tg_index[]){ARR(r), ALL_, ARR(r), ELL_}, 4));
    tg_graph_free(g);
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(2, 3));
    assert_null(tg_slice_apply(g, x, (tg_slice[]){{.omit = TG_INDEX_NEWAXIS}}, 1));
    assert_non_null(strstr(tg_last_error(), "only tg_index_apply takes"));
    tg_graph_free(g);
}

static void test_index_errors(void **state) {
    (void)state;
    /* run time: each index is checked against its own axis, never wrapped into the next row */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    tg_var *r = input(g, "r", TG_DT_I64, SHAPE(2));
    tg_var *c = input(g, "c", TG_DT_I64, SHAPE(2));
    tg_var *y =
        tg_index_update(g, x, (tg_index[]){ARR(r), ARR(c)}, 2, tg_literal_float(g, 1.0), false);
    tg_tensor *in[] = {mk_arange(TG_DT_F32, SHAPE(2, 3)),
                       mk_tensor(TG_DT_I64, SHAPE(2), VALS(0, 1)),
                       mk_tensor(TG_DT_I64, SHAPE(2), VALS(1, 3))};
    run_fail(g, y, in, 3, TG_EINDEX, "set_index",
             "index 3 is out of bounds for axis 1 with size 3");
    free_all(in, 3);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    c = input(g, "c", TG_DT_I64, SHAPE(-1));
    y = tg_index_apply(g, x, (tg_index[]){ARR(r), ARR(c)}, 2);
    tg_tensor *in2[] = {mk_arange(TG_DT_F32, SHAPE(2, 3)),
                        mk_tensor(TG_DT_I64, SHAPE(2), VALS(0, 1)),
                        mk_tensor(TG_DT_I64, SHAPE(3), VALS(0, 1, 2))};
    run_fail(g, y, in2, 3, TG_EINDEX, "index", "indexing arrays could not be broadcast together");
    free_all(in2, 3);
    tg_graph_free(g);

    /* static errors */
    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    y = tg_index_apply(g, x, (tg_index[]){ARR(r), ALL_, INT_(0)}, 3);
    expect_build_error(g, y, TG_EINDEX,
                       "too many indices for array: array is 2-dimensional, but 3 were indexed");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    tg_var *m = input(g, "m", TG_DT_BOOL, SHAPE(4));
    y = tg_index_apply(g, x, (tg_index[]){ALL_, ARR(m)}, 2);
    expect_build_error(g, y, TG_EINDEX,
                       "boolean index did not match indexed array along dimension 1; dimension "
                       "is 3 but corresponding boolean dimension is 4");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    y = tg_apply(g, "index", (tg_var *[]){x, r, r}, 3, &TG_A_INTS("axes", ((int64_t[]){1, 0}), 2),
                 1);
    expect_build_error(g, y, TG_EINVAL, "index: axes must be increasing, got 0 after 1");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_F32, SHAPE(2, 3));
    r = input(g, "r", TG_DT_F32, SHAPE(2));
    y = tg_apply(g, "index", (tg_var *[]){x, r}, 2, &TG_A_INTS("axes", ((int64_t[]){0}), 1), 1);
    expect_build_error(g, y, TG_ETYPE, "indices must be integers, got f32[2]");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    x = input(g, "x", TG_DT_I32, SHAPE(2, 3));
    r = input(g, "r", TG_DT_I64, SHAPE(2));
    y = tg_index_update(g, x, (tg_index[]){ARR(r), ARR(r)}, 2, tg_literal_float(g, 0.5), true);
    expect_build_error(g, y, TG_ETYPE, "cannot add f64 literal into i32 without a cast");
    tg_graph_free(g);
}

static void test_clone(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = input(g, "x", TG_DT_I32, SHAPE(4));
    tg_var *i = input(g, "i", TG_DT_I64, SHAPE(2));
    tg_attr rev[] = {TG_A_INTS("steps", ((int64_t[]){-1}), 1)};
    tg_var *a = apply2(g, "inc_subtensor", x, tg_literal_int(g, 1), rev, 1);
    tg_var *b = apply3(g, "set_take", a, i, tg_literal_int(g, -5), NULL, 0);
    tg_var *c = apply2(g, "take", b, i, NULL, 0);
    assert_non_null(c);
    assert_int_equal(tg_graph_set_outputs(g, &c, 1), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph *cl = tg_graph_clone(g);
    if (!cl) print_error("clone: %s\n", tg_last_error());
    assert_non_null(cl);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(cl, NULL, &f), TG_OK);
    tg_tensor *in[] = {mk_arange(TG_DT_I32, SHAPE(4)), mk_tensor(TG_DT_I64, SHAPE(2), VALS(3, 1))};
    tg_tensor *res = NULL;
    assert_int_equal(tg_fn_call(f, in, 2, &res, 1), TG_OK);
    /* a = np.arange(4, dtype=np.int32) + 1; a[[3, 1]] = -5; a.take([3, 1]) */
    CHECK_T(res, TG_DT_I32, SHAPE(2), VALS(-5, -5));
    tg_tensor_free(res);
    free_all(in, 2);
    tg_fn_free(f);
    tg_graph_free(cl);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_values),
        cmocka_unit_test(test_take_negative_strides_and_unknown),
        cmocka_unit_test(test_take_out_of_range),
        cmocka_unit_test(test_take_type_errors),
        cmocka_unit_test(test_take_along),
        cmocka_unit_test(test_take_along_errors),
        cmocka_unit_test(test_subtensor_values),
        cmocka_unit_test(test_subtensor_dtypes),
        cmocka_unit_test(test_subtensor_errors),
        cmocka_unit_test(test_take_assign_values),
        cmocka_unit_test(test_take_assign_flat_and_ints),
        cmocka_unit_test(test_take_assign_errors),
        cmocka_unit_test(test_mask_select),
        cmocka_unit_test(test_mask_select_errors),
        cmocka_unit_test(test_index_values),
        cmocka_unit_test(test_index_newaxis_ellipsis),
        cmocka_unit_test(test_index_errors),
        cmocka_unit_test(test_clone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
