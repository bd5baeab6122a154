/* test_pmap.c - pmap and axis_index run (docs/pmap.md).
 *
 * Cases: a pmap gives what the unmapped computation gives, by a loop over the slices in C
 * (y[r] = x[r] * w + r, m[r] = outer(x[r], w), s = sum(2 w) returned once), for N = 1, 2
 * and 4, in_axes 0, 1, -1 and none, out_axes 0, 1, -1 and none, in the reference, vm and c
 * modes, with no host devices (threads made for the pmap) and with four (the ranks on
 * cpu:0..3); a nested pmap sees both ranks; a replicated-only pmap takes its extent from
 * devices=N; threads calling one function at once agree; the errors (extents that differ,
 * in_axes out of range, devices=N that differs, out_axes=none on a varying value, an axis
 * name reused by a nested pmap, axis_index outside a pmap when compiled and when its
 * kernel runs, more ranks than host devices, a rank that fails); a pmap built through the
 * C API (tg_apply_multi, in_axes with a `none` entry); and no copy in or out:
 * the ranks get views of the caller's memory (the addresses the executor receives), and a
 * call of a large pmap, once planned, allocates nothing of a slice's size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "tgraph.h"

enum { K = 3 }; /* the extent of a slice */

static tg_module *parse(tg_ctx *ctx, const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(ctx, src, strlen(src), "test.tg", &m) != TG_OK)
        fail_msg("parse: %s\n%s", tg_last_error(), src);
    return m;
}

static tg_fn *compile(tg_graph *g, tg_mode mode) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

/* The source of a pmap over N slices of xs (mapped along in_axis, or replicated when
 * in_none: then devices=N) and W (replicated), with out_axes oy and om for y and m. */
static void source(char *buf, size_t cap, int n, int in_axis, bool in_none, int oy, int om) {
    char xs[64], ia[32];
    if (in_none)
        snprintf(xs, sizeof xs, "f64[%d]", K);
    else if (in_axis == 0)
        snprintf(xs, sizeof xs, "f64[%d,%d]", n, K);
    else
        snprintf(xs, sizeof xs, "f64[%d,%d]", K, n);
    if (in_none)
        snprintf(ia, sizeof ia, "none");
    else
        snprintf(ia, sizeof ia, "%d", in_axis);
    snprintf(buf, cap,
             "func main(xs: %s, W: f64[%d]) {\n"
             "  y, m, s = pmap(@body, xs, W, in_axes=[%s, none], out_axes=[%d, %d, none],\n"
             "                 axis_name=\"batch\", devices=%d)\n"
             "  return y, m, s\n"
             "}\n"
             "func body(x: f64[%d], w: f64[%d]) {\n"
             "  i = cast(axis_index(axis_name=\"batch\"), dtype=\"f64\")\n"
             "  y = add(mul(x, w), i)\n"
             "  m = outer(x, w)\n"
             "  s = sum(mul(w, 2))\n"
             "  return y, m, s\n"
             "}\n",
             xs, K, ia, oy, om, in_none ? n : 0, K, K);
}

/* Element [idx] of t (a strided view is fine). */
static double at(const tg_tensor *t, const int64_t *idx) {
    int64_t flat = 0;
    const int64_t *shape = tg_tensor_shape(t);
    for (int d = 0; d < tg_tensor_ndim(t); d++) flat = flat * shape[d] + idx[d];
    return tg_tensor_get_f64(t, flat);
}

/* Index of a stacked output: rank r at axis ax among the slice's indices sl[0..nsl). */
static void stacked(int64_t *idx, int ax, int64_t r, const int64_t *sl, int nsl) {
    for (int d = 0, k = 0; d <= nsl; d++) idx[d] = d == ax ? r : sl[k++];
}

static const tg_mode MODES[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C};
static const char *const MODE_NAMES[] = {"reference", "vm", "c"};

/* Runs every case of the top comment in the modes given; returns nothing, fails. */
static void check_results(int nmodes) {
    static const int ns[] = {1, 2, 4};
    static const int in_axes[] = {0, 1, -1, 99}; /* 99: none */
    static const int outs[][2] = {{0, 0}, {1, 2}, {-1, -2}};
    double w[K] = {1.5, -2.0, 0.25};
    for (int a = 0; a < 3; a++)
        for (int ii = 0; ii < 4; ii++)
            for (int oo = 0; oo < 3; oo++) {
                int n = ns[a], ia = in_axes[ii];
                bool none = ia == 99;
                char src[2048];
                source(src, sizeof src, n, ia, none, outs[oo][0], outs[oo][1]);
                tg_module *m = parse(NULL, src);
                double xv[4 * K];
                for (int e = 0; e < n * K; e++) xv[e] = 0.5 * e - 1.0;
                int64_t xshape[2] = {ia == 0 ? n : K, ia == 0 ? K : n};
                tg_tensor *in[2] = {tg_tensor_from_data(NULL, TG_DT_F64, none ? 1 : 2,
                                                        none ? (int64_t[]){K} : xshape, xv),
                                    tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){K}, w)};
                for (int md = 0; md < nmodes; md++) {
                    tg_fn *f = compile(tg_module_find(m, "main"), MODES[md]);
                    tg_tensor *out[3] = {0};
                    if (tg_fn_call(f, in, 2, out, 3) != TG_OK)
                        fail_msg("%s: %s\n%s", MODE_NAMES[md], tg_last_error(), src);
                    int oy = outs[oo][0] < 0 ? outs[oo][0] + 2 : outs[oo][0];
                    int om = outs[oo][1] < 0 ? outs[oo][1] + 3 : outs[oo][1];
                    for (int64_t r = 0; r < n; r++) {
                        double x[K];
                        for (int k = 0; k < K; k++) /* slice r, in C */
                            x[k] = none ? xv[k] : ia == 0 ? xv[r * K + k] : xv[k * n + r];
                        for (int64_t k = 0; k < K; k++) {
                            int64_t idx[3];
                            stacked(idx, oy, r, &k, 1);
                            double want = x[k] * w[k] + (double)r, got = at(out[0], idx);
                            if (got != want)
                                fail_msg("%s: y, rank %lld, %lld: want %g, got %g\n%s",
                                         MODE_NAMES[md], (long long)r, (long long)k, want, got,
                                         src);
                            for (int64_t l = 0; l < K; l++) {
                                int64_t sl[2] = {k, l};
                                stacked(idx, om, r, sl, 2);
                                assert_true(at(out[1], idx) == x[k] * w[l]);
                            }
                        }
                    }
                    assert_int_equal(tg_tensor_ndim(out[2]), 0);
                    assert_true(tg_tensor_get_f64(out[2], 0) == 2 * (w[0] + w[1] + w[2]));
                    for (int o = 0; o < 3; o++) tg_tensor_free(out[o]);
                    tg_fn_free(f);
                }
                tg_tensor_free(in[0]);
                tg_tensor_free(in[1]);
                tg_module_free(m);
            }
}

static void test_results_threads(void **state) {
    (void)state;
    check_results(3);
}

static void test_results_devices(void **state) {
    (void)state;
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    check_results(2); /* the c mode's code is the same as above */
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

static const char *NESTED = "func main(xs: f64[2,3,4]) {\n"
                            "  z, r = pmap(@outer_fn, xs, axis_name=\"a\")\n"
                            "  return z, r\n"
                            "}\n"
                            "func outer_fn(x: f64[3,4]) {\n"
                            "  y, k = pmap(@inner, x, in_axes=[1], axis_name=\"b\")\n"
                            "  i = axis_index(axis_name=\"a\")\n"
                            "  return y, add(mul(k, 10), i)\n"
                            "}\n"
                            "func inner(x: f64[3]) {\n"
                            "  i = axis_index(axis_name=\"a\")\n"
                            "  j = axis_index(axis_name=\"b\")\n"
                            "  return add(x, cast(i, dtype=\"f64\")), j\n"
                            "}\n";

/* z[a, j, :] = xs[a, :, j] + a; r[a, j] = 10 j + a */
static void check_nested(tg_mode mode) {
    tg_module *m = parse(NULL, NESTED);
    double xv[24];
    for (int e = 0; e < 24; e++) xv[e] = e;
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 3, (int64_t[]){2, 3, 4}, xv), *out[2];
    tg_fn *f = compile(tg_module_find(m, "main"), mode);
    if (tg_fn_call(f, &x, 1, out, 2) != TG_OK) fail_msg("%s", tg_last_error());
    for (int a = 0; a < 2; a++)
        for (int j = 0; j < 4; j++) {
            assert_true(at(out[1], (int64_t[]){a, j}) == 10 * j + a);
            for (int i = 0; i < 3; i++)
                assert_true(at(out[0], (int64_t[]){a, j, i}) == xv[a * 12 + i * 4 + j] + a);
        }
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_tensor_free(x);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_nested(void **state) {
    (void)state;
    for (int md = 0; md < 3; md++) check_nested(MODES[md]);
    assert_int_equal(tg_devices_configure(2, 0), TG_OK); /* the outer on cpu:0, cpu:1 */
    check_nested(TG_MODE_VM);
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

typedef struct thread_arg {
    tg_fn *f;
    tg_tensor *in[2];
    const tg_tensor *want[3];
    int bad;
} thread_arg;

static void *caller(void *p) {
    thread_arg *a = p;
    for (int i = 0; i < 50; i++) {
        tg_tensor *got[3];
        if (tg_fn_call(a->f, a->in, 2, got, 3) != TG_OK) {
            a->bad++;
            continue;
        }
        for (int o = 0; o < 3; o++) {
            for (int64_t e = 0; e < tg_tensor_size(got[o]); e++)
                a->bad += tg_tensor_get_f64(got[o], e) != tg_tensor_get_f64(a->want[o], e);
            tg_tensor_free(got[o]);
        }
    }
    return NULL;
}

enum { NTHREADS = 4 };

/* Threads calling one function at once: each pmap call takes ranks of its own. */
static void check_threads(tg_mode mode) {
    char src[2048];
    source(src, sizeof src, 4, 0, false, 0, 1);
    tg_module *m = parse(NULL, src);
    tg_fn *f = compile(tg_module_find(m, "main"), mode);
    double xv[4 * K], w[K] = {1, 2, 3};
    for (int e = 0; e < 4 * K; e++) xv[e] = e;
    thread_arg a[NTHREADS];
    tg_tensor *want[3];
    tg_tensor *in[2] = {tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){4, K}, xv),
                        tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){K}, w)};
    assert_int_equal(tg_fn_call(f, in, 2, want, 3), TG_OK);
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (thread_arg){.f = f, .in = {in[0], in[1]}, .want = {want[0], want[1], want[2]}};
        assert_int_equal(pthread_create(&th[t], NULL, caller, &a[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(a[t].bad, 0);
    }
    for (int o = 0; o < 3; o++) tg_tensor_free(want[o]);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_threads(void **state) {
    (void)state;
    check_threads(TG_MODE_VM);
    check_threads(TG_MODE_REFERENCE);
    assert_int_equal(tg_devices_configure(4, 0), TG_OK);
    check_threads(TG_MODE_VM);
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
}

/* Building (parsing) src fails with a message holding each of want[]. */
static void expect_build_error(const char *src, const char *const *want, int nwant) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "test.tg", &m);
    if (st == TG_OK) fail_msg("no error for\n%s", src);
    for (int k = 0; k < nwant; k++)
        if (!strstr(tg_last_error(), want[k]))
            fail_msg("the message '%s' lacks '%s'", tg_last_error(), want[k]);
}

static void test_type_errors(void **state) {
    (void)state;
    const char *body = "func body(x: f64[3], w: f64[3]) {\n"
                       "  y = mul(x, w)\n"
                       "  return y\n"
                       "}\n";
    char src[1024];
    snprintf(src, sizeof src,
             "func main(a: f64[4,3], b: f64[5,3]) {\n"
             "  z = pmap(@body, a, b, axis_name=\"i\")\n"
             "  return z\n"
             "}\n%s",
             body);
    expect_build_error(
        src, (const char *[]){"test.tg:2:7", "input 1 'a' has 4", "input 2 'b' has 5"}, 3);
    snprintf(src, sizeof src,
             "func main(a: f64[4,3], b: f64[3]) {\n"
             "  z = pmap(@body, a, b, in_axes=[0, -2], axis_name=\"i\")\n"
             "  return z\n"
             "}\n%s",
             body);
    expect_build_error(src, (const char *[]){"in_axes[1] = -2 is out of range", "input 2 'b'"}, 2);
    snprintf(src, sizeof src,
             "func main(a: f64[4,3], b: f64[3]) {\n"
             "  z = pmap(@body, a, b, in_axes=[0, none], axis_name=\"i\", devices=2)\n"
             "  return z\n"
             "}\n%s",
             body);
    expect_build_error(src, (const char *[]){"devices=2", "mapped extent is 4"}, 2);
    snprintf(src, sizeof src,
             "func main(a: f64[4,3], b: f64[3]) {\n"
             "  z = pmap(@body, a, b, in_axes=[0, none], out_axes=[none], axis_name=\"i\")\n"
             "  return z\n"
             "}\n%s",
             body);
    expect_build_error(src, (const char *[]){"out_axes[0] is none", "output 'y' (test.tg:6:"}, 2);
    expect_build_error("func main(a: f64[2,4]) {\n"
                       "  z = pmap(@mid, a, axis_name=\"i\")\n"
                       "  return z\n"
                       "}\n"
                       "func mid(a: f64[4]) {\n"
                       "  z = pmap(@leaf, a, axis_name=\"i\")\n"
                       "  return z\n"
                       "}\n"
                       "func leaf(a: f64[]) {\n"
                       "  return neg(a)\n"
                       "}\n",
                       (const char *[]){"test.tg:2:7", "test.tg:6:7",
                                        "axis name 'i' is already the axis of an enclosing pmap"},
                       3);
}

/* Compiling fails with a message holding want. */
static void expect_compile_error(const char *src, const char *want) {
    tg_module *m = parse(NULL, src);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    tg_fn *f = NULL;
    assert_int_not_equal(tg_graph_compile(tg_module_find(m, "main"), &o, &f), TG_OK);
    if (!strstr(tg_last_error(), want))
        fail_msg("the message '%s' lacks '%s'", tg_last_error(), want);
    tg_module_free(m);
}

/* Calling fails with a message holding want. */
static void expect_call_error(const char *src, tg_tensor *x, const char *want) {
    tg_module *m = parse(NULL, src);
    tg_fn *f = compile(tg_module_find(m, "main"), TG_MODE_VM);
    tg_tensor *out = NULL;
    assert_int_not_equal(tg_fn_call(f, &x, 1, &out, 1), TG_OK);
    assert_null(out);
    if (!strstr(tg_last_error(), want))
        fail_msg("the message '%s' lacks '%s'", tg_last_error(), want);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_axis_errors(void **state) {
    (void)state;
    expect_compile_error("func main(x: f64[3]) {\n"
                         "  i = axis_index(axis_name=\"i\")\n"
                         "  return add(x, cast(i, dtype=\"f64\"))\n"
                         "}\n",
                         "test.tg:2:7: axis_index: no enclosing pmap has the axis 'i'");
    expect_compile_error("func main(x: f64[2,3]) {\n"
                         "  y = pmap(@body, x, axis_name=\"i\")\n"
                         "  return y\n"
                         "}\n"
                         "func body(x: f64[3]) {\n"
                         "  j = axis_index(axis_name=\"j\")\n"
                         "  return add(x, cast(j, dtype=\"f64\"))\n"
                         "}\n",
                         "in 'body', at test.tg:6:7: axis_index: no enclosing pmap has the axis "
                         "'j'");
    /* the kernel checks again: run outside any pmap, it fails */
    tg_module *m = parse(NULL, "func main() {\n"
                               "  i = axis_index(axis_name=\"i\")\n"
                               "  return i\n"
                               "}\n");
    const tg_graph *g = tg_module_find(m, "main");
    const tg_node *n = g->nodes.items[0];
    tg_tensor *out = NULL;
    assert_int_equal(n->op, TG_OP_AXIS_INDEX);
    assert_int_not_equal(tg_node_eval(NULL, g, n, NULL, NULL, &out), TG_OK);
    assert_non_null(strstr(tg_last_error(), "no enclosing pmap has the axis 'i'"));
    assert_null(out);
    /* inside a frame of that axis it gives the rank */
    tg_spmd frame = {.axis = "i", .rank = 3, .size = 4};
    const tg_spmd *prev = tg_spmd_set(&frame);
    assert_int_equal(tg_node_eval(NULL, g, n, NULL, NULL, &out), TG_OK);
    tg_spmd_set(prev);
    assert_int_equal(tg_tensor_get_f64(out, 0), 3);
    tg_tensor_free(out);
    tg_module_free(m);
}

static void test_run_errors(void **state) {
    (void)state;
    double v[12] = {0};
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){4, 3}, v);
    /* rank 1 takes element 3 of 3: it fails, rank 0 does not */
    expect_call_error("func main(xs: f64[?,3]) {\n"
                      "  z = pmap(@body, xs, axis_name=\"b\")\n"
                      "  return z\n"
                      "}\n"
                      "func body(x: f64[3]) {\n"
                      "  y = take(x, add(axis_index(axis_name=\"b\"), 2))\n"
                      "  return y\n"
                      "}\n",
                      x, "pmap rank 1: test.tg:6:7: take: index 3 is out of bounds");
    const char *four = "func main(xs: f64[4,3]) {\n"
                       "  z = pmap(@body, xs, axis_name=\"b\")\n"
                       "  return z\n"
                       "}\n"
                       "func body(x: f64[3]) {\n"
                       "  return exp(x)\n"
                       "}\n";
    assert_int_equal(tg_devices_configure(2, 0), TG_OK);
    expect_call_error(four, x, "a pmap over 4 entries, but there are 2 host devices");
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
    tg_tensor_free(x);
}

/* Built in C: attributes as tg_attr values, in_axes with a `none` entry. */
static void test_c_api(void **state) {
    (void)state;
    tg_graph *body = tg_graph_new(NULL, "body");
    tg_var *x = tg_input(body, "x", TG_DT_F64, 1, (int64_t[]){K});
    tg_var *w = tg_input(body, "w", TG_DT_F64, 1, (int64_t[]){K});
    tg_var *y = tg_mul(body, x, w);
    assert_int_equal(tg_graph_set_outputs(body, &y, 1), TG_OK);
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *in[2] = {tg_input(g, "w", TG_DT_F64, 1, (int64_t[]){K}),
                     tg_input(g, "xs", TG_DT_F64, 2, (int64_t[]){K, 2})};
    const int64_t axes[2] = {0, 1};
    const bool none[2] = {true, false};
    tg_attr attrs[3] = {TG_A_FUNC("body", body), TG_A_STR("axis_name", "i"),
                        TG_A_INTS("in_axes", axes, 2)};
    attrs[2].none = none;
    tg_var *out = NULL;
    int nout = 1;
    /* the body's parameters are (x, w): here x is the replicated one, w the mapped */
    assert_int_equal(tg_apply_multi(g, "pmap", in, 2, attrs, 3, &out, &nout), TG_OK);
    assert_int_equal(nout, 1);
    assert_int_equal(tg_var_ndim(out), 2);
    assert_int_equal(tg_var_dim(out, 0), 2);
    assert_int_equal(tg_graph_set_outputs(g, &out, 1), TG_OK);
    tg_fn *f = compile(g, TG_MODE_VM);
    double wv[K] = {1, 2, 3}, xv[2 * K] = {1, 10, 2, 20, 3, 30};
    tg_tensor *args[2] = {tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){K}, wv),
                          tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){K, 2}, xv)},
              *res = NULL;
    assert_int_equal(tg_fn_call(f, args, 2, &res, 1), TG_OK);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < K; k++)
            assert_true(at(res, (int64_t[]){r, k}) == wv[k] * xv[k * 2 + r]);
    tg_tensor_free(res);
    tg_tensor_free(args[0]);
    tg_tensor_free(args[1]);
    tg_fn_free(f);
    tg_graph_free(g);
    tg_graph_free(body);
}

/* ---- no copy in, no copy out ---- */

/* What the executor is handed, recorded during the call (the views die with it). */
typedef struct seen {
    const tg_tensor *t; /* the tensor itself */
    char *data;         /* its element [0, ...] (NULL for a NULL entry) */
    int64_t stride0;    /* its first stride */
} seen;

typedef struct spy {
    tg_subexec base;
    int nrank;
    seen in[16], out[16];
} spy;

static void record(seen *s, const tg_tensor *t) {
    *s = (seen){.t = t,
                .data = t ? tg_tensor_data(t) : NULL,
                .stride0 = t && tg_tensor_ndim(t) > 0 ? tg_tensor_strides(t)[0] : 0};
}

static tg_status spy_ranks(const tg_subexec *x, const tg_graph *body, const char *axis, int nrank,
                           tg_tensor *const *in, int nin, tg_tensor **out, int nout,
                           tg_kern_note *note, char *msg, size_t cap) {
    (void)body, (void)msg, (void)cap;
    assert_null(note); /* not profiling */
    spy *s = (spy *)x;
    assert_string_equal(axis, "b");
    assert_true(nrank * nin <= 16 && nrank * nout <= 16);
    s->nrank = nrank;
    for (int i = 0; i < nrank * nin; i++) record(&s->in[i], in[i]);
    for (int i = 0; i < nrank * nout; i++) record(&s->out[i], out[i]);
    return TG_OK;
}

static char *addr(const tg_tensor *t) { return tg_tensor_data(t); }

static void test_views(void **state) {
    (void)state;
    tg_module *m =
        parse(NULL, "func main(xs: f64[3,4], w: f64[3]) {\n"
                    "  y, s = pmap(@body, xs, w, in_axes=[1, none], out_axes=[1, none],\n"
                    "              axis_name=\"b\")\n"
                    "  return y, s\n"
                    "}\n"
                    "func body(x: f64[3], w: f64[3]) {\n"
                    "  return mul(x, w), sum(w)\n"
                    "}\n");
    const tg_graph *g = tg_module_find(m, "main");
    const tg_node *n = NULL;
    for (int i = 0; i < g->nodes.n && !n; i++)
        if (((const tg_node *)g->nodes.items[i])->op == TG_OP_PMAP) n = g->nodes.items[i];
    assert_non_null(n);
    tg_tensor *in[2] = {tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){3, 4}),
                        tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3})};
    tg_tensor *out[2] = {tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){3, 4}),
                         tg_tensor_new(NULL, TG_DT_F64, 0, NULL)};
    tg_type tout[2] = {n->out[0]->type, n->out[1]->type};
    spy s = {.base = {.run_ranks = spy_ranks}};
    char msg[256];
    assert_int_equal(tg_kern_call(NULL, n, in, tout, out, &s.base, NULL, NULL, msg, sizeof msg),
                     TG_OK);
    assert_int_equal(s.nrank, 4);
    for (int r = 0; r < 4; r++) {
        /* rank r reads column r of xs in place, and w itself */
        assert_ptr_equal(s.in[r * 2].data, addr(in[0]) + r * sizeof(double));
        assert_int_equal(s.in[r * 2].stride0, 4);
        assert_ptr_equal(s.in[r * 2 + 1].t, in[1]);
        /* and writes column r of y in place; s only from rank 0 */
        assert_ptr_equal(s.out[r * 2].data, addr(out[0]) + r * sizeof(double));
        assert_int_equal(s.out[r * 2].stride0, 4);
        if (r == 0)
            assert_ptr_equal(s.out[1].t, out[1]);
        else
            assert_null(s.out[r * 2 + 1].t);
    }
    for (int i = 0; i < 2; i++) {
        tg_tensor_free(in[i]);
        tg_tensor_free(out[i]);
    }
    tg_module_free(m);
}

/* An allocator that remembers its largest allocation since reset. */
static size_t largest;
static void *counting(void *ud, void *p, size_t osize, size_t nsize) {
    (void)ud, (void)osize;
    if (nsize == 0) {
        free(p);
        return NULL;
    }
    if (nsize > largest) largest = nsize;
    return realloc(p, nsize);
}

enum { BIG = 1 << 16 }; /* elements of a slice */

static void test_no_copies(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(counting, NULL);
    char src[512];
    snprintf(src, sizeof src,
             "func main(xs: f64[4,%d]) {\n"
             "  y = pmap(@body, xs, axis_name=\"b\")\n"
             "  return y\n"
             "}\n"
             "func body(x: f64[%d]) {\n"
             "  return mul(x, 2)\n"
             "}\n",
             BIG, BIG);
    tg_module *m = parse(ctx, src);
    tg_tensor *x = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){4, BIG});
    tg_tensor *y = tg_tensor_new(ctx, TG_DT_F64, 2, (int64_t[]){4, BIG});
    for (int md = 1; md < 3; md++) { /* the reference interpreter allocates every value */
        tg_fn *f = compile(tg_module_find(m, "main"), MODES[md]);
        for (int k = 0; k < 2; k++) { /* the second call runs on plans made by the first */
            largest = 0;
            assert_int_equal(tg_fn_call_into(f, &x, 1, &y, 1), TG_OK);
        }
        if (largest >= BIG * sizeof(double))
            fail_msg("%s: an allocation of %zu bytes in a call", MODE_NAMES[md], largest);
        tg_fn_free(f);
    }
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_module_free(m);
    tg_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_threads), cmocka_unit_test(test_results_devices),
        cmocka_unit_test(test_nested),          cmocka_unit_test(test_threads),
        cmocka_unit_test(test_type_errors),     cmocka_unit_test(test_axis_errors),
        cmocka_unit_test(test_run_errors),      cmocka_unit_test(test_views),
        cmocka_unit_test(test_no_copies),       cmocka_unit_test(test_c_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
