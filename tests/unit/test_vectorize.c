/* test_vectorize.c - vectorize (tg_vectorize): a function written over core shapes, mapped
 * over a batch axis as ordinary graph. The oracle is the loop over the examples: the core
 * function compiled alone and called on each slice, its results compared with the slices
 * of the batched results (check_loop). Also: the batched graph holds no call and no loop,
 * gradients through it pass the checker, per-example gradients, calls, nested vectorize,
 * vectorize inside a pmap body, a '?' batch extent, and the errors (naming both inputs
 * whose extents disagree).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vectorize_testutil.h"

/* Elementwise ops broadcast, reductions and axis attributes shift; in_axes and out_axes
 * anywhere, negative too. */
static void test_elemwise_and_axes(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 2, SH(3, 4));
    tg_var *c = tg_input(f, "c", TG_DT_F64, 0, NULL);
    tg_var *r = tg_input(f, "r", TG_DT_F64, 1, SH(4));
    int64_t ax1 = 1, axm = -2;
    tg_var *outs[] = {
        tg_reduce(f, "sum", tg_mul(f, tg_exp(f, x), c), &ax1, 1, false),
        tg_reduce(f, "max", x, NULL, -1, false),
        tg_apply(f, "softmax", &x, 1, &TG_A_INT("axis", 0), 1),
        tg_apply(f, "cumsum", &x, 1, &TG_A_INT("axis", -1), 1),
        tg_apply(f, "argmax", &x, 1, NULL, 0), /* axis none: flattened */
        tg_reduce(f, "mean", tg_add(f, x, r), &axm, 1, true),
        tg_where(f, tg_gt(f, x, c), x, r),
    };
    assert_int_equal(tg_graph_set_outputs(f, outs, 7), TG_OK);
    tg_tensor *in[3] = {rnd(3, SH(3, 5, 4), 1), rnd(1, SH(5), 2), rnd(2, SH(4, 5), 3)};
    tg_graph_free(check_loop(f, in, 3, (int[]){1, 0, -1}, (int[]){0, -1, 2, 0, 0, 1, -3}));
    /* the same over a '?' batch: the mapped extent is read at run time */
    tg_graph_free(check_loop_as(f, in, 3, (int[]){-2, 0, 1}, NULL, true));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_graph_free(f);
}

/* matmul, dot and outer with 1-D and 2-D operands, batched on either side or both. */
static void test_products(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *a = tg_input(f, "a", TG_DT_F64, 1, SH(3));
    tg_var *B = tg_input(f, "B", TG_DT_F64, 2, SH(3, 2));
    tg_var *M = tg_input(f, "M", TG_DT_F64, 2, SH(2, 3));
    tg_var *outs[] = {tg_matmul(f, a, B),
                      tg_dot(f, M, a),
                      tg_matmul(f, M, B),
                      tg_dot(f, a, a),
                      tg_outer(f, a, a),
                      tg_dot(f, B, tg_dot(f, M, a)),
                      tg_dot(f, a, tg_reduce(f, "sum", a, NULL, -1, false))};
    assert_int_equal(tg_graph_set_outputs(f, outs, 7), TG_OK);
    tg_tensor *in[3] = {rnd(2, SH(4, 3), 4), rnd(3, SH(3, 2, 4), 5), rnd(2, SH(2, 3), 6)};
    tg_graph_free(check_loop(f, in, 3, (int[]){0, 2, N}, NULL));
    tg_tensor *in2[3] = {rnd(1, SH(3), 7), rnd(3, SH(4, 3, 2), 8), rnd(3, SH(2, 4, 3), 9)};
    tg_graph_free(check_loop(f, in2, 3, (int[]){N, 0, 1}, (int[]){1, 0, 2, 0, -1, 0, 0}));
    tg_tensor *in3[3] = {rnd(2, SH(3, 4), 10), rnd(2, SH(3, 2), 11), rnd(3, SH(4, 2, 3), 12)};
    tg_graph_free(check_loop(f, in3, 3, (int[]){1, N, 0}, NULL));
    for (int i = 0; i < 3; i++)
        tg_tensor_free(in[i]), tg_tensor_free(in2[i]), tg_tensor_free(in3[i]);
    tg_graph_free(f);
}

/* matmul of stacks of matrices: the batched operands' stacks are padded to line up with the
 * other operand's, batched or not. */
static void test_matmul_stacks(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *A = tg_input(f, "A", TG_DT_F64, 3, SH(2, 3, 4));
    tg_var *M = tg_input(f, "M", TG_DT_F64, 2, SH(4, 3));
    tg_var *v = tg_input(f, "v", TG_DT_F64, 1, SH(4));
    tg_var *outs[] = {tg_matmul(f, A, M), tg_matmul(f, M, A), tg_matmul(f, A, v),
                      tg_matmul(f, v, M)};
    assert_int_equal(tg_graph_set_outputs(f, outs, 4), TG_OK);
    tg_tensor *in[3] = {rnd(4, SH(2, 3, 4, 5), 40), rnd(3, SH(5, 4, 3), 41), rnd(1, SH(4), 42)};
    tg_graph_free(check_loop(f, in, 3, (int[]){-1, 0, N}, NULL));
    tg_tensor *in2[3] = {rnd(3, SH(2, 3, 4), 43), rnd(3, SH(4, 3, 5), 44), rnd(2, SH(5, 4), 45)};
    tg_graph_free(check_loop(f, in2, 3, (int[]){N, 2, 0}, (int[]){1, 0, 0, -1}));
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]), tg_tensor_free(in2[i]);
    tg_graph_free(f);
}

/* Shape ops and indexing: transpose, reshape, expand_dims, squeeze, broadcast_to, slices,
 * take with fixed indices, concatenate, stack. */
static void test_shape_ops(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 2, SH(2, 3));
    tg_var *v = tg_input(f, "v", TG_DT_F64, 1, SH(3));
    tg_slice sl[2] = {{.start = 1, .omit = TG_SLICE_NO_STOP | TG_SLICE_NO_STEP},
                      {.step = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP}};
    int64_t idx[2] = {2, 0};
    tg_tensor *it = tg_tensor_from_data(ctx, TG_DT_I64, 1, SH(2), idx);
    tg_var *ind = tg_constant(f, it);
    tg_tensor_free(it);
    tg_var *xv[2] = {x, tg_apply(f, "expand_dims", &v, 1, &TG_A_INTS("axis", SH(0), 1), 1)};
    tg_var *tk[2] = {x, ind};
    tg_var *outs[] = {
        tg_transpose(f, x, NULL),
        tg_reshape(f, x, 2, SH(3, -1)),
        tg_apply(f, "squeeze", &xv[1], 1, NULL, 0),
        tg_apply(f, "broadcast_to", &v, 1, &TG_A_INTS("shape", SH(4, 3), 2), 1),
        tg_slice_apply(f, x, sl, 2),
        tg_apply(f, "take", tk, 2, &TG_A_INT("axis", 1), 1),
        tg_apply(f, "concatenate", xv, 2, &TG_A_INT("axis", 0), 1),
        tg_apply(f, "stack", (tg_var *[]){v, v}, 2, &TG_A_INT("axis", -1), 1),
    };
    assert_int_equal(tg_graph_set_outputs(f, outs, 8), TG_OK);
    tg_tensor *in[2] = {rnd(3, SH(2, 4, 3), 13), rnd(2, SH(4, 3), 14)};
    tg_graph_free(check_loop(f, in, 2, (int[]){1, 0}, NULL));
    tg_tensor *in1[2] = {rnd(3, SH(1, 2, 3), 15), rnd(1, SH(3), 16)};
    tg_graph_free(check_loop(f, in1, 2, (int[]){0, N}, NULL)); /* a batch of one */
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]), tg_tensor_free(in1[i]);
    tg_graph_free(f);
}

/* The logistic loss of one example and its gradient with respect to the weights, taken
 * inside the function: vectorized, the per-example gradients. */
static tg_graph *logistic_grad(void) {
    tg_graph *f = tg_graph_new(ctx, "loss");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, SH(5));
    tg_var *y = tg_input(f, "y", TG_DT_F64, 0, NULL);
    tg_var *w = tg_input(f, "w", TG_DT_F64, 1, SH(5));
    tg_var *z = tg_dot(f, x, w);
    tg_var *l = tg_sub(f, tg_softplus(f, z), tg_mul(f, y, z));
    tg_var *gw;
    assert_int_equal(tg_grad(f, l, &w, 1, TG_DISCONNECTED_ERROR, &gw), TG_OK);
    tg_var *outs[2] = {gw, l};
    assert_int_equal(tg_graph_set_outputs(f, outs, 2), TG_OK);
    return f;
}

static void test_per_example_gradients(void **state) {
    (void)state;
    tg_graph *f = logistic_grad();
    tg_tensor *in[3] = {rnd(2, SH(6, 5), 17), rnd(1, SH(6), 18), rnd(1, SH(5), 19)};
    tg_graph *g = check_loop(f, in, 3, (int[]){0, 0, N}, (int[]){0, 0});
    /* ordinary graph: no call, no pmap, nothing but the ops of the batched body */
    FILE *mem = tmpfile();
    assert_int_equal(tg_graph_print(g, mem), TG_OK);
    rewind(mem);
    char line[512];
    while (fgets(line, sizeof line, mem)) {
        assert_null(strstr(line, "call("));
        assert_null(strstr(line, "loss("));
    }
    fclose(mem);
    tg_graph_free(g);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_graph_free(f);
}

/* The gradient of a vectorized function, through the checker; and the gradient of the
 * batch-summed per-example losses equals the sum of the per-example gradients. */
static void test_grad_of_vectorized(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, SH(3));
    tg_var *W = tg_input(f, "W", TG_DT_F64, 2, SH(3, 2));
    tg_var *h = tg_tanh(f, tg_matmul(f, x, W));
    tg_var *o = tg_reduce(f, "logsumexp", h, NULL, -1, false);
    assert_int_equal(tg_graph_set_outputs(f, &o, 1), TG_OK);
    tg_graph *g = tg_graph_new(ctx, "main");
    tg_var *args[2] = {tg_input(g, "X", TG_DT_F64, 2, SH(3, 4)),
                       tg_input(g, "W", TG_DT_F64, 2, SH(3, 2))};
    tg_var *y;
    int nouts = 1;
    assert_int_equal(tg_vectorize(g, f, args, 2, (int[]){1, N}, NULL, &y, &nouts), TG_OK);
    tg_var *sq = tg_mul(g, y, y);
    assert_int_equal(tg_graph_set_outputs(g, &sq, 1), TG_OK);
    tg_tensor *in[2] = {rnd(2, SH(3, 4), 20), rnd(2, SH(3, 2), 21)};
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT(0);
    tg_status st = tg_grad_check(g, in, 2, NULL, &rep);
    if (st != TG_OK) print_error("%s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]);
    tg_graph_free(g);
    tg_graph_free(f);
}

/* Calls inside the body, nested vectorize (a vectorized function vectorized again), and
 * vectorize inside a pmap body. */
static void test_calls_nested_pmap(void **state) {
    (void)state;
    tg_graph *sq = tg_graph_new(ctx, "sq");
    tg_var *s = tg_input(sq, "s", TG_DT_F64, 1, SH(3));
    tg_var *s2 = tg_mul(sq, s, s);
    assert_int_equal(tg_graph_set_outputs(sq, &s2, 1), TG_OK);
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, SH(3));
    tg_var *c = tg_input(f, "c", TG_DT_F64, 0, NULL);
    tg_var *q;
    int one = 1;
    assert_int_equal(tg_call(f, sq, &x, 1, &q, &one), TG_OK);
    tg_var *r = tg_reduce(f, "sum", tg_mul(f, q, c), NULL, -1, false);
    assert_int_equal(tg_graph_set_outputs(f, &r, 1), TG_OK);
    /* h(X: [4,3], c) = vectorize(f, X, c, in_axes=[0, none]) */
    tg_graph *h = tg_graph_new(ctx, "h");
    tg_var *hx[2] = {tg_input(h, "X", TG_DT_F64, 2, SH(4, 3)),
                     tg_input(h, "c", TG_DT_F64, 0, NULL)};
    tg_var *hy;
    one = 1;
    assert_int_equal(tg_vectorize(h, f, hx, 2, (int[]){0, N}, NULL, &hy, &one), TG_OK);
    assert_int_equal(tg_graph_set_outputs(h, &hy, 1), TG_OK);
    tg_tensor *in[2] = {rnd(3, SH(4, 3, 2), 22), rnd(1, SH(2), 23)};
    tg_graph_free(check_loop(h, in, 2, (int[]){2, 0}, (int[]){1}));
    /* a pmap whose body vectorizes */
    tg_graph *main = tg_graph_new(ctx, "main");
    tg_var *mx[2] = {tg_input(main, "X", TG_DT_F64, 3, SH(2, 4, 3)),
                     tg_input(main, "c", TG_DT_F64, 0, NULL)};
    tg_attr pa[3] = {TG_A_FUNC("body", h),
                     TG_A_STR("axis_name", "d"),
                     {.name = "in_axes",
                      .kind = TG_ATTR_INTS,
                      .ints = SH(0, 0),
                      .n = 2,
                      .none = (const bool[]){false, true}}};
    tg_var *py = tg_apply(main, "pmap", mx, 2, pa, 3);
    assert_non_null(py);
    assert_int_equal(tg_graph_set_outputs(main, &py, 1), TG_OK);
    tg_tensor *pin[2] = {rnd(3, SH(2, 4, 3), 24), rnd(0, NULL, 25)};
    tg_tensor **got = call(main, TG_MODE_VM, pin, 2);
    for (int64_t b = 0; b < 2; b++) {
        tg_tensor *sl[2] = {slice_at(pin[0], 0, b), tg_tensor_dup(pin[1])};
        tg_tensor **want = call(h, TG_MODE_REFERENCE, sl, 2);
        tg_tensor *gk = slice_at(got[0], 0, b);
        expect_close(gk, want[0], 1e-10);
        tg_tensor_free(gk);
        tg_tensor_free(want[0]);
        free(want);
        tg_tensor_free(sl[0]);
        tg_tensor_free(sl[1]);
    }
    tg_tensor_free(got[0]);
    free(got);
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]), tg_tensor_free(pin[i]);
    tg_graph_free(main);
    tg_graph_free(h);
    tg_graph_free(f);
    tg_graph_free(sq);
}

/* Outputs that depend on no mapped input: out_axes none returns them once, an int
 * broadcasts them over the batch. */
static void test_unbatched_outputs(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, SH(3));
    tg_var *w = tg_input(f, "w", TG_DT_F64, 1, SH(3));
    tg_var *outs[3] = {tg_mul(f, x, w), tg_exp(f, w), tg_neg(f, w)};
    assert_int_equal(tg_graph_set_outputs(f, outs, 3), TG_OK);
    tg_tensor *in[2] = {rnd(2, SH(3, 4), 26), rnd(1, SH(3), 27)};
    tg_graph_free(check_loop(f, in, 2, (int[]){-1, N}, (int[]){-1, N, 1}));
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]);
    tg_graph_free(f);
}

static void test_errors(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(ctx, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, SH(3));
    tg_var *y = tg_input(f, "y", TG_DT_F64, 1, SH(3));
    tg_var *o = tg_add(f, x, y);
    assert_int_equal(tg_graph_set_outputs(f, &o, 1), TG_OK);
    struct {
        const int64_t *xs, *ys;
        int in_axes[2], out_axes[1];
        tg_status st;
        const char *msg;
    } cases[] = {
        {SH(4, 3),
         SH(3, 5),
         {0, 1},
         {0},
         TG_ESHAPE,
         "vectorize: input 1 'xs' has extent 4 along its mapped axis 0, but input 2 'ys' has 5 "
         "along axis 1"},
        {SH(4, 3), SH(3, 5), {2, 1}, {0}, TG_EINVAL, "in_axes[0] = 2 is out of range"},
        {SH(4, 3), SH(3, 4), {0, 0}, {0}, TG_ESHAPE, "input 2 'ys' gives slices of type f64[4]"},
        {SH(4, 3), SH(3, 4), {0, 1}, {N}, TG_EINVAL, "out_axes[0] cannot be none"},
        {SH(4, 3), SH(3, 4), {0, 1}, {3}, TG_EINVAL, "out_axes[0] = 3 is out of range"},
        {SH(3, 3), SH(3, 3), {N, N}, {0}, TG_EINVAL, "no input is mapped"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_graph *g = tg_graph_new(ctx, "main");
        tg_var *a[2] = {tg_input(g, "xs", TG_DT_F64, 2, cases[i].xs),
                        tg_input(g, "ys", TG_DT_F64, 2, cases[i].ys)};
        tg_var *out;
        int n = 1;
        tg_status st = tg_vectorize(g, f, a, 2, cases[i].in_axes, cases[i].out_axes, &out, &n);
        if (st != cases[i].st) print_error("case %zu: %s\n", i, tg_graph_error(g));
        assert_int_equal(st, cases[i].st);
        if (!strstr(tg_graph_error(g), cases[i].msg)) {
            print_error("case %zu: '%s' lacks '%s'\n", i, tg_graph_error(g), cases[i].msg);
            fail();
        }
        tg_graph_free(g);
    }
    /* an op with no batching rule is named, with its function */
    tg_graph *m = tg_graph_new(ctx, "m");
    tg_var *mx = tg_input(m, "x", TG_DT_F64, 1, SH(3));
    tg_var *mi = tg_input(m, "i", TG_DT_I64, 1, SH(2));
    tg_var *mo = tg_apply(m, "take", (tg_var *[]){mx, mi}, 2, NULL, 0);
    assert_int_equal(tg_graph_set_outputs(m, &mo, 1), TG_OK);
    tg_graph *g = tg_graph_new(ctx, "main");
    tg_var *a[2] = {tg_input(g, "x", TG_DT_F64, 1, SH(3)),
                    tg_input(g, "i", TG_DT_I64, 2, SH(4, 2))};
    tg_var *out;
    int n = 1;
    assert_int_equal(tg_vectorize(g, m, a, 2, (int[]){N, 0}, NULL, &out, &n), TG_EUNSUPPORTED);
    assert_non_null(strstr(tg_graph_error(g), "vectorize: take in 'm': its indices vary"));
    tg_graph_free(g);
    tg_graph_free(m);
    tg_graph_free(f);
}

int main(void) {
    ctx = tg_ctx_default();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elemwise_and_axes),
        cmocka_unit_test(test_products),
        cmocka_unit_test(test_matmul_stacks),
        cmocka_unit_test(test_shape_ops),
        cmocka_unit_test(test_per_example_gradients),
        cmocka_unit_test(test_grad_of_vectorized),
        cmocka_unit_test(test_calls_nested_pmap),
        cmocka_unit_test(test_unbatched_outputs),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
