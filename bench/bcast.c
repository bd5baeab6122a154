/* bcast.c - a fused map whose input is broadcast along rows or columns, against the same
 * map on a contiguous input: y = -(a r + a r) over K rows of M float64, with a
 *
 *   in=dense x, of shape [K, M] (every input contiguous: the reference speed)
 *   in=row   e[:, None], e of shape [K] (one value per row: a scalar along each row)
 *   in=col   c[None, :], c of shape [M] (the same row for every row)
 *
 * for K x M = 20,000 elements cut into rows of 20,000 down to 10, on one thread, in the
 * VM and in the C JIT. A broadcast input should cost about what a contiguous one does
 * (it reads less memory); the VM once gathered it element by element, 15-20 times slower
 * for K >= 2 (docs/vm.md, "Fused kernels").
 * usage: bench_bcast [-n RUNS] [--mode vm|c]   (default: both modes)
 * Prints "bcast MODE in=KIND shape=KxM threads=1: median <t> us, min <t> us (RUNS runs)",
 * each run the mean of a batch of calls (tg_fn_call_into: no allocation per call).
 */
#include "tgraph.h"
#include "bench_util.h"

static const char *SRC = "func dense(x: f64[?, ?], r: f64[?, ?]) {\n"
                         "  return neg(add(mul(x, r), mul(x, r)))\n"
                         "}\n"
                         "func row(e: f64[?], r: f64[?, ?]) {\n"
                         "  a = expand_dims(e, axis=[1])\n"
                         "  return neg(add(mul(a, r), mul(a, r)))\n"
                         "}\n"
                         "func col(c: f64[?], r: f64[?, ?]) {\n"
                         "  a = expand_dims(c, axis=[0])\n"
                         "  return neg(add(mul(a, r), mul(a, r)))\n"
                         "}\n";

static tg_tensor *filled(int nd, const int64_t *shape) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, nd, shape);
    if (!t) return NULL;
    double *p = tg_tensor_data(t);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) p[i] = 0.5 + (double)(i % 97) / 97.0;
    return t;
}

int main(int argc, char **argv) {
    int runs = 21, modes = 3; /* bit 0: vm, bit 1: c */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "vm") == 0)
            modes = 1, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "c") == 0)
            modes = 2, i++;
        else {
            fprintf(stderr, "usage: bench_bcast [-n RUNS] [--mode vm|c]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 1000) runs = 21;
    tg_module *m = NULL;
    if (tg_module_parse(NULL, SRC, strlen(SRC), "bcast.tg", &m) != TG_OK) {
        fprintf(stderr, "bcast: %s\n", tg_last_error());
        return 1;
    }
    static const int64_t shapes[][2] = {{1, 20000}, {2, 10000}, {20, 1000}, {200, 100}, {2000, 10}};
    static const char *const kinds[] = {"dense", "row", "col"};
    enum { BATCH = 200 };
    for (int mi = 0; mi < 2; mi++) {
        if (!(modes >> mi & 1)) continue;
        tg_mode mode = mi == 0 ? TG_MODE_VM : TG_MODE_C;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t K = shapes[s][0], M = shapes[s][1];
            for (int k = 0; k < 3; k++) {
                tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1);
                tg_fn *f = NULL;
                if (tg_graph_compile(tg_module_find(m, kinds[k]), &o, &f) != TG_OK) {
                    fprintf(stderr, "bcast: %s\n", tg_last_error());
                    return 1;
                }
                tg_tensor *in[2] = {k == 0   ? filled(2, shapes[s])
                                    : k == 1 ? filled(1, &K)
                                             : filled(1, &M),
                                    filled(2, shapes[s])};
                tg_tensor *out = NULL;
                if (!in[0] || !in[1] || tg_fn_call(f, in, 2, &out, 1) != TG_OK) {
                    fprintf(stderr, "bcast: %s\n", tg_last_error());
                    return 1;
                }
                double t[1000];
                for (int r = 0; r < runs; r++) {
                    double t0 = bench_now();
                    for (int i = 0; i < BATCH; i++) tg_fn_call_into(f, in, 2, &out, 1);
                    t[r] = (bench_now() - t0) / BATCH;
                }
                qsort(t, (size_t)runs, sizeof t[0], bench_cmp); /* microseconds: a call is short */
                printf("bcast %s in=%s shape=%lldx%lld threads=1: median %.3f us, min %.3f us "
                       "(%d runs)\n",
                       mi == 0 ? "vm" : "c", kinds[k], (long long)K, (long long)M,
                       t[runs / 2] * 1e6, t[0] * 1e6, runs);
                fflush(stdout);
                tg_tensor_free(out);
                tg_tensor_free(in[0]);
                tg_tensor_free(in[1]);
                tg_fn_free(f);
            }
        }
    }
    tg_module_free(m);
    return 0;
}
