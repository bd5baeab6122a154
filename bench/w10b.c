/* w10b.c - benchmark W10b: the chains of examples/bayes_regression.c run with pmap over
 * host devices. The log posterior and gradient of the Bayesian linear regression
 * (examples/bayes_model.h: N = 10,000, P = 20, f64) for 4 chains, called at each of 1,000
 * leapfrog steps (position and momentum updates in C between the calls, as the sampler
 * makes them), the data read-only state of the compiled function:
 *
 *  - pmap devices=2: br_build_logp_pmap over 2 virtual host devices (cpu:0, cpu:1;
 *    tg_devices_configure(2, 0)), 2 chains per rank;
 *  - pmap devices=1: the same pmap with one rank of 4 chains, on cpu:0, under the same
 *    setting (one device's share of the host);
 *  - batched threads=1, threads=2: br_build_logp (no pmap) compiled before any device is
 *    configured, on the host's pool of 1 and 2 threads (for reference).
 *
 * Target: pmap on 2 devices >= 1.85x the time of 1 device. Each run times the 1,000 steps
 * of every configuration once, the configurations interleaved run by run; medians over
 * the runs. Before timing, every configuration's logp and gradient are checked against
 * the batched one's at the same point. bench/w10b_peers.py times NumPy on the same
 * trajectory (2 worker processes against one).
 *
 * usage: bench_w10b [-n RUNS] [--steps S] [--mode vm|c]
 * Prints "w10b pmap devices=2: median <t> ms, min <t> ms (<n> runs)" per configuration
 * (bench_util.h; bench/run.sh reads them), then the speed-up of 2 devices over 1.
 */
#include "tgraph.h"
#include "bench_util.h"
#include "bayes_model.h"

#define CHAINS 4
#define EPS    2e-3 /* leapfrog step: stable for this posterior (sd of beta ~ 0.005) */

enum { PMAP2, PMAP1, BATCH1, BATCH2, NCONF };
static const char *const names[NCONF] = {"w10b pmap devices=2", "w10b pmap devices=1",
                                         "w10b batched threads=1", "w10b batched threads=2"};

static void die(const char *what) {
    fprintf(stderr, "w10b: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_fn *compile(tg_graph *g, tg_mode mode, int nthreads, tg_tensor *const *data) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads);
    tg_fn *f = NULL;
    if (!g || tg_graph_compile(g, &o, &f) != TG_OK ||
        tg_fn_state_set(f, tg_fn_state_find(f, "X"), data[0]) != TG_OK ||
        tg_fn_state_set(f, tg_fn_state_find(f, "y"), data[1]) != TG_OK)
        die("compile");
    return f;
}

/* The starting point of every trajectory (momenta start at 0). */
static void start(double *th) {
    for (int i = 0; i < CHAINS * BR_D; i++) th[i] = 0.01 * (double)(i % 7) - 0.03;
}

/* `steps` leapfrog steps of the 4 chains from start(); the time they took. */
static double trajectory(tg_fn *f, tg_tensor *theta, tg_tensor **out, int steps) {
    double *th = tg_tensor_data(theta), *gr = tg_tensor_data(out[1]), mom[CHAINS * BR_D] = {0};
    start(th);
    double t0 = bench_now();
    if (tg_fn_call_into(f, &theta, 1, out, 2) != TG_OK) die("call");
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < CHAINS * BR_D; i++) {
            mom[i] += (s ? EPS : 0.5 * EPS) * gr[i];
            th[i] += EPS * mom[i];
        }
        if (tg_fn_call_into(f, &theta, 1, out, 2) != TG_OK) die("call");
    }
    double t = bench_now() - t0;
    for (int i = 0; i < CHAINS * BR_D; i++)
        if (!isfinite(th[i]) || !isfinite(gr[i])) die("the trajectory diverged");
    return t;
}

int main(int argc, char **argv) {
    int runs = 10, steps = 1000;
    tg_mode mode = TG_MODE_VM;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "c"))
            mode = TG_MODE_C, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "vm"))
            i++;
        else {
            fprintf(stderr, "usage: bench_w10b [-n RUNS] [--steps S] [--mode vm|c]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 1000 || steps < 1) return 2;
    if (tg_devices_configure(0, 0) != TG_OK) die("devices");
    tg_graph *gs = br_build_simulate(1);
    tg_fn *fs = NULL;
    tg_tensor *data[3] = {0};
    if (!gs || tg_graph_compile(gs, NULL, &fs) != TG_OK ||
        tg_fn_call(fs, NULL, 0, data, 3) != TG_OK)
        die("simulate");

    tg_graph *g[NCONF] = {[BATCH1] = br_build_logp(CHAINS), [BATCH2] = br_build_logp(CHAINS)};
    tg_fn *f[NCONF];
    f[BATCH1] = compile(g[BATCH1], mode, 1, data);
    f[BATCH2] = compile(g[BATCH2], mode, 2, data);
    if (tg_devices_configure(2, 0) != TG_OK) die("devices");
    g[PMAP2] = br_build_logp_pmap(CHAINS, 2);
    g[PMAP1] = br_build_logp_pmap(CHAINS, 1);
    f[PMAP2] = compile(g[PMAP2], mode, 0, data);
    f[PMAP1] = compile(g[PMAP1], mode, 0, data);

    tg_tensor *theta = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){CHAINS, BR_D});
    tg_tensor *out[NCONF][2];
    for (int c = 0; c < NCONF; c++) {
        out[c][0] = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){CHAINS});
        out[c][1] = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){CHAINS, BR_D});
        if (!theta || !out[c][0] || !out[c][1]) die("tensors");
        start(tg_tensor_data(theta));
        if (tg_fn_call_into(f[c], &theta, 1, out[c], 2) != TG_OK) die("call");
    }
    for (int c = 0; c < NCONF; c++) /* every configuration against the batched one */
        for (int k = 0; k < 2; k++) {
            const double *a = tg_tensor_data(out[c][k]), *b = tg_tensor_data(out[BATCH1][k]);
            for (int64_t i = 0; i < tg_tensor_size(out[c][k]); i++)
                if (!(fabs(a[i] - b[i]) <= 1e-10 * fmax(1, fabs(b[i])))) {
                    fprintf(stderr, "w10b: %s: %s[%lld] is %.17g, batched %.17g\n", names[c],
                            k ? "grad" : "logp", (long long)i, a[i], b[i]);
                    return 1;
                }
        }

    double *t[NCONF];
    for (int c = 0; c < NCONF; c++) {
        if (!(t[c] = malloc(sizeof *t[c] * (size_t)runs))) die("out of memory");
        trajectory(f[c], theta, out[c], steps / 10 + 1); /* warm-up */
    }
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < NCONF; c++) t[c][r] = trajectory(f[c], theta, out[c], steps);
    double med[NCONF], best[NCONF];
    for (int c = 0; c < NCONF; c++) {
        med[c] = bench_median(t[c], runs); /* sorts t[c] */
        best[c] = t[c][0];
        bench_report(names[c], t[c], runs);
    }
    printf("w10b: %d chains x %d leapfrog steps; pmap on 2 devices vs 1 device: %.2fx "
           "(target >= 1.85x; fastest runs: %.2fx); vs batched on 2 threads: %.2fx\n",
           CHAINS, steps, med[PMAP1] / med[PMAP2], best[PMAP1] / best[PMAP2],
           med[BATCH2] / med[PMAP2]);
    for (int c = 0; c < NCONF; c++) {
        tg_fn_free(f[c]);
        tg_graph_free(g[c]);
        tg_tensor_free(out[c][0]);
        tg_tensor_free(out[c][1]);
        free(t[c]);
    }
    for (int i = 0; i < 3; i++) tg_tensor_free(data[i]);
    tg_tensor_free(theta);
    tg_fn_free(fs);
    tg_graph_free(gs);
    return 0;
}
