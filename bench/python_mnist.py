"""The Fashion-MNIST training loop written in Python around the compiled step
(python/examples/fashion_mnist.py) against the C example (examples/fashion_mnist.c):
the same model, batch and step count, run alternately ROUNDS times each; compares their
best training throughput (examples per second over the training steps, evaluation
excluded). Target: Python within 10% of C.

usage: PYTHONPATH=python python3 bench/python_mnist.py BUILD_DIR [--steps S] [--rounds R]
                                                      [--threads T]
T: threads of both (0: the number of cores); one thread is the steadier comparison on a
busy machine, where a worker of a pool of two can be descheduled mid-step.
Skips (exit 0) when the data or the C example is missing.
"""
import argparse
import os
import re
import subprocess
import sys

DATA = "/usr/share/datasets/fashion-mnist"


def rate(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"trained .* \((\d+) examples/s", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=468)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    o = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    cexe = os.path.join(o.build, "example_fashion_mnist")
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        print("mnist-python: skipped, Fashion-MNIST not installed (dataset-fashion-mnist)")
        return 0
    if not os.access(cexe, os.X_OK):
        print(f"mnist-python: skipped, {cexe} not built")
        return 0
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(here), "python"))
    out = os.path.join(o.build, "bench-mnist")
    os.makedirs(out, exist_ok=True)
    steps = ["--steps", str(o.steps)] + (["--threads", str(o.threads)] if o.threads else [])
    c_cmd = [cexe, "--out", out] + steps
    py_cmd = [sys.executable, os.path.join(os.path.dirname(here), "python", "examples",
                                           "fashion_mnist.py")] + steps
    c_rates, py_rates = [], []
    for _ in range(o.rounds):
        c_rates.append(rate(c_cmd, env))
        py_rates.append(rate(py_cmd, env))
    c, py = max(c_rates), max(py_rates)
    print(f"mnist-python C example: best {c:.0f} examples/s of {o.rounds} runs "
          f"({', '.join(f'{r:.0f}' for r in c_rates)}), {o.steps} steps of 256, "
          f"threads {o.threads or 'all cores'}")
    print(f"mnist-python Python loop: best {py:.0f} examples/s of {o.rounds} runs "
          f"({', '.join(f'{r:.0f}' for r in py_rates)})")
    print(f"mnist-python Python / C time: {c / py:.3f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
