#!/usr/bin/env python3
"""w9_peers.py - W9, the log posterior and its gradient of the Bayesian linear regression
of examples/bayes_regression.c (N = 10,000, P = 20, float64; y ~ Normal(X beta, sigma),
beta_j ~ Normal(0, 5), log sigma ~ Normal(0, 1); theta = (beta, log sigma)), for C chains
at once (default 1), in NumPy (the gradient written out) and PyTorch (autograd, and the
gradient written out), timed like bench_w9: batches of calls of about 20 ms, the median
and minimum over N batches, per call. Before timing, each peer's logp and gradient are
checked against NumPy's, and the gradient against central finite differences.

usage: w9_peers.py [-n RUNS] [--chains C] [--threads T]
One line per configuration in bench_w9's format
("w9 numpy chains=1 threads=1: median <t> us, min <t> us (<n> runs of <k> calls)").
"""
import argparse
import math
import os
import statistics
import sys
import time

N, P = 10_000, 20
D = P + 1
PRIOR_SD = 5.0
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
CONST = D * HALF_LOG_2PI + P * math.log(PRIOR_SD)


def timeit(fn, runs):
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(10):
        fn()
    per = (time.perf_counter() - t0) / 10
    batch = max(1, int(0.02 / per)) if per > 0 else 1000
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        ts.append((time.perf_counter() - t0) / batch)
    return statistics.median(ts), min(ts), batch


def report(name, med, mn, batch, runs):
    print(f"{name}: median {med * 1e6:.3f} us, min {mn * 1e6:.3f} us "
          f"({runs} runs of {batch} calls)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--chains", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np

    rng = np.random.default_rng(1)
    X = rng.standard_normal((N, P))
    beta_true = rng.standard_normal(P)
    y = X @ beta_true + 0.5 * rng.standard_normal(N)
    C = a.chains
    theta = (0.01 * (np.arange(C * D) % 7) - 0.03).reshape(C, D)
    tag = f"chains={C} threads={a.threads}"

    def numpy_logp_grad(th):
        beta, ls = th[:, :P], th[:, P]
        r = y - beta @ X.T                      # [C, N]
        ss = np.einsum("cn,cn->c", r, r)
        e = np.exp(-2 * ls)
        logp = (-N * (ls + HALF_LOG_2PI) - 0.5 * ss * e
                - 0.5 * np.einsum("cp,cp->c", beta, beta) / PRIOR_SD**2 - 0.5 * ls * ls - CONST)
        g = np.empty_like(th)
        g[:, :P] = e[:, None] * (r @ X) - beta / PRIOR_SD**2
        g[:, P] = -N + ss * e - ls
        return logp, g

    # the gradient against central finite differences (the peers below are checked
    # against this one)
    lp0, g0 = numpy_logp_grad(theta)
    h = 1e-6
    for j in (0, P - 1, P):
        tp, tm = theta.copy(), theta.copy()
        tp[:, j] += h
        tm[:, j] -= h
        fd = (numpy_logp_grad(tp)[0] - numpy_logp_grad(tm)[0]) / (2 * h)
        assert np.allclose(fd, g0[:, j], rtol=1e-5, atol=1e-3), (j, fd, g0[:, j])

    report(f"w9 numpy {tag}", *timeit(lambda: numpy_logp_grad(theta), a.n), a.n)

    try:
        import torch
    except ImportError:
        print("w9 torch: not importable, skipped", flush=True)
        return 0
    torch.set_num_threads(a.threads)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    tht = torch.from_numpy(theta.copy())

    def torch_logp(th):
        beta, ls = th[:, :P], th[:, P]
        r = yt - beta @ Xt.T
        ss = (r * r).sum(1)
        return (-N * (ls + HALF_LOG_2PI) - 0.5 * ss * torch.exp(-2 * ls)
                - 0.5 * (beta * beta).sum(1) / PRIOR_SD**2 - 0.5 * ls * ls - CONST)

    def torch_autograd():
        th = tht.detach().requires_grad_(True)
        lp = torch_logp(th)
        (g,) = torch.autograd.grad(lp.sum(), th)
        return lp, g

    @torch.no_grad()
    def torch_manual():
        beta, ls = tht[:, :P], tht[:, P]
        r = yt - beta @ Xt.T
        ss = (r * r).sum(1)
        e = torch.exp(-2 * ls)
        lp = (-N * (ls + HALF_LOG_2PI) - 0.5 * ss * e
              - 0.5 * (beta * beta).sum(1) / PRIOR_SD**2 - 0.5 * ls * ls - CONST)
        g = torch.empty_like(tht)
        g[:, :P] = e[:, None] * (r @ Xt) - beta / PRIOR_SD**2
        g[:, P] = -N + ss * e - ls
        return lp, g

    for name, fn in (("torch", torch_autograd), ("torch-manual", torch_manual)):
        lp, g = fn()
        assert np.allclose(lp.detach().numpy(), lp0, rtol=1e-12), name
        assert np.allclose(g.detach().numpy(), g0, rtol=1e-9, atol=1e-9), name
        report(f"w9 {name} {tag}", *timeit(fn, a.n), a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
