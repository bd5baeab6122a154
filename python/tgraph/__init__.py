"""tgraph: a symbolic tensor compiler, from Python (docs/python.md).

    import numpy as np, tgraph as tg
    x = tg.tensor("x", dtype="float32", shape=(None, 784))
    W = tg.shared(np.zeros((784, 10), np.float32), name="W")
    loss = tg.mean(tg.logsumexp(x @ W, axis=1))
    step = tg.function([x], loss, updates={W: W - 0.1 * tg.grad(loss, W)})

Arrays go in and come out without copies where dtype and layout allow; tgraph tensors
speak DLPack (tg.from_dlpack, __dlpack__). Every tgraph error raises tgraph.Error.
"""
import os as _os
import sys as _sys

# libtgraph goes into the process's global lookup scope, so that OpenBLAS, when it binds
# its packing-buffer functions, finds libtgraph's locked ones (docs/hardening.md, "BLAS
# threads"); where it had bound its own first, libtgraph serializes its BLAS calls.
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_GLOBAL)
try:
    from . import _tgraph
finally:
    _sys.setdlopenflags(_flags)
from ._tgraph import Error, Tensor, CompiledFunction, from_dlpack
from ._symbolic import (Variable, SharedVariable, Function, Module, tensor, scalar, vector,
                        matrix, shared, constant, as_variable, grad, function, dprint,
                        dot_graph, load, parse, pmap, vectorize, scan, map, device)
from ._ops import *  # noqa: F401,F403  the op set, generated from src/ops/oplist.h
from ._ops import OPS

__version__ = _tgraph.version


def blas_guard():
    """How calls into BLAS from several threads at once are kept safe, in one line
    (docs/hardening.md, "Address-space limits and BLAS threads")."""
    return _tgraph.blas_guard()


def devices():
    """The devices' names ("cpu", "cpu:0", ...; docs/devices.md)."""
    return _tgraph.devices()


def configure_devices(host=-1, sim=-1):
    """Sets the number of virtual host devices (and test devices); -1: from the
    environment (TGRAPH_HOST_DEVICES, TGRAPH_SIM_DEVICES). Functions compiled before must
    not be called after."""
    _tgraph.devices_configure(host, sim)

