/* bayes_model.h - the Bayesian linear regression of examples/bayes_regression.c, shared
 * with the W9 and W10b benchmarks (bench/w9.c, bench/w10b.c). Header-only (static
 * functions).
 *
 * Model: y ~ Normal(X beta, sigma), beta_j ~ Normal(0, 5), log sigma ~ Normal(0, 1);
 * the sampler works on theta = (beta_1..beta_P, log sigma), P + 1 unconstrained values.
 * Three graphs:
 *  - simulate: synthetic data from tgraph's random numbers (key, key_split, normal):
 *    X f64[N,P] standard normal, the true beta ~ Normal(0, 1), y = X beta + 0.5 noise;
 *  - logp: the log posterior density (constants included) and its gradient for C chains
 *    at once, theta f64[C,P+1] -> logp f64[C], grad f64[C,P+1]; X and y are read-only
 *    state of the compiled function (set once, never passed again). Two forms with the
 *    same interface: batched (br_build_logp: one graph computes every chain), and split
 *    over devices (br_build_logp_pmap: a pmap whose ranks each compute the logp and
 *    gradient of their share of the chains, gradients taken inside the body);
 *  - draw: the random numbers of one HMC iteration (momenta f64[C,P+1], and two uniforms per
 *    chain f64[C,2]: the accept test and a jitter of the step size) from a key that is
 *    state and advances every call.
 */
#ifndef TG_EXAMPLES_BAYES_MODEL_H
#define TG_EXAMPLES_BAYES_MODEL_H

#include <tgraph.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BR_N        10000      /* observations */
#define BR_P        20         /* predictors */
#define BR_D        (BR_P + 1) /* sampled values: beta and log sigma */
#define BR_SIGMA    0.5        /* the noise of the synthetic data */
#define BR_PRIOR_SD 5.0        /* beta_j ~ Normal(0, 5) */

static inline tg_var *br_idx(tg_graph *g, tg_var *v, int64_t i) {
    tg_slice s = {.start = i, .is_index = true};
    return tg_slice_apply(g, v, &s, 1);
}

static inline tg_var *br_normal(tg_graph *g, tg_var *key, int ndim, const int64_t *shape) {
    tg_attr a[2] = {TG_A_INTS("shape", shape, ndim), TG_A_STR("dtype", "f64")};
    return tg_apply(g, "normal", &key, 1, a, 2);
}

static inline tg_graph *br_fail(tg_graph *g, const char *what) {
    fprintf(stderr, "%s: %s\n", what,
            tg_graph_status(g) != TG_OK ? tg_graph_error(g) : tg_last_error());
    tg_graph_free(g);
    return NULL;
}

/* outputs X f64[N,P], y f64[N], beta f64[P] */
static inline tg_graph *br_build_simulate(int64_t seed) {
    tg_graph *g = tg_graph_new(NULL, "simulate");
    tg_attr sa = TG_A_INT("seed", seed), na = TG_A_INT("n", 3);
    tg_var *k = tg_apply(g, "key", NULL, 0, &sa, 1);
    tg_var *ks = tg_apply(g, "key_split", &k, 1, &na, 1);
    tg_var *X = br_normal(g, br_idx(g, ks, 0), 2, (int64_t[]){BR_N, BR_P});
    tg_var *beta = br_normal(g, br_idx(g, ks, 1), 1, (int64_t[]){BR_P});
    tg_var *noise = br_normal(g, br_idx(g, ks, 2), 1, (int64_t[]){BR_N});
    tg_var *y = tg_add(g, tg_dot(g, X, beta), tg_mul(g, noise, tg_literal_float(g, BR_SIGMA)));
    tg_var *outs[3] = {X, y, beta};
    if (!y || tg_graph_set_outputs(g, outs, 3) != TG_OK) return br_fail(g, "simulate");
    return g;
}

/* The log posterior logp f64[C] of theta f64[C,P+1] (C chains) given X f64[N,P] and
 * y f64[N], and its gradient grad f64[C,P+1] with respect to theta; false on failure (the
 * graph keeps the error). */
static inline bool br_logp_grad(tg_graph *g, tg_var *X, tg_var *y, tg_var *theta, tg_var **logp,
                                tg_var **grad) {
    const double half_log_2pi = 0.5 * log(2 * 3.141592653589793);
    tg_slice all = {.omit = TG_SLICE_OMIT_ALL};
    tg_slice bs[2] = {all, {.start = 0, .stop = BR_P, .step = 1}};
    tg_slice ss[2] = {all, {.start = BR_P, .is_index = true}};
    tg_var *beta = tg_slice_apply(g, theta, bs, 2); /* [C,P] */
    tg_var *ls = tg_slice_apply(g, theta, ss, 2);   /* [C]: log sigma */
    /* residuals with the chains as rows: [C,N], reduced along the contiguous axis */
    tg_var *r = tg_sub(g, y, tg_dot(g, beta, tg_transpose(g, X, NULL)));
    tg_var *ss_r = tg_reduce(g, "sum", tg_mul(g, r, r), (int64_t[]){1}, 1, false);
    /* log likelihood: -N (log sigma + log sqrt(2 pi)) - ss / (2 sigma^2) */
    tg_var *loglik = tg_sub(
        g, tg_mul(g, tg_add(g, ls, tg_literal_float(g, half_log_2pi)), tg_literal_float(g, -BR_N)),
        tg_mul(g, tg_mul(g, ss_r, tg_exp(g, tg_mul(g, ls, tg_literal_float(g, -2.0)))),
               tg_literal_float(g, 0.5)));
    /* priors: beta_j ~ Normal(0, 5), log sigma ~ Normal(0, 1) */
    tg_var *bb = tg_reduce(g, "sum", tg_mul(g, beta, beta), (int64_t[]){1}, 1, false);
    tg_var *prior =
        tg_sub(g, tg_mul(g, bb, tg_literal_float(g, -0.5 / (BR_PRIOR_SD * BR_PRIOR_SD))),
               tg_add(g, tg_mul(g, tg_mul(g, ls, ls), tg_literal_float(g, 0.5)),
                      tg_literal_float(g, BR_D * half_log_2pi + BR_P * log(BR_PRIOR_SD))));
    *logp = tg_add(g, loglik, prior);
    tg_var *total = tg_reduce(g, "sum", *logp, NULL, -1, false); /* chains are independent */
    return total && tg_grad(g, total, &theta, 1, TG_DISCONNECTED_ERROR, grad) == TG_OK;
}

/* state X f64[N,P], y f64[N] (read-only); input theta f64[C,P+1];
 * outputs logp f64[C], grad f64[C,P+1] */
static inline tg_graph *br_build_logp(int64_t chains) {
    tg_graph *g = tg_graph_new(NULL, "logp");
    tg_var *X = tg_state(g, "X", TG_DT_F64, 2, (int64_t[]){BR_N, BR_P});
    tg_var *y = tg_state(g, "y", TG_DT_F64, 1, (int64_t[]){BR_N});
    tg_var *theta = tg_input(g, "theta", TG_DT_F64, 2, (int64_t[]){chains, BR_D});
    tg_var *outs[2];
    if (!br_logp_grad(g, X, y, theta, &outs[0], &outs[1]) ||
        tg_graph_set_outputs(g, outs, 2) != TG_OK)
        return br_fail(g, "logp");
    return g;
}

/* One chain's logp and gradient, a function of theta f64[1,P+1], X and y (all inputs, no
 * state: it is called from a pmap body); outputs logp f64[1], grad f64[1,P+1]. */
static inline tg_graph *br_build_logp_chain(void) {
    tg_graph *g = tg_graph_new(NULL, "logp_chain");
    tg_var *theta = tg_input(g, "theta", TG_DT_F64, 2, (int64_t[]){1, BR_D});
    tg_var *X = tg_input(g, "X", TG_DT_F64, 2, (int64_t[]){BR_N, BR_P});
    tg_var *y = tg_input(g, "y", TG_DT_F64, 1, (int64_t[]){BR_N});
    tg_var *outs[2];
    if (!br_logp_grad(g, X, y, theta, &outs[0], &outs[1]) ||
        tg_graph_set_outputs(g, outs, 2) != TG_OK)
        return br_fail(g, "logp_chain");
    return g;
}

/* The same function as br_build_logp with the chains split over `devices` ranks of a pmap
 * (docs/pmap.md), which must divide them: theta is reshaped to
 * f64[devices, K = chains / devices, P+1] and mapped along axis 0; X and y stay state of
 * this outer function (a pmap body has none) and reach every rank whole (in_axes none:
 * no copy); the ranks' results, stacked, are reshaped back. The body, logp_rank, takes
 * its K chains one at a time: K calls of br_build_logp_chain (inlined when compiled),
 * whose results it concatenates. One chain is a matrix-vector product each way, which
 * costs less than a product of K rows for the few chains a device has (docs/pmap.md,
 * "Examples").
 * Same state, input and outputs as br_build_logp. */
static inline tg_graph *br_build_logp_pmap(int64_t chains, int devices) {
    if (devices < 1 || chains % devices) {
        fprintf(stderr, "logp (pmap): %lld chains do not split evenly over %d devices\n",
                (long long)chains, devices);
        return NULL;
    }
    const int64_t K = chains / devices;
    tg_graph *one = br_build_logp_chain();
    if (!one) return NULL;
    tg_graph *body = tg_graph_new(NULL, "logp_rank");
    tg_var *th = tg_input(body, "theta", TG_DT_F64, 2, (int64_t[]){K, BR_D});
    tg_var *bx = tg_input(body, "X", TG_DT_F64, 2, (int64_t[]){BR_N, BR_P});
    tg_var *by = tg_input(body, "y", TG_DT_F64, 1, (int64_t[]){BR_N});
    tg_var **lp = calloc((size_t)(2 * K), sizeof *lp), **gr = lp + K;
    tg_status st = lp ? TG_OK : TG_ENOMEM;
    for (int64_t k = 0; st == TG_OK && k < K; k++) {
        tg_slice rows[2] = {{.start = k, .stop = k + 1, .step = 1}, {.omit = TG_SLICE_OMIT_ALL}};
        tg_var *args[3] = {tg_slice_apply(body, th, rows, 2), bx, by}, *res[2];
        int nres = 2;
        st = tg_call(body, one, args, 3, res, &nres);
        lp[k] = res[0];
        gr[k] = res[1];
    }
    tg_graph_free(one); /* the calls keep it */
    tg_attr axis0 = TG_A_INT("axis", 0);
    tg_var *bout[2] = {0};
    if (st == TG_OK) {
        bout[0] = tg_apply(body, "concatenate", lp, (int)K, &axis0, 1);
        bout[1] = tg_apply(body, "concatenate", gr, (int)K, &axis0, 1);
    }
    free(lp);
    if (st != TG_OK || tg_graph_set_outputs(body, bout, 2) != TG_OK)
        return br_fail(body, "logp_rank (the body of the pmap)");
    tg_graph *g = tg_graph_new(NULL, "logp");
    tg_var *X = tg_state(g, "X", TG_DT_F64, 2, (int64_t[]){BR_N, BR_P});
    tg_var *y = tg_state(g, "y", TG_DT_F64, 1, (int64_t[]){BR_N});
    tg_var *theta = tg_input(g, "theta", TG_DT_F64, 2, (int64_t[]){chains, BR_D});
    tg_var *in[3] = {tg_reshape(g, theta, 3, (int64_t[]){devices, K, BR_D}), X, y};
    const int64_t axes[3] = {0, 0, 0};
    const bool none[3] = {false, true, true}; /* theta mapped; X, y replicated */
    tg_attr attrs[3] = {TG_A_FUNC("body", body), TG_A_STR("axis_name", "chains"),
                        TG_A_INTS("in_axes", axes, 3)};
    attrs[2].none = none;
    tg_var *res[2] = {0};
    int nres = 2;
    st = tg_apply_multi(g, "pmap", in, 3, attrs, 3, res, &nres);
    tg_graph_free(body); /* the pmap node keeps it */
    tg_var *outs[2] = {tg_reshape(g, res[0], 1, &chains),
                       tg_reshape(g, res[1], 2, (int64_t[]){chains, BR_D})};
    if (st != TG_OK || !outs[0] || !outs[1] || tg_graph_set_outputs(g, outs, 2) != TG_OK)
        return br_fail(g, "logp (pmap)");
    return g;
}

/* state key i64[]; outputs momenta f64[C,P+1] and uniforms f64[C,2] */
static inline tg_graph *br_build_draw(int64_t chains) {
    tg_graph *g = tg_graph_new(NULL, "draw");
    tg_var *k = tg_state(g, "key", TG_DT_I64, 0, NULL);
    tg_attr na = TG_A_INT("n", 3);
    tg_var *ks = tg_apply(g, "key_split", &k, 1, &na, 1);
    tg_var *mom = br_normal(g, br_idx(g, ks, 1), 2, (int64_t[]){chains, BR_D});
    const int64_t ushape[2] = {chains, 2};
    tg_attr ua[2] = {TG_A_INTS("shape", ushape, 2), TG_A_STR("dtype", "f64")};
    tg_var *ks2 = br_idx(g, ks, 2);
    tg_var *u = tg_apply(g, "uniform", &ks2, 1, ua, 2);
    tg_var *outs[2] = {mom, u};
    if (!u || tg_update(g, k, br_idx(g, ks, 0)) != TG_OK ||
        tg_graph_set_outputs(g, outs, 2) != TG_OK)
        return br_fail(g, "draw");
    return g;
}

#endif
