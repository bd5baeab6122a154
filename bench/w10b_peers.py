#!/usr/bin/env python3
"""w10b_peers.py - W10b's NumPy peer: the chains of the Bayesian linear regression of
examples/bayes_regression.c (N = 10,000, P = 20, float64; the log posterior and its
gradient written out as in w9_peers.py) for 4 chains over 1,000 leapfrog steps, the
trajectory bench_w10b times (the same starting point, step 2e-3, momenta from 0). Each
chain's logp and gradient is computed on its own, with matrix-vector products, as the
ranks of tgraph's pmap do: NumPy's fastest form here (4 chains batched into one product
of their rows took about twice as long).

  - numpy-mp workers=2: the chains split over 2 worker processes (multiprocessing, fork), 2
    chains each, one BLAS thread each; the pool is started and has run once before the
    timing, and a timed run is one pool.map of the 2 shares (each worker runs its 1,000
    steps alone: the chains are independent, so they exchange nothing between steps,
    where tgraph's pmap meets its ranks at every step);
  - numpy workers=1: the 4 chains in this process, one BLAS thread (the sequential time).

OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS are set to 1 before NumPy is
imported. Each run times one trajectory of each configuration, interleaved; medians over
the runs. Before timing, the workers' final positions are checked against the sequential
run's.

usage: w10b_peers.py [-n RUNS] [--steps S]
Prints bench_w10b's format: "w10b numpy-mp workers=2: median <t> ms, min <t> ms (<n> runs)"
(numpy-mp: a peer of its own, so that bench/report.py's W10b target can name it).
Run it with Debian's /usr/bin/python3 (python3-numpy).
"""
import argparse
import math
import multiprocessing
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
import numpy as np  # noqa: E402  (after the thread settings, which it reads on import)

N, P = 10_000, 20
D = P + 1
CHAINS, WORKERS = 4, 2
EPS = 2e-3
PRIOR_SD = 5.0
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
CONST = D * HALF_LOG_2PI + P * math.log(PRIOR_SD)

# the data, made before the pool forks (the workers inherit it)
_rng = np.random.default_rng(1)
X = _rng.standard_normal((N, P))
y = X @ _rng.standard_normal(P) + 0.5 * _rng.standard_normal(N)


def logp_grad(th):
    """Log posterior and its gradient f64[D] of one chain th f64[D]."""
    beta, ls = th[:P], th[P]
    r = y - X @ beta
    ss = r @ r
    e = math.exp(-2 * ls)
    logp = (-N * (ls + HALF_LOG_2PI) - 0.5 * ss * e - 0.5 * (beta @ beta) / PRIOR_SD**2
            - 0.5 * ls * ls - CONST)
    g = np.empty(D)
    g[:P] = e * (r @ X) - beta / PRIOR_SD**2
    g[P] = -N + ss * e - ls
    return logp, g


def trajectory(args):
    """steps leapfrog steps of the chains th0 f64[C, D] (momenta from 0), one chain after
    the other at each step; the final positions."""
    th0, steps = args
    th = th0.copy()
    mom = np.zeros_like(th)
    g = np.stack([logp_grad(t)[1] for t in th])
    for s in range(steps):
        mom += (EPS if s else 0.5 * EPS) * g
        th += EPS * mom
        for k in range(len(th)):
            g[k] = logp_grad(th[k])[1]
    return th


def start():
    return (0.01 * (np.arange(CHAINS * D) % 7) - 0.03).reshape(CHAINS, D)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--steps", type=int, default=1000)
    a = ap.parse_args()
    th0 = start()
    shares = [(part, a.steps) for part in np.split(th0, WORKERS)]
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        # the pool is running, and has run the trajectory once, before any timing
        par = np.concatenate(pool.map(trajectory, shares))
        seq = trajectory((th0, a.steps))
        assert np.all(np.isfinite(seq)), "the trajectory diverged"
        assert np.allclose(par, seq, rtol=1e-6, atol=1e-9), "workers and sequential differ"
        t2, t1 = [], []
        for _ in range(a.n):
            t0 = time.perf_counter()
            pool.map(trajectory, shares)
            t2.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            trajectory((th0, a.steps))
            t1.append(time.perf_counter() - t0)
    for name, ts in ((f"w10b numpy-mp workers={WORKERS}", t2), ("w10b numpy workers=1", t1)):
        print(f"{name}: median {statistics.median(ts) * 1e3:.3f} ms, min {min(ts) * 1e3:.3f} ms "
              f"({a.n} runs)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
