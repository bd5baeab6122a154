/* pe.c - benchmark PE: per-example gradients of a logistic regression (batch 256, 128
 * features, f64): for each example i, the gradient of its loss softplus(z) - y z, with
 * z = x_i . w + b, with respect to w and b. Three ways:
 *   - `pe vectorize`: the loss of one example and its gradient (grad inside the function),
 *     mapped over the batch by vectorize: one compiled graph for the batch;
 *   - `pe loop`: the same function of one example compiled alone and called from a C loop
 *     over the 256 examples (views of the rows in, of the gradient's rows out);
 *   - `pe cloop`: the gradient written by hand in C, a loop over the examples (the peer:
 *     (sigmoid(z) - y) x_i per row, compiled with the library's flags).
 * Every run checks that the three agree.
 *
 * usage: bench_pe [-n RUNS] [--threads T]
 * Prints "pe vectorize threads=T: median ... (N runs)" for T = 1 and 2 (or T alone), then
 * "pe loop threads=1: ..." and "pe cloop: ...". Each run times a batch of calls (about 20 ms
 * worth) and reports the time of one evaluation of the whole batch.
 */
#include <math.h>

#include "tgraph.h"
#include "bench_util.h"

enum { B = 256, D = 128 };

static void die(const char *what) {
    fprintf(stderr, "pe: %s: %s\n", what, tg_last_error());
    exit(1);
}

/* The gradient of one example's loss with respect to w and b. */
static tg_graph *build_example(void) {
    tg_graph *f = tg_graph_new(tg_ctx_default(), "example_grad");
    tg_var *x = tg_input(f, "x", TG_DT_F64, 1, (int64_t[]){D});
    tg_var *y = tg_input(f, "y", TG_DT_F64, 0, NULL);
    tg_var *w = tg_input(f, "w", TG_DT_F64, 1, (int64_t[]){D});
    tg_var *b = tg_input(f, "b", TG_DT_F64, 0, NULL);
    tg_var *z = tg_add(f, tg_dot(f, x, w), b);
    tg_var *loss = tg_sub(f, tg_softplus(f, z), tg_mul(f, y, z));
    tg_var *wrt[2] = {w, b}, *g[2];
    if (tg_grad(f, loss, wrt, 2, TG_DISCONNECTED_ERROR, g) != TG_OK ||
        tg_graph_set_outputs(f, g, 2) != TG_OK)
        die("build the example's gradient");
    return f;
}

/* vectorize(example_grad, X, y, w, b, in_axes=[0, 0, none, none]). */
static tg_graph *build_batch(tg_graph *f) {
    tg_graph *g = tg_graph_new(tg_ctx_default(), "per_example_grads");
    tg_var *in[4] = {tg_input(g, "X", TG_DT_F64, 2, (int64_t[]){B, D}),
                     tg_input(g, "y", TG_DT_F64, 1, (int64_t[]){B}),
                     tg_input(g, "w", TG_DT_F64, 1, (int64_t[]){D}),
                     tg_input(g, "b", TG_DT_F64, 0, NULL)};
    tg_var *out[2];
    int nout = 2;
    if (tg_vectorize(g, f, in, 4, (int[]){0, 0, TG_AXIS_NONE, TG_AXIS_NONE}, NULL, out, &nout) !=
            TG_OK ||
        tg_graph_set_outputs(g, out, 2) != TG_OK)
        die("vectorize");
    return g;
}

static void by_hand(const double *X, const double *y, const double *w, double b, double *G,
                    double *gb) {
    for (int i = 0; i < B; i++) {
        const double *x = X + (size_t)i * D;
        double z = b;
        for (int j = 0; j < D; j++) z += x[j] * w[j];
        double r = 1.0 / (1.0 + exp(-z)) - y[i];
        for (int j = 0; j < D; j++) G[(size_t)i * D + j] = r * x[j];
        gb[i] = r;
    }
}

static void agree(const tg_tensor *t, const double *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (fabs(tg_tensor_get_f64(t, i) - want[i]) > 1e-12 * (1 + fabs(want[i]))) {
            fprintf(stderr, "pe: %s differs at %lld: %g, expected %g\n", what, (long long)i,
                    tg_tensor_get_f64(t, i), want[i]);
            exit(1);
        }
}

int main(int argc, char **argv) {
    int runs = 20, only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_pe [-n RUNS] [--threads T]\n");
            return 2;
        }
    }
    if (runs < 1) return 2;
    tg_tensor *X = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){B, D});
    tg_tensor *y = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){B});
    tg_tensor *w = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){D});
    tg_tensor *b = tg_tensor_new(NULL, TG_DT_F64, 0, NULL);
    double *xd = tg_tensor_data(X), *yd = tg_tensor_data(y), *wd = tg_tensor_data(w);
    unsigned s = 24;
    for (int64_t i = 0; i < (int64_t)B * D; i++) {
        s = s * 1103515245u + 12345u;
        xd[i] = ((double)((s >> 8) % 2001) - 1000.0) / 1000.0;
    }
    for (int i = 0; i < B; i++) yd[i] = (double)(i % 3 == 0);
    for (int j = 0; j < D; j++) wd[j] = 0.05 * (double)(j % 9) - 0.2;
    *(double *)tg_tensor_data(b) = 0.1;

    double *G = malloc(sizeof *G * B * D), *gb = malloc(sizeof *gb * B);
    by_hand(xd, yd, wd, 0.1, G, gb);

    tg_graph *f = build_example(), *g = build_batch(f);
    tg_tensor *in[4] = {X, y, w, b};
    tg_tensor *out[2] = {tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){B, D}),
                         tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){B})};
    /* the loop's views: row i of X and element i of y in, row i of the results out */
    tg_tensor *rin[B][4], *rout[B][2];
    for (int i = 0; i < B; i++) {
        rin[i][0] = tg_tensor_view(X, 1, (int64_t[]){D}, (int64_t[]){1}, (int64_t)i * D);
        rin[i][1] = tg_tensor_view(y, 0, NULL, NULL, i);
        rin[i][2] = w;
        rin[i][3] = b;
        rout[i][0] = tg_tensor_view(out[0], 1, (int64_t[]){D}, (int64_t[]){1}, (int64_t)i * D);
        rout[i][1] = tg_tensor_view(out[1], 0, NULL, NULL, i);
    }

    enum { NCONF = 4 };
    const char *names[NCONF] = {"pe vectorize threads=1", "pe vectorize threads=2",
                                "pe loop threads=1", "pe cloop"};
    bool on[NCONF] = {!only || only == 1, !only || only == 2, !only || only == 1, true};
    tg_fn *fn[NCONF] = {0};
    double *t[NCONF];
    long batch[NCONF];
    for (int c = 0; c < NCONF; c++) {
        t[c] = malloc(sizeof *t[c] * (size_t)runs);
        if (!on[c] || c == 3) continue;
        tg_compile_opts o = TG_COMPILE_OPTS(.nthreads = c == 1 ? 2 : 1);
        if (tg_graph_compile(c < 2 ? g : f, &o, &fn[c]) != TG_OK) die("compile");
    }
    /* one evaluation of the whole batch by configuration c */
#define EVAL(c)                                                                                    \
    do {                                                                                           \
        if ((c) < 2) {                                                                             \
            if (tg_fn_call_into(fn[c], in, 4, out, 2) != TG_OK) die("call");                       \
        } else if ((c) == 2) {                                                                     \
            for (int i_ = 0; i_ < B; i_++)                                                         \
                if (tg_fn_call_into(fn[2], rin[i_], 4, rout[i_], 2) != TG_OK) die("call");         \
        } else {                                                                                   \
            by_hand(xd, yd, wd, 0.1, tg_tensor_data(out[0]), tg_tensor_data(out[1]));              \
        }                                                                                          \
    } while (0)
    for (int c = 0; c < NCONF; c++) {
        if (!on[c]) continue;
        memset(tg_tensor_data(out[0]), 0, sizeof(double) * B * D);
        EVAL(c);
        agree(out[0], G, (int64_t)B * D, names[c]);
        agree(out[1], gb, B, names[c]);
        double t0 = bench_now();
        for (int k = 0; k < 10; k++) EVAL(c);
        double per = (bench_now() - t0) / 10;
        batch[c] = per > 0 ? (long)(0.02 / per) : 1000;
        if (batch[c] < 1) batch[c] = 1;
    }
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < NCONF; c++) {
            if (!on[c]) continue;
            double t0 = bench_now();
            for (long k = 0; k < batch[c]; k++) EVAL(c);
            t[c][r] = (bench_now() - t0) / (double)batch[c];
        }
    for (int c = 0; c < NCONF; c++) {
        if (on[c]) {
            qsort(t[c], (size_t)runs, sizeof *t[c], bench_cmp);
            double med = runs % 2 ? t[c][runs / 2] : 0.5 * (t[c][runs / 2 - 1] + t[c][runs / 2]);
            printf("%s: median %.3f us, min %.3f us (%d runs of %ld calls)\n", names[c], med * 1e6,
                   t[c][0] * 1e6, runs, batch[c]);
        }
        tg_fn_free(fn[c]);
        free(t[c]);
    }
    for (int i = 0; i < B; i++) {
        tg_tensor_free(rin[i][0]);
        tg_tensor_free(rin[i][1]);
        tg_tensor_free(rout[i][0]);
        tg_tensor_free(rout[i][1]);
    }
    for (int k = 0; k < 2; k++) tg_tensor_free(out[k]);
    tg_tensor_free(X);
    tg_tensor_free(y);
    tg_tensor_free(w);
    tg_tensor_free(b);
    free(G);
    free(gb);
    tg_graph_free(g);
    tg_graph_free(f);
    return 0;
}
