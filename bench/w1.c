/* w1.c - benchmark W1: y = exp(-x^2/2) * sin(x) + x/2 on 1e7 float64 values.
 *
 * The graph is built with the C API and compiled in vm mode twice: as the optimiser
 * leaves it (the fuse pass makes one fused kernel of it when it fuses), and without the
 * rewrite pipeline (seven separate vector kernels). Each runs with 1 and 2 threads, calls
 * writing into a preallocated output (tg_fn_call_into), after two warm-up calls. The
 * result is checked against a plain C loop before timing.
 *
 * usage: bench_w1 [-n RUNS] [--size N] [--threads T] [--fused-only] [--cpu]
 *   (T: only that thread count; --fused-only skips the unfused configurations, for profiling;
 *   --cpu times the process's CPU time instead of the wall clock: on a loaded machine it
 *   leaves out the time other processes ran, and at T threads it is T times the wall time
 *   of an ideal split)
 * Prints one line per configuration: "w1 vm fused threads=1: median ... (N runs)".
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>

static tg_graph *build(void) {
    tg_graph *g = tg_graph_new(NULL, "w1");
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, (int64_t[]){TG_DIM_UNKNOWN});
    tg_var *e = tg_exp(g, tg_div(g, tg_neg(g, tg_mul(g, x, x)), tg_literal_float(g, 2.0)));
    tg_var *y = tg_add(g, tg_mul(g, e, tg_sin(g, x)), tg_div(g, x, tg_literal_float(g, 2.0)));
    if (!y || tg_graph_set_outputs(g, &y, 1) != TG_OK) {
        fprintf(stderr, "w1: %s\n", tg_last_error());
        exit(1);
    }
    return g;
}

static int count_fused(tg_graph *g, bool rewrite) {
    if (!rewrite) return 0;
    tg_graph *o = NULL;
    if (tg_graph_optimize(g, NULL, &o) != TG_OK) return -1;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    tg_graph_print(o, mem);
    fclose(mem);
    int n = 0;
    for (const char *p = text; (p = strstr(p, "fused{")); p++) n++;
    free(text);
    tg_graph_free(o);
    return n;
}

int main(int argc, char **argv) {
    int runs = 20, only_threads = 0, fused_only = 0, cpu = 0;
    int64_t n = 10000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only_threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fused-only") == 0)
            fused_only = 1;
        else if (strcmp(argv[i], "--cpu") == 0)
            cpu = 1;
        else {
            fprintf(stderr,
                    "usage: bench_w1 [-n RUNS] [--size N] [--threads T] [--fused-only] [--cpu]\n");
            return 2;
        }
    }
    if (runs < 1 || n < 1) return 2;
    tg_graph *g = build();
    tg_tensor *x = tg_tensor_new(NULL, TG_DT_F64, 1, &n),
              *y = tg_tensor_new(NULL, TG_DT_F64, 1, &n);
    double *xd = tg_tensor_data(x);
    for (int64_t i = 0; i < n; i++) xd[i] = -5.0 + 10.0 * (double)i / (double)(n > 1 ? n - 1 : 1);
    double *t = malloc(sizeof *t * (size_t)runs);
    for (int rewrite = 1; rewrite >= (fused_only ? 1 : 0); rewrite--) {
        int nf = count_fused(g, rewrite);
        for (int th = 1; th <= 2; th++) {
            if (only_threads && th != only_threads) continue;
            tg_compile_opts o =
                TG_COMPILE_OPTS(.mode = TG_MODE_VM, .nthreads = th, .no_rewrite = !rewrite);
            tg_fn *f = NULL;
            if (tg_graph_compile(g, &o, &f) != TG_OK) {
                fprintf(stderr, "w1: %s\n", tg_last_error());
                return 1;
            }
            tg_tensor *out[1] = {y};
            for (int w = 0; w < 2; w++)
                if (tg_fn_call_into(f, &x, 1, out, 1) != TG_OK) {
                    fprintf(stderr, "w1: %s\n", tg_last_error());
                    return 1;
                }
            const double *yd = tg_tensor_data(y);
            double err = 0;
            for (int64_t i = 0; i < n; i += 997) {
                double v = xd[i], want = exp(-v * v / 2) * sin(v) + v / 2;
                err = fmax(err, fabs(yd[i] - want));
            }
            if (err > 1e-12) {
                fprintf(stderr, "w1: wrong result (error %g)\n", err);
                return 1;
            }
            for (int r = 0; r < runs; r++) {
                double t0 = cpu ? bench_cpu_now() : bench_now();
                tg_fn_call_into(f, &x, 1, out, 1);
                t[r] = (cpu ? bench_cpu_now() : bench_now()) - t0;
            }
            char name[96];
            snprintf(name, sizeof name, "w1 vm %s threads=%d%s",
                     rewrite ? (nf > 0 ? "fused" : "optimised (no fused node)") : "unfused", th,
                     cpu ? " cpu-time" : "");
            bench_report(name, t, runs);
            tg_fn_free(f);
        }
    }
    free(t);
    tg_tensor_free(x);
    tg_tensor_free(y);
    tg_graph_free(g);
    return 0;
}
