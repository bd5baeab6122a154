/* test_hostile.c - hostile inputs that the other suites do not already cover (see
 * docs/hardening.md for the full list and where each is tested).
 *
 * Shapes whose element count overflows int64 or that are negative, at every door: the
 * tensor API, graph inputs declared in C and in .tg, and the ops that make shapes from
 * attributes or values (zeros, reshape, broadcast_to, arange, alloc, concatenate);
 * each gives a clear error, and graphs whose declared types are absurd still optimise and
 * compile without undefined behaviour (this suite runs under UBSan in `make asan`).
 * Huge literals: a float literal past the range of its operand's dtype becomes inf, as
 * NumPy gives (NEP 50: np.float32(2) * 1e300 is inf); one past float64 is a syntax error;
 * integer literals out of range of their operand are an error. NaN and inf through
 * reductions and argmax/argmin follow NumPy on both backends (NaN propagates; argmax and
 * argmin give the first NaN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tgraph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ---- */

/* Parses src (one function `main`) or fails the test. */
static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "h.tg", &m);
    if (st != TG_OK) fail_msg("parse failed: %s", tg_last_error());
    return m;
}

/* Expects src to fail to parse with a message holding `want`. */
static void parse_fails(const char *src, const char *want) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "h.tg", &m);
    if (st == TG_OK) fail_msg("parsed, expected an error holding '%s':\n%s", want, src);
    assert_null(m);
    if (!strstr(tg_last_error(), want)) fail_msg("message '%s' lacks '%s'", tg_last_error(), want);
}

/* Runs main of src on `in` in `mode`; the status, with out[0..nout) on success. */
static tg_status run_src(const char *src, tg_mode mode, tg_tensor **in, int nin, tg_tensor **out,
                         int nout) {
    tg_module *m = parse(src);
    tg_fn *f = NULL;
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
    tg_status st = tg_graph_compile(tg_module_find(m, "main"), &o, &f);
    if (st == TG_OK) st = tg_fn_call(f, in, nin, out, nout);
    tg_fn_free(f);
    tg_module_free(m);
    return st;
}

/* The run fails in both modes with a message holding `want`. */
static void run_fails(const char *src, tg_tensor **in, int nin, const char *want) {
    for (int mode = 0; mode < 2; mode++) {
        tg_tensor *out[4] = {0};
        tg_status st = run_src(src, mode == 0 ? TG_MODE_VM : TG_MODE_REFERENCE, in, nin, out, 1);
        if (st == TG_OK)
            fail_msg("%s: ran, expected an error holding '%s'", mode ? "reference" : "vm", want);
        if (!strstr(tg_last_error(), want))
            fail_msg("%s: message '%s' lacks '%s'", mode ? "reference" : "vm", tg_last_error(),
                     want);
    }
}

static tg_tensor *vec_f32(int n, const float *v) {
    tg_tensor *t = tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){n}, v);
    assert_non_null(t);
    return t;
}

/* ---- shapes ---- */

static void test_tensor_api_shapes(void **state) {
    (void)state;
    assert_null(tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32}));
    assert_true(*tg_last_error());
    assert_null(tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){INT64_MAX}));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){-1, 4}));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, 1, (int64_t[]){INT64_MIN}));
    assert_null(
        tg_tensor_new(NULL, TG_DT_F32, TG_MAX_DIMS + 1, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}));
    assert_null(tg_tensor_new(NULL, TG_DT_F32, -1, NULL));
    /* zero elements with an absurd extent beside them: NumPy allows it; tgraph either
     * makes the empty tensor or refuses it cleanly, never overflows */
    tg_tensor *e = tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){0, INT64_C(1) << 40});
    if (e) assert_int_equal(tg_tensor_size(e), 0);
    tg_tensor_free(e);
}

static void test_builder_shapes(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "h");
    /* an input whose element count overflows int64 */
    tg_var *y = tg_input(g, "y", TG_DT_F32, 3, (int64_t[]){INT64_C(1) << 32, INT64_C(1) << 32, 4});
    if (y) {
        /* accepted as a declaration: what is built on it must fail cleanly or work */
        tg_var *s = tg_reduce(g, "sum", tg_mul(g, y, tg_literal_float(g, 2.0)), NULL, -1, false);
        if (s && tg_graph_set_outputs(g, &s, 1) == TG_OK) {
            tg_graph *opt = NULL;
            tg_status st = tg_graph_optimize(g, NULL, &opt);
            assert_true(st == TG_OK || *tg_last_error());
            tg_graph_free(opt);
            tg_fn *f = NULL;
            st = tg_graph_compile(g, NULL, &f);
            assert_true(st == TG_OK || *tg_last_error());
            tg_fn_free(f);
        }
    } else {
        assert_true(*tg_last_error());
    }
    tg_graph_free(g);
    g = tg_graph_new(NULL, "h");
    assert_null(tg_input(g, "z", TG_DT_F32, 1, (int64_t[]){-7}));
    assert_int_not_equal(tg_graph_status(g), TG_OK);
    tg_graph_free(g);
}

static void test_text_shapes(void **state) {
    (void)state;
    parse_fails("func main(x: f32[3]) {\n  y = zeros(shape=[4294967296,4294967296,4], "
                "dtype=\"f32\")\n  return y\n}\n",
                "too big");
    parse_fails("func main(x: f32[3]) {\n  y = zeros(shape=[-5], dtype=\"f32\")\n  return y\n}\n",
                "negative");
    parse_fails("func main(x: f32[3]) {\n  y = reshape(x, shape=[3037000500, 3037000500])\n"
                "  return y\n}\n",
                "too large");
    parse_fails("func main(x: f32[3]) {\n  y = arange(start=-9223372036854775807, "
                "stop=9223372036854775807, step=1, dtype=\"i64\")\n  return y\n}\n",
                "maximum allowed size exceeded");
    parse_fails("func main(x: f32[-3]) {\n  return x\n}\n", "expected an extent");
    parse_fails("func main(x: f32[99999999999999999999]) {\n  return x\n}\n", "h.tg:1:");
    /* a declared type that overflows: optimising and compiling stay defined */
    tg_module *m = parse("func main(x: f32[3], y: f32[4294967296,4294967296,4]) {\n"
                         "  return add(sum(mul(y, 2)), sum(x))\n}\n");
    tg_graph *opt = NULL;
    tg_status st = tg_graph_optimize(tg_module_func(m, 0), NULL, &opt);
    assert_true(st == TG_OK || *tg_last_error());
    tg_graph_free(opt);
    tg_module_free(m);
}

static void test_runtime_shapes(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    tg_tensor *x = vec_f32(3, v);
    /* shapes made from values at run time */
    run_fails("func main(x: f32[3]) {\n  n = cast(mul(sum(x), 1e18), dtype=\"i64\")\n"
              "  y = alloc(0.0, n, n)\n  return y\n}\n",
              &x, 1, "h.tg:3:");
    run_fails("func main(x: f32[3]) {\n  y = broadcast_to(x, shape=[4294967296, 4294967296, 3])\n"
              "  return sum(y)\n}\n",
              &x, 1, "too large");
    tg_tensor_free(x);
}

/* ---- literals ---- */

static void test_huge_literals(void **state) {
    (void)state;
    float v[3] = {1, -2, 0};
    tg_tensor *x = vec_f32(3, v);
    for (int mode = 0; mode < 2; mode++) {
        tg_tensor *out[1] = {0};
        tg_status st = run_src("func main(x: f32[3]) {\n  return mul(x, 1e300)\n}\n",
                               mode ? TG_MODE_REFERENCE : TG_MODE_VM, &x, 1, out, 1);
        assert_int_equal(st, TG_OK);
        assert_int_equal(tg_tensor_dtype(out[0]), TG_DT_F32); /* weak literal: x's dtype */
        const float *r = tg_tensor_data(out[0]);
        assert_true(isinf(r[0]) && r[0] > 0);
        assert_true(isinf(r[1]) && r[1] < 0);
        assert_true(isnan(r[2])); /* 0 * inf, as NumPy gives */
        tg_tensor_free(out[0]);
    }
    tg_tensor_free(x);
    parse_fails("func main(x: f64[3]) {\n  return mul(x, 1e400)\n}\n", "out of range");
    parse_fails("func main(x: i64[3]) {\n  return add(x, 9223372036854775808)\n}\n",
                "out of range");
    parse_fails("func main(x: i8[3]) {\n  return add(x, 300)\n}\n", "out of range");
}

/* ---- NaN and inf ---- */

static void test_nan_reductions(void **state) {
    (void)state;
    /* 1000 elements with a NaN in the middle: the vector reductions must not drop it */
    float v[1000];
    for (int i = 0; i < 1000; i++) v[i] = (float)i;
    v[500] = NAN;
    v[700] = INFINITY;
    tg_tensor *x = vec_f32(1000, v);
    const char *src = "func main(x: f32[1000]) {\n"
                      "  return max(x), argmax(x), min(x), argmin(x), sum(x), "
                      "max(maximum(x, 0)), sum(isinf(x))\n}\n";
    for (int mode = 0; mode < 2; mode++) {
        tg_tensor *out[7] = {0};
        assert_int_equal(run_src(src, mode ? TG_MODE_REFERENCE : TG_MODE_VM, &x, 1, out, 7), TG_OK);
        assert_true(isnan(tg_tensor_get_f64(out[0], 0)));
        assert_int_equal((int64_t)tg_tensor_get_f64(out[1], 0), 500);
        assert_true(isnan(tg_tensor_get_f64(out[2], 0)));
        assert_int_equal((int64_t)tg_tensor_get_f64(out[3], 0), 500);
        assert_true(isnan(tg_tensor_get_f64(out[4], 0)));
        assert_true(isnan(tg_tensor_get_f64(out[5], 0)));
        assert_int_equal((int64_t)tg_tensor_get_f64(out[6], 0), 1);
        for (int o = 0; o < 7; o++) tg_tensor_free(out[o]);
    }
    tg_tensor_free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_api_shapes), cmocka_unit_test(test_builder_shapes),
        cmocka_unit_test(test_text_shapes),       cmocka_unit_test(test_runtime_shapes),
        cmocka_unit_test(test_huge_literals),     cmocka_unit_test(test_nan_reductions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
