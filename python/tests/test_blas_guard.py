"""Concurrent BLAS calls from Python (docs/hardening.md, "Address-space limits and BLAS
threads"): the pool splits a long product over its threads, and Debian's serial OpenBLAS
has no lock on its table of packing buffers. Each case runs in a process of its own, on
the kernels OpenBLAS picks for an old core (where two calls sharing a buffer give a wrong
product most often), and checks that 1000 calls of a gradient with such a product give
the same bits as the first call and NumPy's numbers."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPT = r"""
import sys
if sys.argv[1] == "tgraph-first":
    import tgraph as tg  # loads OpenBLAS with libtgraph ahead of it
import numpy as np  # CPython loads it RTLD_NOW: OpenBLAS binds its buffer functions now
np.ones((200, 200)) @ np.ones((200, 200))
import tgraph as tg
print(tg.blas_guard())
rng = np.random.default_rng(0)
N, P = 10000, 20
X, y = rng.normal(size=(N, P)), rng.normal(size=N)
th = tg.tensor("theta", shape=(4, P))
r = tg.shared(y, name="y") - th @ tg.shared(X, name="X").T
f = tg.function([th], tg.grad(0.5 * tg.sum(r * r), th), nthreads=2)
t = rng.normal(size=(4, P))
first = f(t).copy()
bad = sum(not np.array_equal(f(t), first) for _ in range(1000))
want = -(y - t @ X.T) @ X
print("differ", bad, "err", float(np.abs(first - want).max() / np.abs(want).max()))
"""


def run(mode, **extra):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), OPENBLAS_CORETYPE="Prescott",
               **extra)
    p = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    guard, result = p.stdout.splitlines()
    _, bad, _, err = result.split()
    return guard, int(bad), float(err)


def test_tgraph_first_locks_openblas_table():
    guard, bad, err = run("tgraph-first")
    if "OpenBLAS (serial" not in guard:
        pytest.skip(f"not OpenBLAS's serial build: {guard}")
    assert guard.endswith("locked by libtgraph")
    assert bad == 0 and err < 1e-12


def test_numpy_first_rebinds_openblas_table():
    guard, bad, err = run("numpy-first")
    if "OpenBLAS (serial" not in guard:
        pytest.skip(f"not OpenBLAS's serial build: {guard}")
    assert "locked by libtgraph (rebound)" in guard
    assert bad == 0 and err < 1e-12


def test_without_rebinding_blas_calls_are_serialized():
    guard, bad, err = run("numpy-first", TGRAPH_BLAS_REBIND="0")
    if "OpenBLAS (serial" not in guard:
        pytest.skip(f"not OpenBLAS's serial build: {guard}")
    assert "serialized" in guard
    assert bad == 0 and err < 1e-12
