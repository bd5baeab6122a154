"""python/examples run: a short Fashion-MNIST training (skipped without the data) and a
short HMC run of the Bayesian regression."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
DATA = "/usr/share/datasets/fashion-mnist"


def run(script, *args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    p = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.mark.skipif(not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")),
                    reason="Fashion-MNIST not installed (Debian: dataset-fashion-mnist)")
def test_fashion_mnist_trains():
    out = run("fashion_mnist.py", "--steps", "60", "--expect-accuracy", "70")
    assert "test accuracy" in out


def test_fashion_mnist_without_data_exits_cleanly(tmp_path):
    assert "nothing to train" in run("fashion_mnist.py", "--data", str(tmp_path))


def test_bayes_regression_hmc():
    out = run("bayes_regression.py", "--warmup", "250", "--samples", "250")
    assert "posterior checks out" in out
