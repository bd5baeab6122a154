#!/usr/bin/env python3
"""Every collective across the processes of an MPI job (docs/mpi.md), to the bit.

A pmap over 4 ranks whose body calls psum, pmean, pmax, pmin, all_gather, psum_scatter
(tiled and not) and ppermute (pairs within and across processes, a rank receiving nothing)
on f64, f32, i32 and bool values, with a NaN for pmax and pmin, and a psum of one element
(fewer elements than processes: the ring all-reduce tgraph selects at 2 processes splits
the buffer in one part per process), runs in one process and
then under `MPIRUN -np 2` (2 ranks per process, on threads and on 2 host devices) and
`MPIRUN -np 4` (1 rank per process). The values are small integers, so every sum is exact
in any order: every result must equal the one-process run's exactly (NaN equal to NaN).

usage: collectives.py --tgraph PATH --mpirun "mpirun --oversubscribe"
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

PROGRAM = """
func main(xf: f64[4,5], xs: f32[4,3], xi: i32[4,5], xb: bool[4,2]) {
  s, m, hi, lo, g, t, u, p, si, hb, lb, c = pmap(@body, xf, xs, xi, xb, axis_name="i")
  return s, m, hi, lo, g, t, u, p, si, hb, lb, c
}
func body(x: f64[5], y: f32[3], k: i32[5], b: bool[2]) {
  s = psum(x, axis_name="i")
  m = pmean(y, axis_name="i")
  hi = pmax(x, axis_name="i")
  lo = pmin(y, axis_name="i")
  g = all_gather(y, axis_name="i", axis=1)
  t = psum_scatter(all_gather(x, axis_name="i", tiled=true), axis_name="i", tiled=true)
  u = psum_scatter(all_gather(y, axis_name="i"), axis_name="i")
  p = ppermute(k, axis_name="i", perm=[[0, 1], [1, 2], [3, 0]])
  si = psum(k, axis_name="i")
  hb = pmax(b, axis_name="i")
  lb = pmin(b, axis_name="i")
  c = psum(x[0], axis_name="i")
  return s, m, hi, lo, g, t, u, p, si, hb, lb, c
}
"""
NOUT = 12


def run(cmd, wd, tag, extra=()):
    """The outputs of `CMD run p.tg EXTRA` on the inputs in wd."""
    outs = [os.path.join(wd, "%s_%d.npy" % (tag, k)) for k in range(NOUT)]
    args = cmd + ["run", os.path.join(wd, "p.tg")] + list(extra)
    for name in ("xf", "xs", "xi", "xb"):
        args += ["--in", "%s=%s" % (name, os.path.join(wd, name + ".npy"))]
    for k, path in enumerate(outs):
        args += ["--out", "%d=%s" % (k, path)]
    res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    if res.returncode != 0:
        raise SystemExit("FAIL %s: exit %d: %s" % (tag, res.returncode,
                                                   res.stdout.decode(errors="replace")))
    return [np.load(p) for p in outs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tgraph", required=True)
    ap.add_argument("--mpirun", required=True)
    a = ap.parse_args()
    tgraph = os.path.abspath(a.tgraph)
    mpirun = shlex.split(a.mpirun)
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory() as wd:
        with open(os.path.join(wd, "p.tg"), "w") as f:
            f.write(PROGRAM)
        xf = rng.integers(-50, 50, (4, 5)).astype(np.float64)
        xf[2, 3] = np.nan  # pmax over it: NaN wins
        xs = rng.integers(-50, 50, (4, 3)).astype(np.float32)
        xs[1, 0] = np.nan
        np.save(os.path.join(wd, "xf.npy"), xf)
        np.save(os.path.join(wd, "xs.npy"), xs)
        np.save(os.path.join(wd, "xi.npy"), rng.integers(-1000, 1000, (4, 5)).astype(np.int32))
        np.save(os.path.join(wd, "xb.npy"), np.array([[0, 1], [0, 0], [1, 1], [0, 1]], bool))
        want = run([tgraph], wd, "one")
        runs = [("np2", mpirun + ["-np", "2", tgraph], []),
                ("np2_devices2", mpirun + ["-np", "2", tgraph], ["--devices", "2"]),
                ("np4", mpirun + ["-np", "4", tgraph], [])]
        failed = 0
        for tag, cmd, extra in runs:
            got = run(cmd, wd, tag, extra)
            bad = 0
            for k in range(NOUT):
                if got[k].dtype != want[k].dtype or not np.array_equal(got[k], want[k],
                                                                        equal_nan=True):
                    print("FAIL %s: output %d is\n%r\none process gives\n%r"
                          % (tag, k, got[k], want[k]))
                    bad += 1
            failed += bad
            if not bad:
                print("PASS %s: every collective as in one process, to the bit" % tag)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
