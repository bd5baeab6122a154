/* test_debug.c - debug mode (TG_MODE_DEBUG, src/backend/cjit/debug.c) under concurrent
 * calls and on nodes with many inputs.
 *
 * Eight threads call one debug-mode function (on the VM and on the C backend) many times,
 * each with its own inputs: every call must succeed with its own correct result and no
 * report (the check's per-call state must not be shared between calls). Concatenates of
 * 40 and 70 inputs must pass debug mode without a false report, and a deliberate write to
 * input 0 of such a node must still be caught. The C backend compiles into a fresh
 * private cache directory under /tmp, removed at the end.
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
#include <sys/stat.h>

#include "tgraph.h"

#define NTHREADS 8
#define NCALLS   200
#define LEN      64

static char cache_dir[256];

static void fresh_cache(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tgdebug.XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    chmod(cache_dir, 0700);
    setenv("TGRAPH_CACHE_DIR", cache_dir, 1);
}

static void remove_cache(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
}

static tg_module *parse(const char *text) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, text, strlen(text), "t.tg", &m);
    if (st != TG_OK) fail_msg("parse: %s", tg_last_error());
    return m;
}

static tg_fn *compile_debug(tg_module *m, tg_mode backend) {
    tg_compile_opts o =
        TG_COMPILE_OPTS(.mode = TG_MODE_DEBUG, .debug_backend = backend, .no_fallback = true);
    tg_fn *f = NULL;
    tg_status st = tg_graph_compile(tg_module_find(m, "main"), &o, &f);
    if (st != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

/* ---- concurrent calls ---- */

/* Several nodes (a fused chain, a reduction, a dot), so that each call runs many checks. */
static const char *threads_text = "func main(x: f64[64], y: f64[64]) {\n"
                                  "  a = add(mul(x, 2.0), y)\n"
                                  "  b = sum(mul(a, x))\n"
                                  "  c = dot(x, y)\n"
                                  "  return add(a, add(b, c))\n"
                                  "}\n";

typedef struct {
    tg_fn *f;
    int id;
    int failures;    /* calls that failed or returned a wrong result */
    char first[512]; /* the first failure's message */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    int64_t shape[1] = {LEN};
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_F64, 1, shape);
    tg_tensor *y = tg_tensor_new(NULL, TG_DT_F64, 1, shape);
    if (!x || !y) {
        w->failures++;
        snprintf(w->first, sizeof w->first, "out of memory");
        goto done;
    }
    double *xd = tg_tensor_data(x), *yd = tg_tensor_data(y);
    for (int call = 0; call < NCALLS; call++) {
        double s = 1.0 + w->id + 0.01 * call; /* every call of every thread differs */
        for (int i = 0; i < LEN; i++) {
            xd[i] = s * (double)(1 + i % 7); /* positive: no cancellation in the sums */
            yd[i] = (double)(1 + w->id + i % 5) + 0.5 * call;
        }
        double b = 0.0, c = 0.0;
        for (int i = 0; i < LEN; i++) {
            b += (2.0 * xd[i] + yd[i]) * xd[i];
            c += xd[i] * yd[i];
        }
        tg_tensor *in[2] = {x, y}, *out[1] = {NULL};
        tg_status st = tg_fn_call(w->f, in, 2, out, 1);
        bool ok = st == TG_OK;
        if (!ok && !w->failures)
            snprintf(w->first, sizeof w->first, "call %d: %s", call, tg_last_error());
        for (int i = 0; ok && i < LEN; i++) {
            double want = 2.0 * xd[i] + yd[i] + b + c;
            double got = tg_tensor_get_f64(out[0], i);
            ok = fabs(got - want) <= 1e-9 * (1.0 + fabs(want));
            if (!ok && !w->failures)
                snprintf(w->first, sizeof w->first, "call %d: element %d is %.17g, not %.17g", call,
                         i, got, want);
        }
        if (!ok) w->failures++;
        tg_tensor_free(out[0]);
    }
done:
    tg_tensor_free(x);
    tg_tensor_free(y);
    return NULL;
}

static void run_threads(tg_mode backend) {
    tg_module *m = parse(threads_text);
    tg_fn *f = compile_debug(m, backend);
    worker w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (worker){.f = f, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        if (w[t].failures)
            fail_msg("%s backend, thread %d: %d of %d calls failed; first: %s",
                     backend == TG_MODE_C ? "c" : "vm", t, w[t].failures, NCALLS, w[t].first);
    tg_fn_free(f);
    tg_module_free(m);
}

static void test_threads_vm(void **state) {
    (void)state;
    run_threads(TG_MODE_VM);
}

static void test_threads_c(void **state) {
    (void)state;
    fresh_cache();
    run_threads(TG_MODE_C);
    remove_cache();
}

/* ---- many inputs ---- */

/* main(x0: f64[2], ..., x{n-1}: f64[2]) returning concatenate of them all. */
static char *concat_text(int n) {
    size_t cap = 64 + (size_t)n * 32;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t u = (size_t)snprintf(s, cap, "func main(");
    for (int k = 0; k < n; k++)
        u += (size_t)snprintf(s + u, cap - u, "%sx%d: f64[2]", k ? ", " : "", k);
    u += (size_t)snprintf(s + u, cap - u, ") {\n  return concatenate(");
    for (int k = 0; k < n; k++) u += (size_t)snprintf(s + u, cap - u, "%sx%d", k ? ", " : "", k);
    snprintf(s + u, cap - u, ", axis=0)\n}\n");
    return s;
}

static void run_concat(int n, tg_mode backend) {
    char *text = concat_text(n);
    tg_module *m = parse(text);
    tg_fn *f = compile_debug(m, backend);
    tg_tensor **in = calloc((size_t)n, sizeof *in);
    assert_non_null(in);
    int64_t shape[1] = {2};
    for (int k = 0; k < n; k++) {
        in[k] = tg_tensor_new(NULL, TG_DT_F64, 1, shape);
        assert_non_null(in[k]);
        ((double *)tg_tensor_data(in[k]))[0] = 2.0 * k;
        ((double *)tg_tensor_data(in[k]))[1] = 2.0 * k + 1;
    }
    tg_tensor *out[1] = {NULL};
    tg_status st = tg_fn_call(f, in, n, out, 1);
    if (st != TG_OK) fail_msg("concatenate of %d inputs: %s", n, tg_last_error());
    assert_int_equal(tg_tensor_size(out[0]), 2 * n);
    for (int64_t i = 0; i < 2 * n; i++) assert_true(tg_tensor_get_f64(out[0], i) == (double)i);
    tg_tensor_free(out[0]);
    tg_fn_free(f);

    /* a write to input 0 is still caught (the hook is read at compile time) */
    setenv("TGRAPH_TEST_CLOBBER_OP", "concatenate", 1);
    f = compile_debug(m, backend);
    unsetenv("TGRAPH_TEST_CLOBBER_OP");
    out[0] = NULL;
    assert_int_equal(tg_fn_call(f, in, n, out, 1), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "wrote to its input 0"));
    tg_fn_free(f);

    for (int k = 0; k < n; k++) tg_tensor_free(in[k]);
    free(in);
    tg_module_free(m);
    free(text);
}

static void test_many_inputs(void **state) {
    (void)state;
    fresh_cache();
    tg_mode backends[2] = {TG_MODE_VM, TG_MODE_C};
    for (int b = 0; b < 2; b++) {
        run_concat(40, backends[b]);
        run_concat(70, backends[b]);
    }
    remove_cache();
}

/* ---- sums that cancel ---- */

/* A dot whose terms cancel: x[n-1] is minus the sum of the others taken in order, so the
 * reference (which adds in order) gives exactly 0 and a backend that adds in another order
 * a rounding error of the terms' size. The tolerance scales with the terms, so that is
 * no difference; a wrong value of that size times 1e6 still is. */
static void test_cancelling_sum(void **state) {
    (void)state;
    fresh_cache();
    enum { N = 1024 };
    tg_module *m = parse("func main(x: f64[1024], y: f64[1024]) {\n"
                         "  d = dot(x, y)\n"
                         "  return d\n"
                         "}\n");
    tg_tensor *in[2] = {tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){N}),
                        tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){N})};
    double *x = tg_tensor_data(in[0]), *y = tg_tensor_data(in[1]), s = 0.0;
    uint64_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (double)(r >> 11) / 9007199254740992.0 - 0.5;
        y[i] = 1.0;
    }
    for (int i = 0; i < N - 1; i++) s += x[i];
    x[N - 1] = -s;
    tg_mode backends[2] = {TG_MODE_VM, TG_MODE_C};
    for (int b = 0; b < 2; b++) {
        tg_fn *f = compile_debug(m, backends[b]);
        tg_tensor *out = NULL;
        tg_status st = tg_fn_call(f, in, 2, &out, 1);
        if (st != TG_OK) fail_msg("backend %d: %s", b, tg_last_error());
        assert_true(fabs(*(double *)tg_tensor_data(out)) < 1e-12);
        tg_tensor_free(out);
        tg_fn_free(f);
    }
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_module_free(m);
    remove_cache();
}

/* Subnormal results: softplus(-100) in f32 is about 3.8e-44, where one step of the format
 * (1.4e-45) is 4% of the value. The vm's vector function and the reference differ by that
 * step; magnitudes below the smallest normal count as that normal, so it is no difference. */
static void test_subnormal(void **state) {
    (void)state;
    fresh_cache();
    tg_module *m = parse("func main(x: f32[4]) {\n"
                         "  return softplus(x)\n"
                         "}\n");
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_F32, 1, (int64_t[]){4});
    float *p = tg_tensor_data(x);
    p[0] = -100.0f, p[1] = -95.0f, p[2] = -90.0f, p[3] = 2.0f;
    tg_mode backends[2] = {TG_MODE_VM, TG_MODE_C};
    for (int b = 0; b < 2; b++) {
        tg_fn *f = compile_debug(m, backends[b]);
        tg_tensor *out = NULL;
        tg_status st = tg_fn_call(f, &x, 1, &out, 1);
        if (st != TG_OK) fail_msg("backend %d: %s", b, tg_last_error());
        tg_tensor_free(out);
        tg_fn_free(f);
    }
    tg_tensor_free(x);
    tg_module_free(m);
    remove_cache();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_vm),  cmocka_unit_test(test_threads_c),
        cmocka_unit_test(test_many_inputs), cmocka_unit_test(test_cancelling_sum),
        cmocka_unit_test(test_subnormal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
