"""Arrays in and out without copies; DLPack with NumPy and PyTorch."""
import numpy as np
import pytest

import tgraph as tg


def add_one(dtype="float64", shape=(None,)):
    x = tg.tensor("x", dtype=dtype, shape=shape)
    return tg.function([x], x + 1)


def test_output_is_ndarray_owning_tgraph_memory():
    f = add_one()
    y = f(np.arange(5.0))
    assert isinstance(y, np.ndarray) and y.dtype == np.float64
    assert isinstance(y.base, tg.Tensor)
    np.testing.assert_array_equal(y, np.arange(5.0) + 1)
    y[0] = 42.0  # writable, and the Tensor keeps the memory alive
    del f
    assert y[0] == 42.0


def test_strided_and_reversed_inputs():
    f = add_one(shape=(None, None))
    a = np.arange(24.0).reshape(4, 6)
    for v in (a[:, ::2], a[::-1], a.T, a[1:3, 2:]):
        np.testing.assert_array_equal(f(v), v + 1)


def test_inputs_converted_when_needed():
    f = add_one("float32")
    np.testing.assert_array_equal(f([1, 2, 3]), np.array([2, 3, 4], np.float32))
    big_endian = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(f(big_endian), np.arange(3, dtype=np.float32) + 1)
    unaligned = np.frombuffer(b"\0" + np.arange(3, dtype=np.float32).tobytes(), np.float32,
                              3, 1)
    np.testing.assert_array_equal(f(unaligned), np.arange(3, dtype=np.float32) + 1)
    with pytest.raises(tg.Error, match="argument 0"):
        f(np.arange(3.0))  # float64 into float32: NumPy's safe casting refuses


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8",
                                   "float32", "float64"])
def test_from_dlpack_numpy_shares_memory(dtype):
    a = np.zeros((3, 4), dtype)[:, 1:]
    t = tg.from_dlpack(a)
    assert t.shape == (3, 3)
    assert np.shares_memory(np.asarray(t), a)
    back = np.from_dlpack(t)  # NumPy 1.24: __dlpack__() with no arguments
    assert back.dtype == np.dtype(dtype) and np.shares_memory(back, a)


def test_dlpack_capsules_are_consumed_once():
    a = np.arange(6.0)
    cap = a.__dlpack__()
    t = tg.from_dlpack(cap)
    with pytest.raises(ValueError):
        tg.from_dlpack(cap)  # renamed "used_dltensor"
    assert np.asarray(t)[5] == 5.0
    t2 = tg.from_dlpack(a)
    exported = t2.__dlpack__()
    assert t2.__dlpack_device__() == (1, 0)
    del exported  # an unconsumed capsule frees its reference


def test_tensor_outputs_and_dlpack_roundtrip():
    f = add_one()
    y = f(np.arange(4.0))
    t = y.base
    assert np.shares_memory(np.from_dlpack(t), y)
    np.testing.assert_array_equal(f(t), y + 1)  # a Tensor goes in as it is


def test_torch_dlpack_both_ways():
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = tg.from_dlpack(x)
    x[0, 0] = 7.0
    assert np.asarray(t)[0, 0] == 7.0  # shares torch's memory
    f = add_one("float32", (None, None))
    np.testing.assert_array_equal(f(x), x.numpy() + 1)  # torch tensors go in by DLPack
    y = f(x)
    back = torch.from_dlpack(y.base)
    assert back.data_ptr() == y.ctypes.data
    np.testing.assert_array_equal(back.numpy(), y)


def test_dlpack_refuses_non_host_stream():
    t = tg.from_dlpack(np.arange(3.0))
    with pytest.raises(tg.Error, match="stream"):
        t.__dlpack__(stream=1)


def test_bool_arrays_in_and_out():
    x = tg.tensor("x", dtype="bool", shape=(None,))
    f = tg.function([x], ~x)
    y = f(np.array([True, False]))
    assert y.dtype == np.bool_ and y.tolist() == [False, True]
