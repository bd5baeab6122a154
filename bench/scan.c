/* scan.c - benchmarks of scan and map (docs/scan.md), written as .tg programs:
 *
 *   garch  the log-likelihood of a GARCH(1,1) model and its gradient over 1,000 steps, as a
 *          scan (vm and c), and as the unrolled graph (one node group per step): compile
 *          time (the C JIT with an empty cache) and time per call of each;
 *   rnn    an RNN's forward and backward pass: a tanh cell, hidden 128, batch 32, input 32,
 *          1,000 steps, f32, 1 thread, the input projection computed before the loop;
 *   map    10,000 independent iterations (a 64x64 matrix-vector product, tanh and a sum
 *          each) at 1 thread and at 2.
 *
 * usage: bench_scan [-n RUNS] [--only garch|rnn|map]
 * Prints "scan-garch vm: median ...", "scan-garch compile unrolled c: ...", ... lines
 * (bench_util.h); bench/scan_peers.py times NumPy, SciPy and PyTorch on the same work.
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#define T_GARCH 1000

static void die(const char *what) {
    fprintf(stderr, "bench_scan: %s: %s\n", what, tg_last_error());
    exit(1);
}

/* The function `main` of the .tg text src. The module is kept (it owns the graph). */
static tg_graph *parse(const char *src, tg_module **m) {
    if (tg_module_parse(NULL, src, strlen(src), "bench.tg", m) != TG_OK) die("parse");
    tg_graph *g = tg_module_find(*m, "main");
    if (!g) die("no main");
    return g;
}

/* Compiles g (seconds into *secs); the C JIT gets an empty cache of its own. */
static tg_fn *compile(tg_graph *g, tg_mode mode, int threads, double *secs) {
    char dir[] = "/tmp/tgbench_scanXXXXXX";
    if (mode == TG_MODE_C) {
        if (!mkdtemp(dir)) die("mkdtemp");
        setenv("TGRAPH_CACHE_DIR", dir, 1);
    }
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = threads);
    tg_fn *f = NULL;
    double t0 = bench_now();
    if (tg_graph_compile(g, &o, &f) != TG_OK) die("compile");
    *secs = bench_now() - t0;
    return f;
}

/* Times calls of f on in (results into out, made by a first call): RUNS medians of
 * batches of about 20 ms. With cpu, a second line "NAME clock=cpu" gives the process's CPU
 * time per call (all its threads): on a machine shared with other work, the time a
 * single-threaded run gets the CPU, which the peers report the same way. */
static void time_calls(const char *name, tg_fn *f, tg_tensor **in, int nin, int nout, int runs,
                       bool cpu) {
    tg_tensor *out[8] = {0};
    if (tg_fn_call(f, in, nin, out, nout) != TG_OK) die(name);
    double t0 = bench_now();
    if (tg_fn_call_into(f, in, nin, out, nout) != TG_OK) die(name);
    double per = bench_now() - t0;
    long batch = per > 0 ? (long)(0.02 / per) : 100;
    if (batch < 1) batch = 1;
    double *t = malloc(sizeof *t * (size_t)runs), *c = malloc(sizeof *c * (size_t)runs);
    for (int r = 0; r < runs; r++) {
        double c0 = bench_cpu_now();
        t0 = bench_now();
        for (long k = 0; k < batch; k++) tg_fn_call_into(f, in, nin, out, nout);
        t[r] = (bench_now() - t0) / (double)batch;
        c[r] = (bench_cpu_now() - c0) / (double)batch;
    }
    bench_report(name, t, runs);
    if (cpu) {
        char cname[160];
        snprintf(cname, sizeof cname, "%s clock=cpu", name);
        bench_report(cname, c, runs);
    }
    free(t);
    free(c);
    for (int j = 0; j < nout; j++) tg_tensor_free(out[j]);
}

static void print_secs(const char *name, double s) {
    double t[1] = {s};
    bench_report(name, t, 1);
}

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift64: the same data on every run */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static tg_tensor *tensor(tg_dtype dt, int ndim, const int64_t *shape, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, dt, ndim, shape);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        double v = scale * (2 * urand() - 1);
        if (dt == TG_DT_F32)
            ((float *)tg_tensor_data(t))[i] = (float)v;
        else
            ((double *)tg_tensor_data(t))[i] = v;
    }
    return t;
}

static const char garch_step[] =
    "func garch(s2: f64[], ll: f64[], r: f64[], w: f64[], a: f64[], b: f64[]) {\n"
    "  s2n = add(add(w, mul(a, mul(r, r))), mul(b, s2))\n"
    "  lln = sub(ll, mul(0.5, add(log(s2n), div(mul(r, r), s2n))))\n"
    "  return s2n, lln\n"
    "}\n";

static void bench_garch(int runs) {
    char *src = malloc(1 << 16);
    snprintf(src, 1 << 16,
             "%sfunc main(r: f64[%d], p: f64[3]) {\n"
             "  s2l, ll = scan(@garch, 1.0, 0.0, r, p[0], p[1], p[2], n_states=2, "
             "n_sequences=1)\n"
             "  gp = grad(ll, p)\n"
             "  return ll, gp\n"
             "}\n",
             garch_step, T_GARCH);
    /* the unrolled form: the same recursion written out step by step */
    size_t cap = 400 * (size_t)T_GARCH + 4096, len = 0;
    char *un = malloc(cap);
    len += (size_t)snprintf(un + len, cap - len,
                            "func main(r: f64[%d], p: f64[3]) {\n  w = p[0]\n  a = p[1]\n"
                            "  b = p[2]\n  s0 = const(value=1.0, dtype=\"f64\")\n"
                            "  l0 = const(value=0.0, dtype=\"f64\")\n",
                            T_GARCH);
    for (int t = 0; t < T_GARCH; t++)
        len += (size_t)snprintf(un + len, cap - len,
                                "  r%d = r[%d]\n  q%d = mul(r%d, r%d)\n"
                                "  s%d = add(add(w, mul(a, q%d)), mul(b, s%d))\n"
                                "  l%d = sub(l%d, mul(0.5, add(log(s%d), div(q%d, s%d))))\n",
                                t, t, t, t, t, t + 1, t, t, t + 1, t, t + 1, t, t + 1);
    snprintf(un + len, cap - len, "  gp = grad(l%d, p)\n  return l%d, gp\n}\n", T_GARCH, T_GARCH);
    int64_t n = T_GARCH, three = 3;
    tg_tensor *in[2] = {tensor(TG_DT_F64, 1, &n, 1.0), tg_tensor_new(NULL, TG_DT_F64, 1, &three)};
    double *p = tg_tensor_data(in[1]);
    p[0] = 0.1, p[1] = 0.1, p[2] = 0.8;
    struct {
        const char *name, *text;
        tg_mode mode;
    } cases[] = {{"scan vm", src, TG_MODE_VM},
                 {"scan c", src, TG_MODE_C},
                 {"unrolled vm", un, TG_MODE_VM},
                 {"unrolled c", un, TG_MODE_C}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tg_module *m = NULL;
        double t0 = bench_now(), secs;
        tg_graph *g = parse(cases[c].text, &m);
        double parse_s = bench_now() - t0;
        tg_fn *f = compile(g, cases[c].mode, 1, &secs);
        char name[128];
        snprintf(name, sizeof name, "scan-garch compile %s", cases[c].name);
        print_secs(name, parse_s + secs);
        snprintf(name, sizeof name, "scan-garch %s", cases[c].name);
        time_calls(name, f, in, 2, 2, runs, true);
        tg_fn_free(f);
        tg_module_free(m);
    }
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    free(src);
    free(un);
}

static void bench_rnn(int runs) {
    const char *src =
        "func cell(h: f32[32,128], xp: f32[32,128], Wh: f32[128,128]) {\n"
        "  hn = tanh(add(xp, dot(h, Wh)))\n"
        "  return hn, hn\n"
        "}\n"
        "func main(xs: f32[1000,32,32], h0: f32[32,128], Wx: f32[32,128], Wh: f32[128,128], "
        "b: f32[128]) {\n"
        "  x2 = reshape(xs, shape=[32000, 32])\n"
        "  xp = reshape(add(dot(x2, Wx), b), shape=[1000, 32, 128])\n"
        "  hl, hs = scan(@cell, h0, xp, Wh, n_sequences=1)\n"
        "  loss = sum(hs)\n"
        "  gWx, gWh, gb, gh0 = grad(loss, Wx, Wh, b, h0)\n"
        "  return loss, gWx, gWh, gb, gh0\n"
        "}\n";
    tg_tensor *in[5] = {tensor(TG_DT_F32, 3, (int64_t[]){1000, 32, 32}, 1.0),
                        tensor(TG_DT_F32, 2, (int64_t[]){32, 128}, 0.1),
                        tensor(TG_DT_F32, 2, (int64_t[]){32, 128}, 0.18),
                        tensor(TG_DT_F32, 2, (int64_t[]){128, 128}, 0.09),
                        tensor(TG_DT_F32, 1, (int64_t[]){128}, 0.1)};
    tg_tensor *args[5] = {in[0], in[1], in[2], in[3], in[4]};
    const tg_mode modes[2] = {TG_MODE_VM, TG_MODE_C};
    for (int c = 0; c < 2; c++) {
        tg_module *m = NULL;
        double secs;
        tg_graph *g = parse(src, &m);
        tg_fn *f = compile(g, modes[c], 1, &secs);
        time_calls(c ? "scan-rnn c threads=1" : "scan-rnn vm threads=1", f, args, 5, 5, runs, true);
        tg_fn_free(f);
        tg_module_free(m);
    }
    for (int i = 0; i < 5; i++) tg_tensor_free(in[i]);
}

static void bench_map(int runs) {
    const char *src = "func f(x: f64[64], W: f64[64,64]) {\n"
                      "  y = sum(tanh(dot(W, x)))\n"
                      "  return y\n"
                      "}\n"
                      "func main(xs: f64[10000,64], W: f64[64,64]) {\n"
                      "  ys = map(@f, xs, W)\n"
                      "  return ys\n"
                      "}\n";
    tg_tensor *in[2] = {tensor(TG_DT_F64, 2, (int64_t[]){10000, 64}, 1.0),
                        tensor(TG_DT_F64, 2, (int64_t[]){64, 64}, 0.1)};
    for (int th = 1; th <= 2; th++) {
        tg_module *m = NULL;
        double secs;
        tg_graph *g = parse(src, &m);
        tg_fn *f = compile(g, TG_MODE_VM, th, &secs);
        char name[64];
        snprintf(name, sizeof name, "scan-map vm threads=%d", th);
        time_calls(name, f, in, 2, 1, runs, false);
        tg_fn_free(f);
        tg_module_free(m);
    }
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
}

int main(int argc, char **argv) {
    int runs = 10;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_scan [-n RUNS] [--only garch|rnn|map]\n");
            return 2;
        }
    }
    if (runs < 1) return 2;
    if (!only || !strcmp(only, "garch")) bench_garch(runs);
    if (!only || !strcmp(only, "rnn")) bench_rnn(runs);
    if (!only || !strcmp(only, "map")) bench_map(runs);
    return 0;
}
