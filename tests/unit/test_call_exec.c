/* test_call_exec.c - calls kept as calls (no_inline, the reference mode) run through the
 * sub-graph executor of every backend.
 *
 * Cases: the reference, vm, c and debug modes, with and without inlining, give the values
 * the inlined vm gives (a callee at two extents, a call nested three deep, two results, a
 * gradient through the calls); a hundred calls leave the context's memory where the
 * second left it (the callee is compiled once and plans once per signature); eight threads
 * calling one function at once get the same values; an error inside a callee names the callee's
 * place and the call's; a called graph's signature can no longer change.
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

#include "tgraph.h"

static const char *SRC = "func main(x: f64[4], y: f64[?]) {\n"
                         "  a = sq(x)\n"
                         "  b = sq(y)\n"
                         "  c, d = deep(x)\n"
                         "  g = grad(sum(mul(c, d)), x)\n"
                         "  return a, b, c, d, g\n"
                         "}\n"
                         "func sq(x: f64[?]) {\n"
                         "  y = add(mul(x, x), sin(x))\n"
                         "  return y\n"
                         "}\n"
                         "func mid(x: f64[?]) {\n"
                         "  y = sq(add(x, 1))\n"
                         "  return y\n"
                         "}\n"
                         "func deep(x: f64[?]) {\n"
                         "  m = mid(x)\n"
                         "  n = exp(neg(mid(neg(x))))\n"
                         "  return m, n\n"
                         "}\n";
enum { NOUT = 5 };

static tg_module *parse(tg_ctx *ctx, const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(ctx, src, strlen(src), "test.tg", &m) != TG_OK)
        fail_msg("parse: %s", tg_last_error());
    return m;
}

static tg_fn *compile(tg_graph *g, tg_mode mode, bool no_inline) {
    tg_compile_opts o =
        TG_COMPILE_OPTS(.mode = mode, .no_inline = no_inline, .debug_backend = TG_MODE_VM);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

static void inputs(tg_ctx *ctx, tg_tensor **in, int64_t ny) {
    double x[4] = {0.3, -1.2, 2.0, 0.7}, y[7];
    for (int i = 0; i < ny; i++) y[i] = 0.25 * i - 0.6;
    in[0] = tg_tensor_from_data(ctx, TG_DT_F64, 1, (int64_t[]){4}, x);
    in[1] = tg_tensor_from_data(ctx, TG_DT_F64, 1, (int64_t[]){ny}, y);
    assert_non_null(in[0]);
    assert_non_null(in[1]);
}

static void expect_close(tg_tensor *const *want, tg_tensor *const *got, const char *what) {
    for (int o = 0; o < NOUT; o++) {
        assert_int_equal(tg_tensor_size(want[o]), tg_tensor_size(got[o]));
        for (int64_t i = 0; i < tg_tensor_size(want[o]); i++) {
            double w = tg_tensor_get_f64(want[o], i), v = tg_tensor_get_f64(got[o], i);
            if (fabs(w - v) > 1e-12 * (1 + fabs(w)))
                fail_msg("%s: output %d element %lld: want %.17g, got %.17g", what, o, (long long)i,
                         w, v);
        }
    }
}

static void test_modes_agree(void **state) {
    (void)state;
    tg_module *m = parse(NULL, SRC);
    tg_graph *g = tg_module_find(m, "main");
    tg_tensor *in[2], *want[NOUT];
    inputs(NULL, in, 7);
    tg_fn *base = compile(g, TG_MODE_VM, false);
    assert_int_equal(tg_fn_call(base, in, 2, want, NOUT), TG_OK);
    tg_fn_free(base);
    const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C, TG_MODE_DEBUG};
    const char *names[] = {"reference", "vm", "c", "debug"};
    for (int k = 0; k < 4; k++)
        for (int ni = 0; ni < 2; ni++) {
            tg_fn *f = compile(g, modes[k], ni);
            for (int rep = 0; rep < 2; rep++) { /* the second call reuses the plans */
                tg_tensor *got[NOUT];
                if (tg_fn_call(f, in, 2, got, NOUT) != TG_OK)
                    fail_msg("%s: %s", names[k], tg_last_error());
                char what[64];
                snprintf(what, sizeof what, "%s%s", names[k], ni ? " no_inline" : "");
                expect_close(want, got, what);
                for (int o = 0; o < NOUT; o++) tg_tensor_free(got[o]);
            }
            tg_fn_free(f);
        }
    for (int o = 0; o < NOUT; o++) tg_tensor_free(want[o]);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_module_free(m);
}

static void test_repeated_calls_keep_memory(void **state) {
    (void)state;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    assert_non_null(ctx);
    tg_module *m = parse(ctx, SRC);
    tg_fn *f = compile(tg_module_find(m, "main"), TG_MODE_VM, true);
    tg_tensor *in[2];
    inputs(ctx, in, 5);
    size_t after2 = 0;
    for (int i = 0; i < 100; i++) {
        tg_tensor *out[NOUT];
        assert_int_equal(tg_fn_call(f, in, 2, out, NOUT), TG_OK);
        for (int o = 0; o < NOUT; o++) tg_tensor_free(out[o]);
        if (i == 1) after2 = tg_ctx_mem_used(ctx);
    }
    assert_int_equal(tg_ctx_mem_used(ctx), after2);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_module_free(m);
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    tg_ctx_free(ctx);
}

typedef struct thread_arg {
    tg_fn *f;
    tg_tensor *in[2];
    tg_tensor *const *want;
    int bad;
} thread_arg;

static void *caller(void *p) {
    thread_arg *a = p;
    for (int i = 0; i < 100; i++) {
        tg_tensor *got[NOUT];
        if (tg_fn_call(a->f, a->in, 2, got, NOUT) != TG_OK) {
            a->bad++;
            continue;
        }
        for (int o = 0; o < NOUT; o++) {
            for (int64_t e = 0; e < tg_tensor_size(got[o]); e++)
                if (tg_tensor_get_f64(got[o], e) != tg_tensor_get_f64(a->want[o], e)) {
                    a->bad++;
                    break;
                }
            tg_tensor_free(got[o]);
        }
    }
    return NULL;
}

enum { NTHREADS = 8 }; /* threads calling one function at once */

static void test_threads(void **state) {
    (void)state;
    tg_module *m = parse(NULL, SRC);
    tg_fn *f = compile(tg_module_find(m, "main"), TG_MODE_VM, true);
    thread_arg a[NTHREADS];
    tg_tensor *want[NTHREADS][NOUT];
    for (int t = 0; t < NTHREADS; t++) { /* signatures: y of 1 to 7 elements */
        a[t] = (thread_arg){.f = f, .want = want[t]};
        inputs(NULL, a[t].in, 1 + t % 7);
        assert_int_equal(tg_fn_call(f, a[t].in, 2, want[t], NOUT), TG_OK);
    }
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, caller, &a[t]), 0);
    for (int t = 0; t < NTHREADS; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < NTHREADS; t++) {
        assert_int_equal(a[t].bad, 0);
        for (int o = 0; o < NOUT; o++) tg_tensor_free(want[t][o]);
        tg_tensor_free(a[t].in[0]);
        tg_tensor_free(a[t].in[1]);
    }
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_error_in_callee(void **state) {
    (void)state;
    const char *src = "func main(x: f64[?]) {\n"
                      "  y = to_square(x)\n"
                      "  return y\n"
                      "}\n"
                      "func to_square(x: f64[?]) {\n"
                      "  y = reshape(x, shape=[2, 2])\n"
                      "  return y\n"
                      "}\n";
    tg_module *m = parse(NULL, src);
    tg_graph *g = tg_module_find(m, "main");
    const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_DEBUG};
    double v[3] = {1, 2, 3};
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){3}, v), *y = NULL;
    for (int k = 0; k < 3; k++) {
        tg_fn *f = compile(g, modes[k], true);
        assert_int_not_equal(tg_fn_call(f, &x, 1, &y, 1), TG_OK);
        assert_null(y);
        const char *e = tg_last_error();
        if (!strstr(e, "test.tg:2:") || !strstr(e, "test.tg:6:") || !strstr(e, "to_square"))
            fail_msg("mode %d: the message names the call and the callee's node: %s", k, e);
        tg_fn_free(f);
    }
    tg_tensor_free(x);
    tg_module_free(m);
}

static void test_signature_fixed(void **state) {
    (void)state;
    tg_graph *f = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *y = tg_exp(f, x);
    assert_int_equal(tg_graph_set_outputs(f, &y, 1), TG_OK);
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *a = tg_input(g, "a", TG_DT_F64, 1, (int64_t[]){3}), *out[1];
    int n = 1;
    assert_int_equal(tg_call(g, f, &a, 1, out, &n), TG_OK);
    tg_var *two[2] = {y, y};
    assert_int_equal(tg_graph_set_outputs(f, two, 2), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "called by other functions"));
    assert_null(tg_input(f, "z", TG_DT_F64, 0, NULL));
    assert_int_equal(tg_graph_output_count(f), 1);
    assert_int_equal(tg_graph_verify(f), TG_OK); /* refused, not broken */
    assert_int_equal(tg_graph_set_outputs(g, out, 1), TG_OK);
    assert_int_equal(tg_graph_verify(g), TG_OK);
    tg_graph_free(f);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_agree),     cmocka_unit_test(test_repeated_calls_keep_memory),
        cmocka_unit_test(test_threads),         cmocka_unit_test(test_error_in_callee),
        cmocka_unit_test(test_signature_fixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
