/* w6.c - benchmark W6: one training step of the Fashion-MNIST MLP of the demo
 * (examples/mlp_step.h): 784-256-10, relu, softmax cross-entropy, Adam, batch 256;
 * forward, gradients and the in-place update of the parameters and moments (state), in one
 * call of one compiled function. The batch is synthetic (fixed pseudo-random pixels and
 * labels): the time does not depend on the values.
 *
 * usage: bench_w6 [-n RUNS] [--batch B] [--threads T] [--mode vm|c] [--profile]
 * Prints one line per thread count, "w6 vm threads=1: median ... (N runs)", the two
 * configurations interleaved run by run so both see the same machine load.
 */
#include "tgraph.h"
#include "bench_util.h"
#include "mlp_step.h"

static int profile;

/* the synthetic batch's pixels and labels (xorshift64*) */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static tg_fn *compile_step(tg_graph *g, tg_mode mode, int threads) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = threads, .profile = profile);
    tg_fn *f = NULL;
    if (tg_graph_compile(g, &o, &f) != TG_OK || init_params(f, 1) != TG_OK) {
        fprintf(stderr, "w6: %s\n", tg_last_error());
        exit(1);
    }
    return f;
}

int main(int argc, char **argv) {
    int runs = 20, only = 0;
    int64_t B = 256;
    tg_mode mode = TG_MODE_VM;
    const char *mname = "vm";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            B = atoll(argv[++i]);
        else if (strcmp(argv[i], "--profile") == 0)
            profile = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "c"))
            mode = TG_MODE_C, mname = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "vm"))
            mname = argv[++i];
        else {
            fprintf(stderr, "usage: bench_w6 [-n RUNS] [--batch B] [--threads T] [--mode vm|c]\n"
                            "                [--profile]\n");
            return 2;
        }
    }
    if (runs < 1 || B < 1) return 2;
    tg_graph *g = build_step(B);
    if (!g) return 1;
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){B, NIN});
    tg_tensor *y = tg_tensor_new(NULL, TG_DT_I64, 1, &B);
    tg_tensor *loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    tg_tensor *lr = tg_tensor_from_data(NULL, TG_DT_F32, 0, NULL, &(float){1e-3f});
    uint64_t s = 42;
    uint8_t *xd = tg_tensor_data(x);
    int64_t *yd = tg_tensor_data(y);
    for (int64_t i = 0; i < B * NIN; i++) xd[i] = (uint8_t)(rng_next(&s) >> 56);
    for (int64_t i = 0; i < B; i++) yd[i] = (int64_t)(rng_next(&s) % NOUT);

    int nconf = 0, ths[2];
    for (int th = 1; th <= 2; th++)
        if (!only || th == only) ths[nconf++] = th;
    tg_fn *f[2];
    double *t[2];
    tg_tensor *in[3] = {x, y, lr};
    for (int c = 0; c < nconf; c++) {
        f[c] = compile_step(g, mode, ths[c]);
        t[c] = malloc(sizeof *t[c] * (size_t)runs);
        for (int w = 0; w < 3; w++)
            if (tg_fn_call_into(f[c], in, 3, &loss, 1) != TG_OK) {
                fprintf(stderr, "w6: %s\n", tg_last_error());
                return 1;
            }
        double l = tg_tensor_get_f64(loss, 0);
        if (!(l > 0 && l < 20)) {
            fprintf(stderr, "w6: implausible loss %g\n", l);
            return 1;
        }
        if (profile) tg_fn_profile_reset(f[c]); /* the warm-up made libxsmm's kernels */
    }
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < nconf; c++) {
            double t0 = bench_now();
            tg_fn_call_into(f[c], in, 3, &loss, 1);
            t[c][r] = bench_now() - t0;
        }
    for (int c = 0; c < nconf; c++) {
        char name[64];
        snprintf(name, sizeof name, "w6 %s threads=%d", mname, ths[c]);
        bench_report(name, t[c], runs);
        if (profile) tg_fn_profile_print(f[c], stdout);
        tg_fn_free(f[c]);
        free(t[c]);
    }
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_tensor_free(loss);
    tg_tensor_free(lr);
    tg_graph_free(g);
    return 0;
}
