/* test_random.c - the random ops (src/ops/random.c, docs/random.md): Threefry-2x32-20
 * against the published known-answer vectors, reproducibility (same key, same numbers;
 * reference and vm bit for bit; 1 and 2 threads), statistical sanity with fixed keys
 * (moments, chi-square, Kolmogorov-Smirnov), independence of split keys, a key kept as
 * state, and gradients of reparameterised sampling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Random123's known-answer vectors for threefry2x32_20: counter, key, result. */
static void test_threefry_known_answers(void **state) {
    (void)state;
    static const uint32_t kat[3][6] = {
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x6b200159, 0x99ba4efe},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xc4923a9c, 0x483df7a0},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[2];
        tg_threefry2x32(&kat[i][2], &kat[i][0], out);
        if (out[0] != kat[i][4] || out[1] != kat[i][5])
            fail_msg("vector %d: %08x %08x, expected %08x %08x", i, out[0], out[1], kat[i][4],
                     kat[i][5]);
    }
}

/* Runs the one-function module src with no inputs; outputs into out[0..nout). */
static void run_src(const char *src, tg_mode mode, int nthreads, tg_tensor **out, int nout) {
    tg_module *m = NULL;
    if (tg_module_parse(NULL, src, strlen(src), "r.tg", &m) != TG_OK)
        fail_msg("parse: %s", tg_last_error());
    tg_compile_opts o = TG_COMPILE_OPTS(.mode = mode, .nthreads = nthreads);
    tg_fn *f = NULL;
    if (tg_graph_compile(tg_module_func(m, 0), &o, &f) != TG_OK)
        fail_msg("compile: %s", tg_last_error());
    if (tg_fn_call(f, NULL, 0, out, nout) != TG_OK) fail_msg("call: %s", tg_last_error());
    tg_fn_free(f);
    tg_module_free(m);
}

static bool same_bits(const tg_tensor *a, const tg_tensor *b) {
    if (tg_tensor_dtype(a) != tg_tensor_dtype(b) || tg_tensor_size(a) != tg_tensor_size(b))
        return false;
    return memcmp(tg_tensor_data(a), tg_tensor_data(b),
                  (size_t)tg_tensor_size(a) * tg_dtype_size(tg_tensor_dtype(a))) == 0;
}

static const char EVERY_OP[] =
    "func main() {\n"
    "    k = key(seed=42)\n"
    "    ks = key_split(k, n=3)\n"
    "    u = uniform(ks[0], shape=[3000], minval=-2, maxval=5)\n"
    "    z = normal(ks[1], shape=[70000], dtype=\"f64\")\n"
    "    zf = normal(ks[2], shape=[5, 7])\n"
    "    b = bernoulli(fold_in(k, 1), 0.25, shape=[4000])\n"
    "    c = categorical(fold_in(k, 2), log(full(0.5, shape=[50, 3])), axis=1)\n"
    "    p = permutation(fold_in(k, 3), n=1000)\n"
    "    return u, z, zf, b, c, p\n"
    "}\n";

/* The same program gives the same bits in every mode (the C backend and the debug mode
 * included), run and thread count. */
static void test_reproducible(void **state) {
    (void)state;
    tg_tensor *ref[6] = {0}, *got[6] = {0};
    run_src(EVERY_OP, TG_MODE_REFERENCE, 1, ref, 6);
    const struct {
        tg_mode mode;
        int threads;
    } runs[] = {{TG_MODE_REFERENCE, 1}, {TG_MODE_VM, 1}, {TG_MODE_VM, 2},
                {TG_MODE_C, 1},         {TG_MODE_C, 2},  {TG_MODE_DEBUG, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        run_src(EVERY_OP, runs[r].mode, runs[r].threads, got, 6);
        for (int i = 0; i < 6; i++) {
            if (!same_bits(ref[i], got[i]))
                fail_msg("output %d differs (mode %d, %d threads)", i, (int)runs[r].mode,
                         runs[r].threads);
            tg_tensor_free(got[i]);
        }
    }
    /* a different seed gives different numbers */
    char other[sizeof EVERY_OP];
    memcpy(other, EVERY_OP, sizeof other);
    memcpy(strstr(other, "seed=42"), "seed=43", 7);
    run_src(other, TG_MODE_VM, 1, got, 6);
    for (int i = 0; i < 6; i++) {
        if (i != 4) assert_false(same_bits(ref[i], got[i])); /* c has few values */
        tg_tensor_free(got[i]);
        tg_tensor_free(ref[i]);
    }
}

/* Kolmogorov-Smirnov distance between the sample x[0..n) and a CDF. */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double ks_distance(double *x, int64_t n, double (*cdf)(double)) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double f = cdf(x[i]);
        double a = fabs(f - (double)i / (double)n), b = fabs((double)(i + 1) / (double)n - f);
        d = fmax(d, fmax(a, b));
    }
    return d;
}
static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double unit_cdf(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

static double *to_doubles(const tg_tensor *t) {
    int64_t n = tg_tensor_size(t);
    double *x = malloc(sizeof *x * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) x[i] = tg_tensor_get_f64(t, i);
    return x;
}

/* Moments, a chi-square over 20 bins and KS for uniform (f32 and f64) and normal. The
 * keys are fixed, so each check passes or fails deterministically; the thresholds are
 * the 99.9th percentiles (a fresh key fails one check in a thousand), the moments 4
 * standard errors. */
static void test_statistics(void **state) {
    (void)state;
    static const char src[] = "func main() {\n"
                              "    k = key(seed=2024)\n"
                              "    u = uniform(k, shape=[100000])\n"
                              "    v = uniform(fold_in(k, 9), shape=[100000], dtype=\"f64\")\n"
                              "    z = normal(k, shape=[100000])\n"
                              "    w = normal(fold_in(k, 9), shape=[100000], dtype=\"f64\")\n"
                              "    return u, v, z, w\n"
                              "}\n";
    tg_tensor *out[4] = {0};
    run_src(src, TG_MODE_VM, 2, out, 4);
    const int64_t n = 100000;
    double crit_ks = 1.95 / sqrt((double)n); /* alpha = 0.001 */
    for (int i = 0; i < 4; i++) {
        double *x = to_doubles(out[i]);
        double m = 0, v = 0, lo = INFINITY, hi = -INFINITY;
        for (int64_t j = 0; j < n; j++) m += x[j];
        m /= (double)n;
        for (int64_t j = 0; j < n; j++) {
            v += (x[j] - m) * (x[j] - m);
            lo = fmin(lo, x[j]);
            hi = fmax(hi, x[j]);
        }
        v /= (double)(n - 1);
        bool unif = i < 2;
        double mean = unif ? 0.5 : 0.0, var = unif ? 1.0 / 12.0 : 1.0;
        print_message("output %d: mean %.5f var %.5f range [%g, %g]\n", i, m, v, lo, hi);
        assert_true(fabs(m - mean) < 4 * sqrt(var / (double)n));
        assert_true(fabs(v / var - 1.0) < 0.02);
        if (unif) {
            assert_true(lo >= 0.0 && hi < 1.0);
            int bins[20] = {0};
            for (int64_t j = 0; j < n; j++) bins[(int)(x[j] * 20)]++;
            double chi = 0, e = (double)n / 20;
            for (int b = 0; b < 20; b++) chi += (bins[b] - e) * (bins[b] - e) / e;
            print_message("  chi-square (19 dof) %.2f\n", chi);
            assert_true(chi < 43.82); /* 99.9th percentile */
        }
        double d = ks_distance(x, n, unif ? unit_cdf : normal_cdf);
        print_message("  KS distance %.5f (critical %.5f)\n", d, crit_ks);
        assert_true(d < crit_ks);
        free(x);
        tg_tensor_free(out[i]);
    }
}

static void test_discrete(void **state) {
    (void)state;
    static const char src[] = "func main() {\n"
                              "    k = key(seed=5)\n"
                              "    b = bernoulli(k, 0.3, shape=[100000])\n"
                              "    pr = div(cast(arange(stop=4), dtype=\"f32\"), 3.0)\n"
                              "    pb = bernoulli(fold_in(k, 1), pr, shape=[25000, 4])\n"
                              "    w = div(add(cast(arange(stop=4), dtype=\"f64\"), 1.0), 10.0)\n"
                              "    lg = add(log(w), zeros(shape=[60000, 4]))\n"
                              "    c = categorical(fold_in(k, 2), lg)\n"
                              "    return b, pb, c\n"
                              "}\n";
    tg_tensor *out[3] = {0};
    run_src(src, TG_MODE_VM, 1, out, 3);
    int64_t ones = 0;
    for (int64_t j = 0; j < 100000; j++) ones += tg_tensor_get_f64(out[0], j) != 0;
    print_message("bernoulli(0.3): %lld of 100000\n", (long long)ones);
    assert_true(llabs(ones - 30000) < 4 * 145); /* sd = sqrt(n p (1-p)) = 145 */
    int64_t col[4] = {0};
    for (int64_t j = 0; j < 100000; j++) col[j % 4] += tg_tensor_get_f64(out[1], j) != 0;
    assert_int_equal(col[0], 0);
    assert_int_equal(col[3], 25000);
    assert_true(llabs(col[1] - 25000 / 3) < 4 * 75 && llabs(col[2] - 2 * 25000 / 3) < 4 * 75);
    int64_t cnt[4] = {0};
    for (int64_t j = 0; j < 60000; j++) cnt[(int)tg_tensor_get_f64(out[2], j)]++;
    double chi = 0;
    for (int c = 0; c < 4; c++) {
        double e = 60000 * (c + 1) / 10.0;
        chi += (cnt[c] - e) * (cnt[c] - e) / e;
    }
    print_message("categorical counts %lld %lld %lld %lld, chi-square (3 dof) %.2f\n",
                  (long long)cnt[0], (long long)cnt[1], (long long)cnt[2], (long long)cnt[3], chi);
    assert_true(chi < 16.27); /* 99.9th percentile */
    for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
}

/* permutation: a permutation every time, each value equally likely at each position. */
static void test_permutation(void **state) {
    (void)state;
    static const char src[] = "func main(mut k: i64[]) {\n"
                              "    ks = key_split(k, n=2)\n"
                              "    k <- ks[0]\n"
                              "    return permutation(ks[1], n=5)\n"
                              "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, src, strlen(src), "r.tg", &m), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_func(m, 0), NULL, &f), TG_OK);
    int64_t pos[5][5] = {{0}};
    const int runs = 5000;
    tg_tensor *p = NULL;
    for (int r = 0; r < runs; r++) {
        assert_int_equal(r ? tg_fn_call_into(f, NULL, 0, &p, 1) : tg_fn_call(f, NULL, 0, &p, 1),
                         TG_OK);
        bool seen[5] = {false};
        for (int i = 0; i < 5; i++) {
            int v = (int)tg_tensor_get_f64(p, i);
            assert_true(v >= 0 && v < 5 && !seen[v]);
            seen[v] = true;
            pos[i][v]++;
        }
    }
    double chi = 0, e = runs / 5.0;
    for (int i = 0; i < 5; i++)
        for (int v = 0; v < 5; v++) chi += (pos[i][v] - e) * (pos[i][v] - e) / e;
    print_message("permutation positions: chi-square %.2f\n", chi);
    assert_true(chi < 39.25); /* 16 dof, 99.9th percentile */
    tg_tensor_free(p);
    tg_fn_free(f);
    tg_module_free(m);
}

/* Keys from key_split and fold_in give uncorrelated streams; the children differ from each
 * other and from the parent; a key kept as state advances every call and the sequence
 * restarts when the state is set back. */
static void test_key_independence(void **state) {
    (void)state;
    static const char src[] = "func main() {\n"
                              "    k = key(seed=1)\n"
                              "    ks = key_split(k, n=4)\n"
                              "    a = uniform(ks[0], shape=[50000], dtype=\"f64\")\n"
                              "    b = uniform(ks[1], shape=[50000], dtype=\"f64\")\n"
                              "    c = uniform(fold_in(k, 0), shape=[50000], dtype=\"f64\")\n"
                              "    d = uniform(k, shape=[50000], dtype=\"f64\")\n"
                              "    return a, b, c, d, ks\n"
                              "}\n";
    tg_tensor *out[5] = {0};
    run_src(src, TG_MODE_VM, 1, out, 5);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) {
            double sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
            for (int64_t t = 0; t < 50000; t++) {
                double x = tg_tensor_get_f64(out[i], t), y = tg_tensor_get_f64(out[j], t);
                sx += x;
                sy += y;
                sxy += x * y;
                sxx += x * x;
                syy += y * y;
            }
            double n = 50000, cov = sxy / n - sx / n * sy / n;
            double r = cov / sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
            print_message("corr(%d, %d) = %.5f\n", i, j, r);
            assert_true(fabs(r) < 4.0 / sqrt(n));
        }
    const int64_t *ks = tg_tensor_data(out[4]);
    for (int i = 0; i < 4; i++) {
        assert_true(ks[i] != 1);
        for (int j = 0; j < i; j++) assert_true(ks[i] != ks[j]);
    }
    for (int i = 0; i < 5; i++) tg_tensor_free(out[i]);

    /* a key as state */
    static const char st[] = "func main(mut k: i64[]) {\n"
                             "    ks = key_split(k)\n"
                             "    k <- ks[0]\n"
                             "    return uniform(ks[1], shape=[4])\n"
                             "}\n";
    tg_module *m = NULL;
    assert_int_equal(tg_module_parse(NULL, st, strlen(st), "r.tg", &m), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(tg_module_func(m, 0), NULL, &f), TG_OK);
    int64_t seed = 99;
    tg_tensor *k0 = tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &seed);
    tg_tensor *r1[3] = {0}, *r2[3] = {0};
    assert_int_equal(tg_fn_state_set(f, 0, k0), TG_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(tg_fn_call(f, NULL, 0, &r1[i], 1), TG_OK);
    assert_false(same_bits(r1[0], r1[1]));
    assert_false(same_bits(r1[1], r1[2]));
    assert_int_equal(tg_fn_state_set(f, 0, k0), TG_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(tg_fn_call(f, NULL, 0, &r2[i], 1), TG_OK);
    for (int i = 0; i < 3; i++) {
        assert_true(same_bits(r1[i], r2[i]));
        tg_tensor_free(r1[i]);
        tg_tensor_free(r2[i]);
    }
    tg_tensor_free(k0);
    tg_fn_free(f);
    tg_module_free(m);
}

/* y = mu + sigma * normal(k): gradients flow to mu and sigma, never to the key. */
static void test_reparameterised_gradient(void **state) {
    (void)state;
    tg_graph *g = tg_graph_new(NULL, "reparam");
    tg_var *mu = tg_input(g, "mu", TG_DT_F64, 1, (int64_t[]){6});
    tg_var *sigma = tg_input(g, "sigma", TG_DT_F64, 0, NULL);
    tg_var *k = tg_input(g, "k", TG_DT_I64, 0, NULL);
    tg_attr at[] = {TG_A_INTS("shape", (int64_t[]){6}, 1), TG_A_STR("dtype", "f64")};
    tg_var *eps = tg_apply(g, "normal", &k, 1, at, 2);
    tg_var *y = tg_tanh(g, tg_add(g, mu, tg_mul(g, sigma, eps)));
    assert_int_equal(tg_graph_set_outputs(g, &y, 1), TG_OK);
    double muv[6] = {0.1, -0.2, 0.3, 0.0, 0.5, -0.4}, sv = 0.7;
    int64_t kv = 17;
    tg_tensor *in[3] = {tg_tensor_from_data(NULL, TG_DT_F64, 1, (int64_t[]){6}, muv),
                        tg_tensor_from_data(NULL, TG_DT_F64, 0, NULL, &sv),
                        tg_tensor_from_data(NULL, TG_DT_I64, 0, NULL, &kv)};
    tg_grad_check_report rep = TG_GRAD_CHECK_REPORT();
    tg_status st = tg_grad_check(g, in, 3, NULL, &rep);
    if (st != TG_OK) fail_msg("grad check: %s", tg_last_error());
    /* d sum(mu + sigma*eps)/d sigma = sum(eps); d/dk: no gradient (an integer input) */
    tg_graph *h = tg_graph_new(NULL, "lin");
    mu = tg_input(h, "mu", TG_DT_F64, 1, (int64_t[]){6});
    sigma = tg_input(h, "sigma", TG_DT_F64, 0, NULL);
    k = tg_input(h, "k", TG_DT_I64, 0, NULL);
    eps = tg_apply(h, "normal", &k, 1, at, 2);
    tg_var *cost = tg_reduce(h, "sum", tg_add(h, mu, tg_mul(h, sigma, eps)), NULL, -1, false);
    tg_var *wrt[2] = {mu, sigma}, *gr[2];
    assert_int_equal(tg_grad(h, cost, wrt, 2, TG_DISCONNECTED_ERROR, gr), TG_OK);
    tg_var *outs[3] = {gr[0], gr[1], tg_reduce(h, "sum", eps, NULL, -1, false)};
    assert_int_equal(tg_graph_set_outputs(h, outs, 3), TG_OK);
    tg_fn *f = NULL;
    assert_int_equal(tg_graph_compile(h, NULL, &f), TG_OK);
    tg_tensor *o[3] = {0};
    assert_int_equal(tg_fn_call(f, in, 3, o, 3), TG_OK);
    for (int i = 0; i < 6; i++) assert_true(tg_tensor_get_f64(o[0], i) == 1.0);
    assert_true(fabs(tg_tensor_get_f64(o[1], 0) - tg_tensor_get_f64(o[2], 0)) < 1e-12);
    tg_var *gk = NULL;
    assert_int_not_equal(tg_grad(h, cost, &k, 1, TG_DISCONNECTED_ERROR, &gk), TG_OK);
    for (int i = 0; i < 3; i++) {
        tg_tensor_free(o[i]);
        tg_tensor_free(in[i]);
    }
    tg_fn_free(f);
    tg_graph_free(g);
    tg_graph_free(h);
}

/* A range wider than the largest double ([-1e308, 1e308]: hi - lo overflows) gives values
 * spread over the range, not maxval everywhere; ordinary ranges keep lo + (hi - lo) * u
 * exactly, bit for bit (element j of f64 is the top 53 bits of block j). */
static void test_wide_range(void **state) {
    (void)state;
    static const char src[] = "func main() {\n"
                              "    k = key(seed=5)\n"
                              "    a = uniform(k, shape=[1000], dtype=\"f64\", minval=-1e308, "
                              "maxval=1e308)\n"
                              "    b = uniform(k, shape=[1000], minval=-3e38, maxval=3e38)\n"
                              "    c = uniform(k, shape=[64], dtype=\"f64\", minval=-2, maxval=5)\n"
                              "    return a, b, c\n"
                              "}\n";
    static const tg_mode modes[] = {TG_MODE_REFERENCE, TG_MODE_VM, TG_MODE_C};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tg_tensor *out[3] = {0};
        run_src(src, modes[m], 1, out, 3);
        for (int i = 0; i < 2; i++) {
            double lo = i ? -3e38 : -1e308, hi = i ? 3e38 : 1e308, mn = hi, mx = lo, mean = 0;
            for (int64_t j = 0; j < 1000; j++) {
                double v = tg_tensor_get_f64(out[i], j);
                if (!(v >= lo && v < hi))
                    fail_msg("output %d, element %lld: %g", i, (long long)j, v);
                mn = fmin(mn, v);
                mx = fmax(mx, v);
                mean += v / 1000;
            }
            assert_true(mn < 0.9 * lo && mx > 0.9 * hi); /* spread over the whole range */
            assert_true(fabs(mean) < 0.1 * hi);
        }
        uint64_t k64 = 5;
        const uint32_t key[2] = {(uint32_t)(k64 >> 32), (uint32_t)k64};
        for (uint32_t j = 0; j < 64; j++) {
            uint32_t ctr[2] = {0, j}, o[2];
            tg_threefry2x32(key, ctr, o);
            uint64_t b = (uint64_t)o[0] << 32 | o[1];
            double want = -2.0 + 7.0 * ((double)(b >> 11) * 0x1p-53);
            double got = tg_tensor_get_f64(out[2], j);
            if (memcmp(&want, &got, sizeof got) != 0)
                fail_msg("element %u: %.17g, expected %.17g", j, got, want);
        }
        for (int i = 0; i < 3; i++) tg_tensor_free(out[i]);
    }
}

/* Misuse is reported with the op's name. */
static void test_errors(void **state) {
    (void)state;
    static const struct {
        const char *src, *msg;
    } cases[] = {
        {"func main(x: f32[3]) {\n    return uniform(x, shape=[2])\n}\n",
         "r.tg:2:12: uniform: input 0 must be a key (i64[], made by key, key_split or "
         "fold_in), got f32[3]"},
        {"func main() {\n    return normal(key(seed=1), dtype=\"i32\")\n}\n",
         "normal: dtype must be f32 or f64, got i32"},
        {"func main() {\n    return uniform(key(seed=1), minval=1, maxval=1)\n}\n",
         "uniform: minval (1) must be below maxval (1)"},
        {"func main() {\n    return uniform(key(seed=1), minval=-1e300, maxval=1)\n}\n",
         "uniform: minval (-1e+300) and maxval (1) must be finite f32 values"},
        {"func main() {\n    return key()\n}\n", "key: takes the seed either as an input"},
        {"func main() {\n    return key_split(key(seed=1), n=0)\n}\n",
         "key_split: n must be at least 1"},
        {"func main(p: f32[3]) {\n    return bernoulli(key(seed=1), p, shape=[2])\n}\n",
         "bernoulli: p of type f32[3] does not broadcast to bool[2]"},
        {"func main() {\n    return categorical(key(seed=1), zeros(shape=[3]), axis=1)\n}\n",
         "categorical: axis 1 is out of range for 1 dimensions"},
        {"func main() {\n    return permutation(key(seed=1))\n}\n",
         "permutation: missing attribute 'n'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_module *m = NULL;
        tg_status st = tg_module_parse(NULL, cases[i].src, strlen(cases[i].src), "r.tg", &m);
        assert_int_not_equal(st, TG_OK);
        if (!strstr(tg_last_error(), cases[i].msg))
            fail_msg("case %zu: got \"%s\"", i, tg_last_error());
        tg_module_free(m);
    }
    /* infinite bounds (only the C API can write them) */
    tg_graph *g = tg_graph_new(NULL, "main");
    tg_attr a[2] = {TG_A_FLOAT("minval", -INFINITY), TG_A_FLOAT("maxval", 0.0)};
    tg_var *k = tg_apply(g, "key", NULL, 0, (tg_attr[]){TG_A_INT("seed", 1)}, 1);
    assert_null(tg_apply(g, "uniform", &k, 1, a, 2));
    assert_non_null(strstr(tg_last_error(), "must be finite f32 values"));
    tg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threefry_known_answers),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_discrete),
        cmocka_unit_test(test_permutation),
        cmocka_unit_test(test_key_independence),
        cmocka_unit_test(test_reparameterised_gradient),
        cmocka_unit_test(test_wide_range),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
