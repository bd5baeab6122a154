/* test_grad_elemwise.c - reverse-mode gradients of the elementwise ops (elemwise.c) and
 * the softmax family (nn.c), and the gradient checker tg_grad_check itself.
 *
 * Every differentiable op is checked with finite differences (tg_grad_check) on seeded
 * random inputs kept inside its domain and away from its non-differentiable points:
 * f64 and f32, scalars, vectors and matrices, broadcasting (f64[3,1] with f64[1,4], a
 * static 1 against n, leading axes), inputs with negative strides, and second
 * derivatives (the checker run on a graph whose output is itself a VJP). The documented
 * choices at non-differentiable points (ties of maximum/minimum, abs'(0), clip's ends,
 * pow at 0, sqrt'(0), zero gradients of floor & co., where, mod) are checked with exact
 * values. The driver's errors (non-scalar or integer cost, disconnected inputs,
 * integer wrt) and higher-order gradients are tested through tg_grad; the checker is
 * shown to fail (TG_ECHECK, naming the input) on a gradient that is wrong. Some tests
 * also go through the VJPs of other families (sum, expand_dims, slice).
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

typedef enum {
    DOM_RANGE, /* uniform in [lo, hi] */
    DOM_SYM,   /* magnitude in [lo, hi], random sign */
    DOM_FRAC,  /* k + u, k integer in [lo, hi], u in [0.15, 0.35] (away from steps) */
} dom_kind;

typedef struct dom {
    dom_kind kind;
    double lo, hi;
} dom;

static double draw(rng *r, dom d) {
    double u = urand(r);
    switch (d.kind) {
    case DOM_SYM:
        return (urand(r) < 0.5 ? -1.0 : 1.0) * (d.lo + u * (d.hi - d.lo));
    case DOM_FRAC:
        return floor(d.lo + u * (d.hi - d.lo + 1.0)) + 0.15 + 0.2 * urand(r);
    default:
        return d.lo + u * (d.hi - d.lo);
    }
}

static tg_tensor *rand_tensor(rng *r, tg_dtype dt, int nd, const int64_t *shape, dom d) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    assert_non_null(t);
    int64_t n = tg_tensor_size(t), idx[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        tg_store_f64(tg_tensor_at(t, idx), dt, draw(r, d));
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

/* A view with every axis reversed (negative strides) over a copy of t; frees t. */
static tg_tensor *reversed(tg_tensor *t) {
    int64_t strides[TG_MAX_DIMS], off = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        strides[i] = -t->strides[i];
        if (t->shape[i] > 0) off += (t->shape[i] - 1) * t->strides[i];
    }
    tg_tensor *v = tg_tensor_view(t, t->ndim, t->shape, strides, off);
    assert_non_null(v);
    tg_tensor_free(t);
    return v;
}

static void free_all(tg_tensor **t, int n) {
    for (int i = 0; i < n; i++) tg_tensor_free(t[i]);
}

static tg_var *input(tg_graph *g, const char *name, tg_dtype dt, int nd, const int64_t *shape) {
    tg_var *v = tg_input(g, name, dt, nd, shape);
    assert_non_null(v);
    return v;
}

/* Sets out as g's output and expects tg_grad_check to pass. */
static void grad_ok(tg_graph *g, tg_var *out, tg_tensor *const *in, int nin, const char *what) {
    if (!out) print_error("%s: building failed: %s\n", what, tg_graph_error(g));
    assert_non_null(out);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.seed = 42);
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, in, nin, &o, &rep);
    if (st != TG_OK) print_error("%s: %s\n", what, tg_last_error());
    assert_int_equal(st, TG_OK);
    assert_true(rep.input >= 0);
    assert_true(rep.abs_err <= 1e-3 + 1e-2 * fabs(rep.numeric));
}

/* A constant cotangent of v's (static) type with seeded random values in [-1.5, 1.5]. */
static tg_var *rand_cot(tg_graph *g, tg_var *v, uint64_t seed) {
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < tg_var_ndim(v); i++) shape[i] = tg_var_dim(v, i);
    rng r = {seed};
    tg_tensor *t =
        rand_tensor(&r, tg_var_dtype(v), tg_var_ndim(v), shape, (dom){DOM_SYM, 0.5, 1.5});
    tg_var *c = tg_constant(g, t);
    tg_tensor_free(t);
    return c;
}

/* The VJP of out with a random constant cotangent with respect to wrt[0..n). */
static tg_var *vjp_of(tg_graph *g, tg_var *out, tg_var *const *wrt, int n, tg_var **res) {
    tg_var *c = rand_cot(g, out, 7);
    tg_status st = tg_vjp(g, &out, &c, 1, wrt, n, TG_DISCONNECTED_ZERO, res);
    if (st != TG_OK) print_error("vjp: %s\n", tg_graph_error(g));
    assert_int_equal(st, TG_OK);
    return res[0];
}

/* Runs g with outputs outs[0..nout) on in[0..nin); res gets new tensors. */
static void run(tg_graph *g, tg_var *const *outs, int nout, tg_tensor *const *in, int nin,
                tg_tensor **res) {
    assert_int_equal(tg_graph_status(g), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, outs, nout), TG_OK);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(g, NULL, &f);
    if (st != TG_OK) print_error("compile: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    st = tg_fn_call(f, in, nin, res, nout);
    if (st != TG_OK) print_error("call: %s\n", tg_last_error());
    assert_int_equal(st, TG_OK);
    tg_fn_free(f);
}

/* Exact comparison (NaN matches NaN; tol absolute). */
static void expect_vals(const tg_tensor *t, tg_dtype dt, int nd, const int64_t *shape,
                        const double *want, double tol) {
    assert_non_null(t);
    assert_int_equal(tg_tensor_dtype(t), dt);
    assert_int_equal(tg_tensor_ndim(t), nd);
    for (int i = 0; i < nd; i++) assert_int_equal(tg_tensor_shape(t)[i], shape[i]);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        double a = tg_tensor_get_f64(t, i), b = want[i];
        bool ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= tol;
        if (!ok) print_error("element %lld: got %.17g, want %.17g\n", (long long)i, a, b);
        assert_true(ok);
    }
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define V(...)  ((const double[]){__VA_ARGS__})

typedef struct shape_case {
    int nd;
    int64_t s[3];
} shape_case;

static const shape_case shapes[] = {{0, {0}}, {1, {4}}, {2, {2, 3}}};
static const tg_dtype fdts[] = {TG_DT_F64, TG_DT_F32};

/* ---- unary ops ---- */

typedef struct unary_case {
    const char *op;
    dom d;
} unary_case;

static const unary_case unary_cases[] = {
    {"neg", {DOM_RANGE, -2, 2}},      {"abs", {DOM_SYM, 0.2, 2}},
    {"sign", {DOM_SYM, 0.2, 2}},      {"exp", {DOM_RANGE, -2, 2}},
    {"exp2", {DOM_RANGE, -2, 2}},     {"log", {DOM_RANGE, 0.2, 3}},
    {"log2", {DOM_RANGE, 0.2, 3}},    {"log1p", {DOM_RANGE, -0.5, 3}},
    {"expm1", {DOM_RANGE, -2, 2}},    {"sqrt", {DOM_RANGE, 0.2, 3}},
    {"rsqrt", {DOM_RANGE, 0.2, 3}},   {"sin", {DOM_RANGE, -3, 3}},
    {"cos", {DOM_RANGE, -3, 3}},      {"tan", {DOM_RANGE, -1.2, 1.2}},
    {"tanh", {DOM_RANGE, -2, 2}},     {"sigmoid", {DOM_RANGE, -4, 4}},
    {"softplus", {DOM_RANGE, -4, 4}}, {"erf", {DOM_RANGE, -2, 2}},
    {"erfc", {DOM_RANGE, -2, 2}},     {"floor", {DOM_FRAC, -3, 3}},
    {"ceil", {DOM_FRAC, -3, 3}},      {"round", {DOM_FRAC, -3, 3}},
};

static void test_unary(void **state) {
    (void)state;
    rng r = {1};
    for (size_t c = 0; c < TG_COUNTOF(unary_cases); c++) {
        const unary_case *uc = &unary_cases[c];
        for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
            for (size_t s = 0; s < TG_COUNTOF(shapes) + 1; s++) {
                /* the last round: a [2,3] input with negative strides */
                bool rev = s == TG_COUNTOF(shapes);
                const shape_case *sc = &shapes[rev ? 2 : s];
                char what[96];
                snprintf(what, sizeof what, "%s %s rank %d%s", uc->op, tg_dtype_name(fdts[d]),
                         sc->nd, rev ? " reversed" : "");
                tg_graph *g = tg_graph_new(NULL, uc->op);
                tg_var *x = input(g, "x", fdts[d], sc->nd, sc->s);
                tg_var *y = tg_apply(g, uc->op, &x, 1, NULL, 0);
                tg_tensor *in = rand_tensor(&r, fdts[d], sc->nd, sc->s, uc->d);
                if (rev) in = reversed(in);
                grad_ok(g, y, &in, 1, what);
                tg_tensor_free(in);
                tg_graph_free(g);
            }
        }
    }
}

/* Second derivatives: the checker on a graph whose output is the VJP of the op. */
static void test_unary_second_order(void **state) {
    (void)state;
    rng r = {2};
    for (size_t c = 0; c < TG_COUNTOF(unary_cases); c++) {
        const unary_case *uc = &unary_cases[c];
        for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
            char what[96];
            snprintf(what, sizeof what, "d2 %s %s", uc->op, tg_dtype_name(fdts[d]));
            tg_graph *g = tg_graph_new(NULL, uc->op);
            tg_var *x = input(g, "x", fdts[d], 2, SH(2, 3)), *gx;
            tg_var *y = tg_apply(g, uc->op, &x, 1, NULL, 0);
            vjp_of(g, y, &x, 1, &gx);
            tg_tensor *in = rand_tensor(&r, fdts[d], 2, SH(2, 3), uc->d);
            grad_ok(g, gx, &in, 1, what);
            tg_tensor_free(in);
            tg_graph_free(g);
        }
    }
}

/* ---- binary ops ---- */

typedef struct binary_case {
    const char *op;
    dom a, b;
} binary_case;

static const binary_case binary_cases[] = {
    {"add", {DOM_RANGE, -2, 2}, {DOM_RANGE, -2, 2}},
    {"sub", {DOM_RANGE, -2, 2}, {DOM_RANGE, -2, 2}},
    {"mul", {DOM_RANGE, -2, 2}, {DOM_RANGE, -2, 2}},
    {"div", {DOM_RANGE, -2, 2}, {DOM_SYM, 0.5, 2}},
    /* |a / b| in [0.36, 0.76]: the quotient stays constant near every point */
    {"int_div", {DOM_SYM, 1.1, 1.9}, {DOM_RANGE, 2.5, 3}},
    /* |a / b| in [2.1, 2.6]: away from the jumps of the quotient */
    {"mod", {DOM_SYM, 5.1, 5.4}, {DOM_SYM, 2.1, 2.4}},
    {"pow", {DOM_RANGE, 0.5, 2}, {DOM_RANGE, -2, 2}},
    {"maximum", {DOM_RANGE, -2, 2}, {DOM_RANGE, -2, 2}},
    {"minimum", {DOM_RANGE, -2, 2}, {DOM_RANGE, -2, 2}},
};

typedef struct pair_case {
    shape_case a, b;
} pair_case;

static const pair_case pairs[] = {
    {{2, {2, 3}}, {2, {2, 3}}}, /* same shape */
    {{2, {3, 1}}, {2, {1, 4}}}, /* both broadcast */
    {{2, {2, 3}}, {2, {2, 1}}}, /* a static 1 against n */
    {{2, {1, 3}}, {2, {2, 3}}}, /* the other way */
    {{2, {2, 3}}, {1, {3}}},    /* leading axis */
    {{0, {0}}, {2, {2, 3}}},    /* scalar */
};

static void test_binary(void **state) {
    (void)state;
    rng r = {3};
    for (size_t c = 0; c < TG_COUNTOF(binary_cases); c++) {
        const binary_case *bc = &binary_cases[c];
        for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
            for (size_t p = 0; p < TG_COUNTOF(pairs); p++) {
                const pair_case *pc = &pairs[p];
                char what[96];
                snprintf(what, sizeof what, "%s %s pair %zu", bc->op, tg_dtype_name(fdts[d]), p);
                tg_graph *g = tg_graph_new(NULL, bc->op);
                tg_var *in[2] = {input(g, "a", fdts[d], pc->a.nd, pc->a.s),
                                 input(g, "b", fdts[d], pc->b.nd, pc->b.s)};
                tg_var *y = tg_apply(g, bc->op, in, 2, NULL, 0);
                tg_tensor *t[2] = {rand_tensor(&r, fdts[d], pc->a.nd, pc->a.s, bc->a),
                                   rand_tensor(&r, fdts[d], pc->b.nd, pc->b.s, bc->b)};
                if (p == 0) t[1] = reversed(t[1]);
                grad_ok(g, y, t, 2, what);
                free_all(t, 2);
                tg_graph_free(g);
            }
        }
    }
}

static void test_binary_second_order(void **state) {
    (void)state;
    rng r = {4};
    for (size_t c = 0; c < TG_COUNTOF(binary_cases); c++) {
        const binary_case *bc = &binary_cases[c];
        for (int which = 0; which < 2; which++) {
            char what[96];
            snprintf(what, sizeof what, "d2 %s wrt %c", bc->op, which ? 'b' : 'a');
            tg_graph *g = tg_graph_new(NULL, bc->op);
            tg_var *in[2] = {input(g, "a", TG_DT_F64, 2, SH(2, 3)),
                             input(g, "b", TG_DT_F64, 2, SH(2, 3))};
            tg_var *y = tg_apply(g, bc->op, in, 2, NULL, 0), *gv;
            vjp_of(g, y, &in[which], 1, &gv);
            tg_tensor *t[2] = {rand_tensor(&r, TG_DT_F64, 2, SH(2, 3), bc->a),
                               rand_tensor(&r, TG_DT_F64, 2, SH(2, 3), bc->b)};
            grad_ok(g, gv, t, 2, what);
            free_all(t, 2);
            tg_graph_free(g);
        }
    }
}

/* ---- clip, where, cast ---- */

static void test_clip(void **state) {
    (void)state;
    rng r = {5};
    dom dx = {DOM_RANGE, -2, 2}, dlo = {DOM_RANGE, -1, -0.3}, dhi = {DOM_RANGE, 0.3, 1};
    /* lo > hi: the result is hi everywhere */
    dom dlo2 = {DOM_RANGE, 1.2, 1.5}, dhi2 = {DOM_RANGE, -0.5, 0.5};
    const struct {
        shape_case x, lo, hi;
        bool swapped;
    } cases[] = {
        {{2, {2, 3}}, {2, {2, 3}}, {2, {2, 3}}, false}, {{2, {2, 3}}, {0, {0}}, {0, {0}}, false},
        {{2, {2, 3}}, {2, {2, 1}}, {1, {3}}, false},    {{2, {3, 1}}, {2, {1, 4}}, {0, {0}}, false},
        {{2, {2, 3}}, {2, {2, 3}}, {0, {0}}, true},
    };
    for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
        for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
            char what[64];
            snprintf(what, sizeof what, "clip %s case %zu", tg_dtype_name(fdts[d]), c);
            tg_graph *g = tg_graph_new(NULL, "clip");
            tg_var *x = input(g, "x", fdts[d], cases[c].x.nd, cases[c].x.s);
            tg_var *lo = input(g, "lo", fdts[d], cases[c].lo.nd, cases[c].lo.s);
            tg_var *hi = input(g, "hi", fdts[d], cases[c].hi.nd, cases[c].hi.s);
            tg_tensor *t[3] = {rand_tensor(&r, fdts[d], cases[c].x.nd, cases[c].x.s, dx),
                               rand_tensor(&r, fdts[d], cases[c].lo.nd, cases[c].lo.s,
                                           cases[c].swapped ? dlo2 : dlo),
                               rand_tensor(&r, fdts[d], cases[c].hi.nd, cases[c].hi.s,
                                           cases[c].swapped ? dhi2 : dhi)};
            grad_ok(g, tg_clip(g, x, lo, hi), t, 3, what);
            free_all(t, 3);
            tg_graph_free(g);
        }
    }
}

static void test_where(void **state) {
    (void)state;
    rng r = {6};
    dom dv = {DOM_RANGE, -2, 2};
    const struct {
        shape_case c, a, b;
    } cases[] = {
        {{2, {2, 3}}, {2, {2, 3}}, {2, {2, 3}}},
        {{2, {2, 3}}, {1, {3}}, {0, {0}}},
        {{2, {3, 1}}, {2, {1, 4}}, {2, {3, 4}}},
        {{1, {3}}, {2, {2, 1}}, {2, {2, 3}}},
    };
    for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
        for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
            char what[64];
            snprintf(what, sizeof what, "where %s case %zu", tg_dtype_name(fdts[d]), c);
            tg_graph *g = tg_graph_new(NULL, "where");
            tg_var *cond = input(g, "cond", TG_DT_BOOL, cases[c].c.nd, cases[c].c.s);
            tg_var *a = input(g, "a", fdts[d], cases[c].a.nd, cases[c].a.s);
            tg_var *b = input(g, "b", fdts[d], cases[c].b.nd, cases[c].b.s);
            tg_tensor *t[3] = {
                rand_tensor(&r, TG_DT_BOOL, cases[c].c.nd, cases[c].c.s, (dom){DOM_SYM, 1, 1}),
                rand_tensor(&r, fdts[d], cases[c].a.nd, cases[c].a.s, dv),
                rand_tensor(&r, fdts[d], cases[c].b.nd, cases[c].b.s, dv)};
            /* a mix of true and false: cond = (random sign > 0) */
            for (int64_t i = 0; i < tg_tensor_size(t[0]); i++)
                ((bool *)tg_tensor_data(t[0]))[i] = urand(&r) < 0.5;
            grad_ok(g, tg_where(g, cond, a, b), t, 3, what);
            free_all(t, 3);
            tg_graph_free(g);
        }
    }
}

static void test_cast(void **state) {
    (void)state;
    rng r = {7};
    dom dv = {DOM_RANGE, -2, 2};
    /* f32 -> f64 and f64 -> f32, inside other ops */
    for (int c = 0; c < 2; c++) {
        tg_dtype from = c ? TG_DT_F64 : TG_DT_F32, to = c ? TG_DT_F32 : TG_DT_F64;
        tg_graph *g = tg_graph_new(NULL, "cast");
        tg_var *x = input(g, "x", from, 2, SH(2, 3));
        tg_var *y = tg_sin(g, tg_cast(g, tg_mul(g, x, x), to));
        tg_tensor *t = rand_tensor(&r, from, 2, SH(2, 3), dv);
        grad_ok(g, y, &t, 1, c ? "cast f64->f32" : "cast f32->f64");
        /* the gradient has the input's dtype */
        tg_var *gx;
        vjp_of(g, y, &x, 1, &gx);
        assert_int_equal(tg_var_dtype(gx), from);
        tg_tensor_free(t);
        tg_graph_free(g);
    }
    /* promotion inserts casts: f32 * f64 */
    tg_graph *g = tg_graph_new(NULL, "mixed");
    tg_var *a = input(g, "a", TG_DT_F32, 1, SH(3)), *b = input(g, "b", TG_DT_F64, 2, SH(2, 1));
    tg_tensor *t[2] = {rand_tensor(&r, TG_DT_F32, 1, SH(3), dv),
                       rand_tensor(&r, TG_DT_F64, 2, SH(2, 1), dv)};
    grad_ok(g, tg_mul(g, tg_exp(g, a), b), t, 2, "mixed f32*f64");
    free_all(t, 2);
    tg_graph_free(g);
    /* integer inputs are held fixed: x ** k with k an i64 input, x * cast(k) */
    g = tg_graph_new(NULL, "ints");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(4)), *k = input(g, "k", TG_DT_I64, 1, SH(4));
    tg_var *y = tg_add(g, tg_pow(g, x, k), tg_mul(g, x, tg_cast(g, k, TG_DT_F64)));
    tg_tensor *ti[2] = {rand_tensor(&r, TG_DT_F64, 1, SH(4), (dom){DOM_RANGE, 0.5, 2}),
                        tensor(TG_DT_I64, 1, SH(4), V(0, 1, 2, 3))};
    grad_ok(g, y, ti, 2, "integer input held fixed");
    free_all(ti, 2);
    tg_graph_free(g);
}

/* ---- the softmax family ---- */

static void test_nn(void **state) {
    (void)state;
    rng r = {8};
    dom dv = {DOM_RANGE, -2, 2};
    const int64_t ax0 = 0, ax1 = 1, axm = -1, ax01[2] = {0, 1}, ax02[2] = {0, 2};
    const struct {
        const char *op;
        shape_case x;
        tg_attr a[2];
        int na;
    } cases[] = {
        {"softmax", {2, {2, 3}}, {TG_A_INT("axis", ax0)}, 1},
        {"softmax", {2, {2, 3}}, {TG_A_INT("axis", axm)}, 1},
        {"softmax", {2, {2, 3}}, {TG_A_NONE("axis")}, 1},
        {"softmax", {1, {4}}, {{0}}, 0},
        {"softmax", {3, {2, 3, 2}}, {TG_A_INT("axis", ax1)}, 1},
        {"log_softmax", {2, {2, 3}}, {TG_A_INT("axis", ax0)}, 1},
        {"log_softmax", {2, {2, 3}}, {TG_A_INT("axis", axm)}, 1},
        {"log_softmax", {2, {2, 3}}, {TG_A_NONE("axis")}, 1},
        {"log_softmax", {3, {2, 3, 2}}, {TG_A_INT("axis", ax1)}, 1},
        {"logsumexp", {2, {2, 3}}, {{0}}, 0},
        {"logsumexp", {2, {2, 3}}, {TG_A_BOOL("keepdims", true)}, 1},
        {"logsumexp", {2, {2, 3}}, {TG_A_INT("axis", ax0)}, 1},
        {"logsumexp", {2, {2, 3}}, {TG_A_INT("axis", ax1), TG_A_BOOL("keepdims", true)}, 2},
        {"logsumexp", {2, {2, 3}}, {TG_A_INTS("axis", ax01, 2)}, 1},
        {"logsumexp", {3, {2, 3, 2}}, {TG_A_INTS("axis", ax02, 2)}, 1},
        {"logsumexp", {3, {2, 3, 2}}, {TG_A_INTS("axis", ax02, 2), TG_A_BOOL("keepdims", true)}, 2},
        {"logsumexp", {0, {0}}, {{0}}, 0},
    };
    for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
        for (size_t c = 0; c < TG_COUNTOF(cases); c++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s case %zu", cases[c].op, tg_dtype_name(fdts[d]), c);
            tg_graph *g = tg_graph_new(NULL, cases[c].op);
            tg_var *x = input(g, "x", fdts[d], cases[c].x.nd, cases[c].x.s);
            tg_var *y = tg_apply(g, cases[c].op, &x, 1, cases[c].a, cases[c].na);
            tg_tensor *t = rand_tensor(&r, fdts[d], cases[c].x.nd, cases[c].x.s, dv);
            if (c % 3 == 1) t = reversed(t);
            grad_ok(g, y, &t, 1, what);
            tg_tensor_free(t);
            tg_graph_free(g);
            if (fdts[d] != TG_DT_F64) continue;
            /* second order */
            snprintf(what, sizeof what, "d2 %s case %zu", cases[c].op, c);
            g = tg_graph_new(NULL, cases[c].op);
            x = input(g, "x", fdts[d], cases[c].x.nd, cases[c].x.s);
            y = tg_apply(g, cases[c].op, &x, 1, cases[c].a, cases[c].na);
            tg_var *gx;
            vjp_of(g, y, &x, 1, &gx);
            t = rand_tensor(&r, fdts[d], cases[c].x.nd, cases[c].x.s, dv);
            grad_ok(g, gx, &t, 1, what); /* through sum and expand_dims too */
            tg_tensor_free(t);
            tg_graph_free(g);
        }
    }
}

/* A chain of several ops, all inputs used more than once. */
static void test_composite(void **state) {
    (void)state;
    rng r = {9};
    for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
        tg_graph *g = tg_graph_new(NULL, "mix");
        tg_var *x = input(g, "x", fdts[d], 2, SH(3, 1)), *w = input(g, "w", fdts[d], 2, SH(1, 4));
        tg_var *h = tg_tanh(g, tg_add(g, tg_mul(g, x, w), tg_sigmoid(g, w)));
        tg_var *y = tg_div(g, tg_softplus(g, h), tg_add(g, tg_exp(g, x), tg_literal_float(g, 1)));
        y = tg_apply(g, "log_softmax", &y, 1, (tg_attr[]){TG_A_INT("axis", 1)}, 1);
        tg_tensor *t[2] = {rand_tensor(&r, fdts[d], 2, SH(3, 1), (dom){DOM_RANGE, -1, 1}),
                           rand_tensor(&r, fdts[d], 2, SH(1, 4), (dom){DOM_RANGE, -1, 1})};
        grad_ok(g, y, t, 2, "composite");
        free_all(t, 2);
        tg_graph_free(g);
    }
}

/* x[::-1] built inside the graph (a negative-step view) feeding elementwise ops. */
static void test_reversed_view_in_graph(void **state) {
    (void)state;
    rng r = {10};
    for (size_t d = 0; d < TG_COUNTOF(fdts); d++) {
        tg_graph *g = tg_graph_new(NULL, "rev");
        tg_var *x = input(g, "x", fdts[d], 1, SH(5)), *z = input(g, "z", fdts[d], 2, SH(2, 5));
        tg_slice all = {.step = -1, .omit = TG_SLICE_NO_START | TG_SLICE_NO_STOP};
        tg_var *xr = tg_slice_apply(g, x, &all, 1);
        tg_var *y = tg_mul(g, tg_exp(g, xr), tg_sin(g, tg_add(g, z, x)));
        tg_tensor *t[2] = {rand_tensor(&r, fdts[d], 1, SH(5), (dom){DOM_RANGE, -1, 1}),
                           rand_tensor(&r, fdts[d], 2, SH(2, 5), (dom){DOM_RANGE, -1, 1})};
        grad_ok(g, y, t, 2, "reversed view");
        free_all(t, 2);
        tg_graph_free(g);
    }
}

/* ---- exact values at the documented non-differentiable points ---- */

/* Gradients of out (cotangent ones, or ct when given) with respect to wrt[0..nw), run on
 * in[0..nin); res gets nw new tensors. */
static void grads_at(tg_graph *g, tg_var *out, const double *ct, tg_var *const *wrt, int nw,
                     tg_tensor *const *in, int nin, tg_tensor **res) {
    int64_t shape[TG_MAX_DIMS];
    double ones[64];
    for (int i = 0; i < tg_var_ndim(out); i++) shape[i] = tg_var_dim(out, i);
    for (int i = 0; i < 64; i++) ones[i] = 1.0;
    tg_tensor *ctt = tensor(tg_var_dtype(out), tg_var_ndim(out), shape, ct ? ct : ones);
    tg_var *c = tg_constant(g, ctt), *gv[8];
    tg_tensor_free(ctt);
    tg_status st = tg_vjp(g, &out, &c, 1, wrt, nw, TG_DISCONNECTED_ERROR, gv);
    if (st != TG_OK) print_error("vjp: %s\n", tg_graph_error(g));
    assert_int_equal(st, TG_OK);
    run(g, gv, nw, in, nin, res);
}

static void test_choices_maximum_minimum(void **state) {
    (void)state;
    for (int mx = 0; mx < 2; mx++) {
        tg_graph *g = tg_graph_new(NULL, "ext");
        tg_var *x = input(g, "x", TG_DT_F64, 1, SH(4)), *y = input(g, "y", TG_DT_F64, 1, SH(4));
        tg_var *o = mx ? tg_maximum(g, x, y) : tg_minimum(g, x, y);
        tg_tensor *in[2] = {tensor(TG_DT_F64, 1, SH(4), V(1, 2, 3, NAN)),
                            tensor(TG_DT_F64, 1, SH(4), V(1, 0, 5, 1))};
        tg_tensor *res[2];
        grads_at(g, o, V(1, 1, 1, 1), (tg_var *[]){x, y}, 2, in, 2, res);
        /* tie: half each; NaN result: nothing to either */
        if (mx) {
            expect_vals(res[0], TG_DT_F64, 1, SH(4), V(0.5, 1, 0, 0), 0);
            expect_vals(res[1], TG_DT_F64, 1, SH(4), V(0.5, 0, 1, 0), 0);
        } else {
            expect_vals(res[0], TG_DT_F64, 1, SH(4), V(0.5, 0, 1, 0), 0);
            expect_vals(res[1], TG_DT_F64, 1, SH(4), V(0.5, 1, 0, 0), 0);
        }
        free_all(res, 2);
        free_all(in, 2);
        tg_graph_free(g);
    }
    /* maximum(x, x): the halves add up to 1 */
    tg_graph *g = tg_graph_new(NULL, "self");
    tg_var *x = input(g, "x", TG_DT_F32, 1, SH(3));
    tg_tensor *in = tensor(TG_DT_F32, 1, SH(3), V(-1, 0, 2)), *res;
    grads_at(g, tg_maximum(g, x, x), V(1, 2, 3), &x, 1, &in, 1, &res);
    expect_vals(res, TG_DT_F32, 1, SH(3), V(1, 2, 3), 0);
    tg_tensor_free(res);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_choices_abs_sqrt_pow(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "abs");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(4));
    tg_tensor *in = tensor(TG_DT_F64, 1, SH(4), V(0, -0.0, 2, -3)), *res;
    grads_at(g, tg_abs(g, x), NULL, &x, 1, &in, 1, &res);
    expect_vals(res, TG_DT_F64, 1, SH(4), V(0, 0, 1, -1), 0); /* abs'(0) = 0 */
    tg_tensor_free(res);
    tg_tensor_free(in);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "sqrt");
    x = input(g, "x", TG_DT_F64, 1, SH(3));
    in = tensor(TG_DT_F64, 1, SH(3), V(0, 4, 0));
    grads_at(g, tg_sqrt(g, x), V(1, 1, 0), &x, 1, &in, 1, &res);
    expect_vals(res, TG_DT_F64, 1, SH(3), V(INFINITY, 0.25, NAN), 0); /* 0 * inf is NaN */
    tg_tensor_free(res);
    tg_tensor_free(in);
    tg_graph_free(g);

    g = tg_graph_new(NULL, "pow");
    tg_var *a = input(g, "a", TG_DT_F64, 1, SH(5)), *b = input(g, "b", TG_DT_F64, 1, SH(5));
    tg_tensor *ab[2] = {tensor(TG_DT_F64, 1, SH(5), V(0, 0, 0, 2, 0)),
                        tensor(TG_DT_F64, 1, SH(5), V(0, 2, 0.5, 3, -1))},
              *rs[2];
    grads_at(g, tg_pow(g, a, b), NULL, (tg_var *[]){a, b}, 2, ab, 2, rs);
    /* d/da: 0 where b == 0 (also at a == 0), b a^(b-1) elsewhere (inf for 0^-0.5);
     * d/db: 0 where a == 0, log(a) a^b elsewhere */
    expect_vals(rs[0], TG_DT_F64, 1, SH(5), V(0, 0, INFINITY, 12, -INFINITY), 0);
    expect_vals(rs[1], TG_DT_F64, 1, SH(5), V(0, 0, 0, 8 * log(2.0), 0), 1e-15);
    free_all(rs, 2);
    free_all(ab, 2);
    tg_graph_free(g);
}

static void test_choices_piecewise_constant(void **state) {
    (void)state;
    const char *ops[] = {"floor", "ceil", "round", "sign"};
    for (size_t i = 0; i < TG_COUNTOF(ops); i++) {
        tg_graph *g = tg_graph_new(NULL, ops[i]);
        tg_var *x = input(g, "x", TG_DT_F64, 1, SH(4));
        /* at the steps, with an infinite and a NaN cotangent: zeros, never NaN */
        tg_tensor *in = tensor(TG_DT_F64, 1, SH(4), V(1, 0.5, 0, -2.5)), *res;
        grads_at(g, tg_apply(g, ops[i], &x, 1, NULL, 0), V(INFINITY, NAN, 1, -INFINITY), &x, 1, &in,
                 1, &res);
        expect_vals(res, TG_DT_F64, 1, SH(4), V(0, 0, 0, 0), 0);
        tg_tensor_free(res);
        tg_tensor_free(in);
        tg_graph_free(g);
    }
    /* float int_div: zero for both inputs; mod: 1 and -int_div(a, b) */
    tg_graph *g = tg_graph_new(NULL, "divmod");
    tg_var *a = input(g, "a", TG_DT_F64, 1, SH(3)), *b = input(g, "b", TG_DT_F64, 1, SH(3));
    tg_tensor *ab[2] = {tensor(TG_DT_F64, 1, SH(3), V(5.5, -5.5, 4)),
                        tensor(TG_DT_F64, 1, SH(3), V(2, 2, -1.5))},
              *rs[4];
    tg_var *q = tg_int_div(g, a, b), *m = tg_mod(g, a, b), *gv[4];
    tg_var *cq = tg_constant(g, ab[1]), *cm = tg_constant(g, ab[1]);
    assert_int_equal(tg_vjp(g, &q, &cq, 1, (tg_var *[]){a, b}, 2, TG_DISCONNECTED_ERROR, gv),
                     TG_OK);
    assert_int_equal(tg_vjp(g, &m, &cm, 1, (tg_var *[]){a, b}, 2, TG_DISCONNECTED_ERROR, gv + 2),
                     TG_OK);
    run(g, gv, 4, ab, 2, rs);
    expect_vals(rs[0], TG_DT_F64, 1, SH(3), V(0, 0, 0), 0);
    expect_vals(rs[1], TG_DT_F64, 1, SH(3), V(0, 0, 0), 0);
    expect_vals(rs[2], TG_DT_F64, 1, SH(3), V(2, 2, -1.5), 0);
    /* int_div: 2, -3, -3; times -cotangent (2, 2, -1.5) */
    expect_vals(rs[3], TG_DT_F64, 1, SH(3), V(-4, 6, -4.5), 0);
    free_all(rs, 4);
    free_all(ab, 2);
    tg_graph_free(g);
}

static void test_choices_clip_where(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "clip");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(6)), *lo = input(g, "lo", TG_DT_F64, 1, SH(6));
    tg_var *hi = input(g, "hi", TG_DT_F64, 1, SH(6));
    tg_tensor *in[3] = {tensor(TG_DT_F64, 1, SH(6), V(0, 1, 2, -1, 3, 0)),
                        tensor(TG_DT_F64, 1, SH(6), V(0, 0, 0, 0, 0, 3)),
                        tensor(TG_DT_F64, 1, SH(6), V(2, 2, 2, 2, 2, 1))},
              *rs[3];
    grads_at(g, tg_clip(g, x, lo, hi), NULL, (tg_var *[]){x, lo, hi}, 3, in, 3, rs);
    /* both ends go to x; below lo to lo; above hi, or lo > hi, to hi */
    expect_vals(rs[0], TG_DT_F64, 1, SH(6), V(1, 1, 1, 0, 0, 0), 0);
    expect_vals(rs[1], TG_DT_F64, 1, SH(6), V(0, 0, 0, 1, 0, 0), 0);
    expect_vals(rs[2], TG_DT_F64, 1, SH(6), V(0, 0, 0, 0, 1, 1), 0);
    free_all(rs, 3);
    free_all(in, 3);
    tg_graph_free(g);

    /* scalar bounds collect the sum of the cotangents they receive */
    g = tg_graph_new(NULL, "clip_s");
    x = input(g, "x", TG_DT_F32, 1, SH(4));
    lo = input(g, "lo", TG_DT_F32, 0, NULL);
    hi = input(g, "hi", TG_DT_F32, 0, NULL);
    tg_tensor *ins[3] = {tensor(TG_DT_F32, 1, SH(4), V(-5, -6, 0.5, 7)),
                         tensor(TG_DT_F32, 0, NULL, V(-1)), tensor(TG_DT_F32, 0, NULL, V(1))};
    grads_at(g, tg_clip(g, x, lo, hi), V(1, 2, 3, 4), (tg_var *[]){x, lo, hi}, 3, ins, 3, rs);
    expect_vals(rs[0], TG_DT_F32, 1, SH(4), V(0, 0, 3, 0), 0);
    expect_vals(rs[1], TG_DT_F32, 0, NULL, V(3), 0);
    expect_vals(rs[2], TG_DT_F32, 0, NULL, V(4), 0);
    free_all(rs, 3);
    free_all(ins, 3);
    tg_graph_free(g);

    /* where: the condition gets nothing (it is not float), a and b split */
    g = tg_graph_new(NULL, "where");
    tg_var *c = input(g, "c", TG_DT_BOOL, 1, SH(3)), *a = input(g, "a", TG_DT_F64, 1, SH(3));
    tg_var *b = input(g, "b", TG_DT_F64, 0, NULL);
    tg_tensor *w[3] = {tensor(TG_DT_BOOL, 1, SH(3), V(1, 0, 1)),
                       tensor(TG_DT_F64, 1, SH(3), V(1, 2, 3)), tensor(TG_DT_F64, 0, NULL, V(9))};
    grads_at(g, tg_where(g, c, a, b), V(1, 2, 4), (tg_var *[]){a, b}, 2, w, 3, rs);
    expect_vals(rs[0], TG_DT_F64, 1, SH(3), V(1, 0, 4), 0);
    expect_vals(rs[1], TG_DT_F64, 0, NULL, V(2), 0);
    free_all(rs, 2);
    free_all(w, 3);
    tg_graph_free(g);
}

/* ---- the driver through tg_grad ---- */

static void test_sum_of_squares(void **state) {
    (void)state;
    const tg_dtype dts[] = {TG_DT_F64, TG_DT_F32};
    for (size_t d = 0; d < 2; d++) {
        tg_graph *g = tg_graph_new(NULL, "sq");
        tg_var *z = input(g, "z", dts[d], 2, SH(2, 3)), *gz;
        tg_var *cost = tg_reduce(g, "sum", tg_mul(g, z, z), NULL, -1, false);
        assert_int_equal(tg_grad(g, cost, &z, 1, TG_DISCONNECTED_ERROR, &gz), TG_OK);
        tg_tensor *in = tensor(dts[d], 2, SH(2, 3), V(1, -2, 0.5, 0, 3.25, -7)), *res;
        run(g, &gz, 1, &in, 1, &res);
        expect_vals(res, dts[d], 2, SH(2, 3), V(2, -4, 1, 0, 6.5, -14), 0); /* exactly 2z */
        tg_tensor_free(res);
        tg_tensor_free(in);
        tg_graph_free(g);
    }
}

static void test_second_derivatives(void **state) {
    (void)state;
    /* scalar x: d2/dx2 x^3 = 6x, through pow and through mul */
    for (int form = 0; form < 2; form++) {
        tg_graph *g = tg_graph_new(NULL, "cube");
        tg_var *x = input(g, "x", TG_DT_F64, 0, NULL), *g1, *g2;
        tg_var *y = form ? tg_mul(g, tg_mul(g, x, x), x) : tg_pow(g, x, tg_literal_float(g, 3));
        assert_int_equal(tg_grad(g, y, &x, 1, TG_DISCONNECTED_ERROR, &g1), TG_OK);
        assert_int_equal(tg_grad(g, g1, &x, 1, TG_DISCONNECTED_ERROR, &g2), TG_OK);
        tg_tensor *in = tensor(TG_DT_F64, 0, NULL, V(1.5)), *res[2];
        run(g, (tg_var *[]){g1, g2}, 2, &in, 1, res);
        expect_vals(res[0], TG_DT_F64, 0, NULL, V(6.75), 1e-14);
        expect_vals(res[1], TG_DT_F64, 0, NULL, V(9), 1e-14);
        free_all(res, 2);
        tg_tensor_free(in);
        tg_graph_free(g);
    }
    /* tanh: d/dx = 1 - t^2, d2/dx2 = -2 t (1 - t^2), d3/dx3 checked by the checker */
    tg_graph *g = tg_graph_new(NULL, "tanh");
    tg_var *x = input(g, "x", TG_DT_F64, 0, NULL), *g1, *g2;
    assert_int_equal(tg_grad(g, tg_tanh(g, x), &x, 1, TG_DISCONNECTED_ERROR, &g1), TG_OK);
    assert_int_equal(tg_grad(g, g1, &x, 1, TG_DISCONNECTED_ERROR, &g2), TG_OK);
    tg_tensor *in = tensor(TG_DT_F64, 0, NULL, V(0.7)), *res[2];
    run(g, (tg_var *[]){g1, g2}, 2, &in, 1, res);
    double t = tanh(0.7);
    expect_vals(res[0], TG_DT_F64, 0, NULL, V(1 - t * t), 1e-15);
    expect_vals(res[1], TG_DT_F64, 0, NULL, V(-2 * t * (1 - t * t)), 1e-15);
    free_all(res, 2);
    grad_ok(g, g2, &in, 1, "third derivative of tanh");
    tg_tensor_free(in);
    tg_graph_free(g);

    /* vector x: d/dx sum(d/dx sum(x^3)) = 6x */
    g = tg_graph_new(NULL, "cube_vec");
    x = input(g, "x", TG_DT_F64, 1, SH(3));
    tg_var *c3 = tg_reduce(g, "sum", tg_mul(g, tg_mul(g, x, x), x), NULL, -1, false);
    assert_int_equal(tg_grad(g, c3, &x, 1, TG_DISCONNECTED_ERROR, &g1), TG_OK);
    tg_var *c2 = tg_reduce(g, "sum", g1, NULL, -1, false);
    assert_int_equal(tg_grad(g, c2, &x, 1, TG_DISCONNECTED_ERROR, &g2), TG_OK);
    in = tensor(TG_DT_F64, 1, SH(3), V(1, -2, 0.5));
    run(g, (tg_var *[]){g1, g2}, 2, &in, 1, res);
    expect_vals(res[0], TG_DT_F64, 1, SH(3), V(3, 12, 0.75), 0);
    expect_vals(res[1], TG_DT_F64, 1, SH(3), V(6, -12, 3), 0);
    free_all(res, 2);
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void expect_graph_error(tg_graph *g, tg_status got, tg_status want, const char *sub) {
    if (got != want || !strstr(tg_graph_error(g), sub))
        print_error("status %d, error: %s\n", got, tg_graph_error(g));
    assert_int_equal(got, want);
    assert_int_equal(tg_graph_status(g), want);
    assert_non_null(strstr(tg_graph_error(g), sub));
}

static void test_driver_errors(void **state) {
    (void)state;
    tg_var *out = NULL;
    /* a non-scalar cost */
    tg_graph *g = tg_graph_new(NULL, "e1");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(3));
    expect_graph_error(g, tg_grad(g, tg_exp(g, x), &x, 1, TG_DISCONNECTED_ERROR, &out), TG_ESHAPE,
                       "must be a scalar");
    assert_null(out);
    tg_graph_free(g);
    /* an integer cost */
    g = tg_graph_new(NULL, "e2");
    tg_var *k = input(g, "k", TG_DT_I64, 0, NULL);
    x = input(g, "x", TG_DT_F64, 0, NULL);
    expect_graph_error(g, tg_grad(g, tg_mul(g, k, k), &x, 1, TG_DISCONNECTED_ERROR, &out), TG_ETYPE,
                       "must be a float");
    tg_graph_free(g);
    /* an integer wrt */
    g = tg_graph_new(NULL, "e3");
    k = input(g, "k", TG_DT_I64, 0, NULL);
    x = input(g, "x", TG_DT_F64, 0, NULL);
    tg_var *c = tg_mul(g, x, k);
    expect_graph_error(g, tg_grad(g, c, &k, 1, TG_DISCONNECTED_ERROR, &out), TG_ETYPE, "'k'");
    tg_graph_free(g);
    /* a disconnected input: an error naming it */
    g = tg_graph_new(NULL, "e4");
    x = input(g, "x", TG_DT_F64, 0, NULL);
    tg_var *y = input(g, "y", TG_DT_F64, 2, SH(2, 3));
    tg_var *wrt[2] = {x, y}, *gv[2] = {NULL, NULL};
    expect_graph_error(g, tg_grad(g, tg_exp(g, x), wrt, 2, TG_DISCONNECTED_ERROR, gv), TG_EINVAL,
                       "does not depend on 'y'");
    assert_null(gv[0]);
    tg_graph_free(g);
    /* ... or zeros of its type; a comparison cuts the path as well */
    g = tg_graph_new(NULL, "e6");
    x = input(g, "x", TG_DT_F64, 0, NULL);
    y = input(g, "y", TG_DT_F64, 2, SH(2, 3));
    tg_var *z = input(g, "z", TG_DT_F32, 0, NULL);
    tg_var *cost = tg_where(g, tg_lt(g, tg_cast(g, z, TG_DT_F64), x), tg_exp(g, x), x);
    tg_var *w3[3] = {x, y, z}, *g3[3];
    assert_int_equal(tg_grad(g, cost, w3, 3, TG_DISCONNECTED_ZERO, g3), TG_OK);
    assert_int_equal(tg_var_dtype(g3[1]), TG_DT_F64);
    assert_int_equal(tg_var_dtype(g3[2]), TG_DT_F32);
    tg_tensor *in[3] = {tensor(TG_DT_F64, 0, NULL, V(0.5)),
                        tensor(TG_DT_F64, 2, SH(2, 3), V(1, 2, 3, 4, 5, 6)),
                        tensor(TG_DT_F32, 0, NULL, V(-1))},
              *res[3];
    run(g, g3, 3, in, 3, res);
    expect_vals(res[0], TG_DT_F64, 0, NULL, V(exp(0.5)), 0);
    expect_vals(res[1], TG_DT_F64, 2, SH(2, 3), V(0, 0, 0, 0, 0, 0), 0);
    expect_vals(res[2], TG_DT_F32, 0, NULL, V(0), 0);
    free_all(res, 3);
    free_all(in, 3);
    tg_graph_free(g);
}

/* ---- the checker itself ---- */

/* floor has a zero gradient; at an integer the finite difference sees the jump. */
static void test_check_fails_on_wrong_gradient(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "jump");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(3)), *y = tg_floor(g, x);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    int nodes = tg_graph_node_count(g);
    tg_tensor *in = tensor(TG_DT_F64, 1, SH(3), V(1, 2, 0.5));
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, &in, 1, NULL, &rep);
    assert_int_equal(st, TG_ECHECK);
    print_message("expected failure: %s\n", tg_last_error());
    assert_non_null(strstr(tg_last_error(), "grad check failed for input 'x' element "));
    assert_non_null(strstr(tg_last_error(), "analytic 0, numeric "));
    assert_int_equal(rep.input, 0);
    assert_true(rep.index == 0 || rep.index == 1);
    assert_true(rep.analytic == 0.0);
    assert_true(fabs(rep.numeric) > 1e5); /* about r / (2 eps) */
    assert_true(rep.abs_err == fabs(rep.numeric));
    assert_true(rep.rel_err == 1.0);
    /* neither the graph nor the tensor changed */
    assert_int_equal(tg_graph_node_count(g), nodes);
    assert_int_equal(tg_graph_status(g), TG_OK);
    expect_vals(in, TG_DT_F64, 1, SH(3), V(1, 2, 0.5), 0);
    /* away from the jumps the same graph passes */
    tg_tensor *in2 = tensor(TG_DT_F64, 1, SH(3), V(1.5, 2.25, 0.5));
    assert_int_equal(tg_grad_check(g, &in2, 1, NULL, &rep), TG_OK);
    assert_true(rep.abs_err == 0.0);
    tg_tensor_free(in2);
    tg_tensor_free(in);
    tg_graph_free(g);

    /* the failing input is named among several; integer inputs are skipped */
    g = tg_graph_new(NULL, "two");
    tg_var *k = input(g, "k", TG_DT_I32, 1, SH(3));
    x = input(g, "x", TG_DT_F32, 1, SH(3));
    tg_var *z = input(g, "z", TG_DT_F32, 1, SH(3));
    y = tg_add(g, tg_mul(g, tg_exp(g, x), k), tg_ceil(g, z));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *t[3] = {tensor(TG_DT_I32, 1, SH(3), V(1, 2, 3)),
                       tensor(TG_DT_F32, 1, SH(3), V(0.1, 0.2, 0.3)),
                       tensor(TG_DT_F32, 1, SH(3), V(0.5, -1, 0.25))};
    st = tg_grad_check(g, t, 3, &TG_GRAD_CHECK_OPTS(.seed = 3), &rep);
    assert_int_equal(st, TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "input 'z' element 1"));
    assert_int_equal(rep.input, 2);
    assert_int_equal(rep.index, 1);
    free_all(t, 3);
    tg_graph_free(g);
}

/* Tolerances and eps from the options; a perturbed tolerance makes a correct gradient
 * fail. */
static void test_check_options(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "opts");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(3)), *y = tg_exp(g, tg_mul(g, x, x));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    tg_tensor *in = tensor(TG_DT_F64, 1, SH(3), V(0.3, -0.7, 1.1));
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    assert_int_equal(tg_grad_check(g, &in, 1, NULL, &rep), TG_OK);
    assert_true(rep.abs_err < 1e-6);
    /* a large eps: the truncation error of central differences shows */
    tg_grad_check_opts o = TG_GRAD_CHECK_OPTS(.eps = 0.1, .rtol = 1e-9, .atol = 1e-12);
    assert_int_equal(tg_grad_check(g, &in, 1, &o, &rep), TG_ECHECK);
    assert_true(rep.abs_err > 1e-4);
    o.rtol = 0.2;
    assert_int_equal(tg_grad_check(g, &in, 1, &o, &rep), TG_OK);
    /* the seed changes the projection, not the verdict */
    for (uint64_t s = 0; s < 4; s++) {
        tg_grad_check_opts os = TG_GRAD_CHECK_OPTS(.seed = s);
        assert_int_equal(tg_grad_check(g, &in, 1, &os, NULL), TG_OK);
    }
    tg_tensor_free(in);
    tg_graph_free(g);
}

static void test_check_errors(void **state) {
    (void)state;
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_graph *g = tg_graph_new(NULL, "bad");
    tg_var *x = input(g, "x", TG_DT_F64, 1, SH(2)), *k = input(g, "k", TG_DT_I64, 1, SH(2));
    tg_tensor *in[2] = {tensor(TG_DT_F64, 1, SH(2), V(1, 2)), tensor(TG_DT_I64, 1, SH(2), V(1, 2))};
    /* two outputs */
    tg_var *outs[2] = {tg_exp(g, x), tg_sin(g, x)};
    assert_int_equal(tg_graph_set_outputs(g, outs, 2), TG_OK);
    assert_int_equal(tg_grad_check(g, in, 2, NULL, &rep), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "exactly one output"));
    assert_int_equal(rep.input, -1);
    /* an integer output */
    tg_var *ki = tg_add(g, k, k);
    assert_int_equal(tg_graph_set_outputs(g, &ki, 1), TG_OK);
    assert_int_equal(tg_grad_check(g, in, 2, NULL, NULL), TG_ETYPE);
    /* wrong input count, NULL input */
    assert_int_equal(tg_graph_set_outputs(g, outs, 1), TG_OK);
    assert_int_equal(tg_grad_check(g, in, 1, NULL, NULL), TG_EINVAL);
    assert_int_equal(tg_grad_check(g, (tg_tensor *[]){in[0], NULL}, 2, NULL, NULL), TG_EINVAL);
    assert_int_equal(tg_grad_check(NULL, in, 2, NULL, NULL), TG_EINVAL);
    /* a tensor of the wrong shape: the interpreter's message */
    tg_tensor *bad = tensor(TG_DT_F64, 1, SH(3), V(1, 2, 3));
    assert_int_equal(tg_grad_check(g, (tg_tensor *[]){bad, in[1]}, 2, NULL, NULL), TG_ESHAPE);
    tg_tensor_free(bad);
    assert_int_equal(tg_grad_check(g, in, 2, NULL, &rep), TG_OK);
    assert_int_equal(tg_graph_status(g), TG_OK);
    tg_graph_free(g);
    /* no float input */
    g = tg_graph_new(NULL, "ints");
    k = input(g, "k", TG_DT_I64, 1, SH(2));
    tg_var *f = tg_cast(g, k, TG_DT_F64);
    assert_int_equal(tg_graph_set_outputs(g, &f, 1), TG_OK);
    assert_int_equal(tg_grad_check(g, &in[1], 1, NULL, NULL), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "no float input"));
    tg_graph_free(g);
    /* an op without a gradient: the driver's message comes through */
    g = tg_graph_new(NULL, "nograd");
    x = input(g, "x", TG_DT_F64, 1, SH(2));
    tg_var *y = tg_mul(g, x, tg_cast(g, tg_gt(g, x, tg_literal_float(g, 1.5)), TG_DT_F64));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    assert_int_equal(tg_grad_check(g, in, 1, NULL, NULL), TG_OK); /* comparisons cut paths */
    tg_graph_free(g);
    free_all(in, 2);
}

/* Outputs with '?' extents: r takes the concrete shape of y. */
static void test_check_unknown_extent(void **state) {
    (void)state;
    rng r = {11};
    tg_graph *g = tg_graph_new(NULL, "dyn");
    tg_var *x = input(g, "x", TG_DT_F64, 2, SH(-1, 3)), *b = input(g, "b", TG_DT_F64, 1, SH(3));
    tg_tensor *t[2] = {rand_tensor(&r, TG_DT_F64, 2, SH(4, 3), (dom){DOM_RANGE, -1, 1}),
                       rand_tensor(&r, TG_DT_F64, 1, SH(3), (dom){DOM_RANGE, -1, 1})};
    grad_ok(g, tg_tanh(g, tg_add(g, x, b)), t, 2, "unknown extent");
    free_all(t, 2);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_unary_second_order),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_binary_second_order),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_nn),
        cmocka_unit_test(test_composite),
        cmocka_unit_test(test_reversed_view_in_graph),
        cmocka_unit_test(test_choices_maximum_minimum),
        cmocka_unit_test(test_choices_abs_sqrt_pow),
        cmocka_unit_test(test_choices_piecewise_constant),
        cmocka_unit_test(test_choices_clip_where),
        cmocka_unit_test(test_sum_of_squares),
        cmocka_unit_test(test_second_derivatives),
        cmocka_unit_test(test_driver_errors),
        cmocka_unit_test(test_check_fails_on_wrong_gradient),
        cmocka_unit_test(test_check_options),
        cmocka_unit_test(test_check_errors),
        cmocka_unit_test(test_check_unknown_extent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
