#!/usr/bin/env python3
"""hierarchical_check.py - examples/hierarchical.tg against SciPy.

Draws the example's data from its own model (fixed seed: 8 groups, 200 observed and 60
right-censored rows, binomial detections), then at several parameter points runs the
example with `tgraph run` in each --mode and checks:
  - lp against the sum of scipy.stats logpdf/logsf/logpmf terms (norm, halfnorm, gamma,
    t, beta, binom): relative error below 1e-10;
  - each gradient component against central finite differences of that SciPy sum (step
    1e-5 times max(1, |x|), fourth-order: error below 1e-6 relative to max(1, |g|)).
One point lies deep in the censored tail (a censored c 45 noise units above its mean),
where log(0.5 * erfc(...)) as written is -inf: the stabilized graph (vm, c) must give
SciPy's finite value there; the reference mode, which runs the graph as written, is only
checked to be -inf (which is why the rewrite exists).

usage: hierarchical_check.py --tgraph PATH [--mode reference,vm,c]
Exit status 0 when every check passes.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    from scipy import stats
except ImportError:
    print("SKIP: scipy not found (Debian: python3-scipy)")
    sys.exit(77)

J, K = 8, 3
PARAMS = [("mu", ()), ("tau", ()), ("z", (J,)), ("nu", ()), ("beta", (K,)), ("sigma", ()),
          ("p", ())]
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "hierarchical.tg")


def make_data(rng):
    mu, tau, sigma, p = 1.0, 0.8, 0.7, 0.3
    z = rng.standard_normal(J)
    beta = np.array([0.5, -1.0, 0.25])
    n_obs, n_cens = 200, 60
    go, gc = rng.integers(0, J, n_obs), rng.integers(0, J, n_cens)
    Xo, Xc = rng.standard_normal((n_obs, K)), rng.standard_normal((n_cens, K))
    theta = mu + tau * z
    y = theta[go] + Xo @ beta + sigma * rng.standard_normal(n_obs)
    mc = theta[gc] + Xc @ beta
    c = mc - np.abs(rng.standard_normal(n_cens)) * sigma  # censoring points below the draws
    n = rng.integers(5, 30, J).astype(np.float64)
    k = rng.binomial(n.astype(int), p).astype(np.float64)
    return {"y": y, "Xo": Xo, "Go": np.eye(J)[go], "c": c, "Xc": Xc, "Gc": np.eye(J)[gc],
            "k": k, "n": n}


def logp_scipy(th, d):
    mu, tau, z, nu, beta, sigma, p = (th[name] for name, _ in PARAMS)
    lp = stats.norm.logpdf(mu, 0, 5) + stats.halfnorm.logpdf(tau, scale=5)
    lp += stats.norm.logpdf(z).sum() + stats.gamma.logpdf(nu, 2, scale=10)
    lp += stats.t.logpdf(beta, nu, scale=2.5).sum() + stats.gamma.logpdf(sigma, 2, scale=0.5)
    lp += stats.beta.logpdf(p, 2, 5)
    theta = mu + tau * z
    lp += stats.norm.logpdf(d["y"], d["Go"] @ theta + d["Xo"] @ beta, sigma).sum()
    lp += stats.norm.logsf(d["c"], d["Gc"] @ theta + d["Xc"] @ beta, sigma).sum()
    lp += stats.binom.logpmf(d["k"], d["n"], p).sum()
    return float(lp)


def fd_grad(th, d):
    """Fourth-order central differences of logp_scipy, per parameter element."""
    g = {}
    for name, shape in PARAMS:
        v = np.array(th[name], dtype=np.float64).reshape(-1)
        out = np.zeros_like(v)
        for i in range(v.size):
            h = 1e-5 * max(1.0, abs(v[i]))
            vals = []
            for s in (-2, -1, 1, 2):
                w = v.copy()
                w[i] += s * h
                t2 = dict(th)
                t2[name] = w.reshape(shape) if shape else w[0]
                vals.append(logp_scipy(t2, d))
            out[i] = (vals[0] - 8 * vals[1] + 8 * vals[2] - vals[3]) / (12 * h)
        g[name] = out.reshape(shape)
    return g


def run(tgraph, mode, th, d, tmp):
    cmd = [tgraph, "run", EXAMPLE, "--mode", mode]
    for name, val in list(th.items()) + list(d.items()):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, np.asarray(val, dtype=np.float64))
        cmd += ["--in", "%s=%s" % (name, path)]
    outs = ["lp"] + ["g_" + name for name, _ in PARAMS]
    for o in outs:
        cmd += ["--out", "%s=%s" % (o, os.path.join(tmp, o + ".npy"))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("tgraph run --mode %s failed:\n%s" % (mode, r.stderr))
    return {o: np.load(os.path.join(tmp, o + ".npy")) for o in outs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tgraph", required=True)
    ap.add_argument("--mode", default="reference,vm,c")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    d = make_data(rng)
    points = []
    for _ in range(3):
        points.append({"mu": rng.normal(1, 0.5), "tau": rng.uniform(0.3, 2),
                       "z": rng.standard_normal(J), "nu": rng.uniform(1, 30),
                       "beta": rng.standard_normal(K), "sigma": rng.uniform(0.3, 2),
                       "p": rng.uniform(0.05, 0.95)})
    # deep in the censored tail: the first censoring point 45 sigma above its mean
    tail = dict(points[0])
    tail["sigma"] = 0.5
    d_tail = dict(d)
    d_tail["c"] = d["c"].copy()
    m0 = d["Gc"][0] @ (tail["mu"] + tail["tau"] * tail["z"]) + d["Xc"][0] @ tail["beta"]
    d_tail["c"][0] = m0 + 45 * tail["sigma"]
    cases = [(th, d, False) for th in points] + [(tail, d_tail, True)]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for idx, (th, data, deep) in enumerate(cases):
            want = logp_scipy(th, data)
            gwant = fd_grad(th, data)
            for mode in args.mode.split(","):
                got = run(args.tgraph, mode, th, data, tmp)
                lp = float(got["lp"])
                label = "point %d%s [%s]" % (idx, " (censored tail)" if deep else "", mode)
                if deep and mode == "reference":
                    ok = lp == -np.inf
                    print("%s %s: lp as written %r (the unstabilized form underflows)" % (
                        "ok  " if ok else "FAIL", label, lp))
                    failed += not ok
                    continue
                err = abs(lp - want) / max(1.0, abs(want))
                worst, where = 0.0, ""
                for name, _ in PARAMS:
                    e = np.max(np.abs(got["g_" + name] - gwant[name]) /
                               np.maximum(1.0, np.abs(gwant[name])))
                    if e > worst:
                        worst, where = float(e), name
                ok = err < 1e-10 and worst < 1e-6 and np.isfinite(lp)
                print("%s %s: lp %.12g (SciPy %.12g, rel err %.1e), gradient max err %.1e (%s)"
                      % ("ok  " if ok else "FAIL", label, lp, want, err, worst, where))
                failed += not ok
    print("%s" % ("all checks passed" if not failed else "%d checks failed" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
