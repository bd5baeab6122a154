/* w10c.c - benchmark W10c: one data-parallel training step on 2 devices against the same
 * step on 1 device.
 *
 * The step: an MLP 784-256-10 (relu, softmax cross-entropy), f32, SGD (learning rate 0.05),
 * batch 512; forward, gradients and the in-place update of the weights (state), one call
 * of one compiled function. The batch is synthetic (fixed pseudo-random pixels in [0, 1)
 * and labels): the time does not depend on the values.
 *
 *  - "devices=1 threads=1": the step on one device with one thread;
 *  - "devices=1 threads=2": the same with both threads splitting each kernel;
 *  - "devices=2 threads=2": the step as a pmap over 2 devices (docs/pmap.md, "Examples"),
 *    one thread each: each device takes 256 rows of the batch and the weights,
 *    replicated; the loss is pmean of the devices' losses, so its gradient is the batch's
 *    (each weight's summed over the devices with a psum), and every device makes the same
 *    update, returned once into the state.
 * Targets (bench/report.py): 2 devices >= 1.6x 1 device (its one thread); 2 devices <=
 * 0.6x PyTorch doing the same step on 2 threads (bench/w10c_peers.py).
 *
 * Before timing, the configurations run the same steps from the same weights and must
 * give the same losses (to float rounding). Then their calls alternate, run after run, so
 * that all of them see the same machine load.
 *
 * usage: bench_w10c [-n RUNS] [--mode vm|c] [--print]
 *   --print  print the .tg module timed and exit
 * Prints "w10c vm devices=D threads=T: median <t> ms, min <t> ms (<n> runs)" lines and the
 * speed-ups.
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>
#include <stdint.h>

#define BATCH 512

/* The module: loss (the model, for any number of rows), step1 (one device) and step2
 * (a pmap over 2 devices, its body device_step). */
static const char *const MODULE =
    "func loss(x: f32[?,784], y: i64[?], W1: f32[784,256], b1: f32[256], W2: f32[256,10],\n"
    "          b2: f32[10]) {\n"
    "  z = add(dot(x, W1), b1)\n"
    "  h = where(gt(z, 0.0), z, 0.0)\n"
    "  logp = log_softmax(add(dot(h, W2), b2), axis=1)\n"
    "  classes = arange(start=0, stop=10, step=1, dtype=\"i64\")\n"
    "  onehot = cast(eq(expand_dims(y, axis=[1]), classes), dtype=\"f32\")\n"
    "  return neg(mean(sum(mul(onehot, logp), axis=[1])))\n"
    "}\n"
    "func step1(x: f32[512,784], y: i64[512], mut W1: f32[784,256], mut b1: f32[256],\n"
    "           mut W2: f32[256,10], mut b2: f32[10]) {\n"
    "  l = loss(x, y, W1, b1, W2, b2)\n"
    "  gW1, gb1, gW2, gb2 = grad(l, W1, b1, W2, b2)\n"
    "  W1 <- sub(W1, mul(gW1, 0.05))\n"
    "  b1 <- sub(b1, mul(gb1, 0.05))\n"
    "  W2 <- sub(W2, mul(gW2, 0.05))\n"
    "  b2 <- sub(b2, mul(gb2, 0.05))\n"
    "  return l\n"
    "}\n"
    "# each device: 256 rows of the batch (mapped) and the weights (replicated); the loss\n"
    "# averaged over the devices, so its gradient is the batch's and the same on every\n"
    "# device, which all make the same update, returned once\n"
    "func step2(x: f32[512,784], y: i64[512], mut W1: f32[784,256], mut b1: f32[256],\n"
    "           mut W2: f32[256,10], mut b2: f32[10]) {\n"
    "  xs = reshape(x, shape=[2,256,784])\n"
    "  ys = reshape(y, shape=[2,256])\n"
    "  l, nW1, nb1, nW2, nb2 = pmap(@device_step, xs, ys, W1, b1, W2, b2, "
    "in_axes=[0, 0, none, none, none, none], out_axes=[none, none, none, none, none], "
    "axis_name=\"batch\")\n"
    "  W1 <- nW1\n"
    "  b1 <- nb1\n"
    "  W2 <- nW2\n"
    "  b2 <- nb2\n"
    "  return l\n"
    "}\n"
    "func device_step(x: f32[256,784], y: i64[256], W1: f32[784,256], b1: f32[256],\n"
    "                 W2: f32[256,10], b2: f32[10]) {\n"
    "  l = pmean(loss(x, y, W1, b1, W2, b2), axis_name=\"batch\")\n"
    "  gW1, gb1, gW2, gb2 = grad(l, W1, b1, W2, b2)\n"
    "  return l, sub(W1, mul(gW1, 0.05)), sub(b1, mul(gb1, 0.05)), sub(W2, mul(gW2, 0.05)), "
    "sub(b2, mul(gb2, 0.05))\n"
    "}\n";

static void die(const char *what) {
    fprintf(stderr, "w10c: %s: %s\n", what, tg_last_error());
    exit(1);
}

/* xorshift64*: the synthetic batch and weights */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static double uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

/* The same weights in every function: W ~ U(-a, a) with a = sqrt(6 / fan_in), biases 0. */
static void init_weights(tg_fn *f) {
    static const char *const names[2] = {"W1", "W2"};
    static const int64_t shapes[2][2] = {{784, 256}, {256, 10}};
    uint64_t s = 7;
    for (int k = 0; k < 2; k++) {
        tg_tensor *w = tg_tensor_new(NULL, TG_DT_F32, 2, shapes[k]);
        if (!w) die("weights");
        float *d = tg_tensor_data(w);
        double a = sqrt(6.0 / (double)shapes[k][0]);
        for (int64_t i = 0; i < tg_tensor_size(w); i++) d[i] = (float)(a * (2 * uniform(&s) - 1));
        if (tg_fn_state_set(f, tg_fn_state_find(f, names[k]), w) != TG_OK) die("weights");
        tg_tensor_free(w);
    }
}

static tg_fn *compile(tg_module *m, const char *name, tg_mode mode, int nthreads) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_find(m, name), &o, &f) != TG_OK) die(name);
    init_weights(f);
    return f;
}

static double step(tg_fn *f, tg_tensor **in, tg_tensor *loss) {
    if (tg_fn_call_into(f, in, 2, &loss, 1) != TG_OK) die("step");
    return tg_tensor_get_f64(loss, 0);
}

int main(int argc, char **argv) {
    int runs = 20;
    tg_mode mode = TG_MODE_VM;
    const char *mname = "vm";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "c"))
            mode = TG_MODE_C, mname = argv[++i];
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && !strcmp(argv[i + 1], "vm"))
            mname = argv[++i];
        else if (strcmp(argv[i], "--print") == 0) {
            fputs(MODULE, stdout);
            return 0;
        } else {
            fprintf(stderr, "usage: bench_w10c [-n RUNS] [--mode vm|c] [--print]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > 100000) return 2;
    tg_module *m = NULL;
    if (tg_module_parse(NULL, MODULE, strlen(MODULE), "w10c.tg", &m) != TG_OK) die("w10c.tg");

    /* the batch */
    tg_tensor *in[2] = {tg_tensor_new(NULL, TG_DT_F32, 2, (int64_t[]){BATCH, 784}),
                        tg_tensor_new(NULL, TG_DT_I64, 1, (int64_t[]){BATCH})};
    tg_tensor *loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    if (!in[0] || !in[1] || !loss) die("batch");
    uint64_t s = 42;
    float *xd = tg_tensor_data(in[0]);
    int64_t *yd = tg_tensor_data(in[1]);
    for (int64_t i = 0; i < BATCH * 784; i++) xd[i] = (float)uniform(&s);
    for (int64_t i = 0; i < BATCH; i++) yd[i] = (int64_t)(rng_next(&s) % 10);

    /* one device with one thread, with two; 2 devices of one thread each: compiled with
     * one thread, each rank runs the body's kernels on its own (docs/pmap.md, "Execution") */
    enum { ONE1, ONE2, TWO, NCONF };
    static const char *const conf[NCONF] = {"devices=1 threads=1", "devices=1 threads=2",
                                            "devices=2 threads=2"};
    tg_fn *f[NCONF] = {compile(m, "step1", mode, 1), compile(m, "step1", mode, 2),
                       compile(m, "step2", mode, 1)};

    /* the same losses, step after step (3 steps also warm up plans, pools and threads) */
    for (int k = 0; k < 3; k++) {
        double l[NCONF];
        for (int c = 0; c < NCONF; c++) l[c] = step(f[c], in, loss);
        for (int c = 1; c < NCONF; c++)
            if (!(fabs(l[c] - l[0]) <= 1e-5 * fabs(l[0]))) {
                fprintf(stderr, "w10c: step %d: loss %.9g with %s, %.9g with %s\n", k, l[c],
                        conf[c], l[0], conf[0]);
                return 1;
            }
    }

    double *t[NCONF];
    for (int c = 0; c < NCONF; c++)
        if (!(t[c] = malloc(sizeof *t[c] * (size_t)runs))) die("times");
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < NCONF; c++) {
            double t0 = bench_now();
            step(f[c], in, loss);
            t[c][r] = bench_now() - t0;
        }
    double med[NCONF];
    for (int c = 0; c < NCONF; c++) {
        char name[96];
        snprintf(name, sizeof name, "w10c %s %s", mname, conf[c]);
        med[c] = bench_median(t[c], runs);
        bench_report(name, t[c], runs);
    }
    printf("w10c: 2 devices vs 1 device: %.2fx (target >= 1.6x); vs 1 device with 2 threads: "
           "%.2fx\n",
           med[ONE1] / med[TWO], med[ONE2] / med[TWO]);
    for (int c = 0; c < NCONF; c++) {
        tg_fn_free(f[c]);
        free(t[c]);
    }
    tg_tensor_free(in[0]);
    tg_tensor_free(in[1]);
    tg_tensor_free(loss);
    tg_module_free(m);
    return 0;
}
