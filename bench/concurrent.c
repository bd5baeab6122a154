/* concurrent.c - two threads calling one compiled function at the same time, against the
 * same calls made one after another on one thread (program and replicas, docs/vm.md
 * "Concurrent calls").
 *
 *   small  W5's ten elementwise ops on vectors of 10 float64 (per-call overhead), 1 thread
 *   mlp    a forward pass, x f32[64,256] W1 f32[256,256] W2 f32[256,10]: two BLAS products,
 *          tanh, softmax; 1 thread per call
 *   large  W1, exp(-x^2/2) sin(x) + x/2 on 1e6 float64, with a pool of 2 threads: a call
 *          that finds the pool busy with the other call's kernel runs it on its own thread
 *
 * Each round times 2N calls on one thread, then N calls on each of two threads started
 * together (wall clock, tg_fn_call_into: no allocation per call). Prints per workload
 * "concurrent NAME: one after another <t> ms, two threads <t> ms, ratio <r>" with the
 * medians of the rounds; a ratio of 0.5 is two calls in the time of one.
 * usage: bench_concurrent [--rounds R] [--mode vm|c]
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>
#include <pthread.h>

static const char *SRC = "func small(x: f64[10], a: f64[10], b: f64[10]) {\n"
                         "  t = tanh(add(mul(x, a), b))\n"
                         "  u = mul(t, exp(neg(x)))\n"
                         "  v = add(u, sqrt(abs(x)))\n"
                         "  return sub(v, div(log1p(mul(x, x)), 3.0))\n"
                         "}\n"
                         "func mlp(x: f32[?,256], W1: f32[256,256], W2: f32[256,10]) {\n"
                         "  return softmax(dot(tanh(dot(x, W1)), W2), axis=1)\n"
                         "}\n"
                         "func large(x: f64[?]) {\n"
                         "  return add(mul(exp(mul(mul(x, x), -0.5)), sin(x)), mul(x, 0.5))\n"
                         "}\n";

typedef struct job {
    tg_fn *f;
    tg_tensor **in;
    int nin;
    tg_tensor *out; /* this thread's output */
    long calls;
    pthread_barrier_t *go;
} job;

static void calls(const job *j) {
    for (long i = 0; i < j->calls; i++) {
        tg_tensor *out[1] = {j->out};
        if (tg_fn_call_into(j->f, j->in, j->nin, out, 1) != TG_OK) {
            fprintf(stderr, "bench_concurrent: %s\n", tg_last_error());
            exit(1);
        }
    }
}

static void *thread_main(void *arg) {
    job *j = arg;
    pthread_barrier_wait(j->go);
    calls(j);
    return NULL;
}

static tg_tensor *filled(tg_dtype dt, int nd, const int64_t *shape, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    if (!t) exit(1);
    for (int64_t i = 0; i < tg_tensor_size(t); i++) {
        double v = scale * sin(0.37 * (double)i + 0.1);
        if (dt == TG_DT_F64)
            ((double *)tg_tensor_data(t))[i] = v;
        else
            ((float *)tg_tensor_data(t))[i] = (float)v;
    }
    return t;
}

int main(int argc, char **argv) {
    int rounds = 5;
    tg_mode mode = TG_MODE_VM;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "c") == 0)
            mode = TG_MODE_C, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "vm") == 0)
            i++;
        else {
            fprintf(stderr, "usage: bench_concurrent [--rounds R] [--mode vm|c]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000) rounds = 5;
    tg_module *m = NULL;
    if (tg_module_parse(NULL, SRC, strlen(SRC), "concurrent.tg", &m) != TG_OK) {
        fprintf(stderr, "bench_concurrent: %s\n", tg_last_error());
        return 1;
    }
    int64_t ten = 10, n1 = 1000000;
    tg_tensor *small_in[3], *mlp_in[3], *large_in[1];
    for (int k = 0; k < 3; k++) small_in[k] = filled(TG_DT_F64, 1, &ten, 0.3 * (k + 1));
    mlp_in[0] = filled(TG_DT_F32, 2, (int64_t[]){64, 256}, 1.0);
    mlp_in[1] = filled(TG_DT_F32, 2, (int64_t[]){256, 256}, 0.05);
    mlp_in[2] = filled(TG_DT_F32, 2, (int64_t[]){256, 10}, 0.05);
    large_in[0] = filled(TG_DT_F64, 1, &n1, 3.0);
    struct {
        const char *name;
        tg_tensor **in;
        int nin, nthreads;
        long calls; /* per thread in the concurrent part */
        int64_t out[2];
        int ndim;
        tg_dtype dt;
    } w[] = {
        {"small", small_in, 3, 1, 100000, {10}, 1, TG_DT_F64},
        {"mlp", mlp_in, 3, 1, 400, {64, 10}, 2, TG_DT_F32},
        {"large", large_in, 1, 2, 20, {1000000}, 1, TG_DT_F64},
    };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = w[k].nthreads);
        tg_fn *f = NULL;
        if (tg_graph_compile(tg_module_find(m, w[k].name), &o, &f) != TG_OK) {
            fprintf(stderr, "bench_concurrent: %s\n", tg_last_error());
            return 1;
        }
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 3);
        job j[2];
        for (int t = 0; t < 2; t++)
            j[t] = (job){f,          w[k].in,
                         w[k].nin,   tg_tensor_new(NULL, w[k].dt, w[k].ndim, w[k].out),
                         w[k].calls, &go};
        job seq = j[0];
        seq.calls = 2 * w[k].calls;
        calls(&j[0]); /* warm up: plans, replicas, the pool */
        double ts[1000], tc[1000];
        for (int r = 0; r < rounds; r++) {
            double t0 = bench_now();
            calls(&seq);
            ts[r] = bench_now() - t0;
            pthread_t th[2];
            for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, thread_main, &j[t]);
            pthread_barrier_wait(&go);
            t0 = bench_now();
            for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
            tc[r] = bench_now() - t0;
        }
        qsort(ts, (size_t)rounds, sizeof *ts, bench_cmp);
        qsort(tc, (size_t)rounds, sizeof *tc, bench_cmp);
        double ms = ts[rounds / 2] * 1e3, mc = tc[rounds / 2] * 1e3;
        printf("concurrent %s (%ld calls): one after another %.3f ms, two threads %.3f ms, "
               "ratio %.2f\n",
               w[k].name, 2 * w[k].calls, ms, mc, mc / ms);
        fflush(stdout);
        pthread_barrier_destroy(&go);
        for (int t = 0; t < 2; t++) tg_tensor_free(j[t].out);
        tg_fn_free(f);
    }
    for (int k = 0; k < 3; k++) tg_tensor_free(small_in[k]);
    for (int k = 0; k < 3; k++) tg_tensor_free(mlp_in[k]);
    tg_tensor_free(large_in[0]);
    tg_module_free(m);
    return 0;
}
