"""tg.vectorize: a Python function over one example traced and mapped over an axis (JAX's
vmap), against NumPy on the batch; per-example gradients; axes and errors."""
import numpy as np
import pytest

import tgraph as tg


@pytest.mark.parametrize("mode", ["vm", "c", "reference"])
def test_vectorize_over_examples_and_per_example_gradients(mode):
    xs = tg.tensor("xs", shape=(None, 3))
    ys = tg.tensor("ys", shape=(None,))
    W = tg.tensor("W", shape=(3, 2))
    w = tg.tensor("w", shape=(3,))
    hs = tg.vectorize(lambda x, W: tg.tanh(x @ W), in_axes=[0, None])(xs, W)

    def example_grad(x, y, w):
        z = x @ w
        return tg.grad(tg.softplus(z) - y * z, w)

    G = tg.vectorize(example_grad, in_axes=[0, 0, None])(xs, ys, w)
    f = tg.function([xs, ys, W, w], [hs, G], mode=mode)
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(5, 3)), np.array([0.0, 1, 1, 0, 1])
    M, wv = rng.normal(size=(3, 2)), rng.normal(size=3)
    h, g = f(X, Y, M, wv)
    np.testing.assert_allclose(h, np.tanh(X @ M), rtol=1e-12)
    p = 1 / (1 + np.exp(-(X @ wv)))
    np.testing.assert_allclose(g, (p - Y)[:, None] * X, rtol=1e-12)


def test_vectorize_axes_and_errors():
    xs = tg.tensor("xs", shape=(3, 4))
    f = tg.function([xs], tg.vectorize(lambda x: x.sum() * x, in_axes=1, out_axes=1)(xs))
    X = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(f(X), X.sum(axis=0) * X, rtol=1e-14)
    with pytest.raises(tg.Error, match="extent"):
        tg.vectorize(lambda a, b: a + b)(xs, tg.tensor("zs", shape=(5, 4)))
    with pytest.raises(tg.Error, match="out of range"):
        tg.vectorize(lambda a: a, in_axes=2)(xs)
    with pytest.raises(tg.Error, match="vectorize: 1 out_axes for 2 outputs"):
        tg.vectorize(lambda a: (a, a), out_axes=[0])(xs)
