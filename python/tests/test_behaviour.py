"""The GIL is released during calls, and Ctrl-C leaves functions and state usable."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

import tgraph as tg


def slow_function(n=700):
    """A call of about a tenth of a second or more: n x n products, one thread."""
    a = tg.tensor("a", shape=(n, n))
    return tg.function([a], tg.sum((a @ a) @ a), nthreads=1)


def test_gil_released_during_calls():
    f = slow_function()
    x = np.random.default_rng(0).standard_normal((700, 700)) / 700
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        before = count[0]
        f(x)
        during = count[0] - before
    finally:
        stop.set()
        t.join()
    assert during > 1000, "another Python thread ran only %d steps during the call" % during


CHILD = textwrap.dedent("""
    import sys, numpy as np, tgraph as tg
    n = 600
    a = tg.tensor("a", shape=(n, n))
    w = tg.shared(np.zeros(4), name="w")
    step = tg.function([a], tg.sum((a @ a) @ a), updates={w: w + 1.0}, nthreads=1)
    x = np.eye(n)
    step(x)
    print("ready", flush=True)
    try:
        while True:
            step(x)
    except KeyboardInterrupt:
        pass
    v = w.get_value()
    assert np.all(v == v[0]) and v[0] >= 1, v  # every update whole, none half-applied
    assert step(x) == n                        # the function still runs
    assert w.get_value()[0] == v[0] + 1        # and updates its state once per call
    print("ok", int(v[0]), flush=True)
""")


def test_ctrl_c_leaves_functions_and_state_usable():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(tg.__file__)))
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert out.startswith("ok"), (out, err)
