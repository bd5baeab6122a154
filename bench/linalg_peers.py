#!/usr/bin/env python3
"""linalg_peers.py - NumPy on the work of bench_linalg (bench/linalg.c), timed the same way:
batches of calls of about 20 ms, the median and minimum over N batches, per call.

  W12: batched Cholesky plus solve: 256 symmetric positive definite 32 x 32 f64 matrices
       A and right-hand sides B [256, 32, 1]: np.linalg.cholesky(A) and
       np.linalg.solve(A, B) (`w12 numpy`).
  W13: a Gaussian-process marginal likelihood and its gradient, N = 500, squared
       exponential kernel, theta = (log length scale, log signal sd, log noise sd), written
       by hand: L = cholesky(K), alpha = K^-1 y by two triangular solves, K^-1 from L, and
       d nll / d theta_i = tr((K^-1 - alpha alpha^T) dK/dtheta_i) / 2 (`w13 numpy`, with
       scipy.linalg's triangular solves where SciPy imports, else np.linalg.solve on K).
  MVN: a batched Gaussian log-density over W12's matrices as covariances and its right-hand
       sides as points: L = np.linalg.cholesky(A), z = np.linalg.solve(L, x) (NumPy has no
       batched triangular solve), -z^T z / 2 - sum(log(diag(L))) - 32 log(2 pi) / 2 per
       block (`mvn numpy`).
Before timing, W13's value and gradient are checked against central finite differences.

usage: linalg_peers.py [-n RUNS] [--threads T]
One line per configuration in bench_linalg's format
("w12 numpy threads=1: median <t> us, min <t> us (<n> runs of <k> calls)").
"""
import argparse
import math
import os
import statistics
import time

B12, N12, N13 = 256, 32, 500


def timeit(fn, runs):
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(5):
        fn()
    per = (time.perf_counter() - t0) / 5
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
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np
    try:
        from scipy.linalg import solve_triangular
    except ImportError:
        solve_triangular = None

    rng = np.random.default_rng(12)
    M = rng.uniform(-1, 1, (B12, N12, N12))
    A = M @ np.swapaxes(M, 1, 2) + N12 * np.eye(N12)
    Bm = rng.uniform(-1, 1, (B12, N12, 1))

    def w12():
        return np.linalg.cholesky(A), np.linalg.solve(A, Bm)

    cm = 0.5 * N12 * math.log(2 * math.pi)

    def mvn():
        L = np.linalg.cholesky(A)
        z = np.linalg.solve(L, Bm)
        ld = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
        return -0.5 * np.sum(z * z, axis=(1, 2)) - ld - cm

    x = 10.0 * np.arange(N13) / N13
    y = np.sin(x) + 0.1 * np.sin(37.0 * np.arange(N13))  # as bench_linalg
    theta = np.array([math.log(1.2), math.log(0.9), math.log(0.1)])
    d2 = (x[:, None] - x[None, :]) ** 2
    eye = np.eye(N13)
    const = 0.5 * N13 * math.log(2 * math.pi)

    def w13(th):
        ell, sf2, sn2 = math.exp(th[0]), math.exp(2 * th[1]), math.exp(2 * th[2])
        E = sf2 * np.exp(-0.5 * d2 / (ell * ell))
        K = E + sn2 * eye
        L = np.linalg.cholesky(K)
        if solve_triangular is not None:
            z = solve_triangular(L, y, lower=True)
            alpha = solve_triangular(L, z, lower=True, trans=1)
            Li = solve_triangular(L, eye, lower=True)
            Kinv = Li.T @ Li
        else:
            Kinv = np.linalg.inv(K)
            alpha = Kinv @ y
        nll = 0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + const
        W = Kinv - np.outer(alpha, alpha)
        dK = (E * d2 / (ell * ell), 2 * E, 2 * sn2 * eye)
        return nll, np.array([0.5 * np.sum(W * g) for g in dK])

    nll, g = w13(theta)
    h = 1e-5
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        fd = (w13(theta + e)[0] - w13(theta - e)[0]) / (2 * h)
        assert abs(fd - g[i]) <= 1e-5 * (1 + abs(fd)), (i, fd, g[i])
    print(f"w13 numpy nll = {nll:.12g}, grad = [{g[0]:.12g}, {g[1]:.12g}, {g[2]:.12g}]")

    for name, fn in (("w12 numpy", w12), ("w13 numpy", lambda: w13(theta)), ("mvn numpy", mvn)):
        med, mn, batch = timeit(fn, a.n)
        report(f"{name} threads={a.threads}", med, mn, batch, a.n)


if __name__ == "__main__":
    main()
