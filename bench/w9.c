/* w9.c - benchmark W9: one evaluation of the log posterior and its gradient of the
 * Bayesian linear regression of examples/bayes_regression.c (examples/bayes_model.h:
 * N = 10,000, P = 20, normal likelihood and priors, f64), the call an HMC sampler makes
 * at every leapfrog step. The data is read-only state of the compiled function; a call
 * takes theta and writes logp and the gradient into preallocated tensors.
 *
 * usage: bench_w9 [-n RUNS] [--chains C] [--threads T] [--mode vm|c] [--profile]
 * Prints one line per thread count, "w9 vm chains=1 threads=1: median ... (N runs)",
 * the configurations interleaved run by run. Each run times a batch of calls (enough for
 * about 20 ms) and reports the time per call.
 */
#include "tgraph.h"
#include "bench_util.h"
#include "bayes_model.h"

static int profile;

static void die(const char *what) {
    fprintf(stderr, "w9: %s: %s\n", what, tg_last_error());
    exit(1);
}

int main(int argc, char **argv) {
    int runs = 20, only = 0;
    int64_t C = 1;
    tg_mode mode = TG_MODE_VM;
    const char *mname = "vm";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--chains") == 0 && i + 1 < argc)
            C = atoll(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profile") == 0)
            profile = 1;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "c"))
            mode = TG_MODE_C, mname = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "vm"))
            mname = argv[++i];
        else {
            fprintf(stderr, "usage: bench_w9 [-n RUNS] [--chains C] [--threads T] [--mode vm|c] "
                            "[--profile]\n");
            return 2;
        }
    }
    if (runs < 1 || C < 1 || C > 1024) return 2;
    tg_graph *gs = br_build_simulate(1), *g = br_build_logp(C);
    if (!gs || !g) return 1;
    tg_fn *fs = NULL;
    tg_tensor *data[3] = {0};
    if (tg_graph_compile(gs, NULL, &fs) != TG_OK || tg_fn_call(fs, NULL, 0, data, 3) != TG_OK)
        die("simulate");
    tg_tensor *theta = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, BR_D});
    tg_tensor *out[2] = {tg_tensor_new(NULL, TG_DT_F64, 1, &C),
                         tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, BR_D})};
    double *th = tg_tensor_data(theta);
    for (int64_t i = 0; i < C * BR_D; i++) th[i] = 0.01 * (double)(i % 7) - 0.03;

    int nconf = 0, ths[2];
    for (int t = 1; t <= 2; t++)
        if (!only || t == only) ths[nconf++] = t;
    tg_fn *f[2];
    double *t[2];
    long batch = 1;
    for (int c = 0; c < nconf; c++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = ths[c], .profile = profile);
        if (tg_graph_compile(g, &o, &f[c]) != TG_OK ||
            tg_fn_state_set(f[c], tg_fn_state_find(f[c], "X"), data[0]) != TG_OK ||
            tg_fn_state_set(f[c], tg_fn_state_find(f[c], "y"), data[1]) != TG_OK)
            die("compile");
        t[c] = malloc(sizeof *t[c] * (size_t)runs);
        for (int w = 0; w < 3; w++)
            if (tg_fn_call_into(f[c], &theta, 1, out, 2) != TG_OK) die("call");
        if (!isfinite(tg_tensor_get_f64(out[0], 0))) die("logp is not finite");
        if (c == 0) { /* calls per timed run: about 20 ms worth */
            double t0 = bench_now();
            for (int k = 0; k < 10; k++) tg_fn_call_into(f[c], &theta, 1, out, 2);
            double per = (bench_now() - t0) / 10;
            batch = per > 0 ? (long)(0.02 / per) : 1000;
            if (batch < 1) batch = 1;
        }
        if (profile) tg_fn_profile_reset(f[c]);
    }
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < nconf; c++) {
            double t0 = bench_now();
            for (long k = 0; k < batch; k++) tg_fn_call_into(f[c], &theta, 1, out, 2);
            t[c][r] = (bench_now() - t0) / (double)batch;
        }
    for (int c = 0; c < nconf; c++) {
        char name[64];
        snprintf(name, sizeof name, "w9 %s chains=%lld threads=%d", mname, (long long)C, ths[c]);
        qsort(t[c], (size_t)runs, sizeof *t[c], bench_cmp);
        double med = runs % 2 ? t[c][runs / 2] : 0.5 * (t[c][runs / 2 - 1] + t[c][runs / 2]);
        printf("%s: median %.3f us, min %.3f us (%d runs of %ld calls)\n", name, med * 1e6,
               t[c][0] * 1e6, runs, batch);
        if (profile) tg_fn_profile_print(f[c], stdout);
        tg_fn_free(f[c]);
        free(t[c]);
    }
    for (int i = 0; i < 3; i++) tg_tensor_free(data[i]);
    tg_tensor_free(theta);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    tg_fn_free(fs);
    tg_graph_free(gs);
    tg_graph_free(g);
    return 0;
}
