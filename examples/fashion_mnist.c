/* fashion_mnist.c - trains a two-layer perceptron on Fashion-MNIST with tgraph: what
 * `make demo` runs.
 *
 *   example_fashion_mnist [--epochs N] [--batch B] [--threads T] [--devices N]
 *                         [--backend vm|c|reference] [--lr LR] [--seed S] [--data DIR]
 *                         [--out DIR] [--profile] [--expect-accuracy A] [--steps S]
 *                         [--losses FILE]
 *
 * The model (mlp_step.h), 784-256-10 with relu and a softmax cross-entropy loss, is built
 * with the C API as ONE training-step function: forward pass, reverse-mode gradients
 * (tg_grad), and the Adam update of every parameter. The parameters, Adam's two moments
 * and the step counter are state of the compiled function: they live inside it between
 * calls and the step updates them in place, so a call takes only the batch (pixels as u8,
 * labels as i64) and the learning rate, and returns the loss. The optimiser rewrites the
 * graph before it runs: the products become BLAS gemm calls, the elementwise chains (the
 * u8 -> f32 scaling, the whole Adam update) fused kernels. The initial weights and the
 * order of the examples in each epoch come from tgraph's random numbers (normal,
 * permutation of fold_in(key, epoch)), so a seed reproduces a run.
 *
 * With --devices N the step is data-parallel (build_step_pmap): a pmap over N devices,
 * each taking 1/N of every batch and the weights, replicated. The loss is pmean of the
 * devices' losses, so its gradient (tg_grad inside the pmap's body) is the whole batch's,
 * the same on every device; each makes the same Adam update, returned once into the
 * state. The ranks run on threads of their own, each on its share of the threads
 * (--threads / N, at least one); the losses are the one-device run's to float rounding
 * (tests/CMakeLists.txt checks it with --steps and --losses, which write the loss of
 * every step of a shortened run).
 *
 * Started by mpirun (docs/mpi.md), the pmap spans the processes: `mpirun -np 2
 * example_fashion_mnist --devices 1` trains data-parallel over 2 processes, each taking half
 * of every batch (P processes x --devices N: a pmap over P * N ranks). Every process reads
 * the data and makes the same shuffles; only rank 0 prints and writes files.
 *
 * It reads the gzipped IDX files of Debian's dataset-fashion-mnist package (idx.c),
 * shows a progress bar on stderr, prints the test accuracy after each epoch and
 * `test accuracy: 88.1%` at the end, writes a plot of the training loss and test accuracy
 * per epoch (SVG; PNG too when gnuplot is installed), saves the trained weights as .npy
 * files, reloads them into a fresh prediction function and checks that it gives the same
 * accuracy. Exit status 0 on success, 1 on a failure (or an accuracy below
 * --expect-accuracy), 2 on bad flags.
 */
#include <tgraph.h>

#include "idx.h"
#include "mlp_step.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_EPOCHS 1000

static const char *const class_names[NOUT] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                              "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                              "Bag",         "Ankle boot"};

typedef struct opts {
    int epochs, batch, threads, devices, profile;
    long steps;         /* stop after this many steps (0: run every epoch to its end) */
    const char *losses; /* where to write the loss of every step (NULL: nowhere) */
    tg_mode mode;
    const char *mode_name;
    double lr, expect; /* expect: the least final test accuracy that counts as success */
    uint64_t seed;
    const char *data, *out;
} opts;

typedef struct dataset {
    tg_tensor *x; /* u8[n, 784] */
    tg_tensor *y; /* i64[n] */
    int64_t n;
} dataset;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fashion_mnist: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* ---- data ------------------------------------------------------------------------ */

static int load_split(const char *dir, const char *prefix, dataset *ds) {
    char path[1024], err[1400];
    tg_tensor *img = NULL, *lab = NULL;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    if (idx_load(NULL, path, &img, err, sizeof err) != TG_OK) goto fail;
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if (idx_load(NULL, path, &lab, err, sizeof err) != TG_OK) goto fail;
    const int64_t *is = tg_tensor_shape(img);
    if (tg_tensor_dtype(img) != TG_DT_U8 || tg_tensor_ndim(img) != 3 || is[1] * is[2] != NIN ||
        tg_tensor_dtype(lab) != TG_DT_U8 || tg_tensor_ndim(lab) != 1 ||
        tg_tensor_shape(lab)[0] != is[0] || is[0] < 1) {
        snprintf(err, sizeof err, "%s/%s-*: expected u8 images [n,28,28] and n u8 labels", dir,
                 prefix);
        goto fail;
    }
    ds->n = is[0];
    ds->x = tg_tensor_view(img, 2, (int64_t[]){ds->n, NIN}, (int64_t[]){NIN, 1}, 0);
    ds->y = tg_tensor_new(NULL, TG_DT_I64, 1, &ds->n);
    if (!ds->x || !ds->y) {
        snprintf(err, sizeof err, "%s", tg_last_error());
        goto fail;
    }
    const uint8_t *l = tg_tensor_data(lab);
    int64_t *y = tg_tensor_data(ds->y);
    for (int64_t i = 0; i < ds->n; i++) {
        if (l[i] >= NOUT) {
            snprintf(err, sizeof err, "%s: label %d at %lld is not a class (0-9)", path, l[i],
                     (long long)i);
            goto fail;
        }
        y[i] = l[i];
    }
    tg_tensor_free(img);
    tg_tensor_free(lab);
    return 0;
fail:
    tg_tensor_free(img);
    tg_tensor_free(lab);
    tg_tensor_free(ds->x);
    tg_tensor_free(ds->y);
    ds->x = ds->y = NULL;
    die("%s", err);
    if (access(dir, R_OK) != 0 || strstr(err, "No such file"))
        fprintf(stderr, "fashion_mnist: the data comes from Debian's dataset-fashion-mnist "
                        "package: apt-get install dataset-fashion-mnist (as root), or pass "
                        "--data DIR with the four *-ubyte.gz files\n");
    return 1;
}

/* ---- progress bar ---------------------------------------------------------------- */

typedef struct progress {
    double start, last; /* times of the start and of the last redraw */
    int64_t total, done;
    int tty;
} progress;

static void progress_draw(progress *pr, int epoch, int epochs, double loss, int force) {
    double t = now();
    if (!force && (!pr->tty || t - pr->last < 0.1)) return; /* a log gets one line per epoch */
    pr->last = t;
    double el = t - pr->start, rate = el > 0 ? (double)pr->done / el : 0;
    double eta = rate > 0 ? (double)(pr->total - pr->done) / rate : 0;
    int width = 24, fill = (int)((double)width * (double)pr->done / (double)pr->total);
    char bar[32];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "%sepoch %2d/%d [%s] %3.0f%%  loss %.4f  %6.0f ex/s  ETA %d:%02d%s",
            pr->tty ? "\r" : "", epoch, epochs, bar, 100.0 * (double)pr->done / (double)pr->total,
            loss, rate, (int)eta / 60, (int)eta % 60, pr->tty ? "  " : "\n");
    fflush(stderr);
}

/* ---- plot ------------------------------------------------------------------------ */

/* An SVG of the training loss (left axis) and the test accuracy (right axis) per epoch. */
static int write_svg(const char *path, const double *loss, const double *acc, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double W = 640, H = 400, L = 70, R = 70, T = 40, B = 50;
    double lmax = 0, amin = 100, amax = 0;
    for (int i = 0; i < n; i++) {
        lmax = fmax(lmax, loss[i]);
        amin = fmin(amin, acc[i]);
        amax = fmax(amax, acc[i]);
    }
    lmax = ceil(lmax * 10) / 10;
    amin = floor(amin) - 1;
    amax = fmin(100, ceil(amax) + 1);
    double pw = W - L - R, ph = H - T - B;
#define XP(i) (L + (n > 1 ? pw * (double)(i) / (double)(n - 1) : pw / 2))
#define YL(v) (T + ph * (1 - (v) / lmax))
#define YA(v) (T + ph * (1 - ((v)-amin) / (amax - amin)))
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f,
            "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">Fashion-MNIST "
            "MLP 784-256-10 trained with tgraph</text>\n",
            W / 2);
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"#888\"/>\n",
            L, T, pw, ph);
    for (int k = 0; k <= 4; k++) { /* grid and tick labels on both axes */
        double y = T + ph * k / 4.0;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L,
                L + pw, y, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#1f77b4\">%.2f</text>\n",
                L - 6, y + 4, lmax * (1 - k / 4.0));
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#d62728\">%.1f%%</text>\n", L + pw + 6,
                y + 4, amax - (amax - amin) * k / 4.0);
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", XP(i),
                T + ph + 18, i + 1);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">epoch</text>\n", L + pw / 2,
            H - 10);
    fprintf(f,
            "<text transform=\"translate(18,%.0f) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#1f77b4\">training loss (mean over the epoch)</text>\n",
            T + ph / 2);
    fprintf(f,
            "<text transform=\"translate(%.0f,%.0f) rotate(90)\" text-anchor=\"middle\" "
            "fill=\"#d62728\">test accuracy</text>\n",
            W - 14, T + ph / 2);
    const char *color[2] = {"#1f77b4", "#d62728"};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color[s]);
        for (int i = 0; i < n; i++) fprintf(f, "%.1f,%.1f ", XP(i), s ? YA(acc[i]) : YL(loss[i]));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < n; i++)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", XP(i),
                    s ? YA(acc[i]) : YL(loss[i]), color[s]);
    }
#undef XP
#undef YL
#undef YA
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* A PNG through gnuplot, when it is installed: 0 written, 1 no gnuplot, -1 it failed. */
static int write_png(const char *dir, const double *loss, const double *acc, int n) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) return 1;
    char dat[1024], cmd[4096];
    snprintf(dat, sizeof dat, "%s/fashion_mnist.dat", dir);
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    for (int i = 0; i < n; i++) fprintf(f, "%d %.6f %.4f\n", i + 1, loss[i], acc[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal pngcairo size 640,400; set output '%s/fashion_mnist.png';"
             " set title 'Fashion-MNIST MLP 784-256-10 trained with tgraph'; set xlabel 'epoch';"
             " set xtics 1; set ylabel 'training loss'; set y2label 'test accuracy (%%)'; set "
             "ytics nomirror;"
             " set y2tics; set key center right; plot '%s' using 1:2 with linespoints title "
             "'training loss', '' using 1:3 axes x1y2 with linespoints title 'test accuracy'\""
             " 2>/dev/null",
             dir, dat);
    int rc = system(cmd);
    remove(dat);
    return rc == 0 ? 0 : -1;
}

/* ---- shuffling ------------------------------------------------------------------ */

/* order = permutation(fold_in(key(seed), epoch), n): a new order of the n training
 * examples per epoch, from tgraph's random numbers (input epoch i64[]). */
static tg_graph *build_shuffle(int64_t n, int64_t seed) {
    tg_graph *g = tg_graph_new(NULL, "shuffle");
    tg_var *epoch = tg_input(g, "epoch", TG_DT_I64, 0, NULL);
    tg_attr sa = TG_A_INT("seed", seed + 1000), na = TG_A_INT("n", n);
    tg_var *k = tg_apply(g, "key", NULL, 0, &sa, 1);
    tg_var *ke = tg_apply(g, "fold_in", (tg_var *[]){k, epoch}, 2, NULL, 0);
    tg_var *perm = tg_apply(g, "permutation", &ke, 1, &na, 1);
    if (!perm || tg_graph_set_outputs(g, &perm, 1) != TG_OK) {
        die("building the shuffle: %s", tg_graph_error(g));
        tg_graph_free(g);
        return NULL;
    }
    return g;
}

/* ---- evaluation, saving and reloading ---------------------------------------------- */

/* Runs the evaluation function (compiled for EVAL_BATCH rows) over a whole split, in
 * chunks, the last one padded with blank images labelled -1 (never counted as correct).
 * Returns the accuracy in percent, or a negative number on failure; pred (optional, i64[n])
 * receives the predicted classes. */
#define EVAL_BATCH 1000

static double evaluate(tg_fn *ev, const dataset *ds, tg_tensor *const *params, tg_tensor *pred) {
    int64_t E = EVAL_BATCH, correct = 0;
    tg_tensor *xe = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){E, NIN});
    tg_tensor *ye = tg_tensor_new(NULL, TG_DT_I64, 1, &E);
    tg_tensor *out[2] = {tg_tensor_new(NULL, TG_DT_I64, 0, NULL),
                         tg_tensor_new(NULL, TG_DT_I64, 1, &E)};
    double acc = -1;
    if (!xe || !ye || !out[0] || !out[1]) {
        die("evaluation: %s", tg_last_error());
        goto done;
    }
    tg_tensor *in[2 + NPARAM] = {xe, ye};
    for (int i = 0; i < NPARAM; i++) in[2 + i] = params[i];
    const uint8_t *X = tg_tensor_data(ds->x);
    const int64_t *Y = tg_tensor_data(ds->y);
    for (int64_t s = 0; s < ds->n; s += E) {
        int64_t nb = ds->n - s < E ? ds->n - s : E;
        uint8_t *xd = tg_tensor_data(xe);
        int64_t *yd = tg_tensor_data(ye);
        memcpy(xd, X + s * NIN, (size_t)(nb * NIN));
        memcpy(yd, Y + s, sizeof *yd * (size_t)nb);
        memset(xd + nb * NIN, 0, (size_t)((E - nb) * NIN));
        for (int64_t k = nb; k < E; k++) yd[k] = -1;
        if (tg_fn_call_into(ev, in, 2 + NPARAM, out, 2) != TG_OK) {
            die("evaluation: %s", tg_last_error());
            goto done;
        }
        correct += (int64_t)tg_tensor_get_f64(out[0], 0);
        if (pred)
            memcpy((int64_t *)tg_tensor_data(pred) + s, tg_tensor_data(out[1]),
                   sizeof(int64_t) * (size_t)nb);
    }
    acc = 100.0 * (double)correct / (double)ds->n;
done:
    tg_tensor_free(xe);
    tg_tensor_free(ye);
    tg_tensor_free(out[0]);
    tg_tensor_free(out[1]);
    return acc;
}

static int save_weights(const char *dir, tg_tensor *const *params) {
    for (int i = 0; i < NPARAM; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fashion_mnist_%s.npy", dir, param_name[i]);
        if (tg_npy_save(path, params[i]) != TG_OK)
            return die("saving %s: %s", path, tg_last_error());
    }
    return 0;
}

static int load_weights(const char *dir, tg_tensor **params) {
    for (int i = 0; i < NPARAM; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fashion_mnist_%s.npy", dir, param_name[i]);
        if (tg_npy_load(NULL, path, &params[i]) != TG_OK)
            return die("reloading %s: %s", path, tg_last_error());
    }
    return 0;
}

/* ---- flags ----------------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr,
            "usage: example_fashion_mnist [--epochs N] [--batch B] [--threads T] [--devices N]\n"
            "         [--backend vm|c|reference] [--lr LR] [--seed S] [--data DIR] [--out DIR]\n"
            "         [--profile] [--expect-accuracy A] [--steps S] [--losses FILE]\n"
            "  --epochs   passes over the 60,000 training images (default 10)\n"
            "  --batch    examples per step (default 256)\n"
            "  --threads  threads, the caller included (default: TGRAPH_NUM_THREADS or all cores)\n"
            "  --devices  train data-parallel on N devices (a pmap), each on 1/N of every batch\n"
            "             and its share of the threads (default 1: no pmap)\n"
            "  --backend  vm (default), c (the C JIT, where built), reference (slow: the oracle)\n"
            "  --lr       Adam's initial learning rate (default 0.002; cosine decay to lr/20)\n"
            "  --data     directory of the *-ubyte.gz files "
            "(default /usr/share/datasets/fashion-mnist)\n"
            "  --out      where the plot and the weights go (default .)\n"
            "  --profile  print the per-node profile of the training step at the end\n"
            "  --expect-accuracy A  exit with status 1 when the test accuracy ends below A%%\n"
            "  --steps S  stop after S training steps (the last epoch cut short)\n"
            "  --losses FILE  write the loss of every step to FILE, one `step loss` line each\n");
    return 2;
}

static int parse_int(const char *s, long lo, long hi, long *v) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return 0;
    *v = x;
    return 1;
}

static int parse_opts(int argc, char **argv, opts *o) {
    *o = (opts){.epochs = 10,
                .batch = 256,
                .threads = 0,
                .devices = 1,
                .mode = TG_MODE_VM,
                .mode_name = "vm",
                .lr = 2e-3,
                .seed = 1,
                .data = "/usr/share/datasets/fashion-mnist",
                .out = "."};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage();
        if (!strcmp(a, "--profile")) {
            o->profile = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "fashion_mnist: %s needs a value (or is unknown)\n", a);
            return usage();
        }
        i++;
        if (!strcmp(a, "--epochs") && parse_int(v, 1, MAX_EPOCHS, &x))
            o->epochs = (int)x;
        else if (!strcmp(a, "--batch") && parse_int(v, 1, 60000, &x))
            o->batch = (int)x;
        else if (!strcmp(a, "--threads") && parse_int(v, 0, 1024, &x))
            o->threads = (int)x;
        else if (!strcmp(a, "--devices") && parse_int(v, 1, 64, &x))
            o->devices = (int)x;
        else if (!strcmp(a, "--steps") && parse_int(v, 1, 1000000000L, &x))
            o->steps = x;
        else if (!strcmp(a, "--losses"))
            o->losses = v;
        else if (!strcmp(a, "--seed") && parse_int(v, 0, 2147483647L, &x))
            o->seed = (uint64_t)x;
        else if (!strcmp(a, "--lr") && (o->lr = strtod(v, NULL)) > 0 && o->lr < 10)
            ;
        else if (!strcmp(a, "--expect-accuracy") && (o->expect = strtod(v, NULL)) >= 0 &&
                 o->expect <= 100)
            ;
        else if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--out"))
            o->out = v;
        else if (!strcmp(a, "--backend") && !strcmp(v, "vm"))
            o->mode = TG_MODE_VM, o->mode_name = v;
        else if (!strcmp(a, "--backend") && !strcmp(v, "c"))
            o->mode = TG_MODE_C, o->mode_name = v;
        else if (!strcmp(a, "--backend") && !strcmp(v, "reference"))
            o->mode = TG_MODE_REFERENCE, o->mode_name = v;
        else {
            fprintf(stderr, "fashion_mnist: bad flag or value: %s %s\n", a, v);
            return usage();
        }
    }
    return 0;
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    rc = 1;
    /* in an MPI job: P processes x --devices ranks, rank 0 printing and writing */
    const int procs = tg_world_size(), ranks = procs * o.devices;
    const bool lead = tg_world_rank() == 0;
    if (!lead && !freopen("/dev/null", "w", stdout)) return tg_world_finish(1, "no /dev/null");
    if (!lead) o.losses = NULL;
    dataset train = {0}, test = {0};
    tg_graph *gs = NULL, *ge = NULL, *gp = NULL;
    tg_fn *step = NULL, *eval = NULL, *eval2 = NULL, *shuffle = NULL;
    tg_tensor *order_t = NULL, *epoch_t = NULL;
    tg_pool *pool = NULL, *step_pool = NULL;
    FILE *losses = NULL;
    tg_tensor *xb = NULL, *yb = NULL, *loss = NULL, *lrt = NULL, *reloaded[NPARAM] = {0},
              *pred = NULL;
    double *ep_loss = NULL, *ep_acc = NULL;

    struct stat sb;
    if (stat(o.out, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        die("--out %s: not a directory", o.out);
        goto done;
    }
    double t0 = now();
    if (load_split(o.data, "train", &train) || load_split(o.data, "t10k", &test)) goto done;
    printf("Fashion-MNIST: %lld training and %lld test images of 28x28 (read in %.1f s)\n",
           (long long)train.n, (long long)test.n, now() - t0);
    if (o.batch > train.n) {
        die("--batch %d: larger than the %lld training images", o.batch, (long long)train.n);
        goto done;
    }
    if (o.batch % ranks) {
        die("--batch %d is not a multiple of the %d ranks (--devices %d x %d MPI processes): "
            "each takes an equal share",
            o.batch, ranks, o.devices, procs);
        goto done;
    }
    if (o.losses && !(losses = fopen(o.losses, "w"))) {
        die("cannot write %s: %s", o.losses, strerror(errno));
        goto done;
    }

    /* compile the training step and the evaluation once */
    t0 = now();
    /* the devices of a data-parallel step run at once, each splitting its kernels over a
     * pool of its share of the threads */
    pool = tg_pool_new(NULL, o.threads);
    step_pool =
        pool && o.devices > 1
            ? tg_pool_new(NULL, tg_pool_size(pool) / o.devices ? tg_pool_size(pool) / o.devices : 1)
            : NULL;
    if (!pool || (o.devices > 1 && !step_pool)) {
        die("starting the threads: %s", tg_last_error());
        goto done;
    }
    gs = ranks > 1 ? build_step_pmap(o.batch, ranks) : build_step(o.batch);
    if (!gs || !(ge = build_eval(EVAL_BATCH))) goto done;
    tg_compile_opts co = TG_COMPILE_OPTS(.mode = o.mode, .pool = pool);
    tg_compile_opts cs = TG_COMPILE_OPTS(.mode = o.mode, .pool = step_pool ? step_pool : pool,
                                         .profile = o.profile != 0);
    if (!(gp = build_shuffle(train.n, (int64_t)o.seed))) goto done;
    if (tg_graph_compile(gs, &cs, &step) != TG_OK || tg_graph_compile(ge, &co, &eval) != TG_OK ||
        tg_graph_compile(gp, &co, &shuffle) != TG_OK) {
        die("compiling (backend %s): %s", o.mode_name, tg_last_error());
        goto done;
    }
    if (init_params(step, (int64_t)o.seed) != TG_OK) {
        die("initialising the weights: %s", tg_last_error());
        goto done;
    }
    printf("model: MLP 784-256-10 (relu), softmax cross-entropy, Adam (lr %g, cosine decay), "
           "batch %d; one compiled step function with %d state tensors\n",
           o.lr, o.batch, tg_fn_state_count(step));
    if (ranks > 1)
        printf("data-parallel on %d devices (pmap%s): %d examples and %d thread%s each, the "
               "loss averaged with pmean\n",
               ranks, procs > 1 ? ", across MPI processes" : "", o.batch / ranks,
               step_pool ? tg_pool_size(step_pool) : tg_pool_size(pool),
               (step_pool ? tg_pool_size(step_pool) : tg_pool_size(pool)) == 1 ? "" : "s");
    printf("backend %s, %d thread%s; compiled in %.2f s\n", o.mode_name, tg_pool_size(pool),
           tg_pool_size(pool) == 1 ? "" : "s", now() - t0);

    int64_t B = o.batch;
    xb = tg_tensor_new(NULL, TG_DT_U8, 2, (int64_t[]){B, NIN});
    yb = tg_tensor_new(NULL, TG_DT_I64, 1, &B);
    loss = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    lrt = tg_tensor_new(NULL, TG_DT_F32, 0, NULL);
    order_t = tg_tensor_new(NULL, TG_DT_I64, 1, &train.n);
    epoch_t = tg_tensor_new(NULL, TG_DT_I64, 0, NULL);
    /* the examples of the run: whole epochs of full batches, or --steps batches */
    int64_t per_epoch = train.n / B * B, total = (int64_t)o.epochs * per_epoch;
    if (o.steps && o.steps * B < total) {
        total = o.steps * B;
        o.epochs = (int)((total + per_epoch - 1) / per_epoch);
    }
    ep_loss = calloc((size_t)o.epochs, sizeof *ep_loss);
    ep_acc = calloc((size_t)o.epochs, sizeof *ep_acc);
    if (!xb || !yb || !loss || !lrt || !order_t || !epoch_t || !ep_loss || !ep_acc) {
        die("out of memory");
        goto done;
    }

    tg_tensor *params[NPARAM];
    progress pr = {.start = now(), .total = total, .tty = lead && isatty(2)};
    double train_time = 0;
    for (int ep = 0; ep < o.epochs; ep++) {
        /* this epoch's order of the examples: permutation(fold_in(key, epoch)) */
        *(int64_t *)tg_tensor_data(epoch_t) = ep;
        if (tg_fn_call_into(shuffle, &epoch_t, 1, &order_t, 1) != TG_OK) {
            die("shuffling: %s", tg_last_error());
            goto done;
        }
        const int64_t *order = tg_tensor_data(order_t);
        double sum = 0, te = now();
        int64_t seen = 0;
        /* full batches of the shuffled order (the few examples left over this epoch come
         * first in another one) */
        for (int64_t s = 0; s + B <= train.n && pr.done < pr.total; s += B) {
            const int64_t nb = B;
            uint8_t *xd = tg_tensor_data(xb);
            int64_t *yd = tg_tensor_data(yb);
            const uint8_t *X = tg_tensor_data(train.x);
            const int64_t *Y = tg_tensor_data(train.y);
            for (int64_t k = 0; k < nb; k++) {
                memcpy(xd + k * NIN, X + order[s + k] * NIN, NIN);
                yd[k] = Y[order[s + k]];
            }
            /* the learning rate follows a cosine from lr down to lr/20 over the run */
            double frac = (double)pr.done / (double)pr.total;
            *(float *)tg_tensor_data(lrt) =
                (float)(o.lr * (0.05 + 0.95 * 0.5 * (1 + cos(3.141592653589793 * frac))));
            tg_tensor *in[3] = {xb, yb, lrt};
            tg_status st = tg_fn_call_into(step, in, 3, &loss, 1);
            if (st != TG_OK) {
                fprintf(stderr, "\n");
                die("training step: %s", tg_last_error());
                goto done;
            }
            double l = tg_tensor_get_f64(loss, 0);
            if (!isfinite(l)) {
                fprintf(stderr, "\n");
                die("the loss is %g at epoch %d: lower --lr", l, ep + 1);
                goto done;
            }
            if (losses) fprintf(losses, "%lld %.9g\n", (long long)(pr.done / B + 1), l);
            sum += l * (double)nb;
            seen += nb;
            pr.done += nb;
            progress_draw(&pr, ep + 1, o.epochs, sum / (double)seen, 0);
        }
        train_time += now() - te;
        if (lead) progress_draw(&pr, ep + 1, o.epochs, sum / (double)seen, 1);
        for (int i = 0; i < NPARAM; i++)
            params[i] = tg_fn_state(step, tg_fn_state_find(step, param_name[i]));
        ep_loss[ep] = sum / (double)seen;
        ep_acc[ep] = evaluate(eval, &test, params, NULL);
        if (ep_acc[ep] < 0) goto done;
        if (pr.tty) fputc('\n', stderr);
        printf("epoch %2d: training loss %.4f, test accuracy %.2f%%\n", ep + 1, ep_loss[ep],
               ep_acc[ep]);
        fflush(stdout);
    }
    double acc = ep_acc[o.epochs - 1];
    if (o.profile && tg_fn_profile_print(step, stdout) != TG_OK)
        fprintf(stderr, "fashion_mnist: no profile with backend %s\n", o.mode_name);
    if (o.steps)
        printf("trained %lld steps in %.1f s (%.0f examples/s)\n", (long long)(pr.done / B),
               train_time, (double)pr.done / train_time);
    else
        printf("trained %d epochs in %.1f s (%.0f examples/s)\n", o.epochs, train_time,
               (double)pr.done / train_time);
    printf("test accuracy: %.1f%%\n", acc);
    if (!lead) { /* the rest reads and writes files: rank 0's */
        rc = 0;
        goto done;
    }

    /* per-class accuracy, from the predictions of the final model */
    pred = tg_tensor_new(NULL, TG_DT_I64, 1, &test.n);
    if (!pred || evaluate(eval, &test, params, pred) < 0) goto done;
    printf("per class:");
    for (int c = 0; c < NOUT; c++) {
        int64_t tot = 0, ok = 0;
        const int64_t *p = tg_tensor_data(pred), *y = tg_tensor_data(test.y);
        for (int64_t i = 0; i < test.n; i++)
            if (y[i] == c) tot++, ok += p[i] == c;
        printf("%s %s %.0f%%", c ? "," : "", class_names[c], 100.0 * (double)ok / (double)tot);
    }
    printf("\n");

    /* the plot */
    char path[1024];
    snprintf(path, sizeof path, "%s/fashion_mnist.svg", o.out);
    if (write_svg(path, ep_loss, ep_acc, o.epochs) != 0) {
        die("cannot write %s: %s", path, strerror(errno));
        goto done;
    }
    printf("plot of training loss and test accuracy per epoch: %s\n", path);
    int png = write_png(o.out, ep_loss, ep_acc, o.epochs);
    if (png == 0)
        printf("the same plot as PNG (gnuplot): %s/fashion_mnist.png\n", o.out);
    else if (png < 0)
        fprintf(stderr, "fashion_mnist: gnuplot failed; the SVG is still there\n");

    /* save the weights, reload them into a fresh evaluation function, check the accuracy */
    if (save_weights(o.out, params) || load_weights(o.out, reloaded)) goto done;
    if (tg_graph_compile(ge, &co, &eval2) != TG_OK) {
        die("compiling the evaluation again: %s", tg_last_error());
        goto done;
    }
    double acc2 = evaluate(eval2, &test, reloaded, NULL);
    if (acc2 < 0) goto done;
    printf("weights saved to %s/fashion_mnist_{W1,b1,W2,b2}.npy; reloaded: test accuracy "
           "%.2f%% (%s)\n",
           o.out, acc2, acc2 == acc ? "the same" : "DIFFERENT");
    if (acc2 != acc) {
        die("the reloaded weights give a different accuracy");
        goto done;
    }
    if (acc < o.expect) {
        die("the test accuracy %.2f%% is below the expected %.2f%%", acc, o.expect);
        goto done;
    }
    rc = 0;
done:
    if (losses && fclose(losses) != 0 && rc == 0) rc = die("cannot write %s", o.losses);
    for (int i = 0; i < NPARAM; i++) tg_tensor_free(reloaded[i]);
    tg_tensor_free(pred);
    tg_tensor_free(xb);
    tg_tensor_free(yb);
    tg_tensor_free(loss);
    tg_tensor_free(lrt);
    tg_tensor_free(train.x);
    tg_tensor_free(train.y);
    tg_tensor_free(test.x);
    tg_tensor_free(test.y);
    tg_tensor_free(order_t);
    tg_tensor_free(epoch_t);
    free(ep_loss);
    free(ep_acc);
    tg_fn_free(eval2);
    tg_fn_free(eval);
    tg_fn_free(step);
    tg_fn_free(shuffle);
    tg_graph_free(gp);
    tg_graph_free(ge);
    tg_graph_free(gs);
    tg_pool_free(step_pool);
    tg_pool_free(pool);
    return tg_world_finish(rc, NULL);
}
