#!/usr/bin/env python3
"""w10c_peers.py - W10c's peer: one SGD training step of the MLP 784-256-10 (relu, softmax
cross-entropy, f32, batch 512, learning rate 0.05) in PyTorch, one process on 2 threads
(torch.set_num_threads(2), OMP_WAIT_POLICY=PASSIVE so that its idle OpenMP threads sleep
instead of spinning), as bench_w10c's step on 2 devices. Two ways a PyTorch user writes
it: autograd with torch.optim.SGD ("torch"), and the gradients written out without
autograd, updated in place ("torch-manual"). Timed like bench_w10c: three warm-up steps,
then the median and minimum of N steps, one line per way
("w10c torch threads=2: median <t> ms, min <t> ms (<n> runs)").

usage: w10c_peers.py [-n RUNS] [--threads T]
Run it with Debian's /usr/bin/python3 (python3-torch; `make bench` installs it when
missing). Without PyTorch it prints "w10c torch: not importable, skipped" and exits 0.
"""
import argparse
import os
import sys

from peer_timing import report, timeit

NIN, NHID, NOUT, BATCH, LR = 784, 256, 10, 512, 0.05


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    # before torch is imported: its OpenMP runtime reads them when it starts
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    try:
        import torch
    except ImportError:
        print("w10c torch: not importable, skipped (Debian: python3-torch)", flush=True)
        return 0
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(42)
    x = torch.rand(BATCH, NIN, generator=g)
    y = torch.randint(0, NOUT, (BATCH,), generator=g)
    rows = torch.arange(BATCH)
    init = []
    for fan_in, fan_out in ((NIN, NHID), (NHID, NOUT)):
        bound = (6 / fan_in) ** 0.5
        init += [(torch.rand(fan_in, fan_out, generator=g) * 2 - 1) * bound, torch.zeros(fan_out)]

    # ---- autograd + torch.optim.SGD ----
    params = [p.clone().requires_grad_(True) for p in init]
    opt = torch.optim.SGD(params, lr=LR)

    def autograd_step():
        W1, b1, W2, b2 = params
        h = torch.relu(x @ W1 + b1)
        loss = torch.nn.functional.cross_entropy(h @ W2 + b2, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    loss = float(autograd_step())
    assert 0 < loss < 20, loss
    report(f"w10c torch threads={a.threads}", *timeit(autograd_step, a.n, 3), a.n)

    # ---- the gradients written out, no autograd, in-place update ----
    P = [p.clone() for p in init]

    @torch.no_grad()
    def manual_step():
        W1, b1, W2, b2 = P
        z1 = torch.addmm(b1, x, W1)
        h = torch.relu(z1)
        logp = torch.log_softmax(torch.addmm(b2, h, W2), dim=1)
        loss = -logp[rows, y].mean()
        d = logp.exp_()
        d[rows, y] -= 1
        d.mul_(1 / BATCH)
        gW2, gb2 = h.t() @ d, d.sum(0)
        dh = (d @ W2.t()).mul_(z1 > 0)
        gW1, gb1 = x.t() @ dh, dh.sum(0)
        for p, gi in zip(P, (gW1, gb1, gW2, gb2)):
            p.sub_(gi, alpha=LR)
        return loss

    loss = float(manual_step())
    assert 0 < loss < 20, loss
    report(f"w10c torch-manual threads={a.threads}", *timeit(manual_step, a.n, 3), a.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
