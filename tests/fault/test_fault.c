/* test_fault.c - allocation-failure injection over representative workloads.
 *
 * Each workload runs in a context whose allocator (tests/unit/fault_alloc.h) refuses the
 * Nth allocation; the driver runs it with N = 1, 2, 3, ... until a run sees no refusal,
 * which must then succeed with the same result as a run without faults. Every run that
 * had an allocation refused must end in TG_ENOMEM with a message (or, where the library
 * works around the refusal, in success with the same result up to float rounding), and
 * leave nothing live in the context (tg_ctx_mem_used == 0, which also proves that every free passed
 * the size it was allocated with); under AddressSanitizer (make asan) a leak or a bad access fails
 * the test too. The workloads: parsing a .tg module; the rewrite pipeline with every pass
 * (fusion and BLAS lowering included) and IR verification; compiling and running with the
 * reference interpreter and with the VM (one thread, and a pool of two, two calls so that
 * cached plans are reused) and with the C JIT (from a warm private cache: emission, cache
 * lookup, loading, the generated code's runtime calls), LAPACK's ops (their scratch) among them;
 * reverse-mode gradients, and
 * jacobians and hessians, built through the C API; .npy reading from files and memory, and writing;
 * a nested pmap, its ranks on a device and on the caller's thread.
 * The module's annotations name cpu:0 and cpu:1, which the test makes exist: compiling
 * places it (src/rewrite/place.c) and the devices' scheduler runs it.
 * FAULT_WORKLOAD=name runs one workload; FAULT_VERBOSE=1 prints each one's count;
 * FAULT_BACKTRACE=1 prints where each refused allocation was asked for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../unit/fault_alloc.h"
#include "tgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <execinfo.h>
#endif

/* A module whose compiled form has fused kernels, BLAS calls, reductions, views,
 * gradients and an integer output, with device annotations (copied by the parser, the
 * clones, the rewrites and the gradient). */
static const char wl_src[] =
    "func main(x: f32[?,4] device=\"cpu:0\", W1: f32[4,8], b1: f32[8], W2: f32[8,3], b2: f32[3],\n"
    "          y: f32[?,3]) {\n"
    "  h = tanh(add(dot(x, W1), b1, device=\"cpu:0\"), device=\"cpu:1\")\n"
    "  logits = add(dot(h, W2), b2)\n"
    "  m = max(logits, axis=1, keepdims=true)\n"
    "  z = sub(logits, m)\n"
    "  logp = sub(z, log(sum(exp(z), axis=1, keepdims=true)))\n"
    "  loss = neg(mean(sum(mul(y, logp), axis=1)))\n"
    "  gW1, gb1 = grad(loss, W1, b1)\n"
    "  s = x[1:, ::-1]\n"
    "  return loss, gW1, gb1, mul(exp(logp), 2), argmax(logits, axis=1), s\n"
    "}\n"
    "func blas(A: f64[3,4], B: f64[4,5], C: f64[3,5], v: f64[4], u: f64[3]) {\n"
    "  g = add(mul(dot(A, B, device=\"cpu:1\"), 2.0, device=\"cpu:1\"), C, device=\"cpu:1\")\n"
    "  return g, dot(A, v), add(outer(u, v), A)\n"
    "}\n"
    "func lapack(X: f64[5,5], b: f64[5]) {\n"
    "  A = add(dot(X, transpose(X)), eye(n=5))\n"
    "  L = cholesky(A)\n"
    "  w, v = eigh(A)\n"
    "  s, ld = slogdet(A)\n"
    "  gX = grad(add(ld, sum(w)), X)\n"
    "  return solve(A, b), cho_solve(L, b), inv(A), mul(det(A), s), w, mul(v, v), gX\n"
    "}\n";

/* A pmap (on cpu:0) whose body maps again (on the caller's thread: ranks of a rank run on
 * threads of their own), with a replicated input, in_axes 1 and an out_axes=none result,
 * and collectives over both axes (their communicators are made on first use).
 * One rank each: the test's allocator counts without atomics, so no two ranks may
 * allocate at once. */
static const char wl_pmap_src[] =
    "func main(xs: f64[1,3,1], w: f64[3]) {\n"
    "  y, s = pmap(@outer_fn, xs, w, in_axes=[0, none], out_axes=[0, none], axis_name=\"a\")\n"
    "  return y, s\n"
    "}\n"
    "func outer_fn(x: f64[3,1], w: f64[3]) {\n"
    "  y = pmap(@inner, x, w, in_axes=[1, none], out_axes=[1], axis_name=\"b\")\n"
    "  return y, sum(w)\n"
    "}\n"
    "func inner(x: f64[3], w: f64[3]) {\n"
    "  i = cast(add(axis_index(axis_name=\"a\"), axis_index(axis_name=\"b\")), dtype=\"f64\")\n"
    "  g = all_gather(psum(x, axis_name=\"a\"), axis_name=\"b\", tiled=true)\n"
    "  return add(add(mul(x, w), i), g)\n"
    "}\n";

typedef tg_status (*workload_fn)(tg_ctx *ctx, double *checksum);

/* ---- helpers ---- */

static double checksum_of(const tg_tensor *t) {
    double s = 0;
    for (int64_t i = 0; i < tg_tensor_size(t); i++) s += tg_tensor_get_f64(t, i) * (double)(i + 1);
    return s;
}

/* Inputs for g: '?' extents are 5; values are a fixed function of the position. */
static tg_status make_inputs(tg_ctx *ctx, const tg_graph *g, tg_tensor **in) {
    for (int i = 0; i < tg_graph_input_count(g); i++) {
        const tg_var *v = tg_graph_input(g, i);
        int64_t shape[TG_MAX_DIMS];
        for (int d = 0; d < tg_var_ndim(v); d++)
            shape[d] = tg_var_dim(v, d) < 0 ? 5 : tg_var_dim(v, d);
        in[i] = tg_tensor_new(ctx, tg_var_dtype(v), tg_var_ndim(v), shape);
        if (!in[i]) {
            for (int k = 0; k < i; k++) {
                tg_tensor_free(in[k]);
                in[k] = NULL;
            }
            return TG_ENOMEM;
        }
        for (int64_t k = 0; k < tg_tensor_size(in[i]); k++) {
            double x = sin((double)(k + 1) * (i + 1.3));
            if (tg_var_dtype(v) == TG_DT_F32) ((float *)tg_tensor_data(in[i]))[k] = (float)x;
            if (tg_var_dtype(v) == TG_DT_F64) ((double *)tg_tensor_data(in[i]))[k] = x;
        }
    }
    return TG_OK;
}

/* Compiles every function of m with opts, calls each `calls` times, sums the checksums. */
static tg_status run_module(tg_ctx *ctx, const tg_module *m, const tg_compile_opts *opts, int calls,
                            double *checksum) {
    *checksum = 0;
    for (int fi = 0; fi < tg_module_func_count(m); fi++) {
        tg_graph *g = tg_module_func(m, fi);
        tg_fn *f = NULL;
        tg_status st = tg_graph_compile(g, opts, &f);
        if (st != TG_OK) return st;
        tg_tensor *in[8] = {0}, *out[8] = {0};
        int nin = tg_graph_input_count(g), nout = tg_graph_output_count(g);
        st = make_inputs(ctx, g, in);
        for (int c = 0; c < calls && st == TG_OK; c++) {
            st = tg_fn_call(f, in, nin, out, nout);
            for (int o = 0; o < nout && st == TG_OK; o++) *checksum += checksum_of(out[o]);
            for (int o = 0; o < nout; o++) {
                tg_tensor_free(out[o]);
                out[o] = NULL;
            }
        }
        for (int i = 0; i < nin; i++) tg_tensor_free(in[i]);
        tg_fn_free(f);
        if (st != TG_OK) return st;
    }
    return TG_OK;
}

/* ---- workloads ---- */

static tg_status wl_parse(tg_ctx *ctx, double *checksum) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, wl_src, sizeof wl_src - 1, "wl.tg", &m);
    if (st != TG_OK) return st;
    *checksum = tg_module_func_count(m) + tg_graph_node_count(tg_module_func(m, 0));
    tg_module_free(m);
    return TG_OK;
}

static tg_status wl_optimize(tg_ctx *ctx, double *checksum) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, wl_src, sizeof wl_src - 1, "wl.tg", &m);
    if (st != TG_OK) return st;
    *checksum = 0;
    FILE *devnull = fopen("/dev/null", "w");
    for (int i = 0; i < tg_module_func_count(m) && st == TG_OK; i++) {
        tg_optimize_opts oo = TG_OPTIMIZE_OPTS(.verify = true);
        tg_graph *opt = NULL;
        st = tg_graph_optimize(tg_module_func(m, i), &oo, &opt);
        if (st == TG_OK) {
            *checksum += tg_graph_node_count(opt);
            if (devnull) st = tg_graph_print(opt, devnull);
        }
        tg_graph_free(opt);
    }
    if (devnull) fclose(devnull);
    tg_module_free(m);
    return st;
}

static tg_status wl_run(tg_ctx *ctx, const tg_compile_opts *opts, int calls, double *checksum) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, wl_src, sizeof wl_src - 1, "wl.tg", &m);
    if (st != TG_OK) return st;
    st = run_module(ctx, m, opts, calls, checksum);
    tg_module_free(m);
    return st;
}

static tg_status wl_reference(tg_ctx *ctx, double *checksum) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE);
    return wl_run(ctx, &o, 1, checksum);
}

static tg_status wl_vm(tg_ctx *ctx, double *checksum) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1, .verify = true);
    return wl_run(ctx, &o, 2, checksum);
}

static tg_status wl_vm_pool(tg_ctx *ctx, double *checksum) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 2);
    return wl_run(ctx, &o, 2, checksum);
}

/* The C JIT with no_fallback, from a warm cache (the first run, without faults, compiles
 * into a private cache directory; the runs with a refusal emit the code, find its entry
 * and load it): emission, the cache lookup, loading and the generated code's calls into
 * the runtime all meet refused allocations. */
static tg_status wl_cjit(tg_ctx *ctx, double *checksum) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .nthreads = 1, .no_fallback = true);
    return wl_run(ctx, &o, 2, checksum);
}

/* The pmap module's main, compiled (the bodies with it) and run twice on the VM (its other
 * functions read axes only a pmap gives: they compile only as bodies). */
static tg_status wl_pmap(tg_ctx *ctx, double *checksum) {
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, wl_pmap_src, sizeof wl_pmap_src - 1, "pmap.tg", &m);
    if (st != TG_OK) return st;
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
    tg_graph *g = tg_module_find(m, "main");
    tg_fn *f = NULL;
    tg_tensor *in[2] = {0}, *out[2] = {0};
    st = tg_graph_compile(g, &o, &f);
    if (st == TG_OK) st = make_inputs(ctx, g, in);
    *checksum = 0;
    for (int c = 0; c < 2 && st == TG_OK; c++) {
        st = tg_fn_call(f, in, 2, out, 2);
        for (int k = 0; k < 2; k++) {
            if (st == TG_OK) *checksum += checksum_of(out[k]);
            tg_tensor_free(out[k]);
            out[k] = NULL;
        }
    }
    for (int k = 0; k < 2; k++) tg_tensor_free(in[k]);
    tg_fn_free(f);
    tg_module_free(m);
    return st;
}

/* Gradients through the C API: d/dW sum(sigmoid(x W) * y) and d/dx, then run on the VM. */
static tg_status wl_grad(tg_ctx *ctx, double *checksum) {
    tg_graph *g = tg_graph_new(ctx, "grad");
    if (!g) return TG_ENOMEM;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 2, (int64_t[]){3, 4});
    tg_var *W = tg_input(g, "W", TG_DT_F64, 2, (int64_t[]){4, 2});
    tg_var *y = tg_input(g, "y", TG_DT_F64, 2, (int64_t[]){3, 2});
    tg_var *cost =
        tg_reduce(g, "sum", tg_mul(g, tg_sigmoid(g, tg_dot(g, x, W)), y), NULL, -1, false);
    tg_var *grads[2] = {0};
    tg_status st = cost ? tg_grad(g, cost, (tg_var *[]){W, x}, 2, TG_DISCONNECTED_ERROR, grads)
                        : tg_graph_status(g);
    if (st == TG_OK) st = tg_graph_set_outputs(g, (tg_var *[]){cost, grads[0], grads[1]}, 3);
    tg_fn *f = NULL;
    if (st == TG_OK) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
        st = tg_graph_compile(g, &o, &f);
    }
    tg_tensor *in[3] = {0}, *out[3] = {0};
    if (st == TG_OK) st = make_inputs(ctx, g, in);
    if (st == TG_OK) {
        st = tg_fn_call(f, in, 3, out, 3);
        *checksum = 0;
        for (int o = 0; o < 3 && st == TG_OK; o++) *checksum += checksum_of(out[o]);
        for (int o = 0; o < 3; o++) tg_tensor_free(out[o]);
        for (int i = 0; i < 3; i++) tg_tensor_free(in[i]);
    }
    tg_fn_free(f);
    tg_graph_free(g);
    return st;
}

/* A jacobian (two variables) and a hessian through the C API, run on the VM. */
static tg_status wl_jacobian(tg_ctx *ctx, double *checksum) {
    tg_graph *g = tg_graph_new(ctx, "jacobian");
    if (!g) return TG_ENOMEM;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){2});
    tg_var *W = tg_input(g, "W", TG_DT_F64, 2, (int64_t[]){2, 2});
    tg_var *y = tg_tanh(g, tg_dot(g, W, x));
    tg_var *c = tg_reduce(g, "sum", tg_mul(g, y, y), NULL, -1, false);
    tg_var *r[3] = {0};
    tg_status st =
        y ? tg_jacobian(g, y, (tg_var *[]){x, W}, 2, TG_DISCONNECTED_ERROR, r) : tg_graph_status(g);
    if (st == TG_OK) st = tg_hessian(g, c, &x, 1, TG_DISCONNECTED_ERROR, r + 2);
    if (st == TG_OK) st = tg_graph_set_outputs(g, r, 3);
    tg_fn *f = NULL;
    if (st == TG_OK) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1);
        st = tg_graph_compile(g, &o, &f);
    }
    tg_tensor *in[2] = {0}, *out[3] = {0};
    if (st == TG_OK) st = make_inputs(ctx, g, in);
    if (st == TG_OK) {
        st = tg_fn_call(f, in, 2, out, 3);
        *checksum = 0;
        for (int o = 0; o < 3 && st == TG_OK; o++) *checksum += checksum_of(out[o]);
        for (int o = 0; o < 3; o++) tg_tensor_free(out[o]);
        for (int i = 0; i < 2; i++) tg_tensor_free(in[i]);
    }
    tg_fn_free(f);
    tg_graph_free(g);
    return st;
}

/* Reads .npy files (C and Fortran order, both byte orders, several versions) from disk and
 * from memory, writes each back and reads the copy. */
static tg_status wl_npy(tg_ctx *ctx, double *checksum) {
    static const char *const files[] = {
        "../data/npy/f32_2x3.npy",
        "../data/npy/f32_be_fortran_2x3.npy",
        "../data/npy/i32_fortran_2x3x4.npy",
        "../data/npy/v2_f64_2x2.npy",
        "../data/npy/bool_5.npy",
        "../data/npy/empty_i64_2x0x3.npy",
    };
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/tg_test_fault.%ld.npy", (long)getpid());
    *checksum = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        tg_tensor *t = NULL, *u = NULL, *w = NULL;
        tg_status st = tg_npy_load(ctx, files[i], &t);
        if (st == TG_OK) st = tg_npy_save(tmp, t);
        if (st == TG_OK) st = tg_npy_load(ctx, tmp, &u);
        if (st == TG_OK) {
            FILE *f = fopen(tmp, "rb");
            unsigned char buf[4096];
            size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
            if (f) fclose(f);
            st = tg_npy_load_mem(ctx, buf, n, &w);
        }
        if (st == TG_OK) *checksum += checksum_of(t) + checksum_of(u) + checksum_of(w);
        tg_tensor_free(t);
        tg_tensor_free(u);
        tg_tensor_free(w);
        if (st != TG_OK) {
            unlink(tmp);
            return st;
        }
    }
    unlink(tmp);
    return TG_OK;
}

/* ---- the driver ---- */

/* failing_alloc, and a backtrace of each refusal when FAULT_BACKTRACE is set. */
static void *traced_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    void *p = failing_alloc(ud, ptr, osize, nsize);
#if defined(__GLIBC__)
    static int trace = -1;
    if (trace < 0) trace = getenv("FAULT_BACKTRACE") != NULL;
    if (!p && nsize && trace) {
        void *frames[24];
        fprintf(stderr, "-- allocation %ld of %zu bytes refused at:\n", ((fail_alloc *)ud)->count,
                nsize);
        backtrace_symbols_fd(frames, backtrace(frames, 24), 2);
    }
#endif
    return p;
}

static void drive(const char *name, workload_fn wl, long min_allocs) {
    const char *only = getenv("FAULT_WORKLOAD");
    if (only && strcmp(only, name) != 0) skip();
    fail_alloc fa = {0, 0};
    tg_ctx *ctx = tg_ctx_new(traced_alloc, &fa);
    assert_non_null(ctx);
    double want = 0, got = 0;
    fa.count = 0;
    tg_status st = wl(ctx, &want);
    if (st != TG_OK) fail_msg("%s without faults: %s", name, tg_last_error());
    assert_int_equal(tg_ctx_mem_used(ctx), 0);
    long total = fa.count;
    if (total < min_allocs) fail_msg("%s made only %ld allocations", name, total);
    long k, recovered = 0;
    for (k = 1;; k++) {
        fa.count = 0;
        fa.fail_at = k;
        got = 0;
        st = wl(ctx, &got);
        size_t live = tg_ctx_mem_used(ctx);
        if (live != 0)
            fail_msg("%s, allocation %ld refused: %zu bytes left live (status %s: %s)", name, k,
                     live, tg_status_str(st), tg_last_error());
        if (fa.count < k) break; /* nothing was refused: the run is complete */
        if (st == TG_OK) {
            /* the library worked around the refusal (e.g. the VM runs a fused node with the
             * generic kernel instead of its vector program): fine if the result is the same,
             * up to the rounding of a different float32 kernel */
            if (!(fabs(got - want) <= 1e-6 * fabs(want)) && !(isnan(got) && isnan(want)))
                fail_msg("%s, allocation %ld refused: status ok but the result %.17g differs "
                         "from %.17g",
                         name, k, got, want);
            recovered++;
            continue;
        }
        if (st != TG_ENOMEM)
            fail_msg("%s, allocation %ld refused: status %s, not out of memory (%s)", name, k,
                     tg_status_str(st), tg_last_error());
        if (!*tg_last_error()) fail_msg("%s, allocation %ld refused: no message", name, k);
    }
    if (st != TG_OK) fail_msg("%s: the run without a refusal failed: %s", name, tg_last_error());
    if (got != want && !(isnan(got) && isnan(want)))
        fail_msg("%s: result %.17g differs from the one without faults %.17g", name, got, want);
    if (getenv("FAULT_VERBOSE"))
        fprintf(stderr, "%s: %ld allocations, each refused in turn (%ld worked around)\n", name,
                k - 1, recovered);
    fa.fail_at = 0;
    tg_ctx_free(ctx);
}

static void test_parse(void **state) {
    (void)state;
    drive("parse", wl_parse, 50);
}
static void test_optimize(void **state) {
    (void)state;
    drive("optimize", wl_optimize, 100);
}
static void test_reference(void **state) {
    (void)state;
    drive("reference", wl_reference, 100);
}
static void test_vm(void **state) {
    (void)state;
    drive("vm", wl_vm, 100);
}
static void test_vm_pool(void **state) {
    (void)state;
    drive("vm_pool", wl_vm_pool, 100);
}
static void test_grad(void **state) {
    (void)state;
    drive("grad", wl_grad, 30);
}
static void test_jacobian(void **state) {
    (void)state;
    drive("jacobian", wl_jacobian, 30);
}
static void test_pmap(void **state) {
    (void)state;
    drive("pmap", wl_pmap, 50);
}
static void test_npy(void **state) {
    (void)state;
    drive("npy", wl_npy, 12);
}

static void test_cjit(void **state) {
    (void)state;
    char dir[] = "/tmp/tgfault.XXXXXX", cmd[64];
    assert_non_null(mkdtemp(dir));
    setenv("TGRAPH_CACHE_DIR", dir, 1);
    drive("cjit", wl_cjit, 100);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("TGRAPH_CACHE_DIR");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_optimize),
        cmocka_unit_test(test_reference), cmocka_unit_test(test_vm),
        cmocka_unit_test(test_vm_pool),   cmocka_unit_test(test_grad),
        cmocka_unit_test(test_jacobian),  cmocka_unit_test(test_npy),
        cmocka_unit_test(test_cjit),      cmocka_unit_test(test_pmap),
    };
    /* the devices the workload's annotations name: compiling places it on them, and the
     * scheduler runs it (placement and the scheduler under refused allocations too) */
    if (tg_devices_configure(2, 0) != TG_OK) {
        fprintf(stderr, "test_fault: %s\n", tg_last_error());
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
