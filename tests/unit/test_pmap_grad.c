/* test_pmap_grad.c - gradients through pmap and its collectives (docs/pmap.md, "Gradients").
 *
 * Every expected value is computed here, independently of the gradient code: by central
 * finite differences of the forward function (the reference interpreter's), by the
 * public checker tg_grad_check, or by a plain loop in C.
 *
 * Cases:
 *  - From outside: for every collective (psum, pmean, pmax, pmin, all_gather along 0 and
 *    1 and tiled, psum_scatter plain and tiled along 1, ppermute as a shift and a cycle;
 *    and none), a pmap of a body mixing it with elementwise ops on a mapped and a
 *    replicated input, its result stacked along 0 or 1 (with the input mapped along 0 or
 *    1), or reduced to an invariant value returned once (out_axes none) or stacked
 *    (out_axes -1); for N = 1, 2 and 4 ranks, f32 and f64: tg_grad_check, then the
 *    gradient compiled in the reference, vm and c modes against finite differences. pmax
 *    and pmin also on data where two ranks tie for the extreme (central differences give
 *    half the slope there: the even split). The gradient with respect to a constant that
 *    a pmap maps.
 *  - Inside a body: the gradients of sum(...) of the same bodies with respect to the
 *    mapped and the replicated parameter against finite differences of the sum over the
 *    ranks of a varying value, or of the one value of an invariant one (the gradient of an
 *    invariant value counts its seed once; a replicated parameter's is summed over the
 *    axis). Exact values: grad(pmax(sum(x)), x) is 1 on the rank holding the maximum, 0
 *    elsewhere, 1/2 on each of two tied ranks (pmin alike); psum, pmean of mapped and of
 *    replicated values.
 *  - A data-parallel step: with W replicated, grad(pmean(local loss), W) is the gradient of
 *    the full-batch loss (a loop in C), the same on every rank; with W mapped, the rank's
 *    own gradient divided by N, and grad(local loss, W) the rank's own.
 *  - Second order: the gradient of a gradient through psum, inside a body and from
 *    outside (tg_grad_check of a function returning a pmap's gradient).
 *  - A collective in a function the body calls: a loss computed by it, its invariant
 *    result used by a varying value, and that result stacked by the pmap (gradient from
 *    outside).
 *  - tg_graph_set_mapped: a body built in C and declared with it gives the full-batch
 *    gradient; a pmap that maps it differently, or over another axis, is an error saying
 *    so; the argument errors.
 * Everything runs without host devices (threads made for the pmap) and on four.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgraph.h"

enum { K = 3 }; /* the extent of w */

static const tg_mode MODES[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C};
static const char *const MODE_NAMES[] = {"reference", "vm", "c"};
static const int NS[] = {1, 2, 4};

/* How many modes the checks run in: every one without host devices, the reference and vm
 * modes on four (the c mode's code is the same). */
static int nmodes = 3;

static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "test.tg", &m) != TG_OK)
        fail_msg("parse: %s\n%s", tg_last_error(), src);
    return m;
}

static tg_fn *compile(tg_graph *g, tg_mode mode, const char *src) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s\n%s", tg_last_error(), src);
    return f;
}

/* tmpl with every {KEY} replaced by its value in keys[] (pairs, NULL-terminated). */
static void expand(char *out, size_t cap, const char *tmpl, const char *const *keys) {
    size_t n = 0;
    for (const char *p = tmpl; *p;) {
        bool done = false;
        for (int k = 0; keys[k] && !done && *p == '{'; k += 2) {
            size_t kl = strlen(keys[k]);
            if (strncmp(p + 1, keys[k], kl) != 0 || p[1 + kl] != '}') continue;
            size_t vl = strlen(keys[k + 1]);
            assert_true(n + vl < cap);
            memcpy(out + n, keys[k + 1], vl);
            n += vl;
            p += kl + 2;
            done = true;
        }
        if (done) continue;
        assert_true(n + 1 < cap);
        out[n++] = *p++;
    }
    out[n] = '\0';
}

static void set(tg_tensor *t, int64_t e, double v) {
    if (tg_tensor_dtype(t) == TG_DT_F32)
        ((float *)tg_tensor_data(t))[e] = (float)v;
    else
        ((double *)tg_tensor_data(t))[e] = v;
}

/* The projection of an output (element e's weight), magnitudes in [0.5, 1.4]. */
static double proj(int64_t e) { return (e % 2 ? -1.0 : 1.0) * (0.5 + 0.15 * (double)(e % 7)); }

/* ---- finite differences ---- */

/* What a forward function's output is reduced to. */
typedef enum {
    COST_PROJECT, /* sum(y * proj): the cotangent of y is proj */
    COST_SUM,     /* sum(y): the ranks' values of a varying scalar, summed */
    COST_FIRST,   /* y[0]: an invariant scalar, counted once */
} cost_kind;

static double cost(tg_fn *fwd, tg_tensor *const *args, int nin, cost_kind kind) {
    tg_tensor *y = NULL;
    if (tg_fn_call(fwd, args, nin, &y, 1) != TG_OK) fail_msg("forward: %s", tg_last_error());
    double c = 0;
    for (int64_t e = 0; e < tg_tensor_size(y); e++) {
        double v = tg_tensor_get_f64(y, e);
        c += kind == COST_PROJECT ? v * proj(e) : kind == COST_SUM ? v : e == 0 ? v : 0;
    }
    tg_tensor_free(y);
    return c;
}

/* The central difference of the cost in element e of args[i] (a step relative to the
 * element, divided by the step as stored in the dtype). */
static double numeric(tg_fn *fwd, tg_tensor *const *args, int nin, int i, int64_t e,
                      cost_kind kind) {
    tg_tensor *x = args[i];
    bool f32 = tg_tensor_dtype(x) == TG_DT_F32;
    double x0 = tg_tensor_get_f64(x, e), h = (f32 ? 1e-3 : 1e-6) * fmax(1.0, fabs(x0));
    set(x, e, x0 + h);
    double xp = tg_tensor_get_f64(x, e), cp = cost(fwd, args, nin, kind);
    set(x, e, x0 - h);
    double xm = tg_tensor_get_f64(x, e), cm = cost(fwd, args, nin, kind);
    set(x, e, x0);
    return (cp - cm) / (xp - xm);
}

/* got (the gradients of args[0..nin), one tensor each) against finite differences of fwd;
 * fails naming what. The tolerances are tg_grad_check's: at a tie the central difference
 * of a product with the extreme is off by O(step) (one side of the kink). */
static bool fd_agree(tg_fn *fwd, tg_tensor *const *args, int nin, tg_tensor *const *got,
                     cost_kind kind, char *why, size_t cap) {
    for (int i = 0; i < nin; i++) {
        bool f32 = tg_tensor_dtype(args[i]) == TG_DT_F32;
        double rtol = f32 ? 1e-2 : 1e-5, atol = f32 ? 1e-3 : 1e-8;
        assert_int_equal(tg_tensor_size(got[i]), tg_tensor_size(args[i]));
        for (int64_t e = 0; e < tg_tensor_size(args[i]); e++) {
            double num = numeric(fwd, args, nin, i, e, kind), a = tg_tensor_get_f64(got[i], e);
            if (!(fabs(a - num) <= atol + rtol * fabs(num))) {
                snprintf(why, cap, "input %d element %lld: gradient %.9g, finite differences %.9g",
                         i, (long long)e, a, num);
                return false;
            }
        }
    }
    return true;
}

static void expect_fd(tg_fn *fwd, tg_tensor *const *args, int nin, tg_tensor *const *got,
                      cost_kind kind, const char *what, const char *src) {
    char why[256];
    if (!fd_agree(fwd, args, nin, got, kind, why, sizeof why))
        fail_msg("%s: %s\n%s", what, why, src);
}

/* ---- the bodies: each collective mixed with elementwise ops ----
 * A body takes x (a slice of the mapped xs, of shape X) and w (f32 or f64 [3],
 * replicated). V is a value varying over the axis "i"; I an invariant one (a reduction of
 * the axis on top of the varying collectives). {PERM} is a shift right by one rank (rank 0
 * receives nothing) or a cycle. */
typedef struct body_case {
    const char *name;
    int slice[2]; /* the slice's extents: > 0 as is, -1: N, -2: 2N */
    int ndim;
    const char *v, *inv;
    bool extreme; /* pmax, pmin: checked also with ties */
    bool cycle;   /* ppermute: {PERM} a cycle, else a shift */
} body_case;

static const body_case BODIES[] = {
    {"no collective", {K}, 1, "mul(sin(x), w)", "mul(sin(w), w)", false, false},
    {"psum",
     {K},
     1,
     "mul(psum(mul(x, w), axis_name=\"i\"), tanh(x))",
     "mul(psum(mul(sin(x), w), axis_name=\"i\"), w)",
     false,
     false},
    {"pmean",
     {K},
     1,
     "add(pmean(mul(x, exp(w)), axis_name=\"i\"), mul(x, w))",
     "mul(pmean(mul(x, x), axis_name=\"i\"), tanh(w))",
     false,
     false},
    {"pmax",
     {K},
     1,
     "mul(pmax(mul(x, w), axis_name=\"i\"), add(x, 2))",
     "mul(pmax(mul(x, w), axis_name=\"i\"), w)",
     true,
     false},
    {"pmin",
     {K},
     1,
     "mul(pmin(mul(x, w), axis_name=\"i\"), add(x, 2))",
     "sin(pmin(add(x, w), axis_name=\"i\"))",
     true,
     false},
    {"all_gather",
     {K},
     1,
     "mul(all_gather(mul(x, w), axis_name=\"i\"), w)",
     "psum(mul(all_gather(tanh(x), axis_name=\"i\"), w), axis_name=\"i\")",
     false,
     false},
    {"all_gather axis=1",
     {2, K},
     2,
     "sin(all_gather(mul(x, w), axis_name=\"i\", axis=1))",
     "psum(mul(all_gather(x, axis_name=\"i\", axis=1), w), axis_name=\"i\")",
     false,
     false},
    {"all_gather tiled",
     {2, K},
     2,
     "mul(all_gather(mul(x, w), axis_name=\"i\", tiled=true), exp(w))",
     "psum(mul(all_gather(x, axis_name=\"i\", tiled=true), w), axis_name=\"i\")",
     false,
     false},
    {"psum_scatter",
     {-1, K},
     2,
     "mul(psum_scatter(mul(x, w), axis_name=\"i\"), add(w, 1))",
     "psum(sin(psum_scatter(mul(x, w), axis_name=\"i\")), axis_name=\"i\")",
     false,
     false},
    {"psum_scatter tiled",
     {K, -2},
     2,
     "mul(psum_scatter(mul(x, sum(w)), axis_name=\"i\", scatter_dimension=1, tiled=true), "
     "expand_dims(w, axis=[1]))",
     "psum(tanh(psum_scatter(mul(x, expand_dims(w, axis=[1])), axis_name=\"i\", "
     "scatter_dimension=1, tiled=true)), axis_name=\"i\")",
     false,
     false},
    {"ppermute shift",
     {K},
     1,
     "mul(ppermute(mul(x, w), axis_name=\"i\", perm={PERM}), add(x, w))",
     "psum(mul(ppermute(sin(x), axis_name=\"i\", perm={PERM}), w), axis_name=\"i\")",
     false,
     false},
    {"ppermute cycle",
     {K},
     1,
     "mul(ppermute(mul(x, w), axis_name=\"i\", perm={PERM}), add(x, w))",
     "psum(mul(ppermute(sin(x), axis_name=\"i\", perm={PERM}), w), axis_name=\"i\")",
     false,
     true},
};

/* The shapes of a case for N ranks: the slice's, and xs's (N inserted at in_axis). */
static int slice_shape(const body_case *b, int n, int64_t *shape) {
    for (int d = 0; d < b->ndim; d++)
        shape[d] = b->slice[d] > 0 ? b->slice[d] : b->slice[d] == -1 ? n : 2 * n;
    return b->ndim;
}

static void shape_str(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "", (long long)shape[d]);
    snprintf(buf + k, cap - k, "]");
}

static void perm_str(char *buf, size_t cap, int n, bool cycle) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    int pairs = cycle ? n : n - 1;
    for (int r = 0; r < pairs; r++)
        k += (size_t)snprintf(buf + k, cap - k, "%s[%d, %d]", r ? ", " : "", r, (r + 1) % n);
    snprintf(buf + k, cap - k, "]");
}

/* A source of a case: tmpl with {T} the dtype, {XS} xs's shape, {X} the slice's, {IA} the
 * in_axis, {OA} the out_axis, {Y} the body's expression (with its {PERM}). */
typedef struct src_args {
    const body_case *b;
    int n;
    tg_dtype dt;
    int in_axis;
    const char *out_axis;
    bool invariant; /* {Y} is the case's inv, else its v */
} src_args;

static void make_source(char *out, size_t cap, const char *tmpl, const src_args *a,
                        int64_t *xs_shape, int *xs_ndim) {
    int64_t sl[3], xs[4];
    int nd = slice_shape(a->b, a->n, sl);
    for (int d = 0, k = 0; d <= nd; d++) xs[d] = d == a->in_axis ? a->n : sl[k++];
    char sx[64], sxs[64], ia[8], perm[128], y[512];
    shape_str(sx, sizeof sx, sl, nd);
    shape_str(sxs, sizeof sxs, xs, nd + 1);
    snprintf(ia, sizeof ia, "%d", a->in_axis);
    perm_str(perm, sizeof perm, a->n, a->b->cycle);
    expand(y, sizeof y, a->invariant ? a->b->inv : a->b->v, (const char *[]){"PERM", perm, NULL});
    expand(out, cap, tmpl,
           (const char *[]){"T", a->dt == TG_DT_F32 ? "f32" : "f64", "XS", sxs, "X", sx, "IA", ia,
                            "OA", a->out_axis, "Y", y, NULL});
    memcpy(xs_shape, xs, sizeof xs);
    *xs_ndim = nd + 1;
}

/* xs for N ranks: element e of rank r's slice is 0.31 ((3 r + 5 e) mod 7) - 0.9, distinct
 * over the ranks for each e (at least 0.31 apart). With ties, a second rank copies another:
 * for N = 2 rank 1 copies rank 0 at the even elements; for N = 4 rank 3 copies rank 1
 * (which holds the maximum of some elements and the minimum of others). */
static tg_tensor *make_xs(tg_dtype dt, const int64_t *shape, int ndim, int in_axis, int n,
                          bool ties) {
    tg_tensor *t = tg_tensor_new(NULL, dt, ndim, shape);
    int64_t size = tg_tensor_size(t), inner = 1;
    for (int d = in_axis + 1; d < ndim; d++) inner *= shape[d];
    for (int64_t flat = 0; flat < size; flat++) {
        int64_t r = flat / inner % n;                        /* the rank */
        int64_t e = flat / inner / n * inner + flat % inner; /* its element, in C order */
        int64_t src = r;
        if (ties && n == 2 && r == 1 && e % 2 == 0) src = 0;
        if (ties && n == 4 && r == 3) src = 1;
        set(t, flat, 0.31 * (double)((3 * src + 5 * e) % 7) - 0.9);
    }
    return t;
}

static tg_tensor *make_w(tg_dtype dt) {
    tg_tensor *t = tg_tensor_new(NULL, dt, 1, (int64_t[]){K});
    const double w[K] = {0.75, -1.25, 0.5};
    for (int k = 0; k < K; k++) set(t, k, w[k]);
    return t;
}

/* ---- from outside: tg_grad_check, and the gradient in each mode against differences ---- */

static const char *OUTER = "func main(xs: {T}{XS}, w: {T}[3]) {\n"
                           "  y = pmap(@body, xs, w, in_axes=[{IA}, none], out_axes=[{OA}],\n"
                           "           axis_name=\"i\")\n"
                           "  return y\n"
                           "}\n"
                           "func body(x: {T}{X}, w: {T}[3]) {\n"
                           "  y = {Y}\n"
                           "  return y\n"
                           "}\n";

/* The gradient of sum(y * proj) with respect to every input of g (y its only output),
 * built in a clone. */
static tg_graph *outer_grad(const tg_graph *g) {
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    tg_var *y = tg_graph_output(c, 0);
    int64_t shape[8];
    int nd = tg_var_ndim(y);
    for (int d = 0; d < nd; d++) shape[d] = tg_var_dim(y, d);
    tg_tensor *r = tg_tensor_new(NULL, tg_var_dtype(y), nd, shape);
    for (int64_t e = 0; e < tg_tensor_size(r); e++) set(r, e, proj(e));
    tg_var *rv = tg_constant(c, r), *wrt[2] = {tg_graph_input(c, 0), tg_graph_input(c, 1)}, *gv[2];
    tg_tensor_free(r);
    if (tg_vjp(c, &y, &rv, 1, wrt, 2, TG_DISCONNECTED_ZERO, gv) != TG_OK)
        fail_msg("vjp: %s", tg_graph_error(c));
    assert_int_equal(tg_graph_set_outputs(c, gv, 2), TG_OK);
    return c;
}

static void check_outer(const src_args *a, bool ties) {
    char src[4096], what[256];
    int64_t xs_shape[4];
    int xs_ndim;
    make_source(src, sizeof src, OUTER, a, xs_shape, &xs_ndim);
    snprintf(what, sizeof what, "%s, N=%d, %s, in_axis %d, out_axes %s%s", a->b->name, a->n,
             a->dt == TG_DT_F32 ? "f32" : "f64", a->in_axis, a->out_axis, ties ? ", ties" : "");
    tg_module *m = parse(src);
    tg_graph *g = tg_module_find(m, "main");
    tg_tensor *args[2] = {make_xs(a->dt, xs_shape, xs_ndim, a->in_axis, a->n, ties), make_w(a->dt)};
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    if (tg_grad_check(g, args, 2, &TG_GRAD_CHECK_OPTS(.seed = 7), &rep) != TG_OK)
        fail_msg("%s: %s\n%s", what, tg_last_error(), src);
    tg_fn *fwd = compile(g, TG_MODE_REFERENCE, src);
    tg_graph *gg = outer_grad(g);
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(gg, MODES[md], src);
        tg_tensor *got[2] = {0};
        if (tg_fn_call(f, args, 2, got, 2) != TG_OK)
            fail_msg("%s, %s: %s\n%s", what, MODE_NAMES[md], tg_last_error(), src);
        char wm[300];
        snprintf(wm, sizeof wm, "%s, %s", what, MODE_NAMES[md]);
        expect_fd(fwd, args, 2, got, COST_PROJECT, wm, src);
        tg_tensor_free(got[0]);
        tg_tensor_free(got[1]);
        tg_fn_free(f);
    }
    tg_fn_free(fwd);
    tg_graph_free(gg);
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_module_free(m);
}

static void outer_all(void) {
    for (size_t b = 0; b < sizeof BODIES / sizeof BODIES[0]; b++)
        for (int ni = 0; ni < 3; ni++)
            for (int dt = 0; dt < 2; dt++)
                for (int ties = 0; ties < (BODIES[b].extreme && NS[ni] > 1 ? 2 : 1); ties++) {
                    src_args a = {.b = &BODIES[b], .n = NS[ni], .dt = dt ? TG_DT_F64 : TG_DT_F32};
                    /* stacked along 0 from slices along 0, along 1 from slices along 1 */
                    a.in_axis = 0, a.out_axis = "0";
                    check_outer(&a, ties);
                    a.in_axis = 1, a.out_axis = "1";
                    check_outer(&a, ties);
                    /* an invariant value, returned once, and stacked (its N copies'
                       cotangents sum) */
                    a.in_axis = ni % 2, a.out_axis = "none", a.invariant = true;
                    check_outer(&a, ties);
                    a.in_axis = (ni + 1) % 2, a.out_axis = "-1";
                    check_outer(&a, ties);
                }
}

static void test_outer_threads(void **state) {
    (void)state;
    nmodes = 3;
    outer_all();
}

static void test_outer_devices(void **state) {
    (void)state;
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    outer_all();
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* The gradient with respect to a constant mapped by the pmap: main reads no axis (the
 * pmap binds the body's), so nothing is summed outside the pmap. */
static const char *CONST_GRAD = "func main(w: f64[3]) {\n"
                                "  xs = const(value=[{XV}], dtype=\"f64\", shape=[{N}, 3])\n"
                                "  y = pmap(@body, xs, w, in_axes=[0, none], axis_name=\"i\")\n"
                                "  gx, gw = grad(sum(mul(y, y)), xs, w)\n"
                                "  return gx, gw\n"
                                "}\n"
                                "func body(x: f64[3], w: f64[3]) {\n"
                                "  return mul(psum(mul(x, w), axis_name=\"i\"), tanh(x))\n"
                                "}\n";
static const char *CONST_FWD = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                               "  y = pmap(@body, xs, w, in_axes=[0, none], axis_name=\"i\")\n"
                               "  return sum(mul(y, y))\n"
                               "}\n"
                               "func body(x: f64[3], w: f64[3]) {\n"
                               "  return mul(psum(mul(x, w), axis_name=\"i\"), tanh(x))\n"
                               "}\n";

static void check_constant(int n) {
    char src[2048], fsrc[2048], ns[8], xv[512] = "";
    tg_tensor *args[2] = {make_xs(TG_DT_F64, (int64_t[]){n, K}, 2, 0, n, false), make_w(TG_DT_F64)};
    for (int64_t e = 0; e < n * K; e++)
        snprintf(xv + strlen(xv), sizeof xv - strlen(xv), "%s%.17g", e ? ", " : "",
                 tg_tensor_get_f64(args[0], e));
    snprintf(ns, sizeof ns, "%d", n);
    expand(src, sizeof src, CONST_GRAD, (const char *[]){"N", ns, "XV", xv, NULL});
    expand(fsrc, sizeof fsrc, CONST_FWD, (const char *[]){"N", ns, NULL});
    tg_module *m = parse(src), *fm = parse(fsrc);
    tg_fn *fwd = compile(tg_module_find(fm, "main"), TG_MODE_REFERENCE, fsrc);
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *got[2] = {0};
        if (tg_fn_call(f, &args[1], 1, got, 2) != TG_OK)
            fail_msg("constant, N=%d, %s: %s\n%s", n, MODE_NAMES[md], tg_last_error(), src);
        char what[64];
        snprintf(what, sizeof what, "constant, N=%d, %s", n, MODE_NAMES[md]);
        expect_fd(fwd, args, 2, got, COST_SUM, what, src);
        tg_tensor_free(got[0]);
        tg_tensor_free(got[1]);
        tg_fn_free(f);
    }
    tg_fn_free(fwd);
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_module_free(m);
    tg_module_free(fm);
}

static void test_outer_constant(void **state) {
    (void)state;
    for (int ni = 0; ni < 3; ni++) check_constant(NS[ni]);
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    for (int ni = 0; ni < 3; ni++) check_constant(NS[ni]);
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- inside a body: against differences of the sum over the ranks, or of the one value ---- */

static const char *INNER = "func main(xs: {T}{XS}, w: {T}[3]) {\n"
                           "  gx, gw = pmap(@body, xs, w, in_axes=[{IA}, none],\n"
                           "                out_axes=[{IA}, none], axis_name=\"i\")\n"
                           "  return gx, gw\n"
                           "}\n"
                           "func body(x: {T}{X}, w: {T}[3]) {\n"
                           "  y = sum({Y})\n"
                           "  gx, gw = grad(y, x, w, disconnected=\"zero\")\n"
                           "  return gx, gw\n"
                           "}\n";

/* The ranks' values of y, stacked. */
static const char *INNER_FWD = "func main(xs: {T}{XS}, w: {T}[3]) {\n"
                               "  y = pmap(@body, xs, w, in_axes=[{IA}, none], axis_name=\"i\")\n"
                               "  return y\n"
                               "}\n"
                               "func body(x: {T}{X}, w: {T}[3]) {\n"
                               "  return sum({Y})\n"
                               "}\n";

/* grad(y, x) on rank r is d(sum over the ranks of y)/d(x on rank r) for a varying y, and
 * dy/d(x on rank r) for an invariant one; grad(y, w) of the replicated w is the derivative
 * with respect to w, which every rank reads, of the same. */
static void check_inner(const src_args *a, bool ties) {
    char src[4096], fsrc[4096], what[256];
    int64_t xs_shape[4];
    int xs_ndim;
    make_source(src, sizeof src, INNER, a, xs_shape, &xs_ndim);
    make_source(fsrc, sizeof fsrc, INNER_FWD, a, xs_shape, &xs_ndim);
    snprintf(what, sizeof what, "grad inside, %s (%s), N=%d, %s, in_axis %d%s", a->b->name,
             a->invariant ? "invariant" : "varying", a->n, a->dt == TG_DT_F32 ? "f32" : "f64",
             a->in_axis, ties ? ", ties" : "");
    tg_module *m = parse(src), *fm = parse(fsrc);
    tg_tensor *args[2] = {make_xs(a->dt, xs_shape, xs_ndim, a->in_axis, a->n, ties), make_w(a->dt)};
    tg_fn *fwd = compile(tg_module_find(fm, "main"), TG_MODE_REFERENCE, fsrc);
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *got[2] = {0};
        if (tg_fn_call(f, args, 2, got, 2) != TG_OK)
            fail_msg("%s, %s: %s\n%s", what, MODE_NAMES[md], tg_last_error(), src);
        char wm[300];
        snprintf(wm, sizeof wm, "%s, %s", what, MODE_NAMES[md]);
        expect_fd(fwd, args, 2, got, a->invariant ? COST_FIRST : COST_SUM, wm, src);
        tg_tensor_free(got[0]);
        tg_tensor_free(got[1]);
        tg_fn_free(f);
    }
    tg_fn_free(fwd);
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_module_free(m);
    tg_module_free(fm);
}

static void inner_all(void) {
    for (size_t b = 0; b < sizeof BODIES / sizeof BODIES[0]; b++)
        for (int ni = 0; ni < 3; ni++)
            for (int dt = 0; dt < 2; dt++)
                for (int ties = 0; ties < (BODIES[b].extreme && NS[ni] > 1 ? 2 : 1); ties++)
                    for (int inv = 0; inv < 2; inv++) {
                        src_args a = {.b = &BODIES[b],
                                      .n = NS[ni],
                                      .dt = dt ? TG_DT_F64 : TG_DT_F32,
                                      .in_axis = (ni + inv) % 2,
                                      .invariant = inv};
                        check_inner(&a, ties);
                    }
}

static void test_inner_threads(void **state) {
    (void)state;
    nmodes = 3;
    inner_all();
}

static void test_inner_devices(void **state) {
    (void)state;
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    inner_all();
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- exact values inside a body ---- */

/* Each rank's row of xs: {a_r, 1, -0.5}; its sum s_r = a_r + 0.5 (exact in f64). */
static const char *EXACT = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                           "  gmax, gmin, gs, gm, gws, gwm, gwx = pmap(@body, xs, w,\n"
                           "      in_axes=[0, none], out_axes=[0, 0, 0, 0, none, none, none],\n"
                           "      axis_name=\"i\")\n"
                           "  return gmax, gmin, gs, gm, gws, gwm, gwx\n"
                           "}\n"
                           "func body(x: f64[3], w: f64[3]) {\n"
                           "  s = sum(x)\n"
                           "  gmax = grad(pmax(s, axis_name=\"i\"), x)\n"
                           "  gmin = grad(pmin(s, axis_name=\"i\"), x)\n"
                           "  gs = grad(psum(s, axis_name=\"i\"), x)\n"
                           "  gm = grad(pmean(s, axis_name=\"i\"), x)\n"
                           "  gws = grad(psum(sum(w), axis_name=\"i\"), w)\n"
                           "  gwm = grad(pmean(sum(w), axis_name=\"i\"), w)\n"
                           "  gwx = grad(pmax(sum(w), axis_name=\"i\"), w)\n"
                           "  return gmax, gmin, gs, gm, gws, gwm, gwx\n"
                           "}\n";

/* Element [r, k] of a stacked gradient, or [k] of one returned once, is want. */
static void expect_rows(const tg_tensor *t, int n, const double *want_per_rank, const char *what,
                        const char *mode) {
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 3; k++) {
            double got = tg_tensor_get_f64(t, (int64_t)r * 3 + k);
            if (got != want_per_rank[r])
                fail_msg("%s, %s: rank %d element %d: want %g, got %g", what, mode, r, k,
                         want_per_rank[r], got);
        }
}

/* grad(pmax(s), x) on rank r: 1 / (the ranks holding the maximum) where r holds it, else
 * 0 (pmin alike); grad(psum(s), x) = 1 and grad(pmean(s), x) = 1/N on every rank; the
 * gradients of psum, pmean and pmax of sum(w), w replicated: N, 1 and 1 (every rank holds
 * the maximum: 1/N each, summed over the ranks). */
static void check_exact(int n, const double *a, const char *what) {
    char src[2048], ns[8];
    snprintf(ns, sizeof ns, "%d", n);
    expand(src, sizeof src, EXACT, (const char *[]){"N", ns, NULL});
    tg_module *m = parse(src);
    tg_tensor *xs = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){n, 3}), *w = make_w(TG_DT_F64);
    double s[4], hi = -INFINITY, lo = INFINITY;
    for (int r = 0; r < n; r++) {
        set(xs, r * 3, a[r]);
        set(xs, r * 3 + 1, 1.0);
        set(xs, r * 3 + 2, -0.5);
        s[r] = a[r] + 0.5;
        hi = fmax(hi, s[r]);
        lo = fmin(lo, s[r]);
    }
    int nhi = 0, nlo = 0;
    for (int r = 0; r < n; r++) nhi += s[r] == hi, nlo += s[r] == lo;
    double want_max[4], want_min[4], ones[4], mean[4];
    for (int r = 0; r < n; r++) {
        want_max[r] = s[r] == hi ? 1.0 / nhi : 0.0;
        want_min[r] = s[r] == lo ? 1.0 / nlo : 0.0;
        ones[r] = 1.0;
        mean[r] = 1.0 / n;
    }
    tg_tensor *args[2] = {xs, w};
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *out[7] = {0};
        if (tg_fn_call(f, args, 2, out, 7) != TG_OK)
            fail_msg("%s, %s: %s", what, MODE_NAMES[md], tg_last_error());
        expect_rows(out[0], n, want_max, what, "pmax");
        expect_rows(out[1], n, want_min, what, "pmin");
        expect_rows(out[2], n, ones, what, "psum");
        expect_rows(out[3], n, mean, what, "pmean");
        expect_rows(out[4], 1, (double[]){n}, what, "psum of w");
        expect_rows(out[5], 1, ones, what, "pmean of w");
        expect_rows(out[6], 1, ones, what, "pmax of w");
        for (int o = 0; o < 7; o++) tg_tensor_free(out[o]);
        tg_fn_free(f);
    }
    tg_tensor_free(xs);
    tg_tensor_free(w);
    tg_module_free(m);
}

static void exact_all(void) {
    check_exact(1, (double[]){2.0}, "N=1");
    check_exact(2, (double[]){2.0, -1.0}, "N=2");
    check_exact(2, (double[]){3.0, 3.0}, "N=2, tied");
    check_exact(4, (double[]){4.0, 8.0, -2.0, 1.0}, "N=4");
    check_exact(4, (double[]){4.0, 8.0, 8.0, 0.0}, "N=4, tied maximum");
    check_exact(4, (double[]){1.0, 6.0, 1.0, 3.0}, "N=4, tied minimum");
}

static void test_exact_threads(void **state) {
    (void)state;
    nmodes = 3;
    exact_all();
}

static void test_exact_devices(void **state) {
    (void)state;
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    exact_all();
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- a data-parallel step ---- */

enum { B = 3 }; /* examples per rank */

/* The model p = tanh(x . W + b), loss = mean((p - y)^2). With W and b replicated and the
 * loss the pmean of the ranks' losses, the gradient is the full batch's, returned once
 * and stacked (the same on every rank). With W mapped: the gradient of the pmean is the
 * rank's own divided by N, that of the rank's own loss the rank's own. */
static const char *STEP = "func main(xs: f64[{N},3,3], ys: f64[{N},3], W: f64[3], b: f64[],\n"
                          "         Ws: f64[{N},3]) {\n"
                          "  loss, gW, gb, gWr = pmap(@step, xs, ys, W, b,\n"
                          "      in_axes=[0, 0, none, none], out_axes=[none, none, none, 0],\n"
                          "      axis_name=\"i\")\n"
                          "  gm, go = pmap(@local, xs, ys, Ws, b, in_axes=[0, 0, 0, none],\n"
                          "                axis_name=\"i\")\n"
                          "  return loss, gW, gb, gWr, gm, go\n"
                          "}\n"
                          "func step(x: f64[3,3], y: f64[3], W: f64[3], b: f64[]) {\n"
                          "  e = sub(tanh(add(dot(x, W), b)), y)\n"
                          "  loss = pmean(mean(mul(e, e)), axis_name=\"i\")\n"
                          "  gW, gb = grad(loss, W, b)\n"
                          "  return loss, gW, gb, gW\n"
                          "}\n"
                          "func local(x: f64[3,3], y: f64[3], W: f64[3], b: f64[]) {\n"
                          "  e = sub(tanh(add(dot(x, W), b)), y)\n"
                          "  l = mean(mul(e, e))\n"
                          "  gm = grad(pmean(l, axis_name=\"i\"), W)\n"
                          "  go = grad(l, W)\n"
                          "  return gm, go\n"
                          "}\n";

static bool close_to(double got, double want) {
    return fabs(got - want) <= 1e-12 + 1e-12 * fabs(want);
}

static void check_step(int n) {
    char src[2048], ns[8];
    snprintf(ns, sizeof ns, "%d", n);
    expand(src, sizeof src, STEP, (const char *[]){"N", ns, NULL});
    tg_module *m = parse(src);
    double W[K] = {0.4, -0.3, 0.2}, b = 0.1;
    tg_tensor *args[5] = {tg_tensor_new(NULL, TG_DT_F64, 3, (int64_t[]){n, B, K}),
                          tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){n, B}),
                          tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){K}, W),
                          tg_tensor_from_data(NULL, TG_DT_F64, 0, NULL, &b),
                          tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){n, K})};
    for (int64_t e = 0; e < n * B * K; e++) set(args[0], e, sin(0.7 * (double)e + 0.3));
    for (int64_t e = 0; e < n * B; e++) set(args[1], e, cos(1.1 * (double)e));
    for (int64_t e = 0; e < n * K; e++) set(args[4], e, 0.3 * cos(0.9 * (double)e));
    /* the full batch, and each rank's own gradient at its Ws[r], in C */
    double loss = 0, gW[K] = {0}, gb = 0, own[4][K] = {{0}};
    for (int r = 0; r < n; r++)
        for (int j = 0; j < B; j++) {
            const double *x = (const double *)tg_tensor_data(args[0]) + (r * B + j) * K;
            const double *Wr = (const double *)tg_tensor_data(args[4]) + r * K;
            double y = tg_tensor_get_f64(args[1], r * B + j), z = b, zr = b;
            for (int k = 0; k < K; k++) z += x[k] * W[k], zr += x[k] * Wr[k];
            double p = tanh(z), pr = tanh(zr), d = 2 * (p - y) * (1 - p * p) / (n * B);
            double dr = 2 * (pr - y) * (1 - pr * pr) / B;
            loss += (p - y) * (p - y) / (n * B);
            gb += d;
            for (int k = 0; k < K; k++) gW[k] += d * x[k], own[r][k] += dr * x[k];
        }
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *out[6] = {0};
        if (tg_fn_call(f, args, 5, out, 6) != TG_OK)
            fail_msg("N=%d, %s: %s", n, MODE_NAMES[md], tg_last_error());
        bool ok = close_to(tg_tensor_get_f64(out[0], 0), loss) &&
                  close_to(tg_tensor_get_f64(out[2], 0), gb);
        for (int k = 0; k < K; k++) {
            ok = ok && close_to(tg_tensor_get_f64(out[1], k), gW[k]);
            for (int r = 0; r < n; r++) {
                ok = ok && close_to(tg_tensor_get_f64(out[3], r * K + k), gW[k]);
                ok = ok && close_to(tg_tensor_get_f64(out[4], r * K + k), own[r][k] / n);
                ok = ok && close_to(tg_tensor_get_f64(out[5], r * K + k), own[r][k]);
            }
        }
        if (!ok)
            fail_msg("N=%d, %s: loss %.17g (want %.17g), gW[0] %.17g (want %.17g), gb %.17g "
                     "(want %.17g), rank 0's own gW[0] %.17g (want %.17g)",
                     n, MODE_NAMES[md], tg_tensor_get_f64(out[0], 0), loss,
                     tg_tensor_get_f64(out[1], 0), gW[0], tg_tensor_get_f64(out[2], 0), gb,
                     tg_tensor_get_f64(out[5], 0), own[0][0]);
        for (int o = 0; o < 6; o++) tg_tensor_free(out[o]);
        tg_fn_free(f);
    }
    for (int i = 0; i < 5; i++) tg_tensor_free(args[i]);
    tg_module_free(m);
}

static void test_step(void **state) {
    (void)state;
    for (int ni = 0; ni < 3; ni++) check_step(NS[ni]);
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    for (int ni = 0; ni < 3; ni++) check_step(NS[ni]);
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- second order ---- */

/* Inside: with S = psum(sum(x)), grad(S^2, x) = 2S on every rank; then sum(g * x) varies,
 * and its gradient is that of the sum over the ranks, 2S * S: 4S. */
static const char *SECOND_INNER = "func main(xs: f64[{N},3]) {\n"
                                  "  g, h = pmap(@body, xs, axis_name=\"i\")\n"
                                  "  return g, h\n"
                                  "}\n"
                                  "func body(x: f64[3]) {\n"
                                  "  S = psum(sum(x), axis_name=\"i\")\n"
                                  "  g = grad(mul(S, S), x)\n"
                                  "  h = grad(sum(mul(g, x)), x)\n"
                                  "  return g, h\n"
                                  "}\n";

/* Outside: a function returning the gradient of a pmap, checked by tg_grad_check. */
static const char *SECOND_OUTER = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                                  "  y = pmap(@body, xs, w, in_axes=[0, none], axis_name=\"i\")\n"
                                  "  gx, gw = grad(sum(mul(y, y)), xs, w)\n"
                                  "  return {G}\n"
                                  "}\n"
                                  "func body(x: f64[3], w: f64[3]) {\n"
                                  "  p = psum(mul(x, w), axis_name=\"i\")\n"
                                  "  return mul(p, tanh(add(x, all_gather(w, axis_name=\"i\")"
                                  "[0])))\n"
                                  "}\n";

static void check_second(int n) {
    char src[2048], ns[8];
    snprintf(ns, sizeof ns, "%d", n);
    expand(src, sizeof src, SECOND_INNER, (const char *[]){"N", ns, NULL});
    tg_module *m = parse(src);
    tg_tensor *xs = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){n, 3});
    double S = 0;
    for (int64_t e = 0; e < n * 3; e++) {
        set(xs, e, 0.5 * (double)e - 1.25);
        S += 0.5 * (double)e - 1.25;
    }
    for (int md = 0; md < nmodes; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *out[2] = {0};
        if (tg_fn_call(f, &xs, 1, out, 2) != TG_OK)
            fail_msg("N=%d, %s: %s", n, MODE_NAMES[md], tg_last_error());
        for (int64_t e = 0; e < n * 3; e++) {
            if (tg_tensor_get_f64(out[0], e) != 2 * S || tg_tensor_get_f64(out[1], e) != 4 * S)
                fail_msg("N=%d, %s: element %lld: g %g (want %g), h %g (want %g)", n,
                         MODE_NAMES[md], (long long)e, tg_tensor_get_f64(out[0], e), 2 * S,
                         tg_tensor_get_f64(out[1], e), 4 * S);
        }
        tg_tensor_free(out[0]);
        tg_tensor_free(out[1]);
        tg_fn_free(f);
    }
    tg_module_free(m);
    tg_tensor *args[2] = {xs, make_w(TG_DT_F64)};
    for (int o = 0; o < 2; o++) {
        expand(src, sizeof src, SECOND_OUTER,
               (const char *[]){"N", ns, "G", o ? "gw" : "gx", NULL});
        m = parse(src);
        if (tg_grad_check(tg_module_find(m, "main"), args, 2, NULL, NULL) != TG_OK)
            fail_msg("N=%d: %s\n%s", n, tg_last_error(), src);
        tg_module_free(m);
    }
    tg_tensor_free(args[1]);
    tg_tensor_free(xs);
}

static void test_second_order(void **state) {
    (void)state;
    for (int ni = 0; ni < 3; ni++) check_second(NS[ni]);
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    nmodes = 2;
    for (int ni = 0; ni < 3; ni++) check_second(NS[ni]);
    nmodes = 3;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* ---- collectives in a function the body calls ----
 * A call is typed by its callee typed with the call's arguments (a helper returning a psum
 * makes an invariant value), and the gradient walk goes through the callee's body copied
 * into the caller, so its collectives' transposes see the caller's types: a loss computed
 * by a helper, the helper's invariant result used by a varying value (its cotangent summed
 * over the ranks), and that result stacked by the pmap, differentiated from outside. */

static const char *CALL_INNER = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                                "  gx, gw = pmap(@body, xs, w, in_axes=[0, none],\n"
                                "                out_axes=[0, none], axis_name=\"i\")\n"
                                "  return gx, gw\n"
                                "}\n"
                                "func body(x: f64[3], w: f64[3]) {\n"
                                "  gx, gw = grad({Y}, x, w)\n"
                                "  return gx, gw\n"
                                "}\n"
                                "func helper(x: f64[3], w: f64[3]) {\n"
                                "  return {H}\n"
                                "}\n";
static const char *CALL_FWD = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                              "  y = pmap(@body, xs, w, in_axes=[0, none], axis_name=\"i\")\n"
                              "  return y\n"
                              "}\n"
                              "func body(x: f64[3], w: f64[3]) {\n"
                              "  return {Y}\n"
                              "}\n"
                              "func helper(x: f64[3], w: f64[3]) {\n"
                              "  return {H}\n"
                              "}\n";

/* Whether the gradient inside the body of y (with the helper h) agrees with finite
 * differences in every mode (why: the first disagreement). */
static bool call_inner_agrees(int n, const char *y, const char *h, cost_kind kind, char *why,
                              size_t cap) {
    char src[2048], fsrc[2048], ns[8];
    snprintf(ns, sizeof ns, "%d", n);
    expand(src, sizeof src, CALL_INNER, (const char *[]){"N", ns, "Y", y, "H", h, NULL});
    expand(fsrc, sizeof fsrc, CALL_FWD, (const char *[]){"N", ns, "Y", y, "H", h, NULL});
    tg_module *m = parse(src), *fm = parse(fsrc);
    tg_tensor *args[2] = {make_xs(TG_DT_F64, (int64_t[]){n, K}, 2, 0, n, false), make_w(TG_DT_F64)};
    tg_fn *fwd = compile(tg_module_find(fm, "main"), TG_MODE_REFERENCE, fsrc);
    bool ok = true;
    for (int md = 0; md < nmodes && ok; md++) {
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md], src);
        tg_tensor *got[2] = {0};
        if (tg_fn_call(f, args, 2, got, 2) != TG_OK)
            fail_msg("%s: %s\n%s", MODE_NAMES[md], tg_last_error(), src);
        ok = fd_agree(fwd, args, 2, got, kind, why, cap);
        tg_tensor_free(got[0]);
        tg_tensor_free(got[1]);
        tg_fn_free(f);
    }
    tg_fn_free(fwd);
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_module_free(m);
    tg_module_free(fm);
    return ok;
}

static const char *CALL_OUTER = "func main(xs: f64[{N},3], w: f64[3]) {\n"
                                "  y = pmap(@body, xs, w, in_axes=[0, none], axis_name=\"i\")\n"
                                "  return y\n"
                                "}\n"
                                "func body(x: f64[3], w: f64[3]) {\n"
                                "  return mul(helper(x, w), tanh(x))\n"
                                "}\n"
                                "func helper(x: f64[3], w: f64[3]) {\n"
                                "  return psum(mul(x, w), axis_name=\"i\")\n"
                                "}\n";

static void test_calls(void **state) {
    (void)state;
    char why[256], src[1024];
    for (int ni = 0; ni < 3; ni++) {
        if (!call_inner_agrees(NS[ni], "helper(x, w)",
                               "pmean(sum(mul(tanh(x), w)), axis_name=\"i\")", COST_FIRST, why,
                               sizeof why))
            fail_msg("a loss computed by a helper, N=%d: %s", NS[ni], why);
        if (!call_inner_agrees(NS[ni], "sum(mul(helper(x, w), x))",
                               "psum(mul(x, w), axis_name=\"i\")", COST_SUM, why, sizeof why))
            fail_msg("a helper's psum used by a varying value, N=%d: %s", NS[ni], why);
        char ns[8];
        snprintf(ns, sizeof ns, "%d", NS[ni]);
        expand(src, sizeof src, CALL_OUTER, (const char *[]){"N", ns, NULL});
        tg_module *m = parse(src);
        tg_tensor *args[2] = {make_xs(TG_DT_F64, (int64_t[]){NS[ni], K}, 2, 0, NS[ni], false),
                              make_w(TG_DT_F64)};
        tg_status st = tg_grad_check(tg_module_find(m, "main"), args, 2, NULL, NULL);
        if (st != TG_OK)
            fail_msg("a helper's psum stacked by the pmap, N=%d: %s", NS[ni], tg_last_error());
        tg_tensor_free(args[0]);
        tg_tensor_free(args[1]);
        tg_module_free(m);
    }
}

/* ---- tg_graph_set_mapped ---- */

/* A body built in C: loss = pmean(sum((x * w)^2)), returning grad(loss, w), declared
 * (before the gradient is taken) with x mapped and w replicated over "i". */
static tg_graph *declared_body(void) {
    tg_graph *body = tg_graph_new(NULL, "body");
    tg_var *x = tg_input(body, "x", TG_DT_F64, 1, (int64_t[]){K});
    tg_var *w = tg_input(body, "w", TG_DT_F64, 1, (int64_t[]){K});
    assert_int_equal(tg_graph_set_mapped(body, "i", (const bool[]){true, false}, 2), TG_OK);
    tg_var *xw = tg_mul(body, x, w);
    tg_var *local = tg_reduce(body, "sum", tg_mul(body, xw, xw), NULL, -1, false);
    tg_attr axis = TG_A_STR("axis_name", "i");
    tg_var *loss = tg_apply(body, "pmean", &local, 1, &axis, 1), *gw = NULL;
    assert_int_equal(tg_grad(body, loss, &w, 1, TG_DISCONNECTED_ERROR, &gw), TG_OK);
    assert_int_equal(tg_graph_set_outputs(body, &gw, 1), TG_OK);
    return body;
}

/* main(xs, ws) = pmap(body, xs, ws) with in_axes [0, w_axis] (-1: none) and the name axis. */
static tg_status map_body(tg_graph *g, tg_graph *body, int w_axis, const char *axis, tg_var **out) {
    tg_var *in[2] = {tg_input(g, "xs", TG_DT_F64, 2, (int64_t[]){2, K}),
                     w_axis < 0 ? tg_input(g, "w", TG_DT_F64, 1, (int64_t[]){K})
                                : tg_input(g, "ws", TG_DT_F64, 2, (int64_t[]){2, K})};
    const int64_t axes[2] = {0, w_axis < 0 ? 0 : w_axis}, oaxes[1] = {0};
    const bool none[2] = {false, w_axis < 0}, onone[1] = {w_axis < 0};
    tg_attr attrs[4] = {TG_A_FUNC("body", body), TG_A_STR("axis_name", axis),
                        TG_A_INTS("in_axes", axes, 2), TG_A_INTS("out_axes", oaxes, 1)};
    attrs[2].none = none;
    attrs[3].none = onone;
    int nout = 1;
    return tg_apply_multi(g, "pmap", in, 2, attrs, 4, out, &nout);
}

static void test_set_mapped(void **state) {
    (void)state;
    tg_graph *body = declared_body();
    /* mapped as declared: the full-batch gradient (1/N) sum_r 2 x_r^2 w, returned once */
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *gw = NULL;
    assert_int_equal(map_body(g, body, -1, "i", &gw), TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, &gw, 1), TG_OK);
    double xv[2 * K] = {1, -2, 0.5, 3, 1, -1}, wv[K] = {0.5, 2, -1};
    tg_tensor *args[2] = {tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){2, K}, xv),
                          tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){K}, wv)};
    for (int md = 0; md < 3; md++) {
        tg_fn *f = compile(g, MODES[md], "(built in C)");
        tg_tensor *res = NULL;
        assert_int_equal(tg_fn_call(f, args, 2, &res, 1), TG_OK);
        for (int k = 0; k < K; k++) {
            double want = (2 * xv[k] * xv[k] * wv[k] + 2 * xv[K + k] * xv[K + k] * wv[k]) / 2;
            assert_true(close_to(tg_tensor_get_f64(res, k), want));
        }
        tg_tensor_free(res);
        tg_fn_free(f);
    }
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_graph_free(g);
    /* a pmap mapping w, or over another axis, is an error naming the parameter */
    g = tg_graph_new(NULL, "main");
    assert_int_not_equal(map_body(g, body, 0, "i", &gw), TG_OK);
    if (!strstr(tg_last_error(),
                "parameter 'w' of body is typed replicated over the axis 'i' (the gradient "
                "inside it is built for that), but this pmap maps input 2"))
        fail_msg("unexpected message: %s", tg_last_error());
    tg_graph_free(g);
    g = tg_graph_new(NULL, "main");
    assert_int_not_equal(map_body(g, body, -1, "j", &gw), TG_OK);
    if (!strstr(tg_last_error(), "body is typed as the body of a pmap over the axis 'i' (the "
                                 "gradient inside it is built for that), but this pmap's axis "
                                 "is 'j'"))
        fail_msg("unexpected message: %s", tg_last_error());
    tg_graph_free(g);
    /* cleared, the body maps any way */
    assert_int_equal(tg_graph_set_mapped(body, NULL, NULL, 0), TG_OK);
    g = tg_graph_new(NULL, "main");
    assert_int_equal(map_body(g, body, 0, "j", &gw), TG_OK);
    tg_graph_free(g);
    tg_graph_free(body);
    /* the arguments */
    assert_int_equal(tg_graph_set_mapped(NULL, "i", NULL, 0), TG_EINVAL);
    const char *bad[3] = {"the axis name is empty", "negative count", "mapped is NULL"};
    for (int k = 0; k < 3; k++) {
        tg_graph *b = tg_graph_new(NULL, "b");
        bool one = true;
        tg_status st = k == 0   ? tg_graph_set_mapped(b, "", &one, 1)
                       : k == 1 ? tg_graph_set_mapped(b, "i", &one, -1)
                                : tg_graph_set_mapped(b, "i", NULL, 1);
        assert_int_equal(st, TG_EINVAL);
        if (!strstr(tg_last_error(), bad[k]))
            fail_msg("the message '%s' lacks '%s'", tg_last_error(), bad[k]);
        tg_graph_free(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outer_threads),  cmocka_unit_test(test_outer_devices),
        cmocka_unit_test(test_outer_constant), cmocka_unit_test(test_inner_threads),
        cmocka_unit_test(test_inner_devices),  cmocka_unit_test(test_exact_threads),
        cmocka_unit_test(test_exact_devices),  cmocka_unit_test(test_step),
        cmocka_unit_test(test_second_order),   cmocka_unit_test(test_calls),
        cmocka_unit_test(test_set_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
