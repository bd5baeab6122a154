/* test_linalg.c - dot, matmul and outer: dtype promotion, static and run-time inference
 * (NumPy's shape rules, '?', alignment and batch errors) and the reference kernels on
 * small cases, including negative-stride inputs, integer wrap-around, bool, and an empty
 * contraction. Expected values are hand-checked and confirmed with NumPy 1.24.
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

static tg_tensor *run2(const tg_op_def *op, tg_tensor *a, tg_tensor *b) {
    tg_tensor *in[2] = {a, b};
    run_res r = run_op(op, in, 2, NULL);
    if (r.st != TG_OK) print_error("%s: %s\n", op->name, r.msg);
    assert_int_equal(r.st, TG_OK);
    return r.out;
}

static void test_promote(void **state) {
    (void)state;
    const tg_op_def *ops[3] = {&tg_op_dot, &tg_op_matmul, &tg_op_outer};
    for (int i = 0; i < 3; i++) {
        tg_type in[2] = {TY(TG_DT_I32, 3), TY(F32, 3)};
        tg_dtype want[2] = {TG_DT_I32, F32};
        tg_type outs[TG_MAX_OUTS];
        tg_infer ic = {.op = ops[i], .in = in, .nin = 2, .out = outs, .nout = 1};
        assert_non_null(ops[i]->promote);
        assert_int_equal(ops[i]->promote(&ic, want), TG_OK);
        assert_int_equal(want[0], F64); /* NumPy: i32 with f32 is f64 */
        assert_int_equal(want[1], F64);
        in[0] = TY0(I64);
        in[0].weak = 1; /* a weak literal adopts f32 */
        want[0] = I64;
        want[1] = F32;
        assert_int_equal(ops[i]->promote(&ic, want), TG_OK);
        assert_int_equal(want[0], F32);
        assert_int_equal(want[1], F32);
    }
}

static void test_dot_infer(void **state) {
    (void)state;
    CHECK_INFER(tg_op_dot, NULL, "f32[3]", TY(F32, 3, 4), TY(F32, 4));
    CHECK_INFER(tg_op_dot, NULL, "f32[3,5]", TY(F32, 3, 4), TY(F32, 4, 5));
    CHECK_INFER(tg_op_dot, NULL, "f32[5]", TY(F32, 4), TY(F32, 4, 5));
    CHECK_INFER(tg_op_dot, NULL, "f32[]", TY(F32, 4), TY(F32, 4));
    CHECK_INFER(tg_op_dot, NULL, "f32[2,3,5,6]", TY(F32, 2, 3, 4), TY(F32, 5, 4, 6));
    CHECK_INFER(tg_op_dot, NULL, "f32[?]", TY(F32, -1, 4), TY(F32, -1));
    CHECK_INFER(tg_op_dot, NULL, "f64[?,7]", TY(F64, -1, -1), TY(F64, 3, 7));
    CHECK_INFER(tg_op_dot, NULL, "f32[3]", TY0(F32), TY(F32, 3)); /* a scalar multiplies */
    CHECK_INFER(tg_op_dot, NULL, "f32[2,3]", TY(F32, 2, 3), TY0(F32));
    CHECK_INFER(tg_op_dot, NULL, "bool[2]", TY(TG_DT_BOOL, 2, 2), TY(TG_DT_BOOL, 2));
    CHECK_INFER_FAIL(tg_op_dot, NULL, TG_ESHAPE, "f32[3,4] and f32[5] do not align (4 != 5)",
                     TY(F32, 3, 4), TY(F32, 5));
    CHECK_INFER_FAIL(tg_op_dot, NULL, TG_ESHAPE, "f32[3,4] and f32[3,4] do not align (4 != 3)",
                     TY(F32, 3, 4), TY(F32, 3, 4));
    CHECK_INFER_FAIL(tg_op_dot, NULL, TG_ELIMIT, "at most", TY(F32, 1, 1, 1, 1, 1, 2),
                     TY(F32, 1, 1, 1, 1, 2, 1));
    /* '?' checked with the concrete extents */
    tg_type rt[2] = {TY(F32, 3, 4), TY(F32, 5)};
    infer_res r = infer_op(&tg_op_dot, rt, 2, NULL, true);
    assert_int_equal(r.st, TG_ESHAPE);
}

static void test_matmul_infer(void **state) {
    (void)state;
    CHECK_INFER(tg_op_matmul, NULL, "f32[2,3,5]", TY(F32, 2, 3, 4), TY(F32, 4, 5));
    CHECK_INFER(tg_op_matmul, NULL, "f32[2,5]", TY(F32, 4), TY(F32, 2, 4, 5));
    CHECK_INFER(tg_op_matmul, NULL, "f32[2,3]", TY(F32, 2, 3, 4), TY(F32, 4));
    CHECK_INFER(tg_op_matmul, NULL, "f32[]", TY(F32, 4), TY(F32, 4));
    CHECK_INFER(tg_op_matmul, NULL, "f32[2,5,3,6]", TY(F32, 2, 1, 3, 4), TY(F32, 5, 4, 6));
    CHECK_INFER(tg_op_matmul, NULL, "f32[?,3,6]", TY(F32, -1, 3, 4), TY(F32, 1, 4, 6));
    CHECK_INFER(tg_op_matmul, NULL, "f32[7,?,6]", TY(F32, -1, -1, -1), TY(F32, 7, 4, 6));
    CHECK_INFER_FAIL(tg_op_matmul, NULL, TG_ESHAPE, "f32[2,3,4] and f32[5,4] do not align (4 != 5)",
                     TY(F32, 2, 3, 4), TY(F32, 5, 4));
    CHECK_INFER_FAIL(tg_op_matmul, NULL, TG_ESHAPE, "(4 != 5)", TY(F32, 3, 4), TY(F32, 5));
    CHECK_INFER_FAIL(tg_op_matmul, NULL, TG_ESHAPE, "batch axes do not broadcast", TY(F32, 2, 3, 4),
                     TY(F32, 3, 4, 5));
    CHECK_INFER_FAIL(tg_op_matmul, NULL, TG_ESHAPE, "input operand 0 (f32[])", TY0(F32),
                     TY(F32, 3));
    CHECK_INFER_FAIL(tg_op_matmul, NULL, TG_ESHAPE, "input operand 1", TY(F32, 3), TY0(F32));
}

static void test_outer_infer(void **state) {
    (void)state;
    CHECK_INFER(tg_op_outer, NULL, "f32[3,4]", TY(F32, 3), TY(F32, 4));
    CHECK_INFER(tg_op_outer, NULL, "f32[6,1]", TY(F32, 2, 3), TY0(F32));
    CHECK_INFER(tg_op_outer, NULL, "f32[?,0]", TY(F32, 2, -1), TY(F32, 5, 0));
    CHECK_INFER(tg_op_outer, NULL, "f32[0,?]", TY(F32, 0, -1), TY(F32, -1));
}

static void test_dot_values(void **state) {
    (void)state;
    tg_tensor *a = mk_arange(F64, SHAPE(2, 3)), *b = mk_arange(F64, SHAPE(3, 4));
    tg_tensor *y = run2(&tg_op_dot, a, b);
    CHECK_T(y, F64, SHAPE(2, 4), VALS(20, 23, 26, 29, 56, 68, 80, 92));
    tg_tensor_free(y);
    /* reversed (negative strides) [[5,4,3],[2,1,0]] . [1,2,3] = [22, 4] */
    tg_tensor *ar = mk_reversed(a), *v = mk_tensor(F64, SHAPE(3), VALS(1, 2, 3));
    y = run2(&tg_op_dot, ar, v);
    CHECK_T(y, F64, SHAPE(2), VALS(22, 4));
    tg_tensor_free(y);
    y = run2(&tg_op_dot, v, b); /* 1-D . 2-D */
    CHECK_T(y, F64, SHAPE(4), VALS(32, 38, 44, 50));
    tg_tensor_free(y);
    tg_tensor *v2 = mk_tensor(F64, SHAPE(3), VALS(4, 5, 6));
    y = run2(&tg_op_dot, v, v2); /* 1-D . 1-D */
    CHECK_T(y, F64, SHAPE0, VALS(32));
    tg_tensor_free(y);
    tg_tensor_free(v2);
    tg_tensor_free(v);
    tg_tensor_free(ar);
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* N-D . 2-D and N-D . M-D (np.dot(arange(24).reshape(2,3,4), arange(8).reshape(4,2))) */
    tg_tensor *w = mk_arange(F64, SHAPE(2, 3, 4)), *m = mk_arange(F64, SHAPE(4, 2));
    y = run2(&tg_op_dot, w, m);
    CHECK_T(y, F64, SHAPE(2, 3, 2), VALS(28, 34, 76, 98, 124, 162, 172, 226, 220, 290, 268, 354));
    tg_tensor_free(y);
    tg_tensor_free(w);
    tg_tensor_free(m);
    tg_tensor *A = mk_arange(F64, SHAPE(2, 3, 2)), *B = mk_arange(F64, SHAPE(2, 2, 2));
    y = run2(&tg_op_dot, A, B);
    CHECK_T(y, F64, SHAPE(2, 3, 2, 2),
            VALS(2, 3, 6, 7, 6, 11, 26, 31, 10, 19, 46, 55, 14, 27, 66, 79, 18, 35, 86, 103, 22, 43,
                 106, 127));
    tg_tensor_free(y);
    tg_tensor_free(A);
    tg_tensor_free(B);
    /* a 0-d operand multiplies: dot(2, [0,1,2]) = [0,2,4] */
    tg_tensor *s = mk_tensor(F32, SHAPE0, VALS(2)), *r3 = mk_arange(F32, SHAPE(3));
    y = run2(&tg_op_dot, s, r3);
    CHECK_T(y, F32, SHAPE(3), VALS(0, 2, 4));
    tg_tensor_free(y);
    y = run2(&tg_op_dot, r3, s);
    CHECK_T(y, F32, SHAPE(3), VALS(0, 2, 4));
    tg_tensor_free(y);
    tg_tensor_free(s);
    tg_tensor_free(r3);
    /* an empty contraction gives zeros */
    tg_tensor *e1 = tg_tensor_new(tg_ctx_default(), F32, SHAPE(2, 0));
    tg_tensor *e2 = tg_tensor_new(tg_ctx_default(), F32, SHAPE(0, 3));
    y = run2(&tg_op_dot, e1, e2);
    CHECK_T(y, F32, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
    tg_tensor_free(y);
    y = run2(&tg_op_matmul, e1, e2);
    CHECK_T(y, F32, SHAPE(2, 3), VALS(0, 0, 0, 0, 0, 0));
    tg_tensor_free(y);
    tg_tensor *v3 = mk_arange(F32, SHAPE(3));
    y = run2(&tg_op_dot, e2, v3); /* f32[0,3] . f32[3] -> f32[0] */
    CHECK_T(y, F32, SHAPE(0), NULL);
    tg_tensor_free(y);
    tg_tensor_free(v3);
    tg_tensor_free(e1);
    tg_tensor_free(e2);
}

static void test_int_bool(void **state) {
    (void)state;
    /* integers wrap: np.dot(int8 [100,100], [2,1]) == 44 */
    tg_tensor *a = mk_tensor(TG_DT_I8, SHAPE(2), VALS(100, 100));
    tg_tensor *b = mk_tensor(TG_DT_I8, SHAPE(2), VALS(2, 1));
    tg_tensor *y = run2(&tg_op_dot, a, b);
    CHECK_T(y, TG_DT_I8, SHAPE0, VALS(44));
    tg_tensor_free(y);
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* i64: 2^62 * 2 + 2^62 * 2 = 2^64 == 0 (mod 2^64), as NumPy */
    int64_t p[2] = {INT64_C(1) << 62, INT64_C(1) << 62}, q[2] = {2, 2};
    a = tg_tensor_from_data(tg_ctx_default(), I64, SHAPE(1, 2), p);
    b = tg_tensor_from_data(tg_ctx_default(), I64, SHAPE(2, 1), q);
    y = run2(&tg_op_matmul, a, b);
    CHECK_T(y, I64, SHAPE(1, 1), VALS(0));
    tg_tensor_free(y);
    y = run2(&tg_op_outer, a, b); /* 2^63 wraps to INT64_MIN */
    assert_true(tg_load_i64(tg_tensor_data(y), I64) == INT64_MIN);
    tg_tensor_free(y);
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* bool: or of ands */
    a = mk_tensor(TG_DT_BOOL, SHAPE(2), VALS(1, 0));
    b = mk_tensor(TG_DT_BOOL, SHAPE(2), VALS(0, 1));
    y = run2(&tg_op_dot, a, b);
    CHECK_T(y, TG_DT_BOOL, SHAPE0, VALS(0));
    tg_tensor_free(y);
    tg_tensor *m = mk_tensor(TG_DT_BOOL, SHAPE(2, 2), VALS(1, 0, 0, 0));
    tg_tensor *t = mk_tensor(TG_DT_BOOL, SHAPE(2), VALS(1, 1));
    y = run2(&tg_op_dot, m, t);
    CHECK_T(y, TG_DT_BOOL, SHAPE(2), VALS(1, 0));
    tg_tensor_free(y);
    y = run2(&tg_op_matmul, m, m);
    CHECK_T(y, TG_DT_BOOL, SHAPE(2, 2), VALS(1, 0, 0, 0));
    tg_tensor_free(y);
    y = run2(&tg_op_outer, a, t); /* np.outer([T,F],[T,T]) */
    CHECK_T(y, TG_DT_BOOL, SHAPE(2, 2), VALS(1, 1, 0, 0));
    tg_tensor_free(y);
    tg_tensor_free(m);
    tg_tensor_free(t);
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* f32 rounds once at the end: 2^24 + 1 + 1 is exact in double, 16777218 in f32 */
    a = mk_tensor(F32, SHAPE(3), VALS(16777216, 1, 1));
    b = mk_tensor(F32, SHAPE(3), VALS(1, 1, 1));
    y = run2(&tg_op_dot, a, b);
    CHECK_T(y, F32, SHAPE0, VALS(16777218));
    tg_tensor_free(y);
    tg_tensor_free(a);
    tg_tensor_free(b);
}

static void test_matmul_values(void **state) {
    (void)state;
    /* np.matmul(arange(12).reshape(2,1,2,3), arange(18).reshape(3,3,2)): batch broadcast */
    tg_tensor *a = mk_arange(F64, SHAPE(2, 1, 2, 3)), *b = mk_arange(F64, SHAPE(3, 3, 2));
    tg_tensor *y = run2(&tg_op_matmul, a, b);
    CHECK_T(y, F64, SHAPE(2, 3, 2, 2),
            VALS(10, 13, 28, 40, 28, 31, 100, 112, 46, 49, 172, 184, 46, 67, 64, 94, 172, 193, 244,
                 274, 298, 319, 424, 454));
    tg_tensor_free(y);
    tg_tensor_free(a);
    tg_tensor_free(b);
    /* 1-D operands: the added axis is removed */
    tg_tensor *v = mk_tensor(F64, SHAPE(2), VALS(1, 2)), *c = mk_arange(F64, SHAPE(3, 2, 2));
    y = run2(&tg_op_matmul, v, c);
    CHECK_T(y, F64, SHAPE(3, 2), VALS(4, 7, 16, 19, 28, 31));
    tg_tensor_free(y);
    y = run2(&tg_op_matmul, c, v);
    CHECK_T(y, F64, SHAPE(3, 2), VALS(2, 8, 14, 20, 26, 32));
    tg_tensor_free(y);
    tg_tensor *v2 = mk_tensor(F64, SHAPE(2), VALS(3, 4));
    y = run2(&tg_op_matmul, v, v2);
    CHECK_T(y, F64, SHAPE0, VALS(11));
    tg_tensor_free(y);
    /* reversed operands: rev(c) . rev(v) */
    tg_tensor *cr = mk_reversed(c), *vr = mk_reversed(v); /* vr = [2,1] */
    y = run2(&tg_op_matmul, cr, vr);
    /* cr[0] = [[11,10],[9,8]] -> [32, 26]; cr[1] = [[7,6],[5,4]] -> [20,14];
     * cr[2] = [[3,2],[1,0]] -> [8, 2] */
    CHECK_T(y, F64, SHAPE(3, 2), VALS(32, 26, 20, 14, 8, 2));
    tg_tensor_free(y);
    tg_tensor_free(cr);
    tg_tensor_free(vr);
    tg_tensor_free(v2);
    tg_tensor_free(v);
    tg_tensor_free(c);
    /* mismatched batch at run time */
    tg_tensor *p = mk_arange(F32, SHAPE(2, 2, 2)), *q = mk_arange(F32, SHAPE(3, 2, 2));
    tg_tensor *in[2] = {p, q};
    run_res r = run_op(&tg_op_matmul, in, 2, NULL);
    assert_int_equal(r.st, TG_ESHAPE);
    tg_tensor_free(p);
    tg_tensor_free(q);
}

static void test_outer_values(void **state) {
    (void)state;
    /* np.outer(arange(4).reshape(2,2), [1,-1,2]) */
    tg_tensor *a = mk_arange(I64, SHAPE(2, 2)), *b = mk_tensor(I64, SHAPE(3), VALS(1, -1, 2));
    tg_tensor *y = run2(&tg_op_outer, a, b);
    CHECK_T(y, I64, SHAPE(4, 3), VALS(0, 0, 0, 1, -1, 2, 2, -2, 4, 3, -3, 6));
    tg_tensor_free(y);
    tg_tensor *ar = mk_reversed(a); /* flattened: [3,2,1,0] */
    y = run2(&tg_op_outer, b, ar);
    CHECK_T(y, I64, SHAPE(3, 4), VALS(3, 2, 1, 0, -3, -2, -1, 0, 6, 4, 2, 0));
    tg_tensor_free(y);
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), I64, SHAPE(0));
    y = run2(&tg_op_outer, e, b);
    CHECK_T(y, I64, SHAPE(0, 3), NULL);
    tg_tensor_free(y);
    tg_tensor_free(e);
    tg_tensor_free(ar);
    tg_tensor_free(a);
    tg_tensor_free(b);
}

/* ---- through the public API (graph, builder, reference interpreter) ---- */

static void test_api(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(tg_ctx_default(), "f");
    tg_var *a = tg_input(g, "a", TG_DT_I32, 2, (const int64_t[]){TG_DIM_UNKNOWN, 3});
    tg_var *b = tg_input(g, "b", F32, 1, (const int64_t[]){3});
    tg_var *d = tg_dot(g, a, b); /* i32 with f32: promoted to f64 (cast nodes) */
    tg_var *m = tg_matmul(g, b, tg_transpose(g, a, NULL));
    tg_var *o = tg_outer(g, b, tg_literal_float(g, 0.5)); /* weak literal: stays f32 */
    assert_non_null(d);
    assert_non_null(m);
    assert_non_null(o);
    assert_int_equal(tg_var_dtype(d), F64);
    assert_int_equal(tg_var_dim(d, 0), TG_DIM_UNKNOWN);
    assert_int_equal(tg_var_dtype(o), F32);
    assert_int_equal(tg_var_dim(o, 0), 3);
    assert_int_equal(tg_var_dim(o, 1), 1);
    tg_tensor *av = mk_arange(TG_DT_I32, SHAPE(2, 3));
    tg_tensor *bv = mk_tensor(F32, SHAPE(3), VALS(1, 2, 3));
    tg_tensor *in[2] = {av, bv}, *out[3] = {NULL};
    tg_var *outs[3] = {d, m, o};
    assert_int_equal(call_graph(g, outs, 3, in, 2, out), TG_OK);
    CHECK_T(out[0], F64, SHAPE(2), VALS(8, 26));
    CHECK_T(out[1], F64, SHAPE(2), VALS(8, 26));
    CHECK_T(out[2], F32, SHAPE(3, 1), VALS(0.5, 1, 1.5));
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    tg_tensor_free(av);
    tg_tensor_free(bv);
    /* static alignment error, through the builder */
    tg_var *c = tg_input(g, "c", F32, 1, (const int64_t[]){5});
    tg_var *x = tg_input(g, "x", F32, 2, (const int64_t[]){3, 4});
    assert_null(tg_dot(g, x, c));
    assert_int_equal(tg_graph_status(g), TG_ESHAPE);
    assert_non_null(strstr(tg_graph_error(g), "dot: f32[3,4] and f32[5] do not align (4 != 5)"));
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promote),       cmocka_unit_test(test_dot_infer),
        cmocka_unit_test(test_matmul_infer),  cmocka_unit_test(test_outer_infer),
        cmocka_unit_test(test_dot_values),    cmocka_unit_test(test_int_bool),
        cmocka_unit_test(test_matmul_values), cmocka_unit_test(test_outer_values),
        cmocka_unit_test(test_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
