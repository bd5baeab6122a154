/* test_composite.c - the composites (relu, square, log_sigmoid, logit, swapaxes, moveaxis,
 * einsum) through the public API: what they are built as (no node of their own), their
 * values against NumPy 1.24 pasted as literals, their types, and their errors (which name
 * the subscripts and the operand's type for einsum). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tgraph.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static tg_var *apply1(tg_graph *g, const char *op, tg_var *x, const tg_attr *a, int na) {
    return tg_apply(g, op, &x, 1, a, na);
}

/* Compiles g with outputs outs, calls it on in and checks output 0 against vals. */
static void check(tg_graph *g, tg_var *out, tg_tensor *const *in, int nin, const double *vals,
                  int64_t n) {
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    tg_tensor *res = NULL;
    tg_status st = tg_fn_call(f, in, nin, &res, 1);
    if (st != TG_OK) print_message("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    assert_int_equal(tg_tensor_size(res), n);
    for (int64_t i = 0; i < n; i++) {
        double a = tg_tensor_get_f64(res, i);
        bool ok = (isnan(a) && isnan(vals[i])) || fabs(a - vals[i]) <= 1e-12 * fmax(1, fabs(a));
        if (!ok) print_message("element %lld: %.17g, expected %.17g\n", (long long)i, a, vals[i]);
        assert_true(ok);
    }
    tg_tensor_free(res);
    tg_fn_free(f);
}

static void expect_error(tg_graph *g, const char *msg) {
    assert_int_not_equal(tg_graph_status(g), TG_OK);
    if (!strstr(tg_graph_error(g), msg)) print_message("error was: %s\n", tg_graph_error(g));
    assert_non_null(strstr(tg_graph_error(g), msg));
}

static void test_conveniences(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "conv");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, SHAPE(4));
    tg_var *r = apply1(g, "relu", x, NULL, 0);
    tg_var *s = apply1(g, "square", x, NULL, 0);
    tg_var *ls = apply1(g, "log_sigmoid", x, NULL, 0);
    tg_var *lg = apply1(g, "logit", apply1(g, "sigmoid", x, NULL, 0), NULL, 0);
    tg_var *sum = tg_add(g, tg_add(g, r, s), tg_add(g, ls, lg));
    double xv[4] = {-2.0, 0.0, NAN, 3.0};
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_F64, 1, SHAPE(4), xv);
    /* relu + x^2 + log(sigmoid(x)) + x: np.maximum(x, 0) + x**2 - np.logaddexp(0, -x) + x */
    double want[4] = {-0.12692801104297263, -0.6931471805599453, NAN, 14.951412648426274};
    check(g, sum, &t, 1, want, 4);
    tg_tensor_free(t);
    tg_graph_free(g);

    /* integer inputs: log_sigmoid of i32 computes in f64, of u8 in f32; square keeps i32 */
    g = tg_graph_new(NULL, "ints");
    tg_var *i = tg_input(g, "i", TG_DT_I32, 1, SHAPE(3));
    tg_var *u = tg_input(g, "u", TG_DT_U8, 1, SHAPE(3));
    assert_int_equal(tg_var_dtype(apply1(g, "log_sigmoid", i, NULL, 0)), TG_DT_F64);
    assert_int_equal(tg_var_dtype(apply1(g, "logit", u, NULL, 0)), TG_DT_F32);
    assert_int_equal(tg_var_dtype(apply1(g, "square", i, NULL, 0)), TG_DT_I32);
    assert_int_equal(tg_var_dtype(apply1(g, "relu", u, NULL, 0)), TG_DT_U8);
    /* composites make no node of their own: relu is where(le(x, 0), 0, x) */
    int before = tg_graph_node_count(g);
    apply1(g, "relu", i, NULL, 0);
    assert_int_equal(tg_graph_node_count(g), before + 2);
    tg_graph_free(g);
}

static void test_axes_moves(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "moves");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 4, SHAPE(2, 3, 4, 5));
    tg_attr sw[2] = {TG_A_INT("axis1", 0), TG_A_INT("axis2", -1)};
    tg_var *y = apply1(g, "swapaxes", x, sw, 2);
    assert_int_equal(tg_var_dim(y, 0), 5);
    assert_int_equal(tg_var_dim(y, 3), 2);
    int64_t src[2] = {0, 1}, dst[2] = {-1, 0};
    tg_attr mv[2] = {TG_A_INTS("source", src, 2), TG_A_INTS("destination", dst, 2)};
    tg_var *z = apply1(g, "moveaxis", x, mv, 2); /* np.moveaxis: (3, 4, 5, 2) */
    const int64_t want[4] = {3, 4, 5, 2};
    for (int d = 0; d < 4; d++) assert_int_equal(tg_var_dim(z, d), want[d]);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "errors");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    tg_attr bad[2] = {TG_A_INT("axis1", 0), TG_A_INT("axis2", 2)};
    assert_null(apply1(g, "swapaxes", x, bad, 2));
    expect_error(g, "swapaxes: axis2 2 is out of bounds for an array of dimension 2 (f32[2,3])");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "errors");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    int64_t s2[2] = {0, 0}, d2[2] = {0, 1};
    tg_attr rep[2] = {TG_A_INTS("source", s2, 2), TG_A_INTS("destination", d2, 2)};
    assert_null(apply1(g, "moveaxis", x, rep, 2));
    expect_error(g, "moveaxis: repeated axis in `source` argument");
    tg_graph_free(g);

    g = tg_graph_new(NULL, "errors");
    x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    tg_attr miss = TG_A_INT("axis1", 0);
    assert_null(apply1(g, "swapaxes", x, &miss, 1));
    expect_error(g, "swapaxes: missing attribute 'axis2'");
    tg_graph_free(g);
}

static void test_einsum_values(void **state) {
    (void)state;
    /* A = np.arange(6.).reshape(2, 3), B = np.arange(12.).reshape(3, 4) - 5 */
    double av[6], bv[12];
    for (int i = 0; i < 6; i++) av[i] = i;
    for (int i = 0; i < 12; i++) bv[i] = i - 5;
    tg_tensor *ta = tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(2, 3), av);
    tg_tensor *tb = tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(3, 4), bv);
    tg_tensor *in[2] = {ta, tb};
    static const struct {
        const char *subs;
        double want[12];
        int n;
    } cases[] = {
        /* np.einsum("ij,jk->ki", A, B).ravel() */
        {"ij,jk->ki", {5, -4, 8, 8, 11, 20, 14, 32}, 8},
        /* np.einsum("ij,jk", A, B).ravel() */
        {"ij,jk", {5, 8, 11, 14, -4, 8, 20, 32}, 8},
        /* np.einsum("ij,jk->", A, B) */
        {"ij,jk->", {94}, 1},
        /* np.einsum("ij,jk->j", A, B) */
        {"ij,jk->j", {-42, 10, 126}, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tg_graph *g = tg_graph_new(NULL, "einsum");
        tg_var *ops[2] = {tg_input(g, "A", TG_DT_F64, 2, SHAPE(2, 3)),
                          tg_input(g, "B", TG_DT_F64, 2, SHAPE(3, 4))};
        tg_attr a = TG_A_STR("subscripts", cases[c].subs);
        tg_var *y = tg_apply(g, "einsum", ops, 2, &a, 1);
        check(g, y, in, 2, cases[c].want, cases[c].n);
        tg_graph_free(g);
    }
    /* trace and diagonal of np.arange(9.).reshape(3, 3) */
    double qv[9];
    for (int i = 0; i < 9; i++) qv[i] = i;
    tg_tensor *tq = tg_tensor_from_data(NULL, TG_DT_F64, 2, SHAPE(3, 3), qv);
    tg_graph *g = tg_graph_new(NULL, "diag");
    tg_var *q = tg_input(g, "Q", TG_DT_F64, 2, SHAPE(3, 3));
    tg_attr a = TG_A_STR("subscripts", "ii->i");
    check(g, apply1(g, "einsum", q, &a, 1), &tq, 1, (const double[]){0, 4, 8}, 3);
    tg_graph_free(g);
    tg_tensor_free(tq);
    tg_tensor_free(ta);
    tg_tensor_free(tb);
}

static void test_einsum_types(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "types");
    tg_var *a = tg_input(g, "A", TG_DT_I8, 3, SHAPE(-1, 3, 4));
    tg_var *b = tg_input(g, "B", TG_DT_I8, 3, SHAPE(1, 4, 5));
    tg_attr s = TG_A_STR("subscripts", "...ij,...jk->...ik");
    tg_var *y = tg_apply(g, "einsum", (tg_var *[]){a, b}, 2, &s, 1);
    assert_non_null(y);
    assert_int_equal(tg_var_dtype(y), TG_DT_I8); /* np.einsum keeps i8 */
    assert_int_equal(tg_var_ndim(y), 3);
    assert_int_equal(tg_var_dim(y, 1), 3);
    assert_int_equal(tg_var_dim(y, 2), 5);
    tg_attr r = TG_A_STR("subscripts", "bij->");
    y = tg_apply(g, "einsum", &a, 1, &r, 1);
    assert_int_equal(tg_var_dtype(y), TG_DT_I8);
    assert_int_equal(tg_var_ndim(y), 0);
    tg_graph_free(g);
}

static void test_einsum_errors(void **state) {
    (void)state;
    static const struct {
        const char *subs;
        const char *msg;
    } cases[] = {
        {"ij,jk->ik,", "einsum: subscripts 'ij,jk->ik,': text after the output term"},
        {"ij,kl,lm", "einsum: subscripts 'ij,kl,lm': more terms than the 2 operands"},
        {"ij", "einsum: subscripts 'ij': 2 operands but 1 terms"},
        {"ijk,jk", "einsum: subscripts 'ijk,jk': operand 0 (f32[2,3]): the term has 3 subscripts "
                   "for 2 dimensions"},
        {"ij,ik", "einsum: subscripts 'ij,ik': operand 1 (f32[4,5]): subscript 'i' has extent 4 "
                  "here and 2 in operand 0 (f32[2,3])"},
        {"ij,jk->iz", "einsum: subscripts 'ij,jk->iz': output subscript 'z' is in no input term"},
        {"ij,jk->ii", "einsum: subscripts 'ij,jk->ii': output subscript 'i' is repeated"},
        {"i1,jk", "einsum: subscripts 'i1,jk': '1' is not a subscript letter (a-z, A-Z)"},
        {"ij,j.k", "einsum: subscripts 'ij,j.k': operand 1 (f32[4,5]): '.' must be part of one "
                   "'...' per term"},
        {"ii,jk", "einsum: subscripts 'ii,jk': operand 0 (f32[2,3]): the repeated subscript 'i' "
                  "has unequal extents (2 and 3)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tg_graph *g = tg_graph_new(NULL, "errors");
        tg_var *ops[2] = {tg_input(g, "A", TG_DT_F32, 2, SHAPE(2, 3)),
                          tg_input(g, "B", TG_DT_F32, 2, SHAPE(4, 5))};
        tg_attr a = TG_A_STR("subscripts", cases[c].subs);
        assert_null(tg_apply(g, "einsum", ops, 2, &a, 1));
        expect_error(g, cases[c].msg);
        tg_graph_free(g);
    }
    tg_graph *g = tg_graph_new(NULL, "errors");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 2, SHAPE(2, 3));
    assert_null(tg_apply(g, "einsum", &x, 1, NULL, 0));
    expect_error(g, "einsum: missing attribute 'subscripts'");
    tg_graph_free(g);
    g = tg_graph_new(NULL, "errors");
    assert_null(tg_apply(g, "einsum", NULL, 0, NULL, 0));
    expect_error(g, "einsum: expects at least 1 inputs, got 0");
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conveniences),  cmocka_unit_test(test_axes_moves),
        cmocka_unit_test(test_einsum_values), cmocka_unit_test(test_einsum_types),
        cmocka_unit_test(test_einsum_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
