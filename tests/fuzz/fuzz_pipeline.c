/* fuzz_pipeline.c - fuzz target for the whole compile pipeline, driven by .tg text.
 *
 * For any input: parsing and type checking (tg_module_parse) never crash and fail with a
 * positioned message. For each function of a module that parses (at most FZ_MAX_FUNCS,
 * with at most FZ_MAX_INPUTS inputs and no state):
 *   - the rewrite pipeline (every pass, fusion and BLAS lowering included, the IR verified
 *     after each pass) succeeds or fails cleanly, and the optimised graph prints as .tg
 *     text that parses back;
 *   - the function (g) and its optimised form (o) run on the same small random inputs
 *     ('?' extents get one small extent, chosen from the input's hash, so a run is
 *     deterministic; NaN, inf and -0 are sprinkled in): g with the reference interpreter
 *     and with the VM (which optimises g itself), o with the reference interpreter.
 *     Backends: the VM must agree with the reference on o: both run or both fail with a
 *     user error, with the same dtypes, shapes and values (integers exactly, floats within
 *     a tolerance relative to the largest magnitude of that output; NaN where NaN).
 *     Rewrites: the reference on o must agree with the reference on g in the same way,
 *     except where g's value is not finite (stabilising rewrites turn inf and NaN into
 *     the finite value they stand for: log(softmax(x)) into log_softmax(x)).
 *     A mismatch aborts.
 * Then the same function again with its values used many times (check_repeats): every
 * output returned three times, and a stack of nine copies of the first output returned
 * twice, which no mutation of the text is likely to write but which the compiler's
 * scratch arrays must size for.
 * Everything runs in a context with a memory cap (FZ_MEM_LIMIT), so a graph asking for
 * absurd sizes ends in TG_ENOMEM, never in an out-of-memory kill.
 * Build with libFuzzer: cmake -DTG_FUZZ=ON with clang (docs/hardening.md); without it the
 * same file is a replay driver that ctest runs over tests/fuzz/corpus/pipeline.
 */
#include "tgraph.h"
#include "ir/ir.h" /* the graph's variables, to bound the work of a run */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_INPUT ((size_t)1 << 16)
#define FZ_MAX_FUNCS   4
#define FZ_MAX_INPUTS  12
#define FZ_MAX_OUTPUTS 16
#define FZ_MAX_ELEMS   ((int64_t)1 << 14) /* per input */
#define FZ_MEM_LIMIT   ((size_t)16 << 20)
#define FZ_MAX_WORK    ((int64_t)1 << 22) /* elements of any value with a static shape */

/* FUZZ_VERBOSE=1 in the environment: one line per function run (for corpus statistics). */
static int verbose(void) {
    static int v = -1;
    if (v < 0) v = getenv("FUZZ_VERBOSE") != NULL;
    return v;
}

/* The inputs of the runs being compared, printed with a violation (NULL between runs). */
static tg_tensor *const *fz_in;
static int fz_nin;

static void fz_fail(const char *what, const char *detail, const char *src, size_t len) {
    fprintf(stderr, "fuzz_pipeline: property violated: %s\n%s\n---- input ----\n%.*s\n", what,
            detail ? detail : "", (int)len, src);
    for (int i = 0; fz_in && i < fz_nin; i++) {
        fprintf(stderr, "---- argument %d ----\n", i);
        tg_tensor_print(fz_in[i], stderr);
        fprintf(stderr, "\n");
    }
    abort();
}

#define CHECK(ok, what, detail)                                                                    \
    do {                                                                                           \
        if (!(ok)) fz_fail(what, detail, src, len);                                                \
    } while (0)

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Fills t (contiguous, fresh) with small values of its dtype, now and then a special one. */
static void fill(tg_tensor *t, uint64_t *rng) {
    int64_t n = tg_tensor_size(t);
    unsigned char *d = tg_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix(rng);
        double x = (double)(r % 2001) / 500.0 - 2.0; /* [-2, 2] in steps of 1/500 */
        int64_t k = (int64_t)(r % 11) - 5;           /* [-5, 5] */
        if ((r >> 40) % 64 == 0)
            x = (r >> 50) % 3 == 0 ? NAN : (r >> 50) % 3 == 1 ? INFINITY : -0.0;
        switch (tg_tensor_dtype(t)) {
        case TG_DT_BOOL:
            ((bool *)d)[i] = r & 1;
            break;
        case TG_DT_I8:
            ((int8_t *)d)[i] = (int8_t)k;
            break;
        case TG_DT_I16:
            ((int16_t *)d)[i] = (int16_t)k;
            break;
        case TG_DT_I32:
            ((int32_t *)d)[i] = (int32_t)k;
            break;
        case TG_DT_I64:
            ((int64_t *)d)[i] = k;
            break;
        case TG_DT_U8:
            ((uint8_t *)d)[i] = (uint8_t)(k + 5);
            break;
        case TG_DT_F32:
            ((float *)d)[i] = (float)x;
            break;
        case TG_DT_F64:
            ((double *)d)[i] = x;
            break;
        default:
            break;
        }
    }
}

/* Largest finite magnitude of t (for the tolerance of its comparison). */
static double scale_of(const tg_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        double v = fabs(tg_tensor_get_f64(t, i));
        if (isfinite(v) && v > m) m = v;
    }
    return m;
}

/* NULL when the two outputs agree, else a description. With `finite_only`, elements where
 * r is not finite are not compared. `single`: float32 takes part in the computation (a
 * float64 output of float32 work carries float32 rounding: the float32 tolerance). */
static const char *compare(const tg_tensor *r, const tg_tensor *v, bool finite_only, bool single,
                           char *msg, size_t cap) {
    if (tg_tensor_dtype(r) != tg_tensor_dtype(v)) {
        snprintf(msg, cap, "dtype %s vs %s", tg_dtype_name(tg_tensor_dtype(r)),
                 tg_dtype_name(tg_tensor_dtype(v)));
        return msg;
    }
    if (tg_tensor_ndim(r) != tg_tensor_ndim(v)) {
        snprintf(msg, cap, "rank %d vs %d", tg_tensor_ndim(r), tg_tensor_ndim(v));
        return msg;
    }
    for (int i = 0; i < tg_tensor_ndim(r); i++)
        if (tg_tensor_shape(r)[i] != tg_tensor_shape(v)[i]) {
            snprintf(msg, cap, "extent %d: %lld vs %lld", i, (long long)tg_tensor_shape(r)[i],
                     (long long)tg_tensor_shape(v)[i]);
            return msg;
        }
    bool fl = tg_dtype_is_float(tg_tensor_dtype(r));
    double rtol = single || tg_tensor_dtype(r) == TG_DT_F32 ? 1e-3 : 1e-7;
    double tol = fl ? rtol * (1.0 + scale_of(r)) : 0;
    for (int64_t i = 0; i < tg_tensor_size(r); i++) {
        double a = tg_tensor_get_f64(r, i), b = tg_tensor_get_f64(v, i);
        if (a == b || (isnan(a) && isnan(b)) || (finite_only && !isfinite(a))) continue;
        if (fl && isfinite(a) && isfinite(b) && fabs(a - b) <= tol) continue;
        snprintf(msg, cap, "element %lld: %.17g vs %.17g", (long long)i, a, b);
        return msg;
    }
    return NULL;
}

static char *print_graph(const tg_graph *g, size_t *n) {
    char *buf = NULL;
    *n = 0;
    FILE *f = open_memstream(&buf, n);
    if (!f) return NULL;
    tg_status st = tg_graph_print(g, f);
    fclose(f);
    if (st != TG_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The optimised graph (NULL when optimising failed cleanly), checked to print and parse. */
static tg_graph *check_optimize(tg_ctx *ctx, const tg_graph *g, const char *src, size_t len) {
    tg_optimize_opts oo = TG_OPTIMIZE_OPTS(.verify = true);
    tg_graph *opt = NULL;
    tg_status st = tg_graph_optimize(g, &oo, &opt);
    if (st != TG_OK) {
        CHECK(opt == NULL, "failed optimisation returned a graph", NULL);
        CHECK(st != TG_EINTERNAL && st != TG_ECHECK, "optimisation failed with an internal error",
              tg_last_error());
        return NULL;
    }
    size_t n;
    char *text = print_graph(opt, &n);
    CHECK(text != NULL, "printing the optimised graph failed", tg_last_error());
    tg_module *m = NULL;
    st = tg_module_parse(ctx, text, n, "optimized.tg", &m);
    if (st != TG_OK && st != TG_ENOMEM) {
        fprintf(stderr, "%s\n", text);
        CHECK(0, "the optimised graph does not parse back", tg_last_error());
    }
    tg_module_free(m);
    free(text);
    return opt;
}

/* Makes the inputs of g; false (nothing to free) when g is outside the target's limits. */
static bool make_inputs(tg_ctx *ctx, const tg_graph *g, uint64_t *rng, int64_t unknown,
                        tg_tensor **in) {
    int nin = tg_graph_input_count(g);
    for (int i = 0; i < nin; i++) {
        const tg_var *v = tg_graph_input(g, i);
        int64_t shape[TG_MAX_DIMS], n = 1;
        for (int d = 0; d < tg_var_ndim(v); d++) {
            shape[d] = tg_var_dim(v, d) < 0 ? unknown : tg_var_dim(v, d);
            n = shape[d] > FZ_MAX_ELEMS ? FZ_MAX_ELEMS + 1 : n * shape[d];
            if (n > FZ_MAX_ELEMS) break;
        }
        in[i] =
            n > FZ_MAX_ELEMS ? NULL : tg_tensor_new(ctx, tg_var_dtype(v), tg_var_ndim(v), shape);
        if (!in[i]) {
            for (int k = 0; k < i; k++) tg_tensor_free(in[k]);
            return false;
        }
        fill(in[i], rng);
    }
    return true;
}

typedef struct fz_run {
    const char *name; /* for messages */
    tg_fn *f;         /* compiled function (NULL: not compiled) */
    tg_status st;     /* status of the call */
    char msg[512];    /* its message */
    tg_tensor *out[FZ_MAX_OUTPUTS];
} fz_run;

static void run_one(fz_run *r, tg_tensor **in, int nin, int nout) {
    r->st = tg_fn_call(r->f, in, nin, r->out, nout);
    snprintf(r->msg, sizeof r->msg, "%s", tg_last_error());
    if (verbose()) fprintf(stderr, "fuzz_pipeline: %s: %s\n", r->name, tg_status_str(r->st));
}

/* Whether float32 appears in the source: a type, a cast or a literal's dtype. */
static bool mentions_f32(const char *src, size_t len) {
    return memmem(src, len, "f32", 3) != NULL || memmem(src, len, "float32", 7) != NULL;
}

/* a (the oracle) against b; finite_only as in compare(). */
static void agree(const fz_run *a, const fz_run *b, int nout, bool finite_only, const char *src,
                  size_t len) {
    char what[160], msg[256], full[1024];
    CHECK(a->st != TG_EINTERNAL && b->st != TG_EINTERNAL, "a run failed with an internal error",
          a->st == TG_EINTERNAL ? a->msg : b->msg);
    if (a->st == TG_ENOMEM || b->st == TG_ENOMEM) return; /* the cap: plans differ in size */
    snprintf(what, sizeof what, "%s runs but %s fails", a->name, b->name);
    CHECK(!(a->st == TG_OK && b->st != TG_OK), what, b->msg);
    snprintf(what, sizeof what, "%s fails but %s runs", a->name, b->name);
    CHECK(!(a->st != TG_OK && b->st == TG_OK), what, a->msg);
    if (a->st != TG_OK) return;
    for (int o = 0; o < nout; o++) {
        const char *diff =
            compare(a->out[o], b->out[o], finite_only, mentions_f32(src, len), msg, sizeof msg);
        if (!diff) continue;
        snprintf(what, sizeof what, "%s and %s differ", a->name, b->name);
        snprintf(full, sizeof full, "output %d (%s vs %s): %s", o, a->name, b->name, diff);
        CHECK(0, what, full);
    }
}

/* Whether every value of g with a static shape has at most FZ_MAX_WORK elements. Views
 * cost no memory, so the cap does not bound them: sum(broadcast_to(x, [4e5, 4e4, 3])) is a
 * legitimate program that runs for minutes, and is left out of the runs. */
static bool work_within(const tg_graph *g, int64_t limit) {
    for (int i = 0; g && i < g->vars.n; i++) {
        const tg_var *v = g->vars.items[i];
        double n = 1;
        for (int d = 0; d < v->type.ndim; d++)
            if (v->type.shape[d] >= 0) n *= (double)v->type.shape[d];
        if (n > (double)limit) return false;
    }
    return true;
}

static bool small_work(const tg_graph *g) { return work_within(g, FZ_MAX_WORK); }

static void check_run(tg_ctx *ctx, tg_graph *g, tg_graph *opt, uint64_t seed, const char *src,
                      size_t len) {
    int nin = tg_graph_input_count(g), nout = tg_graph_output_count(g);
    if (nin > FZ_MAX_INPUTS || nout <= 0 || nout > FZ_MAX_OUTPUTS) return;
    if (!small_work(g) || !small_work(opt)) return;
    fz_run runs[3] = {{.name = "reference(g)"}, {.name = "vm(g)"}, {.name = "reference(opt)"}};
    tg_compile_opts ro = TG_COMPILE_OPTS(.mode = TG_MODE_REFERENCE),
                    vo = TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = 1, .verify = true);
    tg_status st = tg_graph_compile(g, &ro, &runs[0].f);
    if (st == TG_OK) st = tg_graph_compile(g, &vo, &runs[1].f);
    if (st == TG_OK && opt) st = tg_graph_compile(opt, &ro, &runs[2].f);
    CHECK(st != TG_EINTERNAL, "compile failed with an internal error", tg_last_error());
    bool ok = st == TG_OK && tg_fn_state_count(runs[0].f) == 0;
    uint64_t rng = seed;
    tg_tensor *in[FZ_MAX_INPUTS] = {0};
    if (ok && make_inputs(ctx, g, &rng, 1 + (int64_t)(seed % 3), in)) {
        for (int r = 0; r < 3; r++)
            if (runs[r].f) run_one(&runs[r], in, nin, nout);
        fz_in = in;
        fz_nin = nin;
        if (runs[2].f) {
            agree(&runs[2], &runs[1], nout, false, src, len); /* the VM's kernels */
            agree(&runs[0], &runs[2], nout, true, src, len);  /* the rewrites */
        }
        fz_in = NULL;
        for (int i = 0; i < nin; i++) tg_tensor_free(in[i]);
    }
    for (int r = 0; r < 3; r++) {
        for (int o = 0; o < nout; o++) tg_tensor_free(runs[r].out[o]);
        tg_fn_free(runs[r].f);
    }
}

/* g with its values used many times: each output returned three times, then a stack of
 * nine copies of the first output, returned twice. This changes g (the caller's module is
 * freed afterwards); a builder's error (a stack of a scalar of a strange dtype) only
 * skips the check. */
static void check_repeats(tg_ctx *ctx, tg_graph *g, uint64_t seed, const char *src, size_t len) {
    enum { COPIES = 3, WIDE = 9 };
    int nret = tg_graph_output_count(g);
    if (g->updates.n != 0 || nret <= 0 || COPIES * nret + 2 > FZ_MAX_OUTPUTS) return;
    if (!work_within(g, FZ_MAX_WORK >> 6)) return; /* it checks structure, not size: fast */
    tg_var *outs[FZ_MAX_OUTPUTS], *xs[WIDE];
    int n = 0;
    for (int c = 0; c < COPIES; c++)
        for (int i = 0; i < nret; i++) outs[n++] = tg_graph_output(g, i);
    for (int k = 0; k < WIDE; k++) xs[k] = outs[0];
    tg_var *wide = tg_apply(g, "stack", xs, WIDE, &TG_A_INT("axis", 0), 1);
    if (!wide) return;
    outs[n++] = wide;
    outs[n++] = wide;
    if (tg_graph_set_outputs(g, outs, n) != TG_OK) return;
    tg_graph *opt = check_optimize(ctx, g, src, len);
    check_run(ctx, g, opt, seed, src, len);
    tg_graph_free(opt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    const char *src = (const char *)data;
    size_t len = size;
    tg_ctx *ctx = tg_ctx_new(NULL, NULL);
    if (!ctx) return 0;
    tg_ctx_set_mem_limit(ctx, FZ_MEM_LIMIT);
    tg_module *m = NULL;
    tg_status st = tg_module_parse(ctx, src, len, "fuzz.tg", &m);
    if (st != TG_OK) {
        CHECK(m == NULL, "failed parse returned a module", NULL);
        CHECK(st == TG_ENOMEM || strncmp(tg_last_error(), "fuzz.tg:", 8) == 0,
              "parse error without a position", tg_last_error());
    } else {
        uint64_t seed = hash_bytes(data, size);
        for (int i = 0; i < tg_module_func_count(m) && i < FZ_MAX_FUNCS; i++) {
            tg_graph *g = tg_module_func(m, i);
            tg_graph *opt = check_optimize(ctx, g, src, len);
            check_run(ctx, g, opt, seed + (uint64_t)i, src, len);
            tg_graph_free(opt);
            check_repeats(ctx, g, seed + (uint64_t)i, src, len);
        }
        tg_module_free(m);
    }
    char leak[96];
    snprintf(leak, sizeof leak, "%zu bytes still live in the context", tg_ctx_mem_used(ctx));
    CHECK(tg_ctx_mem_used(ctx) == 0, "memory left behind (or freed with a wrong size)", leak);
    tg_ctx_free(ctx);
    return 0;
}

#include "fuzz_replay.h"
