/* test_shape.c - the shape ops (reshape transpose expand_dims squeeze broadcast_to slice):
 * static and run-time inference ('?', errors with their messages) and the reference
 * kernels, which make views (checked to share the input's buffer) of inputs with any
 * strides, including negative ones and 0-size arrays. The slice table below was computed
 * with NumPy 1.24 (np.arange(5)[start:stop:step] for every combination listed) and pasted
 * as literals; other expected values are hand-checked and confirmed with NumPy 1.24.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_testutil.h"

#include <stdio.h>
#include <stdlib.h>

#define F32 TG_DT_F32
#define I64 TG_DT_I64

static tg_tensor *run_ok(const tg_op_def *op, tg_tensor *x, const tg_aval *attrs) {
    run_res r = run_op(op, &x, 1, attrs);
    if (r.st != TG_OK) print_error("%s: %s\n", op->name, r.msg);
    assert_int_equal(r.st, TG_OK);
    return r.out;
}

static void check_shared(const tg_tensor *y, const tg_tensor *x) {
    assert_ptr_equal(y->buf, x->buf);
}

/* ---- reshape ---- */

static void test_reshape_infer(void **state) {
    (void)state;
    CHECK_INFER(tg_op_reshape, &AV_INTS(3, 2), "f32[3,2]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_reshape, &AV_INTS(-1), "f32[6]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_reshape, &AV_INTS(3, -1, 1), "f32[3,2,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_reshape, &AV_EMPTY, "f32[]", TY(F32, 1, 1));
    CHECK_INFER(tg_op_reshape, &AV_INTS(1, 1), "f32[1,1]", TY0(F32));
    CHECK_INFER(tg_op_reshape, &AV_INTS(-1), "f32[0]", TY(F32, 0, 3));
    CHECK_INFER(tg_op_reshape, &AV_INTS(3, 0), "f32[3,0]", TY(F32, 0, 3));
    /* '?' input: the -1 entry is unknown, the others are static */
    CHECK_INFER(tg_op_reshape, &AV_INTS(-1, 3), "f32[?,3]", TY(F32, -1, 3));
    CHECK_INFER(tg_op_reshape, &AV_INTS(3, 2), "f32[3,2]", TY(F32, -1, 3));
    /* errors */
    CHECK_INFER_FAIL(tg_op_reshape, &AV_INTS(4, -1), TG_ESHAPE,
                     "cannot reshape f32[2,3] (size 6) into shape [4,-1]", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_reshape, &AV_INTS(7), TG_ESHAPE, "into shape [7]", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_reshape, &AV_INTS(0, -1), TG_ESHAPE, "f32[0,3]", TY(F32, 0, 3));
    CHECK_INFER_FAIL(tg_op_reshape, &AV_INTS(-1, -1), TG_EINVAL,
                     "can only specify one unknown dimension", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_reshape, &AV_INTS(-2, 3), TG_EINVAL, "negative dimension -2",
                     TY(F32, 2, 3));
    /* a '?' input is checked when the extents are known */
    tg_type rt = TY(F32, 2, 3);
    infer_res r = infer_op(&tg_op_reshape, &rt, 1, &AV_INTS(4, -1), true);
    assert_int_equal(r.st, TG_ESHAPE);
}

static void test_reshape_values(void **state) {
    (void)state;
    tg_tensor *x = mk_arange(F32, SHAPE(2, 3));
    tg_tensor *y = run_ok(&tg_op_reshape, x, &AV_INTS(3, -1));
    CHECK_T(y, F32, SHAPE(3, 2), VALS(0, 1, 2, 3, 4, 5));
    check_shared(y, x); /* contiguous input: a view */
    tg_tensor_free(y);
    /* a reversed (negative-stride) input is copied first */
    tg_tensor *rev = mk_reversed(x);
    y = run_ok(&tg_op_reshape, rev, &AV_INTS(-1));
    CHECK_T(y, F32, SHAPE(6), VALS(5, 4, 3, 2, 1, 0));
    assert_ptr_not_equal(y->buf, x->buf);
    tg_tensor_free(y);
    /* transposed input */
    tg_tensor *t = tg_tensor_view(x, 2, (const int64_t[]){3, 2}, (const int64_t[]){1, 3}, 0);
    y = run_ok(&tg_op_reshape, t, &AV_INTS(2, 3));
    CHECK_T(y, F32, SHAPE(2, 3), VALS(0, 3, 1, 4, 2, 5));
    tg_tensor_free(y);
    tg_tensor_free(t);
    tg_tensor_free(rev);
    tg_tensor_free(x);
    /* 0-size and 0-d */
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), F32, SHAPE(0, 3));
    y = run_ok(&tg_op_reshape, e, &AV_INTS(3, 0, 2));
    CHECK_T(y, F32, SHAPE(3, 0, 2), NULL);
    tg_tensor_free(y);
    tg_tensor_free(e);
    tg_tensor *s = mk_tensor(F32, SHAPE0, VALS(7));
    y = run_ok(&tg_op_reshape, s, &AV_INTS(1, -1, 1));
    CHECK_T(y, F32, SHAPE(1, 1, 1), VALS(7));
    tg_tensor_free(y);
    tg_tensor_free(s);
}

/* ---- transpose ---- */

static void test_transpose(void **state) {
    (void)state;
    CHECK_INFER(tg_op_transpose, &AV_NONE, "f32[4,3,2]", TY(F32, 2, 3, 4));
    CHECK_INFER(tg_op_transpose, &AV_INTS(1, 0, 2), "f32[3,2,4]", TY(F32, 2, 3, 4));
    CHECK_INFER(tg_op_transpose, &AV_INTS(-1, 0, 1), "f32[4,2,3]", TY(F32, 2, 3, 4));
    CHECK_INFER(tg_op_transpose, &AV_NONE, "f32[3,?]", TY(F32, -1, 3));
    CHECK_INFER(tg_op_transpose, &AV_NONE, "f32[]", TY0(F32));
    CHECK_INFER_FAIL(tg_op_transpose, &AV_INTS(0, 0, 1), TG_EINVAL, "not a permutation",
                     TY(F32, 2, 3, 4));
    CHECK_INFER_FAIL(tg_op_transpose, &AV_INTS(0, 3, 1), TG_EINVAL, "not a permutation",
                     TY(F32, 2, 3, 4));
    CHECK_INFER_FAIL(tg_op_transpose, &AV_INTS(1, 0), TG_EINVAL, "don't match", TY(F32, 2, 3, 4));

    tg_tensor *x = mk_arange(F32, SHAPE(2, 3));
    tg_tensor *y = run_ok(&tg_op_transpose, x, &AV_NONE);
    CHECK_T(y, F32, SHAPE(3, 2), VALS(0, 3, 1, 4, 2, 5));
    check_shared(y, x);
    tg_tensor_free(y);
    tg_tensor *rev = mk_reversed(x); /* [[5,4,3],[2,1,0]] */
    y = run_ok(&tg_op_transpose, rev, &AV_INTS(1, 0));
    CHECK_T(y, F32, SHAPE(3, 2), VALS(5, 2, 4, 1, 3, 0));
    check_shared(y, x);
    tg_tensor_free(y);
    tg_tensor_free(rev);
    tg_tensor_free(x);
    tg_tensor *w = mk_arange(F32, SHAPE(2, 3, 2));
    y = run_ok(&tg_op_transpose, w, &AV_INTS(2, 0, 1));
    /* np.arange(12).reshape(2,3,2).transpose(2,0,1) */
    CHECK_T(y, F32, SHAPE(2, 2, 3), VALS(0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11));
    tg_tensor_free(y);
    tg_tensor_free(w);
}

/* ---- expand_dims ---- */

static void test_expand_dims(void **state) {
    (void)state;
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(0), "f32[1,2,3]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(-1), "f32[2,3,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(0, 2), "f32[1,2,1,3]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(0, -1), "f32[1,2,3,1]", TY(F32, 2, 3));
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(1), "f32[?,1]", TY(F32, -1));
    CHECK_INFER(tg_op_expand_dims, &AV_INTS(0), "f32[1]", TY0(F32));
    CHECK_INFER_FAIL(tg_op_expand_dims, &AV_INTS(3), TG_EINVAL, "axis 3 is out of bounds",
                     TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_expand_dims, &AV_INTS(1, 1), TG_EINVAL, "repeated axis", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_expand_dims, &AV_INTS(0, 1), TG_EINVAL, "at most",
                     TY(F32, 1, 1, 1, 1, 1, 1, 1));

    tg_tensor *x = mk_arange(F32, SHAPE(2, 3));
    tg_tensor *rev = mk_reversed(x);
    tg_tensor *y = run_ok(&tg_op_expand_dims, rev, &AV_INTS(1, 3));
    CHECK_T(y, F32, SHAPE(2, 1, 3, 1), VALS(5, 4, 3, 2, 1, 0));
    check_shared(y, x);
    tg_tensor_free(y);
    tg_tensor_free(rev);
    tg_tensor_free(x);
}

/* ---- squeeze ---- */

static void test_squeeze(void **state) {
    (void)state;
    CHECK_INFER(tg_op_squeeze, &AV_NONE, "f32[3]", TY(F32, 1, 3, 1));
    CHECK_INFER(tg_op_squeeze, &AV_INTS(0), "f32[3,1]", TY(F32, 1, 3, 1));
    CHECK_INFER(tg_op_squeeze, &AV_INTS(-1), "f32[1,3]", TY(F32, 1, 3, 1));
    CHECK_INFER(tg_op_squeeze, &AV_INTS(0, 2), "f32[3]", TY(F32, 1, 3, 1));
    CHECK_INFER(tg_op_squeeze, &AV_NONE, "f32[?]", TY(F32, -1, 1));    /* '?' is kept */
    CHECK_INFER(tg_op_squeeze, &AV_INTS(0), "f32[3]", TY(F32, -1, 3)); /* checked later */
    CHECK_INFER(tg_op_squeeze, &AV_NONE, "f32[]", TY0(F32));
    CHECK_INFER_FAIL(tg_op_squeeze, &AV_INTS(1), TG_ESHAPE,
                     "cannot select an axis to squeeze out which has size not equal to one "
                     "(axis 1 of f32[1,3,1])",
                     TY(F32, 1, 3, 1));
    CHECK_INFER_FAIL(tg_op_squeeze, &AV_INTS(3), TG_EINVAL, "out of bounds", TY(F32, 1, 3, 1));
    CHECK_INFER_FAIL(tg_op_squeeze, &AV_INTS(0, -3), TG_EINVAL, "duplicate", TY(F32, 1, 3, 1));
    /* run time: the '?' axis turned out to be 2 */
    tg_type rt = TY(F32, 2, 3);
    infer_res r = infer_op(&tg_op_squeeze, &rt, 1, &AV_INTS(0), true);
    assert_int_equal(r.st, TG_ESHAPE);
    /* run time, axis none: a 1 that came from '?' (nobcast) stays, like the static type */
    tg_type nb = TY(F32, 1, 1);
    nb.nobcast = 1u << 0;
    r = infer_op(&tg_op_squeeze, &nb, 1, &AV_NONE, true);
    assert_int_equal(r.st, TG_OK);
    assert_string_equal(r.str, "f32[1]");
    assert_int_equal(r.out.nobcast, 1u);

    tg_tensor *x = mk_arange(F32, SHAPE(1, 3, 1));
    tg_tensor *rev = mk_reversed(x);
    tg_tensor *y = run_ok(&tg_op_squeeze, rev, &AV_NONE);
    CHECK_T(y, F32, SHAPE(3), VALS(2, 1, 0));
    check_shared(y, x);
    tg_tensor_free(y);
    y = run_ok(&tg_op_squeeze, rev, &AV_INTS(2));
    CHECK_T(y, F32, SHAPE(1, 3), VALS(2, 1, 0));
    tg_tensor_free(y);
    tg_tensor_free(rev);
    tg_tensor_free(x);
    tg_tensor *s = mk_tensor(F32, SHAPE(1, 1), VALS(4));
    y = run_ok(&tg_op_squeeze, s, &AV_NONE);
    CHECK_T(y, F32, SHAPE0, VALS(4));
    tg_tensor_free(y);
    tg_tensor_free(s);
}

/* ---- broadcast_to ---- */

static void test_broadcast_to(void **state) {
    (void)state;
    CHECK_INFER(tg_op_broadcast_to, &AV_INTS(2, 3), "f32[2,3]", TY(F32, 3));
    CHECK_INFER(tg_op_broadcast_to, &AV_INTS(2, 4), "f32[2,4]", TY(F32, 2, 1));
    CHECK_INFER(tg_op_broadcast_to, &AV_INTS(2, 3), "f32[2,3]", TY(F32, -1));
    CHECK_INFER(tg_op_broadcast_to, &AV_INTS(5, 0), "f32[5,0]", TY(F32, 1));
    CHECK_INFER(tg_op_broadcast_to, &AV_INTS(2), "f32[2]", TY0(F32));
    CHECK_INFER(tg_op_broadcast_to, &AV_EMPTY, "f32[]", TY0(F32));
    CHECK_INFER_FAIL(tg_op_broadcast_to, &AV_INTS(3), TG_ESHAPE,
                     "cannot broadcast f32[2] to shape [3] (axis 0: 2 vs 3)", TY(F32, 2));
    CHECK_INFER_FAIL(tg_op_broadcast_to, &AV_INTS(1), TG_ESHAPE, "cannot broadcast f32[0]",
                     TY(F32, 0));
    CHECK_INFER_FAIL(tg_op_broadcast_to, &AV_INTS(3), TG_ESHAPE, "more dimensions", TY(F32, 2, 3));
    CHECK_INFER_FAIL(tg_op_broadcast_to, &AV_INTS(-1, 3), TG_EINVAL, "negative dimension",
                     TY(F32, 3));
    /* run time: '?' was 2, not 3; a '?' that is 1 does not broadcast (DESIGN.md) */
    tg_type rt = TY(F32, 2);
    assert_int_equal(infer_op(&tg_op_broadcast_to, &rt, 1, &AV_INTS(2, 3), true).st, TG_ESHAPE);
    tg_type nb = TY(F32, 1);
    nb.nobcast = 1;
    infer_res r = infer_op(&tg_op_broadcast_to, &nb, 1, &AV_INTS(4), true);
    assert_int_equal(r.st, TG_ESHAPE);
    assert_non_null(strstr(r.msg, "declare the dimension as 1"));
    r = infer_op(&tg_op_broadcast_to, &nb, 1, &AV_INTS(2, 1), true);
    assert_int_equal(r.st, TG_OK);

    tg_tensor *x = mk_arange(F32, SHAPE(3));
    tg_tensor *rev = mk_reversed(x); /* [2,1,0] */
    tg_tensor *y = run_ok(&tg_op_broadcast_to, rev, &AV_INTS(2, 3));
    CHECK_T(y, F32, SHAPE(2, 3), VALS(2, 1, 0, 2, 1, 0));
    check_shared(y, x);
    assert_int_equal(y->strides[0], 0);
    tg_tensor_free(y);
    tg_tensor_free(rev);
    tg_tensor_free(x);
    tg_tensor *c = mk_tensor(F32, SHAPE(2, 1), VALS(7, 8));
    y = run_ok(&tg_op_broadcast_to, c, &AV_INTS(2, 2, 3));
    CHECK_T(y, F32, SHAPE(2, 2, 3), VALS(7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8));
    tg_tensor_free(y);
    y = run_ok(&tg_op_broadcast_to, c, &AV_INTS(2, 0));
    CHECK_T(y, F32, SHAPE(2, 0), NULL);
    tg_tensor_free(y);
    tg_tensor_free(c);
}

/* ---- slice ---- */

/* np.arange(5)[start:stop:step] (NumPy 1.24); NONE_ is an omitted bound or step */
/* clang-format off */
static const struct {
    int64_t start, stop, step, n, v[5];
} slice_table[] = {
    {NONE_, NONE_, NONE_, 5, {0, 1, 2, 3, 4}}, {NONE_, NONE_, 1, 5, {0, 1, 2, 3, 4}},
    {NONE_, NONE_, 2, 3, {0, 2, 4}}, {NONE_, NONE_, -1, 5, {4, 3, 2, 1, 0}},
    {NONE_, NONE_, -3, 2, {4, 1}}, {NONE_, -9, NONE_, 0, {0}},
    {NONE_, -9, 1, 0, {0}}, {NONE_, -9, 2, 0, {0}},
    {NONE_, -9, -1, 5, {4, 3, 2, 1, 0}}, {NONE_, -9, -3, 2, {4, 1}},
    {NONE_, -1, NONE_, 4, {0, 1, 2, 3}}, {NONE_, -1, 1, 4, {0, 1, 2, 3}},
    {NONE_, -1, 2, 2, {0, 2}}, {NONE_, -1, -1, 0, {0}},
    {NONE_, -1, -3, 0, {0}}, {NONE_, 0, NONE_, 0, {0}},
    {NONE_, 0, 1, 0, {0}}, {NONE_, 0, 2, 0, {0}},
    {NONE_, 0, -1, 4, {4, 3, 2, 1}}, {NONE_, 0, -3, 2, {4, 1}},
    {NONE_, 2, NONE_, 2, {0, 1}}, {NONE_, 2, 1, 2, {0, 1}},
    {NONE_, 2, 2, 1, {0}}, {NONE_, 2, -1, 2, {4, 3}},
    {NONE_, 2, -3, 1, {4}}, {NONE_, 5, NONE_, 5, {0, 1, 2, 3, 4}},
    {NONE_, 5, 1, 5, {0, 1, 2, 3, 4}}, {NONE_, 5, 2, 3, {0, 2, 4}},
    {NONE_, 5, -1, 0, {0}}, {NONE_, 5, -3, 0, {0}},
    {NONE_, 7, NONE_, 5, {0, 1, 2, 3, 4}}, {NONE_, 7, 1, 5, {0, 1, 2, 3, 4}},
    {NONE_, 7, 2, 3, {0, 2, 4}}, {NONE_, 7, -1, 0, {0}},
    {NONE_, 7, -3, 0, {0}}, {-7, NONE_, NONE_, 5, {0, 1, 2, 3, 4}},
    {-7, NONE_, 1, 5, {0, 1, 2, 3, 4}}, {-7, NONE_, 2, 3, {0, 2, 4}},
    {-7, NONE_, -1, 0, {0}}, {-7, NONE_, -3, 0, {0}},
    {-7, -9, NONE_, 0, {0}}, {-7, -9, 1, 0, {0}},
    {-7, -9, 2, 0, {0}}, {-7, -9, -1, 0, {0}},
    {-7, -9, -3, 0, {0}}, {-7, -1, NONE_, 4, {0, 1, 2, 3}},
    {-7, -1, 1, 4, {0, 1, 2, 3}}, {-7, -1, 2, 2, {0, 2}},
    {-7, -1, -1, 0, {0}}, {-7, -1, -3, 0, {0}},
    {-7, 0, NONE_, 0, {0}}, {-7, 0, 1, 0, {0}},
    {-7, 0, 2, 0, {0}}, {-7, 0, -1, 0, {0}},
    {-7, 0, -3, 0, {0}}, {-7, 2, NONE_, 2, {0, 1}},
    {-7, 2, 1, 2, {0, 1}}, {-7, 2, 2, 1, {0}},
    {-7, 2, -1, 0, {0}}, {-7, 2, -3, 0, {0}},
    {-7, 5, NONE_, 5, {0, 1, 2, 3, 4}}, {-7, 5, 1, 5, {0, 1, 2, 3, 4}},
    {-7, 5, 2, 3, {0, 2, 4}}, {-7, 5, -1, 0, {0}},
    {-7, 5, -3, 0, {0}}, {-7, 7, NONE_, 5, {0, 1, 2, 3, 4}},
    {-7, 7, 1, 5, {0, 1, 2, 3, 4}}, {-7, 7, 2, 3, {0, 2, 4}},
    {-7, 7, -1, 0, {0}}, {-7, 7, -3, 0, {0}},
    {-2, NONE_, NONE_, 2, {3, 4}}, {-2, NONE_, 1, 2, {3, 4}},
    {-2, NONE_, 2, 1, {3}}, {-2, NONE_, -1, 4, {3, 2, 1, 0}},
    {-2, NONE_, -3, 2, {3, 0}}, {-2, -9, NONE_, 0, {0}},
    {-2, -9, 1, 0, {0}}, {-2, -9, 2, 0, {0}},
    {-2, -9, -1, 4, {3, 2, 1, 0}}, {-2, -9, -3, 2, {3, 0}},
    {-2, -1, NONE_, 1, {3}}, {-2, -1, 1, 1, {3}},
    {-2, -1, 2, 1, {3}}, {-2, -1, -1, 0, {0}},
    {-2, -1, -3, 0, {0}}, {-2, 0, NONE_, 0, {0}},
    {-2, 0, 1, 0, {0}}, {-2, 0, 2, 0, {0}},
    {-2, 0, -1, 3, {3, 2, 1}}, {-2, 0, -3, 1, {3}},
    {-2, 2, NONE_, 0, {0}}, {-2, 2, 1, 0, {0}},
    {-2, 2, 2, 0, {0}}, {-2, 2, -1, 1, {3}},
    {-2, 2, -3, 1, {3}}, {-2, 5, NONE_, 2, {3, 4}},
    {-2, 5, 1, 2, {3, 4}}, {-2, 5, 2, 1, {3}},
    {-2, 5, -1, 0, {0}}, {-2, 5, -3, 0, {0}},
    {-2, 7, NONE_, 2, {3, 4}}, {-2, 7, 1, 2, {3, 4}},
    {-2, 7, 2, 1, {3}}, {-2, 7, -1, 0, {0}},
    {-2, 7, -3, 0, {0}}, {0, NONE_, NONE_, 5, {0, 1, 2, 3, 4}},
    {0, NONE_, 1, 5, {0, 1, 2, 3, 4}}, {0, NONE_, 2, 3, {0, 2, 4}},
    {0, NONE_, -1, 1, {0}}, {0, NONE_, -3, 1, {0}},
    {0, -9, NONE_, 0, {0}}, {0, -9, 1, 0, {0}},
    {0, -9, 2, 0, {0}}, {0, -9, -1, 1, {0}},
    {0, -9, -3, 1, {0}}, {0, -1, NONE_, 4, {0, 1, 2, 3}},
    {0, -1, 1, 4, {0, 1, 2, 3}}, {0, -1, 2, 2, {0, 2}},
    {0, -1, -1, 0, {0}}, {0, -1, -3, 0, {0}},
    {0, 0, NONE_, 0, {0}}, {0, 0, 1, 0, {0}},
    {0, 0, 2, 0, {0}}, {0, 0, -1, 0, {0}},
    {0, 0, -3, 0, {0}}, {0, 2, NONE_, 2, {0, 1}},
    {0, 2, 1, 2, {0, 1}}, {0, 2, 2, 1, {0}},
    {0, 2, -1, 0, {0}}, {0, 2, -3, 0, {0}},
    {0, 5, NONE_, 5, {0, 1, 2, 3, 4}}, {0, 5, 1, 5, {0, 1, 2, 3, 4}},
    {0, 5, 2, 3, {0, 2, 4}}, {0, 5, -1, 0, {0}},
    {0, 5, -3, 0, {0}}, {0, 7, NONE_, 5, {0, 1, 2, 3, 4}},
    {0, 7, 1, 5, {0, 1, 2, 3, 4}}, {0, 7, 2, 3, {0, 2, 4}},
    {0, 7, -1, 0, {0}}, {0, 7, -3, 0, {0}},
    {3, NONE_, NONE_, 2, {3, 4}}, {3, NONE_, 1, 2, {3, 4}},
    {3, NONE_, 2, 1, {3}}, {3, NONE_, -1, 4, {3, 2, 1, 0}},
    {3, NONE_, -3, 2, {3, 0}}, {3, -9, NONE_, 0, {0}},
    {3, -9, 1, 0, {0}}, {3, -9, 2, 0, {0}},
    {3, -9, -1, 4, {3, 2, 1, 0}}, {3, -9, -3, 2, {3, 0}},
    {3, -1, NONE_, 1, {3}}, {3, -1, 1, 1, {3}},
    {3, -1, 2, 1, {3}}, {3, -1, -1, 0, {0}},
    {3, -1, -3, 0, {0}}, {3, 0, NONE_, 0, {0}},
    {3, 0, 1, 0, {0}}, {3, 0, 2, 0, {0}},
    {3, 0, -1, 3, {3, 2, 1}}, {3, 0, -3, 1, {3}},
    {3, 2, NONE_, 0, {0}}, {3, 2, 1, 0, {0}},
    {3, 2, 2, 0, {0}}, {3, 2, -1, 1, {3}},
    {3, 2, -3, 1, {3}}, {3, 5, NONE_, 2, {3, 4}},
    {3, 5, 1, 2, {3, 4}}, {3, 5, 2, 1, {3}},
    {3, 5, -1, 0, {0}}, {3, 5, -3, 0, {0}},
    {3, 7, NONE_, 2, {3, 4}}, {3, 7, 1, 2, {3, 4}},
    {3, 7, 2, 1, {3}}, {3, 7, -1, 0, {0}},
    {3, 7, -3, 0, {0}}, {5, NONE_, NONE_, 0, {0}},
    {5, NONE_, 1, 0, {0}}, {5, NONE_, 2, 0, {0}},
    {5, NONE_, -1, 5, {4, 3, 2, 1, 0}}, {5, NONE_, -3, 2, {4, 1}},
    {5, -9, NONE_, 0, {0}}, {5, -9, 1, 0, {0}},
    {5, -9, 2, 0, {0}}, {5, -9, -1, 5, {4, 3, 2, 1, 0}},
    {5, -9, -3, 2, {4, 1}}, {5, -1, NONE_, 0, {0}},
    {5, -1, 1, 0, {0}}, {5, -1, 2, 0, {0}},
    {5, -1, -1, 0, {0}}, {5, -1, -3, 0, {0}},
    {5, 0, NONE_, 0, {0}}, {5, 0, 1, 0, {0}},
    {5, 0, 2, 0, {0}}, {5, 0, -1, 4, {4, 3, 2, 1}},
    {5, 0, -3, 2, {4, 1}}, {5, 2, NONE_, 0, {0}},
    {5, 2, 1, 0, {0}}, {5, 2, 2, 0, {0}},
    {5, 2, -1, 2, {4, 3}}, {5, 2, -3, 1, {4}},
    {5, 5, NONE_, 0, {0}}, {5, 5, 1, 0, {0}},
    {5, 5, 2, 0, {0}}, {5, 5, -1, 0, {0}},
    {5, 5, -3, 0, {0}}, {5, 7, NONE_, 0, {0}},
    {5, 7, 1, 0, {0}}, {5, 7, 2, 0, {0}},
    {5, 7, -1, 0, {0}}, {5, 7, -3, 0, {0}},
    {9, NONE_, NONE_, 0, {0}}, {9, NONE_, 1, 0, {0}},
    {9, NONE_, 2, 0, {0}}, {9, NONE_, -1, 5, {4, 3, 2, 1, 0}},
    {9, NONE_, -3, 2, {4, 1}}, {9, -9, NONE_, 0, {0}},
    {9, -9, 1, 0, {0}}, {9, -9, 2, 0, {0}},
    {9, -9, -1, 5, {4, 3, 2, 1, 0}}, {9, -9, -3, 2, {4, 1}},
    {9, -1, NONE_, 0, {0}}, {9, -1, 1, 0, {0}},
    {9, -1, 2, 0, {0}}, {9, -1, -1, 0, {0}},
    {9, -1, -3, 0, {0}}, {9, 0, NONE_, 0, {0}},
    {9, 0, 1, 0, {0}}, {9, 0, 2, 0, {0}},
    {9, 0, -1, 4, {4, 3, 2, 1}}, {9, 0, -3, 2, {4, 1}},
    {9, 2, NONE_, 0, {0}}, {9, 2, 1, 0, {0}},
    {9, 2, 2, 0, {0}}, {9, 2, -1, 2, {4, 3}},
    {9, 2, -3, 1, {4}}, {9, 5, NONE_, 0, {0}},
    {9, 5, 1, 0, {0}}, {9, 5, 2, 0, {0}},
    {9, 5, -1, 0, {0}}, {9, 5, -3, 0, {0}},
    {9, 7, NONE_, 0, {0}}, {9, 7, 1, 0, {0}},
    {9, 7, 2, 0, {0}}, {9, 7, -1, 0, {0}},
    {9, 7, -3, 0, {0}},
};
/* clang-format on */

/* Slice attributes from lists where NONE_ (a test-only marker) stands for a part left
 * out: it becomes a `none` entry of the mask, as the parser makes it. The masks live in
 * static storage until the next call. */
static tg_aval slice_attrs4(tg_aval *a, const int64_t *st, const int64_t *sp, const int64_t *step,
                            const int64_t *ix, int n) {
    static bool masks[3][TG_MAX_DIMS];
    const int64_t *lists[3] = {st, sp, step};
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < n && i < TG_MAX_DIMS; i++) masks[q][i] = lists[q][i] == NONE_;
    a[TG_SLICE_A_STARTS] = (tg_aval){.kind = TG_ATTR_INTS, .ints = st, .n = n, .none = masks[0]};
    a[TG_SLICE_A_STOPS] = (tg_aval){.kind = TG_ATTR_INTS, .ints = sp, .n = n, .none = masks[1]};
    a[TG_SLICE_A_STEPS] = (tg_aval){.kind = TG_ATTR_INTS, .ints = step, .n = n, .none = masks[2]};
    a[TG_SLICE_A_INDEX] = (tg_aval){.kind = TG_ATTR_INTS, .ints = ix, .n = n};
    return a[0];
}

static void test_slice_table(void **state) {
    (void)state;
    tg_tensor *x = mk_arange(I64, SHAPE(5));
    tg_tensor *rev = mk_reversed(x); /* [4,3,2,1,0]: element i is 4 - i */
    for (size_t c = 0; c < sizeof slice_table / sizeof slice_table[0]; c++) {
        tg_aval a[4];
        const int64_t ix = 0;
        slice_attrs4(a, &slice_table[c].start, &slice_table[c].stop, &slice_table[c].step, &ix, 1);
        int64_t n = slice_table[c].n;
        /* static inference */
        tg_type t = TY(I64, 5);
        infer_res r = infer_op(&tg_op_slice, &t, 1, a, false);
        assert_int_equal(r.st, TG_OK);
        assert_int_equal(r.out.ndim, 1);
        if (r.out.shape[0] != n)
            print_error("case %zu: [%lld:%lld:%lld] has %lld elements, want %lld\n", c,
                        (long long)slice_table[c].start, (long long)slice_table[c].stop,
                        (long long)slice_table[c].step, (long long)r.out.shape[0], (long long)n);
        assert_int_equal(r.out.shape[0], n);
        /* '?' input: unknown extent */
        t = TY(I64, -1);
        assert_string_equal(infer_op(&tg_op_slice, &t, 1, a, false).str, "i64[?]");
        /* values, on a contiguous and on a reversed input */
        tg_tensor *y = run_ok(&tg_op_slice, x, a);
        double want[5], wrev[5];
        for (int i = 0; i < n; i++) {
            want[i] = (double)slice_table[c].v[i];
            wrev[i] = 4.0 - want[i];
        }
        check_tensor(y, I64, 1, &n, want, 0.0);
        if (n > 0) check_shared(y, x);
        tg_tensor_free(y);
        y = run_ok(&tg_op_slice, rev, a);
        check_tensor(y, I64, 1, &n, wrev, 0.0);
        tg_tensor_free(y);
    }
    tg_tensor_free(rev);
    tg_tensor_free(x);
}

static tg_tensor *slice_run(tg_tensor *x, int n, const int64_t *st, const int64_t *sp,
                            const int64_t *step, const int64_t *ix) {
    tg_aval a[4];
    slice_attrs4(a, st, sp, step, ix, n);
    return run_ok(&tg_op_slice, x, a);
}

static void test_slice_nd(void **state) {
    (void)state;
    tg_tensor *w = mk_arange(I64, SHAPE(2, 3, 4));
    tg_tensor *y;
    /* w[1:, ::-1, 0] -> [[20, 16, 12]] */
    y = slice_run(w, 3, (const int64_t[]){1, NONE_, 0}, (const int64_t[]){NONE_, NONE_, NONE_},
                  (const int64_t[]){NONE_, -1, NONE_}, (const int64_t[]){0, 0, 1});
    CHECK_T(y, I64, SHAPE(1, 3), VALS(20, 16, 12));
    check_shared(y, w);
    tg_tensor_free(y);
    /* w[-1] -> shape (3,4), 12..23 */
    y = slice_run(w, 1, (const int64_t[]){-1}, (const int64_t[]){NONE_}, (const int64_t[]){NONE_},
                  (const int64_t[]){1});
    CHECK_T(y, I64, SHAPE(3, 4), VALS(12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
    tg_tensor_free(y);
    /* w[:, 1, -2] -> [6, 18] */
    y = slice_run(w, 3, (const int64_t[]){NONE_, 1, -2}, (const int64_t[]){NONE_, NONE_, NONE_},
                  (const int64_t[]){NONE_, NONE_, NONE_}, (const int64_t[]){0, 1, 1});
    CHECK_T(y, I64, SHAPE(2), VALS(6, 18));
    tg_tensor_free(y);
    /* w[0, :, 1:3] -> [[1,2],[5,6],[9,10]] */
    y = slice_run(w, 3, (const int64_t[]){0, NONE_, 1}, (const int64_t[]){NONE_, NONE_, 3},
                  (const int64_t[]){NONE_, NONE_, NONE_}, (const int64_t[]){1, 0, 0});
    CHECK_T(y, I64, SHAPE(3, 2), VALS(1, 2, 5, 6, 9, 10));
    tg_tensor_free(y);
    /* w[::-1, -1:-4:-2, ::3] -> [[[20,23],[12,15]],[[8,11],[0,3]]], then sliced again:
     * [...][1, ::-1] -> [[0,3],[8,11]] (a view of a view with negative strides) */
    y = slice_run(w, 3, (const int64_t[]){NONE_, -1, NONE_}, (const int64_t[]){NONE_, -4, NONE_},
                  (const int64_t[]){-1, -2, 3}, (const int64_t[]){0, 0, 0});
    CHECK_T(y, I64, SHAPE(2, 2, 2), VALS(20, 23, 12, 15, 8, 11, 0, 3));
    tg_tensor *z = slice_run(y, 2, (const int64_t[]){1, NONE_}, (const int64_t[]){NONE_, NONE_},
                             (const int64_t[]){NONE_, -1}, (const int64_t[]){1, 0});
    CHECK_T(z, I64, SHAPE(2, 2), VALS(0, 3, 8, 11));
    check_shared(z, w);
    tg_tensor_free(z);
    tg_tensor_free(y);
    /* no index at all: the whole array */
    y = slice_run(w, 0, NULL, NULL, NULL, NULL);
    CHECK_T(
        y, I64, SHAPE(2, 3, 4),
        VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23));
    tg_tensor_free(y);
    tg_tensor_free(w);
    /* huge bounds and steps clamp like Python: x[M::-1], x[:-M:-1], x[-M:M:M], x[::-M] */
    const int64_t M = INT64_MAX;
    tg_tensor *x = mk_arange(I64, SHAPE(5));
    y = slice_run(x, 1, &M, (const int64_t[]){NONE_}, (const int64_t[]){-1}, (const int64_t[]){0});
    CHECK_T(y, I64, SHAPE(5), VALS(4, 3, 2, 1, 0));
    tg_tensor_free(y);
    y = slice_run(x, 1, (const int64_t[]){NONE_}, (const int64_t[]){-M}, (const int64_t[]){-1},
                  (const int64_t[]){0});
    CHECK_T(y, I64, SHAPE(5), VALS(4, 3, 2, 1, 0));
    tg_tensor_free(y);
    y = slice_run(x, 1, (const int64_t[]){-M}, &M, &M, (const int64_t[]){0});
    CHECK_T(y, I64, SHAPE(1), VALS(0));
    tg_tensor_free(y);
    y = slice_run(x, 1, (const int64_t[]){NONE_}, (const int64_t[]){NONE_}, (const int64_t[]){-M},
                  (const int64_t[]){0});
    CHECK_T(y, I64, SHAPE(1), VALS(4));
    tg_tensor_free(y);
    tg_tensor_free(x);
    /* 0-size input: np.arange(0)[::-1] */
    tg_tensor *e = tg_tensor_new(tg_ctx_default(), I64, SHAPE(0));
    y = slice_run(e, 1, (const int64_t[]){NONE_}, (const int64_t[]){NONE_}, (const int64_t[]){-1},
                  (const int64_t[]){0});
    CHECK_T(y, I64, SHAPE(0), NULL);
    tg_tensor_free(y);
    tg_tensor_free(e);
    /* empty in one axis, sliced with a negative step in another: np.zeros((0,4))[1:, ::-1] */
    e = tg_tensor_new(tg_ctx_default(), I64, SHAPE(0, 4));
    y = slice_run(e, 2, (const int64_t[]){1, NONE_}, (const int64_t[]){NONE_, NONE_},
                  (const int64_t[]){NONE_, -1}, (const int64_t[]){0, 0});
    CHECK_T(y, I64, SHAPE(0, 4), NULL);
    tg_tensor_free(y);
    tg_tensor_free(e);
}

static void test_slice_errors(void **state) {
    (void)state;
    tg_aval a[4];
    const int64_t none1[1] = {NONE_}, zero1[1] = {0}, one1[1] = {1};
    /* index out of range, statically */
    slice_attrs4(a, (const int64_t[]){3}, none1, none1, one1, 1);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINDEX, "index 3 is out of bounds for axis 0 with extent 3",
                     TY(F32, 3, 4));
    slice_attrs4(a, (const int64_t[]){-4}, none1, none1, one1, 1);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINDEX, "index -4 is out of bounds", TY(F32, 3, 4));
    /* ... and only at run time for '?' */
    CHECK_INFER(tg_op_slice, a, "f32[4]", TY(F32, -1, 4));
    tg_tensor *x = mk_arange(F32, SHAPE(3, 4));
    run_res r = run_op(&tg_op_slice, &x, 1, a);
    assert_int_equal(r.st, TG_EINDEX);
    assert_non_null(strstr(r.msg, "index -4 is out of bounds for axis 0 with extent 3"));
    tg_tensor_free(x);
    /* step 0 */
    slice_attrs4(a, none1, none1, zero1, zero1, 1);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINVAL, "step cannot be zero", TY(F32, 3));
    /* too many indices */
    const int64_t n2[2] = {NONE_, NONE_}, z2[2] = {0, 0};
    slice_attrs4(a, n2, n2, n2, z2, 2);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINDEX, "too many indices for f32[3]", TY(F32, 3));
    /* malformed attributes */
    slice_attrs4(a, n2, n2, n2, z2, 2); /* then stops cut to one entry */
    a[TG_SLICE_A_STOPS].n = 1;
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINVAL, "different lengths", TY(F32, 3, 3));
    slice_attrs4(a, none1, none1, none1, (const int64_t[]){2}, 1);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINVAL, "0 or 1", TY(F32, 3));
    slice_attrs4(a, none1, none1, none1, one1, 1);
    CHECK_INFER_FAIL(tg_op_slice, a, TG_EINVAL, "without a value", TY(F32, 3));
}

static void test_slice_format(void **state) {
    (void)state;
    tg_aval a[4];
    char buf[64];
    slice_attrs4(a, (const int64_t[]){1, NONE_, 0}, (const int64_t[]){NONE_, NONE_, NONE_},
                 (const int64_t[]){NONE_, -1, NONE_}, (const int64_t[]){0, 0, 1}, 3);
    assert_true(tg_slice_format(a, buf, sizeof buf));
    assert_string_equal(buf, "[1:, ::-1, 0]");
    slice_attrs4(a, (const int64_t[]){-3, NONE_}, (const int64_t[]){-1, 2},
                 (const int64_t[]){2, NONE_}, (const int64_t[]){0, 0}, 2);
    assert_true(tg_slice_format(a, buf, sizeof buf));
    assert_string_equal(buf, "[-3:-1:2, :2]");
    assert_false(tg_slice_format(a, buf, 8)); /* too small: false and "" */
    assert_string_equal(buf, "");
}

/* ---- through the public API (graph, builder, reference interpreter) ---- */

/* INT64_MIN is a bound or step like any other (NumPy's results on [1, 2, 3]), never an
 * omitted part: from the text, from the C API, in every backend, and after printing and
 * parsing back. */
static void test_slice_int64_min(void **state) {
    (void)state;
    static const char src[] = "func main(x: i64[3]) {\n"
                              "  a = x[::-9223372036854775808]\n"
                              "  b = x[-9223372036854775808:]\n"
                              "  c = x[:-9223372036854775808]\n"
                              "  d = x[-9223372036854775808::-1]\n"
                              "  e = x[:-9223372036854775808:-1]\n"
                              "  f = x[1::-9223372036854775808]\n"
                              "  g = x[::9223372036854775807]\n"
                              "  return a, b, c, d, e, f, g\n"
                              "}\n";
    static const struct {
        int n;
        int64_t v[3];
    } want[7] = {{1, {3}}, {3, {1, 2, 3}}, {0, {0}}, {0, {0}}, {3, {3, 2, 1}}, {1, {2}}, {1, {1}}};
    static const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C};
    char *printed = NULL;
    for (int round = 0; round < 2; round++) { /* the text, then the text printed back */
        const char *text = round ? printed : src;
        tg_module *m = NULL;
        if (tg_module_parse(NULL, text, strlen(text), "s.tg", &m) != TG_OK)
            fail_msg("%s", tg_last_error());
        if (!round) {
            size_t len = 0;
            FILE *f = open_memstream(&printed, &len);
            assert_int_equal(tg_module_print(m, f), TG_OK);
            fclose(f);
            assert_non_null(strstr(printed, "x[::-9223372036854775808]"));
        }
        tg_tensor *x = mk_tensor(I64, SHAPE(3), VALS(1, 2, 3));
        for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
            tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[k]);
            tg_fn *fn = NULL;
            tg_tensor *out[7] = {0};
            assert_int_equal(tg_graph_compile(tg_module_func(m, 0), &o, &fn), TG_OK);
            if (tg_fn_call(fn, &x, 1, out, 7) != TG_OK) fail_msg("%s", tg_last_error());
            for (int i = 0; i < 7; i++) {
                assert_int_equal(tg_tensor_size(out[i]), want[i].n);
                for (int j = 0; j < want[i].n; j++)
                    if (tg_tensor_get_f64(out[i], j) != (double)want[i].v[j])
                        fail_msg("mode %d, output %d, element %d: %g", (int)modes[k], i, j,
                                 tg_tensor_get_f64(out[i], j));
                tg_tensor_free(out[i]);
            }
            tg_fn_free(fn);
        }
        tg_tensor_free(x);
        tg_module_free(m);
    }
    free(printed);

    /* the C API: a step of INT64_MIN is a step; an omitted one is 1 */
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", I64, 1, (const int64_t[]){3});
    tg_slice big = {.step = INT64_MIN, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP};
    tg_slice all = {.start = INT64_MIN, .stop = INT64_MIN, .omit = TG_SLICE_OMIT_ALL};
    tg_var *y = tg_slice_apply(g, x, &big, 1), *z = tg_slice_apply(g, x, &all, 1);
    assert_non_null(y);
    assert_int_equal(tg_var_dim(y, 0), 1);
    assert_int_equal(tg_var_dim(z, 0), 3);
    /* an index of INT64_MIN is out of bounds, not a missing value */
    tg_slice at = {.start = INT64_MIN, .is_index = true};
    assert_null(tg_slice_apply(g, x, &at, 1));
    assert_non_null(strstr(tg_last_error(), "index -9223372036854775808 is out of bounds"));
    tg_graph_free(g);
}

static void test_api(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(tg_ctx_default(), "f");
    tg_var *x = tg_input(g, "x", F32, 2, (const int64_t[]){TG_DIM_UNKNOWN, 4});
    /* y = x[1:, ::-1] ; z = reshape(transpose(y), [-1]) ; w = x[-1, 1] */
    tg_slice sl[2] = {{.start = 1, .omit = TG_SLICE_NO_STOP | TG_SLICE_NO_STEP},
                      {.step = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP}};
    tg_var *y = tg_slice_apply(g, x, sl, 2);
    tg_var *z = tg_reshape(g, tg_transpose(g, y, NULL), 1, (const int64_t[]){-1});
    tg_slice ix[2] = {{.start = -1, .is_index = true}, {.start = 1, .is_index = true}};
    tg_var *w = tg_slice_apply(g, x, ix, 2);
    tg_attr ba[1] = {TG_A_INTS("shape", ((const int64_t[]){2, 3}), 2)};
    tg_var *b = tg_apply(g, "broadcast_to", &w, 1, ba, 1);
    tg_attr ea[1] = {TG_A_INT("axis", 0)};
    tg_var *e =
        tg_apply(g, "squeeze", (tg_var *[]){tg_apply(g, "expand_dims", &y, 1, ea, 1)}, 1, ea, 1);
    assert_non_null(z);
    assert_non_null(b);
    assert_non_null(e);
    assert_int_equal(tg_var_ndim(y), 2);
    assert_int_equal(tg_var_dim(y, 0), TG_DIM_UNKNOWN);
    assert_int_equal(tg_var_dim(y, 1), 4);
    assert_int_equal(tg_var_ndim(w), 0);
    tg_tensor *xv = mk_arange(F32, SHAPE(3, 4));
    tg_tensor *out[4] = {NULL};
    tg_var *outs[4] = {y, z, b, e};
    assert_int_equal(call_graph(g, outs, 4, &xv, 1, out), TG_OK);
    CHECK_T(out[0], F32, SHAPE(2, 4), VALS(7, 6, 5, 4, 11, 10, 9, 8));
    CHECK_T(out[1], F32, SHAPE(8), VALS(7, 11, 6, 10, 5, 9, 4, 8));
    CHECK_T(out[2], F32, SHAPE(2, 3), VALS(9, 9, 9, 9, 9, 9));
    CHECK_T(out[3], F32, SHAPE(2, 4), VALS(7, 6, 5, 4, 11, 10, 9, 8));
    for (int i = 0; i < 4; i++) tg_tensor_free(out[i]);
    tg_tensor_free(xv);
    /* x[-1, 1] with a '?' extent of 0 at run time: the index is out of range */
    tg_tensor *ev = tg_tensor_new(tg_ctx_default(), F32, SHAPE(0, 4));
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    assert_int_equal(tg_fn_call(f, &ev, 1, out, 4), TG_EINDEX);
    assert_non_null(strstr(tg_last_error(), "index -1 is out of bounds for axis 0 with extent 0"));
    tg_fn_free(f);
    tg_tensor_free(ev);
    tg_graph_free(g);
    /* a static error names both shapes */
    g = tg_graph_new(tg_ctx_default(), "g");
    x = tg_input(g, "x", F32, 2, (const int64_t[]){2, 3});
    assert_null(tg_reshape(g, x, 2, (const int64_t[]){4, -1}));
    assert_int_equal(tg_graph_status(g), TG_ESHAPE);
    assert_non_null(
        strstr(tg_graph_error(g), "reshape: cannot reshape f32[2,3] (size 6) into shape [4,-1]"));
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_infer),   cmocka_unit_test(test_reshape_values),
        cmocka_unit_test(test_transpose),       cmocka_unit_test(test_expand_dims),
        cmocka_unit_test(test_squeeze),         cmocka_unit_test(test_broadcast_to),
        cmocka_unit_test(test_slice_table),     cmocka_unit_test(test_slice_nd),
        cmocka_unit_test(test_slice_errors),    cmocka_unit_test(test_slice_format),
        cmocka_unit_test(test_slice_int64_min), cmocka_unit_test(test_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
