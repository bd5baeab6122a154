"""Symbolic variables, shared state, gradients and compiled functions.

A Variable records how it is made (a leaf: input, shared value, constant or literal; or
an output of a node: an op, a slice, a gradient, a call, a pmap) and is typed at once by
building it in a scratch graph, so that errors surface where the expression is written.
tg.function replays the recorded expressions into a fresh graph with exactly the inputs
given, shared values as extra inputs (read) or as states (updated), and compiles it.
Invariants:
- == and != are identity (Variables hash by id), as in PyTensor; < <= > >= build graph.
- A scratch graph that failed is replaced by a new one (its builders are sticky), as is
  one grown past _Scratch.limit (at least _SCRATCH_MAX_NODES, twice what the last new
  one needed); the variables made before are rebuilt in it on demand.
- A shared value lives either in the SharedVariable or in the state of the one compiled
  function that last updated it (its owner); a function updating it takes it over with
  one copy, so a training loop calling one function never copies it.
"""
import numpy as np

from . import _tgraph as _C

Error = _C.Error

# tgraph's dtype names and NumPy's
_NP_NAMES = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
             "u8": "uint8", "f32": "float32", "f64": "float64"}
_TG_NAMES = {v: k for k, v in _NP_NAMES.items()}


def _tg_dtype(dtype):
    """The tgraph name of a dtype given as a tgraph name, NumPy name or NumPy dtype."""
    if isinstance(dtype, str) and dtype in _NP_NAMES:
        return dtype
    name = np.dtype(dtype).name
    if name not in _TG_NAMES:
        raise Error(f"dtype {dtype!r} has no tgraph equivalent")
    return _TG_NAMES[name]


class _Node:
    """One application: kind is 'apply', 'slice', 'index', 'index_update', 'grad',
    'call' or 'vectorize'; device is the annotation of the tg.device scope it was made in
    (None: none)."""
    __slots__ = ("kind", "op", "inputs", "attrs", "device", "scratch")

    def __init__(self, kind, op, inputs, attrs):
        self.kind, self.op, self.inputs, self.attrs = kind, op, tuple(inputs), attrs
        self.device = _devices[-1] if _devices else None
        self.scratch = None  # (generation, [handles]) in the scratch graph


_devices = []  # the tg.device scopes, innermost last


class device:
    """with tg.device("cpu:1"): ... annotates the ops written inside with that device
    (docs/devices.md, "Annotations"): placement keeps them there. Scopes nest."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _devices.append(self.name)
        return self

    def __exit__(self, *exc):
        _devices.pop()
        return False


_SCRATCH_MAX_NODES = 100000  # past this a fresh scratch graph: a long session stays bounded


class _Scratch:
    graph = _C.Graph("scratch")
    generation = 0
    names = set()
    limit = _SCRATCH_MAX_NODES  # nodes past which _make starts a fresh one

    @classmethod
    def reset(cls):
        cls.graph = _C.Graph("scratch")
        cls.generation += 1
        cls.names = set()

    @classmethod
    def name(cls, n):
        """n, or n with a suffix making it unique among the scratch graph's inputs."""
        base, k = n, 0
        while n in cls.names:
            k += 1
            n = f"{base}_{k}"
        cls.names.add(n)
        return n


class Variable:
    """A symbolic tensor. Build expressions with operators, methods and tg.<op>."""
    __slots__ = ("owner", "index", "leaf", "name", "_tg_dtype", "shape", "scratch",
                 "__weakref__")
    __array_ufunc__ = None  # ndarray op Variable defers to the Variable's reflected op

    def __init__(self, owner, index, leaf, name, tg_dtype, shape):
        self.owner, self.index, self.leaf, self.name = owner, index, leaf, name
        self._tg_dtype, self.shape = tg_dtype, tuple(shape)
        self.scratch = None

    # -- type ------------------------------------------------------------------------
    @property
    def dtype(self):
        return _NP_NAMES[self._tg_dtype]

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"<Variable {self.name or '?'}: {self._tg_dtype}[{dims}]>"

    def __bool__(self):
        raise TypeError("a symbolic Variable has no truth value (compile it with tg.function)")

    def __iter__(self):
        if not self.shape or self.shape[0] is None:
            raise TypeError("cannot iterate over a Variable without a static first extent")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self):
        if not self.shape or self.shape[0] is None:
            raise TypeError("len() of a Variable without a static first extent")
        return self.shape[0]

    # -- operators ----------------------------------------------------------------------
    def __add__(self, o): return _apply("add", (self, o))
    def __radd__(self, o): return _apply("add", (o, self))
    def __sub__(self, o): return _apply("sub", (self, o))
    def __rsub__(self, o): return _apply("sub", (o, self))
    def __mul__(self, o): return _apply("mul", (self, o))
    def __rmul__(self, o): return _apply("mul", (o, self))
    def __truediv__(self, o): return _apply("div", (self, o))
    def __rtruediv__(self, o): return _apply("div", (o, self))
    def __floordiv__(self, o): return _apply("int_div", (self, o))
    def __rfloordiv__(self, o): return _apply("int_div", (o, self))
    def __mod__(self, o): return _apply("mod", (self, o))
    def __rmod__(self, o): return _apply("mod", (o, self))
    def __pow__(self, o): return _apply("pow", (self, o))
    def __rpow__(self, o): return _apply("pow", (o, self))
    def __matmul__(self, o): return _apply("matmul", (self, o))
    def __rmatmul__(self, o): return _apply("matmul", (o, self))
    def __and__(self, o): return _apply("and", (self, o))
    def __rand__(self, o): return _apply("and", (o, self))
    def __or__(self, o): return _apply("or", (self, o))
    def __ror__(self, o): return _apply("or", (o, self))
    def __xor__(self, o): return _apply("xor", (self, o))
    def __rxor__(self, o): return _apply("xor", (o, self))
    def __lshift__(self, o): return _apply("left_shift", (self, o))
    def __rshift__(self, o): return _apply("right_shift", (self, o))
    def __neg__(self): return _apply("neg", (self,))
    def __pos__(self): return self
    def __abs__(self): return _apply("abs", (self,))
    def __invert__(self): return _apply("not", (self,))
    def __lt__(self, o): return _apply("lt", (self, o))
    def __le__(self, o): return _apply("le", (self, o))
    def __gt__(self, o): return _apply("gt", (self, o))
    def __ge__(self, o): return _apply("ge", (self, o))
    __hash__ = object.__hash__  # == and != stay identity (object's)

    # -- methods ------------------------------------------------------------------------
    def _reduce(self, op, axis, keepdims):
        return _apply(op, (self,), {"axis": _axes(axis), "keepdims": keepdims})

    def sum(self, axis=None, keepdims=False): return self._reduce("sum", axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self._reduce("mean", axis, keepdims)
    def prod(self, axis=None, keepdims=False): return self._reduce("prod", axis, keepdims)
    def max(self, axis=None, keepdims=False): return self._reduce("max", axis, keepdims)
    def min(self, axis=None, keepdims=False): return self._reduce("min", axis, keepdims)
    def any(self, axis=None, keepdims=False): return self._reduce("any", axis, keepdims)
    def all(self, axis=None, keepdims=False): return self._reduce("all", axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _apply("argmax", (self,), {"axis": axis, "keepdims": keepdims})

    def argmin(self, axis=None, keepdims=False):
        return _apply("argmin", (self,), {"axis": axis, "keepdims": keepdims})

    @property
    def T(self):
        return _apply("transpose", (self,), {"axes": None})

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return _apply("transpose", (self,), {"axes": list(axes) if axes else None})

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _apply("reshape", (self,), {"shape": [int(d) for d in shape]})

    def flatten(self):
        return self.reshape(-1)

    def astype(self, dtype):
        return _apply("cast", (self,), {"dtype": _tg_dtype(dtype)})

    def dot(self, o):
        return _apply("dot", (self, o))

    def __getitem__(self, key):
        return _getitem(self, key)


class SharedVariable(Variable):
    """State shared by compiled functions (PyTensor's shared): read with get_value,
    replaced with set_value, updated by tg.function(..., updates={s: new})."""
    __slots__ = ("_value", "_owner")

    def get_value(self, borrow=False):
        """The current value: a copy, or with borrow=True a view that the next call of the
        function updating it may overwrite."""
        cur = self._current()
        return np.asarray(cur) if borrow else np.array(cur, copy=True)

    def set_value(self, value, borrow=False):
        a = np.asarray(value, dtype=self.dtype)
        if a.shape != self.shape:
            raise Error(f"set_value: shared '{self.name}' has shape {self.shape}, "
                        f"got {a.shape}")
        self._value = a if borrow else np.array(a, copy=True)
        self._owner = None

    def _current(self):
        """The value: the owning function's state (a Tensor sharing it) or our array."""
        if self._owner is not None:
            fn, state = self._owner
            return fn.state(state)
        return self._value

    def __repr__(self):
        return f"<SharedVariable {self.name}: {self._tg_dtype}{list(self.shape)}>"


def _axes(axis):
    if axis is None or isinstance(axis, int):
        return axis
    return [int(a) for a in axis]


# -- building ----------------------------------------------------------------------------
def _leaf(kind, payload, name, dtype, shape, cls=Variable):
    v = cls(None, 0, (kind, payload), name, dtype, shape)
    _scratch_handle(v)
    return v


def as_variable(x):
    """x as a Variable: Python scalars become weak literals, arrays constants."""
    if isinstance(x, Variable):
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return _leaf("literal", x, None, "f64" if isinstance(x, float) else
                     ("bool" if isinstance(x, bool) else "i64"), ())
    a = np.asarray(x)
    return _leaf("const", a, None, _tg_dtype(a.dtype), a.shape)


def _apply(op, inputs, attrs=None):
    out = _make("apply", op, [as_variable(x) for x in inputs], attrs or {})
    return out[0] if len(out) == 1 else tuple(out)


def _make(kind, op, inputs, attrs, names=None):
    fresh = _Scratch.graph.node_count > _Scratch.limit
    if fresh:
        _Scratch.reset()
    node = _Node(kind, op, inputs, attrs)
    handles = _scratch_node(node)
    if fresh:  # what the new expression needed was rebuilt: let it double before the next
        _Scratch.limit = max(_SCRATCH_MAX_NODES, 2 * _Scratch.graph.node_count)
    outs = []
    for i, h in enumerate(handles):
        v = Variable(node, i, None, names[i] if names else None, h.dtype, h.shape)
        v.scratch = (_Scratch.generation, h)
        outs.append(v)
    return outs


def _attr(key, a):
    """An attribute value as the extension takes it: NumPy scalars as Python's, dtypes by
    their tgraph names."""
    if key == "dtype" and a is not None:
        return _tg_dtype(a)
    if isinstance(a, np.generic):
        return a.item()
    if isinstance(a, (list, tuple)):
        return [x.item() if isinstance(x, np.generic) else x for x in a]
    return a


def _op(opname, pyname):
    def f(*inputs, **attrs):
        return _apply(opname, inputs, {k: _attr(k, a) for k, a in attrs.items()})
    f.__name__ = f.__qualname__ = pyname
    f.__doc__ = (f"tgraph op `{opname}`: {pyname}(*inputs, **attributes) -> Variable "
                 "(a tuple for ops with several results); see docs/ops.md.")
    return f


def _getitem(x, key):
    """x[key] as NumPy indexes: slices, integers, None, one ellipsis, and integer index
    arrays or bool masks (Variables, ndarrays, lists) mixed with them (docs/ops-index.md,
    "x[...]"). Without arrays, None or ellipsis it is the `slice` op (a view)."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if isinstance(k, (Variable, np.ndarray, list)):
            items.append(as_variable(k))
        elif k is None or k is Ellipsis or isinstance(k, Variable):
            items.append(k)
        elif isinstance(k, slice):
            items.append((_int(k.start), _int(k.stop), _int(k.step), False))
        else:
            items.append((int(k), None, None, True))
    if all(isinstance(k, tuple) for k in items):
        return _make("slice", None, [x], tuple(items))[0]
    vs = [k for k in items if isinstance(k, Variable)]
    spec, j = [], 0
    for k in items:
        spec.append(("array", j) if isinstance(k, Variable) else ("basic", k))
        j += isinstance(k, Variable)
    return _make("index", None, [x] + vs, tuple(spec))[0]


def _subtensor_update(opname, inc):
    """set_subtensor / inc_subtensor as PyTensor writes them: op(x[...], y) is a copy of x
    with the selection x[...] set to y (inc: incremented by it, repeated places of index
    arrays accumulating). Given the op's attributes instead, the op itself."""
    raw = _op(opname, opname)

    def f(sub, y, **attrs):
        if attrs:
            return raw(sub, y, **attrs)
        node = sub.owner if isinstance(sub, Variable) else None
        if node is None or node.kind not in ("slice", "index"):
            raise Error(f"{opname}: the first argument must be an indexing x[...] of a "
                        "tensor (or pass the op's attributes)")
        y = as_variable(y)
        spec = tuple(("basic", k) for k in node.attrs) if node.kind == "slice" else node.attrs
        return _make("index_update", None, [node.inputs[0], y] + list(node.inputs[1:]),
                     (spec, inc))[0]
    f.__name__ = f.__qualname__ = opname
    f.__doc__ = raw.__doc__
    return f


def _int(v):
    return None if v is None else int(v)


class _Builder:
    """Replays recorded expressions into one graph. `leaf(v)` makes the graph's variable
    for a leaf; memo maps nodes and leaves (by id) to the graph's variables."""

    def __init__(self, graph, leaf):
        self.graph, self.leaf, self.memo, self.keep = graph, leaf, {}, []

    def get(self, v):
        if v.owner is None:
            return self.memo.get(id(v))
        hs = self.memo.get(id(v.owner))
        return None if hs is None else hs[v.index]

    def build(self, root):
        stack = [root]
        while stack:
            v = stack[-1]
            if self.get(v) is not None:
                stack.pop()
                continue
            if v.owner is None:
                self.memo[id(v)] = self.leaf(v)
                self.keep.append(v)
                stack.pop()
                continue
            missing = [i for i in v.owner.inputs if self.get(i) is None]
            if missing:
                stack.extend(missing)
                continue
            self.memo[id(v.owner)] = _apply_node(self.graph, v.owner,
                                                 [self.get(i) for i in v.owner.inputs])
            self.keep.append(v.owner)
            stack.pop()
        return self.get(root)


def _apply_node(g, node, ins):
    hs = _apply_kind(g, node, ins)
    if node.device is not None and node.kind in ("apply", "slice", "index", "index_update"):
        hs[0].set_device(node.device)
    return hs


def _apply_kind(g, node, ins):
    if node.kind == "apply":
        attrs = {k: (_body_graph(a) if isinstance(a, _Body) else a)
                 for k, a in node.attrs.items()}
        return g.apply(node.op, ins, attrs, True)
    if node.kind == "slice":
        return [g.slice(ins[0], list(node.attrs))]
    if node.kind == "index":
        return [g.index(ins[0], [ins[1 + v] if t == "array" else v for t, v in node.attrs])]
    if node.kind == "index_update":
        spec, inc = node.attrs
        return [g.index_update(ins[0], [ins[2 + v] if t == "array" else v for t, v in spec],
                               ins[1], inc)]
    if node.kind == "grad":
        return g.grad(ins[0], ins[1:], node.attrs)
    if node.kind == "call":
        return g.call(node.op, ins)
    if node.kind == "vectorize":
        return g.vectorize(_body_graph(node.attrs["body"]), ins, node.attrs["in_axes"],
                           node.attrs["out_axes"])
    raise Error(f"unknown node kind {node.kind}")


def _scratch_leaf(v):
    kind, payload = v.leaf
    g = _Scratch.graph
    if kind == "literal":
        return g.literal(payload)
    if kind == "const":
        return g.constant(payload)
    return g.input(_Scratch.name(v.name or "x"), v._tg_dtype, v.shape)


def _scratch_get(v, gen):
    """v's variable in scratch graph generation gen, or None when not built there."""
    if v.owner is None:
        return v.scratch[1] if v.scratch is not None and v.scratch[0] == gen else None
    s = v.owner.scratch
    return s[1][v.index] if s is not None and s[0] == gen else None


def _scratch_build(roots):
    """Builds roots (and what they need) in the current scratch graph, without recursion:
    a chain of any length is rebuilt after a reset."""
    g, gen = _Scratch.graph, _Scratch.generation
    stack = list(roots)
    try:
        while stack:
            v = stack[-1]
            if _scratch_get(v, gen) is not None:
                stack.pop()
            elif v.owner is None:
                v.scratch = (gen, _scratch_leaf(v))
                stack.pop()
            else:
                missing = [i for i in v.owner.inputs if _scratch_get(i, gen) is None]
                if missing:
                    stack.extend(missing)
                    continue
                ins = [_scratch_get(i, gen) for i in v.owner.inputs]
                v.owner.scratch = (gen, _apply_node(g, v.owner, ins))
                stack.pop()
    except Error:
        _Scratch.reset()
        raise


def _scratch_handle(v):
    """v's variable in the current scratch graph, built on demand."""
    _scratch_build([v])
    return _scratch_get(v, _Scratch.generation)


def _scratch_node(node):
    """node's outputs in the current scratch graph."""
    gen = _Scratch.generation
    if node.scratch is None or node.scratch[0] != gen:
        _scratch_build(node.inputs)
        try:
            hs = _apply_node(_Scratch.graph, node, [_scratch_get(i, gen) for i in node.inputs])
        except Error:
            _Scratch.reset()
            raise
        node.scratch = (gen, hs)
    return node.scratch[1]


# -- the user's entry points --------------------------------------------------------------
def tensor(name=None, dtype="float64", shape=()):
    """A symbolic input: tensor("x", dtype="float32", shape=(None, 784)); None is an
    extent known only at run time."""
    shape = tuple(None if d is None else int(d) for d in shape)
    return _leaf("input", None, name, _tg_dtype(dtype), shape)


def scalar(name=None, dtype="float64"):
    return tensor(name, dtype, ())


def vector(name=None, dtype="float64", length=None):
    return tensor(name, dtype, (length,))


def matrix(name=None, dtype="float64", shape=(None, None)):
    return tensor(name, dtype, shape)


_shared_count = [0]


def shared(value, name=None, dtype=None):
    """A SharedVariable holding a copy of value (static shape and dtype)."""
    a = np.array(value, dtype=dtype, copy=True)
    if name is None:
        _shared_count[0] += 1
        name = f"shared_{_shared_count[0]}"
    v = SharedVariable(None, 0, ("shared", None), name, _tg_dtype(a.dtype), a.shape)
    v._value, v._owner = a, None
    _scratch_handle(v)
    return v


def constant(value, dtype=None):
    a = np.asarray(value, dtype=dtype)
    return _leaf("const", a, None, _tg_dtype(a.dtype), a.shape)


def grad(cost, wrt, disconnected="raise"):
    """d cost / d wrt: one Variable for one, a list for a list (PyTensor's grad).
    disconnected: "raise" (an error naming the input) or "zero"."""
    if disconnected not in ("raise", "zero"):
        raise Error('grad: disconnected must be "raise" or "zero"')
    many = isinstance(wrt, (list, tuple))
    ws = list(wrt) if many else [wrt]
    outs = _make("grad", None, [as_variable(cost)] + [as_variable(w) for w in ws],
                 disconnected == "zero")
    return outs if many else outs[0]


class Function:
    """A compiled function with shared values: passes the values it reads, and keeps the
    ones it updates in its states (docstring of this module)."""

    def __init__(self, compiled, reads, states):
        self.compiled, self._reads, self._states = compiled, reads, states

    def __call__(self, *args):
        c = self.compiled
        for s, state in self._states:
            o = s._owner
            if o is None or o[0] is not c or o[1] != state:
                c.state_set(state, s._current())
                s._owner = (c, state)
        if self._reads:
            args = args + tuple(s._current() for s in self._reads)
        return c(*args)

    @property
    def graph(self):
        return self.compiled.graph

    def profile(self):
        return self.compiled.profile()


_MODES = ("vm", "c", "reference", "debug")


def function(inputs, outputs=None, updates=None, mode="vm", name="f", nthreads=0,
             profile=False, optimize=True):
    """Compiles outputs (one Variable, or a list) of inputs (Variables made by tg.tensor)
    into a callable taking arrays: one array for one output, a list for a list.
    updates: {shared: new value} or pairs, applied together after a successful call.
    mode: "vm" (optimised, the default), "c" (C generated and compiled), "reference" or
    "debug"."""
    if mode not in _MODES:
        raise Error(f"function: unknown mode {mode!r} (one of {', '.join(_MODES)})")
    single = outputs is not None and not isinstance(outputs, (list, tuple))
    outs = [] if outputs is None else ([outputs] if single else list(outputs))
    outs = [as_variable(o) for o in outs]
    ups = list(updates.items() if isinstance(updates, dict) else (updates or []))
    g = _C.Graph(name)
    used = set()

    def fresh(n):
        base, k = n, 0
        while n in used:
            k += 1
            n = f"{base}_{k}"
        used.add(n)
        return n

    reads = []

    def leaf(v):
        kind, payload = v.leaf
        if kind == "literal":
            return g.literal(payload)
        if kind == "const":
            return g.constant(payload)
        if kind == "shared":
            reads.append(v)
            return g.input(fresh(v.name), v._tg_dtype, v.shape)
        raise Error(f"function: input {v!r} is needed to compute the outputs but is not "
                    "among the inputs")

    b = _Builder(g, leaf)
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable) or x.leaf is None or x.leaf[0] != "input":
            raise Error(f"function: input {i} is not a variable made by tg.tensor")
        b.memo[id(x)] = g.input(fresh(x.name or f"x{i}"), x._tg_dtype, x.shape)
        b.keep.append(x)
    states = []
    for s, _ in ups:
        if not isinstance(s, SharedVariable):
            raise Error(f"function: updates: {s!r} is not a shared variable")
        if id(s) in b.memo:
            raise Error(f"function: shared '{s.name}' is updated twice")
        sname = fresh(s.name)
        b.memo[id(s)] = g.state(sname, s._tg_dtype, s.shape)
        b.keep.append(s)
        states.append((s, sname))
    hs = [b.build(o) for o in outs]
    for (s, _), (_, new) in zip(states, ups):
        new = as_variable(new)
        if new.leaf is None and new._tg_dtype != s._tg_dtype:
            new = new.astype(s._tg_dtype)
        g.update(b.memo[id(s)], b.build(new))
    g.set_outputs(hs)
    compiled = g.compile(mode=mode, single=single, nthreads=nthreads,
                         no_rewrite=not optimize, profile=profile)
    if not reads and not states:
        return compiled
    return Function(compiled, reads, states)


def _auto_graph(outputs, name="expr"):
    """A graph computing outputs, every input and shared value among its inputs."""
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    g = _C.Graph(name)

    def leaf(v):
        kind, payload = v.leaf
        if kind == "literal":
            return g.literal(payload)
        if kind == "const":
            return g.constant(payload)
        return g.input(v.name or "x", v._tg_dtype, v.shape)

    b = _Builder(g, leaf)
    g.set_outputs([b.build(as_variable(o)) for o in outs])
    return g


def _graph_of(obj):
    if isinstance(obj, Function):
        return obj.graph
    if isinstance(obj, _C.CompiledFunction):
        return obj.graph
    if isinstance(obj, _C.Graph):
        return obj
    return _auto_graph(obj)


def dprint(obj, file=None):
    """Prints (and returns) the .tg text of a Variable, a list of them or a function."""
    text = _graph_of(obj).text()
    if file is not False:
        print(text, end="", file=file)
    return text


def dot_graph(obj, path=None):
    """Graphviz text of a Variable, a list of them or a function; written to path if given."""
    text = _graph_of(obj).dot()
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


# -- .tg modules ----------------------------------------------------------------------------
class Module:
    """Functions loaded from a .tg file: compile one with .function(name, mode=...), or
    call it symbolically with module[name](*variables)."""

    def __init__(self, m):
        self._m = m

    def names(self):
        return self._m.names()

    def function(self, name, mode="vm", nthreads=0):
        return self._m.graph(name).compile(mode=mode, nthreads=nthreads)

    def __getitem__(self, name):
        callee = self._m.graph(name)

        def call(*args):
            outs = _make("call", callee, [as_variable(a) for a in args], None)
            return outs[0] if len(outs) == 1 else tuple(outs)
        call.__name__ = name
        return call

    def text(self):
        return self._m.text()


def load(path):
    """Loads a .tg file (docs/text-format.md)."""
    return Module(_C.load(path))


def parse(text, name="<string>"):
    return Module(_C.parse(text, name))


# -- pmap --------------------------------------------------------------------------------
class _Body:
    """A Python function traced on parameters: the body of a pmap (axis_name and mapped
    set), or of a scan or map (axis_name None)."""
    count = 0

    def __init__(self, params, outputs, axis_name, mapped):
        self.params, self.outputs = params, outputs
        self.axis_name, self.mapped = axis_name, mapped
        _Body.count += 1
        self.name = f"body_{_Body.count}"


def _body_graph(body):
    g = _C.Graph(body.name)

    def leaf(v):
        kind, payload = v.leaf
        if kind == "literal":
            return g.literal(payload)
        if kind == "const":
            return g.constant(payload)
        raise Error(f"pmap: the body reads {v!r}, which is not one of its parameters "
                    "(pass it as an argument with in_axes None)")

    b = _Builder(g, leaf)
    for i, p in enumerate(body.params):
        b.memo[id(p)] = g.input(p.name or f"p{i}", p._tg_dtype, p.shape)
        b.keep.append(p)
    if body.axis_name is not None:
        g.set_mapped(body.axis_name, body.mapped)
    g.set_outputs([b.build(o) for o in body.outputs])
    return g


def _per_value(op, axes, n, what):
    """One axis per value: axes as given (a list or tuple), or the one value for all n."""
    axes = list(axes) if isinstance(axes, (list, tuple)) else [axes] * n
    if len(axes) != n:
        values = "inputs" if what == "in_axes" else "outputs"
        raise Error(f"{op}: {len(axes)} {what} for {n} {values}")
    return axes


def _mapped_params(op, args, axes):
    """The body's parameters of a map over args: each argument without its mapped axis."""
    params = []
    for i, (a, ax) in enumerate(zip(args, axes)):
        shape = list(a.shape)
        if ax is not None:
            if not -len(shape) <= ax < len(shape):
                raise Error(f"{op}: in_axes {ax} is out of range for input {i} of rank "
                            f"{len(shape)}")
            del shape[ax]
        params.append(_leaf("input", None, f"p{i}", a._tg_dtype, shape))
    return params


def _traced(fn, params):
    """fn called on the body's parameters: its results as Variables, and whether it
    returned several (a list or tuple) rather than one."""
    outs = fn(*params)
    many = isinstance(outs, (list, tuple))
    return [as_variable(o) for o in (outs if many else [outs])], many


def pmap(fn, in_axes=0, out_axes=0, axis_name="i", devices=0):
    """JAX's pmap over tgraph's devices (docs/pmap.md): pmap(fn, ...)(*variables) runs fn
    on each rank's slice of the mapped inputs. in_axes/out_axes: one int (or None) for
    all, or one per input/output; devices: the number of ranks (0: the mapped extent)."""
    def mapped(*args):
        args = [as_variable(a) for a in args]
        axes = _per_value("pmap", in_axes, len(args), "in_axes")
        params = _mapped_params("pmap", args, axes)
        outs, many = _traced(fn, params)
        body = _Body(params, outs, axis_name, [ax is not None for ax in axes])
        attrs = {"body": body, "in_axes": axes,
                 "out_axes": _per_value("pmap", out_axes, len(outs), "out_axes"),
                 "axis_name": axis_name, "devices": devices}
        res = _make("apply", "pmap", args, attrs)
        return res if many else res[0]
    return mapped


def _loop(op, fn, args, attrs, n_states, n_sequences, taps, dynamic_steps):
    args = [as_variable(a) for a in args]
    ins = args[:-1] if dynamic_steps else args
    if n_states + n_sequences > len(ins):
        raise Error(f"{op}: {n_states} states and {n_sequences} sequences, but "
                    f"{len(ins)} inputs")
    params = []

    def param(v, drop):
        if drop and len(v.shape) == 0:
            raise Error(f"{op}: input {v!r} is 0-d, but its steps are taken along axis 0")
        params.append(_leaf("input", None, f"p{len(params)}", v._tg_dtype,
                            list(v.shape[1:] if drop else v.shape)))

    for i, v in enumerate(ins):
        if i < n_states and i == 0 and taps:
            for _ in taps:  # one parameter per tap, in the order written
                param(v, True)
        else:
            param(v, n_states <= i < n_states + n_sequences)
    outs, _ = _traced(fn, params)
    attrs["body"] = _Body(params, outs, None, None)
    res = _make("apply", op, args, attrs)
    return res[0] if len(res) == 1 else tuple(res)


def scan(fn, *args, n_states=1, n_sequences=0, taps=None, n_steps=None,
         dynamic_steps=False, until=False, reverse=False):
    """A loop with carried state, as PyTensor's scan (docs/scan.md):
    scan(step, h0, ..., xs, ..., W, ..., n_states=, n_sequences=) calls step(states...,
    one row of each sequence..., constants...) once per step; step returns the new states
    (each of the type it came in with), then its per-step outputs, then, with until=True, a
    0-d bool that ends the loop after this step. scan returns the last states, then the
    outputs stacked along a new axis 0: one Variable for one result, else a tuple.
    taps=[-1, -2]: step receives the first state's past values in that order, and its
    initial value holds them along a leading axis, oldest first. n_steps: a constant count;
    dynamic_steps=True: the last argument, a 0-d integer, is the count."""
    attrs = {"n_states": n_states, "n_sequences": n_sequences, "dynamic_steps": dynamic_steps,
             "until": until, "reverse": reverse}
    if taps is not None:
        attrs["taps"] = list(taps)
    if n_steps is not None:
        attrs["n_steps"] = n_steps
    return _loop("scan", fn, args, attrs, n_states, n_sequences, taps, dynamic_steps)


def map(fn, *args, n_sequences=1, n_steps=None, dynamic_steps=False):
    """A loop without carried state (docs/scan.md): map(f, xs, ..., W, ...) calls f(one row
    of each sequence..., constants...) once per row and stacks its results along a new
    axis 0; the iterations are independent, so they run in parallel over the pool."""
    attrs = {"n_sequences": n_sequences, "dynamic_steps": dynamic_steps}
    if n_steps is not None:
        attrs["n_steps"] = n_steps
    return _loop("map", fn, args, attrs, 0, n_sequences, None, dynamic_steps)


def vectorize(fn, in_axes=0, out_axes=0):
    """JAX's vmap (docs/vectorize.md): vectorize(fn, ...)(*args) maps fn, written over one
    example, over an axis of its arguments, as ordinary batched graph (no loop). in_axes /
    out_axes: one int (negative counts from the end) or None for all, or one per
    argument/result; None passes an argument whole to every example, or returns a result
    that depends on no mapped argument once."""
    def mapped(*args):
        args = [as_variable(a) for a in args]
        axes = _per_value("vectorize", in_axes, len(args), "in_axes")
        params = _mapped_params("vectorize", args, axes)
        outs, many = _traced(fn, params)
        attrs = {"body": _Body(params, outs, None, None), "in_axes": axes,
                 "out_axes": _per_value("vectorize", out_axes, len(outs), "out_axes")}
        res = _make("vectorize", None, args, attrs)
        return tuple(res) if many else res[0]
    return mapped
