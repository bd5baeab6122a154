/* w11.c - benchmark W11: the C JIT's compile time on a graph of about 3,000 nodes.
 *
 * The graph is a chain of blocks, each a product, an elementwise function, a reduction,
 * reshapes and a transpose, so that fusion leaves about seven nodes per block (430 blocks:
 * 3,010 nodes after the rewrite pipeline, printed as nodes=N):
 *
 *   d = dot(h, W)                     gemm with alpha a_i (the blas pass folds mul, add)
 *   e = F_i(add(mul(d, a_i), v))      F_i: tanh, sigmoid, sin, cos in turn
 *   s = R_i(e, axis=1, keepdims=true) R_i: sum, max, mean in turn
 *   t = transpose(reshape(sub(e, s), shape=[32,16]))
 *   h = add(reshape(t, shape=[16,32]), mul(h, c_i))
 *
 * Two variants: graph=mixed, where the constants c_i repeat every 16 blocks (as layers and
 * steps of a real model repeat), and graph=distinct, where every block has its own c_i, so
 * every fused loop is different code (the worst case for the compiler).
 *
 *  - "w11 compile cold": parse, rewrite, emit, compile with cc and load into an empty cache
 *    (TGRAPH_CACHE_DIR, a private temporary directory), plus the first call; each sample in
 *    a fresh child process. "w11 compile warm": the same with the entry in the cache.
 *
 * graph=distinct has more than 64 distinct functions, so it compiles as several units at
 * once (docs/cjit.md); TGRAPH_CC_SPLIT=0 in the environment measures it as one unit.
 *
 * usage: bench_w11 [--cold N] [--blocks B] [--only mixed|distinct]
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0) exit(1);
        if (t->p && (size_t)w < t->cap - t->n) {
            t->n += (size_t)w;
            return;
        }
        t->cap = t->cap ? 2 * t->cap + (size_t)w : 65536;
        t->p = realloc(t->p, t->cap);
        if (!t->p) exit(1);
    }
}

/* The graph's .tg text (the caller frees it). */
static char *graph_text(int blocks, bool distinct) {
    static const char *const fn[] = {"tanh", "sigmoid", "sin", "cos"};
    static const char *const red[] = {"sum", "max", "mean"};
    text t = {0};
    put(&t, "func main(x: f32[16,32], W: f32[32,32], v: f32[32]) {\n  h0 = x\n");
    for (int i = 0; i < blocks; i++) {
        int k = distinct ? i : i % 16;
        double a = 1.0 + 0.0625 * (i % 16), c = 0.5 + 0.5 * k / (distinct ? blocks : 16);
        put(&t, "  d%d = dot(h%d, W)\n", i, i);
        put(&t, "  e%d = %s(add(mul(d%d, %.17g), v))\n", i, fn[i % 4], i, a);
        put(&t, "  s%d = %s(e%d, axis=1, keepdims=true)\n", i, red[i % 3], i);
        put(&t, "  t%d = transpose(reshape(sub(e%d, s%d), shape=[32,16]))\n", i, i, i);
        put(&t, "  h%d = add(reshape(t%d, shape=[16,32]), mul(h%d, %.17g))\n", i + 1, i, i, c);
    }
    put(&t, "  return h%d\n}\n", blocks);
    return t.p;
}

static void die(const char *what) {
    fprintf(stderr, "w11: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_tensor *filled(int nd, const int64_t *shape, double scale, int seed) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F32, nd, shape);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++)
        ((float *)tg_tensor_data(t))[i] = (float)(scale * sin(0.7 * (double)i + seed));
    return t;
}

/* Nodes of the graph after the rewrite pipeline. */
static int optimized_nodes(const char *src) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "w11.tg", &m) != TG_OK) die("parse");
    tg_graph *o = NULL;
    if (tg_graph_optimize(tg_module_find(m, "main"), NULL, &o) != TG_OK) die("optimize");
    int n = tg_graph_node_count(o);
    tg_graph_free(o);
    tg_module_free(m);
    return n;
}

/* Seconds from parsing to the end of the first call, in a child process. */
static double compile_sample(const char *src) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        tg_tensor *in[3] = {filled(2, (int64_t[]){16, 32}, 1.0, 1),
                            filled(2, (int64_t[]){32, 32}, 0.1, 2),
                            filled(1, (int64_t[]){32}, 0.5, 3)};
        tg_tensor *out[1] = {NULL};
        double t0 = bench_now();
        tg_module *m = NULL;
        if (tg_module_parse(NULL, src, strlen(src), "w11.tg", &m) != TG_OK) _exit(1);
        tg_compile_opts o = TG_COMPILE_OPTS(.mode = TG_MODE_C, .nthreads = 1, .no_fallback = true);
        tg_fn *f = NULL;
        if (tg_graph_compile(tg_module_find(m, "main"), &o, &f) != TG_OK) {
            fprintf(stderr, "w11: compile: %s\n", tg_last_error());
            _exit(1);
        }
        if (tg_fn_call(f, in, 3, out, 1) != TG_OK) _exit(1);
        double t = bench_now() - t0;
        if (write(fd[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    double t = -1;
    if (read(fd[0], &t, sizeof t) != (ssize_t)sizeof t) t = -1;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

int main(int argc, char **argv) {
    int cold = 3, blocks = 430;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cold") == 0 && i + 1 < argc)
            cold = atoi(argv[++i]);
        else if (strcmp(argv[i], "--blocks") == 0 && i + 1 < argc)
            blocks = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_w11 [--cold N] [--blocks B] [--only mixed|distinct]\n");
            return 2;
        }
    }
    if (cold < 1) cold = 1;
    if (cold > 32) cold = 32;
    if (blocks < 1) blocks = 1;
    char dir[] = "/tmp/tgbench11.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("w11: mkdtemp");
        return 1;
    }
    setenv("TGRAPH_CACHE_DIR", dir, 1);
    char cmd[256];
    for (int variant = 0; variant < 2; variant++) {
        const char *name = variant ? "distinct" : "mixed";
        if (only && strcmp(only, name) != 0) continue;
        char *src = graph_text(blocks, variant == 1);
        int nodes = optimized_nodes(src);
        double tc[32], tw[32];
        snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
        for (int r = 0; r < cold; r++) {
            if (system(cmd) != 0) return 1; /* an empty cache */
            tc[r] = compile_sample(src);
            if (tc[r] < 0) die("compile sample");
            tw[r] = compile_sample(src); /* now warm */
            if (tw[r] < 0) die("compile sample");
        }
        char line[128];
        snprintf(line, sizeof line, "w11 compile cold graph=%s nodes=%d", name, nodes);
        bench_report(line, tc, cold);
        snprintf(line, sizeof line, "w11 compile warm graph=%s nodes=%d", name, nodes);
        bench_report(line, tw, cold);
        free(src);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return 0;
}
