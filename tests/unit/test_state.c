/* test_state.c - stateful compiled functions (docs/state.md): `mut` parameters and
 * `NAME <- expr` updates in the text format (parse, print, errors), the C API (tg_state,
 * tg_update, tg_fn_state*), values after several calls in every mode, atomic updates
 * (a failed call changes no state), updates whose value is an input, a view or shared
 * with another update, and flat memory over 1,000 training steps (a counting allocator).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgraph.h"

static const tg_mode MODES[] = {TG_MODE_VM, TG_MODE_REFERENCE, TG_MODE_C, TG_MODE_DEBUG};

static tg_module *parse(const char *src) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "s.tg", &m);
    if (st != TG_OK) fail_msg("parse: %s", tg_last_error());
    return m;
}

/* The parse error of src, or "" when it parses. */
static const char *parse_error(const char *src) {
    static char msg[512];
    tg_module *m = NULL;
    tg_status st = tg_module_parse(NULL, src, strlen(src), "s.tg", &m);
    snprintf(msg, sizeof msg, "%s", st == TG_OK ? "" : tg_last_error());
    tg_module_free(m);
    return msg;
}

static char *print_module(const tg_module *m) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(tg_module_print(m, f), TG_OK);
    fclose(f);
    return text;
}

static tg_fn *compile(tg_graph *g, tg_mode mode) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) fail_msg("compile: %s", tg_last_error());
    return f;
}

static tg_tensor *vec_f32(int n, const float *v) {
    return tg_tensor_from_data(NULL, TG_DT_F32, 1, (int64_t[]){n}, v);
}

static void expect_vec(const tg_tensor *t, int n, const float *want) {
    assert_non_null(t);
    assert_int_equal(tg_tensor_size(t), n);
    for (int i = 0; i < n; i++)
        if (tg_tensor_get_f64(t, i) != (double)want[i])
            fail_msg("element %d: %.9g, expected %.9g", i, tg_tensor_get_f64(t, i),
                     (double)want[i]);
}

static const char STEP[] = "func step(mut W: f32[3], x: f32[3], mut n: i64[]) {\n"
                           "    g = mul(x, 2.0)\n"
                           "    W <- sub(W, mul(0.25, g))\n"
                           "    n <- add(n, 1)\n"
                           "    return sum(W)\n"
                           "}\n";

static void test_print_fixed_point(void **state) {
    (void)state;
    tg_module *m = parse(STEP);
    char *a = print_module(m);
    assert_non_null(strstr(a, "func step(mut W: f32[3], x: f32[3], mut n: i64[])"));
    assert_non_null(strstr(a, "W <- "));
    assert_non_null(strstr(a, "n <- "));
    tg_module *m2 = parse(a);
    char *b = print_module(m2);
    assert_string_equal(a, b);
    /* a parameter may itself be called mut */
    tg_module *m3 =
        parse("func f(mut: f32[2], mut mut2: f32[2]) {\n mut2 <- mut\n return mut\n}\n");
    char *c = print_module(m3);
    assert_non_null(strstr(c, "func f(mut: f32[2], mut mut2: f32[2])"));
    assert_non_null(strstr(c, "mut2 <- mut"));
    free(a);
    free(b);
    free(c);
    tg_module_free(m);
    tg_module_free(m2);
    tg_module_free(m3);
    /* the parser's example file of state and keys (tests run from tests/) */
    tg_module *mf = NULL;
    assert_int_equal(tg_module_load(NULL, "parse/state.tg", &mf), TG_OK);
    char *p1 = print_module(mf);
    tg_module *mp = parse(p1);
    char *p2 = print_module(mp);
    assert_string_equal(p1, p2);
    assert_non_null(strstr(p1, "func draws(mut mut: i64[])"));
    free(p1);
    free(p2);
    tg_module_free(mf);
    tg_module_free(mp);
}

static void test_parse_errors(void **state) {
    (void)state;
    assert_non_null(strstr(parse_error("func f(x: f32[3]) {\n  x <- neg(x)\n  return x\n}\n"),
                           "s.tg:2:3: 'x' is not a state"));
    assert_non_null(
        strstr(parse_error("func f(mut x: f32[3]) {\n  x <- neg(x)\n  x <- x\n  return x\n}\n"),
               "s.tg:3:3: state 'x' is already updated at 2:3"));
    assert_non_null(strstr(
        parse_error("func f(mut x: f32[3]) {\n  x <- cast(x, dtype=\"f64\")\n  return x\n}\n"),
        "s.tg:2:3: update of 'x': the new value is f64[3], the state is f32[3]"));
    assert_non_null(strstr(parse_error("func f(mut x: f32[3]) {\n  x <- sum(x)\n  return x\n}\n"),
                           "update of 'x': the new value is f32[], the state is f32[3]"));
    assert_non_null(strstr(parse_error("func f(mut x: f32[3]) {\n  y <- x\n  return x\n}\n"),
                           "s.tg:2:3: unknown name 'y'"));
    assert_non_null(
        strstr(parse_error("func f(mut x: f32[3]) {\n  y = neg(x)\n  y <- x\n  return x\n}\n"),
               "s.tg:3:3: 'y' is not a state"));
}

static void test_api_errors(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "f");
    tg_var *x = tg_input(g, "x", TG_DT_F32, 1, (int64_t[]){3});
    tg_var *s = tg_state(g, "s", TG_DT_F32, 1, (int64_t[]){3});
    assert_true(tg_var_is_state(s));
    assert_false(tg_var_is_state(x));
    assert_int_equal(tg_update(g, x, s), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "'x' is not a state"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    s = tg_state(g, "s", TG_DT_F32, 1, (int64_t[]){3});
    assert_int_equal(tg_update(g, s, tg_neg(g, s)), TG_OK);
    assert_int_equal(tg_update(g, s, s), TG_EINVAL);
    assert_non_null(strstr(tg_graph_error(g), "state 's' is updated twice"));
    tg_graph_free(g);

    g = tg_graph_new(NULL, "f");
    s = tg_state(g, "s", TG_DT_F32, 1, (int64_t[]){3});
    assert_int_equal(tg_update(g, s, tg_cast(g, s, TG_DT_I32)), TG_ETYPE);
    tg_graph_free(g);

    /* a weak literal takes the state's dtype */
    g = tg_graph_new(NULL, "f");
    s = tg_state(g, "s", TG_DT_F32, 0, NULL);
    assert_int_equal(tg_update(g, s, tg_literal_float(g, 0.5)), TG_OK);
    tg_var *y = tg_neg(g, s);
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    assert_int_equal(tg_graph_output_count(g), 1);
    tg_fn *f = compile(g, TG_MODE_VM);
    tg_tensor *out = NULL;
    assert_int_equal(tg_fn_call(f, NULL, 0, &out, 1), TG_OK);
    tg_tensor_free(out);
    assert_true(tg_tensor_get_f64(tg_fn_state(f, 0), 0) == 0.5);
    /* wrong counts name the state */
    assert_int_equal(tg_fn_call(f, NULL, 1, &out, 1), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "takes 0 inputs (besides its state)"));
    assert_null(tg_fn_state(f, 3));
    tg_tensor *bad = tg_tensor_new(NULL, TG_DT_F64, 0, NULL);
    assert_int_equal(tg_fn_state_set(f, 0, bad), TG_ETYPE);
    assert_non_null(strstr(tg_last_error(), "state 's': expected f32[], got f64[]"));
    tg_tensor_free(bad);
    tg_fn_free(f);
    tg_graph_free(g);
}

/* Three steps of STEP in every mode: W -= 0.5 x, n += 1, the return reads the old W. */
static void test_steps_every_mode(void **state) {
    (void)state;
    for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
        tg_module *m = parse(STEP);
        tg_fn *f = compile(tg_module_func(m, 0), MODES[mi]);
        assert_int_equal(tg_fn_state_count(f), 2);
        assert_string_equal(tg_fn_state_name(f, 0), "W");
        assert_string_equal(tg_fn_state_name(f, 1), "n");
        assert_int_equal(tg_fn_state_find(f, "n"), 1);
        assert_int_equal(tg_fn_state_find(f, "x"), -1);
        expect_vec(tg_fn_state(f, 0), 3, (float[]){0, 0, 0}); /* static: zeros */
        tg_tensor *w0 = vec_f32(3, (float[]){1, 1, 1});
        assert_int_equal(tg_fn_state_set(f, 0, w0), TG_OK);
        tg_tensor *x = vec_f32(3, (float[]){1, 2, 4});
        tg_tensor *loss = NULL;
        float sums[3];
        for (int k = 0; k < 3; k++) {
            tg_tensor_free(loss);
            loss = NULL;
            assert_int_equal(tg_fn_call(f, &x, 1, &loss, 1), TG_OK);
            sums[k] = (float)tg_tensor_get_f64(loss, 0);
        }
        assert_true(sums[0] == 3.0f && sums[1] == -0.5f && sums[2] == -4.0f);
        expect_vec(tg_fn_state(f, 0), 3, (float[]){-0.5f, -2.0f, -5.0f});
        assert_true(tg_tensor_get_f64(tg_fn_state(f, 1), 0) == 3.0);
        /* the state may be written in place between calls */
        float *wd = tg_tensor_data(tg_fn_state(f, 0));
        wd[0] = 10.0f;
        assert_int_equal(tg_fn_call_into(f, &x, 1, &loss, 1), TG_OK);
        assert_true(tg_tensor_get_f64(loss, 0) == 3.0);
        expect_vec(tg_fn_state(f, 0), 3, (float[]){9.5f, -3.0f, -7.0f});
        tg_tensor_free(loss);
        tg_tensor_free(x);
        tg_tensor_free(w0);
        tg_fn_free(f);
        tg_module_free(m);
    }
}

/* A failing call (run-time shape error after the updates were computed) leaves every
 * state as it was; the next good call proceeds from there. */
static void test_failed_call_is_atomic(void **state) {
    (void)state;
    static const char src[] = "func f(mut a: f32[3], x: f32[?]) {\n"
                              "    a2 = add(a, 1.0)\n"
                              "    a <- a2\n"
                              "    r = reshape(x, shape=[3])\n"
                              "    return add(r, a2)\n"
                              "}\n";
    for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
        tg_module *m = parse(src);
        tg_fn *f = compile(tg_module_func(m, 0), MODES[mi]);
        tg_tensor *good = vec_f32(3, (float[]){0, 0, 0});
        tg_tensor *bad = vec_f32(4, (float[]){0, 0, 0, 0});
        tg_tensor *out = NULL;
        assert_int_equal(tg_fn_call(f, &good, 1, &out, 1), TG_OK);
        tg_tensor_free(out);
        out = NULL;
        expect_vec(tg_fn_state(f, 0), 3, (float[]){1, 1, 1});
        for (int k = 0; k < 3; k++) {
            assert_int_not_equal(tg_fn_call(f, &bad, 1, &out, 1), TG_OK);
            assert_null(out);
            expect_vec(tg_fn_state(f, 0), 3, (float[]){1, 1, 1});
        }
        assert_int_equal(tg_fn_call(f, &good, 1, &out, 1), TG_OK);
        expect_vec(out, 3, (float[]){2, 2, 2});
        expect_vec(tg_fn_state(f, 0), 3, (float[]){2, 2, 2});
        tg_tensor_free(out);
        tg_tensor_free(good);
        tg_tensor_free(bad);
        tg_fn_free(f);
        tg_module_free(m);
    }
}

/* Update values that are inputs, views of a state, shared by two updates, or returned
 * too; and a swap of two states (each new value is the other's old one). */
static void test_aliased_updates(void **state) {
    (void)state;
    static const char src[] = "func f(mut a: f32[2,2], mut b: f32[2,2], mut c: f32[2,2], "
                              "mut d: f32[2,2], mut e: f32[2,2], x: f32[2,2]) {\n"
                              "    a <- b\n"
                              "    b <- a\n"
                              "    c <- transpose(c)\n"
                              "    s = add(x, 1.0)\n"
                              "    d <- s\n"
                              "    e <- s\n"
                              "    return s, x\n"
                              "}\n";
    for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
        for (int rw = 0; rw < 2; rw++) {
            tg_module *m = parse(src);
            tg_compile_opts o =
                TG_COMPILE_OPTS(.mode = MODES[mi], .nthreads = 1, .no_rewrite = rw == 0);
            tg_fn *f = NULL;
            assert_int_equal(tg_graph_compile(tg_module_func(m, 0), &o, &f), TG_OK);
            float av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8}, cv[4] = {1, 2, 3, 4};
            tg_tensor *ta = tg_tensor_from_data(NULL, TG_DT_F32, 2, (int64_t[]){2, 2}, av);
            tg_tensor *tb = tg_tensor_from_data(NULL, TG_DT_F32, 2, (int64_t[]){2, 2}, bv);
            tg_tensor *tc = tg_tensor_from_data(NULL, TG_DT_F32, 2, (int64_t[]){2, 2}, cv);
            assert_int_equal(tg_fn_state_set(f, 0, ta), TG_OK);
            assert_int_equal(tg_fn_state_set(f, 1, tb), TG_OK);
            assert_int_equal(tg_fn_state_set(f, 2, tc), TG_OK);
            tg_tensor *x =
                tg_tensor_from_data(NULL, TG_DT_F32, 2, (int64_t[]){2, 2}, (float[]){0, 1, 2, 3});
            tg_tensor *out[2] = {NULL, NULL};
            assert_int_equal(tg_fn_call(f, &x, 1, out, 2), TG_OK);
            expect_vec(tg_fn_state(f, 0), 4, bv);
            expect_vec(tg_fn_state(f, 1), 4, av);
            expect_vec(tg_fn_state(f, 2), 4, (float[]){1, 3, 2, 4});
            expect_vec(tg_fn_state(f, 3), 4, (float[]){1, 2, 3, 4});
            expect_vec(tg_fn_state(f, 4), 4, (float[]){1, 2, 3, 4});
            expect_vec(out[0], 4, (float[]){1, 2, 3, 4});
            expect_vec(out[1], 4, (float[]){0, 1, 2, 3});
            /* again, writing into the outputs of the first call */
            assert_int_equal(tg_fn_call_into(f, &x, 1, out, 2), TG_OK);
            expect_vec(tg_fn_state(f, 0), 4, av);
            expect_vec(tg_fn_state(f, 1), 4, bv);
            expect_vec(tg_fn_state(f, 2), 4, cv);
            expect_vec(out[0], 4, (float[]){1, 2, 3, 4});
            for (int i = 0; i < 2; i++) tg_tensor_free(out[i]);
            tg_tensor_free(ta);
            tg_tensor_free(tb);
            tg_tensor_free(tc);
            tg_tensor_free(x);
            tg_fn_free(f);
            tg_module_free(m);
        }
    }
}

/* A state with a '?' extent has no value until set; its shape comes from the tensor. */
static void test_unknown_extent_state(void **state) {
    (void)state;
    tg_module *m = parse("func f(mut h: f64[?], x: f64[]) {\n"
                         "    h <- mul(h, x)\n"
                         "    return sum(h)\n"
                         "}\n");
    tg_fn *f = compile(tg_module_func(m, 0), TG_MODE_VM);
    assert_null(tg_fn_state(f, 0));
    double two = 2.0;
    tg_tensor *x = tg_tensor_from_data(NULL, TG_DT_F64, 0, NULL, &two);
    tg_tensor *out = NULL;
    assert_int_equal(tg_fn_call(f, &x, 1, &out, 1), TG_EINVAL);
    assert_non_null(strstr(tg_last_error(), "state 'h' (f64[?]) has no value"));
    double hv[5] = {1, 2, 3, 4, 5};
    tg_tensor *h = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){5}, hv);
    assert_int_equal(tg_fn_state_set(f, 0, h), TG_OK);
    assert_int_equal(tg_fn_call(f, &x, 1, &out, 1), TG_OK);
    assert_true(tg_tensor_get_f64(out, 0) == 15.0);
    assert_true(tg_tensor_get_f64(tg_fn_state(f, 0), 4) == 10.0);
    tg_tensor_free(h);
    h = tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){2}, hv);
    assert_int_equal(tg_fn_state_set(f, 0, h), TG_OK); /* a new extent */
    assert_int_equal(tg_fn_call_into(f, &x, 1, &out, 1), TG_OK);
    assert_true(tg_tensor_get_f64(out, 0) == 3.0);
    assert_int_equal(tg_tensor_shape(tg_fn_state(f, 0))[0], 2);
    tg_tensor_free(h);
    tg_tensor_free(out);
    tg_tensor_free(x);
    tg_fn_free(f);
    tg_module_free(m);
}

/* A function that only updates state ends with a bare `return` and returns nothing. */
static void test_update_only_function(void **state) {
    (void)state;
    static const char src[] = "func acc(mut s: f32[3], x: f32[3]) {\n"
                              "    s <- add(s, x)\n"
                              "    return\n"
                              "}\n";
    tg_module *m = parse(src);
    char *a = print_module(m);
    assert_non_null(strstr(a, "    return\n}"));
    tg_module *m2 = parse(a);
    char *b = print_module(m2);
    assert_string_equal(a, b);
    assert_int_equal(tg_graph_output_count(tg_module_func(m, 0)), 0);
    for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
        tg_fn *f = compile(tg_module_func(m, 0), MODES[mi]);
        tg_tensor *x = vec_f32(3, (float[]){1, 2, 3});
        for (int k = 0; k < 4; k++) assert_int_equal(tg_fn_call(f, &x, 1, NULL, 0), TG_OK);
        expect_vec(tg_fn_state(f, 0), 3, (float[]){4, 8, 12});
        tg_tensor_free(x);
        tg_fn_free(f);
    }
    /* without an update, a bare return is still an error */
    assert_non_null(strstr(parse_error("func f(x: f32[3]) {\n  return\n}\n"),
                           "s.tg:2:9: expected an expression but found end of line"));
    free(a);
    free(b);
    tg_module_free(m);
    tg_module_free(m2);
}

/* Updates survive clone and the rewrite pipeline. */
static void test_clone_and_optimize_keep_updates(void **state) {
    (void)state;
    tg_module *m = parse(STEP);
    tg_graph *g = tg_module_func(m, 0);
    tg_graph *c = tg_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(tg_graph_verify(c), TG_OK);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(g, NULL, &o), TG_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tg_graph_print(o, f);
    tg_graph_print(c, f);
    fclose(f);
    const char *second = strstr(text, "}\nfunc");
    assert_non_null(second);
    assert_non_null(strstr(text, "W <- "));
    assert_non_null(strstr(second, "W <- "));
    assert_non_null(strstr(second, "n <- "));
    assert_int_equal(tg_graph_output_count(o), 1);
    free(text);
    tg_graph_free(c);
    tg_graph_free(o);
    tg_module_free(m);
}

/* ---- memory over 1,000 steps ---- */

typedef struct counting {
    long allocs; /* allocations and growths so far */
    long live;   /* bytes held */
    long big;    /* allocations of at least `big_at` bytes */
    size_t big_at;
} counting;

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    counting *c = ud;
    if (nsize == 0) {
        if (ptr) c->live -= (long)osize;
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p) return NULL;
    c->allocs++;
    if (nsize >= c->big_at) c->big++;
    c->live += (long)nsize - (ptr ? (long)osize : 0);
    return p;
}

/* A logistic-regression step on a 256x64 batch: after the first call, further calls (with
 * the loss written into a given tensor) allocate no buffer (nothing of a parameter's size),
 * memory stays flat, and the parameters are updated where they live (the state's buffers
 * alternate between two addresses: no copy in or out). */
static void test_training_memory_flat(void **state) {
    (void)state;
    static const char src[] =
        "func step(mut W: f32[64,1], mut b: f32[1], x: f32[256,64], y: f32[256,1]) {\n"
        "    z = add(dot(x, W), b)\n"
        "    loss = mean(sub(softplus(z), mul(y, z)))\n"
        "    gW, gb = grad(loss, W, b)\n"
        "    W <- sub(W, mul(0.5, gW))\n"
        "    b <- sub(b, mul(0.5, gb))\n"
        "    return loss\n"
        "}\n";
    counting c = {.big_at = 64 * 4};
    tg_ctx *ctx = tg_ctx_new(counting_alloc, &c);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(ctx, src, strlen(src), "s.tg", &m), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_func(m, 0), &o, &f), TG_OK);
    tg_tensor *x = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){256, 64});
    tg_tensor *y = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){256, 1});
    float *xd = tg_tensor_data(x), *yd = tg_tensor_data(y);
    uint64_t r = 12345;
    for (int i = 0; i < 256; i++) {
        double s = 0;
        for (int j = 0; j < 64; j++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            xd[i * 64 + j] = (float)((double)(r >> 11) * 0x1p-53 - 0.5);
            s += xd[i * 64 + j] * (j % 3 == 0 ? 1.0 : -0.5);
        }
        yd[i] = s > 0 ? 1.0f : 0.0f;
    }
    tg_tensor *in[2] = {x, y}, *loss = NULL;
    assert_int_equal(tg_fn_call(f, in, 2, &loss, 1), TG_OK);
    double first = tg_tensor_get_f64(loss, 0);
    void *addr[2] = {tg_tensor_data(tg_fn_state(f, 0)), NULL};
    assert_int_equal(tg_fn_call_into(f, in, 2, &loss, 1), TG_OK);
    addr[1] = tg_tensor_data(tg_fn_state(f, 0));
    assert_ptr_not_equal(addr[0], addr[1]);
    long allocs = c.allocs, live = c.live, big = c.big;
    for (int k = 0; k < 1000; k++) {
        assert_int_equal(tg_fn_call_into(f, in, 2, &loss, 1), TG_OK);
        assert_ptr_equal(tg_tensor_data(tg_fn_state(f, 0)), addr[k % 2]);
    }
    print_message("1000 steps: %ld allocations, %ld bytes more, loss %.4f -> %.4f\n",
                  c.allocs - allocs, c.live - live, first, tg_tensor_get_f64(loss, 0));
    /* nothing as large as a parameter; the only allocations left are the headers of
     * view nodes (a tg_tensor struct each, under 256 bytes) */
    assert_int_equal(c.big, big);
    assert_true(c.allocs - allocs <= 2 * 1000);
    assert_int_equal(c.live, live);
    assert_true(tg_tensor_get_f64(loss, 0) < 0.5 * first);
    tg_tensor_free(loss);
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_fn_free(f);
    tg_module_free(m);
    tg_ctx_free(ctx);
    assert_int_equal(c.live, 0); /* nothing leaked */
}

/* Softmax regression (its gradient goes through take_along, whose cotangent is built on
 * `alloc`): no allocation of a parameter's size per step either, and the parameter's two
 * buffers alternate (the update is written where the next call reads it). */
static void test_softmax_step_no_parameter_allocation(void **state) {
    (void)state;
    static const char src[] =
        "func step(mut W: f32[64,10], mut b: f32[10], x: f32[32,64], y: i64[32]) {\n"
        "    lp = log_softmax(add(dot(x, W), b), axis=1)\n"
        "    loss = neg(mean(take_along(lp, expand_dims(y, axis=1), axis=1)))\n"
        "    gW, gb = grad(loss, W, b)\n"
        "    W <- sub(W, mul(0.1, gW))\n"
        "    b <- sub(b, mul(0.1, gb))\n"
        "    return loss\n"
        "}\n";
    counting c = {.big_at = 64 * 10 * 4};
    tg_ctx *ctx = tg_ctx_new(counting_alloc, &c);
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(ctx, src, strlen(src), "s.tg", &m), TG_OK);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_func(m, 0), &o, &f), TG_OK);
    tg_tensor *x = tg_tensor_new(ctx, TG_DT_F32, 2, (int64_t[]){32, 64});
    tg_tensor *y = tg_tensor_new(ctx, TG_DT_I64, 1, (int64_t[]){32});
    float *xd = tg_tensor_data(x);
    for (int i = 0; i < 32 * 64; i++) xd[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < 32; i++) ((int64_t *)tg_tensor_data(y))[i] = i % 10;
    tg_tensor *in[2] = {x, y}, *loss = NULL;
    assert_int_equal(tg_fn_call(f, in, 2, &loss, 1), TG_OK);
    double first = tg_tensor_get_f64(loss, 0);
    void *a0 = tg_tensor_data(tg_fn_state(f, 0));
    long big = c.big, live = c.live;
    for (int k = 0; k < 200; k++) {
        assert_int_equal(tg_fn_call_into(f, in, 2, &loss, 1), TG_OK);
        assert_true((tg_tensor_data(tg_fn_state(f, 0)) == a0) == (k % 2 == 1));
    }
    assert_int_equal(c.big, big);
    assert_int_equal(c.live, live);
    assert_true(tg_tensor_get_f64(loss, 0) < first);
    tg_tensor_free(loss);
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_fn_free(f);
    tg_module_free(m);
    tg_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_fixed_point),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_api_errors),
        cmocka_unit_test(test_steps_every_mode),
        cmocka_unit_test(test_failed_call_is_atomic),
        cmocka_unit_test(test_aliased_updates),
        cmocka_unit_test(test_unknown_extent_state),
        cmocka_unit_test(test_update_only_function),
        cmocka_unit_test(test_clone_and_optimize_keep_updates),
        cmocka_unit_test(test_training_memory_flat),
        cmocka_unit_test(test_softmax_step_no_parameter_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
