#!/usr/bin/env python3
"""scan_peers.py - the peers of bench_scan (bench/scan.c), on the same work:

  garch  the GARCH(1,1) log-likelihood and its gradient over 1,000 steps (f64):
         s2[t] = w + a r[t]^2 + b s2[t-1] (s2[-1] = 1), ll = -0.5 sum(log s2 + r^2 / s2),
         the gradient with respect to (w, a, b). As a NumPy loop (forward, then the
         backward recursion written out), and as SciPy's linear filter
         (scipy.signal.lfilter for the variance recursion and for its adjoint, run
         backwards), the fastest Python form;
  rnn    an RNN's forward and backward pass (tanh cell, hidden 128, batch 32, input 32,
         1,000 steps, f32, loss = the sum of every hidden state) in PyTorch at 1 thread: a
         Python loop with the input projection computed before it, and torch.nn.RNN.

Each peer is checked against the NumPy loop before it is timed (garch: the lfilter form's
value and gradient). Timing as bench_scan: batches of about 20 ms, the median and minimum
over RUNS batches, per call, in wall-clock time and (a "clock=cpu" line) in process CPU
time.

usage: scan_peers.py [-n RUNS] [--only garch|rnn]
"""
import argparse
import os
import statistics
import sys
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"


def timeit(fn, runs):
    """Wall-clock and process CPU time per call: ((median, min), (median, min))."""
    fn()
    t0 = time.perf_counter()
    fn()
    per = time.perf_counter() - t0
    batch = max(1, int(0.02 / per)) if per > 0 else 100
    ts, cs = [], []
    for _ in range(runs):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        ts.append((time.perf_counter() - t0) / batch)
        cs.append((time.process_time() - c0) / batch)
    return (statistics.median(ts), min(ts)), (statistics.median(cs), min(cs))


def report(name, times, runs):
    """Two lines: wall-clock time, and CPU time ("clock=cpu", as bench_scan)."""
    for label, (med, mn) in zip((name, name + " clock=cpu"), times):
        print(f"{label}: median {med * 1e3:.3f} ms, min {mn * 1e3:.3f} ms ({runs} runs)",
              flush=True)


def garch(runs):
    import numpy as np
    r = np.random.default_rng(3).uniform(-1, 1, 1000)
    w, a, b = 0.1, 0.1, 0.8

    def loop():
        T = len(r)
        s2 = np.empty(T)
        prev, ll = 1.0, 0.0
        for t in range(T):
            prev = w + a * r[t] * r[t] + b * prev
            s2[t] = prev
            ll -= 0.5 * (np.log(prev) + r[t] * r[t] / prev)
        g, gw, ga, gb = 0.0, 0.0, 0.0, 0.0
        for t in range(T - 1, -1, -1):
            g = -0.5 * (1 / s2[t] - r[t] * r[t] / (s2[t] * s2[t])) + g
            gw += g
            ga += g * r[t] * r[t]
            gb += g * (s2[t - 1] if t > 0 else 1.0)
            g *= b
        return ll, np.array([gw, ga, gb])

    try:
        from scipy.signal import lfilter
    except ImportError:
        lfilter = None

    def filt():
        q = r * r
        s2 = lfilter([1.0], [1.0, -b], w + a * q, zi=[b * 1.0])[0]
        ll = -0.5 * np.sum(np.log(s2) + q / s2)
        d = -0.5 * (1 / s2 - q / (s2 * s2))
        g = lfilter([1.0], [1.0, -b], d[::-1])[::-1]
        prev = np.concatenate(([1.0], s2[:-1]))
        return ll, np.array([g.sum(), g @ q, g @ prev])

    ll0, g0 = loop()
    report("scan-garch numpy-loop", timeit(loop, runs), runs)
    if lfilter is None:
        print("scan-garch numpy-lfilter: skipped (no scipy)")
        return
    ll1, g1 = filt()
    if not (np.isclose(ll0, ll1) and np.allclose(g0, g1)):
        sys.exit(f"scan_peers: lfilter garch differs from the loop: {ll1} {g1} vs {ll0} {g0}")
    report("scan-garch numpy-lfilter", timeit(filt, runs), runs)


def rnn(runs):
    try:
        import torch
    except ImportError:
        print("scan-rnn torch: skipped (no torch)")
        return
    torch.set_num_threads(1)
    T, B, I, H = 1000, 32, 32, 128
    g = torch.Generator().manual_seed(5)
    xs = torch.rand(T, B, I, generator=g) * 2 - 1
    h0 = (torch.rand(B, H, generator=g) * 2 - 1) * 0.1
    Wx = ((torch.rand(I, H, generator=g) * 2 - 1) * 0.18).requires_grad_()
    Wh = ((torch.rand(H, H, generator=g) * 2 - 1) * 0.09).requires_grad_()
    b = ((torch.rand(H, generator=g) * 2 - 1) * 0.1).requires_grad_()

    def loop():
        xp = (xs.reshape(T * B, I) @ Wx + b).reshape(T, B, H)  # the projection, hoisted
        h, hs = h0, []
        for x in xp.unbind(0):  # (indexing xp[t] would make a full-size gradient per step)
            h = torch.tanh(x + h @ Wh)
            hs.append(h)
        total = torch.stack(hs).sum()
        Wx.grad = Wh.grad = b.grad = None
        total.backward()
        return total

    net = torch.nn.RNN(I, H, nonlinearity="tanh")
    with torch.no_grad():
        net.weight_ih_l0.copy_(Wx.detach().t())
        net.weight_hh_l0.copy_(Wh.detach().t())
        net.bias_ih_l0.copy_(b.detach())
        net.bias_hh_l0.zero_()

    def module():
        out, _ = net(xs, h0.unsqueeze(0))
        total = out.sum()
        net.zero_grad()
        total.backward()
        return total

    a, c = float(loop()), float(module())
    if abs(a - c) > 1e-3 * max(1.0, abs(a)):
        sys.exit(f"scan_peers: torch.nn.RNN's loss {c} differs from the loop's {a}")
    report("scan-rnn torch-loop threads=1", timeit(loop, runs), runs)
    report("scan-rnn torch-nn.RNN threads=1", timeit(module, runs), runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--only", choices=["garch", "rnn"])
    a = ap.parse_args()
    if a.only in (None, "garch"):
        garch(a.n)
    if a.only in (None, "rnn"):
        rnn(a.n)


if __name__ == "__main__":
    main()
