/* test_grad_ops.c - reverse-mode gradients of the reductions (reduce.c), shape ops
 * (shape.c), linear algebra (linalg.c), gathers and scatters (index.c) and joins and
 * constructors (join.c).
 *
 * Every differentiable op is checked with finite differences (tg_grad_check) on seeded
 * random inputs of several shapes: broadcasting, '?' extents (which take the shape()
 * paths of the VJPs), keepdims true and false, negative axes, negative-step slices and
 * repeated indices. The documented choices are checked with exact values: max/min
 * split the cotangent among ties (a NaN slice gets 0), prod is exact where x has zeros (also its
 * second derivative), set_take with repeated indices gives y's gradient to the occurrence that was
 * written last, ops with integer results pass nothing. Plus the classic cases: the gradient of
 * sum(add(x: f64[?,?], b: f64[1,?])) with respect to b keeps b's type and sums over dim 0; dot's
 * gradients are (g . Y^T, X^T . g) against explicit numbers; a Hessian-vector product of a small
 * MLP loss (the gradient of grad . v) against finite differences of the gradient.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/ops.h"

/* ---- helpers ---- */

typedef struct rng {
    uint64_t s;
} rng;

static double urand(rng *r) { /* uniform in [0, 1) (splitmix64) */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

#define NA(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SH(...)                                                                                    \
    NA(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }
#define SH0    0, NULL
#define V(...) ((const double[]){__VA_ARGS__})
#define Q      TG_DIM_UNKNOWN
#define F64    TG_DT_F64
#define F32    TG_DT_F32
#define I64    TG_DT_I64

/* Uniform values in [-1.5, 1.5] (seeded). */
static tg_tensor *rnd(uint64_t seed, tg_dtype dt, int nd, const int64_t *shape) {
    rng r = {seed};
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, 3.0 * urand(&r) - 1.5);
        tg_index_next(nd, shape, idx);
    }
    return t;
}

static tg_tensor *tensor(tg_dtype dt, int nd, const int64_t *shape, const double *v) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, v[i]);
        tg_index_next(nd, shape, idx);
    }
    return t;
}

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

static tg_graph *graph(void) {
    tg_graph *g = tg_graph_new(NULL, "t");
    assert_non_null(g);
    return g;
}

static tg_var *input(tg_graph *g, const char *name, tg_dtype dt, int nd, const int64_t *shape) {
    tg_var *v = tg_input(g, name, dt, nd, shape);
    assert_non_null(v);
    return v;
}

static tg_var *apply1(tg_graph *g, const char *op, tg_var *x, const tg_attr *a, int na) {
    return tg_apply(g, op, &x, 1, a, na);
}

static tg_var *reduce(tg_graph *g, const char *op, tg_var *x, int naxes, const int64_t *axes,
                      bool keep) {
    return tg_reduce(g, op, x, axes, naxes, keep);
}

/* Sets out as g's output, expects tg_grad_check to pass, frees g and the inputs. */
static void check(tg_graph *g, tg_var *out, tg_tensor **in, int nin, const char *what) {
    if (!out) print_error("%s: building failed: %s\n", what, tg_graph_error(g));
    assert_non_null(out);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 7);
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, in, nin, &o, &rep);
    if (st != TG_OK) print_error("%s: %s\n", what, tg_last_error());
    assert_int_equal(st, TG_OK);
    assert_true(rep.input >= 0);
    tg_graph_free(g);
    free_all(in, nin);
}

/* Runs g (outputs outs) on in; out[] receives the results. */
static void run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                tg_tensor **out) {
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) print_error("building failed: %s\n", tg_graph_error(g));
        assert_non_null(outs[i]);
    }
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    tg_status st = tg_graph_compile(g, NULL, &f);
    if (st == TG_OK) st = tg_fn_call(f, in, nin, out, nout);
    if (st != TG_OK) print_error("run: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(f);
}

/* Expects t to hold want (C order) within tol. */
static void expect(const tg_tensor *t, int nd, const int64_t *shape, const double *want,
                   double tol) {
    assert_non_null(t);
    assert_int_equal(tg_tensor_ndim(t), nd);
    for (int i = 0; i < nd; i++) assert_int_equal(tg_tensor_shape(t)[i], shape[i]);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        double got = tg_tensor_get_f64(t, i);
        if (!(fabs(got - want[i]) <= tol))
            print_error("element %lld: got %.17g, want %.17g\n", (long long)i, got, want[i]);
        assert_true(fabs(got - want[i]) <= tol);
    }
}

/* The gradient of sum(y * c) (c a constant of y's static type, seeded) with respect to x,
 * evaluated on in: exercises a VJP directly, with a known cotangent. */
static tg_tensor *vjp_value(tg_graph *g, tg_var *y, tg_var *x, tg_tensor *cot, tg_tensor **in,
                            int nin) {
    assert_non_null(y);
    tg_var *c = tg_constant(g, cot), *gx = NULL;
    assert_int_equal(tg_vjp(g, &y, &c, 1, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_tensor *out = NULL;
    run(g, &gx, 1, in, nin, &out);
    return out;
}

/* ---- reductions ---- */

static void test_sum_mean(void **state) {
    (void)state;
    static const char *const ops[] = {"sum", "mean"};
    for (int o = 0; o < 2; o++) {
        for (int keep = 0; keep < 2; keep++) {
            const char *op = ops[o];
            tg_graph *g = graph(); /* all axes of a 2-D input */
            tg_var *x = input(g, "x", F64, SH(3, 4));
            check(g, reduce(g, op, x, -1, NULL, keep), (tg_tensor *[]){rnd(1, F64, SH(3, 4))}, 1,
                  op);
            g = graph(); /* one negative axis of a 3-D input */
            x = input(g, "x", F64, SH(2, 3, 4));
            check(g, reduce(g, op, x, 1, (int64_t[]){-1}, keep),
                  (tg_tensor *[]){rnd(2, F64, SH(2, 3, 4))}, 1, op);
            g = graph(); /* two axes, given out of order */
            x = input(g, "x", F64, SH(2, 3, 4));
            check(g, reduce(g, op, x, 2, (int64_t[]){2, 0}, keep),
                  (tg_tensor *[]){rnd(3, F64, SH(2, 3, 4))}, 1, op);
            g = graph(); /* '?' extents: alloc with shape(x), a count from shape(x) */
            x = input(g, "x", F64, SH(Q, 3, Q));
            check(g, reduce(g, op, x, 2, (int64_t[]){0, -1}, keep),
                  (tg_tensor *[]){rnd(4, F64, SH(4, 3, 2))}, 1, op);
            g = graph(); /* f32, a 0-d input, no axis at all */
            x = input(g, "x", F32, SH(5));
            check(g, reduce(g, op, x, 0, (int64_t[]){0}, keep), (tg_tensor *[]){rnd(5, F32, SH(5))},
                  1, op);
            g = graph();
            x = input(g, "x", F64, SH0);
            check(g, reduce(g, op, x, -1, NULL, keep), (tg_tensor *[]){rnd(6, F64, SH0)}, 1, op);
        }
    }
}

static void test_mean_values(void **state) {
    (void)state;
    /* d mean(x, axis=1) / dx with cotangent [1, 2]: 1/3 and 2/3 per row, for a '?' axis */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, Q));
    tg_tensor *in[] = {rnd(1, F64, SH(2, 3))};
    tg_tensor *cot = tensor(F64, SH(2), V(1, 2));
    tg_tensor *gx = vjp_value(g, reduce(g, "mean", x, 1, (int64_t[]){1}, false), x, cot, in, 1);
    expect(gx, SH(2, 3), V(1. / 3, 1. / 3, 1. / 3, 2. / 3, 2. / 3, 2. / 3), 1e-15);
    tg_tensor_free(gx);
    tg_tensor_free(cot);
    tg_graph_free(g);
    free_all(in, 1);
}

static void test_prod(void **state) {
    (void)state;
    for (int keep = 0; keep < 2; keep++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3, 4));
        check(g, reduce(g, "prod", x, 1, (int64_t[]){-1}, keep),
              (tg_tensor *[]){rnd(11, F64, SH(3, 4))}, 1, "prod");
        g = graph();
        x = input(g, "x", F64, SH(Q, 3));
        check(g, reduce(g, "prod", x, -1, NULL, keep), (tg_tensor *[]){rnd(12, F64, SH(2, 3))}, 1,
              "prod all");
    }
    /* rows with no zero, one zero and two zeros: exact (the function is multilinear) */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3, 3));
    tg_tensor *in[] = {tensor(F64, SH(3, 3), V(2, -3, 0.5, 4, 0, -1.5, 0, 0.25, 0))};
    tg_tensor *cot = tensor(F64, SH(3), V(1, 1, 1));
    tg_tensor *gx = vjp_value(g, reduce(g, "prod", x, 1, (int64_t[]){1}, false), x, cot, in, 1);
    expect(gx, SH(3, 3), V(-1.5, 1, -6, 0, -6, 0, 0, 0, 0), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(cot);
    tg_graph_free(g);
    free_all(in, 1);
}

/* The second derivative of prod is exact at zeros too: the checker run on a graph whose
 * output is the VJP of prod. */
static void test_prod_second_order(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 3));
    tg_var *y = reduce(g, "prod", x, 1, (int64_t[]){1}, false);
    tg_tensor *ct = tensor(F64, SH(2), V(0.7, -1.3));
    tg_var *c = tg_constant(g, ct), *gx = NULL;
    tg_tensor_free(ct);
    assert_int_equal(tg_vjp(g, &y, &c, 1, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    check(g, gx, (tg_tensor *[]){tensor(F64, SH(2, 3), V(1.5, 0, -2, 0.5, 1.25, -0.75))}, 1,
          "prod second order");
    /* rows with one zero and with two zeros */
    g = graph();
    x = input(g, "x", F64, SH(2, 3));
    y = reduce(g, "prod", x, 1, (int64_t[]){-1}, true);
    ct = tensor(F64, SH(2, 1), V(0.7, -1.3));
    c = tg_constant(g, ct);
    tg_tensor_free(ct);
    assert_int_equal(tg_vjp(g, &y, &c, 1, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    check(g, gx, (tg_tensor *[]){tensor(F64, SH(2, 3), V(1.5, 0, -2, 0, 1.25, 0))}, 1,
          "prod second order, zeros");
}

static void test_max_min(void **state) {
    (void)state;
    static const char *const ops[] = {"max", "min"};
    for (int o = 0; o < 2; o++) {
        for (int keep = 0; keep < 2; keep++) {
            tg_graph *g = graph();
            tg_var *x = input(g, "x", F64, SH(3, 4));
            check(g, reduce(g, ops[o], x, 1, (int64_t[]){0}, keep),
                  (tg_tensor *[]){rnd(21, F64, SH(3, 4))}, 1, ops[o]);
            g = graph();
            x = input(g, "x", F64, SH(Q, 2, Q));
            check(g, reduce(g, ops[o], x, 2, (int64_t[]){-1, 0}, keep),
                  (tg_tensor *[]){rnd(22, F64, SH(3, 2, 4))}, 1, ops[o]);
            g = graph();
            x = input(g, "x", F32, SH(5));
            check(g, reduce(g, ops[o], x, -1, NULL, keep), (tg_tensor *[]){rnd(23, F32, SH(5))}, 1,
                  ops[o]);
        }
    }
    /* ties split the cotangent evenly: [3, 1, 3, 3] -> 1/3 each for the three 3s; a row
     * with a NaN has NaN gradients */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 4));
    tg_tensor *in[] = {tensor(F64, SH(2, 4), V(3, 1, 3, 3, -1, -2, -1, 5))};
    tg_tensor *cot = tensor(F64, SH(2), V(1, 2));
    tg_tensor *gx = vjp_value(g, reduce(g, "max", x, 1, (int64_t[]){1}, false), x, cot, in, 1);
    expect(gx, SH(2, 4), V(1. / 3, 0, 1. / 3, 1. / 3, 0, 0, 0, 2), 1e-15);
    tg_tensor_free(gx);
    tg_graph_free(g);
    g = graph();
    x = input(g, "x", F64, SH(2, 4));
    gx = vjp_value(g, reduce(g, "min", x, 1, (int64_t[]){1}, false), x, cot, in, 1);
    expect(gx, SH(2, 4), V(0, 1, 0, 0, 0, 2, 0, 0), 0.0);
    tg_tensor_free(gx);
    tg_graph_free(g);
    free_all(in, 1);
    g = graph();
    x = input(g, "x", F64, SH(2, 2));
    in[0] = tensor(F64, SH(2, 2), V(NAN, 1, 2, 1));
    gx = vjp_value(g, reduce(g, "max", x, 1, (int64_t[]){1}, false), x, cot, in, 1);
    expect(gx, SH(2, 2), V(0, 0, 2, 0), 0.0);
    tg_tensor_free(gx);
    tg_tensor_free(cot);
    tg_graph_free(g);
    free_all(in, 1);
}

/* argmax/argmin/any/all carry nothing: a cost that depends on x only through them is
 * disconnected from x. */
static void test_integer_reductions(void **state) {
    (void)state;
    static const char *const ops[] = {"argmax", "argmin", "any", "all"};
    for (int o = 0; o < 4; o++) {
        assert_int_equal(tg_op_table[tg_op_lookup(ops[o])]->grad, TG_GRAD_NONE);
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3));
        tg_var *r = reduce(g, ops[o], x, -1, NULL, false);
        tg_var *cost = tg_add(g, tg_cast(g, r, F64), tg_literal_float(g, 1.0));
        tg_var *gx = NULL;
        assert_int_not_equal(tg_grad(g, cost, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
        assert_non_null(strstr(tg_graph_error(g), "does not depend on 'x'"));
        tg_graph_free(g);
        g = graph();
        x = input(g, "x", F64, SH(3));
        r = reduce(g, ops[o], x, -1, NULL, false);
        cost = tg_add(g, tg_cast(g, r, F64), tg_literal_float(g, 1.0));
        assert_int_equal(tg_grad(g, cost, &x, 1, TG_DISCONNECTED_ZERO, &gx), TG_OK);
        tg_tensor *in[] = {rnd(1, F64, SH(3))}, *out = NULL;
        run(g, &gx, 1, in, 1, &out);
        expect(out, SH(3), V(0, 0, 0), 0.0);
        tg_tensor_free(out);
        tg_graph_free(g);
        free_all(in, 1);
    }
}

/* ---- shape ops ---- */

static void test_reshape(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 3, 2));
    check(g, tg_reshape(g, x, 2, (int64_t[]){4, -1}), (tg_tensor *[]){rnd(31, F64, SH(2, 3, 2))}, 1,
          "reshape static");
    g = graph(); /* one '?': reshaped back with a -1 */
    x = input(g, "x", F64, SH(Q, 6));
    check(g, tg_reshape(g, x, 3, (int64_t[]){-1, 2, 3}), (tg_tensor *[]){rnd(32, F64, SH(2, 6))}, 1,
          "reshape one ?");
    g = graph(); /* two '?': reshaped back with extents from shape(x) */
    x = input(g, "x", F64, SH(Q, 2, Q));
    check(g, tg_reshape(g, x, 1, (int64_t[]){-1}), (tg_tensor *[]){rnd(33, F64, SH(3, 2, 2))}, 1,
          "reshape two ?");
    g = graph(); /* to and from 0-d */
    x = input(g, "x", F64, SH(1, 1));
    check(g, tg_reshape(g, x, 0, NULL), (tg_tensor *[]){rnd(34, F64, SH(1, 1))}, 1, "reshape 0-d");
}

/* The form with dimension inputs that the reshape gradient uses: static extents from
 * constant inputs, '?' otherwise, checked at run time. */
static void test_reshape_dims_form(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q, Q));
    tg_var *n = input(g, "n", I64, SH0);
    tg_var *y = tg_apply(g, "reshape", (tg_var *[]){x, tg_literal_int(g, 2), n}, 3, NULL, 0);
    assert_non_null(y);
    assert_int_equal(tg_var_dim(y, 0), 2);
    assert_int_equal(tg_var_dim(y, 1), Q);
    tg_tensor *in[] = {rnd(1, F64, SH(3, 2)), tensor(I64, SH0, V(3))}, *out = NULL;
    run(g, &y, 1, in, 2, &out);
    assert_int_equal(tg_tensor_ndim(out), 2);
    assert_int_equal(tg_tensor_shape(out)[0], 2);
    assert_int_equal(tg_tensor_shape(out)[1], 3);
    for (int64_t i = 0; i < 6; i++)
        assert_true(tg_tensor_get_f64(out, i) == tg_tensor_get_f64(in[0], i));
    tg_tensor_free(out);
    tg_tensor_free(in[1]);
    in[1] = tensor(I64, SH0, V(4)); /* 2 x 4 != 6 elements */
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);
    assert_int_equal(tg_fn_call(f, in, 2, &out, 1), TG_ESHAPE);
    assert_non_null(strstr(tg_last_error(), "cannot reshape 6 elements into shape [2,4]"));
    tg_fn_free(f);
    tg_graph_free(g);
    free_all(in, 2);
    /* both forms at once, or neither, are errors */
    g = graph();
    x = input(g, "x", F64, SH(6));
    tg_attr a = TG_A_INTS("shape", ((int64_t[]){2, 3}), 2);
    assert_null(tg_apply(g, "reshape", (tg_var *[]){x, tg_literal_int(g, 6)}, 2, &a, 1));
    assert_non_null(strstr(tg_graph_error(g), "not both"));
    tg_graph_free(g);
    g = graph();
    x = input(g, "x", F64, SH(6));
    assert_null(tg_apply(g, "reshape", &x, 1, NULL, 0));
    assert_non_null(strstr(tg_graph_error(g), "missing attribute 'shape'"));
    tg_graph_free(g);
}

static void test_transpose(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 3, 4));
    check(g, tg_transpose(g, x, (int64_t[]){1, -1, 0}), (tg_tensor *[]){rnd(41, F64, SH(2, 3, 4))},
          1, "transpose perm");
    g = graph();
    x = input(g, "x", F64, SH(Q, 3));
    check(g, tg_transpose(g, x, NULL), (tg_tensor *[]){rnd(42, F64, SH(2, 3))}, 1,
          "transpose none");
}

static void test_expand_squeeze(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 3));
    tg_attr a = TG_A_INTS("axis", ((int64_t[]){0, -1}), 2);
    check(g, apply1(g, "expand_dims", x, &a, 1), (tg_tensor *[]){rnd(51, F64, SH(2, 3))}, 1,
          "expand_dims");
    g = graph(); /* squeeze every static 1 */
    x = input(g, "x", F64, SH(1, 3, 1, Q));
    check(g, apply1(g, "squeeze", x, NULL, 0), (tg_tensor *[]){rnd(52, F64, SH(1, 3, 1, 2))}, 1,
          "squeeze none");
    g = graph(); /* an explicit '?' axis that is 1 at run time, negative */
    x = input(g, "x", F64, SH(2, Q));
    a = TG_A_INTS("axis", ((int64_t[]){-1}), 1);
    check(g, apply1(g, "squeeze", x, &a, 1), (tg_tensor *[]){rnd(53, F64, SH(2, 1))}, 1,
          "squeeze ?");
}

static void test_broadcast_to(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3, 1));
    tg_attr a = TG_A_INTS("shape", ((int64_t[]){2, 3, 4}), 3);
    check(g, apply1(g, "broadcast_to", x, &a, 1), (tg_tensor *[]){rnd(61, F64, SH(3, 1))}, 1,
          "broadcast_to");
    g = graph();
    x = input(g, "x", F32, SH0);
    a = TG_A_INTS("shape", ((int64_t[]){2, 2}), 2);
    check(g, apply1(g, "broadcast_to", x, &a, 1), (tg_tensor *[]){rnd(62, F32, SH0)}, 1,
          "broadcast_to scalar");
}

static void test_slice(void **state) {
    (void)state;
    /* x[1:, ::-1, 0] */
    tg_slice s[3] = {{.start = 1, .omit = TG_SLICE_NO_STOP | TG_SLICE_NO_STEP},
                     {.step = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP},
                     {.start = 0, .is_index = true}};
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3, 4, 2));
    check(g, tg_slice_apply(g, x, s, 3), (tg_tensor *[]){rnd(71, F64, SH(3, 4, 2))}, 1, "slice");
    g = graph(); /* '?' extents, a step of -2 from the end, an index from the end */
    tg_slice s2[2] = {{.start = -1, .is_index = true}, {.start = -1, .stop = 0, .step = -2}};
    x = input(g, "x", F64, SH(Q, Q));
    check(g, tg_slice_apply(g, x, s2, 2), (tg_tensor *[]){rnd(72, F64, SH(3, 5))}, 1, "slice ?");
}

/* ---- linear algebra ---- */

static void dot_case(const char *op, tg_dtype dt, int na, const int64_t *sa, const int64_t *ra,
                     int nb, const int64_t *sb, const int64_t *rb, uint64_t seed) {
    char what[96];
    snprintf(what, sizeof what, "%s %d-D . %d-D", op, na, nb);
    tg_graph *g = graph();
    tg_var *a = input(g, "a", dt, na, sa), *b = input(g, "b", dt, nb, sb);
    tg_var *y = tg_apply(g, op, (tg_var *[]){a, b}, 2, NULL, 0);
    check(g, y, (tg_tensor *[]){rnd(seed, dt, na, ra), rnd(seed + 1, dt, nb, rb)}, 2, what);
}

static void test_dot(void **state) {
    (void)state;
    dot_case("dot", F64, SH0, NULL, SH(2, 3), (const int64_t[]){2, 3}, 1);
    dot_case("dot", F64, SH(4), (const int64_t[]){4}, SH0, NULL, 2);
    dot_case("dot", F64, SH0, NULL, SH0, NULL, 3);
    dot_case("dot", F64, SH(4), (const int64_t[]){4}, SH(4), (const int64_t[]){4}, 4);
    dot_case("dot", F64, SH(3, 4), (const int64_t[]){3, 4}, SH(4), (const int64_t[]){4}, 5);
    dot_case("dot", F64, SH(2, 3, 4), (const int64_t[]){2, 3, 4}, SH(4), (const int64_t[]){4}, 6);
    dot_case("dot", F64, SH(3), (const int64_t[]){3}, SH(3, 4), (const int64_t[]){3, 4}, 7);
    dot_case("dot", F64, SH(3), (const int64_t[]){3}, SH(2, 3, 4), (const int64_t[]){2, 3, 4}, 8);
    dot_case("dot", F64, SH(2, 3), (const int64_t[]){2, 3}, SH(3, 4), (const int64_t[]){3, 4}, 9);
    dot_case("dot", F32, SH(2, 3), (const int64_t[]){2, 3}, SH(3, 4), (const int64_t[]){3, 4}, 10);
    dot_case("dot", F64, SH(2, 2, 3), (const int64_t[]){2, 2, 3}, SH(3, 4), (const int64_t[]){3, 4},
             11);
    dot_case("dot", F64, SH(2, 3), (const int64_t[]){2, 3}, SH(2, 3, 4), (const int64_t[]){2, 3, 4},
             12);
    dot_case("dot", F64, SH(2, 2, 3), (const int64_t[]){2, 2, 3}, SH(2, 3, 2),
             (const int64_t[]){2, 3, 2}, 13);
    /* '?' extents everywhere: the 2-D views get their extents from shape() */
    dot_case("dot", F64, SH(Q, Q, Q), (const int64_t[]){2, 2, 3}, SH(Q, Q, Q),
             (const int64_t[]){2, 3, 2}, 14);
    dot_case("dot", F64, SH(Q, Q), (const int64_t[]){3, 2}, SH(Q), (const int64_t[]){2}, 15);
    dot_case("dot", F64, SH(Q, 3), (const int64_t[]){2, 3}, SH(Q, 2, 3, Q),
             (const int64_t[]){2, 2, 3, 2}, 16);
}

/* dot's gradients are (g . Y^T, X^T . g), against numbers computed by hand. */
static void test_dot_values(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 3)), *y = input(g, "y", F64, SH(3, 2));
    tg_var *out = tg_dot(g, x, y);
    tg_tensor *gt = tensor(F64, SH(2, 2), V(1, 2, 3, 4));
    tg_var *ct = tg_constant(g, gt), *grads[2];
    tg_tensor_free(gt);
    assert_int_equal(tg_vjp(g, &out, &ct, 1, (tg_var *[]){x, y}, 2, TG_DISCONNECTED_ERROR, grads),
                     TG_OK);
    tg_tensor *in[] = {tensor(F64, SH(2, 3), V(1, 2, 3, 4, 5, 6)),
                       tensor(F64, SH(3, 2), V(7, 8, 9, 10, 11, 12))};
    tg_tensor *res[2];
    run(g, grads, 2, in, 2, res);
    /* g . Y^T = [[1,2],[3,4]] . [[7,9,11],[8,10,12]] */
    expect(res[0], SH(2, 3), V(23, 29, 35, 53, 67, 81), 0.0);
    /* X^T . g = [[1,4],[2,5],[3,6]] . [[1,2],[3,4]] */
    expect(res[1], SH(3, 2), V(13, 18, 17, 24, 21, 30), 0.0);
    free_all(res, 2);
    free_all(in, 2);
    tg_graph_free(g);
}

static void test_matmul(void **state) {
    (void)state;
    dot_case("matmul", F64, SH(2, 3), (const int64_t[]){2, 3}, SH(3, 4), (const int64_t[]){3, 4},
             21);
    dot_case("matmul", F64, SH(3), (const int64_t[]){3}, SH(3, 4), (const int64_t[]){3, 4}, 22);
    dot_case("matmul", F64, SH(2, 3), (const int64_t[]){2, 3}, SH(3), (const int64_t[]){3}, 23);
    dot_case("matmul", F64, SH(3), (const int64_t[]){3}, SH(3), (const int64_t[]){3}, 24);
    /* batch broadcasting: [2,1,3,4] @ [5,4,2], and a 2-D a against a batch of b */
    dot_case("matmul", F64, SH(2, 1, 3, 4), (const int64_t[]){2, 1, 3, 4}, SH(5, 4, 2),
             (const int64_t[]){5, 4, 2}, 25);
    dot_case("matmul", F64, SH(3, 4), (const int64_t[]){3, 4}, SH(2, 4, 5),
             (const int64_t[]){2, 4, 5}, 26);
    dot_case("matmul", F64, SH(3), (const int64_t[]){3}, SH(2, 3, 2), (const int64_t[]){2, 3, 2},
             27);
    dot_case("matmul", F64, SH(Q, 1, 2, 3), (const int64_t[]){2, 1, 2, 3}, SH(3, Q),
             (const int64_t[]){3, 2}, 28);
    dot_case("matmul", F32, SH(2, 2, 3), (const int64_t[]){2, 2, 3}, SH(2, 3, 2),
             (const int64_t[]){2, 3, 2}, 29);
}

static void test_outer(void **state) {
    (void)state;
    dot_case("outer", F64, SH(2, 2), (const int64_t[]){2, 2}, SH(3), (const int64_t[]){3}, 31);
    dot_case("outer", F64, SH0, NULL, SH(Q, 2), (const int64_t[]){3, 2}, 32);
}

/* ---- gathers and scatters ---- */

static void test_take(void **state) {
    (void)state;
    /* repeated and negative indices accumulate */
    tg_tensor *ind = tensor(I64, SH(2, 3), V(0, 2, 0, -1, 2, 2));
    for (int ax = -1; ax <= 1; ax++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3, 3)), *i = input(g, "i", I64, SH(2, 3));
        tg_attr a = ax == -1 ? TG_A_NONE("axis") : TG_A_INT("axis", ax);
        tg_var *y = tg_apply(g, "take", (tg_var *[]){x, i}, 2, &a, 1);
        check(g, y, (tg_tensor *[]){rnd(41 + (uint64_t)ax, F64, SH(3, 3)), tg_tensor_dup(ind)}, 2,
              "take");
    }
    /* exact: d sum(take(x, [0, 0, 2])) / dx = [2, 0, 1] */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q));
    tg_var *i = tg_constant(g, ind);
    tg_slice row = {.start = 0, .is_index = true};
    tg_var *y = tg_apply(g, "take", (tg_var *[]){x, tg_slice_apply(g, i, &row, 1)}, 2, NULL, 0);
    tg_tensor *in[] = {rnd(1, F64, SH(3))};
    tg_tensor *cot = tensor(F64, SH(3), V(1, 1, 1));
    tg_tensor *gx = vjp_value(g, y, x, cot, in, 1);
    expect(gx, SH(3), V(2, 0, 1), 0.0);
    free_all((tg_tensor *[]){gx, cot, in[0], ind}, 4);
    tg_graph_free(g);
}

static void test_take_along(void **state) {
    (void)state;
    /* the classifier's gather: x f64[?,4], indices i64[?,1] along axis 1 */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q, 4)), *i = input(g, "i", I64, SH(Q, 1));
    tg_attr a = TG_A_INT("axis", 1);
    check(g, tg_apply(g, "take_along", (tg_var *[]){x, i}, 2, &a, 1),
          (tg_tensor *[]){rnd(51, F64, SH(3, 4)), tensor(I64, SH(3, 1), V(2, -1, 0))}, 2,
          "take_along axis 1");
    /* axis 0 with repeated indices, x broadcast along axis 1 (static 1) and the indices
     * along axis 2, i32 indices */
    g = graph();
    x = input(g, "x", F64, SH(3, 1, 2));
    i = input(g, "i", TG_DT_I32, SH(4, 3, 1));
    a = TG_A_INT("axis", 0);
    check(g, tg_apply(g, "take_along", (tg_var *[]){x, i}, 2, &a, 1),
          (tg_tensor *[]){rnd(52, F64, SH(3, 1, 2)),
                          tensor(TG_DT_I32, SH(4, 3, 1), V(0, 1, 2, 2, 2, 2, -3, 0, 1, 1, 1, 0))},
          2, "take_along axis 0");
    /* axis -1 on '?' extents everywhere */
    g = graph();
    x = input(g, "x", F64, SH(Q, Q));
    i = input(g, "i", I64, SH(Q, Q));
    a = TG_A_INT("axis", -1);
    check(g, tg_apply(g, "take_along", (tg_var *[]){x, i}, 2, &a, 1),
          (tg_tensor *[]){rnd(53, F64, SH(2, 3)), tensor(I64, SH(2, 4), V(0, 0, 2, 1, 1, 1, 1, 0))},
          2, "take_along ?");
    /* axis none: the flattened x */
    g = graph();
    x = input(g, "x", F64, SH(2, 3));
    i = input(g, "i", I64, SH(4));
    a = TG_A_NONE("axis");
    check(g, tg_apply(g, "take_along", (tg_var *[]){x, i}, 2, &a, 1),
          (tg_tensor *[]){rnd(54, F64, SH(2, 3)), tensor(I64, SH(4), V(5, 0, 5, -2))}, 2,
          "take_along none");
}

static void test_subtensor(void **state) {
    (void)state;
    static const char *const ops[] = {"set_subtensor", "inc_subtensor"};
    int64_t st[2] = {1, 0}, sp[2] = {0, 0}, step[2] = {0, -2}, ix[2] = {0, 0};
    tg_attr at[4] = {TG_A_INTS("starts", st, 2), TG_A_INTS("stops", sp, 2),
                     TG_A_INTS("steps", step, 2), TG_A_INTS("index", ix, 2)};
    at[0].none = (const bool[]){0, 1}; /* x[1:, ::-2]: the parts left out are `none` */
    at[1].none = (const bool[]){1, 1};
    at[2].none = (const bool[]){1, 0};
    for (int o = 0; o < 2; o++) {
        /* x[1:, ::-2] = y with y [2,2], y [1,2] (broadcast) and y 0-d */
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3, 4)), *y = input(g, "y", F64, SH(2, 2));
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, y}, 2, at, 4),
              (tg_tensor *[]){rnd(61, F64, SH(3, 4)), rnd(62, F64, SH(2, 2))}, 2, ops[o]);
        g = graph();
        x = input(g, "x", F64, SH(Q, 4));
        y = input(g, "y", F64, SH(1, 2));
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, y}, 2, at, 4),
              (tg_tensor *[]){rnd(63, F64, SH(3, 4)), rnd(64, F64, SH(1, 2))}, 2, ops[o]);
        g = graph();
        x = input(g, "x", F64, SH(3, 4));
        y = input(g, "y", F64, SH0);
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, y}, 2, at, 4),
              (tg_tensor *[]){rnd(65, F64, SH(3, 4)), rnd(66, F64, SH0)}, 2, ops[o]);
        /* y with an extra leading 1, and an f32 y added into f64 x (inc keeps y's dtype) */
        g = graph();
        x = input(g, "x", F64, SH(3, 4));
        y = input(g, "y", o ? F32 : F64, SH(1, 2, 2));
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, y}, 2, at, 4),
              (tg_tensor *[]){rnd(67, F64, SH(3, 4)), rnd(68, o ? F32 : F64, SH(1, 2, 2))}, 2,
              ops[o]);
    }
}

static void test_take_assign(void **state) {
    (void)state;
    static const char *const ops[] = {"set_take", "inc_take"};
    for (int o = 0; o < 2; o++) {
        /* repeated indices along axis 1; y broadcast along axis 0 */
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(2, 4)), *i = input(g, "i", I64, SH(3));
        tg_var *y = input(g, "y", F64, SH(1, 3));
        tg_attr a = TG_A_INT("axis", 1);
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, i, y}, 3, &a, 1),
              (tg_tensor *[]){rnd(71, F64, SH(2, 4)), tensor(I64, SH(3), V(1, -1, 1)),
                              rnd(72, F64, SH(1, 3))},
              3, ops[o]);
        /* axis 0 with 2-D indices, '?' extents */
        g = graph();
        x = input(g, "x", F64, SH(Q, 2));
        i = input(g, "i", I64, SH(2, 2));
        y = input(g, "y", F64, SH(2, 2, 2));
        a = TG_A_INT("axis", 0);
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, i, y}, 3, &a, 1),
              (tg_tensor *[]){rnd(73, F64, SH(3, 2)), tensor(I64, SH(2, 2), V(2, 0, 2, 2)),
                              rnd(74, F64, SH(2, 2, 2))},
              3, ops[o]);
        /* axis none (the flattened x), y 0-d */
        g = graph();
        x = input(g, "x", F64, SH(2, 3));
        i = input(g, "i", I64, SH(4));
        y = input(g, "y", F64, SH0);
        a = TG_A_NONE("axis");
        check(g, tg_apply(g, ops[o], (tg_var *[]){x, i, y}, 3, &a, 1),
              (tg_tensor *[]){rnd(75, F64, SH(2, 3)), tensor(I64, SH(4), V(4, 1, 4, 0)),
                              rnd(76, F64, SH0)},
              3, ops[o]);
    }
    /* exact: with indices [1, 0, 1], set_take gives y's gradient to the last occurrence of
     * 1 only; inc_take to both */
    for (int o = 0; o < 2; o++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(3)), *y = input(g, "y", F64, SH(3));
        tg_tensor *it = tensor(I64, SH(3), V(1, 0, 1));
        tg_var *i = tg_constant(g, it);
        tg_tensor_free(it);
        tg_var *out = tg_apply(g, ops[o], (tg_var *[]){x, i, y}, 3, NULL, 0);
        tg_tensor *in[] = {rnd(1, F64, SH(3)), rnd(2, F64, SH(3))};
        tg_tensor *cot = tensor(F64, SH(3), V(10, 20, 30));
        tg_tensor *gy = vjp_value(g, out, y, cot, in, 2);
        expect(gy, SH(3), o ? V(20, 10, 20) : V(0, 10, 20), 0.0);
        free_all((tg_tensor *[]){gy, cot, in[0], in[1]}, 4);
        tg_graph_free(g);
    }
}

static void test_mask_select(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q, 2)), *m = input(g, "m", TG_DT_BOOL, SH(Q));
    check(g, tg_apply(g, "mask_select", (tg_var *[]){x, m}, 2, NULL, 0),
          (tg_tensor *[]){rnd(81, F64, SH(4, 2)), tensor(TG_DT_BOOL, SH(4), V(1, 0, 1, 1))}, 2,
          "mask_select 1-D");
    g = graph();
    x = input(g, "x", F64, SH(2, 3, 2));
    m = input(g, "m", TG_DT_BOOL, SH(2, 3));
    check(g, tg_apply(g, "mask_select", (tg_var *[]){x, m}, 2, NULL, 0),
          (tg_tensor *[]){rnd(82, F64, SH(2, 3, 2)),
                          tensor(TG_DT_BOOL, SH(2, 3), V(0, 1, 1, 1, 0, 1))},
          2, "mask_select 2-D");
    g = graph(); /* nothing selected */
    x = input(g, "x", F64, SH(Q, Q));
    m = input(g, "m", TG_DT_BOOL, SH(Q, Q));
    tg_var *s = tg_apply(g, "mask_select", (tg_var *[]){x, m}, 2, NULL, 0);
    tg_var *cost = tg_reduce(g, "sum", s, NULL, -1, false), *gx = NULL;
    assert_int_equal(tg_grad(g, cost, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_tensor *in[] = {rnd(83, F64, SH(2, 2)), tensor(TG_DT_BOOL, SH(2, 2), V(0, 0, 0, 0))};
    tg_tensor *out = NULL;
    run(g, &gx, 1, in, 2, &out);
    expect(out, SH(2, 2), V(0, 0, 0, 0), 0.0);
    tg_tensor_free(out);
    free_all(in, 2);
    tg_graph_free(g);
}

/* ---- joins and constructors ---- */

static void test_concatenate(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *a = input(g, "a", F64, SH(2, 3)), *b = input(g, "b", F64, SH(1, 3)),
           *c = input(g, "c", F64, SH(4, 3));
    tg_attr ax = TG_A_INT("axis", 0);
    check(g, tg_apply(g, "concatenate", (tg_var *[]){a, b, c}, 3, &ax, 1),
          (tg_tensor *[]){rnd(91, F64, SH(2, 3)), rnd(92, F64, SH(1, 3)), rnd(93, F64, SH(4, 3))},
          3, "concatenate static");
    /* '?' along the axis: blocks found from the front, from the back, or at run time */
    g = graph();
    a = input(g, "a", F64, SH(Q, 2));
    b = input(g, "b", F64, SH(Q, 2));
    c = input(g, "c", F64, SH(3, 2));
    tg_var *d = input(g, "d", F64, SH(Q, 2));
    check(g, tg_apply(g, "concatenate", (tg_var *[]){a, b, c, d}, 4, &ax, 1),
          (tg_tensor *[]){rnd(94, F64, SH(2, 2)), rnd(95, F64, SH(1, 2)), rnd(96, F64, SH(3, 2)),
                          rnd(97, F64, SH(2, 2))},
          4, "concatenate ?");
    g = graph();
    a = input(g, "a", F64, SH(2, Q));
    b = input(g, "b", F64, SH(2, 2));
    c = input(g, "c", F64, SH(2, 0));
    ax = TG_A_INT("axis", -1);
    check(g, tg_apply(g, "concatenate", (tg_var *[]){a, b, c}, 3, &ax, 1),
          (tg_tensor *[]){rnd(98, F64, SH(2, 3)), rnd(99, F64, SH(2, 2)), rnd(100, F64, SH(2, 0))},
          3, "concatenate last axis");
}

static void test_stack_split(void **state) {
    (void)state;
    for (int64_t axis = -1; axis <= 1; axis++) {
        tg_graph *g = graph();
        tg_var *a = input(g, "a", F64, SH(2, Q)), *b = input(g, "b", F64, SH(2, 3));
        tg_attr ax = TG_A_INT("axis", axis);
        check(g, tg_apply(g, "stack", (tg_var *[]){a, b}, 2, &ax, 1),
              (tg_tensor *[]){rnd(101, F64, SH(2, 3)), rnd(102, F64, SH(2, 3))}, 2, "stack");
    }
    /* split into 3 pieces; pieces 0 and 2 are used, piece 1 is not (a NULL cotangent) */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 6)), *parts[3];
    tg_attr at[2] = {TG_A_INT("sections", 3), TG_A_INT("axis", -1)};
    int np = 3;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at, 2, parts, &np), TG_OK);
    check(g, tg_mul(g, parts[0], parts[2]), (tg_tensor *[]){rnd(103, F64, SH(2, 6))}, 1,
          "split sections");
    g = graph();
    x = input(g, "x", F64, SH(Q, 2));
    int64_t idx[2] = {1, 3};
    tg_attr at2[2] = {TG_A_INTS("indices", idx, 2), TG_A_INT("axis", 0)};
    np = 3;
    assert_int_equal(tg_apply_multi(g, "split", &x, 1, at2, 2, parts, &np), TG_OK);
    tg_var *s1 = tg_reduce(g, "sum", parts[1], NULL, -1, false);
    tg_var *s2 = tg_reduce(g, "sum", tg_mul(g, parts[2], parts[2]), NULL, -1, false);
    check(g, tg_add(g, s1, s2), (tg_tensor *[]){rnd(104, F64, SH(5, 2))}, 1, "split indices");
}

static void test_alloc_full(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *v = input(g, "v", F64, SH(1, 3));
    tg_var *y =
        tg_apply(g, "alloc",
                 (tg_var *[]){v, tg_literal_int(g, 2), tg_literal_int(g, 4), tg_literal_int(g, 3)},
                 4, NULL, 0);
    check(g, y, (tg_tensor *[]){rnd(111, F64, SH(1, 3))}, 1, "alloc");
    g = graph(); /* run-time extents, a 0-d value */
    v = input(g, "v", F64, SH0);
    tg_var *n = input(g, "n", I64, SH0);
    y = tg_apply(g, "alloc", (tg_var *[]){v, n, tg_literal_int(g, 2)}, 3, NULL, 0);
    check(g, y, (tg_tensor *[]){rnd(112, F64, SH0), tensor(I64, SH0, V(3))}, 2, "alloc ?");
    g = graph(); /* full with a dtype change: the value's gradient comes back in f32 */
    v = input(g, "v", F32, SH(3));
    tg_attr at[2] = {TG_A_INTS("shape", ((int64_t[]){2, 3}), 2), TG_A_STR("dtype", "f64")};
    check(g, apply1(g, "full", v, at, 2), (tg_tensor *[]){rnd(113, F32, SH(3))}, 1, "full");
}

static void test_tril_triu(void **state) {
    (void)state;
    static const char *const ops[] = {"tril", "triu"};
    for (int o = 0; o < 2; o++) {
        for (int k = -1; k <= 1; k++) {
            tg_graph *g = graph();
            tg_var *x = input(g, "x", F64, SH(2, Q, 4));
            tg_attr a = TG_A_INT("k", k);
            check(g, apply1(g, ops[o], x, &a, 1), (tg_tensor *[]){rnd(121, F64, SH(2, 3, 4))}, 1,
                  ops[o]);
        }
    }
}

/* diag: the cotangent on the diagonal of zeros, for square and non-square blocks, a batch,
 * '?' extents (the index through shape(x)) and an f32 input; the value is checked too. */
static void test_diag(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{2, 3, 3}, {2, 3, 5}, {2, 5, 3}};
    for (int i = 0; i < 3; i++) {
        tg_graph *g = graph();
        tg_var *x = input(g, "x", F64, SH(2, shapes[i][1], shapes[i][2]));
        check(g, tg_diag(g, x), (tg_tensor *[]){rnd(125 + i, F64, 3, shapes[i])}, 1, "diag");
        g = graph();
        x = input(g, "x", F64, SH(Q, Q, Q));
        check(g, tg_mul(g, tg_diag(g, x), tg_diag(g, x)),
              (tg_tensor *[]){rnd(128 + i, F64, 3, shapes[i])}, 1, "diag ?");
    }
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F32, SH(4, 2));
    check(g, tg_exp(g, tg_diag(g, x)), (tg_tensor *[]){rnd(131, F32, SH(4, 2))}, 1, "diag f32");
    g = graph();
    x = input(g, "x", F64, SH(2, 3));
    tg_tensor *in[] = {tensor(F64, SH(2, 3), V(1, 2, 3, 4, 5, 6))}, *out[1];
    run(g, (tg_var *[]){tg_diag(g, x)}, 1, in, 1, out);
    expect(out[0], SH(2), V(1, 5), 0.0);
    tg_tensor_free(in[0]);
    tg_tensor_free(out[0]);
    tg_graph_free(g);
}

/* Constructors and shape queries carry no gradient; arange also takes its bounds as
 * 0-d inputs (the gradients of take_along and concatenate use that). */
static void test_constructors(void **state) {
    (void)state;
    static const char *const none[] = {"zeros", "ones",   "arange", "eye", "shape",
                                       "size",  "argmax", "argmin", "any", "all"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        assert_int_equal(tg_op_table[tg_op_lookup(none[i])]->grad, TG_GRAD_NONE);
    tg_graph *g = graph();
    tg_var *n = input(g, "n", I64, SH0);
    tg_var *r1 = tg_apply(g, "arange", &n, 1, NULL, 0);
    tg_attr st = TG_A_INT("step", 2);
    tg_var *r2 = tg_apply(g, "arange", (tg_var *[]){tg_literal_int(g, 1), n}, 2, &st, 1);
    tg_var *r3 = tg_apply(g, "arange", (tg_var *[]){tg_literal_int(g, 4)}, 1, NULL, 0);
    assert_non_null(r3);
    assert_int_equal(tg_var_dim(r1, 0), Q);
    assert_int_equal(tg_var_dim(r3, 0), 4);
    tg_tensor *in[] = {tensor(I64, SH0, V(6))}, *out[3];
    run(g, (tg_var *[]){r1, r2, r3}, 3, in, 1, out);
    expect(out[0], SH(6), V(0, 1, 2, 3, 4, 5), 0.0);
    expect(out[1], SH(3), V(1, 3, 5), 0.0);
    expect(out[2], SH(4), V(0, 1, 2, 3), 0.0);
    free_all(out, 3);
    free_all(in, 1);
    tg_graph_free(g);
    g = graph(); /* a bound both as input and attribute */
    n = input(g, "n", I64, SH0);
    tg_attr stop = TG_A_INT("stop", 3);
    assert_null(tg_apply(g, "arange", &n, 1, &stop, 1));
    assert_non_null(strstr(tg_graph_error(g), "cannot also be an attribute"));
    tg_graph_free(g);
}

/* ---- the classic cases ---- */

/* d sum(x + b) / db for x: f64[?,?], b: f64[1,?] is summed over dim 0 and keeps (1, n). */
static void test_bias_gradient(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q, Q)), *b = input(g, "b", F64, SH(1, Q));
    tg_var *cost = tg_reduce(g, "sum", tg_add(g, x, b), NULL, -1, false), *gb = NULL;
    assert_int_equal(tg_grad(g, cost, &b, 1, TG_DISCONNECTED_ERROR, &gb), TG_OK);
    assert_int_equal(tg_var_ndim(gb), 2);
    assert_int_equal(tg_var_dim(gb, 0), 1);
    assert_int_equal(tg_var_dtype(gb), F64);
    tg_tensor *in[] = {rnd(1, F64, SH(4, 3)), rnd(2, F64, SH(1, 3))}, *out = NULL;
    run(g, &gb, 1, in, 2, &out);
    expect(out, SH(1, 3), V(4, 4, 4), 0.0);
    tg_tensor_free(out);
    tg_graph_free(g);
    /* and with a non-trivial cotangent through mean: d mean((x + b)^2) / db */
    g = graph();
    x = input(g, "x", F64, SH(Q, Q));
    b = input(g, "b", F64, SH(1, Q));
    tg_var *s = tg_add(g, x, b);
    check(g, tg_reduce(g, "mean", tg_mul(g, s, s), NULL, -1, false), in, 2, "bias");
}

/* A Hessian-vector product of a small MLP loss,
 *   loss = mean(-take_along(log_softmax(tanh(x . W1 + b1) . W2, axis=1), y[:, None], 1)),
 * computed as the gradient of sum_k <grad_k, v_k> and compared with central differences
 * of the gradient along v. */
static void test_mlp_hvp(void **state) {
    (void)state;
    enum { N = 5, D = 3, H = 4, C = 3 };
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(Q, D)), *y = input(g, "y", I64, SH(Q));
    tg_var *p[3] = {input(g, "W1", F64, SH(D, H)), input(g, "b1", F64, SH(H)),
                    input(g, "W2", F64, SH(H, C))};
    tg_var *v[3] = {input(g, "vW1", F64, SH(D, H)), input(g, "vb1", F64, SH(H)),
                    input(g, "vW2", F64, SH(H, C))};
    tg_var *h = tg_tanh(g, tg_add(g, tg_dot(g, x, p[0]), p[1]));
    tg_attr a1 = TG_A_INT("axis", 1);
    tg_var *ls = tg_apply(g, "log_softmax", (tg_var *[]){tg_dot(g, h, p[2])}, 1, &a1, 1);
    tg_var *yi = apply1(g, "expand_dims", y, &a1, 1);
    tg_var *picked = tg_apply(g, "take_along", (tg_var *[]){ls, yi}, 2, &a1, 1);
    tg_var *loss = tg_reduce(g, "mean", tg_neg(g, picked), NULL, -1, false);
    tg_var *gr[3], *hv[3];
    assert_int_equal(tg_grad(g, loss, p, 3, TG_DISCONNECTED_ERROR, gr), TG_OK);
    tg_var *gv = NULL;
    for (int k = 0; k < 3; k++) {
        tg_var *t = tg_reduce(g, "sum", tg_mul(g, gr[k], v[k]), NULL, -1, false);
        gv = gv ? tg_add(g, gv, t) : t;
    }
    assert_int_equal(tg_grad(g, gv, p, 3, TG_DISCONNECTED_ERROR, hv), TG_OK);
    tg_var *outs[6] = {gr[0], gr[1], gr[2], hv[0], hv[1], hv[2]};
    assert_int_equal(tg_graph_set_outputs(g, outs, 6), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_OK);

    tg_tensor *in[8] = {rnd(201, F64, SH(N, D)), tensor(I64, SH(N), V(0, 2, 1, 2, 0)),
                        rnd(202, F64, SH(D, H)), rnd(203, F64, SH(H)),
                        rnd(204, F64, SH(H, C)), rnd(205, F64, SH(D, H)),
                        rnd(206, F64, SH(H)),    rnd(207, F64, SH(H, C))};
    tg_tensor *res[6], *plus[6], *minus[6];
    assert_int_equal(tg_fn_call(f, in, 8, res, 6), TG_OK);
    /* gradients at theta + e v and theta - e v */
    const double e = 1e-5;
    tg_tensor *moved[8];
    for (int sgn = 0; sgn < 2; sgn++) {
        for (int i = 0; i < 8; i++) moved[i] = in[i];
        for (int k = 0; k < 3; k++) {
            moved[2 + k] = tg_tensor_dup(in[2 + k]);
            for (int64_t j = 0; j < tg_tensor_size(moved[2 + k]); j++) {
                double *pj = (double *)tg_tensor_data(moved[2 + k]) + j;
                *pj += (sgn ? -e : e) * tg_tensor_get_f64(in[5 + k], j);
            }
        }
        assert_int_equal(tg_fn_call(f, moved, 8, sgn ? minus : plus, 6), TG_OK);
        for (int k = 0; k < 3; k++) tg_tensor_free(moved[2 + k]);
    }
    double worst = 0.0, scale = 0.0;
    for (int k = 0; k < 3; k++) {
        for (int64_t j = 0; j < tg_tensor_size(res[3 + k]); j++) {
            double fd = (tg_tensor_get_f64(plus[k], j) - tg_tensor_get_f64(minus[k], j)) / (2 * e);
            double an = tg_tensor_get_f64(res[3 + k], j);
            worst = fmax(worst, fabs(fd - an));
            scale = fmax(scale, fabs(an));
        }
    }
    print_message("mlp hvp: max |hvp - fd| = %.3g (max |hvp| = %.3g)\n", worst, scale);
    assert_true(scale > 1e-3); /* a real curvature, not zeros */
    assert_true(worst <= 1e-7 * fmax(1.0, scale));
    free_all(res, 6);
    free_all(plus, 6);
    free_all(minus, 6);
    free_all(in, 8);
    tg_fn_free(f);
    tg_graph_free(g);
}

/* A wrong VJP is caught: the checker on a graph whose gradient is off (a guard that the
 * tests above can fail). */
static void test_checker_catches(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3));
    /* stop-gradient through a cast to i64 and back: the checker must see a mismatch */
    tg_var *y =
        tg_mul(g, x, tg_cast(g, tg_cast(g, tg_mul(g, x, tg_literal_float(g, 1e6)), I64), F64));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *in[] = {tensor(F64, SH(3), V(0.25, -0.5, 0.75))};
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 1);
    assert_int_equal(tg_grad_check(g, in, 1, &o, NULL), TG_ECHECK);
    free_all(in, 1);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_mean),     cmocka_unit_test(test_mean_values),
        cmocka_unit_test(test_prod),         cmocka_unit_test(test_prod_second_order),
        cmocka_unit_test(test_max_min),      cmocka_unit_test(test_integer_reductions),
        cmocka_unit_test(test_reshape),      cmocka_unit_test(test_reshape_dims_form),
        cmocka_unit_test(test_transpose),    cmocka_unit_test(test_expand_squeeze),
        cmocka_unit_test(test_broadcast_to), cmocka_unit_test(test_slice),
        cmocka_unit_test(test_dot),          cmocka_unit_test(test_dot_values),
        cmocka_unit_test(test_matmul),       cmocka_unit_test(test_outer),
        cmocka_unit_test(test_take),         cmocka_unit_test(test_take_along),
        cmocka_unit_test(test_subtensor),    cmocka_unit_test(test_take_assign),
        cmocka_unit_test(test_mask_select),  cmocka_unit_test(test_concatenate),
        cmocka_unit_test(test_stack_split),  cmocka_unit_test(test_alloc_full),
        cmocka_unit_test(test_tril_triu),    cmocka_unit_test(test_diag),
        cmocka_unit_test(test_constructors), cmocka_unit_test(test_bias_gradient),
        cmocka_unit_test(test_mlp_hvp),      cmocka_unit_test(test_checker_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
