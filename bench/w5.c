/* w5.c - benchmark W5: calls per second of a function of 10 elementwise ops on vectors
 * of 10 float64 values, from C. It measures the per-call overhead of a backend: input
 * checks, the plan lookup, dispatching ten kernels.
 *
 *   y = tanh(x * a + b) * exp(-x) + sqrt(abs(x)) - log1p(x * x) / 3     (10 ops)
 *
 * Configurations: vm (optimised graph), vm unfused (no rewrite pipeline), reference;
 * each with tg_fn_call_into (no allocation per call) and tg_fn_call (a new output).
 * usage: bench_w5 [--seconds S] [--cpu]   Prints "w5 CONFIG: median <t> us per call ..."
 * lines (medians of 11 batches) and the calls per second. --cpu times the process's CPU
 * time instead of the wall clock (on a loaded machine: without the time others ran).
 */
#include "tgraph.h"
#include "bench_util.h"

static tg_graph *build(void) {
    tg_graph *g = tg_graph_new(NULL, "w5");
    int64_t ten = 10;
    tg_var *x = tg_input(g, "x", TG_DT_F64, 1, &ten);
    tg_var *a = tg_input(g, "a", TG_DT_F64, 1, &ten);
    tg_var *b = tg_input(g, "b", TG_DT_F64, 1, &ten);
    tg_var *t = tg_tanh(g, tg_add(g, tg_mul(g, x, a), b));            /* 3 */
    tg_var *u = tg_mul(g, t, tg_exp(g, tg_neg(g, x)));                /* 3 */
    tg_var *v = tg_add(g, u, tg_sqrt(g, tg_abs(g, x)));               /* 3 */
    tg_var *w = tg_log1p(g, tg_mul(g, x, x));                         /* 2 */
    tg_var *y = tg_sub(g, v, tg_div(g, w, tg_literal_float(g, 3.0))); /* 2 */
    if (!y || tg_graph_set_outputs(g, &y, 1) != TG_OK) {
        fprintf(stderr, "w5: %s\n", tg_last_error());
        exit(1);
    }
    return g;
}

int main(int argc, char **argv) {
    double seconds = 0.5;
    bool cpu = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--cpu") == 0)
            cpu = true;
        else {
            fprintf(stderr, "usage: bench_w5 [--seconds S] [--cpu]\n");
            return 2;
        }
    }
    tg_graph *g = build();
    int64_t ten = 10;
    tg_tensor *in[3];
    for (int k = 0; k < 3; k++) {
        in[k] = tg_tensor_new(NULL, TG_DT_F64, 1, &ten);
        double *p = tg_tensor_data(in[k]);
        for (int i = 0; i < 10; i++) p[i] = 0.1 * (i + 1) * (k + 1) - 0.3;
    }
    tg_tensor *y = tg_tensor_new(NULL, TG_DT_F64, 1, &ten);
    static const struct {
        const char *name;
        tg_mode mode;
        bool no_rewrite;
    } cfg[] = {{"vm", TG_MODE_VM, false},
               {"vm unfused", TG_MODE_VM, true},
               {"reference", TG_MODE_REFERENCE, false}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        tg_compile_opts o =
            TG_COMPILE_OPTS(.mode = cfg[c].mode, .no_rewrite = cfg[c].no_rewrite, .nthreads = 1);
        tg_fn *f = NULL;
        if (tg_graph_compile(g, &o, &f) != TG_OK) {
            fprintf(stderr, "w5: %s\n", tg_last_error());
            return 1;
        }
        for (int into = 1; into >= 0; into--) {
            /* calls per batch: about seconds / 11 worth */
            long batch = 1;
            for (;;) {
                double t0 = cpu ? bench_cpu_now() : bench_now();
                for (long i = 0; i < batch; i++) {
                    tg_tensor *out[1] = {into ? y : NULL};
                    if (into)
                        tg_fn_call_into(f, in, 3, out, 1);
                    else {
                        tg_fn_call(f, in, 3, out, 1);
                        tg_tensor_free(out[0]);
                    }
                }
                if ((cpu ? bench_cpu_now() : bench_now()) - t0 > seconds / 11 || batch > (1L << 30))
                    break;
                batch *= 2;
            }
            double t[11];
            for (int r = 0; r < 11; r++) {
                double t0 = cpu ? bench_cpu_now() : bench_now();
                for (long i = 0; i < batch; i++) {
                    tg_tensor *out[1] = {into ? y : NULL};
                    if (into)
                        tg_fn_call_into(f, in, 3, out, 1);
                    else {
                        tg_fn_call(f, in, 3, out, 1);
                        tg_tensor_free(out[0]);
                    }
                }
                t[r] = ((cpu ? bench_cpu_now() : bench_now()) - t0) / (double)batch;
            }
            qsort(t, 11, sizeof t[0], bench_cmp);
            printf("w5 %s %s%s: median %.3f us per call, min %.3f us (11 batches of %ld), "
                   "%.0f calls/s\n",
                   cfg[c].name, into ? "call_into" : "call", cpu ? " cpu-time" : "", t[5] * 1e6,
                   t[0] * 1e6, batch, 1.0 / t[5]);
            fflush(stdout);
        }
        tg_fn_free(f);
    }
    for (int k = 0; k < 3; k++) tg_tensor_free(in[k]);
    tg_tensor_free(y);
    tg_graph_free(g);
    return 0;
}
