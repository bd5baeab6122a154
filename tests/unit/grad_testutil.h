/* grad_testutil.h - helpers for the gradient checks of the op-family unit tests
 * (test_cumulative.c, test_sort.c): seeded random tensors, graphs with inputs, a finite-
 * difference check of a graph's gradients (tg_grad_check), running a graph, and the value of
 * a VJP for a known cotangent (for the documented choices at ties and zeros, checked exactly).
 * Include after <cmocka.h>. Everything here is static.
 */
#ifndef TG_GRAD_TESTUTIL_H
#define TG_GRAD_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ops/ops.h"

#define GNA(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define SH(...)                                                                                    \
    GNA(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }
#define SH0    0, NULL
#define V(...) ((const double[]){__VA_ARGS__})
#define Q      TG_DIM_UNKNOWN

/* Uniform values in [-1.5, 1.5] (splitmix64, seeded): ties have probability 0. */
static inline tg_tensor *rnd(uint64_t seed, tg_dtype dt, int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        tg_store_f64(tg_tensor_at(t, idx), dt, 3.0 * ((double)(z >> 11) * 0x1.0p-53) - 1.5);
        tg_index_next(nd, shape, idx);
    }
    return t;
}

static inline tg_tensor *tensor(tg_dtype dt, int nd, const int64_t *shape, const double *v) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, v[i]);
        tg_index_next(nd, shape, idx);
    }
    return t;
}

static inline tg_graph *graph(void) {
    tg_graph *g = tg_graph_new(NULL, "t");
    assert_non_null(g);
    return g;
}

static inline tg_var *input(tg_graph *g, const char *name, tg_dtype dt, int nd,
                            const int64_t *shape) {
    tg_var *v = tg_input(g, name, dt, nd, shape);
    assert_non_null(v);
    return v;
}

/* Sets out as g's only output, expects tg_grad_check to pass, frees g and the inputs. */
static inline void check(tg_graph *g, tg_var *out, tg_tensor **in, int nin, const char *what) {
    if (!out) print_error("%s: building failed: %s\n", what, tg_graph_error(g));
    assert_non_null(out);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 7);
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, in, nin, &o, &rep);
    if (st != TG_OK) print_error("%s: %s\n", what, tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_graph_free(g);
    for (int i = 0; i < nin; i++) tg_tensor_free(in[i]);
}

/* Compiles g with the outputs outs (the default backend) and runs it on in. */
static inline void run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
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
static inline void expect(const tg_tensor *t, int nd, const int64_t *shape, const double *want,
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

/* The gradient of sum(y * cot) with respect to x on the inputs in: a VJP with a known
 * cotangent. Frees g and cot; the caller frees the result. */
static inline tg_tensor *vjp_value(tg_graph *g, tg_var *y, tg_var *x, tg_tensor *cot,
                                   tg_tensor *const *in, int nin) {
    if (!y) print_error("building failed: %s\n", tg_graph_error(g));
    assert_non_null(y);
    tg_var *c = tg_constant(g, cot), *gx = NULL;
    assert_int_equal(tg_vjp(g, &y, &c, 1, &x, 1, TG_DISCONNECTED_ERROR, &gx), TG_OK);
    tg_tensor *out = NULL;
    run(g, &gx, 1, in, nin, &out);
    tg_graph_free(g);
    tg_tensor_free(cot);
    return out;
}

#endif
