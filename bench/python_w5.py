"""W5 from Python: calls per second of a compiled function of 10 elementwise ops on
vectors of 10 float64 values (bench/w5.c's function), called from Python with NumPy
arrays in and a new NumPy array out, beside NumPy running the same 10 ops and PyTensor's
fast path when it is installed.

    y = tanh(x * a + b) * exp(-x) + sqrt(abs(x)) - log1p(x * x) / 3     (10 ops)

usage: PYTHONPATH=python python3 bench/python_w5.py [--seconds S] [--cpu]
Prints "w5-python CONFIG: median <t> us per call, min <t> us (...), <n> calls/s" lines
(medians of 11 batches); compare with bench_w5's "w5 vm call" line (the same call from C).
--cpu times the process's CPU time instead of the wall clock (as bench_w5 --cpu: on a
loaded machine, without the time others ran).
"""
import argparse
import sys
import time

import numpy as np

import tgraph as tg


def w5(x, a, b, lib):
    t = lib.tanh(x * a + b)
    u = t * lib.exp(-x)
    v = u + lib.sqrt(abs(x))
    w = lib.log1p(x * x)
    return v - w / 3.0


def timed(name, call, seconds, now):
    batch = 1
    while True:  # calls per batch: about seconds / 11 worth
        t0 = now()
        for _ in range(batch):
            call()
        if now() - t0 > seconds / 11 or batch > 1 << 24:
            break
        batch *= 2
    ts = []
    for _ in range(11):
        t0 = now()
        for _ in range(batch):
            call()
        ts.append((now() - t0) / batch)
    ts.sort()
    med = ts[5]
    print(f"w5-python {name}: median {med * 1e6:.3f} us per call, min {ts[0] * 1e6:.3f} us "
          f"(11 batches of {batch}), {1 / med:.0f} calls/s", flush=True)
    return med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--cpu", action="store_true")
    o = ap.parse_args()
    now = time.process_time if o.cpu else time.perf_counter
    suffix = " cpu-time" if o.cpu else ""
    xs = [np.array([0.1 * (i + 1) * (k + 1) - 0.3 for i in range(10)]) for k in range(3)]
    x, a, b = (tg.tensor(n, shape=(10,)) for n in "xab")
    want = w5(*xs, np)
    for mode, kw in (("vm", {}), ("vm unfused", {"optimize": False}),
                     ("reference", {"mode": "reference"})):
        f = tg.function([x, a, b], w5(x, a, b, tg), nthreads=1, **kw)
        np.testing.assert_allclose(f(*xs), want, rtol=1e-14)
        timed(f"tgraph {mode}{suffix}", lambda: f(*xs), o.seconds, now)
    timed(f"numpy (the same 10 ops){suffix}", lambda: w5(*xs, np), o.seconds, now)
    try:
        import pytensor  # noqa: F401
    except ImportError:
        print("w5-python pytensor: skipped, PyTensor is not installed", flush=True)
        return 0
    import pytensor.tensor as pt
    px, pa, pb = (pt.dvector(n) for n in "xab")
    pf = pytensor.function([px, pa, pb], w5(px, pa, pb, pt))
    pf.trust_input = True
    timed(f"pytensor trust_input{suffix}", lambda: pf(*xs), o.seconds, now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
