#!/usr/bin/env python3
"""blas_peers.py - the workloads of bench_blas (W2, W3, W4, W7, the linear layer) in NumPy,
at 1 and 2 BLAS threads (each thread count in a child process started with
OPENBLAS_NUM_THREADS set, since OpenBLAS reads it once), timed as bench_blas times tgraph:
two warm-up calls, then the median and minimum of N runs. Each workload runs as a plain
expression and, where NumPy allows it, with preallocated outputs (out=), the fastest way
it offers. Prints lines in bench_blas's format ("w2 numpy n=256 dtype=f64 threads=1: median ...";
numpy-out for the out= variants).

usage: blas_peers.py [-n RUNS] [--only w2|w3|w4|w7|lin|lin_sgd] [--threads T] [--cpu]
(--cpu: process CPU time instead of the wall clock, as bench_blas --cpu)
Run it with Debian's /usr/bin/python3 (python3-numpy).
"""
import argparse
import os
import subprocess
import sys
import time

from peer_timing import timeit


def child(a):
    import numpy as np

    clock = time.process_time if a.cpu else time.perf_counter
    th = a.child
    suffix = " cpu-time" if a.cpu else ""
    rng = np.random.default_rng(0)

    def report(name, fn, who="numpy"):
        wl, kv = name.split(" ", 1)
        med, mn = timeit(fn, a.n, 2, clock)
        print("%s %s %s threads=%d%s: median %.3f ms, min %.3f ms (%d runs)"
              % (wl, who, kv, th, suffix, med * 1e3, mn * 1e3, a.n), flush=True)

    def want(w):
        return a.only is None or a.only == w

    if want("w2"):
        for n in (256, 1024):
            for dt in (np.float64, np.float32):
                X, Y, Z0 = (rng.standard_normal((n, n)).astype(dt) for _ in range(3))
                o = np.empty_like(Z0)
                name = "w2 n=%d dtype=%s" % (n, "f64" if dt == np.float64 else "f32")

                def w2_out():
                    np.matmul(X, Y, out=o)
                    np.multiply(o, 0.5, out=o)
                    np.add(o, 2 * Z0, out=o)

                report(name, lambda: 0.5 * (X @ Y) + 2 * Z0)
                report(name, w2_out, "numpy-out")
    if want("w3"):
        n = 4096
        A = rng.standard_normal((n, n))
        x, b = rng.standard_normal(n), rng.standard_normal(n)
        o = np.empty(n)

        def w3_out(v):
            np.matmul(A, v, out=o)
            np.add(o, b, out=o)

        report("w3 n=%d x=forward" % n, lambda: A @ x + b)
        report("w3 n=%d x=forward" % n, lambda: w3_out(x), "numpy-out")
        xr = x[::-1]
        report("w3 n=%d x=reversed" % n, lambda: A @ xr + b)
        report("w3 n=%d x=reversed" % n, lambda: w3_out(xr), "numpy-out")
    if want("w4"):
        n = 2048
        A = rng.standard_normal((n, n))
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        o = np.empty_like(A)

        def w4_out():
            np.outer(x, y, out=o)
            np.multiply(o, 0.1, out=o)
            np.add(o, A, out=o)

        report("w4 n=%d" % n, lambda: A + 0.1 * np.outer(x, y))
        report("w4 n=%d" % n, w4_out, "numpy-out")
    if want("w7"):
        A = rng.standard_normal((64, 128, 128))
        B = rng.standard_normal((64, 128, 128))
        o = np.empty_like(A)
        report("w7 batch=64x128x128", lambda: np.matmul(A, B))
        report("w7 batch=64x128x128", lambda: np.matmul(A, B, out=o), "numpy-out")
    if want("lin") or want("lin_sgd"):
        x = rng.standard_normal((256, 512)).astype(np.float32)
        W = rng.standard_normal((512, 256)).astype(np.float32)
        b = rng.standard_normal(256).astype(np.float32)
        t = rng.standard_normal((256, 256)).astype(np.float32)

        def lin():
            h = np.tanh(x @ W + b)
            loss = np.sum(h * t)
            gh = t * (1 - h * h)
            return x.T @ gh, gh.sum(axis=0), loss

        def lin_sgd():
            gW, gb, loss = lin()
            return W - np.float32(0.01) * gW, b - np.float32(0.01) * gb, loss

        if a.only in (None, "lin"):
            report("w10 linear=fwd+bwd", lin)
        if a.only in (None, "lin_sgd"):
            report("w10 linear=fwd+bwd+sgd", lin_sgd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--only")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return 0
    for th in (1, 2):
        if a.threads and th != a.threads:
            continue
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(th), OMP_NUM_THREADS=str(th))
        cmd = [sys.executable, os.path.abspath(__file__), "-n", str(a.n), "--child", str(th)]
        if a.only:
            cmd += ["--only", a.only]
        if a.cpu:
            cmd.append("--cpu")
        rc = subprocess.call(cmd, env=env)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
