/* devices.c - several devices running one graph at once (docs/devices.md).
 *
 * W10a: two independent branches of equal cost, each a 512x512 float64 product with a
 * fused elementwise tail, joined by one addition of their sums, with no annotation at
 * all: compiled on 1 device with 1 thread, on 1 device with 2 threads, and on 2 virtual
 * host devices (tg_devices_configure(2, 0): automatic placement puts the branches on
 * cpu:0 and cpu:1). Targets: 2 devices >= 1.85x the 1-thread time; no slower than 1 device
 * with 2 threads. Calls of the three alternate, round after round; medians.
 *
 * sim: two sim devices with a transfer latency of 1 ms (TGRAPH_SIM_LATENCY_US=1000), and a
 * branch (its input brought to the device, an elementwise chain and a sum, the sum brought
 * back: two transfers) run alone on sim:0, two such branches on sim:0 and sim:1, and both on
 * sim:0 (which share the transfer of x and run in turn). Asynchronous queues make the pair
 * on two devices take about the time of one branch: one latency per direction plus the
 * compute, not two.
 *
 * Prints "NAME: median <t> ms, min <t> ms (<n> runs)" lines and the ratios.
 * usage: bench_devices [--rounds R] [--mode vm|c]
 */
#include "tgraph.h"
#include "bench_util.h"

#include <math.h>

static const char *W10A = "func w10a(A: f64[512,512], B: f64[512,512], C: f64[512,512],\n"
                          "          D: f64[512,512]) {\n"
                          "  p = dot(A, B)\n"
                          "  q = dot(C, D)\n"
                          "  u = sum(mul(tanh(mul(p, 0.01)), exp(mul(p, -0.001))))\n"
                          "  v = sum(mul(tanh(mul(q, 0.01)), exp(mul(q, -0.001))))\n"
                          "  return add(u, v)\n"
                          "}\n";

/* One branch: on device D, reading x; F (sin or cos) keeps two branches from merging. */
#define BRANCH(v, D, F)                                                                            \
    "  " v "1 = " F "(x, device=\"" D "\")\n"                                                      \
    "  " v "2 = exp(" v "1, device=\"" D "\")\n"                                                   \
    "  " v "3 = tanh(" v "2, device=\"" D "\")\n"                                                  \
    "  " v " = sum(" v "3, device=\"" D "\")\n"

static const char *SIM = "func one(x: f64[200000]) {\n" BRANCH(
    "a", "sim:0", "sin") "  return a\n}\n"
                         "func two(x: f64[200000]) {\n" BRANCH("a", "sim:0", "sin") BRANCH(
                             "b", "sim:1",
                             "cos") "  return add(a, b)\n}\n"
                                    "func same(x: f64[200000]) {\n" BRANCH("a", "sim:0", "sin")
                                        BRANCH("b", "sim:0", "cos") "  return add(a, b)\n}\n";

static void die(const char *what) {
    fprintf(stderr, "bench_devices: %s: %s\n", what, tg_last_error());
    exit(1);
}

static tg_tensor *filled(int nd, const int64_t *shape, double scale) {
    tg_tensor *t = tg_tensor_new(NULL, TG_DT_F64, nd, shape);
    if (!t) die("tensor");
    for (int64_t i = 0; i < tg_tensor_size(t); i++)
        ((double *)tg_tensor_data(t))[i] = scale * sin(0.37 * (double)i + 0.1);
    return t;
}

static double call_time(tg_fn *f, tg_tensor **in, int nin) {
    tg_tensor *out = NULL;
    double t0 = bench_now();
    if (tg_fn_call(f, in, nin, &out, 1) != TG_OK) die("call");
    double t = bench_now() - t0;
    tg_tensor_free(out);
    return t;
}

static tg_fn *compile(tg_module *m, const char *name, tg_mode mode, int nthreads) {
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_find(m, name), &o, &f) != TG_OK) die(name);
    return f;
}

int main(int argc, char **argv) {
    int rounds = 15;
    tg_mode mode = TG_MODE_VM;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "c") == 0)
            mode = TG_MODE_C, i++;
        else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc && strcmp(argv[i + 1], "vm") == 0)
            i++;
        else {
            fprintf(stderr, "usage: bench_devices [--rounds R] [--mode vm|c]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 1000) rounds = 15;

    /* W10a */
    if (tg_devices_configure(0, 0) != TG_OK) die("devices");
    tg_module *m = NULL;
    if (tg_module_parse(NULL, W10A, strlen(W10A), "w10a.tg", &m) != TG_OK) die("w10a.tg");
    tg_tensor *in[4];
    for (int k = 0; k < 4; k++) in[k] = filled(2, (int64_t[]){512, 512}, 0.1 * (k + 1));
    tg_fn *one1 = compile(m, "w10a", mode, 1), *one2 = compile(m, "w10a", mode, 2);
    if (tg_devices_configure(2, 0) != TG_OK) die("devices");
    tg_fn *two = compile(m, "w10a", mode, 0);
    double t1[1000], t2[1000], td[1000];
    for (int w = 0; w < 3; w++) { /* warm up: plans, pools, BLAS buffers */
        call_time(one1, in, 4);
        call_time(one2, in, 4);
        call_time(two, in, 4);
    }
    for (int r = 0; r < rounds; r++) {
        t1[r] = call_time(one1, in, 4);
        t2[r] = call_time(one2, in, 4);
        td[r] = call_time(two, in, 4);
    }
    double m1 = bench_median(t1, rounds), m2 = bench_median(t2, rounds),
           md = bench_median(td, rounds);
    bench_report("w10a 1 device, 1 thread", t1, rounds);
    bench_report("w10a 1 device, 2 threads", t2, rounds);
    bench_report("w10a 2 host devices", td, rounds);
    printf("w10a: 2 devices vs 1 device 1 thread: %.2fx (target >= 1.85x); vs 1 device 2 "
           "threads: %.2fx (target >= 1.0x)\n",
           m1 / md, m2 / md);
    tg_fn_free(one1);
    tg_fn_free(one2);
    tg_fn_free(two);
    tg_module_free(m);
    for (int k = 0; k < 4; k++) tg_tensor_free(in[k]);

    /* sim devices, 1 ms per transfer */
    setenv("TGRAPH_SIM_LATENCY_US", "1000", 1);
    if (tg_devices_configure(0, 2) != TG_OK) die("devices");
    if (tg_module_parse(NULL, SIM, strlen(SIM), "sim.tg", &m) != TG_OK) die("sim.tg");
    tg_tensor *x = filled(1, (int64_t[]){200000}, 2.0);
    tg_fn *f1 = compile(m, "one", mode, 0), *f2 = compile(m, "two", mode, 0),
          *fs = compile(m, "same", mode, 0);
    double s1[1000], s2[1000], ss[1000];
    for (int w = 0; w < 2; w++) {
        call_time(f1, &x, 1);
        call_time(f2, &x, 1);
        call_time(fs, &x, 1);
    }
    for (int r = 0; r < rounds; r++) {
        s1[r] = call_time(f1, &x, 1);
        s2[r] = call_time(f2, &x, 1);
        ss[r] = call_time(fs, &x, 1);
    }
    double a = bench_median(s1, rounds), b = bench_median(s2, rounds), c = bench_median(ss, rounds);
    bench_report("sim one branch on sim:0", s1, rounds);
    bench_report("sim two branches on sim:0 and sim:1", s2, rounds);
    bench_report("sim two branches both on sim:0", ss, rounds);
    printf("sim (1 ms per transfer, 2 per branch): two branches on two devices / one branch "
           "%.2f (about 1: 4 transfers and 2 branches in the time of one); both on one device / "
           "one branch %.2f (one input transfer shared, the branches in turn)\n",
           b / a, c / a);
    tg_fn_free(f1);
    tg_fn_free(f2);
    tg_fn_free(fs);
    tg_module_free(m);
    tg_tensor_free(x);
    return 0;
}
