#!/usr/bin/env python3
"""w6_peers.py - W6, one training step of the demo's MLP (784-256-10, relu, softmax
cross-entropy, Adam with bias correction, batch 256, u8 pixels scaled by 1/255 inside the
step), in NumPy (forward and backward written out, float32, updates in place with out=)
and PyTorch (autograd and torch.optim.Adam, the way a PyTorch user writes it; and the
same step with the gradients written out, no autograd), timed like bench_w6: three
warm-up steps, then the median and minimum of N steps. One line per configuration in
bench_w6's format ("w6 numpy threads=1: median <t> ms, min <t> ms (<n> runs)").

usage: w6_peers.py [-n RUNS] [--batch B] [--threads T]
The thread count applies to NumPy's BLAS (OPENBLAS_NUM_THREADS, set before NumPy is
imported) and to torch.set_num_threads. Run it with Debian's /usr/bin/python3
(python3-numpy, python3-torch); PyTorch is skipped with a note when it does not import.
"""
import argparse
import os
import sys

from peer_timing import report, timeit

NIN, NHID, NOUT = 784, 256, 10
B1, B2, EPS = 0.9, 0.999, 1e-8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np

    rng = np.random.default_rng(42)
    B = a.batch
    x = rng.integers(0, 256, size=(B, NIN), dtype=np.uint8)
    y = rng.integers(0, NOUT, size=B).astype(np.int64)
    init = [
        (rng.standard_normal((NIN, NHID)) * np.sqrt(2 / NIN)).astype(np.float32),
        np.zeros(NHID, np.float32),
        (rng.standard_normal((NHID, NOUT)) * np.sqrt(2 / NHID)).astype(np.float32),
        np.zeros(NOUT, np.float32),
    ]
    rows = np.arange(B)

    # ---- NumPy: the step written out, float32 throughout, in-place Adam ----
    P = [p.copy() for p in init]
    M = [np.zeros_like(p) for p in init]
    V = [np.zeros_like(p) for p in init]
    tmp = [np.empty_like(p) for p in init]
    state = {"t": 0}
    lr = np.float32(1e-3)

    def numpy_step():
        W1, b1, W2, b2 = P
        xf = x.astype(np.float32)
        xf *= np.float32(1 / 255)
        z1 = xf @ W1
        z1 += b1
        h = np.maximum(z1, 0)
        logits = h @ W2
        logits += b2
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        s = e.sum(axis=1, keepdims=True)
        loss = -(logits[rows, y] - np.log(s[:, 0])).mean()
        d = e / s
        d[rows, y] -= 1
        d *= np.float32(1 / B)
        g = [None, None, h.T @ d, d.sum(axis=0)]
        dh = d @ W2.T
        dh *= z1 > 0
        g[0] = xf.T @ dh
        g[1] = dh.sum(axis=0)
        state["t"] += 1
        t = state["t"]
        step = lr * np.float32(np.sqrt(1 - B2**t) / (1 - B1**t))
        for p, m, v, gi, w in zip(P, M, V, g, tmp):
            m *= np.float32(B1)
            m += np.float32(1 - B1) * gi
            v *= np.float32(B2)
            np.multiply(gi, gi, out=w)
            w *= np.float32(1 - B2)
            v += w
            np.sqrt(v, out=w)
            w += np.float32(EPS)
            np.divide(m, w, out=w)
            w *= step
            p -= w
        return loss

    loss = numpy_step()
    assert 0 < loss < 20, loss
    report(f"w6 numpy threads={a.threads}", *timeit(numpy_step, a.n, 3), a.n)

    try:
        import torch
    except ImportError:
        print("w6 torch: not importable, skipped", flush=True)
        return 0
    torch.set_num_threads(a.threads)
    xt = torch.from_numpy(x)
    yt = torch.from_numpy(y)

    # ---- PyTorch: autograd + torch.optim.Adam ----
    params = [torch.tensor(p, requires_grad=True) for p in init]
    opt = torch.optim.Adam(params, lr=1e-3, betas=(B1, B2), eps=EPS)

    def torch_autograd_step():
        W1, b1, W2, b2 = params
        xf = xt.to(torch.float32) * (1 / 255)
        h = torch.relu(xf @ W1 + b1)
        loss = torch.nn.functional.cross_entropy(h @ W2 + b2, yt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    loss = float(torch_autograd_step())
    assert 0 < loss < 20, loss
    report(f"w6 torch threads={a.threads}", *timeit(torch_autograd_step, a.n, 3), a.n)

    # ---- PyTorch: the step written out (no autograd), in-place Adam ----
    Pt = [torch.tensor(p) for p in init]
    Mt = [torch.zeros_like(p) for p in Pt]
    Vt = [torch.zeros_like(p) for p in Pt]
    st = {"t": 0}

    @torch.no_grad()
    def torch_manual_step():
        W1, b1, W2, b2 = Pt
        xf = xt.to(torch.float32).mul_(1 / 255)
        z1 = torch.addmm(b1, xf, W1)
        h = torch.relu(z1)
        logits = torch.addmm(b2, h, W2)
        logp = torch.log_softmax(logits, dim=1)
        loss = -logp[rows, yt].mean()
        d = logp.exp_()
        d[rows, yt] -= 1
        d.mul_(1 / B)
        g = [None, None, h.t() @ d, d.sum(0)]
        dh = (d @ W2.t()).mul_(z1 > 0)
        g[0] = xf.t() @ dh
        g[1] = dh.sum(0)
        st["t"] += 1
        t = st["t"]
        step = 1e-3 * (1 - B2**t) ** 0.5 / (1 - B1**t)
        for p, m, v, gi in zip(Pt, Mt, Vt, g):
            m.mul_(B1).add_(gi, alpha=1 - B1)
            v.mul_(B2).addcmul_(gi, gi, value=1 - B2)
            p.addcdiv_(m, v.sqrt().add_(EPS), value=-step)
        return loss

    loss = float(torch_manual_step())
    assert 0 < loss < 20, loss
    report(f"w6 torch-manual threads={a.threads}", *timeit(torch_manual_step, a.n, 3), a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
