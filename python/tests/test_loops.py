"""tg.scan and tg.map: Python step functions traced into loop bodies, against NumPy loops,
with the gradient through the loop against central differences."""
import numpy as np
import pytest

import tgraph as tg


def rnn_numpy(a, X, M):
    h, ys = a, []
    for x in X:
        h = np.tanh(M @ h + x)
        ys.append(h.sum())
    return h, np.array(ys)


@pytest.mark.parametrize("mode", ["vm", "c", "reference"])
def test_scan_rnn_and_its_gradient(mode):
    rng = np.random.default_rng(0)
    h0 = tg.tensor("h0", shape=(4,))
    xs = tg.tensor("xs", shape=(None, 4))
    W = tg.tensor("W", shape=(4, 4))

    def step(h, x, W):
        hn = tg.tanh(W @ h + x)
        return hn, hn.sum()

    h_last, ys = tg.scan(step, h0, xs, W, n_sequences=1)
    gW = tg.grad(h_last.sum() + ys.sum(), W)
    f = tg.function([h0, xs, W], [h_last, ys, gW], mode=mode)
    a, X, M = rng.normal(size=4), rng.normal(size=(6, 4)), 0.3 * rng.normal(size=(4, 4))
    hl, y, g = f(a, X, M)
    h, yy = rnn_numpy(a, X, M)
    np.testing.assert_allclose(hl, h, rtol=1e-12)
    np.testing.assert_allclose(y, yy, rtol=1e-12)

    def loss(M):
        h, ys = rnn_numpy(a, X, M)
        return h.sum() + ys.sum()

    num = np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            d = np.zeros((4, 4))
            d[i, j] = 1e-6
            num[i, j] = (loss(M + d) - loss(M - d)) / 2e-6
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_scan_taps_in_pytensor_layout():
    x0 = tg.tensor("x0", shape=(2,))
    es = tg.tensor("es", shape=(5,))
    last, prev = tg.scan(lambda x1, x2, e: (0.6 * x1 + 0.3 * x2 + e, x1), x0, es,
                         n_sequences=1, taps=[-1, -2])
    f = tg.function([x0, es], [last, prev])
    e = np.array([0.5, -1.0, 0.25, 0.0, 2.0])
    xs = [1.0, 2.0]  # x(-2), x(-1)
    for t in range(5):
        xs.append(0.6 * xs[-1] + 0.3 * xs[-2] + e[t])
    got_last, got_prev = f(np.array([1.0, 2.0]), e)
    np.testing.assert_allclose(got_last, xs[-2:], rtol=1e-14)
    np.testing.assert_allclose(got_prev, xs[1:-1], rtol=1e-14)


@pytest.mark.parametrize("mode", ["vm", "reference"])
def test_scan_taps_until_gradient(mode):
    """AR(2) through taps with a stop condition: the gradient covers the steps that ran,
    and the initial value [x(-2), x(-1)] gets its cotangents in that order."""
    x0 = tg.tensor("x0", shape=(2,))
    es = tg.tensor("es", shape=(8,))
    a = tg.tensor("a", shape=())

    def step(x1, x2, e, a):
        xn = a * x1 + 0.3 * tg.sin(x2) + e
        return xn, xn * xn, xn > 3.0

    last, ys = tg.scan(step, x0, es, a, n_sequences=1, taps=[-1, -2], until=True)
    loss = (last * last).sum() + ys.sum()
    g0, ge, ga = tg.grad(loss, [x0, es, a])
    f = tg.function([x0, es, a], [loss, g0, ge, ga], mode=mode)

    def np_loss(x0, e, a):
        hist, tot = list(x0), 0.0
        for t in range(8):
            xn = a * hist[-1] + 0.3 * np.sin(hist[-2]) + e[t]
            hist.append(xn)
            tot += xn * xn
            if xn > 3.0:
                break
        return tot + hist[-1] ** 2 + hist[-2] ** 2

    v = [np.array([0.2, 0.5]), np.array([0.4, 0.1, 0.7, 0.3, 2.0, -0.5, 0.2, 0.1]),
         np.array(0.9)]
    got = f(*v)
    np.testing.assert_allclose(got[0], np_loss(*v), rtol=1e-12)
    for k in range(3):
        num = np.zeros(np.shape(v[k]))
        for idx in np.ndindex(*num.shape):
            hi = [np.array(x, dtype=float) for x in v]
            lo = [np.array(x, dtype=float) for x in v]
            hi[k][idx] += 1e-6
            lo[k][idx] -= 1e-6
            num[idx] = (np_loss(*hi) - np_loss(*lo)) / 2e-6
        np.testing.assert_allclose(got[k + 1], num, rtol=1e-6, atol=1e-8)
    assert got[2][5:].tolist() == [0.0, 0.0, 0.0]  # the loop stopped after step 4


def test_map_rows_and_errors():
    xs = tg.tensor("xs", shape=(None, 4))
    W = tg.tensor("W", shape=(4, 3))
    f = tg.function([xs, W], tg.map(lambda x, W: tg.exp(x) @ W, xs, W))
    rng = np.random.default_rng(1)
    X, M = rng.normal(size=(7, 4)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(f(X, M), np.exp(X) @ M, rtol=1e-12)
    with pytest.raises(tg.Error, match="type"):
        tg.scan(lambda h: h.sum(), tg.tensor("h", shape=(3,)), n_steps=2)
