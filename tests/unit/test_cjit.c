/* test_cjit.c - the C JIT (src/backend/cjit): code generation, the compiler driver and
 * cache rules, the fallback to the VM, and debug mode.
 *
 * Every test works in its own fresh cache directory (TGRAPH_CACHE_DIR under /tmp), so the
 * user's cache is never touched. Cache rules checked: a hit loads without compiling; two
 * processes compiling the same graph at once both succeed and leave one valid entry; a
 * truncated .so is detected and rebuilt; a directory writable by others is refused; a warm
 * run needs no compiler (TGRAPH_CC=/bin/false); a missing compiler falls back to the VM
 * (or fails with no_fallback) naming the kept source. Emission is deterministic. Results
 * equal the VM's and the reference's on broadcast, strided and negative-stride inputs
 * (inputs broadcast along rows also against the same loops on contiguous copies);
 * fused reductions and BLAS products are emitted and agree on transposed operands. The
 * memory plan shared with the VM keeps a gradient through a `?` extent static.
 * Debug mode (both backends) catches a deliberately wrong kernel and an undeclared write
 * to an input (the TGRAPH_TEST_* hooks of debug.h), naming the node.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cjit/cjit.h"
#include "fault_alloc.h"
#include "ops_testutil.h"

/* ---- helpers ---- */

static char cache_dir[256];

/* A fresh, private cache directory for one test. */
static void fresh_cache(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tgcjit.XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    setenv("TGRAPH_CACHE_DIR", cache_dir, 1);
    unsetenv("TGRAPH_CC");
    unsetenv("TGRAPH_CFLAGS");
    unsetenv("TGRAPH_TEST_BREAK_OP");
    unsetenv("TGRAPH_TEST_CLOBBER_OP");
}

static void remove_cache(void) {
    char cmd[512];
    chmod(cache_dir, 0700);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    assert_int_equal(system(cmd), 0);
}

/* Number of files in the cache with this suffix. */
static int count_files(const char *suffix) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '%s$'", cache_dir, suffix);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    if (fscanf(p, "%d", &n) != 1) n = 0;
    pclose(p);
    return n;
}

/* Path of the one .so of the cache. */
static void the_so(char *buf, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s'/*.so", cache_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(buf, (int)n, p));
    buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

static const char *mlp_text = "func main(x: f64[?,4], w: f64[4,3], b: f64[3]) {\n"
                              "  h = tanh(add(dot(x, w), b))\n"
                              "  y = sum(mul(h, h), axis=1)\n"
                              "  z = where(gt(h, 0.5), exp(neg(h)), sigmoid(h))\n"
                              "  return y, z\n"
                              "}\n";

static tg_tensor *ramp(tg_dtype dt, int nd, const int64_t *shape, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        double v = scale * sin(0.37 * (double)i + 0.1);
        if (dt == TG_DT_F64)
            ((double *)tg_tensor_data(t))[i] = v;
        else if (dt == TG_DT_F32)
            ((float *)tg_tensor_data(t))[i] = (float)v;
        else if (dt == TG_DT_I32)
            ((int32_t *)tg_tensor_data(t))[i] = (int32_t)(v * 1000);
    }
    return t;
}

/* ---- code generation ---- */

static void test_c_matches_vm(void **state) {
    (void)state;
    fresh_cache();
    tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){5, 4}, 2.0),
                        ramp(TG_DT_F64, 2, (int64_t[]){4, 3}, 1.0),
                        ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.5)};
    tg_tensor *c[2] = {0}, *v[2] = {0}, *r[2] = {0};
    assert_int_equal(run_text(mlp_text, TG_MODE_C, 0, in, 3, c, 2), TG_OK);
    assert_int_equal(run_text(mlp_text, TG_MODE_VM, 0, in, 3, v, 2), TG_OK);
    assert_int_equal(run_text(mlp_text, TG_MODE_REFERENCE, 0, in, 3, r, 2), TG_OK);
    for (int i = 0; i < 2; i++) {
        assert_close(c[i], v[i], 1e-12);
        assert_close(c[i], r[i], 1e-12);
        tg_tensor_free(c[i]);
        tg_tensor_free(v[i]);
        tg_tensor_free(r[i]);
    }
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    remove_cache();
}

/* Loops run as generated loops around the step's generated code (emit_scan): two states
 * in reverse, taps, a map (one thread: not the parallel kernel), a stop condition (whose stack
 * nobody reads: a stack of run-time length would make the plan dynamic, run by the VM),
 * and the gradient (a forward loop saving a state, a reverse loop returning a parameter
 * as is). */
static void test_generated_loops(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func step(h: f64[3], s: f64[], x: f64[3], W: f64[3,3]) {\n"
                       "  hn = tanh(add(dot(W, h), x))\n"
                       "  sn = add(s, sum(hn))\n"
                       "  return hn, sn, hn\n"
                       "}\n"
                       "func f(x: f64[3], W: f64[3,3]) {\n"
                       "  y = sum(dot(W, x))\n"
                       "  return y\n"
                       "}\n"
                       "func stopper(h: f64[3], x: f64[3]) {\n"
                       "  hn = add(h, x)\n"
                       "  return hn, hn, gt(sum(hn), 1.5)\n"
                       "}\n"
                       "func ar(x1: f64[3], x3: f64[3], x2: f64[3], e: f64[3]) {\n"
                       "  xn = add(add(mul(0.5, x1), mul(-0.2, x3)), add(mul(0.1, x2), e))\n"
                       "  return xn, sum(xn)\n"
                       "}\n"
                       "func main(xs: f64[7,3], h0: f64[3], W: f64[3,3]) {\n"
                       "  hl, sl, hs = scan(@step, h0, 0.0, xs, W, n_states=2, n_sequences=1, "
                       "reverse=true)\n"
                       "  ys = map(@f, xs, W)\n"
                       "  ul, us = scan(@stopper, h0, xs, n_sequences=1, until=true)\n"
                       "  tl, ts = scan(@ar, broadcast_to(h0, shape=[4, 3]), xs, n_sequences=1, "
                       "taps=[-1, -3, -2])\n"
                       "  l = add(sum(hs), sl)\n"
                       "  gW, gh0 = grad(l, W, h0)\n"
                       "  return hl, sl, hs, ys, ul, gW, gh0, tl, ts\n"
                       "}\n";
    tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){7, 3}, 0.6),
                        ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.3),
                        ramp(TG_DT_F64, 2, (int64_t[]){3, 3}, 0.5)};
    tg_tensor *c[9] = {0}, *r[9] = {0};
    tg_module *m = parse_text(text);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .nthreads = 1, .no_fallback = true);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), &o, &f), TG_OK);
    assert_int_equal(tg_fn_call(f, in, 3, c, 9), TG_OK);
    assert_int_equal(tg_fn_call_into(f, in, 3, c, 9), TG_OK); /* the step's replica again */
    tg_fn_free(f);
    tg_module_free(m);
    assert_int_equal(run_text(text, TG_MODE_REFERENCE, 0, in, 3, r, 9), TG_OK);
    for (int i = 0; i < 9; i++) {
        assert_int_equal(tg_tensor_size(c[i]), tg_tensor_size(r[i]));
        assert_close(c[i], r[i], 1e-12);
        tg_tensor_free(c[i]);
        tg_tensor_free(r[i]);
    }
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -l 'rt->scan_begin(rt, i, &L)' '%s'/*.c | wc -l", cache_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    if (fscanf(p, "%d", &n) != 1) n = 0;
    pclose(p);
    assert_true(n >= 1);
    remove_cache();
}

/* Transposed, negative-stride and broadcast inputs; integers that wrap; bool results. */
static void test_layouts_and_dtypes(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(a: f32[3,4], b: f32[4], k: i32[3,4]) {\n"
                       "  p = mul(add(a, b), 3)\n"
                       "  q = mul(k, 2000000)\n"
                       "  r = lt(a, b)\n"
                       "  s = int_div(k, 7)\n"
                       "  return p, q, r, s\n"
                       "}\n";
    tg_tensor *base = ramp(TG_DT_F32, 2, (int64_t[]){4, 3}, 3.0);
    /* a = base transposed (strides 1, 3) */
    tg_tensor *a = tg_tensor_view(base, 2, (int64_t[]){3, 4}, (int64_t[]){1, 3}, 0);
    tg_tensor *bb = ramp(TG_DT_F32, 1, (int64_t[]){4}, 1.0);
    tg_tensor *b = tg_tensor_view(bb, 1, (int64_t[]){4}, (int64_t[]){-1}, 3); /* reversed */
    tg_tensor *k = ramp(TG_DT_I32, 2, (int64_t[]){3, 4}, 5000.0);
    tg_tensor *in[3] = {a, b, k};
    check_against_reference(text, TG_MODE_C, in, 3, 4, 0.0);
    tg_tensor_free(a);
    tg_tensor_free(base);
    tg_tensor_free(b);
    tg_tensor_free(bb);
    tg_tensor_free(k);
    remove_cache();
}

/* Loops over inputs broadcast along the output's rows: a [K, 1] input (a1 = 1) or a [K, M]
 * view of stride 0 (a1 = ?), one row for all rows, transposed, strided and reversed
 * inputs, a [K, 1, 1] and a [1, P, 1] over [K, P, L], and an unfused op. */
static const char *bcast_text = "func main(a: %s[?, %s], b: %s[?, ?], r: %s[?, ?], qt: %s[?, ?],\n"
                                "          ws: %s[?, ?], u: %s[?, ?], a3: %s[?, ?, ?],\n"
                                "          v: %s[?, ?, ?], d3: %s[?, ?, ?]) {\n"
                                "  y1 = sub(mul(a, r), div(qt, a))\n"
                                "  y2 = maximum(add(a, b), ws)\n"
                                "  y3 = where(gt(u, 0.0), sub(u, a), mul(b, u))\n"
                                "  y4 = add(mul(a3, v), d3)\n"
                                "  y5 = mul(exp(mul(a, r)), tanh(add(r, a)))\n"
                                "  y6 = mul(a, b)\n"
                                "  return y1, y2, y3, y4, y5, y6\n"
                                "}\n";

/* The generated loops read broadcast inputs through blocks filled with their value (not
 * a loop that calls vector math, y5, which keeps its scalar bits): every output equals the
 * reference's (y5 within 1e-6 in f32, 1e-12 in f64) and, but y5, bit for bit the same
 * code's on contiguous copies of the inputs, for K = 1, 2, 3 rows of M = 1 ... 1000
 * (around the fill's 16 elements and the 256 of a block), f32 and f64. */
static void test_broadcast_rows(void **state) {
    (void)state;
    fresh_cache();
    static const int64_t Ms[] = {1, 7, 16, 17, 255, 257, 1000};
    const int64_t P = 3;
    for (int gi = 0; gi < 4; gi++) {
        tg_dtype dt = gi < 2 ? TG_DT_F32 : TG_DT_F64;
        bool one_col = gi % 2 == 1;
        const char *t = tg_dtype_name(dt);
        char src[1024];
        snprintf(src, sizeof src, bcast_text, t, one_col ? "1" : "?", t, t, t, t, t, t, t, t, t);
        for (size_t c = 0; c < 3 * sizeof Ms / sizeof Ms[0]; c++) {
            int64_t K = 1 + (int64_t)c % 3, M = Ms[c / 3];
            tg_tensor *own[8] = {
                ramp(dt, 1, &K, 2.0),
                ramp(dt, 1, &M, 1.5),
                ramp(dt, 2, (int64_t[]){K, M}, 3.0),
                ramp(dt, 2, (int64_t[]){M, K}, 1.0),
                ramp(dt, 2, (int64_t[]){K, 2 * M}, 2.5),
                ramp(dt, 2, (int64_t[]){K, M}, 0.5),
                ramp(dt, 3, (int64_t[]){K, P, M}, 1.0),
                ramp(dt, 1, &P, 4.0),
            };
            tg_tensor *in[9] = {
                one_col ? tg_tensor_view(own[0], 2, (int64_t[]){K, 1}, NULL, 0)
                        : tg_tensor_view(own[0], 2, (int64_t[]){K, M}, (int64_t[]){1, 0}, 0),
                tg_tensor_view(own[1], 2, (int64_t[]){K, M}, (int64_t[]){0, 1}, 0),
                tg_tensor_view(own[2], 2, (int64_t[]){K, M}, NULL, 0),
                tg_tensor_view(own[3], 2, (int64_t[]){K, M}, (int64_t[]){1, K}, 0),
                tg_tensor_view(own[4], 2, (int64_t[]){K, M}, (int64_t[]){2 * M, 2}, 0),
                tg_tensor_view(own[5], 2, (int64_t[]){K, M}, (int64_t[]){-M, 1}, (K - 1) * M),
                tg_tensor_view(own[0], 3, (int64_t[]){K, P, M}, (int64_t[]){1, 0, 0}, 0),
                tg_tensor_view(own[6], 3, (int64_t[]){K, P, M}, NULL, 0),
                tg_tensor_view(own[7], 3, (int64_t[]){K, P, M}, (int64_t[]){0, 1, 0}, 0),
            };
            tg_tensor *dup[9];
            for (int i = 0; i < 9; i++) dup[i] = tg_tensor_dup(in[i]);
            tg_tensor *r[6] = {0}, *x[6] = {0}, *y[6] = {0};
            assert_int_equal(run_text(src, TG_MODE_REFERENCE, 0, in, 9, r, 6), TG_OK);
            assert_int_equal(run_text(src, TG_MODE_C, 0, in, 9, x, 6), TG_OK);
            assert_int_equal(run_text(src, TG_MODE_C, 0, dup, 9, y, 6), TG_OK);
            for (int o = 0; o < 6; o++) {
                assert_close(x[o], r[o], o == 4 ? (dt == TG_DT_F32 ? 1e-6 : 1e-12) : 0.0);
                if (o != 4) assert_close(x[o], y[o], 0.0);
                tg_tensor_free(r[o]);
                tg_tensor_free(x[o]);
                tg_tensor_free(y[o]);
            }
            for (int i = 0; i < 9; i++) {
                tg_tensor_free(in[i]);
                tg_tensor_free(dup[i]);
            }
            for (int i = 0; i < 8; i++) tg_tensor_free(own[i]);
        }
    }
    /* the loops took the variant for broadcast inputs */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -l 'r0 = b0;' '%s'/*.c >/dev/null", cache_dir);
    assert_int_equal(system(cmd), 0);
    remove_cache();
}

/* Elementwise and fused nodes get generated code; the same graph gives the same source. */
static void test_emission(void **state) {
    (void)state;
    fresh_cache();
    tg_module *m = parse_text(mlp_text);
    tg_graph *g = tg_module_find(m, "main");
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(g, NULL, &o), TG_OK);
    int n = 0;
    tg_node **order = tg_ir_toposort(o, &n);
    assert_non_null(order);
    uint8_t how1[64], how2[64];
    assert_true(n < 64);
    tg_cj_str s1 = {.ctx = o->ctx}, s2 = {.ctx = o->ctx};
    tg_cj_emit_prelude(&s1);
    tg_cj_emit_prelude(&s2);
    assert_int_equal(tg_cj_emit_graph(&s1, o, order, n, 0, how1), TG_OK);
    assert_int_equal(tg_cj_emit_graph(&s2, o, order, n, 0, how2), TG_OK);
    assert_string_equal(s1.p, s2.p);
    assert_memory_equal(how1, how2, (size_t)n);
    int emitted = 0;
    for (int i = 0; i < n; i++) emitted += how1[i] == TG_CJ_EW;
    assert_true(emitted >= 1);
    assert_non_null(strstr(s1.p, "int tg_cj_0(tg_rt *rt)"));
    assert_null(strstr(s1.p, "0x7f")); /* no addresses */
    /* a clone (other addresses) emits the same text */
    tg_graph *o2 = tg_graph_clone(o);
    int n2 = 0;
    tg_node **order2 = tg_ir_toposort(o2, &n2);
    tg_cj_str s3 = {.ctx = o->ctx};
    tg_cj_emit_prelude(&s3);
    assert_int_equal(tg_cj_emit_graph(&s3, o2, order2, n2, 0, how2), TG_OK);
    assert_string_equal(s1.p, s3.p);
    tg_cj_str_free(&s1);
    tg_cj_str_free(&s2);
    tg_cj_str_free(&s3);
    tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
    tg_mem_free(o2->ctx, order2, sizeof *order2 * (size_t)(o2->nodes.n + 1));
    tg_graph_free(o2);
    tg_graph_free(o);
    tg_module_free(m);
    remove_cache();
}

/* Fused reductions and BLAS products get generated code (rt->red, rt->gemm, rt->gemv), and
 * agree with the reference on contiguous and transposed operands. */
static void test_reductions_and_blas(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f64[?,6], w: f64[6,5], v: f64[6]) {\n"
                       "  m = max(x, axis=1, keepdims=true)\n"
                       "  e = sum(exp(sub(x, m)), axis=1)\n"
                       "  q = mean(mul(x, x), axis=[0,1])\n"
                       "  d = dot(x, w)\n"
                       "  g = dot(x, v)\n"
                       "  return e, q, d, g\n"
                       "}\n";
    tg_module *m = parse_text(text);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    int n = 0;
    tg_node **order = tg_ir_toposort(o, &n);
    uint8_t how[64];
    assert_true(n < 64);
    tg_cj_str src = {.ctx = o->ctx};
    tg_cj_emit_prelude(&src);
    assert_int_equal(tg_cj_emit_graph(&src, o, order, n, 0, how), TG_OK);
    assert_non_null(strstr(src.p, "{.red = g0_n"));
    assert_non_null(strstr(src.p, "rt->gemm(1, "));
    assert_non_null(strstr(src.p, "rt->gemv(1, "));
    tg_cj_str_free(&src);
    tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
    tg_graph_free(o);
    tg_module_free(m);
    /* contiguous x, then x as the transpose of a [6,7] tensor */
    tg_tensor *base = ramp(TG_DT_F64, 2, (int64_t[]){6, 7}, 3.0);
    tg_tensor *xs[2] = {ramp(TG_DT_F64, 2, (int64_t[]){7, 6}, 3.0),
                        tg_tensor_view(base, 2, (int64_t[]){7, 6}, (int64_t[]){1, 7}, 0)};
    for (int t = 0; t < 2; t++) {
        tg_tensor *in[3] = {xs[t], ramp(TG_DT_F64, 2, (int64_t[]){6, 5}, 1.0),
                            ramp(TG_DT_F64, 1, (int64_t[]){6}, 1.0)};
        check_against_reference(text, TG_MODE_C, in, 3, 4, 1e-12);
        tg_tensor_free(in[1]);
        tg_tensor_free(in[2]);
        tg_tensor_free(xs[t]);
    }
    tg_tensor_free(base);
    remove_cache();
}

/* Instructions whose code is the same share one generated function (BLAS calls with other
 * alpha, views of other values), and the graph's function is a table of steps: the source
 * grows with the distinct code, not with the node count. Results still match the reference. */
static void test_shared_functions(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f64[4,6], w: f64[6,6]) {\n"
                       "  a = tanh(add(mul(dot(x, w), 2.0), x))\n"
                       "  b = tanh(add(mul(dot(a, w), 3.0), a))\n"
                       "  c = tanh(add(mul(dot(b, w), 0.5), b))\n"
                       "  t = transpose(reshape(c, shape=[6,4]))\n"
                       "  u = transpose(reshape(b, shape=[6,4]))\n"
                       "  return add(t, u), a\n"
                       "}\n";
    tg_module *m = parse_text(text);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    int n = 0;
    tg_node **order = tg_ir_toposort(o, &n);
    uint8_t how[64];
    assert_true(n < 64);
    tg_cj_str src = {.ctx = o->ctx};
    assert_int_equal(tg_cj_emit_graph(&src, o, order, n, 0, how), TG_OK);
    int calls = 0;
    for (int i = 0; i < n; i++) calls += how[i] == TG_CJ_CALL;
    assert_true(calls >= 7); /* 3 gemm, 2 reshape, 2 transpose */
    static const char *const once[] = {"/* gemm -> f64 */", "/* tanh -> f64 */", "/* reshape */",
                                       "/* transpose */"};
    for (size_t k = 0; k < sizeof once / sizeof once[0]; k++) {
        const char *p = strstr(src.p, once[k]);
        assert_non_null(p);
        assert_null(strstr(p + 1, once[k])); /* one function for all of them */
    }
    assert_non_null(strstr(src.p, "{.call = g0_n0}}, /* 2 gemm */"));
    assert_non_null(strstr(src.p, "0x1.8p+1")); /* alpha 3.0 among the numbers */
    assert_non_null(strstr(src.p, "return tg_rt_run(rt, g0_steps, "));
    tg_cj_str_free(&src);
    tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
    tg_graph_free(o);
    tg_module_free(m);
    tg_tensor *in[2] = {ramp(TG_DT_F64, 2, (int64_t[]){4, 6}, 1.0),
                        ramp(TG_DT_F64, 2, (int64_t[]){6, 6}, 0.5)};
    check_against_reference(text, TG_MODE_C, in, 2, 2, 1e-12);
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]);
    remove_cache();
}

/* Fused loops that differ only by their constants share one generated function (the
 * constants are its argument, from a table beside the steps), for float and integer
 * dtypes, and each still gives the reference's results. */
static void test_loops_share_constants(void **state) {
    (void)state;
    fresh_cache();
    static const char *const texts[] = {
        "func main(x: f32[5,6]) {\n"
        "  a = add(mul(x, 3.0), 1.5)\n"
        "  b = add(mul(transpose(a), 0.1), -2.75)\n"
        "  return a, b\n"
        "}\n",
        "func main(x: f64[5,6]) {\n"
        "  a = add(mul(x, 3.0), 1.5)\n"
        "  b = add(mul(transpose(a), 0.1), -2.75)\n"
        "  return a, b\n"
        "}\n",
        "func main(x: i32[5,6]) {\n"
        "  a = add(mul(x, 3), 7)\n"
        "  b = add(mul(transpose(a), -5), 2147483647)\n"
        "  return a, b\n"
        "}\n",
    };
    static const tg_dtype dts[] = {TG_DT_F32, TG_DT_F64, TG_DT_I32};
    for (int t = 0; t < 3; t++) {
        tg_module *m = parse_text(texts[t]);
        tg_graph *o = NULL;
        assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
        int n = 0;
        tg_node **order = tg_ir_toposort(o, &n);
        uint8_t how[64];
        assert_true(n < 64);
        tg_cj_str src = {.ctx = o->ctx};
        assert_int_equal(tg_cj_emit_graph(&src, o, order, n, 0, how), TG_OK);
        /* two loop steps, one function: the first names it, the second reuses it */
        const char *first = strstr(src.p, "{.ew = g0_n");
        assert_non_null(first);
        const char *second = strstr(first + 1, "{.ew = g0_n");
        assert_non_null(second);
        assert_int_equal(strcspn(first, "}"), strcspn(second, "}"));
        assert_memory_equal(first, second, strcspn(first, "}"));
        const char *fn = strstr(src.p, "/* fused, ");
        assert_non_null(fn);
        assert_null(strstr(fn + 1, "/* fused, "));
        assert_non_null(strstr(src.p, "static const tg_rt_num g0_nums[] = {"));
        assert_non_null(strstr(fn, "kc0 = ")); /* copied into a local before the loop */
        tg_cj_str_free(&src);
        tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
        tg_graph_free(o);
        tg_module_free(m);
        tg_tensor *in[1] = {ramp(dts[t], 2, (int64_t[]){5, 6}, 2.0)};
        tg_tensor *c[2] = {0}, *r[2] = {0};
        assert_int_equal(run_text(texts[t], TG_MODE_C, 0, in, 1, c, 2), TG_OK);
        assert_int_equal(run_text(texts[t], TG_MODE_REFERENCE, 0, in, 1, r, 2), TG_OK);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(tg_tensor_dtype(c[i]), dts[t]);
            assert_close(c[i], r[i], 0.0);
            tg_tensor_free(c[i]);
            tg_tensor_free(r[i]);
        }
        tg_tensor_free(in[0]);
    }
    remove_cache();
}

/* gemm with one row or one column of result runs as a gemv: every operand layout. */
static void test_gemm_as_gemv(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(u: f64[1,6], x: f64[7,6], w: f64[6,5], k: f64[6,1]) {\n"
                       "  return dot(u, w), dot(x, k), dot(u, k)\n"
                       "}\n";
    tg_tensor *bu = ramp(TG_DT_F64, 2, (int64_t[]){6, 1}, 1.0);
    tg_tensor *bw = ramp(TG_DT_F64, 2, (int64_t[]){5, 6}, 2.0);
    tg_tensor *bk = ramp(TG_DT_F64, 2, (int64_t[]){1, 6}, 3.0);
    tg_tensor *bx = ramp(TG_DT_F64, 2, (int64_t[]){6, 7}, 4.0);
    for (int t = 0; t < 2; t++) { /* contiguous operands, then transposed views */
        tg_tensor *in[4];
        if (t == 0) {
            in[0] = ramp(TG_DT_F64, 2, (int64_t[]){1, 6}, 1.0);
            in[1] = ramp(TG_DT_F64, 2, (int64_t[]){7, 6}, 4.0);
            in[2] = ramp(TG_DT_F64, 2, (int64_t[]){6, 5}, 2.0);
            in[3] = ramp(TG_DT_F64, 2, (int64_t[]){6, 1}, 3.0);
        } else {
            in[0] = tg_tensor_view(bu, 2, (int64_t[]){1, 6}, (int64_t[]){1, 1}, 0);
            in[1] = tg_tensor_view(bx, 2, (int64_t[]){7, 6}, (int64_t[]){1, 7}, 0);
            in[2] = tg_tensor_view(bw, 2, (int64_t[]){6, 5}, (int64_t[]){1, 6}, 0);
            in[3] = tg_tensor_view(bk, 2, (int64_t[]){6, 1}, (int64_t[]){1, 6}, 0);
        }
        check_against_reference(text, TG_MODE_C, in, 4, 3, 1e-12);
        for (int i = 0; i < 4; i++) tg_tensor_free(in[i]);
    }
    tg_tensor_free(bu);
    tg_tensor_free(bw);
    tg_tensor_free(bk);
    tg_tensor_free(bx);
    remove_cache();
}

/* Views are made by generated code (pointer and stride arithmetic), also of strided
 * inputs, with negative steps, integer indices, new and dropped axes. */
static void test_views(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f64[4,5]) {\n"
                       "  a = x[1:, ::-2]\n"
                       "  b = transpose(x)\n"
                       "  c = expand_dims(x, axis=[0, -1])\n"
                       "  d = squeeze(expand_dims(x, axis=[1]), axis=[1])\n"
                       "  e = broadcast_to(x[-1], shape=[3, 5])\n"
                       "  f = reshape(b, shape=[20])\n"
                       "  return mul(a, 2), b, c, d, add(e, 1), f, x[2, -2:0:-1]\n"
                       "}\n";
    tg_module *m = parse_text(text);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    int n = 0;
    tg_node **order = tg_ir_toposort(o, &n);
    uint8_t how[64];
    assert_true(n < 64);
    tg_cj_str src = {.ctx = o->ctx};
    tg_cj_emit_prelude(&src);
    assert_int_equal(tg_cj_emit_graph(&src, o, order, n, 0, how), TG_OK);
    assert_non_null(strstr(src.p, "return rt->view(rt, "));
    assert_non_null(strstr(src.p, "/* slice */"));
    assert_non_null(strstr(src.p, "/* transpose */"));
    tg_cj_str_free(&src);
    tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
    tg_graph_free(o);
    tg_module_free(m);
    tg_tensor *base = ramp(TG_DT_F64, 2, (int64_t[]){5, 8}, 3.0);
    tg_tensor *xs[2] = {ramp(TG_DT_F64, 2, (int64_t[]){4, 5}, 2.0), /* then a strided view */
                        tg_tensor_view(base, 2, (int64_t[]){4, 5}, (int64_t[]){2, -8}, 32)};
    for (int t = 0; t < 2; t++) {
        tg_tensor *c[7] = {0}, *r[7] = {0};
        assert_int_equal(run_text(text, TG_MODE_C, 0, &xs[t], 1, c, 7), TG_OK);
        assert_int_equal(run_text(text, TG_MODE_REFERENCE, 0, &xs[t], 1, r, 7), TG_OK);
        for (int i = 0; i < 7; i++) {
            assert_int_equal(tg_tensor_ndim(c[i]), tg_tensor_ndim(r[i]));
            assert_memory_equal(tg_tensor_shape(c[i]), tg_tensor_shape(r[i]),
                                sizeof(int64_t) * (size_t)tg_tensor_ndim(r[i]));
            assert_close(c[i], r[i], 0.0);
            tg_tensor_free(c[i]);
            tg_tensor_free(r[i]);
        }
        tg_tensor_free(xs[t]);
    }
    tg_tensor_free(base);
    remove_cache();
}

/* A source split into units (TGRAPH_CC_SPLIT: functions per unit) computes what the one-unit
 * source computes, bit for bit: every kind of generated function (elementwise and fused
 * loops, a fused reduction, BLAS calls, views) in units of its own, declared and called
 * from unit 0's table. The split is deterministic, unit 0 alone holds tg_cj_abi, and a
 * small graph stays one unit, the text of tg_cj_emit_graph. */
static const char *split_text = "func main(x: f64[?,6], w: f64[6,5], v: f64[6]) {\n"
                                "  m = max(x, axis=1, keepdims=true)\n"
                                "  e = sum(exp(sub(x, m)), axis=1)\n"
                                "  d = tanh(dot(x, w))\n"
                                "  g = dot(x, v)\n"
                                "  t = transpose(x)[::-1]\n"
                                "  return e, d, sigmoid(g), mul(t, 2)\n"
                                "}\n";

static void test_split_units(void **state) {
    (void)state;
    fresh_cache();
    tg_module *m = parse_text(split_text);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    int n = 0;
    tg_node **order = tg_ir_toposort(o, &n);
    uint8_t how[64];
    assert_true(n < 64);
    tg_cj_str one = {.ctx = o->ctx}, u1[TG_CJ_MAX_UNITS], u2[TG_CJ_MAX_UNITS];
    tg_cj_emit_prelude(&one);
    assert_int_equal(tg_cj_emit_graph(&one, o, order, n, 0, how), TG_OK);
    int n1 = 0, n2 = 0, nfn = 0;
    for (const char *p = one.p; (p = strstr(p, "\nTG_RT_FN ")); p++) nfn++;
    assert_true(nfn >= 4);
    /* a bound above the count: one unit, the same text */
    assert_int_equal(tg_cj_emit_units(o->ctx, o, order, n, how, nfn, u1, &n1), TG_OK);
    assert_int_equal(n1, 1);
    assert_string_equal(u1[0].p, one.p);
    tg_cj_str_free(&u1[0]);
    /* one function per unit, twice: the same units */
    assert_int_equal(tg_cj_emit_units(o->ctx, o, order, n, how, 1, u1, &n1), TG_OK);
    assert_int_equal(tg_cj_emit_units(o->ctx, o, order, n, how, 1, u2, &n2), TG_OK);
    assert_int_equal(n1, nfn + 1);
    assert_int_equal(n2, n1);
    for (int u = 0; u < n1; u++) {
        assert_string_equal(u1[u].p, u2[u].p);
        assert_true(strncmp(u1[u].p, "#define TG_RT_SPLIT 1\n", 22) == 0);
        assert_true((strstr(u1[u].p, "const int tg_cj_abi") != NULL) == (u == 0));
        assert_true((strstr(u1[u].p, "int tg_cj_0(tg_rt *rt)") != NULL) == (u == 0));
        if (u > 0) assert_non_null(strstr(u1[u].p, "\nTG_RT_FN "));
        tg_cj_str_free(&u1[u]);
        tg_cj_str_free(&u2[u]);
    }
    /* three functions per unit: fewer units */
    assert_int_equal(tg_cj_emit_units(o->ctx, o, order, n, how, 3, u1, &n1), TG_OK);
    assert_int_equal(n1, 1 + (nfn + 2) / 3);
    for (int u = 0; u < n1; u++) tg_cj_str_free(&u1[u]);
    tg_cj_str_free(&one);
    tg_mem_free(o->ctx, order, sizeof *order * (size_t)(o->nodes.n + 1));
    tg_graph_free(o);
    tg_module_free(m);

    /* compiled and run: the split (1 and 2 functions per unit) against one unit */
    tg_tensor *base = ramp(TG_DT_F64, 2, (int64_t[]){6, 7}, 3.0);
    tg_tensor *in[3] = {tg_tensor_view(base, 2, (int64_t[]){7, 6}, (int64_t[]){1, 7}, 0),
                        ramp(TG_DT_F64, 2, (int64_t[]){6, 5}, 1.0),
                        ramp(TG_DT_F64, 1, (int64_t[]){6}, 1.0)};
    tg_tensor *ref[4] = {0}, *c[4] = {0};
    setenv("TGRAPH_CC_SPLIT", "0", 1);
    assert_int_equal(run_text(split_text, TG_MODE_C, 0, in, 3, ref, 4), TG_OK);
    assert_int_equal(count_files("\\.so"), 1);
    assert_int_equal(count_files("\\.1\\.c"), 0);
    const char *bounds[] = {"1", "2"};
    for (int b = 0; b < 2; b++) {
        setenv("TGRAPH_CC_SPLIT", bounds[b], 1);
        for (int rep = 0; rep < 2; rep++) { /* cold, then warm */
            assert_int_equal(run_text(split_text, TG_MODE_C, 0, in, 3, c, 4), TG_OK);
            assert_int_equal(count_files("\\.so"), 2 + b);
            for (int i = 0; i < 4; i++) {
                assert_close(c[i], ref[i], 0.0);
                tg_tensor_free(c[i]);
            }
        }
    }
    assert_int_equal(count_files("\\.1\\.c"), 2); /* unit 1 of each split entry, kept */
    char last[32]; /* one function per unit: units 1..nfn; two: fewer */
    snprintf(last, sizeof last, "\\.%d\\.c", nfn);
    assert_int_equal(count_files(last), 1);
    assert_int_equal(count_files("tmp\\..*"), 0);
    /* a bad bound is an error naming the variable */
    setenv("TGRAPH_CC_SPLIT", "many", 1);
    assert_int_equal(run_text(split_text, TG_MODE_C, 0, in, 3, c, 4), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "TGRAPH_CC_SPLIT='many'"));
    unsetenv("TGRAPH_CC_SPLIT");
    for (int i = 0; i < 4; i++) tg_tensor_free(ref[i]);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_tensor_free(base);
    /* tgraph cache --clear removes the units' sources too */
    int removed = 0;
    assert_int_equal(tg_cache_clear(&removed), TG_OK);
    assert_int_equal(count_files("\\.c"), 0);
    remove_cache();
}

/* A gradient through a `?` extent (shape arithmetic feeding alloc) keeps a static plan:
 * the shared plan evaluates the shape at plan time, so the C JIT does not fall back to the
 * VM, for every row count, and agrees with the reference. A shape that depends on values
 * still falls back. */
static void test_shape_arithmetic_planned(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f64[?, 5], W: f64[5, 3]) {\n"
                       "  h = tanh(dot(x, W))\n"
                       "  l = mean(sum(mul(h, h), axis=[1]))\n"
                       "  gW = grad(l, W)\n"
                       "  return l, gW\n"
                       "}\n";
    tg_module *m = parse_text(text);
    tg_graph *o = NULL;
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    tg_compile_opts opts = TG_COMPILE_OPTS(.nthreads = 1);
    tg_cj *cj = NULL;
    assert_int_equal(tg_cj_new(o, &opts, &cj), TG_OK);
    tg_tensor *W = ramp(TG_DT_F64, 2, (int64_t[]){5, 3}, 0.7);
    for (int64_t rows = 1; rows < 200; rows = rows * 4 + 3) {
        tg_tensor *x = ramp(TG_DT_F64, 2, (int64_t[]){rows, 5}, 1.3);
        tg_tensor *in[2] = {x, W}, *want[2] = {NULL, NULL}, *got[2] = {NULL, NULL};
        assert_int_equal(run_text(text, TG_MODE_REFERENCE, 0, in, 2, want, 2), TG_OK);
        assert_int_equal(tg_cj_call(cj, in, 2, got, 2, false), TG_OK);
        for (int k = 0; k < 2; k++) {
            assert_close(got[k], want[k], 1e-12);
            tg_tensor_free(want[k]);
            tg_tensor_free(got[k]);
        }
        tg_cj_stats st;
        tg_cj_get_stats(cj, &st);
        assert_false(st.dynamic);
        assert_false(st.vm);
        assert_true(st.nplanned > 0);
        tg_tensor_free(x);
    }
    tg_tensor_free(W);
    tg_cj_free(cj);
    tg_graph_free(o);
    tg_module_free(m);
    /* a shape that depends on values (mask_select) still runs on the VM */
    const char *dyn = "func main(x: f64[?], k: bool[?]) {\n"
                      "  s = mask_select(x, k)\n"
                      "  return mul(s, sum(s))\n"
                      "}\n";
    m = parse_text(dyn);
    assert_int_equal(tg_graph_optimize(tg_module_find(m, "main"), NULL, &o), TG_OK);
    assert_int_equal(tg_cj_new(o, &opts, &cj), TG_OK);
    int64_t n = 7;
    tg_tensor *in[2] = {ramp(TG_DT_F64, 1, &n, 1.0), tg_tensor_new(NULL, TG_DT_BOOL, 1, &n)};
    for (int64_t i = 0; i < n; i++) ((uint8_t *)tg_tensor_data(in[1]))[i] = (uint8_t)(i % 3 != 0);
    tg_tensor *want = NULL, *got = NULL;
    assert_int_equal(run_text(dyn, TG_MODE_REFERENCE, 0, in, 2, &want, 1), TG_OK);
    assert_int_equal(tg_cj_call(cj, in, 2, &got, 1, false), TG_OK);
    assert_close(got, want, 1e-12);
    tg_cj_stats st;
    tg_cj_get_stats(cj, &st);
    assert_true(st.dynamic);
    assert_true(st.vm);
    tg_tensor_free(want);
    tg_tensor_free(got);
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_cj_free(cj);
    tg_graph_free(o);
    tg_module_free(m);
    remove_cache();
}

/* ---- the cache ---- */

static const char *small_src = "int tg_cj_0(void) { return 0; }\n";

/* A unit with the runtime prelude (freed with tg_cj_str_free). */
static tg_cj_str unit_source(const char *extra) {
    tg_cj_str s = {.ctx = tg_ctx_default()};
    tg_cj_emit_prelude(&s);
    tg_cj_str_printf(&s, "%s%s", small_src, extra);
    assert_false(s.oom);
    return s;
}

static void test_hit_and_truncated(void **state) {
    (void)state;
    fresh_cache();
    tg_cj_str u = unit_source("/* a */\n");
    const char *src = u.p;
    size_t len = u.n;
    tg_ctx *ctx = tg_ctx_default();
    tg_cj_lib lib;
    assert_int_equal(tg_cj_build(ctx, src, len, &lib), TG_OK);
    assert_true(lib.compiled);
    tg_cj_lib_close(&lib);
    assert_int_equal(tg_cj_build(ctx, src, len, &lib), TG_OK);
    assert_false(lib.compiled); /* a hit: loaded without compiling */
    tg_cj_lib_close(&lib);
    assert_int_equal(count_files(".so"), 1);
    assert_int_equal(count_files(".c"), 1);
    /* truncate the .so: detected, rebuilt */
    char so[1024];
    the_so(so, sizeof so);
    struct stat sb;
    assert_int_equal(stat(so, &sb), 0);
    assert_int_equal(truncate(so, sb.st_size / 2), 0);
    assert_int_equal(tg_cj_build(ctx, src, len, &lib), TG_OK);
    assert_true(lib.compiled);
    tg_cj_lib_close(&lib);
    /* a corrupted byte in the middle: detected too */
    FILE *f = fopen(so, "r+b");
    assert_non_null(f);
    fseek(f, 100, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    assert_int_equal(tg_cj_build(ctx, src, len, &lib), TG_OK);
    assert_true(lib.compiled);
    tg_cj_lib_close(&lib);
    assert_int_equal(count_files(".so"), 1);
    assert_int_equal(count_files("tmp"), 0); /* no temporary file left */
    tg_cj_str_free(&u);
    remove_cache();
}

static void test_two_processes(void **state) {
    (void)state;
    fresh_cache();
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){5, 4}, 2.0),
                                ramp(TG_DT_F64, 2, (int64_t[]){4, 3}, 1.0),
                                ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.5)};
            tg_tensor *c[2] = {0};
            tg_module *m = NULL;
            if (tg_module_parse(NULL, mlp_text, strlen(mlp_text), "t.tg", &m) != TG_OK) _exit(3);
            tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .no_fallback = true);
            tg_fn *f = NULL;
            if (tg_graph_compile(tg_module_find(m, "main"), &o, &f) != TG_OK) _exit(1);
            if (tg_fn_call(f, in, 3, c, 2) != TG_OK) _exit(2);
            _exit(0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(count_files(".so"), 1);
    assert_int_equal(count_files("tmp"), 0);
    /* the entry is valid: this process loads it without compiling (same source) */
    setenv("TGRAPH_CC", "/bin/false", 1);
    tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){5, 4}, 2.0),
                        ramp(TG_DT_F64, 2, (int64_t[]){4, 3}, 1.0),
                        ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.5)};
    tg_tensor *c[2] = {0};
    assert_int_equal(run_text(mlp_text, TG_MODE_C, 0, in, 3, c, 2), TG_OK);
    for (int i = 0; i < 2; i++) tg_tensor_free(c[i]);
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    remove_cache();
}

static void test_warm_needs_no_compiler(void **state) {
    (void)state;
    fresh_cache();
    tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){2, 4}, 2.0),
                        ramp(TG_DT_F64, 2, (int64_t[]){4, 3}, 1.0),
                        ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.5)};
    tg_tensor *c[2] = {0};
    assert_int_equal(run_text(mlp_text, TG_MODE_C, 0, in, 3, c, 2), TG_OK); /* cold */
    for (int i = 0; i < 2; i++) tg_tensor_free(c[i]);
    setenv("TGRAPH_CC", "/bin/false", 1);
    assert_int_equal(run_text(mlp_text, TG_MODE_C, 0, in, 3, c, 2), TG_OK); /* warm */
    for (int i = 0; i < 2; i++) tg_tensor_free(c[i]);
    /* another graph needs the compiler: it fails, naming the kept source */
    const char *other = "func main(x: f64[?,4], w: f64[4,3], b: f64[3]) {\n"
                        "  return exp(x)\n}\n";
    tg_tensor *c1[1] = {0};
    assert_int_equal(run_text(other, TG_MODE_C, 0, in, 3, c1, 1), TG_ECHECK);
    const char *msg = tg_last_error();
    assert_non_null(strstr(msg, "/bin/false"));
    const char *kept = strstr(msg, "kept in ");
    assert_non_null(kept);
    char path[1024];
    snprintf(path, sizeof path, "%s", kept + 8);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0); /* the source is there */
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    remove_cache();
}

static void test_fallback_to_vm(void **state) {
    (void)state;
    fresh_cache();
    setenv("TGRAPH_CC", "/nonexistent/cc", 1);
    tg_module *m = parse_text(mlp_text);
    tg_graph *g = tg_module_find(m, "main");
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(g, &o, &f), TG_OK); /* the VM, after a warning */
    tg_tensor *in[3] = {ramp(TG_DT_F64, 2, (int64_t[]){2, 4}, 2.0),
                        ramp(TG_DT_F64, 2, (int64_t[]){4, 3}, 1.0),
                        ramp(TG_DT_F64, 1, (int64_t[]){3}, 0.5)};
    tg_tensor *c[2] = {0}, *r[2] = {0};
    assert_int_equal(tg_fn_call(f, in, 3, c, 2), TG_OK);
    tg_fn_free(f);
    assert_int_equal(run_text(mlp_text, TG_MODE_REFERENCE, 0, in, 3, r, 2), TG_OK);
    for (int i = 0; i < 2; i++) {
        assert_close(c[i], r[i], 1e-12);
        tg_tensor_free(c[i]);
        tg_tensor_free(r[i]);
    }
    o.no_fallback = true;
    assert_int_equal(tg_graph_compile(g, &o, &f), TG_ECHECK);
    assert_null(f);
    assert_non_null(strstr(tg_last_error(), "kept in"));
    /* a compiler that fails on the code: its message is in the error */
    setenv("TGRAPH_CC", "cc", 1);
    setenv("TGRAPH_CFLAGS", "-fno-such-flag-for-tgraph", 1);
    assert_int_equal(tg_graph_compile(g, &o, &f), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "failed"));
    unsetenv("TGRAPH_CFLAGS");
    for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    tg_module_free(m);
    remove_cache();
}

static void test_unsafe_dir_refused(void **state) {
    (void)state;
    fresh_cache();
    assert_int_equal(chmod(cache_dir, 0777), 0);
    tg_module *m = parse_text(mlp_text);
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .no_fallback = true);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), &o, &f), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "writable by others"));
    assert_int_equal(count_files(".so"), 0);
    assert_int_equal(chmod(cache_dir, 0770), 0);
    assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), &o, &f), TG_ECHECK);
    assert_non_null(strstr(tg_last_error(), "writable by its group"));
    assert_int_equal(chmod(cache_dir, 0700), 0);
    assert_int_equal(tg_graph_compile(tg_module_find(m, "main"), &o, &f), TG_OK);
    tg_fn_free(f);
    tg_module_free(m);
    /* list and clear */
    FILE *mem = tmpfile();
    assert_int_equal(tg_cache_list(mem), TG_OK);
    fclose(mem);
    int removed = 0;
    assert_int_equal(tg_cache_clear(&removed), TG_OK);
    assert_true(removed >= 3); /* .so, .c, .ref */
    assert_int_equal(count_files(".so"), 0);
    remove_cache();
}

/* Every allocation of a compile (warm cache) and call failing in turn: TG_ENOMEM, no
 * crash, nothing leaked (ASan), and never a recompile taken for a corrupt entry. */
static void test_allocation_failures(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f64[5], w: f64[5,3]) {\n"
                       "  return exp(add(x, 1.5)), sum(mul(x, x)), dot(x, w)\n"
                       "}\n";
    tg_tensor *x = ramp(TG_DT_F64, 1, (int64_t[]){5}, 1.0);
    tg_tensor *w = ramp(TG_DT_F64, 2, (int64_t[]){5, 3}, 1.0);
    tg_tensor *in[2] = {x, w}, *out[3] = {0};
    assert_int_equal(run_text(text, TG_MODE_C, 0, in, 2, out, 3), TG_OK); /* warm the cache */
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    setenv("TGRAPH_CC", "/bin/false", 1); /* a recompile would fail: none may happen */
    long k = 1;
    for (; k < 20000; k++) {
        fail_alloc fa = {0, k};
        tg_ctx *ctx = tg_ctx_new(failing_alloc, &fa);
        if (!ctx) continue; /* the context itself */
        tg_module *m = NULL;
        tg_status st = tg_module_parse(ctx, text, strlen(text), "t.tg", &m);
        tg_fn *f = NULL;
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .no_fallback = true);
        if (st == TG_OK) st = tg_graph_compile(tg_module_find(m, "main"), &o, &f);
        tg_tensor *res[3] = {0};
        if (st == TG_OK) st = tg_fn_call(f, in, 2, res, 3);
        if (st != TG_OK && st != TG_ENOMEM)
            fail_msg("allocation %ld: %s: %s", k, tg_status_str(st), tg_last_error());
        for (int i = 0; i < 3; i++) tg_tensor_free(res[i]);
        tg_fn_free(f);
        tg_module_free(m);
        tg_ctx_free(ctx);
        if (fa.count < k) break; /* the whole workload ran without reaching allocation k */
    }
    assert_true(k > 10);
    tg_tensor_free(x);
    tg_tensor_free(w);
    remove_cache();
}

/* ---- debug mode ---- */

static void test_debug_catches(void **state) {
    (void)state;
    fresh_cache();
    const char *text = "func main(x: f32[6], y: f32[6]) {\n"
                       "  a = exp(x)\n"
                       "  b = add(a, y)\n"
                       "  return b\n"
                       "}\n";
    tg_tensor *in[2] = {ramp(TG_DT_F32, 1, (int64_t[]){6}, 1.0),
                        ramp(TG_DT_F32, 1, (int64_t[]){6}, 2.0)};
    tg_tensor *out[1] = {0};
    tg_mode backends[2] = {TG_MODE_VM, TG_MODE_C};
    for (int b = 0; b < 2; b++) {
        /* clean: passes */
        assert_int_equal(run_text(text, TG_MODE_DEBUG, backends[b], in, 2, out, 1), TG_OK);
        tg_tensor_free(out[0]);
        out[0] = NULL;
        /* a wrong kernel (the fuse pass makes one fused node of exp and add) */
        setenv("TGRAPH_TEST_BREAK_OP", "fused", 1);
        tg_status st = run_text(text, TG_MODE_DEBUG, backends[b], in, 2, out, 1);
        assert_int_equal(st, TG_ECHECK);
        const char *msg = tg_last_error();
        assert_non_null(strstr(msg, "fused"));
        assert_non_null(strstr(msg, "differs from its reference kernel"));
        assert_non_null(strstr(msg, "f32[6]"));
        assert_non_null(strstr(msg, "worst at [0]"));
        unsetenv("TGRAPH_TEST_BREAK_OP");
        /* an undeclared write to an input */
        setenv("TGRAPH_TEST_CLOBBER_OP", "fused", 1);
        st = run_text(text, TG_MODE_DEBUG, backends[b], in, 2, out, 1);
        assert_int_equal(st, TG_ECHECK);
        assert_non_null(strstr(tg_last_error(), "wrote to its input 0"));
        unsetenv("TGRAPH_TEST_CLOBBER_OP");
    }
    for (int i = 0; i < 2; i++) tg_tensor_free(in[i]);
    remove_cache();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_matches_vm),
        cmocka_unit_test(test_generated_loops),
        cmocka_unit_test(test_layouts_and_dtypes),
        cmocka_unit_test(test_broadcast_rows),
        cmocka_unit_test(test_emission),
        cmocka_unit_test(test_reductions_and_blas),
        cmocka_unit_test(test_shared_functions),
        cmocka_unit_test(test_loops_share_constants),
        cmocka_unit_test(test_gemm_as_gemv),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_split_units),
        cmocka_unit_test(test_shape_arithmetic_planned),
        cmocka_unit_test(test_hit_and_truncated),
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_warm_needs_no_compiler),
        cmocka_unit_test(test_fallback_to_vm),
        cmocka_unit_test(test_unsafe_dir_refused),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_debug_catches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
