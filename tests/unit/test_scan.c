/* test_scan.c - scan and map through the C API (docs/scan.md, docs/c-api.md "Loops").
 *
 * Cases: a scan built with tg_apply_multi and a step graph of the same context (the node
 * keeps it alive after the caller frees it) gives a hand-written loop's values on every
 * backend, and its gradient through tg_grad matches central differences; a map's
 * iterations give the same values at 1 and 4 threads; a count given as a tensor
 * (dynamic_steps) runs that many steps and a negative one fails with a message; a state
 * whose type changes in the step is refused by the builder, with the graph's first error;
 * gradients through taps, a stop condition (also with reverse=true) and a count given as
 * a tensor (also 0) pass tg_grad_check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops_testutil.h"
#include "tgraph.h"

enum { N = 3, T = 6 };

/* h, x, W -> tanh(W h + x), sum(new h) */
static tg_graph *rnn_step(tg_ctx *ctx) {
    tg_graph *s = tg_graph_new(ctx, "step");
    tg_var *h = tg_input(s, "h", TG_DT_F64, 1, (int64_t[]){N});
    tg_var *x = tg_input(s, "x", TG_DT_F64, 1, (int64_t[]){N});
    tg_var *W = tg_input(s, "W", TG_DT_F64, 2, (int64_t[]){N, N});
    tg_var *hn = tg_tanh(s, tg_add(s, tg_dot(s, W, h), x));
    tg_var *y = tg_reduce(s, "sum", hn, NULL, -1, false);
    assert_int_equal(tg_graph_set_outputs(s, (tg_var *[]){hn, y}, 2), TG_OK);
    return s;
}

static double H0[N] = {0.1, -0.3, 0.2}, XS[T][N], WM[N][N];

static void data(void) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) XS[t][i] = sin(1.3 * t + 0.7 * i);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) WM[i][j] = 0.4 * cos(i + 2.0 * j);
}

/* The loss sum(ys) + sum(h_last) of the loop, by hand. */
static double loop_loss(const double *h0, const double xs[T][N], const double W[N][N]) {
    double h[N], hn[N], loss = 0;
    memcpy(h, h0, sizeof h);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < N; i++) {
            double a = xs[t][i];
            for (int j = 0; j < N; j++) a += W[i][j] * h[j];
            hn[i] = tanh(a);
            loss += hn[i];
        }
        memcpy(h, hn, sizeof h);
    }
    for (int i = 0; i < N; i++) loss += h[i];
    return loss;
}

static void test_scan_values_and_gradient(void **state) {
    (void)state;
    data();
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *h0 = tg_input(g, "h0", TG_DT_F64, 1, (int64_t[]){N});
    tg_var *xs = tg_input(g, "xs", TG_DT_F64, 2, (int64_t[]){T, N});
    tg_var *W = tg_input(g, "W", TG_DT_F64, 2, (int64_t[]){N, N});
    tg_graph *step = rnn_step(NULL);
    tg_attr a[] = {TG_A_FUNC("body", step), TG_A_INT("n_sequences", 1)};
    tg_var *res[2];
    int nres = 2;
    assert_int_equal(tg_apply_multi(g, "scan", (tg_var *[]){h0, xs, W}, 3, a, 2, res, &nres),
                     TG_OK);
    assert_int_equal(nres, 2);
    tg_graph_free(step); /* the node holds it */
    tg_var *loss = tg_add(g, tg_reduce(g, "sum", res[1], NULL, -1, false),
                          tg_reduce(g, "sum", res[0], NULL, -1, false));
    tg_var *grads[3];
    assert_int_equal(tg_grad(g, loss, (tg_var *[]){h0, xs, W}, 3, TG_DISCONNECTED_ERROR, grads),
                     TG_OK);
    assert_int_equal(tg_graph_set_outputs(g, (tg_var *[]){loss, grads[0], grads[1], grads[2]}, 4),
                     TG_OK);
    tg_tensor *in[3] = {tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){N}, H0),
                        tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){T, N}, XS),
                        tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){N, N}, WM)};
    const double want = loop_loss(H0, XS, WM), eps = 1e-6;
    const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C, TG_MODE_DEBUG};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = modes[m], .debug_backend = TG_MODE_VM);
        tg_tensor *out[4] = {0};
        compile_call(g, &o, in, 3, out, 4);
        assert_true(fabs(tg_tensor_get_f64(out[0], 0) - want) < 1e-12);
        /* d loss / d W[i][j] by central differences */
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                double Wp[N][N];
                memcpy(Wp, WM, sizeof Wp);
                Wp[i][j] += eps;
                double hi = loop_loss(H0, XS, (const double(*)[N])Wp);
                Wp[i][j] -= 2 * eps;
                double lo = loop_loss(H0, XS, (const double(*)[N])Wp);
                assert_true(fabs(tg_tensor_get_f64(out[3], i * N + j) - (hi - lo) / (2 * eps)) <
                            1e-6);
            }
        for (int k = 0; k < 4; k++) tg_tensor_free(out[k]);
    }
    for (int k = 0; k < 3; k++) tg_tensor_free(in[k]);
    tg_graph_free(g);
}

static void test_map_threads(void **state) {
    (void)state;
    const char *src = "func f(x: f64[8], c: f64[8]) {\n"
                      "  return sum(mul(sin(x), c)), exp(mul(x, 0.1))\n"
                      "}\n"
                      "func main(xs: f64[1000,8], c: f64[8]) {\n"
                      "  s, e = map(@f, xs, c)\n"
                      "  return s, e\n"
                      "}\n";
    tg_module *m = parse_text(src);
    static double xs[1000][8], c[8];
    for (int i = 0; i < 1000; i++)
        for (int j = 0; j < 8; j++) xs[i][j] = 0.01 * i - 0.3 * j;
    for (int j = 0; j < 8; j++) c[j] = 1.0 / (j + 1);
    tg_tensor *in[2] = {tg_tensor_from_data(NULL, TG_DT_F64, 2, (int64_t[]){1000, 8}, xs),
                        tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){8}, c)};
    tg_tensor *out[2][2] = {{0}};
    for (int k = 0; k < 2; k++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = k ? 4 : 1);
        compile_call(tg_module_find(m, "main"), &o, in, 2, out[k], 2);
    }
    for (int i = 0; i < 1000; i++) {
        double s = 0;
        for (int j = 0; j < 8; j++) s += sin(xs[i][j]) * c[j];
        assert_true(fabs(tg_tensor_get_f64(out[0][0], i) - s) < 1e-12);
        assert_true(tg_tensor_get_f64(out[0][0], i) == tg_tensor_get_f64(out[1][0], i));
        assert_true(tg_tensor_get_f64(out[0][1], 8 * i + 3) ==
                    tg_tensor_get_f64(out[1][1], 8 * i + 3));
    }
    for (int k = 0; k < 2; k++) {
        tg_tensor_free(out[k][0]);
        tg_tensor_free(out[k][1]);
        tg_tensor_free(in[k]);
    }
    tg_module_free(m);
}

static void test_dynamic_count(void **state) {
    (void)state;
    const char *src = "func step(h: f64[]) {\n"
                      "  return add(h, 1.0), mul(h, 2.0)\n"
                      "}\n"
                      "func main(h0: f64[], k: i64[]) {\n"
                      "  hl, ys = scan(@step, h0, k, dynamic_steps=true)\n"
                      "  return hl, ys\n"
                      "}\n";
    tg_module *m = parse_text(src);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_find(m, "main"), NULL, &f) != TG_OK)
        fail_msg("compile: %s", tg_last_error());
    double h0 = 0.5;
    int64_t k = 4;
    tg_tensor *in[2] = {tg_tensor_from_data(NULL, TG_DT_F64, 0, NULL, &h0),
                        tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &k)};
    tg_tensor *out[2] = {0};
    if (tg_fn_call(f, in, 2, out, 2) != TG_OK) fail_msg("call: %s", tg_last_error());
    assert_true(tg_tensor_get_f64(out[0], 0) == 4.5);
    assert_int_equal(tg_tensor_shape(out[1])[0], 4);
    assert_true(tg_tensor_get_f64(out[1], 3) == 7.0);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_tensor_free(in[1]);
    k = -1;
    in[1] = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &k);
    tg_tensor *bad[2] = {0};
    assert_int_not_equal(tg_fn_call(f, in, 2, bad, 2), TG_OK);
    assert_non_null(strstr(tg_last_error(), "the number of steps is -1"));
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_fn_free(f);
    tg_module_free(m);
}

/* main of src at the point in (tensors of the doubles d[i] with shapes sh[i]; the last
 * input an i64 count when count >= 0) passes tg_grad_check. */
static void grad_checks(const char *src, int nin, const int *ndim, const int64_t (*sh)[2],
                        const double *const *d, int64_t count) {
    tg_module *m = parse_text(src);
    tg_tensor *in[8] = {0};
    for (int i = 0; i < nin; i++)
        in[i] = tg_tensor_from_data(NULL, TG_DT_F64, ndim[i], sh[i], d[i]);
    if (count >= 0) in[nin++] = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &count);
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT(0);
    if (tg_grad_check(tg_module_find(m, "main"), in, nin, NULL, &rep) != TG_OK)
        fail_msg("grad check: %s", tg_last_error());
    for (int i = 0; i < nin; i++) tg_tensor_free(in[i]);
    tg_module_free(m);
}

/* AR(2) through taps=[-2, -1] (the step takes them in that order) over an initial value of
 * 3 rows, of which the taps read the last 2; the loss reads the per-step outputs and the
 * last value (2 rows). */
static void test_grad_taps(void **state) {
    (void)state;
    const char *src = "func step(x2: f64[2], x1: f64[2], e: f64[2], a: f64[], b: f64[]) {\n"
                      "  xn = add(add(mul(a, x1), mul(b, sin(x2))), e)\n"
                      "  return xn, sum(mul(xn, x2))\n"
                      "}\n"
                      "func main(x0: f64[3,2], es: f64[5,2], a: f64[], b: f64[]) {\n"
                      "  xl, ys = scan(@step, x0, es, a, b, n_sequences=1, taps=[-2, -1])\n"
                      "  return add(sum(mul(xl, xl)), sum(mul(ys, ys)))\n"
                      "}\n";
    double x0[6] = {0.3, -0.2, 0.5, 0.1, -0.4, 0.7}, es[10], a = 0.6, b = -0.3;
    for (int i = 0; i < 10; i++) es[i] = 0.2 * sin(1.7 * i);
    grad_checks(src, 4, (int[]){2, 2, 0, 0}, (const int64_t[][2]){{3, 2}, {5, 2}, {0}, {0}},
                (const double *[]){x0, es, &a, &b}, -1);
}

/* A stop condition: the loop stops after step 3 of 8 (the running sum passes 2, far from
 * it at the neighbouring steps), so the sequence's rows 4.. get zero gradient. */
static void test_grad_until(void **state) {
    (void)state;
    const char *src = "func step(h: f64[], s: f64[], x: f64[]) {\n"
                      "  hn = tanh(add(mul(h, 0.5), x))\n"
                      "  sn = add(s, x)\n"
                      "  return hn, sn, mul(hn, hn), gt(sn, 2.0)\n"
                      "}\n"
                      "func main(h0: f64[], xs: f64[8]) {\n"
                      "  hl, sl, ys = scan(@step, h0, 0.0, xs, n_states=2, n_sequences=1, "
                      "until=true)\n"
                      "  return add(add(hl, mul(sl, sl)), sum(ys))\n"
                      "}\n";
    double h0 = 0.2, xs[8] = {0.4, 0.9, -0.2, 1.5, 0.3, -0.7, 0.8, 0.1};
    grad_checks(src, 2, (int[]){0, 1}, (const int64_t[][2]){{0}, {8}}, (const double *[]){&h0, xs},
                -1);
}

/* A count given as a tensor (dynamic_steps), 3 steps over a sequence of 6 rows, then 0. */
static void test_grad_dynamic(void **state) {
    (void)state;
    const char *src = "func step(h: f64[2], x: f64[2], W: f64[2,2]) {\n"
                      "  hn = tanh(add(dot(W, h), x))\n"
                      "  return hn, sum(hn)\n"
                      "}\n"
                      "func main(h0: f64[2], xs: f64[6,2], W: f64[2,2], k: i64[]) {\n"
                      "  hl, ys = scan(@step, h0, xs, W, k, n_sequences=1, dynamic_steps=true)\n"
                      "  return add(sum(hl), sum(mul(ys, ys)))\n"
                      "}\n";
    double h0[2] = {0.1, -0.5}, xs[12], W[4] = {0.5, -0.2, 0.3, 0.8};
    for (int i = 0; i < 12; i++) xs[i] = 0.3 * cos(0.9 * i);
    grad_checks(src, 3, (int[]){1, 2, 2}, (const int64_t[][2]){{2}, {6, 2}, {2, 2}},
                (const double *[]){h0, xs, W}, 3);
    /* no step: the gradient reaches h0 alone */
    grad_checks(src, 3, (int[]){1, 2, 2}, (const int64_t[][2]){{2}, {6, 2}, {2, 2}},
                (const double *[]){h0, xs, W}, 0);
}

/* A stop condition in a loop whose rows run from the last to the first (reverse=true)
 * with n_steps=6 over 7 rows: the steps read rows 5, 4, 3 and stop (the sum passes 2), so
 * rows 0-2 and 6 get zero gradient. */
static void test_grad_until_reverse(void **state) {
    (void)state;
    const char *src = "func step(h: f64[], x: f64[]) {\n"
                      "  hn = add(mul(h, x), x)\n"
                      "  return hn, mul(hn, x), gt(hn, 2.0)\n"
                      "}\n"
                      "func main(h0: f64[], xs: f64[7]) {\n"
                      "  hl, ys = scan(@step, h0, xs, n_sequences=1, n_steps=6, until=true, "
                      "reverse=true)\n"
                      "  return add(mul(hl, hl), sum(mul(ys, ys)))\n"
                      "}\n";
    double h0 = 0.3, xs[7] = {0.5, -0.4, 0.6, 1.2, 0.8, 0.9, 0.7};
    grad_checks(src, 2, (int[]){0, 1}, (const int64_t[][2]){{0}, {7}}, (const double *[]){&h0, xs},
                -1);
}

static void test_state_type_refused(void **state) {
    (void)state;
    tg_graph *s = tg_graph_new(NULL, "step");
    tg_var *h = tg_input(s, "h", TG_DT_F64, 1, (int64_t[]){N});
    assert_int_equal(
        tg_graph_set_outputs(s, (tg_var *[]){tg_reduce(s, "sum", h, NULL, -1, false)}, 1), TG_OK);
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_var *h0 = tg_input(g, "h0", TG_DT_F64, 1, (int64_t[]){N});
    tg_attr a[] = {TG_A_FUNC("body", s), TG_A_INT("n_steps", 3)};
    assert_null(tg_apply(g, "scan", &h0, 1, a, 2));
    assert_non_null(strstr(tg_last_error(), "a carried state keeps its type"));
    assert_null(tg_exp(g, h0)); /* the first error stays */
    tg_graph_free(s);
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_values_and_gradient),
        cmocka_unit_test(test_map_threads),
        cmocka_unit_test(test_dynamic_count),
        cmocka_unit_test(test_state_type_refused),
        cmocka_unit_test(test_grad_taps),
        cmocka_unit_test(test_grad_until),
        cmocka_unit_test(test_grad_dynamic),
        cmocka_unit_test(test_grad_until_reverse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
