/* w8.c - benchmark W8: the C JIT's compile time, and its calls against the VM's.
 *
 * W8 is one training step of a 2-layer MLP (784 -> 128 tanh -> 10, softmax cross-entropy,
 * batch 64, float32): forward, the gradient of the loss with respect to the four
 * parameters, and the SGD update (parameters in, new parameters out).
 *
 *  - "w8 compile cold": parse, rewrite, emit, compile with cc and load into an empty cache,
 *    plus the first call. "w8 compile warm": the same with the entry in the cache. Each
 *    sample runs in a fresh child process (nothing memoized from an earlier sample).
 *  - per-call times, c against vm in this one run: the W8 step, W1 (exp(-x^2/2)*sin(x) +
 *    x/2 on 1e7 float64, as bench/w1.c, 1 thread) and W5 (10 elementwise ops on
 *    10-element vectors, as bench/w5.c), all with tg_fn_call_into.
 *
 * usage: bench_w8 [-n RUNS] [--cold N]   (cache: a temporary directory, removed at exit)
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *mlp =
    "func step(x: f32[64,784], y: f32[64,10], W1: f32[784,128], b1: f32[128],\n"
    "          W2: f32[128,10], b2: f32[10]) {\n"
    "  h = tanh(add(dot(x, W1), b1))\n"
    "  logits = add(dot(h, W2), b2)\n"
    "  loss = neg(mean(sum(mul(log_softmax(logits, axis=1), y), axis=1)))\n"
    "  gW1, gb1, gW2, gb2 = grad(loss, W1, b1, W2, b2)\n"
    "  return loss, sub(W1, mul(gW1, 0.1)), sub(b1, mul(gb1, 0.1)), sub(W2, mul(gW2, 0.1)), "
    "sub(b2, mul(gb2, 0.1))\n"
    "}\n"
    "func w1(x: f64[?]) {\n"
    "  return add(mul(exp(div(neg(mul(x, x)), 2.0)), sin(x)), div(x, 2.0))\n"
    "}\n"
    "func w5(x: f64[10], a: f64[10], b: f64[10]) {\n"
    "  t = tanh(add(mul(x, a), b))\n"
    "  u = mul(t, exp(neg(x)))\n"
    "  v = add(u, sqrt(abs(x)))\n"
    "  w = log1p(mul(x, x))\n"
    "  return sub(v, div(w, 3.0))\n"
    "}\n";

static void die(const char *what) {
    fprintf(stderr, "w8: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_tensor *filled(tg_dtype dt, int nd, const int64_t *shape, double scale, int seed) {
    tg_tensor *t = tg_tensor_new(NULL, dt, nd, shape);
    int64_t n = tg_tensor_size(t);
    for (int64_t i = 0; i < n; i++) {
        double v = scale * sin(0.7 * (double)i + seed);
        if (dt == TG_DT_F32)
            ((float *)tg_tensor_data(t))[i] = (float)v;
        else
            ((double *)tg_tensor_data(t))[i] = v;
    }
    return t;
}

typedef struct work {
    tg_module *m;
    tg_tensor *in[6];
    int nin;
    tg_tensor *out[5];
    int nout;
    const char *func;
} work;

static void work_init(work *w, const char *func) {
    memset(w, 0, sizeof *w);
    w->func = func;
    if (tg_module_parse(NULL, mlp, strlen(mlp), "w8.tg", &w->m) != TG_OK) die("parse");
    if (strcmp(func, "step") == 0) {
        w->nin = 6;
        w->in[0] = filled(TG_DT_F32, 2, (int64_t[]){64, 784}, 1.0, 1);
        w->in[1] = filled(TG_DT_F32, 2, (int64_t[]){64, 10}, 0.5, 2);
        w->in[2] = filled(TG_DT_F32, 2, (int64_t[]){784, 128}, 0.05, 3);
        w->in[3] = filled(TG_DT_F32, 1, (int64_t[]){128}, 0.1, 4);
        w->in[4] = filled(TG_DT_F32, 2, (int64_t[]){128, 10}, 0.1, 5);
        w->in[5] = filled(TG_DT_F32, 1, (int64_t[]){10}, 0.1, 6);
        w->nout = 5;
    } else if (strcmp(func, "w1") == 0) {
        w->nin = 1;
        w->in[0] = filled(TG_DT_F64, 1, (int64_t[]){10000000}, 3.0, 1);
        w->nout = 1;
    } else {
        w->nin = 3;
        for (int k = 0; k < 3; k++) w->in[k] = filled(TG_DT_F64, 1, (int64_t[]){10}, 0.9, k);
        w->nout = 1;
    }
}

static void work_fini(work *w) {
    for (int k = 0; k < w->nin; k++) tg_tensor_free(w->in[k]);
    for (int k = 0; k < w->nout; k++) tg_tensor_free(w->out[k]);
    tg_module_free(w->m);
}

static tg_fn *compile(work *w, tg_mode mode) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = 1, .no_fallback = true);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_find(w->m, w->func), &o, &f) != TG_OK) die("compile");
    return f;
}

/* Seconds from parsing to the end of the first call of the step, in a child process. */
static double compile_sample(void) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        work w;
        work_init(&w, "step");
        double t1 = bench_now(); /* the inputs are made: from here on it counts */
        tg_module_free(w.m);
        if (tg_module_parse(NULL, mlp, strlen(mlp), "w8.tg", &w.m) != TG_OK) _exit(1);
        tg_fn *f = compile(&w, TG_MODE_C);
        if (tg_fn_call(f, w.in, w.nin, w.out, w.nout) != TG_OK) _exit(1);
        double t = bench_now() - t1;
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

static void per_call(const char *func, int runs) {
    static const struct {
        const char *name;
        tg_mode mode;
    } modes[] = {{"vm", TG_MODE_VM}, {"c", TG_MODE_C}};
    work w;
    work_init(&w, func);
    bool tiny = strcmp(func, "w5") == 0;
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        tg_fn *f = compile(&w, modes[k].mode);
        for (int i = 0; i < w.nout; i++) {
            tg_tensor_free(w.out[i]);
            w.out[i] = NULL;
        }
        if (tg_fn_call(f, w.in, w.nin, w.out, w.nout) != TG_OK) die("call");
        for (int r = 0; r < 2; r++)
            if (tg_fn_call_into(f, w.in, w.nin, w.out, w.nout) != TG_OK) die("call");
        double t[64];
        int n = runs < 64 ? runs : 64;
        long batch = tiny ? 20000 : 1;
        for (int r = 0; r < n; r++) {
            double t0 = bench_now();
            for (long b = 0; b < batch; b++) tg_fn_call_into(f, w.in, w.nin, w.out, w.nout);
            t[r] = (bench_now() - t0) / (double)batch;
        }
        char name[96]; /* "w8 step c threads=1", "w1 c threads=1 (bench_w8)", ... */
        if (strcmp(func, "step") == 0)
            snprintf(name, sizeof name, "w8 step %s threads=1", modes[k].name);
        else if (tiny)
            snprintf(name, sizeof name, "w5 %s call_into (bench_w8)", modes[k].name);
        else
            snprintf(name, sizeof name, "w1 %s threads=1 (bench_w8)", modes[k].name);
        if (tiny) {
            qsort(t, (size_t)n, sizeof *t, bench_cmp);
            printf("%s: median %.3f us per call, min %.3f us (%d batches of %ld)\n", name,
                   t[n / 2] * 1e6, t[0] * 1e6, n, batch);
        } else {
            bench_report(name, t, n);
        }
        tg_fn_free(f);
    }
    work_fini(&w);
}

int main(int argc, char **argv) {
    int runs = 20, cold = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--cold") == 0 && i + 1 < argc)
            cold = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_w8 [-n RUNS] [--cold N]\n");
            return 2;
        }
    }
    if (runs < 3) runs = 3;
    if (cold < 1) cold = 1;
    char dir[] = "/tmp/tgbench8.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("w8: mkdtemp");
        return 1;
    }
    setenv("TGRAPH_CACHE_DIR", dir, 1);
    double tc[32], tw[32];
    int nc = cold < 32 ? cold : 32;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
    for (int r = 0; r < nc; r++) {
        if (system(cmd) != 0) return 1; /* an empty cache */
        tc[r] = compile_sample();
        if (tc[r] < 0) die("compile sample");
        tw[r] = compile_sample(); /* now warm */
        if (tw[r] < 0) die("compile sample");
    }
    bench_report("w8 compile cold (empty cache, incl. first call)", tc, nc);
    bench_report("w8 compile warm (cached .so, incl. first call)", tw, nc);
    per_call("step", runs);
    per_call("w1", runs < 10 ? runs : 10);
    per_call("w5", 11);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return 0;
}
