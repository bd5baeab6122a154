"""The symbolic API: variables, operators, op functions, gradients, functions, state."""
import gc

import numpy as np
import pytest

import tgraph as tg

MODES = ["vm", "c", "reference"]


@pytest.mark.parametrize("mode", MODES)
def test_mlp_expression(mode):
    x = tg.tensor("x", dtype="float32", shape=(None, 4))
    W = tg.tensor("W", dtype="float32", shape=(4, 3))
    b = tg.tensor("b", dtype="float32", shape=(3,))
    y = tg.tanh(x @ W + b)
    assert y.shape == (None, 3) and y.dtype == "float32"
    f = tg.function([x, W, b], [y, y.sum(), y.mean(axis=0), x[:, 1:], x.T, y.reshape(-1)],
                    mode=mode)
    rng = np.random.default_rng(0)
    xv, Wv, bv = (rng.standard_normal(s).astype(np.float32) for s in ((5, 4), (4, 3), (3,)))
    out = f(xv, Wv, bv)
    ref = np.tanh(xv @ Wv + bv)
    np.testing.assert_allclose(out[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], ref.sum(), rtol=1e-5)
    np.testing.assert_allclose(out[2], ref.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[3], xv[:, 1:])
    np.testing.assert_array_equal(out[4], xv.T)
    np.testing.assert_allclose(out[5], ref.reshape(-1), rtol=1e-5, atol=1e-6)


def test_indexing_and_methods():
    x = tg.tensor("x", shape=(4, 5))
    f = tg.function([x], [x[1], x[::-1, 2], x[..., -1], x[:, None, 0], x.max(axis=1),
                          x.argmax(axis=0), x.astype("float32"), x.transpose(1, 0),
                          x[np.array([2, 0])], x.prod(keepdims=True), abs(-x), x ** 2,
                          2 - x, 1 / (x + 1), x // 2, x % 3])
    a = np.arange(20.0).reshape(4, 5)
    want = [a[1], a[::-1, 2], a[..., -1], a[:, None, 0], a.max(axis=1), a.argmax(axis=0),
            a.astype(np.float32), a.T, a[[2, 0]], a.prod(keepdims=True), abs(-a), a ** 2,
            2 - a, 1 / (a + 1), a // 2, a % 3]
    for got, w in zip(f(a), want):
        np.testing.assert_allclose(got, w)
        assert got.shape == w.shape


def test_advanced_indexing_as_numpy():
    x = tg.tensor("x", shape=(5, 4, 6))
    r = tg.tensor("r", dtype="int64", shape=(3,))
    m = tg.tensor("m", dtype="bool", shape=(4, 6))
    c = np.array([1, 3, 2])
    exprs = [
        lambda x, r, m: x[r, c],              # adjacent: B in place
        lambda x, r, m: x[r, :, c],           # separated by a slice: B first
        lambda x, r, m: x[1:, 0, c],          # an integer counts as an index array
        lambda x, r, m: x[:, m],              # a mask over two axes
        lambda x, r, m: x[r, ..., 2],         # ellipsis between arrays
        lambda x, r, m: x[..., r],
        lambda x, r, m: x[r, None, 1],        # None among the items
        lambda x, r, m: x[None, r, c],
        lambda x, r, m: x[r[:, None], c[None, :]] if isinstance(r, np.ndarray)
        else x[tg.expand_dims(r, axis=[1]), c[None, :]],  # broadcast index arrays
        lambda x, r, m: x[[4, 0]],
    ]
    f = tg.function([x, r, m], [e(x, r, m) for e in exprs])
    a = np.arange(120.0).reshape(5, 4, 6)
    rv = np.array([4, 0, 2])
    mv = (np.arange(24).reshape(4, 6) % 5) == 1
    for got, e in zip(f(a, rv, mv), exprs):
        want = e(a, rv, mv)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    with pytest.raises(tg.Error, match="index 5 is out of bounds for axis 1 with size 4"):
        tg.function([x], x[np.array([0, 1]), np.array([5, 0])])(a)
    with pytest.raises(tg.Error, match="single ellipsis"):
        x[..., 0, ...]


def test_subtensor_updates_as_pytensor():
    x = tg.tensor("x", shape=(5, 4))
    y = tg.tensor("y", shape=(3,))
    r, c = np.array([0, 2, 0]), np.array([1, 3, 1])
    f = tg.function([x, y], [tg.set_subtensor(x[1:3, ::-1], 7.0), tg.inc_subtensor(x[r, c], y),
                             tg.set_subtensor(x[r, c], y), tg.inc_subtensor(x[:, 0], 1.0),
                             tg.set_subtensor(x[x > 5], 0.0),
                             tg.grad(tg.sum(tg.inc_subtensor(x[r, c], y) * x), y)])
    a, b = np.arange(20.0).reshape(5, 4), np.array([10.0, 20.0, 30.0])
    w = [a.copy() for _ in range(5)]
    w[0][1:3, ::-1] = 7.0
    np.add.at(w[1], (r, c), b)  # repeated places accumulate
    w[2][r, c] = b  # the last of repeated places wins
    w[3][:, 0] += 1.0
    w[4][a > 5] = 0.0
    got = f(a, b)
    for g, want in zip(got, w + [a[r, c]]):
        np.testing.assert_array_equal(g, want)
    with pytest.raises(tg.Error, match="must be an indexing"):
        tg.set_subtensor(x + 1, 1.0)
    z = a.copy()
    z[None, r, 1] = -1.0
    np.testing.assert_array_equal(
        tg.function([x], tg.set_subtensor(x[None, r, 1], -1.0))(a), z)


def test_comparisons_build_graph_equality_is_identity():
    x = tg.tensor("x", shape=(3,))
    y = tg.tensor("y", shape=(3,))
    assert (x == y) is False and x != y and x == x
    assert len({x, y, x}) == 2
    f = tg.function([x, y], [x < y, x <= y, x > y, x >= y, tg.eq(x, y), tg.where(x < y, x, y)])
    a, b = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])
    got = f(a, b)
    for g, w in zip(got, [a < b, a <= b, a > b, a >= b, a == b, np.where(a < b, a, b)]):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(TypeError):
        bool(x < y)


def test_op_functions_are_generated_from_the_op_table():
    for name in ("exp", "sum", "softmax", "cholesky", "diag", "cumsum", "uniform", "psum"):
        assert name in tg.OPS and callable(getattr(tg, name))
    assert tg.logical_and.__name__ == "logical_and"
    x = tg.tensor("x", shape=(2, 3))
    f = tg.function([x], [tg.exp(x), tg.sum(x, axis=1), tg.softmax(x, axis=1),
                          tg.cumsum(x, axis=1), tg.concatenate(x, x, axis=0), tg.diag(x)])
    a = np.arange(6.0).reshape(2, 3)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    for g, w in zip(f(a), [np.exp(a), a.sum(axis=1), e / e.sum(axis=1, keepdims=True),
                           np.cumsum(a, axis=1), np.concatenate([a, a]), np.diagonal(a)]):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_composites_and_special_functions():
    x = tg.tensor("x", shape=(2, 3))
    A = tg.tensor("A", shape=(3, 3))
    f = tg.function([x, A], [tg.relu(x), tg.einsum(x, A, subscripts="ij,jk->ik"),
                             tg.moveaxis(x, source=0, destination=1), tg.gammaln(A)])
    a = np.array([[-1.0, 2.0, 0.5], [3.0, -0.25, 1.0]])
    m = np.arange(1.0, 10.0).reshape(3, 3)
    lg = np.vectorize(__import__("math").lgamma)(m)
    for g, w in zip(f(a, m), [np.maximum(a, 0), a @ m, a.T, lg]):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_multi_output_ops_return_tuples():
    x = tg.tensor("x", shape=(6,))
    parts = tg.split(x, sections=3)
    assert isinstance(parts, tuple) and len(parts) == 3
    f = tg.function([x], list(parts))
    got = f(np.arange(6.0))
    np.testing.assert_array_equal(got[2], [4.0, 5.0])


def test_grad_one_and_list():
    x = tg.tensor("x", shape=(3,))
    w = tg.tensor("w", shape=(3,))
    cost = tg.sum(tg.sin(x) * w)
    gx = tg.grad(cost, x)
    gs = tg.grad(cost, [x, w])
    assert isinstance(gx, tg.Variable) and isinstance(gs, list) and len(gs) == 2
    f = tg.function([x, w], [gx] + gs)
    a, b = np.array([0.1, 0.2, 0.3]), np.array([1.0, 2.0, 3.0])
    got = f(a, b)
    np.testing.assert_allclose(got[0], np.cos(a) * b)
    np.testing.assert_allclose(got[1], np.cos(a) * b)
    np.testing.assert_allclose(got[2], np.sin(a))
    hess = tg.function([x, w], tg.grad(tg.sum(tg.grad(cost, x)), x))  # gradient of gradient
    np.testing.assert_allclose(hess(a, b), -np.sin(a) * b)
    with pytest.raises(tg.Error, match="depend"):
        tg.grad(tg.sum(x), w)
    z = tg.grad(tg.sum(x), w, disconnected="zero")
    np.testing.assert_array_equal(tg.function([x, w], z)(a, b), np.zeros(3))


def test_shared_updates_and_values():
    w = tg.shared(np.zeros(3), name="w")
    x = tg.tensor("x", shape=(3,))
    step = tg.function([x], w.sum(), updates={w: w + x})
    read = tg.function([], w * 2)
    assert step(np.ones(3)) == 0.0
    assert step(np.ones(3)) == 3.0
    np.testing.assert_array_equal(w.get_value(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(read(), [4.0, 4.0, 4.0])  # reads the owning function's state
    w.set_value([10.0, 0.0, 0.0])
    np.testing.assert_array_equal(read(), [20.0, 0.0, 0.0])
    step(np.ones(3))
    np.testing.assert_array_equal(w.get_value(), [11.0, 1.0, 1.0])
    other = tg.function([], [], updates={w: w * 0.5})  # takes the value over
    assert other() == []
    np.testing.assert_array_equal(w.get_value(), [5.5, 0.5, 0.5])
    step(np.zeros(3))
    np.testing.assert_array_equal(w.get_value(), [5.5, 0.5, 0.5])
    with pytest.raises(tg.Error, match="shape"):
        w.set_value(np.zeros(4))


def test_sgd_on_shared_weights():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((64, 3))
    true_w = np.array([1.0, -2.0, 0.5])
    Y = X @ true_w
    w = tg.shared(np.zeros(3), name="w")
    x = tg.tensor("x", shape=(None, 3))
    y = tg.tensor("y", shape=(None,))
    loss = tg.mean((x @ w - y) ** 2)
    train = tg.function([x, y], loss, updates={w: w - 0.1 * tg.grad(loss, w)})
    for _ in range(200):
        train(X, Y)
    np.testing.assert_allclose(w.get_value(), true_w, atol=1e-6)


def test_random_keys():
    k = tg.key(seed=3)
    ks = tg.key_split(k, n=2)
    u = tg.uniform(ks[0], shape=(1000,), dtype="float64")
    f = tg.function([], u)
    a, b = f(), f()
    np.testing.assert_array_equal(a, b)  # a key is explicit: same key, same numbers
    assert 0.4 < a.mean() < 0.6
    # a key as shared state advances on each call
    key = tg.shared(np.int64(0), name="key")
    parts = tg.key_split(key, n=2)
    sample = tg.function([], tg.normal(parts[1], shape=(4,)), updates={key: parts[0]})
    assert not np.array_equal(sample(), sample())


def test_load_tg_file(tmp_path):
    p = tmp_path / "m.tg"
    p.write_text("func main(x: f64[?], y: f64[?]) {\n  return add(mul(x, y), x)\n}\n")
    m = tg.load(str(p))
    assert m.names() == ["main"]
    f = m.function("main")
    np.testing.assert_array_equal(f(np.array([1.0, 2.0]), np.array([3.0, 4.0])), [4.0, 10.0])
    x = tg.tensor("x", shape=(2,))
    z = m["main"](x, x) * 2  # called symbolically
    np.testing.assert_array_equal(tg.function([x], z)(np.array([1.0, 2.0])), [4.0, 12.0])
    with pytest.raises(tg.Error, match="m.tg:1"):
        p.write_text("func main(x: f64[?]) { return nope(x) }\n")
        tg.load(str(p))


def test_dprint_and_dot_graph():
    x = tg.tensor("x", shape=(None,))
    y = tg.exp(x) + 1
    text = tg.dprint(y, file=False)
    assert "exp(" in text and "func" in text
    f = tg.function([x], y)
    assert "exp" in tg.dprint(f, file=False)
    assert tg.dot_graph(y).startswith("digraph")


def test_errors_carry_messages():
    x = tg.tensor("x", shape=(3,))
    y = tg.tensor("y", shape=(4,))
    with pytest.raises(tg.Error, match="broadcast"):
        x + y
    z = x * 2  # the builder still works after an error
    f = tg.function([x], z)
    with pytest.raises(tg.Error, match=r"input .x.: expected f64\[3\], got f64\[5\]"):
        f(np.zeros(5))
    np.testing.assert_array_equal(f(np.ones(3)), [2.0, 2.0, 2.0])
    with pytest.raises(tg.Error, match="not among the inputs"):
        tg.function([x], x + y[:3])
    with pytest.raises(tg.Error, match="mode"):
        tg.function([x], z, mode="fast")
    assert issubclass(tg.Error, RuntimeError)


def test_pmap_on_host_devices():
    xs = tg.tensor("xs", shape=(4, 3))
    w = tg.tensor("w", shape=(3,))

    def body(x, wv):
        return tg.sum(x * wv) + tg.axis_index(axis_name="batch").astype("float64")

    ys = tg.pmap(body, in_axes=[0, None], axis_name="batch")(xs, w)
    f = tg.function([xs, w], ys)
    a, b = np.arange(12.0).reshape(4, 3), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(f(a, b), a @ b + np.arange(4))
    assert tg.devices()[0] == "cpu"


def test_pmap_axes_errors():
    xs = tg.tensor("xs", shape=(4, 3))
    with pytest.raises(tg.Error, match="pmap: 2 in_axes for 1 inputs"):
        tg.pmap(lambda a: a, in_axes=[0, 1])(xs)
    with pytest.raises(tg.Error, match="pmap: in_axes 2 is out of range for input 0 of rank 2"):
        tg.pmap(lambda a: a, in_axes=2)(xs)
    with pytest.raises(tg.Error, match="pmap: 2 out_axes for 1 outputs"):
        tg.pmap(lambda a: tg.sum(a), out_axes=[0, 0])(xs)


def test_grad_through_pmap():
    xs = tg.tensor("xs", shape=(4, 3))
    w = tg.tensor("w", shape=(3,))
    ys = tg.pmap(lambda a, v: tg.sum(a * v), in_axes=[0, None], axis_name="b")(xs, w)
    gw, gx = tg.grad(tg.sum(ys), [w, xs])
    a = np.arange(12.0).reshape(4, 3)
    got = tg.function([xs, w], [gw, gx])(a, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(got[0], a.sum(axis=0))
    np.testing.assert_allclose(got[1], np.tile([1.0, 2.0, 3.0], (4, 1)))


def test_device_annotations():
    gc.collect()  # no function compiled for the old devices may outlive the change
    tg.configure_devices(host=2)
    try:
        assert tg.devices()[:3] == ["cpu", "cpu:0", "cpu:1"] or "cpu:1" in tg.devices()
        x = tg.tensor("x", shape=(3,))
        with tg.device("cpu:0"):
            a = tg.exp(x)
        with tg.device("cpu:1"):
            b = x * 2
        text = tg.dprint(a + b, file=False)
        assert "cpu:0" in text and "cpu:1" in text
        f = tg.function([x], a + b)
        np.testing.assert_allclose(f(np.ones(3)), np.exp(1.0) + 2)
        del f
        gc.collect()
        with pytest.raises(tg.Error, match="device"):
            with tg.device("gpu:7"):
                tg.exp(x)
    finally:
        tg.configure_devices(host=-1)


def test_scratch_graph_is_replaced_when_large(monkeypatch):
    from tgraph import _symbolic
    monkeypatch.setattr(_symbolic, "_SCRATCH_MAX_NODES", 50)
    monkeypatch.setattr(_symbolic._Scratch, "limit", 50)
    x = tg.tensor("x", shape=(2,))
    y = x
    gen = _symbolic._Scratch.generation
    for _ in range(3000):  # deeper than Python's recursion limit
        y = y + 1.0
    assert _symbolic._Scratch.generation > gen
    np.testing.assert_array_equal(tg.function([x], y)(np.zeros(2)), [3000.0, 3000.0])
    z = y * 2  # rebuilt in the new scratch graph on demand
    assert z.shape == (2,)
