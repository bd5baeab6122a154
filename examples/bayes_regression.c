/* bayes_regression.c - Bayesian linear regression sampled with Hamiltonian Monte Carlo on
 * a log density compiled by tgraph: the use case of PyMC, in C.
 *
 *   example_bayes_regression [--chains C] [--warmup W] [--samples S] [--leapfrog L]
 *                            [--seed K] [--threads T] [--backend vm|c|reference]
 *                            [--devices N]
 *
 * Synthetic data (N = 10,000 observations, P = 20 predictors, known coefficients) is drawn
 * with tgraph's counter-based random numbers; the model (examples/bayes_model.h) has
 * normal priors and a normal likelihood with unknown noise. The log posterior and its
 * gradient (tg_grad) are compiled ONCE, for all chains at once, with the data as
 * read-only state of the compiled function; the sampler calls it at every leapfrog step.
 * Momenta and accept tests come from a second compiled function whose random key is state.
 *
 * With --devices N (or, without the flag, when host devices are configured:
 * TGRAPH_HOST_DEVICES=N) the chains run with pmap (docs/pmap.md) over the N virtual host
 * devices cpu:0..cpu:N-1, at the same time: the compiled function reshapes theta to
 * [N, C / N, P+1] and maps it along axis 0; each rank computes the logp and gradient of
 * its C / N chains (the gradient taken inside the pmap body, per chain), reading the data,
 * which stays state of the outer function, as replicated inputs (in_axes none: no copy).
 * It is compiled once too, and before sampling its logp and gradient are checked against
 * the batched graph's on the same point. --devices 0 keeps the batched graph.
 *
 * The sampler is HMC with a fixed number of leapfrog steps, a step size per chain tuned
 * during warm-up by dual averaging (target acceptance 0.8) and jittered by +-10% per
 * iteration. It prints, for every coefficient, the true value, the posterior mean and
 * standard deviation and the distance in standard deviations, the R-hat of each value
 * across chains, and the logp+grad evaluations per second.
 *
 * Exit status 0 when the run checks out: the compiled logp matches a plain C computation
 * (and with devices, the pmap's logp and gradient match the batched graph's), every true
 * coefficient lies within 3 posterior standard deviations of its posterior mean, the
 * posterior means agree with the least-squares fit (to which they converge for this much
 * data) within 0.5 sd, and R-hat < 1.05; 1 otherwise; 2 on bad flags.
 */
#include <tgraph.h>

#include "bayes_model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CHAINS 64

typedef struct opts {
    int chains, warmup, samples, leapfrog, threads;
    int devices; /* ranks of the pmap; 0: batched, no pmap; -1: not given */
    long seed;
    tg_mode mode;
    const char *mode_name;
} opts;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bayes_regression: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* ---- the compiled log density, with call counting ---------------------------------- */

typedef struct density {
    tg_fn *f;
    tg_tensor *theta, *out[2]; /* f64[C,D] in; logp f64[C], grad f64[C,D] out */
    long calls;
    double seconds;
} density;

static int density_eval(density *d) {
    double t0 = now();
    tg_status st = tg_fn_call_into(d->f, &d->theta, 1, d->out, 2);
    d->seconds += now() - t0;
    d->calls++;
    if (st != TG_OK) return fail("logp: %s", tg_last_error());
    return 0;
}

/* The log posterior of one theta in plain C (the check of the compiled one). */
static double logp_plain(const double *X, const double *y, const double *th) {
    const double h = 0.5 * log(2 * 3.141592653589793);
    double ss = 0, bb = 0, ls = th[BR_P];
    for (int64_t n = 0; n < BR_N; n++) {
        double r = y[n];
        for (int j = 0; j < BR_P; j++) r -= X[n * BR_P + j] * th[j];
        ss += r * r;
    }
    for (int j = 0; j < BR_P; j++) bb += th[j] * th[j];
    return -BR_N * (ls + h) - 0.5 * ss * exp(-2 * ls) - 0.5 * bb / (BR_PRIOR_SD * BR_PRIOR_SD) -
           0.5 * ls * ls - BR_D * h - BR_P * log(BR_PRIOR_SD);
}

/* Least squares by the normal equations (Cholesky of X'X, P x P); b[P] and the residual
 * standard deviation. Returns 0, or -1 when X'X is not positive definite. */
static int least_squares(const double *X, const double *y, double *b, double *sd) {
    double A[BR_P][BR_P] = {{0}}, r[BR_P] = {0};
    for (int64_t n = 0; n < BR_N; n++)
        for (int i = 0; i < BR_P; i++) {
            r[i] += X[n * BR_P + i] * y[n];
            for (int j = 0; j <= i; j++) A[i][j] += X[n * BR_P + i] * X[n * BR_P + j];
        }
    for (int j = 0; j < BR_P; j++) { /* A = L L' in place (lower triangle) */
        for (int k = 0; k < j; k++) A[j][j] -= A[j][k] * A[j][k];
        if (A[j][j] <= 0) return -1;
        A[j][j] = sqrt(A[j][j]);
        for (int i = j + 1; i < BR_P; i++) {
            for (int k = 0; k < j; k++) A[i][j] -= A[i][k] * A[j][k];
            A[i][j] /= A[j][j];
        }
    }
    for (int i = 0; i < BR_P; i++) { /* L z = r, then L' b = z */
        for (int k = 0; k < i; k++) r[i] -= A[i][k] * r[k];
        r[i] /= A[i][i];
    }
    for (int i = BR_P - 1; i >= 0; i--) {
        for (int k = i + 1; k < BR_P; k++) r[i] -= A[k][i] * b[k];
        b[i] = r[i] / A[i][i];
    }
    double ss = 0;
    for (int64_t n = 0; n < BR_N; n++) {
        double e = y[n];
        for (int j = 0; j < BR_P; j++) e -= X[n * BR_P + j] * b[j];
        ss += e * e;
    }
    *sd = sqrt(ss / (BR_N - BR_P));
    return 0;
}

/* ---- flags ------------------------------------------------------------------------- */

static int usage(void) {
    fprintf(stderr, "usage: example_bayes_regression [--chains C] [--warmup W] [--samples S]\n"
                    "         [--leapfrog L] [--seed K] [--threads T] [--backend vm|c|reference]\n"
                    "         [--devices N]\n"
                    "  --chains    chains sampled side by side (default 4)\n"
                    "  --warmup    iterations tuning the step size, discarded (default 500)\n"
                    "  --samples   iterations kept per chain (default 1000)\n"
                    "  --leapfrog  leapfrog steps per iteration (default 10)\n"
                    "  --seed      of the data and of the sampler (default 1)\n"
                    "  --devices   run the chains with pmap over N virtual host devices, C / N\n"
                    "              chains each (N must divide C); 0: every chain in one batched\n"
                    "              graph (default: the host devices configured by\n"
                    "              TGRAPH_HOST_DEVICES, else 0)\n");
    return 2;
}

static int parse_opts(int argc, char **argv, opts *o) {
    *o = (opts){.chains = 4,
                .warmup = 500,
                .samples = 1000,
                .leapfrog = 10,
                .seed = 1,
                .devices = -1,
                .mode = TG_MODE_VM,
                .mode_name = "vm"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || !v) return usage();
        i++;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        int num = !errno && end != v && !*end;
        if (!strcmp(a, "--chains") && num && x >= 2 && x <= MAX_CHAINS)
            o->chains = (int)x;
        else if (!strcmp(a, "--warmup") && num && x >= 10 && x <= 1000000)
            o->warmup = (int)x;
        else if (!strcmp(a, "--samples") && num && x >= 10 && x <= 1000000)
            o->samples = (int)x;
        else if (!strcmp(a, "--leapfrog") && num && x >= 1 && x <= 1000)
            o->leapfrog = (int)x;
        else if (!strcmp(a, "--seed") && num && x >= 0)
            o->seed = x;
        else if (!strcmp(a, "--threads") && num && x >= 0 && x <= 1024)
            o->threads = (int)x;
        else if (!strcmp(a, "--devices") && num && x >= 0 && x <= MAX_CHAINS)
            o->devices = (int)x;
        else if (!strcmp(a, "--backend") && !strcmp(v, "vm"))
            o->mode = TG_MODE_VM, o->mode_name = v;
        else if (!strcmp(a, "--backend") && !strcmp(v, "c"))
            o->mode = TG_MODE_C, o->mode_name = v;
        else if (!strcmp(a, "--backend") && !strcmp(v, "reference"))
            o->mode = TG_MODE_REFERENCE, o->mode_name = v;
        else {
            fprintf(stderr, "bayes_regression: bad flag or value: %s %s\n", a, v);
            return usage();
        }
    }
    if (o->devices > 0 && o->chains % o->devices) {
        fprintf(stderr, "bayes_regression: %d chains do not split evenly over %d devices\n",
                o->chains, o->devices);
        return usage();
    }
    return 0;
}

/* The virtual host devices cpu:0.. that are configured (TGRAPH_HOST_DEVICES), or -1 when
 * the setting is malformed. */
static int host_devices(void) {
    int n = tg_devices_count(), host = 0;
    for (int i = 0; i < n; i++) host += !strncmp(tg_devices_name(i), "cpu:", 4);
    return n < 0 ? -1 : host;
}

/* --devices: N devices configured for the pmap; by default those there are (if any). 0 or
 * the number of devices, or -1 after a message. */
static int setup_devices(opts *o) {
    if (o->devices > 0 && tg_devices_configure(o->devices, -1) != TG_OK) {
        fail("configuring %d host devices: %s", o->devices, tg_last_error());
        return -1;
    }
    if (o->devices >= 0) return o->devices;
    int n = host_devices();
    if (n < 0) {
        fail("the devices: %s", tg_last_error());
        return -1;
    }
    if (n > 0 && o->chains % n) {
        fail("%d chains do not split evenly over the %d host devices configured "
             "(TGRAPH_HOST_DEVICES): give --devices",
             o->chains, n);
        return -1;
    }
    return o->devices = n;
}

/* The largest difference between two tensors of the same shape, relative to the size of
 * the value (at least 1). */
static double rel_diff(const tg_tensor *a, const tg_tensor *b) {
    const double *x = tg_tensor_data(a), *y = tg_tensor_data(b);
    double worst = 0;
    for (int64_t i = 0; i < tg_tensor_size(a); i++) {
        double d = fabs(x[i] - y[i]) / fmax(1, fabs(y[i]));
        if (isnan(d)) return INFINITY;
        worst = fmax(worst, d);
    }
    return worst;
}

/* Compiles a logp graph (br_build_logp or br_build_logp_pmap) and gives it the data. */
static tg_status compile_logp(tg_graph *g, const tg_compile_opts *co, tg_tensor *const *data,
                              tg_fn **f) {
    tg_status st = g ? tg_graph_compile(g, co, f) : TG_EINVAL;
    if (st == TG_OK) st = tg_fn_state_set(*f, tg_fn_state_find(*f, "X"), data[0]);
    if (st == TG_OK) st = tg_fn_state_set(*f, tg_fn_state_find(*f, "y"), data[1]);
    return st;
}

/* ---- main -------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    const int ndev = setup_devices(&o);
    if (ndev < 0) return 1;
    rc = 1;
    const int C = o.chains, D = BR_D, L = o.leapfrog;
    tg_graph *gsim = NULL, *glp = NULL, *gbatch = NULL, *gdraw = NULL;
    tg_fn *fsim = NULL, *fbatch = NULL, *fdraw = NULL;
    density dens = {0};
    tg_tensor *data[3] = {0}, *rnd[2] = {0}, *key = NULL, *bout[2] = {0};
    double *draws = NULL; /* [samples][C][D] */
    tg_compile_opts co = TG_COMPILE_OPTS(.mode = o.mode, .nthreads = o.threads);

    /* 1. synthetic data from tgraph's random numbers */
    double t0 = now();
    if (!(gsim = br_build_simulate(o.seed)) || tg_graph_compile(gsim, &co, &fsim) != TG_OK ||
        tg_fn_call(fsim, NULL, 0, data, 3) != TG_OK) {
        fail("simulating the data: %s", tg_last_error());
        goto done;
    }
    const double *X = tg_tensor_data(data[0]), *y = tg_tensor_data(data[1]);
    const double *beta_true = tg_tensor_data(data[2]);
    printf("Bayesian linear regression: N = %d observations, P = %d predictors, noise sd %.2f "
           "(data drawn with tgraph's random numbers, seed %ld, in %.2f s)\n",
           BR_N, BR_P, BR_SIGMA, o.seed, now() - t0);

    /* 2. logp and its gradient, compiled once for all chains (batched, or a pmap over the
     * devices, each rank a share of the chains); the data is state */
    t0 = now();
    glp = ndev ? br_build_logp_pmap(C, ndev) : br_build_logp(C);
    if (compile_logp(glp, &co, data, &dens.f) != TG_OK) {
        fail("compiling logp (backend %s): %s", o.mode_name, tg_last_error());
        goto done;
    }
    if (!(gdraw = br_build_draw(C)) || tg_graph_compile(gdraw, &co, &fdraw) != TG_OK) {
        fail("compiling the sampler's random numbers: %s", tg_last_error());
        goto done;
    }
    int64_t seed_key = o.seed * 7919 + 17;
    key = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &seed_key);
    dens.theta = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, D});
    dens.out[0] = tg_tensor_new(NULL, TG_DT_F64, 1, (int64_t[]){C});
    dens.out[1] = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, D});
    rnd[0] = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, D});
    rnd[1] = tg_tensor_new(NULL, TG_DT_F64, 2, (int64_t[]){C, 2});
    draws = malloc(sizeof *draws * (size_t)o.samples * (size_t)C * (size_t)D);
    if (!key || !dens.theta || !dens.out[0] || !dens.out[1] || !rnd[0] || !rnd[1] || !draws ||
        tg_fn_state_set(fdraw, 0, key) != TG_OK) {
        fail("out of memory");
        goto done;
    }
    if (ndev)
        printf("logp and gradient for %d chains compiled once (backend %s) in %.2f s: a pmap "
               "over %d device%s, %d chain%s each\n",
               C, o.mode_name, now() - t0, ndev, ndev > 1 ? "s" : "", C / ndev,
               C / ndev > 1 ? "s" : "");
    else
        printf("logp and gradient for %d chains compiled once (backend %s) in %.2f s\n", C,
               o.mode_name, now() - t0);

    double *th = tg_tensor_data(dens.theta), *lp = tg_tensor_data(dens.out[0]);
    double *gr = tg_tensor_data(dens.out[1]);
    double *mom = tg_tensor_data(rnd[0]), *u = tg_tensor_data(rnd[1]);

    /* 3. starting points near 0 (jittered with the first draw), and the check of logp */
    if (tg_fn_call_into(fdraw, NULL, 0, rnd, 2) != TG_OK) {
        fail("draw: %s", tg_last_error());
        goto done;
    }
    for (int i = 0; i < C * D; i++) th[i] = 0.1 * mom[i];
    if (density_eval(&dens)) goto done;
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double want = logp_plain(X, y, th + c * D);
        worst = fmax(worst, fabs(lp[c] - want) / fmax(1, fabs(want)));
    }
    printf("compiled logp vs plain C at the starting points: relative difference %.1e\n", worst);
    if (!(worst < 1e-10)) {
        fail("the compiled logp disagrees with the plain C one");
        goto done;
    }
    if (ndev) { /* the pmap against the batched graph, logp and gradient, same point */
        gbatch = br_build_logp(C);
        if (compile_logp(gbatch, &co, data, &fbatch) != TG_OK ||
            tg_fn_call(fbatch, &dens.theta, 1, bout, 2) != TG_OK) {
            fail("the batched logp: %s", tg_last_error());
            goto done;
        }
        double dl = rel_diff(dens.out[0], bout[0]), dg = rel_diff(dens.out[1], bout[1]);
        printf("pmap over %d device%s vs batched at the starting points: relative difference "
               "%.1e (logp), %.1e (gradient)\n",
               ndev, ndev > 1 ? "s" : "", dl, dg);
        if (!(dl < 1e-12 && dg < 1e-10)) {
            fail("the pmap's logp and gradient disagree with the batched ones");
            goto done;
        }
    }

    /* 4. HMC */
    double eps[MAX_CHAINS], log_eps_bar[MAX_CHAINS], hbar[MAX_CHAINS], mu[MAX_CHAINS];
    double theta0[MAX_CHAINS * BR_D], grad0[MAX_CHAINS * BR_D], lp0[MAX_CHAINS];
    double acc_sum[MAX_CHAINS] = {0};
    for (int c = 0; c < C; c++) {
        eps[c] = 1e-3;
        mu[c] = log(10 * eps[c]);
        hbar[c] = 0;
        log_eps_bar[c] = 0;
    }
    int iters = o.warmup + o.samples;
    double ts = now();
    for (int it = 0; it < iters; it++) {
        if (tg_fn_call_into(fdraw, NULL, 0, rnd, 2) != TG_OK) {
            fail("draw: %s", tg_last_error());
            goto done;
        }
        double h0[MAX_CHAINS], e[MAX_CHAINS];
        memcpy(theta0, th, sizeof *th * (size_t)(C * D));
        memcpy(grad0, gr, sizeof *gr * (size_t)(C * D));
        memcpy(lp0, lp, sizeof *lp * (size_t)C);
        for (int c = 0; c < C; c++) {
            double k = 0;
            for (int j = 0; j < D; j++) k += mom[c * D + j] * mom[c * D + j];
            h0[c] = -lp[c] + 0.5 * k;
            e[c] = eps[c] * (0.9 + 0.2 * u[c * 2 + 1]);
        }
        /* leapfrog: half step of momentum, L steps of position, half step of momentum */
        for (int c = 0; c < C; c++)
            for (int j = 0; j < D; j++) mom[c * D + j] += 0.5 * e[c] * gr[c * D + j];
        for (int l = 0; l < L; l++) {
            for (int c = 0; c < C; c++)
                for (int j = 0; j < D; j++) th[c * D + j] += e[c] * mom[c * D + j];
            if (density_eval(&dens)) goto done;
            double w = l + 1 < L ? 1.0 : 0.5;
            for (int c = 0; c < C; c++)
                for (int j = 0; j < D; j++) mom[c * D + j] += w * e[c] * gr[c * D + j];
        }
        for (int c = 0; c < C; c++) {
            double k = 0;
            for (int j = 0; j < D; j++) k += mom[c * D + j] * mom[c * D + j];
            double h1 = -lp[c] + 0.5 * k, a = isfinite(h1) ? fmin(1, exp(h0[c] - h1)) : 0;
            if (!(u[c * 2] < a)) { /* reject: back to the starting point */
                memcpy(th + c * D, theta0 + c * D, sizeof *th * (size_t)D);
                memcpy(gr + c * D, grad0 + c * D, sizeof *gr * (size_t)D);
                lp[c] = lp0[c];
            }
            if (it < o.warmup) { /* dual averaging of log eps towards acceptance 0.8 */
                double m = it + 1, w = 1 / (m + 10);
                hbar[c] = (1 - w) * hbar[c] + w * (0.8 - a);
                double le = mu[c] - sqrt(m) / 0.05 * hbar[c], k75 = pow(m, -0.75);
                eps[c] = exp(le);
                log_eps_bar[c] = k75 * le + (1 - k75) * log_eps_bar[c];
                if (it + 1 == o.warmup) eps[c] = exp(log_eps_bar[c]);
            } else {
                acc_sum[c] += a;
                memcpy(draws + ((size_t)(it - o.warmup) * C + c) * D, th + c * D,
                       sizeof *th * (size_t)D);
            }
        }
    }
    double tsample = now() - ts;

    /* 5. the posterior against the truth and against least squares */
    double ols[BR_P], ols_sd;
    if (least_squares(X, y, ols, &ols_sd) != 0) {
        fail("X'X is not positive definite");
        goto done;
    }
    printf("\n%-10s %9s %11s %9s %8s %9s %7s\n", "value", "true", "post. mean", "post. sd", "|z|",
           "lsq fit", "R-hat");
    int within1 = 0, within3 = 0, lsq_ok = 1, rhat_ok = 1;
    double maxz = 0;
    int64_t S = o.samples;
    for (int j = 0; j < D; j++) {
        /* sigma is reported on its own scale; the chains sample log sigma */
        double tr = j < BR_P ? beta_true[j] : BR_SIGMA, fit = j < BR_P ? ols[j] : ols_sd;
        double cm[MAX_CHAINS], cv[MAX_CHAINS], all = 0, all2 = 0;
        for (int c = 0; c < C; c++) {
            double s = 0, s2 = 0;
            for (int64_t i = 0; i < S; i++) {
                double v = draws[((size_t)i * C + c) * D + j];
                if (j == BR_P) v = exp(v);
                s += v;
                s2 += v * v;
            }
            cm[c] = s / (double)S;
            cv[c] = (s2 - (double)S * cm[c] * cm[c]) / (double)(S - 1);
            all += s;
            all2 += s2;
        }
        double n = (double)S * C, mean = all / n, sd = sqrt((all2 - n * mean * mean) / (n - 1));
        double W = 0, Bv = 0; /* Gelman-Rubin: within- and between-chain variances */
        for (int c = 0; c < C; c++) {
            W += cv[c] / C;
            Bv += (cm[c] - mean) * (cm[c] - mean) * (double)S / (C - 1);
        }
        double rhat = sqrt((((double)S - 1) / (double)S * W + Bv / (double)S) / W);
        double z = fabs(mean - tr) / sd, zl = fabs(mean - fit) / sd;
        char name[16];
        if (j < BR_P)
            snprintf(name, sizeof name, "beta[%d]", j);
        else
            snprintf(name, sizeof name, "sigma");
        printf("%-10s %9.4f %11.4f %9.4f %8.2f %9.4f %7.3f\n", name, tr, mean, sd, z, fit, rhat);
        within1 += z <= 1;
        within3 += z <= 3;
        maxz = fmax(maxz, z);
        lsq_ok &= zl < 0.5;
        rhat_ok &= rhat < 1.05;
    }
    double acc_rate = 0;
    for (int c = 0; c < C; c++) acc_rate += acc_sum[c] / (double)S / C;
    printf("\ntrue values within 1 posterior sd: %d of %d, within 3 sd: %d of %d (largest "
           "|z| %.2f)\n",
           within1, D, within3, D, maxz);
    printf("posterior means %s the least-squares fit within 0.5 sd; R-hat %s 1.05\n",
           lsq_ok ? "agree with" : "DO NOT agree with", rhat_ok ? "below" : "NOT below");
    printf("HMC: %d chains x (%d warm-up + %d kept) iterations of %d leapfrog steps, "
           "acceptance %.2f, step sizes %.2e..%.2e\n",
           C, o.warmup, o.samples, L, acc_rate, eps[0], eps[C - 1]);
    printf("logp+grad: %ld calls of %d chains in %.2f s: %.0f evaluations/s (%.1f us per "
           "evaluation; sampling took %.2f s in all)\n",
           dens.calls, C, dens.seconds, (double)dens.calls * C / dens.seconds,
           1e6 * dens.seconds / ((double)dens.calls * C), tsample);
    rc = within3 == D && lsq_ok && rhat_ok ? 0 : 1;
    if (rc) fail("the posterior does not check out (see above)");
done:
    free(draws);
    for (int i = 0; i < 3; i++) tg_tensor_free(data[i]);
    tg_tensor_free(bout[0]);
    tg_tensor_free(bout[1]);
    tg_tensor_free(rnd[0]);
    tg_tensor_free(rnd[1]);
    tg_tensor_free(key);
    tg_tensor_free(dens.theta);
    tg_tensor_free(dens.out[0]);
    tg_tensor_free(dens.out[1]);
    tg_fn_free(dens.f);
    tg_fn_free(fbatch);
    tg_fn_free(fdraw);
    tg_fn_free(fsim);
    tg_graph_free(gdraw);
    tg_graph_free(glp);
    tg_graph_free(gbatch);
    tg_graph_free(gsim);
    return rc;
}
