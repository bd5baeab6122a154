/* linalg.c - the benchmarks of the Blockwise LAPACK ops (bench/linalg_peers.py times NumPy
 * on the same work):
 *   W12: batched Cholesky plus solve: 256 symmetric positive definite 32 x 32 f64 matrices
 *        A and right-hand sides B [256, 32, 1]: L = cholesky(A) and X = solve(A, B), as
 *        np.linalg.cholesky and np.linalg.solve compute them (`w12 vm`), and the same
 *        outputs with X = cho_solve(L, B), which reuses the factor (`w12 vm-cho`).
 *   W13: a Gaussian-process marginal likelihood and its gradient: N = 500 points, a squared
 *        exponential kernel with three hyperparameters (log length scale, log signal and
 *        log noise standard deviations), nll = y^T K^-1 y / 2 + sum(log(diag(L))) +
 *        N log(2 pi) / 2 with L = cholesky(K), and d nll / d theta by tgraph's grad.
 *   MVN: a batched Gaussian log-density, W12's 256 matrices A as covariances and points
 *        x [256, 32, 1]: L = cholesky(A), z = L^-1 x (solve_triangular), and
 *        -z^T z / 2 - sum(log(diag(L))) - 32 log(2 pi) / 2 per block, written with diag
 *        (32 logarithms per block). The fuse pass makes it one node that runs the
 *        factorization, the solve, the diagonal and the sums block by block (`mvn vm`);
 *        `mvn unfused` is the same program with a batch extent of '?', which keeps the
 *        LAPACK ops out of groups: each op runs over the whole batch in turn.
 *
 * usage: bench_linalg [-n RUNS] [--threads T]
 * Prints one line per configuration, "w12 vm threads=1: median ... (N runs of K calls)",
 * the configurations interleaved run by run; each run times a batch of calls (enough for
 * about 20 ms) and reports the time per call.
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>

#define W12_B 256
#define W12_N 32
#define W13_N 500

static void die(const char *what) {
    fprintf(stderr, "bench_linalg: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_graph *parse(tg_module **m, const char *src) {
    if (tg_module_parse(NULL, src, strlen(src), "linalg.tg", m) != TG_OK) die("parse");
    return tg_module_find(*m, "main");
}

/* A deterministic value in [-1, 1). */
static double urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1.0p-52 - 1.0;
}

typedef struct conf {
    char name[64];
    tg_fn *f;
    tg_tensor **in, **out;
    int nin, nout;
    double *t;
} conf;

int main(int argc, char **argv) {
    int runs = 20, only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_linalg [-n RUNS] [--threads T]\n");
            return 2;
        }
    }
    if (runs < 1) return 2;
    char src[2048];
    /* W12's inputs: A = M M^T + n I per block, B uniform */
    tg_tensor *A = tg_tensor_new(NULL, TG_DT_F64, 3, (int64_t[]){W12_B, W12_N, W12_N});
    tg_tensor *B = tg_tensor_new(NULL, TG_DT_F64, 3, (int64_t[]){W12_B, W12_N, 1});
    double *a = tg_tensor_data(A), *b = tg_tensor_data(B), m[W12_N * W12_N];
    uint64_t s = 12;
    for (int k = 0; k < W12_B; k++) {
        for (int e = 0; e < W12_N * W12_N; e++) m[e] = urand(&s);
        for (int i = 0; i < W12_N; i++)
            for (int j = 0; j < W12_N; j++) {
                double v = i == j ? W12_N : 0.0;
                for (int q = 0; q < W12_N; q++) v += m[i * W12_N + q] * m[j * W12_N + q];
                a[(k * W12_N + i) * W12_N + j] = v;
            }
        for (int i = 0; i < W12_N; i++) b[k * W12_N + i] = urand(&s);
    }
    /* W13's inputs: x sorted in [0, 10), y a smooth function plus a wiggle, theta */
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){W13_N});
    tg_tensor *y = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){W13_N});
    tg_tensor *theta = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3});
    double *xv = tg_tensor_data(x), *yv = tg_tensor_data(y), *th = tg_tensor_data(theta);
    for (int i = 0; i < W13_N; i++) {
        xv[i] = 10.0 * i / W13_N;
        yv[i] = sin(xv[i]) + 0.1 * sin(37.0 * i); /* as linalg_peers.py */
    }
    th[0] = log(1.2), th[1] = log(0.9), th[2] = log(0.1);

    tg_module *m12 = NULL, *m12c = NULL, *m13 = NULL, *mm = NULL, *mmu = NULL;
    snprintf(src, sizeof src,
             "func main(A: f64[%d,%d,%d], B: f64[%d,%d,1]) {\n"
             "  L = cholesky(A)\n  X = %s\n  return L, X\n}\n",
             W12_B, W12_N, W12_N, W12_B, W12_N, "solve(A, B)");
    tg_graph *g12 = parse(&m12, src);
    snprintf(src, sizeof src,
             "func main(A: f64[%d,%d,%d], B: f64[%d,%d,1]) {\n"
             "  L = cholesky(A)\n  X = %s\n  return L, X\n}\n",
             W12_B, W12_N, W12_N, W12_B, W12_N, "cho_solve(L, B)");
    tg_graph *g12c = parse(&m12c, src);
    snprintf(src, sizeof src,
             "func main(theta: f64[3], x: f64[%d], y: f64[%d]) {\n"
             "  ell = exp(theta[0])\n"
             "  sf2 = exp(mul(2.0, theta[1]))\n"
             "  sn2 = exp(mul(2.0, theta[2]))\n"
             "  d = sub(expand_dims(x, axis=1), expand_dims(x, axis=0))\n"
             "  I = eye(n=%d)\n"
             "  K = add(mul(sf2, exp(div(mul(-0.5, mul(d, d)), mul(ell, ell)))), mul(sn2, I))\n"
             "  L = cholesky(K)\n"
             "  alpha = cho_solve(L, y)\n"
             "  logdet = sum(log(diag(L)))\n"
             "  nll = add(add(mul(0.5, sum(mul(y, alpha))), logdet), %.17g)\n"
             "  g = grad(nll, theta)\n"
             "  return nll, g\n}\n",
             W13_N, W13_N, W13_N, 0.5 * W13_N * log(2 * M_PI));
    tg_graph *g13 = parse(&m13, src);
    const char *mvn = "func main(A: f64[%s,%d,%d], x: f64[%s,%d,1]) {\n"
                      "  L = cholesky(A)\n"
                      "  z = solve_triangular(L, x, lower=true)\n"
                      "  ld = sum(log(diag(L)), axis=-1)\n"
                      "  q = sum(mul(z, z), axis=[1, 2])\n"
                      "  lp = sub(sub(mul(-0.5, q), ld), %.17g)\n"
                      "  return lp\n}\n";
    char bs[16];
    snprintf(bs, sizeof bs, "%d", W12_B);
    snprintf(src, sizeof src, mvn, bs, W12_N, W12_N, bs, W12_N, 0.5 * W12_N * log(2 * M_PI));
    tg_graph *gm = parse(&mm, src);
    snprintf(src, sizeof src, mvn, "?", W12_N, W12_N, "?", W12_N, 0.5 * W12_N * log(2 * M_PI));
    tg_graph *gmu = parse(&mmu, src);

    tg_tensor *in12[2] = {A, B}, *in13[3] = {theta, x, y};
    tg_tensor *outm[1] = {tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){W12_B})};
    tg_tensor *out12[2] = {tg_tensor_new(NULL, TG_DT_F64, 3, (int64_t[]){W12_B, W12_N, W12_N}),
                           tg_tensor_new(NULL, TG_DT_F64, 3, (int64_t[]){W12_B, W12_N, 1})};
    tg_tensor *out13[2] = {tg_tensor_new(NULL, TG_DT_F64, 0, NULL),
                           tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){3})};
    conf cs[10];
    int nc = 0;
    for (int t = 1; t <= 2; t++) {
        if (only && t != only) continue;
        struct {
            const char *name;
            tg_graph *g;
            tg_tensor **in, **out;
            int nin, nout;
        } w[] = {{"w12 vm", g12, in12, out12, 2, 2},
                 {"w12 vm-cho", g12c, in12, out12, 2, 2},
                 {"w13 vm", g13, in13, out13, 3, 2},
                 {"mvn vm", gm, in12, outm, 2, 1},
                 {"mvn unfused", gmu, in12, outm, 2, 1}};
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
            conf *c = &cs[nc++];
            snprintf(c->name, sizeof c->name, "%s threads=%d", w[k].name, t);
            tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = t);
            if (tg_graph_compile(w[k].g, &o, &c->f) != TG_OK) die("compile");
            c->in = w[k].in, c->out = w[k].out, c->nin = w[k].nin, c->nout = w[k].nout;
            c->t = malloc(sizeof *c->t * (size_t)runs);
        }
    }
    long batch[10];
    for (int c = 0; c < nc; c++) { /* warm up, then calls per timed run: about 20 ms */
        for (int k = 0; k < 3; k++)
            if (tg_fn_call_into(cs[c].f, cs[c].in, cs[c].nin, cs[c].out, cs[c].nout) != TG_OK)
                die("call");
        double t0 = bench_now();
        for (int k = 0; k < 5; k++)
            tg_fn_call_into(cs[c].f, cs[c].in, cs[c].nin, cs[c].out, cs[c].nout);
        double per = (bench_now() - t0) / 5;
        batch[c] = per > 0 ? (long)(0.02 / per) : 1000;
        if (batch[c] < 1) batch[c] = 1;
    }
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < nc; c++) {
            double t0 = bench_now();
            for (long k = 0; k < batch[c]; k++)
                tg_fn_call_into(cs[c].f, cs[c].in, cs[c].nin, cs[c].out, cs[c].nout);
            cs[c].t[r] = (bench_now() - t0) / (double)batch[c];
        }
    for (int c = 0; c < nc; c++) {
        qsort(cs[c].t, (size_t)runs, sizeof *cs[c].t, bench_cmp);
        double med =
            runs % 2 ? cs[c].t[runs / 2] : 0.5 * (cs[c].t[runs / 2 - 1] + cs[c].t[runs / 2]);
        printf("%s: median %.3f us, min %.3f us (%d runs of %ld calls)\n", cs[c].name, med * 1e6,
               cs[c].t[0] * 1e6, runs, batch[c]);
        tg_fn_free(cs[c].f);
        free(cs[c].t);
    }
    /* the values the peers check theirs against */
    printf("w13 nll = %.12g, grad = [%.12g, %.12g, %.12g]\n", tg_tensor_get_f64(out13[0], 0),
           tg_tensor_get_f64(out13[1], 0), tg_tensor_get_f64(out13[1], 1),
           tg_tensor_get_f64(out13[1], 2));
    double lps = 0.0;
    for (int k = 0; k < W12_B; k++) lps += tg_tensor_get_f64(outm[0], k);
    printf("mvn sum of log-densities = %.12g\n", lps);
    tg_tensor *all[] = {A, B, x, y, theta, out12[0], out12[1], out13[0], out13[1], outm[0]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tg_tensor_free(all[i]);
    tg_module_free(m12);
    tg_module_free(m12c);
    tg_module_free(m13);
    tg_module_free(mm);
    tg_module_free(mmu);
    return 0;
}
