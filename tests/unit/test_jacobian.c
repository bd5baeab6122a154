/* test_jacobian.c - tg_jacobian and tg_hessian (src/grad/jacobian.c).
 *
 * Every case runs in the reference and the vm modes and is compared with a closed form or
 * with central finite differences of the function itself: the jacobian of A@x is A (and
 * with respect to A, delta_ij x_k), of an outer product (a 2-d y: the order of the axes),
 * a 0-d y (the gradient), a 0-d x (y's shape), an x with a '?' extent, a jacobian of a
 * jacobian; the hessian of sum(x^3) is diag(6x), of 0.5 x^T A x is (A + A^T)/2, of
 * logsumexp(x) is diag(p) - p p^T, of a cost linear in one variable is zeros. Then the
 * documented limits and errors: a y that is not a float or has a '?' extent or more than
 * TG_JACOBIAN_MAX elements, a rank beyond TG_MAX_DIMS, a cost that is not 0-d, a variable
 * the value does not depend on, and the graph's first error kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tgraph.h"

#define NA(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SH(...)                                                                                    \
    NA(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }
#define SH0    0, NULL
#define V(...) ((const double[]){__VA_ARGS__})
#define Q      TG_DIM_UNKNOWN
#define F64    TG_DT_F64
#define F32    TG_DT_F32

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

static tg_tensor *tensor(tg_dtype dt, int nd, const int64_t *shape, const double *v) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        if (dt == F64)
            ((double *)tg_tensor_data(t))[i] = v[i];
        else
            ((float *)tg_tensor_data(t))[i] = (float)v[i];
    }
    return t;
}

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

static const tg_mode modes[2] = {TG_MODE_REFERENCE, TG_MODE_VM};
static const char *const mode_names[2] = {"reference", "vm"};

/* Sets outs as g's outputs and runs g on in in both modes: res[m * nout + i]. */
static void run2(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                 tg_tensor **res) {
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) print_error("building failed: %s\n", tg_graph_error(g));
        assert_non_null(outs[i]);
    }
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    for (int m = 0; m < 2; m++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[m]);
        tg_fn *f = NULL;
        tg_status st = tg_graph_compile(g, &o, &f);
        if (st == TG_OK) st = tg_fn_call(f, in, nin, res + m * nout, nout);
        if (st != TG_OK) print_error("%s: %s\n", mode_names[m], tg_last_error());
        assert_int_equal(st, TG_OK);
        tg_fn_free(f);
    }
}

/* Expects t to have shape `shape` and hold want (C order) within tol. */
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

/* expect() on both modes' result i of nout. */
static void expect2(tg_tensor **res, int nout, int i, int nd, const int64_t *shape,
                    const double *want, double tol) {
    for (int m = 0; m < 2; m++) expect(res[m * nout + i], nd, shape, want, tol);
}

/* ---- jacobians against closed forms ---- */

/* J(A@x, x) = A; J(A@x, A)[i,j,k] = delta_ij x_k. */
static void test_jacobian_matvec(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *A = input(g, "A", F64, SH(2, 3)), *x = input(g, "x", F64, SH(3));
    tg_var *y = tg_dot(g, A, x), *J[2];
    assert_int_equal(tg_jacobian(g, y, (tg_var *[]){x, A}, 2, TG_DISCONNECTED_ERROR, J), TG_OK);
    tg_tensor *in[2] = {tensor(F64, SH(2, 3), V(1, 2, 3, 4, 5, 6)), tensor(F64, SH(3), V(7, 8, 9))};
    tg_tensor *res[4];
    run2(g, J, 2, in, 2, res);
    expect2(res, 2, 0, SH(2, 3), V(1, 2, 3, 4, 5, 6), 0);
    expect2(res, 2, 1, SH(2, 2, 3), V(7, 8, 9, 0, 0, 0, 0, 0, 0, 7, 8, 9), 0);
    free_all(res, 4);
    free_all(in, 2);
    tg_graph_free(g);
}

/* A 2-d y = x[:, None] * w: J[i,j,k] = delta_ik w_j (wrt x), delta_jk x_i (wrt w); the axes
 * of y come first, in C order. */
static void test_jacobian_2d_value(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3)), *w = input(g, "w", F64, SH(2));
    tg_attr a1 = TG_A_INT("axis", 1);
    tg_var *y = tg_mul(g, tg_apply(g, "expand_dims", &x, 1, &a1, 1), w), *J[2];
    assert_int_equal(tg_jacobian(g, y, (tg_var *[]){x, w}, 2, TG_DISCONNECTED_ERROR, J), TG_OK);
    tg_tensor *in[2] = {tensor(F64, SH(3), V(1, 2, 3)), tensor(F64, SH(2), V(10, 20))};
    tg_tensor *res[4];
    run2(g, J, 2, in, 2, res);
    double jx[3 * 2 * 3] = {0}, jw[3 * 2 * 2] = {0};
    const double xv[3] = {1, 2, 3}, wv[2] = {10, 20};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            jx[(i * 2 + j) * 3 + i] = wv[j];
            jw[(i * 2 + j) * 2 + j] = xv[i];
        }
    expect2(res, 2, 0, SH(3, 2, 3), jx, 0);
    expect2(res, 2, 1, SH(3, 2, 2), jw, 0);
    free_all(res, 4);
    free_all(in, 2);
    tg_graph_free(g);
}

/* A 0-d y gives the gradient (x's shape); a 0-d x gives y's shape. */
static void test_jacobian_0d(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3)), *s = input(g, "s", F64, SH0);
    tg_var *c = tg_reduce(g, "sum", tg_mul(g, x, x), NULL, -1, false);
    tg_var *y = tg_mul(g, tg_exp(g, s), x), *J[3];
    assert_int_equal(tg_jacobian(g, c, &x, 1, TG_DISCONNECTED_ERROR, &J[0]), TG_OK);
    assert_int_equal(tg_jacobian(g, y, &s, 1, TG_DISCONNECTED_ERROR, &J[1]), TG_OK);
    assert_int_equal(tg_jacobian(g, s, &s, 1, TG_DISCONNECTED_ERROR, &J[2]), TG_OK); /* ds/ds */
    tg_tensor *in[2] = {tensor(F64, SH(3), V(1, -2, 3)), tensor(F64, SH0, V(0.5))};
    tg_tensor *res[6];
    run2(g, J, 3, in, 2, res);
    const double e = exp(0.5);
    expect2(res, 3, 0, SH(3), V(2, -4, 6), 0);
    expect2(res, 3, 1, SH(3), V(e, -2 * e, 3 * e), 1e-15);
    expect2(res, 3, 2, SH0, V(1), 0);
    free_all(res, 6);
    free_all(in, 2);
    tg_graph_free(g);
}

/* x with a '?' extent (y static): the result has shape [2, ?], W at run time. */
static void test_jacobian_dynamic_x(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *W = input(g, "W", F64, SH(2, Q)), *x = input(g, "x", F64, SH(Q)), *J;
    assert_int_equal(tg_jacobian(g, tg_dot(g, W, x), &x, 1, TG_DISCONNECTED_ERROR, &J), TG_OK);
    tg_tensor *in[2] = {tensor(F64, SH(2, 4), V(1, 2, 3, 4, 5, 6, 7, 8)),
                        tensor(F64, SH(4), V(1, 1, 1, 1))};
    tg_tensor *res[2];
    run2(g, &J, 1, in, 2, res);
    expect2(res, 1, 0, SH(2, 4), V(1, 2, 3, 4, 5, 6, 7, 8), 0);
    free_all(res, 2);
    free_all(in, 2);
    tg_graph_free(g);
}

/* The jacobian of the jacobian of y = x^3: J = diag(3x^2), J2[i,j,k] = delta_ijk 6 x_i. */
static void test_jacobian_of_jacobian(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F32, SH(3)), *J[2];
    tg_var *y = tg_mul(g, x, tg_mul(g, x, x));
    assert_int_equal(tg_jacobian(g, y, &x, 1, TG_DISCONNECTED_ERROR, &J[0]), TG_OK);
    assert_int_equal(tg_jacobian(g, J[0], &x, 1, TG_DISCONNECTED_ERROR, &J[1]), TG_OK);
    tg_tensor *in[1] = {tensor(F32, SH(3), V(1, 2, -1))};
    tg_tensor *res[4];
    run2(g, J, 2, in, 1, res);
    assert_int_equal(tg_tensor_dtype(res[0]), F32);
    double j2[27] = {0};
    j2[0] = 6, j2[13] = 12, j2[26] = -6;
    expect2(res, 2, 0, SH(3, 3), V(3, 0, 0, 0, 12, 0, 0, 0, 3), 0);
    expect2(res, 2, 1, SH(3, 3, 3), j2, 0);
    free_all(res, 4);
    free_all(in, 1);
    tg_graph_free(g);
}

/* A nonlinear y of rank 2 against central differences of y itself (f64, h = 1e-6). */
static void test_jacobian_finite_differences(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(4)), *W = input(g, "W", F64, SH(3, 4));
    tg_attr a0 = TG_A_INT("axis", 0);
    /* y[i, :] = tanh(W x)_i * softmax(x), shape [3, 4] */
    tg_var *h = tg_tanh(g, tg_dot(g, W, x));
    tg_var *y = tg_mul(g, tg_apply(g, "expand_dims", &h, 1, &TG_A_INT("axis", 1), 1),
                       tg_apply(g, "softmax", &x, 1, &a0, 1));
    tg_var *outs[3] = {y};
    assert_int_equal(tg_jacobian(g, y, (tg_var *[]){x, W}, 2, TG_DISCONNECTED_ERROR, outs + 1),
                     TG_OK);
    const double xv[4] = {0.3, -0.7, 1.1, 0.2};
    const double wv[12] = {0.5, -0.2, 0.1, 0.9, -1.0, 0.4, 0.3, -0.6, 0.8, 0.7, -0.5, 0.2};
    tg_tensor *in[2] = {tensor(F64, SH(4), xv), tensor(F64, SH(3, 4), wv)};
    tg_tensor *res[6];
    run2(g, outs, 3, in, 2, res);
    tg_fn *f = NULL;
    tg_compile_opts ref = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE);
    assert_int_equal(tg_graph_compile(g, &ref, &f), TG_OK);
    const double hstep = 1e-6;
    double worst = 0;
    for (int v = 0; v < 2; v++) { /* x, then W */
        int64_t nv = tg_tensor_size(in[v]);
        for (int64_t k = 0; k < nv; k++) {
            double *p = (double *)tg_tensor_data(in[v]) + k, old = *p;
            tg_tensor *plus[3], *minus[3];
            *p = old + hstep;
            assert_int_equal(tg_fn_call(f, in, 2, plus, 3), TG_OK);
            *p = old - hstep;
            assert_int_equal(tg_fn_call(f, in, 2, minus, 3), TG_OK);
            *p = old;
            for (int64_t e = 0; e < 12; e++) { /* J[e, k] for element e of y */
                double fd =
                    (tg_tensor_get_f64(plus[0], e) - tg_tensor_get_f64(minus[0], e)) / (2 * hstep);
                for (int m = 0; m < 2; m++) {
                    double an = tg_tensor_get_f64(res[m * 3 + 1 + v], e * nv + k);
                    worst = fmax(worst, fabs(an - fd));
                }
            }
            free_all(plus, 3);
            free_all(minus, 3);
        }
    }
    assert_int_equal(tg_tensor_ndim(res[1]), 3);
    assert_int_equal(tg_tensor_shape(res[2])[3], 4);
    print_message("jacobian vs finite differences: max abs error %.3g\n", worst);
    assert_true(worst < 1e-8);
    tg_fn_free(f);
    free_all(res, 6);
    free_all(in, 2);
    tg_graph_free(g);
}

/* ---- hessians ---- */

/* sum(x^3): diag(6x); 0.5 x^T A x: (A + A^T) / 2; in one call with two costs. */
static void test_hessian_closed_forms(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(3)), *A = input(g, "A", F64, SH(3, 3)), *H[2];
    tg_var *c1 = tg_reduce(g, "sum", tg_mul(g, x, tg_mul(g, x, x)), NULL, -1, false);
    tg_var *c2 = tg_mul(g, tg_literal_float(g, 0.5), tg_dot(g, x, tg_dot(g, A, x)));
    assert_int_equal(tg_hessian(g, c1, &x, 1, TG_DISCONNECTED_ERROR, &H[0]), TG_OK);
    assert_int_equal(tg_hessian(g, c2, &x, 1, TG_DISCONNECTED_ERROR, &H[1]), TG_OK);
    tg_tensor *in[2] = {tensor(F64, SH(3), V(1, -2, 0.5)),
                        tensor(F64, SH(3, 3), V(1, 2, 3, 4, 5, 6, 7, 8, 10))};
    tg_tensor *res[4];
    run2(g, H, 2, in, 2, res);
    expect2(res, 2, 0, SH(3, 3), V(6, 0, 0, 0, -12, 0, 0, 0, 3), 0);
    expect2(res, 2, 1, SH(3, 3), V(1, 3, 5, 3, 5, 7, 5, 7, 10), 1e-15);
    free_all(res, 4);
    free_all(in, 2);
    tg_graph_free(g);
}

/* logsumexp over a [2,2] x: H = diag(p) - p p^T with p = softmax of x's elements. */
static void test_hessian_logsumexp(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2, 2)), *H;
    tg_var *c = tg_apply(g, "logsumexp", &x, 1, NULL, 0);
    assert_int_equal(tg_hessian(g, c, &x, 1, TG_DISCONNECTED_ERROR, &H), TG_OK);
    const double xv[4] = {0.1, -1.0, 2.0, 0.5};
    tg_tensor *in[1] = {tensor(F64, SH(2, 2), xv)};
    tg_tensor *res[2];
    run2(g, &H, 1, in, 1, res);
    double p[4], z = 0, want[16];
    for (int i = 0; i < 4; i++) z += exp(xv[i]);
    for (int i = 0; i < 4; i++) p[i] = exp(xv[i]) / z;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = (i == j ? p[i] : 0) - p[i] * p[j];
    expect2(res, 1, 0, SH(2, 2, 2, 2), want, 1e-14);
    free_all(res, 2);
    free_all(in, 1);
    tg_graph_free(g);
}

/* Several variables: the diagonal blocks only; a cost linear in w has a zero block (not a
 * disconnected error); a variable the cost does not depend on follows `disconnected`. */
static void test_hessian_blocks_and_zero(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2)), *w = input(g, "w", F64, SH(2));
    tg_var *u = input(g, "u", F64, SH0), *H[3];
    tg_var *c = tg_reduce(g, "sum", tg_mul(g, tg_mul(g, x, x), w), NULL, -1, false);
    assert_int_equal(tg_hessian(g, c, (tg_var *[]){x, w, u}, 3, TG_DISCONNECTED_ZERO, H), TG_OK);
    tg_tensor *in[3] = {tensor(F64, SH(2), V(3, 4)), tensor(F64, SH(2), V(5, -1)),
                        tensor(F64, SH0, V(0))};
    tg_tensor *res[6];
    run2(g, H, 3, in, 3, res);
    expect2(res, 3, 0, SH(2, 2), V(10, 0, 0, -2), 0);
    expect2(res, 3, 1, SH(2, 2), V(0, 0, 0, 0), 0);
    expect2(res, 3, 2, SH0, V(0), 0);
    free_all(res, 6);
    free_all(in, 3);
    tg_graph_free(g);

    g = graph();
    x = input(g, "x", F64, SH(2));
    u = input(g, "u", F64, SH0);
    c = tg_reduce(g, "sum", tg_exp(g, x), NULL, -1, false);
    assert_int_equal(tg_hessian(g, c, (tg_var *[]){x, u}, 2, TG_DISCONNECTED_ERROR, H), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "does not depend on 'u'"));
    assert_null(H[0]);
    tg_graph_free(g);
}

/* ---- limits and errors ---- */

/* Builds on a fresh graph with inputs x: f64[3], d: f64[?], k: i64[3], big: f64[1025], r6:
 * f64[1,1,1,1,1,1] and expects status `want` and a message holding `msg`. */
typedef tg_status (*build_fn)(tg_graph *g, tg_var **v, tg_var **out);

static void expect_error(build_fn fn, tg_status want, const char *msg) {
    tg_graph *g = graph();
    tg_var *v[5] = {input(g, "x", F64, SH(3)), input(g, "d", F64, SH(Q)),
                    input(g, "k", TG_DT_I64, SH(3)), input(g, "big", F64, SH(1025)),
                    input(g, "r6", F64, SH(1, 1, 1, 1, 1, 1))};
    tg_var *out[2] = {v[0], v[0]};
    tg_status st = fn(g, v, out);
    if (st != want || !strstr(tg_graph_error(g), msg))
        print_error("got %d '%s', want %d '%s'\n", (int)st, tg_graph_error(g), (int)want, msg);
    assert_int_equal(st, want);
    assert_non_null(strstr(tg_graph_error(g), msg));
    assert_null(out[0]);
    /* sticky: a later call returns the first error and keeps its message */
    char first[512];
    snprintf(first, sizeof first, "%s", tg_graph_error(g));
    assert_int_equal(tg_jacobian(g, v[0], v, 1, TG_DISCONNECTED_ERROR, out), want);
    assert_string_equal(tg_graph_error(g), first);
    tg_graph_free(g);
}

static tg_status b_int_y(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_jacobian(g, v[2], v, 1, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_dynamic_y(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_jacobian(g, tg_exp(g, v[1]), v + 1, 1, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_too_big(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_jacobian(g, tg_exp(g, v[3]), v + 3, 1, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_rank(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_jacobian(g, tg_exp(g, v[4]), (tg_var *[]){v[0], v[4]}, 2, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_disconnected(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_jacobian(g, tg_exp(g, v[0]), v + 3, 1, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_hess_vector_cost(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_hessian(g, tg_exp(g, v[0]), v, 1, TG_DISCONNECTED_ERROR, o);
}
static tg_status b_hess_dynamic(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_hessian(g, tg_reduce(g, "sum", v[1], NULL, -1, false), v + 1, 1,
                      TG_DISCONNECTED_ERROR, o);
}
static tg_status b_hess_big(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_hessian(g, tg_reduce(g, "sum", v[3], NULL, -1, false), v + 3, 1,
                      TG_DISCONNECTED_ERROR, o);
}
static tg_status b_hess_int(tg_graph *g, tg_var **v, tg_var **o) {
    return tg_hessian(g, tg_reduce(g, "sum", v[0], NULL, -1, false), v + 2, 1,
                      TG_DISCONNECTED_ERROR, o);
}

static void test_errors(void **state) {
    (void)state;
    expect_error(b_int_y, TG_ETYPE, "jacobian: 'k' must be a float, got i64[3]");
    expect_error(b_dynamic_y, TG_ESHAPE, "jacobian: the output of exp (node");
    expect_error(b_dynamic_y, TG_ESHAPE, "must have a static shape, got f64[?]");
    expect_error(b_too_big, TG_ELIMIT, "is f64[1025], more than 1024 elements");
    expect_error(b_rank, TG_ELIMIT, "the jacobian would have rank 12, more than 8");
    expect_error(b_disconnected, TG_EINVAL, "the result does not depend on 'big'");
    expect_error(b_hess_vector_cost, TG_ESHAPE,
                 "hessian: the cost must be a 0-d float, got f64[3]");
    expect_error(b_hess_dynamic, TG_ESHAPE, "hessian: 'd' must have a static shape, got f64[?]");
    expect_error(b_hess_big, TG_ELIMIT, "hessian: 'big' is f64[1025], more than 1024 elements");
    expect_error(b_hess_int, TG_ETYPE, "hessian: 'k' is i64[3]");
}

/* Exactly TG_JACOBIAN_MAX elements work; a y without elements gives zeros (the
 * dependence is still checked). */
static void test_jacobian_edges(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", F64, SH(2)), *e = input(g, "e", F64, SH(0, 3)), *J[2];
    assert_int_equal(tg_jacobian(g, tg_exp(g, e), &x, 1, TG_DISCONNECTED_ERROR, &J[0]), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "does not depend on 'x'"));
    tg_graph_free(g);

    g = graph();
    x = input(g, "x", F64, SH(2));
    e = input(g, "e", F64, SH(0, 3));
    tg_var *y = tg_mul(g, tg_reduce(g, "sum", x, NULL, -1, false), e); /* f64[0, 3] */
    assert_int_equal(tg_jacobian(g, y, &x, 1, TG_DISCONNECTED_ERROR, &J[0]), TG_OK);
    tg_var *big = tg_mul(
        g, tg_reduce(g, "sum", x, NULL, -1, false),
        tg_apply(g, "ones", NULL, 0, (tg_attr[]){TG_A_INTS("shape", ((int64_t[]){32, 32}), 2)}, 1));
    assert_int_equal(tg_jacobian(g, big, &x, 1, TG_DISCONNECTED_ERROR, &J[1]), TG_OK);
    tg_tensor *in[2] = {tensor(F64, SH(2), V(1, 2)), tensor(F64, SH(0, 3), V(0))};
    tg_tensor *res[4];
    run2(g, J, 2, in, 2, res);
    expect2(res, 2, 0, SH(0, 3, 2), V(0), 0);
    double ones[32 * 32 * 2];
    for (int i = 0; i < 32 * 32 * 2; i++) ones[i] = 1;
    expect2(res, 2, 1, SH(32, 32, 2), ones, 0);
    free_all(res, 4);
    free_all(in, 2);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jacobian_matvec),
        cmocka_unit_test(test_jacobian_2d_value),
        cmocka_unit_test(test_jacobian_0d),
        cmocka_unit_test(test_jacobian_dynamic_x),
        cmocka_unit_test(test_jacobian_of_jacobian),
        cmocka_unit_test(test_jacobian_finite_differences),
        cmocka_unit_test(test_hessian_closed_forms),
        cmocka_unit_test(test_hessian_logsumexp),
        cmocka_unit_test(test_hessian_blocks_and_zero),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_jacobian_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
