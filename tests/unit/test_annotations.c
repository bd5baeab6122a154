/* test_annotations.c - device annotations through the C API (docs/devices.md,
 * "Annotations"): tg_var_set_device and tg_var_device on nodes (every output of a node)
 * and inputs, clearing, the device scope (tg_graph_set_device, tg_graph_device) and its
 * nesting, malformed names and constants refused without harm to the graph, NULL
 * handles; then what keeps annotations: tg_graph_clone, the printed text read back (and
 * the Graphviz labels),
 * tg_graph_optimize (merging, fusion and in-place at device boundaries, every node of the
 * result on a device of its source), tg_grad (each gradient node on the device of the
 * node it differentiates, the sum of a value's cotangents on the value's device, the
 * scope of the call for the rest), and a call of a function inlined under a device.
 * Annotated graphs compile to placed functions that compute what the host alone does.
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

#include "ir/ir.h"
#include "ops/ops.h"
#include "tgraph.h"

#define SH(...)                                                                                    \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]) { __VA_ARGS__ }

static tg_graph *graph(void) {
    tg_graph *g = tg_graph_new(NULL, "t");
    assert_non_null(g);
    return g;
}

static tg_var *input(tg_graph *g, const char *name, int n) {
    tg_var *v = tg_input(g, name, TG_DT_F64, SH(n));
    assert_non_null(v);
    return v;
}

/* d names the same device as want (both NULL, or equal strings). */
static void assert_device(const char *d, const char *want) {
    if (!want) {
        if (d) fail_msg("expected no device, got \"%s\"", d);
        return;
    }
    if (!d) fail_msg("expected device \"%s\", got none", want);
    assert_string_equal(d, want);
}

static char *print_graph(const tg_graph *g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(tg_graph_print(g, f), TG_OK);
    fclose(f);
    return buf;
}

/* ---- setting, reading, clearing ---- */

static void test_set_get_clear(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 6);
    tg_var *y = tg_exp(g, x);
    tg_var *parts[3];
    int np = 3;
    assert_int_equal(tg_apply_multi(g, "split", &y, 1, &TG_A_INT("sections", 3), 1, parts, &np),
                     TG_OK);
    assert_int_equal(np, 3);
    assert_null(tg_var_device(x));
    assert_null(tg_var_device(y));

    assert_int_equal(tg_var_set_device(y, "cpu:1"), TG_OK);
    assert_device(tg_var_device(y), "cpu:1");
    /* an output names its node: every output of a node shares its annotation */
    assert_int_equal(tg_var_set_device(parts[1], "sim:0"), TG_OK);
    for (int i = 0; i < 3; i++) assert_device(tg_var_device(parts[i]), "sim:0");
    assert_device(tg_var_device(y), "cpu:1");
    /* an input carries its own */
    assert_int_equal(tg_var_set_device(x, "cpu"), TG_OK);
    assert_device(tg_var_device(x), "cpu");
    /* one copy per distinct name in the graph, whatever the caller's string */
    char name[8];
    strcpy(name, "cpu:1");
    tg_var *z = tg_neg(g, y);
    assert_int_equal(tg_var_set_device(z, name), TG_OK);
    strcpy(name, "xxxxx");
    assert_device(tg_var_device(z), "cpu:1");
    assert_ptr_equal(tg_var_device(z), tg_var_device(y));
    /* NULL clears */
    assert_int_equal(tg_var_set_device(y, NULL), TG_OK);
    assert_null(tg_var_device(y));
    assert_int_equal(tg_var_set_device(x, NULL), TG_OK);
    assert_null(tg_var_device(x));
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph_free(g);
}

static void test_scopes(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 3);
    assert_null(tg_graph_device(g));
    tg_var *a = tg_exp(g, x); /* before any scope */
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_OK);
    assert_device(tg_graph_device(g), "cpu:1");
    tg_var *b = tg_add(g, a, tg_literal_float(g, 1.0));
    const char *outer = tg_graph_device(g); /* a nested scope saves and restores */
    assert_int_equal(tg_graph_set_device(g, "sim:2"), TG_OK);
    tg_var *c = tg_mul(g, b, b);
    tg_var *lit = tg_literal_int(g, 2);
    assert_int_equal(tg_graph_set_device(g, outer), TG_OK);
    assert_device(tg_graph_device(g), "cpu:1");
    tg_var *d = tg_sub(g, c, lit);
    tg_var *e = tg_neg(g, d);
    /* an explicit annotation inside a scope wins for that node */
    assert_int_equal(tg_var_set_device(e, "cpu:0"), TG_OK);
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    assert_null(tg_graph_device(g));
    tg_var *f = tg_tanh(g, e);
    assert_non_null(f);
    assert_null(tg_var_device(a));
    assert_device(tg_var_device(b), "cpu:1");
    assert_device(tg_var_device(c), "sim:2");
    assert_device(tg_var_device(d), "cpu:1");
    assert_device(tg_var_device(e), "cpu:0");
    assert_null(tg_var_device(f));
    assert_null(tg_var_device(lit)); /* literals are constants: no device */
    /* an input made in a scope is not a node: it has none */
    assert_int_equal(tg_graph_set_device(g, "cpu:3"), TG_OK);
    tg_var *w = input(g, "w", 3);
    assert_null(tg_var_device(w));
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph_free(g);
}

/* ---- errors ---- */

static void test_malformed_names(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",       "gpu",    "gpu:0",  "cuda:0", "CPU",     "cpu:",           "cpu:-1",
        "cpu:01", "cpu:00", "cpu:1x", "cpu :1", "cpu:1:2", "sim:1234567890", "cpu1",
        "sim:+1", " cpu",   "cpus",   "sim:0 ",
    };
    static const char *const good[] = {"cpu", "cpu:0", "cpu:12", "sim", "sim:0", "sim:999999999"};
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 3);
    tg_var *y = tg_exp(g, x);
    assert_int_equal(tg_var_set_device(y, "cpu:1"), TG_OK);
    assert_int_equal(tg_graph_set_device(g, "sim:0"), TG_OK);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(tg_var_set_device(y, bad[i]), TG_EINVAL);
        assert_non_null(strstr(tg_last_error(), "tg_var_set_device: malformed device name"));
        assert_non_null(strstr(tg_last_error(), "expected cpu or sim"));
        assert_int_equal(tg_var_set_device(x, bad[i]), TG_EINVAL);
        assert_int_equal(tg_graph_set_device(g, bad[i]), TG_EINVAL);
        assert_non_null(strstr(tg_last_error(), "tg_graph_set_device: malformed device name"));
        /* nothing changed, and the graph is still valid */
        assert_device(tg_var_device(y), "cpu:1");
        assert_null(tg_var_device(x));
        assert_device(tg_graph_device(g), "sim:0");
        assert_int_equal(tg_graph_status(g), TG_OK);
    }
    char msg[256];
    assert_int_equal(tg_var_set_device(y, "gpu:0"), TG_EINVAL);
    snprintf(msg, sizeof msg, "%s", tg_last_error());
    assert_string_equal(msg, "tg_var_set_device: malformed device name \"gpu:0\": expected cpu or "
                             "sim, optionally followed by :N, N an integer >= 0 without a leading "
                             "zero (cpu, cpu:1, sim:0)");
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        assert_int_equal(tg_var_set_device(y, good[i]), TG_OK);
        assert_device(tg_var_device(y), good[i]);
        assert_int_equal(tg_graph_set_device(g, good[i]), TG_OK);
    }
    assert_non_null(tg_neg(g, y)); /* builders still work */
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph_free(g);
}

static void test_constants_refused(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, SH(2));
    tg_var *c = tg_constant(g, t);
    tg_tensor_free(t);
    tg_var *l = tg_literal_float(g, 0.5);
    assert_non_null(c);
    assert_non_null(l);
    assert_int_equal(tg_var_set_device(c, "cpu:1"), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "is a constant, which has no device"));
    assert_int_equal(tg_var_set_device(l, "cpu:1"), TG_EINVAL);
    assert_int_equal(tg_var_set_device(c, NULL), TG_EINVAL);
    assert_null(tg_var_device(c));
    assert_null(tg_var_device(l));
    assert_int_equal(tg_graph_status(g), TG_OK);
    tg_graph_free(g);
}

static void test_null_and_failed(void **state) {
    (void)state;
    assert_int_equal(tg_var_set_device(NULL, "cpu"), TG_EINVAL);
    assert_string_equal(tg_last_error(), "tg_var_set_device: variable is NULL");
    assert_null(tg_var_device(NULL));
    assert_string_equal(tg_last_error(), "tg_var_device: variable is NULL");
    assert_int_equal(tg_graph_set_device(NULL, "cpu"), TG_EINVAL);
    assert_null(tg_graph_device(NULL));
    assert_string_equal(tg_last_error(), "tg_graph_device: graph is NULL");
    /* a graph with an error changes no more: its status */
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 3), *w = input(g, "w", 2);
    tg_var *y = tg_exp(g, x);
    assert_null(tg_add(g, x, w)); /* shapes do not broadcast: the graph's first error */
    assert_int_equal(tg_var_set_device(y, "cpu:1"), TG_ESHAPE);
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_ESHAPE);
    assert_null(tg_var_device(y));
    assert_null(tg_graph_device(g));
    tg_graph_free(g);
}

/* ---- what keeps annotations ---- */

/* x (cpu:1) -> a = exp (cpu:0) -> b = a + 1 (cpu:1) -> out; c = x * 2 on no device. */
static tg_graph *small_graph(void) {
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 4);
    assert_int_equal(tg_var_set_device(x, "cpu:1"), TG_OK);
    assert_int_equal(tg_graph_set_device(g, "cpu:0"), TG_OK);
    tg_var *a = tg_exp(g, x);
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_OK);
    tg_var *b = tg_add(g, a, tg_literal_float(g, 1.0));
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    tg_var *c = tg_mul(g, x, tg_literal_float(g, 2.0));
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){a, b, c}, 3), TG_OK);
    return g;
}

static void test_clone_and_text(void **state) {
    (void)state;
    tg_graph *g = small_graph();
    assert_int_equal(tg_graph_set_device(g, "sim:0"), TG_OK); /* the scope is not copied */
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    assert_null(tg_graph_device(c));
    assert_device(tg_var_device(tg_graph_input(c, 0)), "cpu:1");
    assert_device(tg_var_device(tg_graph_output(c, 0)), "cpu:0");
    assert_device(tg_var_device(tg_graph_output(c, 1)), "cpu:1");
    assert_null(tg_var_device(tg_graph_output(c, 2)));
    /* the names are the clone's own copies: the original may go first */
    tg_graph_free(g);
    assert_device(tg_var_device(tg_graph_output(c, 0)), "cpu:0");
    /* printed, the text carries them, and reads back to the same text */
    char *t1 = print_graph(c);
    assert_non_null(strstr(t1, "x: f64[4] device=\"cpu:1\""));
    assert_non_null(strstr(t1, "exp(x, device=\"cpu:0\")"));
    assert_non_null(strstr(t1, ", 1.0, device=\"cpu:1\")"));
    assert_non_null(strstr(t1, "mul(x, 2.0)\n"));
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, t1, strlen(t1), "t1.tg", &m), TG_OK);
    tg_graph *r = tg_module_func(m, 0);
    assert_device(tg_var_device(tg_graph_input(r, 0)), "cpu:1");
    assert_device(tg_var_device(tg_graph_output(r, 1)), "cpu:1");
    char *t2 = print_graph(r);
    assert_string_equal(t1, t2);
    char *dot = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&dot, &len);
    assert_non_null(f);
    assert_int_equal(tg_graph_print_dot(r, f), TG_OK);
    fclose(f);
    assert_non_null(strstr(dot, "label=\"x\\nf64[4]\\n@cpu:1\""));
    assert_non_null(strstr(dot, ": f64[4]\\n@cpu:0\""));
    free(dot);
    free(t1);
    free(t2);
    tg_module_free(m);
    tg_graph_free(c);
}

/* The device of every node of g is one of want[0..n) (NULL standing for none). */
static void assert_devices_among(const tg_graph *g, const char *const *want, int n) {
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *nd = g->nodes.items[i];
        bool ok = false;
        for (int k = 0; k < n && !ok; k++) ok = tg_ir_same_device(nd->device, want[k]);
        if (!ok)
            fail_msg("node %d (%s) is on \"%s\"", nd->id, tg_op_table[nd->op]->name,
                     nd->device ? nd->device : "(none)");
    }
}

static int count_op(const tg_graph *g, int op, const char *device) {
    int n = 0;
    for (int i = 0; i < g->nodes.n; i++) {
        const tg_node *nd = g->nodes.items[i];
        n += nd->op == op && tg_ir_same_device(nd->device, device);
    }
    return n;
}

static void test_optimize(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 8);
    tg_var *A = tg_input(g, "A", TG_DT_F64, SH(8, 8));
    assert_int_equal(tg_graph_set_device(g, "cpu:0"), TG_OK);
    tg_var *a = tg_tanh(g, tg_exp(g, tg_neg(g, x))); /* one fused node on cpu:0 */
    tg_var *acc = tg_exp(g, a);
    tg_var *p1 = tg_add(g, tg_dot(g, A, x), acc); /* gemv on cpu:0, in place */
    tg_var *m0 = tg_sin(g, x);                    /* merges with its twin below */
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_OK);
    tg_var *b = tg_mul(g, tg_sqrt(g, tg_abs(g, a)), tg_literal_float(g, 3.0));
    tg_var *m1 = tg_sin(g, x); /* equal to m0, on another device: kept */
    assert_int_equal(tg_graph_set_device(g, "cpu:0"), TG_OK);
    tg_var *m2 = tg_sin(g, x);
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    tg_var *s = tg_add(g, tg_add(g, m0, m1), m2);
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){b, p1, s}, 3), TG_OK);
    tg_graph *r = NULL;
    assert_int_equal(tg_graph_optimize(g, &TG_OPTIMIZE_OPTS(.verify = true), &r), TG_OK);
    static const char *const devs[] = {"cpu:0", "cpu:1", NULL};
    assert_devices_among(r, devs, 3);
    assert_device(tg_var_device(tg_graph_output(r, 0)), "cpu:1");
    assert_device(tg_var_device(tg_graph_output(r, 1)), "cpu:0");
    /* fusion stops at the boundary: the tanh chain on cpu:0, sqrt(abs) * 3 on cpu:1 */
    assert_true(count_op(r, TG_OP_FUSED, "cpu:0") >= 1);
    assert_true(count_op(r, TG_OP_FUSED, "cpu:1") >= 1);
    assert_int_equal(count_op(r, TG_OP_GEMV_INPLACE, "cpu:0"), 1);
    /* sin: one on cpu:0 (m0 and m2 merged), one on cpu:1, wherever fusion put them */
    char *text = print_graph(r);
    const char *p = text;
    int sins = 0;
    while ((p = strstr(p, "sin(")) != NULL) sins++, p++;
    assert_int_equal(sins, 2);
    free(text);
    tg_graph_free(r);
    tg_graph_free(g);
}

/* Every node of a gradient (the nodes made after `first`) is on the device of the node it
 * differentiates, or in the scope of the call where that node has none. */
static void test_grad(void **state) {
    (void)state;
    tg_graph *g = graph();
    tg_var *mu = input(g, "mu", 1), *x = input(g, "x", 5);
    assert_int_equal(tg_var_set_device(x, "cpu:1"), TG_OK);
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_OK);
    tg_var *d = tg_sub(g, x, mu);
    tg_var *q = tg_mul(g, d, d);
    assert_int_equal(tg_graph_set_device(g, "cpu:0"), TG_OK);
    tg_var *cost = tg_reduce(g, "sum", q, NULL, -1, false);
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    int first = g->nodes.n;
    tg_var *gr[2];
    assert_int_equal(tg_grad(g, cost, (tg_var *[]){mu, x}, 2, TG_DISCONNECTED_ERROR, gr), TG_OK);
    /* sum's VJP (spreading the seed over q: expand_dims, broadcast_to) on cpu:0; mul's, the
     * sum of d's two cotangents, and sub's (mu's cotangent reduced to its shape) on cpu:1 */
    static const char *const devs[] = {"cpu:0", "cpu:1"};
    int on0 = 0;
    for (int i = first; i < g->nodes.n; i++) {
        const tg_node *nd = g->nodes.items[i];
        bool spread = nd->op == TG_OP_EXPAND_DIMS || nd->op == TG_OP_BROADCAST_TO;
        assert_device(nd->device, spread ? "cpu:0" : "cpu:1");
        on0 += spread;
    }
    assert_int_equal(on0, 2);
    assert_device(tg_var_device(gr[0]), "cpu:1");
    assert_device(tg_var_device(gr[1]), "cpu:1");

    /* with the forward pass unannotated, the gradient takes the scope of the call, except
     * where a node says otherwise */
    tg_graph *h = graph();
    tg_var *y = input(h, "y", 3);
    tg_var *e = tg_exp(h, y);
    assert_int_equal(tg_var_set_device(e, "sim:0"), TG_OK);
    tg_var *c2 = tg_reduce(h, "sum", tg_mul(h, e, y), NULL, -1, false);
    first = h->nodes.n;
    assert_int_equal(tg_graph_set_device(h, "cpu:2"), TG_OK);
    tg_var *gy;
    assert_int_equal(tg_grad(h, c2, &y, 1, TG_DISCONNECTED_ERROR, &gy), TG_OK);
    assert_device(tg_graph_device(h), "cpu:2"); /* the scope is as it was */
    int on_sim = 0;
    for (int i = first; i < h->nodes.n; i++) {
        const tg_node *nd = h->nodes.items[i];
        if (nd->device && strcmp(nd->device, "sim:0") == 0) {
            on_sim++;
            continue;
        }
        assert_device(nd->device, "cpu:2");
    }
    assert_true(on_sim >= 1);                  /* exp's VJP */
    assert_device(tg_var_device(gy), "cpu:2"); /* y's cotangents summed in the scope */
    tg_graph_free(h);

    /* and the optimizer keeps them: no node of the result is on another device */
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){cost, gr[0], gr[1]}, 3), TG_OK);
    tg_graph *r = NULL;
    assert_int_equal(tg_graph_optimize(g, &TG_OPTIMIZE_OPTS(.verify = true), &r), TG_OK);
    assert_devices_among(r, devs, 2);
    tg_graph_free(r);
    tg_graph_free(g);
}

/* A call under a device scope: the inlined body's nodes without an annotation take it. */
static void test_call_inlined(void **state) {
    (void)state;
    tg_graph *sq = tg_graph_new(NULL, "sq");
    tg_var *v = tg_input(sq, "v", TG_DT_F64, SH(TG_DIM_UNKNOWN));
    tg_var *w = tg_mul(sq, v, v);
    tg_var *l = tg_log(sq, w);
    assert_int_equal(tg_var_set_device(l, "sim:1"), TG_OK);
    assert_int_equal(tg_graph_set_outputs(sq, (tg_var *[]){tg_add(sq, w, l)}, 1), TG_OK);
    tg_graph *g = graph();
    tg_var *x = input(g, "x", 3), *out[1];
    int n = 1;
    assert_int_equal(tg_graph_set_device(g, "cpu:1"), TG_OK);
    assert_int_equal(tg_call(g, sq, &x, 1, out, &n), TG_OK);
    assert_int_equal(tg_graph_set_device(g, NULL), TG_OK);
    assert_device(tg_var_device(out[0]), "cpu:1");
    assert_int_equal(tg_graph_set_outputs(g, out, 1), TG_OK);
    tg_graph *r = NULL;
    assert_int_equal(tg_graph_optimize(g, &TG_OPTIMIZE_OPTS(.no_blas = true), &r), TG_OK);
    assert_int_equal(count_op(r, TG_OP_CALL, NULL) + count_op(r, TG_OP_CALL, "cpu:1"), 0);
    assert_int_equal(count_op(r, TG_OP_LOG, "sim:1"), 1);
    static const char *const devs[] = {"cpu:1", "sim:1"};
    assert_devices_among(r, devs, 2);
    tg_graph_free(r);
    tg_graph_free(g);
    tg_graph_free(sq);
}

/* A run places the graph on the devices its annotations name (docs/devices.md,
 * "Placement"): the results are those of the host alone; without those devices, compiling
 * is an error naming the device. */
static void test_runs(void **state) {
    (void)state;
    tg_graph *g = small_graph();
    tg_tensor *in = tg_tensor_from_data(NULL, TG_DT_F64, SH(4), (double[]){0, 1, -1, 0.5});
    tg_fn *f = NULL;
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
    assert_int_equal(tg_graph_compile(g, NULL, &f), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "no device \"cpu:0\" (the devices are: cpu)"));
    assert_int_equal(tg_devices_configure(2, 0), TG_OK);
    static const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM};
    for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
        assert_int_equal(tg_graph_compile(g, &TG_COMPILE_OPTS(.mode = modes[k], .nthreads = 1), &f),
                         TG_OK);
        tg_tensor *out[3] = {NULL};
        assert_int_equal(tg_fn_call(f, &in, 1, out, 3), TG_OK);
        for (int i = 0; i < 4; i++) {
            double xi = tg_tensor_get_f64(in, i);
            assert_float_equal(tg_tensor_get_f64(out[0], i), exp(xi), 1e-12);
            assert_float_equal(tg_tensor_get_f64(out[1], i), exp(xi) + 1, 1e-12);
            assert_float_equal(tg_tensor_get_f64(out[2], i), 2 * xi, 1e-12);
        }
        for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
        tg_fn_free(f);
    }
    assert_int_equal(tg_devices_configure(0, 0), TG_OK);
    tg_tensor_free(in);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_clear),   cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_malformed_names), cmocka_unit_test(test_constants_refused),
        cmocka_unit_test(test_null_and_failed), cmocka_unit_test(test_clone_and_text),
        cmocka_unit_test(test_optimize),        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_call_inlined),    cmocka_unit_test(test_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
