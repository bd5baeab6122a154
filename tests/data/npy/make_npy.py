#!/usr/bin/python3
"""Writes the reference .npy files that tests/unit/test_npy.c reads.

Run from this folder with a python3 that has NumPy (Debian: /usr/bin/python3):
    /usr/bin/python3 make_npy.py
The files are small and committed; test_npy.c checks the values they hold, so keep the
two in step when changing either.
"""
import numpy as np
from numpy.lib import format as npf


def save(name, a, version=None):
    with open(name, "wb") as f:
        if version is None:
            np.save(f, a)
        else:
            npf.write_array(f, a, version=version)


save("f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1)
save("f64_le.npy", np.array([1.5, -2.25, 1e300, -0.0], dtype="<f8"))
save("f64_be.npy", np.array([1.5, -2.25, 1e300, -0.0], dtype=">f8"))
save("f32_be.npy", np.array([0.1, -3.5, np.inf], dtype=">f4"))
save("i16_be_2x2.npy", np.array([[1, -2], [300, -32768]], dtype=">i2"))
save("i32_be.npy", np.array([1, -1, 2**31 - 1, -2**31], dtype=">i4"))
save("i64_be.npy", np.array([1, -1, 2**63 - 1, -2**63], dtype=">i8"))
save("i8.npy", np.array([-128, -1, 0, 127], dtype=np.int8))
save("u8.npy", np.array([0, 1, 200, 255], dtype=np.uint8))
save("i64_3.npy", np.array([10, -20, 30], dtype=np.int64))
save("bool_5.npy", np.array([True, False, True, True, False]))
save("f64_fortran_3x4.npy", np.asfortranarray(np.arange(12.0).reshape(3, 4)))
save("i32_fortran_2x3x4.npy", np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
save("f32_be_fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=">f4").reshape(2, 3)))
save("v2_f64_2x2.npy", np.array([[1.0, 2.0], [3.0, 4.0]]), version=(2, 0))
save("v3_i8_3.npy", np.array([1, 2, 3], dtype=np.int8), version=(3, 0))
save("scalar_f64.npy", np.array(2.5))
save("scalar_bool.npy", np.array(True))
save("empty_f32_0.npy", np.zeros((0,), dtype=np.float32))
save("empty_i64_2x0x3.npy", np.zeros((2, 0, 3), dtype=np.int64))
save("c16.npy", np.array([1 + 2j]))
save("u4.npy", np.array([1, 2], dtype=np.uint32))
