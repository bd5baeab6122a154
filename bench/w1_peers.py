#!/usr/bin/env python3
"""w1_peers.py - W1 = exp(-x^2/2) * sin(x) + x/2 on 1e7 float64 values in NumPy (and
PyTorch when it imports, at 1 and 2 threads: plain expressions, and with preallocated
outputs through out=, the fastest way each library offers), timed the way bench_w1 times tgraph: two warm-up calls, then
the median and minimum of N runs. Prints one line per configuration in the format of
bench_w1 ("w1 numpy ...: median <t> ms, min <t> ms (<n> runs)"), which run.sh parses.

usage: w1_peers.py [-n RUNS] [--size N] [--cpu]
(--cpu: process CPU time instead of the wall clock, as bench_w1 --cpu)
Run it with Debian's /usr/bin/python3 (python3-numpy).
"""
import argparse
import sys
import time

import numpy as np

import peer_timing
from peer_timing import timeit


CLOCK = time.perf_counter


def report(name, med, mn, runs):
    if CLOCK is time.process_time:
        name += " cpu-time"
    peer_timing.report(name, med, mn, runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--size", type=int, default=10_000_000)
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    if a.cpu:
        global CLOCK
        CLOCK = time.process_time
    x = np.linspace(-5.0, 5.0, a.size)
    want = np.exp(-x * x / 2) * np.sin(x) + x / 2

    def numpy_plain():
        return np.exp(-x * x / 2) * np.sin(x) + x / 2

    out = np.empty_like(x)
    tmp = np.empty_like(x)

    def numpy_out():
        np.multiply(x, x, out=tmp)
        np.multiply(tmp, -0.5, out=tmp)
        np.exp(tmp, out=tmp)
        np.sin(x, out=out)
        np.multiply(tmp, out, out=out)
        np.multiply(x, 0.5, out=tmp)
        np.add(out, tmp, out=out)
        return out

    assert np.allclose(numpy_out(), want, rtol=0, atol=1e-12)
    report("w1 numpy", *timeit(numpy_plain, a.n, 2, CLOCK), a.n)
    report("w1 numpy out=", *timeit(numpy_out, a.n, 2, CLOCK), a.n)
    try:
        import torch
    except ImportError:
        print("w1 torch: not importable, skipped", flush=True)
        return 0
    xt = torch.from_numpy(x)
    for th in (1, 2):
        torch.set_num_threads(th)

        def torch_plain():
            return torch.exp(-xt * xt / 2) * torch.sin(xt) + xt / 2

        tout = torch.empty_like(xt)
        ttmp = torch.empty_like(xt)

        def torch_out():
            torch.mul(xt, xt, out=ttmp)
            torch.mul(ttmp, -0.5, out=ttmp)
            torch.exp(ttmp, out=ttmp)
            torch.sin(xt, out=tout)
            torch.mul(ttmp, tout, out=tout)
            torch.mul(xt, 0.5, out=ttmp)
            torch.add(tout, ttmp, out=tout)
            return tout

        assert np.allclose(torch_out().numpy(), want, rtol=0, atol=1e-12)
        report(f"w1 torch threads={th}", *timeit(torch_plain, a.n, 2, CLOCK), a.n)
        report(f"w1 torch out= threads={th}", *timeit(torch_out, a.n, 2, CLOCK), a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
