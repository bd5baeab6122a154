"""Bayesian linear regression sampled with HMC from Python: examples/bayes_regression.c's
model, with the log posterior and its gradient compiled by tgraph.

    PYTHONPATH=python /usr/bin/python3 python/examples/bayes_regression.py [--chains C]
        [--warmup W] [--samples S] [--leapfrog L] [--seed K] [--mode vm|c|reference]

Synthetic data (N = 10,000 observations, P = 20 predictors, known coefficients, noise
0.5) is drawn with tgraph's random numbers. Priors: beta_j ~ Normal(0, 5), log sigma ~
Normal(0, 1). The log posterior of all chains at once (theta f64[C, P+1]) and its
gradient (tg.grad) are ONE compiled function; X and y are shared variables it reads
without copies. The sampler (NumPy) is HMC with a step size per chain tuned by dual
averaging during warm-up (target acceptance 0.8), jittered +-10%, and a number of
leapfrog steps drawn each iteration from L/2..3L/2 (a fixed trajectory length can come
back near its start, one period of the posterior's oscillation, and mix badly).
Exit status 0 when every true coefficient lies within 3 posterior standard deviations of
its posterior mean and R-hat < 1.05 for every value; 1 otherwise.
"""
import argparse
import math
import sys
import time

import numpy as np

import tgraph as tg

N, P = 10000, 20
D = P + 1
SIGMA, PRIOR_SD = 0.5, 5.0


def simulate(seed):
    ks = tg.key_split(tg.key(seed=seed), n=3)
    X = tg.normal(ks[0], shape=(N, P), dtype="float64")
    beta = tg.normal(ks[1], shape=(P,), dtype="float64")
    y = X @ beta + tg.normal(ks[2], shape=(N,), dtype="float64") * SIGMA
    return tg.function([], [X, y, beta])()


def build_logp(X, y, chains, mode):
    """logp f64[C] and its gradient f64[C, D] at theta f64[C, D] (beta, log sigma)."""
    Xs, ys = tg.shared(X, name="X"), tg.shared(y, name="y")
    theta = tg.tensor("theta", shape=(chains, D))
    beta, ls = theta[:, :P], theta[:, P]
    r = ys - beta @ Xs.T  # [C, N]
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    loglik = -N * (ls + half_log_2pi) - 0.5 * tg.sum(r * r, axis=1) * tg.exp(-2.0 * ls)
    prior = (-0.5 / PRIOR_SD ** 2) * tg.sum(beta * beta, axis=1) - 0.5 * ls * ls \
        - (D * half_log_2pi + P * math.log(PRIOR_SD))
    logp = loglik + prior
    return tg.function([theta], [logp, tg.grad(tg.sum(logp), theta)], mode=mode)


def rhat(draws):
    """Gelman-Rubin R-hat of draws [chains, samples] (split chains)."""
    half = draws.shape[1] // 2
    d = np.concatenate([draws[:, :half], draws[:, half:2 * half]])
    n = d.shape[1]
    w = d.var(axis=1, ddof=1).mean()
    b = n * d.mean(axis=1).var(ddof=1)
    return math.sqrt(((n - 1) / n * w + b / n) / w)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--leapfrog", type=int, default=10, help="mean leapfrog steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", default="vm", choices=["vm", "c", "reference"])
    o = ap.parse_args(argv)
    X, y, beta_true = simulate(o.seed)
    f = build_logp(X, y, o.chains, o.mode)
    rng = np.random.default_rng(o.seed)
    C = o.chains
    theta = np.concatenate([rng.normal(0, 1, (C, P)), np.zeros((C, 1))], axis=1)
    logp, grad = f(theta)
    eps = np.full(C, 1e-3)
    # dual averaging (Hoffman and Gelman 2014, with their constants)
    mu, hbar, log_eps_bar = np.log(10 * eps), np.zeros(C), np.zeros(C)
    gamma, t0, kappa, target = 0.05, 10.0, 0.75, 0.8
    draws = np.empty((C, o.samples, D))
    evals, t_start = 0, time.perf_counter()
    for it in range(o.warmup + o.samples):
        step = eps * rng.uniform(0.9, 1.1, C)
        p0 = rng.standard_normal((C, D))
        n_lf = int(rng.integers(max(1, o.leapfrog // 2), o.leapfrog + o.leapfrog // 2 + 1))
        q, p, g = theta.copy(), p0 + 0.5 * step[:, None] * grad, grad
        for k in range(n_lf):
            q = q + step[:, None] * p
            lq, g = f(q)
            evals += 1
            p = p + (step if k + 1 < n_lf else 0.5 * step)[:, None] * g
        h0 = logp - 0.5 * np.sum(p0 * p0, axis=1)
        h1 = lq - 0.5 * np.sum(p * p, axis=1)
        accept_p = np.exp(np.minimum(0.0, np.nan_to_num(h1 - h0, nan=-np.inf)))
        take = rng.uniform(size=C) < accept_p
        theta[take], logp[take], grad[take] = q[take], lq[take], g[take]
        if it < o.warmup:
            m = it + 1
            hbar = (1 - 1 / (m + t0)) * hbar + (target - accept_p) / (m + t0)
            log_eps = mu - math.sqrt(m) / gamma * hbar
            w = m ** -kappa
            log_eps_bar = w * log_eps + (1 - w) * log_eps_bar
            eps = np.exp(log_eps if it + 1 < o.warmup else log_eps_bar)
        else:
            draws[:, it - o.warmup] = theta
    elapsed = time.perf_counter() - t_start
    mean, sd = draws.reshape(-1, D).mean(axis=0), draws.reshape(-1, D).std(axis=0)
    rh = [rhat(draws[:, :, j]) for j in range(D)]
    print(f"{C} chains, {o.warmup} warm-up + {o.samples} draws, {o.leapfrog // 2}.."
          f"{o.leapfrog + o.leapfrog // 2} leapfrog steps; "
          f"step sizes {', '.join(f'{e:.2e}' for e in eps)}")
    print(" value     true     mean       sd   |z|   R-hat")
    worst = 0.0
    for j in range(D):
        true = beta_true[j] if j < P else math.log(SIGMA)
        z = abs(mean[j] - true) / sd[j]
        worst = max(worst, z)
        name = f"beta[{j}]" if j < P else "log_sigma"
        print(f"{name:>9} {true:8.4f} {mean[j]:8.4f} {sd[j]:8.4f} {z:5.2f} {rh[j]:7.4f}")
    print(f"{evals} logp+grad evaluations of {C} chains in {elapsed:.2f} s "
          f"({evals / elapsed:.0f} calls/s, {evals * C / elapsed:.0f} chain-evaluations/s)")
    ok = worst < 3.0 and max(rh) < 1.05
    print("posterior " + ("checks out" if ok else "FAILED") +
          f": largest |z| {worst:.2f}, largest R-hat {max(rh):.4f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
