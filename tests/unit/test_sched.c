/* test_sched.c - the multi-device scheduler (src/driver/sched.c) on graphs placed by hand:
 * every node carries its device and every edge between devices goes through a transfer,
 * the contract of placement (src/rewrite/place.c), which these tests bypass so that each
 * case says exactly where things run.
 *
 * Results equal the reference interpreter's on one device (within 1e-12): two branches on
 * two host devices joined through a transfer that copies nothing; a chain going to a sim
 * device and back; two sim devices and a copy between them; a value returned twice, an
 * input returned as is. A step that fails cancels the call on every device: the error
 * names the failing node, no call hangs, and the next call works. A planted missing
 * transfer (a sim node reading host memory, an output left on a sim device) is an error
 * naming the value and both devices. A part has as many inputs and outputs as it needs, and
 * a node as many inputs (70 inputs read by one part and one node; 80 values made by one
 * part on one device, joined on another by one node). Eight
 * threads call one function at once. A function with state compiled over two devices
 * (tg_graph_compile: placement, then the scheduler) keeps its state through calls that fail.
 * A call node left in the graph (the reference mode, no_inline) runs its callee where the
 * call runs, on host and sim devices, whatever the callee's own annotations (placed on its
 * own, its steps waited on the very queue that ran the call).
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

#include "driver/driver.h"
#include "tgraph.h"

static void on(tg_graph *g, const char *dev) { g->device = tg_ir_device_intern(g, dev); }

static tg_var *transfer(tg_graph *g, tg_var *x, const char *dev, bool copy) {
    tg_attr a = TG_A_BOOL("copy", copy);
    on(g, dev); /* where it moves x: its node's device */
    return tg_apply(g, "transfer", &x, 1, &a, 1);
}

static tg_var *un(tg_graph *g, const char *op, tg_var *x) {
    return tg_apply(g, op, &x, 1, NULL, 0);
}
static tg_var *bin(tg_graph *g, const char *op, tg_var *x, tg_var *y) {
    tg_var *in[2] = {x, y};
    return tg_apply(g, op, in, 2, NULL, 0);
}

static tg_tensor *ramp(int64_t n, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, 1, &n);
    double *p = tg_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = scale * (double)(i % 97) / 97.0 - 0.3;
    return t;
}

/* Equal within 1e-12, relative: the reference's libm and the VM's vector functions, and
 * sums split over other thread counts, may differ in the last bits. */
static void close_to(const tg_tensor *a, const tg_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->dtype, TG_DT_F64);
    assert_int_equal(a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++) assert_int_equal(a->shape[d], b->shape[d]);
    tg_tensor *ca = tg_tensor_dup(a), *cb = tg_tensor_dup(b);
    const double *pa = tg_tensor_data(ca), *pb = tg_tensor_data(cb);
    for (int64_t i = 0; i < tg_tensor_size(ca); i++)
        if (!(fabs(pa[i] - pb[i]) <= 1e-12 * (1.0 + fabs(pb[i]))))
            fail_msg("element %lld: %.17g, the reference %.17g", (long long)i, pa[i], pb[i]);
    tg_tensor_free(ca);
    tg_tensor_free(cb);
}

/* Runs g placed (the scheduler) and the same computation as the reference on the host:
 * every output equal. */
static void check_against_reference(tg_graph *g, tg_tensor *const *in, int nin) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    tg_sched *s = NULL;
    assert_int_equal(tg_sched_new(g, &o, &s), TG_OK);
    int nout = g->outputs.n;
    tg_tensor *got[8] = {0}, *want[8] = {0};
    assert_int_equal(tg_sched_call(s, in, nin, got, nout, false), TG_OK);
    tg_compile_opts r = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE);
    tg_fn *ref = NULL;
    assert_int_equal(tg_driver_compile_placed(g, &r, &ref), TG_OK);
    assert_int_equal(tg_fn_call(ref, in, nin, want, nout), TG_OK);
    for (int i = 0; i < nout; i++) {
        close_to(got[i], want[i]);
        tg_tensor_free(got[i]);
        tg_tensor_free(want[i]);
    }
    tg_fn_free(ref);
    tg_sched_free(s);
}

static int setup(void **st) {
    (void)st;
    return tg_devices_configure(2, 2) == TG_OK ? 0 : -1;
}

static int teardown(void **st) {
    (void)st;
    return tg_devices_configure(0, 0) == TG_OK ? 0 : -1;
}

/* Two branches on cpu:0 and cpu:1, joined on cpu:0 through a copy=false transfer. */
static tg_graph *two_branches(void) {
    tg_graph *g = tg_graph_new(NULL, "two");
    int64_t n = 100000;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, &n);
    on(g, "cpu:0");
    tg_var *a = un(g, "exp", un(g, "sin", x));
    on(g, "cpu:1");
    tg_var *b = un(g, "tanh", bin(g, "mul", x, x));
    tg_var *bt = transfer(g, b, "cpu:0", false);
    on(g, "cpu:0");
    tg_var *y = bin(g, "add", a, bt);
    tg_var *outs[3] = {y, un(g, "sum", y), b};
    tg_graph_set_outputs(g, outs, 3);
    assert_int_equal(g->status, TG_OK);
    return g;
}

static void test_host_devices(void **st) {
    (void)st;
    tg_graph *g = two_branches();
    tg_tensor *x = ramp(100000, 3.0);
    check_against_reference(g, &x, 1);
    tg_tensor_free(x);
    tg_graph_free(g);
}

/* host -> sim:0 -> sim:1 -> host, and a value returned twice and an input returned. */
static void test_sim_devices(void **st) {
    (void)st;
    tg_graph *g = tg_graph_new(NULL, "sim");
    int64_t n = 5000;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, &n);
    tg_var *xs = transfer(g, x, "sim:0", true);
    on(g, "sim:0");
    tg_var *a = un(g, "exp", bin(g, "mul", xs, xs));
    tg_var *a1 = transfer(g, a, "sim:1", true);
    on(g, "sim:1");
    tg_var *b = un(g, "sum", un(g, "log", a1));
    tg_var *bh = transfer(g, b, "cpu", true);
    tg_var *ah = transfer(g, a, "cpu:1", true);
    on(g, "cpu:1");
    tg_var *c = bin(g, "add", ah, x);
    tg_var *outs[5] = {bh, c, bh, x, ah};
    tg_graph_set_outputs(g, outs, 5);
    assert_int_equal(g->status, TG_OK);
    tg_tensor *xt = ramp(n, 1.0);
    check_against_reference(g, &xt, 1);
    tg_tensor_free(xt);
    tg_graph_free(g);
}

/* 80 inputs, each through exp on cpu:1 (one part of 80 inputs and 80 outputs), all joined
 * on cpu:0 by one concatenate of 80 inputs. */
static void test_many_values(void **st) {
    (void)st;
    enum { N = 80 };
    tg_graph *g = tg_graph_new(NULL, "many");
    int64_t n = 3;
    tg_var *e[N];
    tg_tensor *x[N];
    for (int i = 0; i < N; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "x%d", i);
        tg_var *xi = tg_input(g, nm, TG_DT_F64, 1, &n);
        on(g, "cpu:1");
        e[i] = transfer(g, un(g, "exp", xi), "cpu:0", false);
        x[i] = ramp(n, 1.0 + i);
    }
    on(g, "cpu:0");
    tg_attr axis = TG_A_INT("axis", 0);
    tg_var *y = tg_apply(g, "concatenate", e, N, &axis, 1);
    tg_var *outs[2] = {y, un(g, "sum", y)};
    tg_graph_set_outputs(g, outs, 2);
    assert_int_equal(g->status, TG_OK);
    check_against_reference(g, x, N);
    for (int i = 0; i < N; i++) tg_tensor_free(x[i]);
    tg_graph_free(g);
}

/* A failing step on cpu:1 while cpu:0 works: the call fails with its message, then works. */
static void test_cancel(void **st) {
    (void)st;
    tg_graph *g = tg_graph_new(NULL, "fails");
    int64_t n = 100000, q = -1;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, &n);
    tg_var *idx = tg_input(g, "i", TG_DT_I64, 1, &q);
    on(g, "cpu:0");
    tg_var *a = un(g, "sum", un(g, "exp", un(g, "sin", x)));
    on(g, "cpu:1");
    tg_var *in2[2] = {x, idx};
    tg_var *b = un(g, "sum", tg_apply(g, "take", in2, 2, NULL, 0));
    tg_var *bt = transfer(g, b, "cpu:0", false);
    on(g, "cpu:0");
    tg_var *y = bin(g, "add", a, bt);
    tg_graph_set_outputs(g, &y, 1);
    assert_int_equal(g->status, TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    tg_sched *s = NULL;
    assert_int_equal(tg_sched_new(g, &o, &s), TG_OK);
    tg_tensor *xt = ramp(n, 1.0);
    int64_t three = 3;
    tg_tensor *bad = tg_tensor_new(NULL, TG_DT_I64, 1, &three),
              *good = tg_tensor_new(NULL, TG_DT_I64, 1, &three);
    ((int64_t *)tg_tensor_data(bad))[1] = n + 5; /* out of range */
    for (int k = 0; k < 50; k++) {
        tg_tensor *in[2] = {xt, (k & 1) ? good : bad}, *out = NULL;
        tg_status rc = tg_sched_call(s, in, 2, &out, 1, false);
        if (k & 1) {
            assert_int_equal(rc, TG_OK);
            tg_tensor_free(out);
        } else {
            assert_int_not_equal(rc, TG_OK);
            assert_null(out);
            assert_non_null(strstr(tg_last_error(), "take"));
        }
    }
    tg_tensor_free(xt);
    tg_tensor_free(bad);
    tg_tensor_free(good);
    tg_sched_free(s);
    tg_graph_free(g);
}

/* A sim node reading host memory, and an output left on a sim device, are caught. */
static void test_missing_transfer(void **st) {
    (void)st;
    int64_t n = 16;
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    tg_sched *s = NULL;
    tg_graph *g = tg_graph_new(NULL, "planted");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, &n);
    on(g, "sim:0");
    tg_var *y = un(g, "exp", x); /* reads x, host memory, with no transfer */
    tg_var *yh = transfer(g, y, "cpu", true);
    tg_graph_set_outputs(g, &yh, 1);
    assert_int_equal(tg_sched_new(g, &o, &s), TG_EINVAL);
    assert_null(s);
    assert_non_null(
        strstr(tg_last_error(), "missing transfer: 'x' lives on the host and is read on sim:0"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "planted2");
    x = tg_input(g, "x", TG_DT_F64, 1, &n);
    tg_var *xs = transfer(g, x, "sim:1", true);
    on(g, "sim:1");
    y = un(g, "exp", xs);
    tg_graph_set_outputs(g, &y, 1); /* returned from sim memory */
    assert_int_equal(tg_sched_new(g, &o, &s), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "lives on sim:1: missing transfer to the host"));
    tg_graph_free(g);

    /* a host device reading a sim value directly */
    g = tg_graph_new(NULL, "planted3");
    x = tg_input(g, "x", TG_DT_F64, 1, &n);
    xs = transfer(g, x, "sim:0", true);
    on(g, "sim:0");
    y = un(g, "exp", xs);
    on(g, "cpu:1");
    tg_var *z = un(g, "neg", y);
    tg_graph_set_outputs(g, &z, 1);
    assert_int_equal(tg_sched_new(g, &o, &s), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "lives on sim:0 and is read on cpu:1"));
    tg_graph_free(g);
}

/* Through tg_graph_compile: a function with state over two devices; a call that fails on
 * one device leaves the state as it was, and the next good call goes on from it. */
static void test_state_kept(void **st) {
    (void)st;
    static const char *src = "func f(mut n: f64[], x: f64[?], i: i64[?]) {\n"
                             "  a = sum(exp(x), device=\"cpu:0\")\n"
                             "  b = sum(take(x, i), device=\"cpu:1\")\n"
                             "  n <- add(n, 1.0, device=\"cpu:1\")\n"
                             "  return add(a, b)\n"
                             "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "state.tg", &m), TG_OK);
    tg_fn *f = NULL;
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    assert_int_equal(tg_graph_compile(tg_module_find(m, "f"), &o, &f), TG_OK);
    int64_t n = 1000, three = 3;
    tg_tensor *x = ramp(n, 1.0), *good = tg_tensor_new(NULL, TG_DT_I64, 1, &three),
              *bad = tg_tensor_new(NULL, TG_DT_I64, 1, &three);
    ((int64_t *)tg_tensor_data(bad))[2] = -n - 1; /* out of range */
    for (int k = 0; k < 10; k++) {
        tg_tensor *in[2] = {x, (k % 3 == 1) ? bad : good}, *out = NULL;
        tg_status rc = tg_fn_call(f, in, 2, &out, 1);
        assert_int_equal(rc, (k % 3 == 1) ? TG_EINDEX : TG_OK);
        tg_tensor_free(out);
    }
    /* 10 calls, of which k = 1, 4, 7 failed */
    assert_true(*(const double *)tg_tensor_data(tg_fn_state(f, 0)) == 7.0);
    tg_tensor_free(x);
    tg_tensor_free(good);
    tg_tensor_free(bad);
    tg_fn_free(f);
    tg_module_free(m);
}

/* A failed call with state makes no output: the values handed over before the error are
 * freed (the state update has the wrong run-time shape). */
static void test_failed_call_outputs(void **st) {
    (void)st;
    static const char *src = "func f(mut W: f32[?], x: f32[4]) {\n"
                             "  a = sum(exp(x), device=\"cpu:0\")\n"
                             "  b = mul(x, 2.0, device=\"cpu:1\")\n"
                             "  W <- concatenate(W, W, device=\"cpu:1\")\n"
                             "  return a, b\n"
                             "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "grow.tg", &m), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_find(m, "f"), NULL, &f), TG_OK);
    int64_t four = 4;
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_F32, 1, &four), *out[2] = {0};
    assert_int_equal(tg_fn_state_set(f, 0, x), TG_OK);
    assert_int_equal(tg_fn_call(f, &x, 1, out, 2), TG_ESHAPE);
    assert_non_null(strstr(tg_last_error(), "state 'W'"));
    assert_null(out[0]);
    assert_null(out[1]);
    tg_tensor_free(x);
    tg_fn_free(f);
    tg_module_free(m);
}

/* A part reading 70 values and a node of 70 inputs (no fixed limit). */
static void test_wide_parts(void **st) {
    (void)st;
    tg_graph *g = tg_graph_new(NULL, "wide");
    int64_t n = 8;
    tg_var *x[70];
    for (int i = 0; i < 70; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "x%d", i);
        x[i] = tg_input(g, nm, TG_DT_F64, 1, &n);
    }
    on(g, "cpu:1");
    tg_attr ax = TG_A_INT("axis", 0);
    tg_var *cat = tg_apply(g, "concatenate", x, 70, &ax, 1);
    tg_var *b = un(g, "sum", cat);
    tg_var *bt = transfer(g, b, "cpu:0", false);
    on(g, "cpu:0");
    tg_var *a = un(g, "sum", un(g, "exp", x[0]));
    tg_var *y = bin(g, "add", a, bt);
    tg_graph_set_outputs(g, &y, 1);
    assert_int_equal(g->status, TG_OK);
    tg_tensor *in[70];
    for (int i = 0; i < 70; i++) in[i] = ramp(n, 1.0 + i);
    check_against_reference(g, in, 70);
    for (int i = 0; i < 70; i++) tg_tensor_free(in[i]);
    tg_graph_free(g);
}

/* Calls that stay calls, on cpu:1 and sim:0, of a callee whose own annotations spread it
 * over cpu:0, cpu:1 and sim:1, beside work on cpu:0: the reference and the VM without
 * inlining. */
static void test_calls_on_devices(void **st) {
    (void)st;
    static const char *src = "func sq(x: f64[?]) {\n"
                             "  y = mul(x, 0.5, device=\"cpu:0\")\n"
                             "  z = mul(x, 1.5, device=\"sim:1\")\n"
                             "  return mul(x, add(y, z), device=\"cpu:1\")\n"
                             "}\n"
                             "func main(x: f64[?]) {\n"
                             "  a = sq(x, device=\"cpu:1\")\n"
                             "  b = sq(exp(x, device=\"cpu:0\"), device=\"sim:0\")\n"
                             "  c = sq(a)\n"
                             "  return add(sum(a), sum(b), device=\"cpu:0\"), c\n"
                             "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "calls.tg", &m), TG_OK);
    int64_t n = 1000, none = 0;
    tg_tensor *x = ramp(n, 1.0), *want_s = tg_tensor_new(NULL, TG_DT_F64, 0, &none),
              *want_c = tg_tensor_new(NULL, TG_DT_F64, 1, &n);
    const double *px = tg_tensor_data(x);
    double *ps = tg_tensor_data(want_s), *pc = tg_tensor_data(want_c);
    for (int64_t i = 0; i < n; i++) {
        double a = 2 * px[i] * px[i], e = exp(px[i]); /* sq(x) = 2 x^2 */
        *ps += a + 2 * e * e;
        pc[i] = 2 * a * a;
    }
    const tg_compile_opts modes[2] = {TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE),
                                      TG_COMPILE_OPTS(.mode = TG_MODE_VM, .no_inline = true)};
    for (int k = 0; k < 2; k++) {
        tg_fn *f = NULL;
        assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), &modes[k], &f), TG_OK);
        for (int rep = 0; rep < 3; rep++) {
            tg_tensor *out[2] = {0};
            assert_int_equal(tg_fn_call(f, &x, 1, out, 2), TG_OK);
            close_to(out[0], want_s);
            close_to(out[1], want_c);
            tg_tensor_free(out[0]);
            tg_tensor_free(out[1]);
        }
        tg_fn_free(f);
    }
    tg_tensor_free(x);
    tg_tensor_free(want_s);
    tg_tensor_free(want_c);
    tg_module_free(m);
}

typedef struct shared {
    tg_sched *s;
    tg_tensor *x;
    const tg_tensor *want[3];
    int bad;
} shared;

static void *worker(void *arg) {
    shared *sh = arg;
    for (int k = 0; k < 20; k++) {
        tg_tensor *out[3] = {0};
        if (tg_sched_call(sh->s, &sh->x, 1, out, 3, false) != TG_OK) {
            __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        for (int i = 0; i < 3; i++) {
            tg_tensor *a = tg_tensor_dup(out[i]), *b = tg_tensor_dup(sh->want[i]);
            size_t nb = (size_t)tg_tensor_size(a) * tg_dtype_size(a->dtype);
            if (memcmp(tg_tensor_data(a), tg_tensor_data(b), nb) != 0)
                __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
            tg_tensor_free(a);
            tg_tensor_free(b);
            tg_tensor_free(out[i]);
        }
    }
    return NULL;
}

static void test_threads(void **st) {
    (void)st;
    tg_graph *g = two_branches();
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM);
    shared sh = {.x = ramp(100000, 2.0)};
    assert_int_equal(tg_sched_new(g, &o, &sh.s), TG_OK);
    tg_tensor *want[3] = {0};
    assert_int_equal(tg_sched_call(sh.s, &sh.x, 1, want, 3, false), TG_OK);
    for (int i = 0; i < 3; i++) sh.want[i] = want[i];
    pthread_t th[8];
    for (int t = 0; t < 8; t++) pthread_create(&th[t], NULL, worker, &sh);
    for (int t = 0; t < 8; t++) pthread_join(th[t], NULL);
    assert_int_equal(sh.bad, 0);
    for (int i = 0; i < 3; i++) tg_tensor_free(want[i]);
    tg_tensor_free(sh.x);
    tg_sched_free(sh.s);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_devices),
        cmocka_unit_test(test_sim_devices),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_missing_transfer),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_state_kept),
        cmocka_unit_test(test_failed_call_outputs),
        cmocka_unit_test(test_wide_parts),
        cmocka_unit_test(test_many_values),
        cmocka_unit_test(test_calls_on_devices),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
