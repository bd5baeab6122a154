/* blas.c - benchmarks of the BLAS lowering (W2, W3, W4, W7 and a linear layer), each beside
 * the same work done by direct CBLAS calls in the same process; bench/blas_peers.py times
 * NumPy on the same workloads.
 *
 *  W2   p = 0.5 X@Y + 2 Z0 (n = 256, 1024; f32, f64). tgraph lowers it to one gemm whose
 *       accumulator Z0 (an input) is copied into the output first; the CBLAS peer does
 *       the same work: memcpy of Z0 and one gemm (alpha 0.5, beta 2).
 *  W3   A@x + b, n = 4096 f64, and A@x[::-1] + b: one gemv; a reversed x is BLAS's
 *       negative increment (the CBLAS peer: memcpy of b, dgemv with incx 1 or -1).
 *  W4   A + 0.1 outer(x, y), n = 2048 f64: one ger, which the VM computes row by row
 *       from the kept A (one pass over the matrix); the CBLAS peer is memcpy of A and one
 *       dger (two passes).
 *  W7   matmul of 64x128x128 by 64x128x128 f64: a loop of gemm over the pool; the CBLAS
 *       peer is a loop of 64 dgemm.
 *  W10  a linear layer's forward and backward (--only lin, lin_sgd): h = tanh(x@W + b),
 *       loss = sum(h * t), gradients of W and b (x: 256x512, W: 512x256, f32); the CBLAS
 *       peer computes the same with two sgemm and C loops. lin_sgd: the same step ending
 *       with the update W - 0.01 gW, b - 0.01 gb (the lowering makes gW's product and the
 *       update one gemm).
 * Every tgraph configuration runs with the lowering and with --no-blas (tg_compile_opts
 * no_blas), at 1 and 2 threads (tgraph's pool; the CBLAS peer sets OpenBLAS's thread
 * count). Results are checked against the CBLAS peer before timing. Outputs go into
 * preallocated tensors (tg_fn_call_into) after two warm-up calls.
 *
 * usage: bench_blas [-n RUNS] [--only w2|w3|w4|w7|lin|lin_sgd] [--threads T] [--cpu]
 *                   [--side tg|cblas|both]
 * (--cpu: the process's CPU time instead of the wall clock, as bench_w1 --cpu: on a loaded
 * machine it leaves out the time other processes ran)
 * Prints one line per configuration in bench/run.sh's format, "WORKLOAD WHO KEY=VALUE...":
 * "w2 vm n=256 dtype=f64 threads=1: median ... (N runs)", WHO being vm (tgraph),
 * vm-no-blas (tgraph without the lowering) or cblas.
 */
#include "tgraph.h"
#include "bench_util.h"

#include <cblas.h>
#include <math.h>
#include <time.h>

static int runs = 20, only_threads = 0, cpu = 0;
static bool side_tg = true, side_peer = true; /* --side tg | cblas | both */
static const char *only = NULL;

static void blas_threads(int n) {
#if defined(OPENBLAS_VERSION)
    openblas_set_num_threads(n);
#else
    (void)n;
#endif
}

/* After a multi-threaded CBLAS call OpenBLAS's worker threads keep spinning for a while
 * (its thread timeout, 2^28 cycles by default, about 0.1 s) waiting for more work: tgraph's
 * next calls would share the cores with them and run at one thread's speed. Waits that
 * out, so that each side is timed on an otherwise idle machine. */
static void spin_out(void) {
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void die(const char *what) {
    fprintf(stderr, "bench_blas: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_graph *parse_func(tg_module **m, const char *src) {
    if (tg_module_parse(NULL, src, strlen(src), "bench.tg", m) != TG_OK) die("parse");
    return tg_module_func(*m, 0);
}

static tg_fn *compile(tg_graph *g, int threads, bool no_blas) {
    tg_compile_opts o =
        TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = threads, .no_blas = no_blas);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK) die("compile");
    return f;
}

static void fill(tg_tensor *t, uint64_t seed) {
    int64_t n = 1;
    for (int d = 0; d < tg_tensor_ndim(t); d++) n *= tg_tensor_shape(t)[d];
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double v = (double)(s >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        if (tg_tensor_dtype(t) == TG_DT_F32)
            ((float *)tg_tensor_data(t))[i] = (float)v;
        else
            ((double *)tg_tensor_data(t))[i] = v;
    }
}

static double max_rel_diff(const tg_tensor *a, const void *b, int64_t n) {
    double m = 0;
    bool f32 = tg_tensor_dtype(a) == TG_DT_F32;
    for (int64_t i = 0; i < n; i++) {
        const void *pa = tg_tensor_data(a);
        double x = f32 ? ((const float *)pa)[i] : ((const double *)pa)[i];
        double y = f32 ? ((const float *)b)[i] : ((const double *)b)[i];
        m = fmax(m, fabs(x - y) / (1.0 + fabs(y)));
    }
    return m;
}

/* A workload: a tgraph function and a direct CBLAS version of the same work. */
typedef struct work {
    const char *name; /* workload (first word of the result lines) */
    const char *kv;   /* its KEY=VALUE words */
    tg_graph *g;
    tg_tensor **in;
    int nin;
    tg_tensor **out;
    int nout;
    void (*peer)(struct work *w); /* the CBLAS version, writing peer_out */
    void *peer_out;               /* compared with out[0] */
    int64_t peer_n;               /* its elements */
    void *ctx;                    /* the peer's data */
} work;

static double clock_now(void) { return cpu ? bench_cpu_now() : bench_now(); }

static void call_tg(tg_fn *f, work *w) {
    if (tg_fn_call_into(f, w->in, w->nin, w->out, w->nout) != TG_OK) die(w->name);
}

/* Times tgraph (with and without the lowering) and the CBLAS peer at 1 and 2 threads,
 * interleaving the calls in rounds of 3: the lowered function, the one compiled with
 * no_blas, then the CBLAS peer (side both), so that the two tgraph versions, whose ratio
 * W10 judges, see the same machine; or the tgraph side or the peer alone (side tg, side
 * cblas: run.sh runs the two sides as separate processes, interleaved by rounds, so that
 * OpenBLAS's worker threads, which keep spinning after a multi-threaded call, never share
 * the cores with tgraph's calls). The check against the peer runs it on one thread. */
static void run_work(work *w) {
    double *tt[2], *tp = malloc(sizeof *tp * (size_t)runs);
    for (int nb = 0; nb < 2; nb++) tt[nb] = malloc(sizeof *tt[nb] * (size_t)runs);
    for (int th = 1; th <= 2; th++) {
        if (only_threads && th != only_threads) continue;
        tg_fn *f[2] = {NULL, NULL};
        for (int nb = 0; nb < 2 && side_tg; nb++) {
            f[nb] = compile(w->g, th, nb == 1);
            for (int k = 0; k < 2; k++) call_tg(f[nb], w);
            blas_threads(1);
            w->peer(w);
            double err = max_rel_diff(w->out[0], w->peer_out, w->peer_n);
            if (err > (tg_tensor_dtype(w->out[0]) == TG_DT_F32 ? 1e-3 : 1e-9)) {
                fprintf(stderr, "bench_blas: %s %s%s: tgraph and CBLAS differ (%g)\n", w->name,
                        w->kv, nb ? " (no_blas)" : "", err);
                exit(1);
            }
        }
        for (int r = 0; r < runs;) {
            int k0 = r, r1 = r + 3 < runs ? r + 3 : runs;
            blas_threads(1);
            for (int nb = 0; nb < 2 && side_tg; nb++)
                for (int q = k0; q < r1; q++) {
                    double t0 = clock_now();
                    call_tg(f[nb], w);
                    tt[nb][q] = clock_now() - t0;
                }
            r = r1;
            if (!side_peer) continue;
            blas_threads(th);
            for (int q = k0; q < r1; q++) {
                double t0 = clock_now();
                w->peer(w);
                tp[q] = clock_now() - t0;
            }
            if (th > 1 && side_tg) spin_out();
        }
        blas_threads(1);
        char name[160];
        for (int nb = 0; nb < 2 && side_tg; nb++) {
            snprintf(name, sizeof name, "%s %s %s threads=%d%s", w->name, nb ? "vm-no-blas" : "vm",
                     w->kv, th, cpu ? " cpu-time" : "");
            bench_report(name, tt[nb], runs);
            tg_fn_free(f[nb]);
        }
        if (side_peer) {
            snprintf(name, sizeof name, "%s cblas %s threads=%d%s", w->name, w->kv, th,
                     cpu ? " cpu-time" : "");
            bench_report(name, tp, runs);
        }
    }
    for (int nb = 0; nb < 2; nb++) free(tt[nb]);
    free(tp);
}

static tg_tensor *tensor(tg_dtype dt, int nd, const int64_t *shape, uint64_t seed) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    if (!t) die("tensor");
    if (seed) fill(t, seed);
    return t;
}

static void free_work(work *w, tg_module *m) {
    for (int i = 0; i < w->nin; i++) tg_tensor_free(w->in[i]);
    for (int i = 0; i < w->nout; i++) tg_tensor_free(w->out[i]);
    free(w->peer_out);
    tg_module_free(m);
}

/* ---- W2 ---- */

static void w2_peer(work *w) {
    int64_t n = tg_tensor_shape(w->in[0])[0];
    size_t es = tg_tensor_dtype(w->in[0]) == TG_DT_F32 ? 4 : 8;
    memcpy(w->peer_out, tg_tensor_data(w->in[2]), (size_t)(n * n) * es);
    if (es == 8)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 0.5,
                    tg_tensor_data(w->in[0]), (int)n, tg_tensor_data(w->in[1]), (int)n, 2.0,
                    w->peer_out, (int)n);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 0.5f,
                    tg_tensor_data(w->in[0]), (int)n, tg_tensor_data(w->in[1]), (int)n, 2.0f,
                    w->peer_out, (int)n);
}

static void bench_w2(void) {
    int64_t sizes[] = {256, 1024};
    for (int si = 0; si < 2; si++)
        for (int d = 0; d < 2; d++) {
            int64_t n = sizes[si];
            const char *dt = d ? "f32" : "f64";
            tg_dtype t = d ? TG_DT_F32 : TG_DT_F64;
            char src[512], name[64];
            snprintf(src, sizeof src,
                     "func w2(X: %s[%lld,%lld], Y: %s[%lld,%lld], Z0: %s[%lld,%lld]) {\n"
                     "  p = add(mul(0.5, dot(X, Y)), mul(2, Z0))\n  return p\n}\n",
                     dt, (long long)n, (long long)n, dt, (long long)n, (long long)n, dt,
                     (long long)n, (long long)n);
            snprintf(name, sizeof name, "n=%lld dtype=%s", (long long)n, dt);
            tg_module *m = NULL;
            int64_t sh[2] = {n, n};
            tg_tensor *in[3] = {tensor(t, 2, sh, 1), tensor(t, 2, sh, 2), tensor(t, 2, sh, 3)};
            tg_tensor *out[1] = {tensor(t, 2, sh, 0)};
            work w = {.name = "w2",
                      .kv = name,
                      .g = parse_func(&m, src),
                      .in = in,
                      .nin = 3,
                      .out = out,
                      .nout = 1,
                      .peer = w2_peer,
                      .peer_n = n * n};
            w.peer_out = malloc((size_t)(n * n) * (d ? 4 : 8));
            run_work(&w);
            free_work(&w, m);
        }
}

/* ---- W3 ---- */

static void w3_peer(work *w) {
    int64_t n = tg_tensor_shape(w->in[0])[0];
    int rev = *(int *)w->ctx;
    memcpy(w->peer_out, tg_tensor_data(w->in[2]), (size_t)n * 8);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, tg_tensor_data(w->in[0]), (int)n,
                tg_tensor_data(w->in[1]), rev ? -1 : 1, 1.0, w->peer_out, 1);
}

static void bench_w3(void) {
    int64_t n = 4096;
    for (int rev = 0; rev < 2; rev++) {
        char src[512], name[64];
        snprintf(src, sizeof src,
                 "func w3(A: f64[%lld,%lld], x: f64[%lld], b: f64[%lld]) {\n"
                 "  p = add(dot(A, x%s), b)\n  return p\n}\n",
                 (long long)n, (long long)n, (long long)n, (long long)n, rev ? "[::-1]" : "");
        snprintf(name, sizeof name, "n=%lld x=%s", (long long)n, rev ? "reversed" : "forward");
        tg_module *m = NULL;
        int64_t sh[2] = {n, n};
        tg_tensor *in[3] = {tensor(TG_DT_F64, 2, sh, 4), tensor(TG_DT_F64, 1, &n, 5),
                            tensor(TG_DT_F64, 1, &n, 6)};
        tg_tensor *out[1] = {tensor(TG_DT_F64, 1, &n, 0)};
        work w = {.name = "w3",
                  .kv = name,
                  .g = parse_func(&m, src),
                  .in = in,
                  .nin = 3,
                  .out = out,
                  .nout = 1,
                  .peer = w3_peer,
                  .peer_n = n,
                  .ctx = &rev};
        w.peer_out = malloc((size_t)n * 8);
        run_work(&w);
        free_work(&w, m);
    }
}

/* ---- W4 ---- */

static void w4_peer(work *w) {
    int64_t n = tg_tensor_shape(w->in[0])[0];
    memcpy(w->peer_out, tg_tensor_data(w->in[0]), (size_t)(n * n) * 8);
    cblas_dger(CblasRowMajor, (int)n, (int)n, 0.1, tg_tensor_data(w->in[1]), 1,
               tg_tensor_data(w->in[2]), 1, w->peer_out, (int)n);
}

static void bench_w4(void) {
    int64_t n = 2048;
    char src[512];
    snprintf(src, sizeof src,
             "func w4(A: f64[%lld,%lld], x: f64[%lld], y: f64[%lld]) {\n"
             "  p = add(A, mul(0.1, outer(x, y)))\n  return p\n}\n",
             (long long)n, (long long)n, (long long)n, (long long)n);
    tg_module *m = NULL;
    int64_t sh[2] = {n, n};
    tg_tensor *in[3] = {tensor(TG_DT_F64, 2, sh, 7), tensor(TG_DT_F64, 1, &n, 8),
                        tensor(TG_DT_F64, 1, &n, 9)};
    tg_tensor *out[1] = {tensor(TG_DT_F64, 2, sh, 0)};
    work w = {.name = "w4",
              .kv = "n=2048",
              .g = parse_func(&m, src),
              .in = in,
              .nin = 3,
              .out = out,
              .nout = 1,
              .peer = w4_peer,
              .peer_n = n * n};
    w.peer_out = malloc((size_t)(n * n) * 8);
    run_work(&w);
    free_work(&w, m);
}

/* ---- W7 ---- */

static void w7_peer(work *w) {
    const double *a = tg_tensor_data(w->in[0]), *b = tg_tensor_data(w->in[1]);
    double *c = w->peer_out;
    for (int k = 0; k < 64; k++)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 128, 128, 128, 1.0,
                    a + k * 128 * 128, 128, b + k * 128 * 128, 128, 0.0, c + k * 128 * 128, 128);
}

static void bench_w7(void) {
    const char *src = "func w7(A: f64[64,128,128], B: f64[64,128,128]) {\n"
                      "  p = matmul(A, B)\n  return p\n}\n";
    tg_module *m = NULL;
    int64_t sh[3] = {64, 128, 128};
    tg_tensor *in[2] = {tensor(TG_DT_F64, 3, sh, 10), tensor(TG_DT_F64, 3, sh, 11)};
    tg_tensor *out[1] = {tensor(TG_DT_F64, 3, sh, 0)};
    work w = {.name = "w7",
              .kv = "batch=64x128x128",
              .g = parse_func(&m, src),
              .in = in,
              .nin = 2,
              .out = out,
              .nout = 1,
              .peer = w7_peer,
              .peer_n = 64 * 128 * 128};
    w.peer_out = malloc((size_t)(64 * 128 * 128) * 8);
    run_work(&w);
    free_work(&w, m);
}

/* ---- linear layer, forward and backward ---- */

enum { LB = 256, LI = 512, LO = 256 };

typedef struct lin_peer_data {
    float *h, *gh, *gb;
} lin_peer_data;

static void lin_peer(work *w) {
    lin_peer_data *d = w->ctx;
    const float *x = tg_tensor_data(w->in[0]), *W = tg_tensor_data(w->in[1]);
    const float *b = tg_tensor_data(w->in[2]), *t = tg_tensor_data(w->in[3]);
    for (int i = 0; i < LB; i++) memcpy(d->h + i * LO, b, sizeof(float) * LO);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, LB, LO, LI, 1.0f, x, LI, W, LO, 1.0f,
                d->h, LO);
    memset(d->gb, 0, sizeof(float) * LO);
    for (int i = 0; i < LB * LO; i++) {
        float h = tanhf(d->h[i]);
        d->gh[i] = t[i] * (1.0f - h * h);
        d->gb[i % LO] += d->gh[i];
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, LI, LO, LB, 1.0f, x, LI, d->gh, LO, 0.0f,
                w->peer_out, LO);
}

/* With `sgd`, the step also updates the parameters (W - 0.01 gW, b - 0.01 gb), which the
 * lowering folds into the gradient's gemm. */
static void lin_sgd_peer(work *w) {
    lin_peer_data *d = w->ctx;
    const float *x = tg_tensor_data(w->in[0]), *W = tg_tensor_data(w->in[1]);
    const float *b = tg_tensor_data(w->in[2]), *t = tg_tensor_data(w->in[3]);
    for (int i = 0; i < LB; i++) memcpy(d->h + i * LO, b, sizeof(float) * LO);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, LB, LO, LI, 1.0f, x, LI, W, LO, 1.0f,
                d->h, LO);
    memset(d->gb, 0, sizeof(float) * LO);
    for (int i = 0; i < LB * LO; i++) {
        float h = tanhf(d->h[i]);
        d->gh[i] = t[i] * (1.0f - h * h);
        d->gb[i % LO] += d->gh[i];
    }
    memcpy(w->peer_out, W, sizeof(float) * LI * LO);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, LI, LO, LB, -0.01f, x, LI, d->gh, LO, 1.0f,
                w->peer_out, LO);
}

static void bench_lin(bool sgd) {
    const char *src = sgd ? "func lin(x: f32[256,512], W: f32[512,256], b: f32[256], "
                            "t: f32[256,256]) {\n"
                            "  h = tanh(add(dot(x, W), b))\n"
                            "  loss = sum(mul(h, t))\n"
                            "  gW, gb = grad(loss, W, b)\n"
                            "  W2 = sub(W, mul(0.01, gW))\n"
                            "  b2 = sub(b, mul(0.01, gb))\n"
                            "  return W2, b2, loss\n}\n"
                          : "func lin(x: f32[256,512], W: f32[512,256], b: f32[256], "
                            "t: f32[256,256]) {\n"
                            "  h = tanh(add(dot(x, W), b))\n"
                            "  loss = sum(mul(h, t))\n"
                            "  gW, gb = grad(loss, W, b)\n"
                            "  return gW, gb, loss\n}\n";
    tg_module *m = NULL;
    tg_tensor *in[4] = {tensor(TG_DT_F32, 2, (int64_t[]){LB, LI}, 12),
                        tensor(TG_DT_F32, 2, (int64_t[]){LI, LO}, 13),
                        tensor(TG_DT_F32, 1, (int64_t[]){LO}, 14),
                        tensor(TG_DT_F32, 2, (int64_t[]){LB, LO}, 15)};
    tg_tensor *out[3] = {tensor(TG_DT_F32, 2, (int64_t[]){LI, LO}, 0),
                         tensor(TG_DT_F32, 1, (int64_t[]){LO}, 0), tensor(TG_DT_F32, 0, NULL, 0)};
    lin_peer_data d = {malloc(sizeof(float) * LB * LO), malloc(sizeof(float) * LB * LO),
                       malloc(sizeof(float) * LO)};
    work w = {.name = "w10",
              .kv = sgd ? "linear=fwd+bwd+sgd" : "linear=fwd+bwd",
              .g = parse_func(&m, src),
              .in = in,
              .nin = 4,
              .out = out,
              .nout = 3,
              .peer = sgd ? lin_sgd_peer : lin_peer,
              .peer_n = LI * LO,
              .ctx = &d};
    w.peer_out = malloc(sizeof(float) * LI * LO);
    run_work(&w);
    free(d.h);
    free(d.gh);
    free(d.gb);
    free_work(&w, m);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only_threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--side") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            side_tg = strcmp(v, "cblas") != 0;
            side_peer = strcmp(v, "tg") != 0;
        } else if (strcmp(argv[i], "--cpu") == 0)
            cpu = 1;
        else {
            fprintf(stderr, "usage: bench_blas [-n RUNS] [--only w2|w3|w4|w7|lin|lin_sgd] "
                            "[--threads T] [--cpu] [--side tg|cblas|both]\n");
            return 2;
        }
    }
    if (runs < 1) return 2;
    struct {
        const char *name;
        void (*fn)(void);
    } all[] = {{"w2", bench_w2}, {"w3", bench_w3}, {"w4", bench_w4}, {"w7", bench_w7}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!only || strcmp(only, all[i].name) == 0) all[i].fn();
    for (int sgd = 0; sgd <= 1; sgd++)
        if (!only || strcmp(only, sgd ? "lin_sgd" : "lin") == 0) bench_lin(sgd);
    return 0;
}
