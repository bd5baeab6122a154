/* rewrite_chain.c - the optimiser's compile time on long chains (workload "rw"): how
 * tg_graph_optimize (the copy, every pass, the final compaction; nothing is run) scales
 * with the size of the graph. Two chains, each built with the C API to N nodes:
 *
 *  - cancel: neg(neg(...neg(x)...)), whose pairs cancel: the graph optimises to x, through
 *    a cascade of merges and neg_neg rewrites;
 *  - mixed: a repeated block of 24 nodes where many rules fire and fusion groups
 *    form: add/mul with constants (commute_const, mul_one, mul_neg_one), exp/log, neg pairs,
 *    reshape and transpose pairs, add(h, neg(y)) (add_neg; the copies of neg(y) merge),
 *    log(1 + exp(h)) and exp(h) - 1 (stabilize), dot(h, W) + b (blas), tanh, and a
 *    row sum subtracted (a reduction fusion reads).
 *
 * The work grows linearly with N; the target (bench/report.py) is 100k nodes of either
 * chain in under 1.5 s on the 2-core build machine. Each configuration prints two lines:
 * "rw opt ..." (wall-clock time, what the target reads) and "rw opt-cpu ..." (the
 * process's CPU time over the same calls: on a machine shared with other work it shows
 * what the optimiser itself costs).
 *
 * usage: bench_rewrite [-n RUNS] [--sizes N,N,...] [--chain cancel|mixed]  (result lines)
 *        bench_rewrite --emit cancel|mixed N          (the chain as .tg text on stdout, for
 *                                                      `tgraph opt FILE --stats`)
 */
#include "tgraph.h"
#include "bench_util.h"

#include <stdint.h>

static void die(const char *what) {
    fprintf(stderr, "rewrite_chain: %s: %s\n", what, tg_last_error());
    exit(1);
}

/* x: f32[4,8] negated n times. */
static tg_graph *chain_cancel(int n) {
    tg_graph *g = tg_graph_new(NULL, "cancel");
    int64_t s[2] = {4, 8};
    tg_var *h = tg_input(g, "x", TG_DT_F32, 2, s);
    for (int i = 0; i < n; i++) h = tg_neg(g, h);
    if (!h || tg_graph_set_outputs(g, &h, 1) != TG_OK) die("cancel chain");
    return g;
}

static tg_var *lit(tg_graph *g, double v) { return tg_literal_float(g, v); }

/* One block of the mixed chain on h: f32[4,8]. */
static tg_var *block(tg_graph *g, tg_var *h, tg_var *y, tg_var *W, tg_var *b) {
    const int64_t s84[2] = {8, 4}, s48[2] = {4, 8}, axis1 = 1;
    tg_attr keep[2] = {TG_A_INTS("axis", &axis1, 1), TG_A_BOOL("keepdims", true)};
    h = tg_mul(g, lit(g, 2.0), tg_add(g, h, lit(g, 1.0))); /* commute_const */
    h = tg_neg(g, tg_log(g, tg_exp(g, h)));                /* exp/log, kept */
    h = tg_mul(g, h, lit(g, -1.0));                        /* mul_neg_one, neg_neg */
    h = tg_reshape(g, tg_reshape(g, h, 2, s84), 2, s48);   /* reshape_reshape */
    h = tg_transpose(g, tg_transpose(g, h, NULL), NULL);   /* transpose_transpose */
    h = tg_add(g, h, tg_neg(g, y));                        /* add_neg, merge */
    h = tg_log(g, tg_add(g, lit(g, 1.0), tg_exp(g, h)));   /* softplus */
    h = tg_sub(g, tg_exp(g, h), lit(g, 1.0));              /* expm1 */
    h = tg_mul(g, h, lit(g, 1.0));                         /* mul_one */
    h = tg_tanh(g, tg_add(g, tg_dot(g, h, W), b));         /* gemm */
    h = tg_add(g, h, y);                                   /* fused */
    tg_var *r = tg_apply(g, "sum", &h, 1, keep, 2);        /* a reduction */
    return tg_sub(g, h, r);
}

/* x, y, b: f32[4,8], W: f32[8,8]; blocks until the graph has n nodes (or a few more). */
static tg_graph *chain_mixed(int n) {
    tg_graph *g = tg_graph_new(NULL, "mixed");
    int64_t s[2] = {4, 8}, sw[2] = {8, 8};
    tg_var *h = tg_input(g, "x", TG_DT_F32, 2, s);
    tg_var *y = tg_input(g, "y", TG_DT_F32, 2, s);
    tg_var *W = tg_input(g, "W", TG_DT_F32, 2, sw);
    tg_var *b = tg_input(g, "b", TG_DT_F32, 2, s);
    while (h && tg_graph_node_count(g) < n) h = block(g, h, y, W, b);
    if (!h || tg_graph_set_outputs(g, &h, 1) != TG_OK) die("mixed chain");
    return g;
}

static tg_graph *chain(const char *kind, int n) {
    if (strcmp(kind, "cancel") == 0) return chain_cancel(n);
    if (strcmp(kind, "mixed") == 0) return chain_mixed(n);
    fprintf(stderr, "rewrite_chain: unknown chain '%s' (cancel, mixed)\n", kind);
    exit(2);
}

int main(int argc, char **argv) {
    int runs = 5;
    const char *sizes = "25000,50000,100000", *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            sizes = argv[++i];
        } else if (strcmp(argv[i], "--chain") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(argv[i], "--emit") == 0 && i + 2 < argc) {
            tg_graph *g = chain(argv[i + 1], atoi(argv[i + 2]));
            if (tg_graph_print(g, stdout) != TG_OK) die("print");
            tg_graph_free(g);
            return 0;
        } else {
            fprintf(stderr, "usage: bench_rewrite [-n RUNS] [--sizes N,N,...] [--chain "
                            "cancel|mixed] | --emit cancel|mixed N\n");
            return 2;
        }
    }
    if (runs < 1) runs = 1;
    double *t = malloc(sizeof *t * (size_t)runs), *cpu = malloc(sizeof *cpu * (size_t)runs);
    if (!t || !cpu) return 1;
    static const char *const kinds[] = {"cancel", "mixed"};
    for (const char *p = sizes; *p;) {
        int n = atoi(p);
        for (int k = 0; k < 2; k++) {
            if (only && strcmp(only, kinds[k]) != 0) continue;
            tg_graph *g = chain(kinds[k], n);
            for (int r = 0; r < runs; r++) {
                tg_graph *out = NULL;
                double t0 = bench_now(), c0 = bench_cpu_now();
                if (tg_graph_optimize(g, NULL, &out) != TG_OK) die("optimize");
                t[r] = bench_now() - t0;
                cpu[r] = bench_cpu_now() - c0;
                tg_graph_free(out);
            }
            char name[96];
            snprintf(name, sizeof name, "rw opt chain=%s n=%d", kinds[k], n);
            bench_report(name, t, runs);
            snprintf(name, sizeof name, "rw opt-cpu chain=%s n=%d", kinds[k], n);
            bench_report(name, cpu, runs);
            tg_graph_free(g);
        }
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    free(t);
    free(cpu);
    return 0;
}
