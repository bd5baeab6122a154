#!/usr/bin/env python3
"""diff_numpy.py - differential tests of tgraph against NumPy.

Generates .tg programs and random inputs (fixed seed), runs `tgraph run` in each --mode
(default: reference, the graph as written, then vm, the graph after the rewrite pipeline)
with --in/--out .npy files in a temporary folder, computes the same values with NumPy
(NEP 50 "weak" promotion, the rules tgraph follows) and compares:
  - dtypes and shapes exactly;
  - integers and bools exactly;
  - floats with a per-case relative tolerance (1e-5 for f32, 1e-12 for f64 by default),
    against max(|expected|, scale) where reductions and products pass the sum of the
    magnitudes as `scale`; NaN positions must match, infinities must match exactly.

Cases that share inputs are batched into one program, and programs into one `tgraph run`;
when a run fails as a whole, each of its programs, then each case, is rerun alone to find
the culprits (a failure that no smaller run repeats is reported as the whole's).

On devices (docs/devices.md):
  --devices N   runs on N virtual host devices cpu:0..N-1 (`tgraph run --devices N`);
  --sim K       with K sim devices sim:0..K-1 (TGRAPH_SIM_DEVICES=K), their memory
                protected from host reads (TGRAPH_SIM_PROTECT=1);
  --annotate    adds `device="..."` to the outermost call of a random half of each case's
                lines (`name = op(...)`, `fused{...}(...)`, a function call; never
                `const(...)`, never indexing sugar such as `x[1:2]`), naming cpu, cpu:i or
                sim:i among the devices of the run. The choices are fixed by --seed and the
                case's name (tg_devices.py), so a case is annotated the same in a bundle
                and alone; failures print the annotated program and --keep keeps it.
Without annotations placement is automatic. On devices the `tgraph opt` round trip prints
the placed graph (`opt --placed`), transfers included, and runs it (placed again).
--sample K runs the first program of each generator and every K-th after it: the same
programs, data and annotations as the full suite, fewer of them.

Under pmap (docs/pmap.md), --pmap N runs each program as the body of a pmap over N ranks:
  - its function, renamed body<b>, is called by a new main taking stacked inputs:
    `o0, o1 = pmap(@body0, x, W, in_axes=[1, none], out_axes=[0, -1], axis_name="batch")`
    (split into several bodies where a bundle has more than 64 results, a body's limit);
  - slice k of every input, and what NumPy expects of it, is the suite made again with the
    random stream [seed, k] (slice 0: the plain suite's data): the generators' own NumPy
    expressions evaluated on each slice. A replicated (`none`) input keeps slice 0's value
    in every slice: that value is written into the generator's own array when the
    parameter is made, before the expectations are computed from it (Suite.bind), in the
    programs where that is seen to work (slice 0's values written into another making of
    the suite give slice 0's expectations again);
  - per program, fixed by --seed and its name: each input mapped along an axis (0 to its
    rank, a third of them written negative; the new extent sometimes declared '?') or, a
    quarter of them, replicated; each result stacked along an axis drawn the same way, or,
    half of those that read no mapped input, returned once (out_axes=none);
  - expected: each slice's expectation stacked along out_axes, with the plain suite's
    tolerances (scales stacked the same way).
The ranks run on threads, or with --devices N (or more) on the host devices. With
--launch "mpirun -np P ..." every tgraph process is started by that command, so that a
pmap over a multiple of P ranks spans the P processes of an MPI job (docs/mpi.md), each
with its own threads or --devices (which then need to be only N / P). What cannot
be mapped is skipped and counted: a program with state or whose types differ between
slices, a case with a result whose extent its values decide (mask_select, alloc from a
tensor, einsum merging '?' extents; a program with nothing else is skipped whole); the run
fails when fewer than 90% of its programs were mapped.

vectorize (docs/vectorize.md) is checked by programs of their own (vectorize_checks): a
function of the file mapped over axes of random inputs, compared with the loop over the
examples in NumPy (explicit loops, or np.vectorize with a gufunc signature).

Where tgraph documents a deliberate difference from NumPy 1.24, the expected values
follow tgraph (each is named where it is applied):
  - tgraph has no float16: float-only ops on bool/i8/u8 give float32 (NumPy: float16);
  - tgraph has no uint64: sum/prod of u8 give int64 (NumPy: uint64).

usage: diff_numpy.py --tgraph PATH [--mode reference,vm] [--seed N] [--filter TEXT] [--keep DIR]
                     [--devices N] [--sim K] [--annotate] [--pmap N] [--launch CMD]
                     [--sample K] [-j N] [-v]
Ends with the line "N passed, N failed"; exits 1 when a case failed.
"""
import argparse
import atexit
import contextlib
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import tg_devices

if hasattr(np, "_set_promotion_state"):
    np._set_promotion_state("weak")  # NEP 50 in NumPy 1.24; the default from NumPy 2 on
np.seterr(all="ignore")
warnings.filterwarnings("ignore", category=RuntimeWarning)

TG2NP = {
    "bool": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "u8": np.dtype(np.uint8),
    "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
}
NP2TG = {v: k for k, v in TG2NP.items()}
INTS = ["i8", "i16", "i32", "i64", "u8"]
FLOATS = ["f32", "f64"]
ALL = ["bool"] + INTS + FLOATS
RTOL = {"f32": 1e-5, "f64": 1e-12}
MODE = ["reference"]  # the backend `tgraph run` uses (--mode)


def mode_args(mode):
    """`tgraph run` options of a mode name: a --mode value, or debug-c (debug mode checking
    the c backend)."""
    if mode == "debug-c":
        return ["--mode", "debug", "--debug-backend", "c"]
    return ["--mode", mode]


def float_for(dt):
    """The float dtype tgraph computes float-only ops in for an input dtype (tgraph has no
    float16: bool/i8/u8 give f32 where NumPy gives f16)."""
    if dt in FLOATS:
        return dt
    return "f64" if dt in ("i32", "i64") else "f32"


def npdt(dt):
    return TG2NP[dt]


def tgdt(a):
    return NP2TG[np.asarray(a).dtype]


def tgtype(a, unknown=()):
    """The .tg type of array a; axes listed in `unknown` are declared '?'
    (negative axes count from the end)."""
    a = np.asarray(a)
    unk = {u % a.ndim for u in unknown} if a.ndim else set()
    dims = ["?" if i in unk else str(n) for i, n in enumerate(a.shape)]
    return "%s[%s]" % (tgdt(a), ",".join(dims))


def f64(a):
    return np.asarray(a, dtype=np.float64)


# ---- programs and cases --------------------------------------------------------------


class Param:
    def __init__(self, name, value, decl, save=None):
        self.name = name
        self.value = np.asarray(value)
        self.decl = decl
        self.save = save  # transform applied only to the saved file (byte order, layout)
        # the generator's own array: a value written into it reaches the expectations the
        # generator computes from it afterwards (Suite.bind)
        self.own = self.value is value and self.value.flags.writeable
        self.in_axis = None  # under --pmap: the axis it is mapped along, None: replicated
        self.body_decl = decl  # under --pmap: the type of the body's parameter


class Case:
    def __init__(self, prog, name, expr, expect, rtol, scale, lines):
        self.prog = prog
        self.name = name
        self.expr = expr
        self.lines = list(lines)
        exp = np.asarray(expect)
        if exp.dtype not in NP2TG:
            raise AssertionError("case %s: NumPy result dtype %s is not a tgraph dtype"
                                 % (name, exp.dtype))
        self.expect = exp
        self.rtol = rtol
        self.scale = scale
        # exact elementwise results (no reduction, no tolerance) also compare signed zeros
        self.signed_zero = rtol is None and scale is None
        self.out_axis = None  # under --pmap: the axis it is stacked along, None: returned once

    def full_name(self):
        return "%s/%s" % (self.prog.name, self.name)


class Params(list):
    """A program's parameters; each one added, when the program is made or later
    (`p.params += [...]`, `p.params.append(...)`), is handed to `bind` first."""

    def __init__(self, params, bind):
        self.bind = bind
        super().__init__()
        self.extend(params)

    def append(self, p):
        self.bind(p)
        super().append(p)

    def extend(self, ps):
        for p in ps:
            self.append(p)

    def __iadd__(self, ps):
        self.extend(ps)
        return self


class Program:
    def __init__(self, name, params, bind=None):
        self.name = name
        self.params = Params(params, lambda p: bind(self, p)) if bind else list(params)
        self.cases = []
        self.roundtrip = False  # also check `tgraph opt` prints a program that runs the same
        self.pmap_devices = False  # under --pmap: write devices=N even when not required

    def case(self, name, expr, expect, rtol=None, scale=None, lines=(), signed_zero=None):
        c = Case(self, name, expr, expect, rtol, scale, lines)
        if signed_zero is not None:
            c.signed_zero = signed_zero
        self.cases.append(c)

    def text(self, cases):
        return bundle_text([(self, cases)])


def _param_uses(names):
    """A pattern matching every use of the parameters `names` in a .tg expression (not
    attribute keywords `k=`, op names `f(`, nor parts of longer names)."""
    return re.compile(r'(?<![\w.$"])(%s)(?![\w$"(]|\s*=|\s*\()'
                      % "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))


def _renamer(names, prefix):
    """A function that prefixes every use of the parameters `names` in a .tg expression."""
    if not prefix or not names:
        return lambda text: text
    pat = _param_uses(names)
    return lambda text: pat.sub(lambda m: prefix + m.group(1), text)


# ---- devices and annotations ------------------------------------------------------------


class Devices:
    """The devices `tgraph run` has (--devices, --sim) and whether programs are annotated
    (--annotate); tg_devices.py says how. Set once in main, before any worker."""

    def __init__(self):
        self.host = 0
        self.sim = 0
        self.annotate = False
        self.seed = 0

    def names(self):
        return tg_devices.names(self.host, self.sim)

    def args(self):
        return tg_devices.run_args(self.host)

    def env(self):
        return tg_devices.env(self.sim)

    def annotate_lines(self, lines, case):
        """The lines of a case, annotated when --annotate says (the choices fixed by --seed
        and the case's name)."""
        if not self.annotate:
            return lines
        return tg_devices.annotate_lines(lines, "%d/%s" % (self.seed, case.full_name()),
                                         self.names())

    def describe(self):
        """The setting as a command line prefix, for failure messages ("" when none)."""
        if not self.host and not self.sim:
            return ""
        return " ".join(tg_devices.env_words(self.sim) + ["tgraph", "run"] + mode_args(MODE[0])
                        + self.args())


DEV = Devices()


def bundle_params(items):
    """[(name in the bundle, Param)] of the programs in items = [(program, cases)]."""
    multi = len(items) > 1
    return [("p%d_%s" % (i, p.name) if multi else p.name, p)
            for i, (prog, _) in enumerate(items) for p in prog.params]


def bundle_text(items):
    """One function computing the cases of several programs, outputs in order. With more
    than one program, parameters are renamed p<i>_<name>; locals get a suffix _c<k>.
    Under --pmap, that function is the body of pmaps (pmap_text)."""
    multi = len(items) > 1
    sig, outs = [], []  # outs: (program index, case, output name, lines computing it)
    for i, (prog, cases) in enumerate(items):
        pre = "p%d_" % i if multi else ""
        ren = _renamer([p.name for p in prog.params], pre)
        sig += ["%s%s: %s" % (pre, p.name, p.decl) for p in prog.params]
        for c in cases:
            k = len(outs)
            suffix = "_c%d" % k
            lines = [ren(ln.replace("$", suffix)) for ln in c.lines]
            lines.append("o%d = %s" % (k, ren(c.expr.replace("$", suffix))))
            outs.append((i, c, "o%d" % k, DEV.annotate_lines(lines, c)))
    if PMAP[0]:
        return pmap_text(items, sig, outs)
    return "\n".join(["func main(%s) {" % ", ".join(sig)] +
                     ["  " + ln for _, _, _, lines in outs for ln in lines] +
                     ["  return " + ", ".join(o for _, _, o, _ in outs), "}"]) + "\n"


class Suite:
    """The programs of the generators and their data, drawn from one random stream.
    `replace` (--pmap) gives values for some parameters, {program: {parameter: array}}:
    each is written into the generator's own array when the parameter is added to its
    program, before any expectation is computed from it, so the expectations are NumPy's
    on those values. A parameter that cannot take its value so (a copy of the generator's
    array, one already a parameter of an earlier program) puts its program in `unbound`."""

    def __init__(self, seed, rng_seed=None, replace=None):
        self.seed = seed
        self.rng = np.random.default_rng(seed if rng_seed is None else rng_seed)
        self.programs = []
        self.replace = replace or {}
        self.unbound = set()  # names of programs some of whose parameters are not their own
        self.arrays = {}  # id of the array of each parameter so far (all kept alive) -> program

    def bind(self, prog, p):
        """Writes the value `replace` gives p (if any) into p's array, and notes whether it
        could be written so (Suite)."""
        shared = id(p.value) in self.arrays  # a write for one would change the other's value
        if shared:
            self.unbound.add(self.arrays[id(p.value)])
        else:
            self.arrays[id(p.value)] = prog.name
        if shared or not p.own:
            self.unbound.add(prog.name)
        new = self.replace.get(prog.name, {}).get(p.name)
        if new is None:
            return
        if shared or not p.own or new.dtype != p.value.dtype or new.shape != p.value.shape:
            self.unbound.add(prog.name)
        else:
            p.value[...] = new

    def program(self, name, *params):
        """params: (name, array) or (name, array, decl) or Param."""
        ps = []
        for p in params:
            if isinstance(p, Param):
                ps.append(p)
            elif len(p) == 2:
                ps.append(Param(p[0], p[1], tgtype(p[1])))
            else:
                ps.append(Param(p[0], p[1], p[2]))
        prog = Program(name, ps, self.bind)
        self.programs.append(prog)
        return prog

    # ---- random data ----
    def data(self, dt, shape, kind="real"):
        rng = self.rng
        shape = tuple(shape)
        if dt == "bool":
            return rng.random(shape) < 0.5
        if dt in INTS:
            info = np.iinfo(npdt(dt))
            if kind == "full":
                lo, hi = int(info.min), int(info.max)
            elif kind == "pos":
                lo, hi = 1, min(100, int(info.max))
            elif kind == "small":
                lo, hi = max(-5, int(info.min)), 5
            else:
                span = {"i8": 60, "u8": 120, "i16": 2000, "i32": 100000, "i64": 10**7}[dt]
                lo, hi = max(-span, int(info.min)), span
            return rng.integers(lo, hi, size=shape, endpoint=True).astype(npdt(dt))
        if kind == "real":
            a = rng.standard_normal(shape) * 2.0
        elif kind == "pos":
            a = np.abs(rng.standard_normal(shape)) * 5.0 + 1e-3
        elif kind == "gt-1":
            a = rng.uniform(-0.99, 5.0, shape)
        elif kind == "unit":
            a = rng.uniform(-1.0, 1.0, shape)
        elif kind == "near1":
            a = rng.uniform(0.9, 1.1, shape)
        elif kind == "halves":
            a = rng.integers(-12, 12, size=shape) / 2.0
        elif kind == "wide":
            a = rng.standard_normal(shape) * 30.0
        else:
            raise ValueError(kind)
        return np.asarray(a, dtype=npdt(dt))

    def sprinkle(self, a, values):
        """Puts each of `values` at a random position of a (a copy), when a is big enough."""
        a = np.array(a)
        if a.size < 2 * len(values):
            return a
        pos = self.rng.choice(a.size, size=len(values), replace=False)
        flat = a.reshape(-1)
        for p, v in zip(pos, values):
            flat[p] = v
        return flat.reshape(a.shape)


SPECIAL_F = [np.nan, np.inf, -np.inf, 0.0, -0.0]


# ---- op oracles -------------------------------------------------------------------------


def _vec(fn):
    v = np.vectorize(fn, otypes=[np.float64])

    def apply(x):
        x = np.asarray(x)
        if x.size == 0:
            return np.zeros(x.shape, np.float64)
        return v(f64(x))
    return apply


def _sigmoid(x):
    x = f64(x)
    with np.errstate(all="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


_erf = _vec(math.erf)
_erfc = _vec(math.erfc)

# float-only unary ops: name -> (oracle computing in the input's float dtype, domain kind).
# Oracles marked f64 compute in double and round once (as tgraph's reference does).
UNARY_FLOAT = {
    "exp": (np.exp, "real", False),
    "exp2": (np.exp2, "real", False),
    "log": (np.log, "pos", False),
    "log2": (np.log2, "pos", False),
    "log1p": (np.log1p, "gt-1", False),
    "expm1": (np.expm1, "real", False),
    "sqrt": (np.sqrt, "pos", False),
    "rsqrt": (lambda x: 1.0 / np.sqrt(f64(x)), "pos", True),
    "sin": (np.sin, "real", False),
    "cos": (np.cos, "real", False),
    "tan": (np.tan, "real", False),
    "tanh": (np.tanh, "real", False),
    "sigmoid": (_sigmoid, "real", True),
    "softplus": (lambda x: np.logaddexp(0.0, f64(x)), "real", True),
    "erf": (_erf, "real", True),
    "erfc": (_erfc, "real", True),
}
DOMAIN_SPECIALS = {
    "real": SPECIAL_F + [100.0, -100.0, 1000.0, -1000.0],
    "pos": SPECIAL_F + [-1.0, 1e-30],
    "gt-1": SPECIAL_F + [-1.0, -2.0],
}


def unary_float_expect(op, x):
    fn, _, via64 = UNARY_FLOAT[op]
    dt = float_for(tgdt(x))
    xin = np.asarray(x).astype(npdt(dt))
    if via64:
        return np.asarray(fn(f64(xin))).astype(npdt(dt))
    return np.asarray(fn(xin)).astype(npdt(dt))


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "int_div": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}
CMP = ["lt", "le", "gt", "ge", "eq", "ne"]
LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def lit(v):
    """A Python value written as a .tg literal."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(float(v))


def attr_axis(ax):
    if ax is None:
        return "none"
    if isinstance(ax, (list, tuple)):
        return "[" + ",".join(str(a) for a in ax) + "]"
    return str(ax)


# ---- generators ---------------------------------------------------------------------------


def gen_unary(S):
    shapes = [(), (0,), (7,), (3, 5), (2, 3, 4), (2, 1, 3, 2)]
    for dt in FLOATS:
        for shape in shapes:
            for dom in ("real", "pos", "gt-1"):
                x = S.data(dt, shape, dom)
                x = S.sprinkle(x, DOMAIN_SPECIALS[dom])
                unknown = (0,) if len(shape) >= 2 else ()
                p = S.program("unary_%s_%s_%s" % (dom, dt, "x".join(map(str, shape)) or "0d"),
                              ("x", x, tgtype(x, unknown)))
                for op, (_, d, _) in UNARY_FLOAT.items():
                    if d == dom:
                        p.case(op, "%s(x)" % op, unary_float_expect(op, x))
                if dom == "real":
                    p.case("neg", "neg(x)", np.negative(x))
                    p.case("abs", "abs(x)", np.abs(x))
                    p.case("sign", "sign(x)", np.sign(x))
                    p.case("floor", "floor(x)", np.floor(x))
                    p.case("ceil", "ceil(x)", np.ceil(x))
                    p.case("round", "round(x)", np.round(x))
                    p.case("isnan", "isnan(x)", np.isnan(x))
                    p.case("isinf", "isinf(x)", np.isinf(x))
    # big inputs (1.2e5 elements), one program per dtype
    for dt in FLOATS:
        x = S.data(dt, (300, 400), "real")
        p = S.program("unary_big_" + dt, ("x", x, tgtype(x, (0,))))
        for op in ("exp", "tanh", "sin", "sigmoid", "erf"):
            p.case(op, "%s(x)" % op, unary_float_expect(op, x))
        xp = np.abs(x) + np.asarray(1e-3, x.dtype)
        p.case("log_abs", "log(add(abs(x), 0.001))", np.log(xp))
    # rounding at halves (half to even)
    for dt in FLOATS:
        x = S.data(dt, (24,), "halves")
        p = S.program("round_halves_" + dt, ("x", x))
        p.case("round", "round(x)", np.round(x))
        p.case("floor", "floor(x)", np.floor(x))
        p.case("ceil", "ceil(x)", np.ceil(x))
    # special values through every unary op
    for dt in FLOATS:
        fi = np.finfo(npdt(dt))
        sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                       1e30, -1e30, 1e-30, float(fi.max), float(fi.min), float(fi.tiny),
                       float(fi.tiny) / 4, 700.0, -700.0, 90.0, -90.0], dtype=npdt(dt))
        p = S.program("unary_specials_" + dt, ("x", sp))
        for op in UNARY_FLOAT:
            p.case(op, "%s(x)" % op, unary_float_expect(op, sp))
        for op, fn in (("neg", np.negative), ("abs", np.abs), ("sign", np.sign),
                       ("floor", np.floor), ("ceil", np.ceil), ("round", np.round),
                       ("isnan", np.isnan), ("isinf", np.isinf)):
            p.case(op, "%s(x)" % op, fn(sp))
    # integer and bool inputs
    for dt in INTS + ["bool"]:
        x = S.data(dt, (4, 5), "pos" if dt != "bool" else "real")
        p = S.program("unary_int_" + dt, ("x", x))
        for op in ("exp", "sqrt", "log", "sin", "tanh", "sigmoid", "erf"):
            p.case(op, "%s(x)" % op, unary_float_expect(op, x))
        if dt != "bool":
            xs = S.data(dt, (4, 5), "full")
            p2 = S.program("unary_int_wrap_" + dt, ("x", xs))
            p2.case("neg", "neg(x)", np.negative(xs))
            p2.case("abs", "abs(x)", np.abs(xs))
            p2.case("sign", "sign(x)", np.sign(xs))
        else:
            p.case("abs", "abs(x)", np.abs(x))
            p.case("not", "not(x)", np.logical_not(x))


def binary_inputs(S, op, dt, shape):
    """Operands for `op` in dtype dt: domain-aware so NumPy's result is well defined."""
    if op in ("int_div", "mod") and dt in INTS:
        a = S.data(dt, shape, "real")
        b = S.data(dt, shape, "small")  # includes zeros: tgraph and NumPy give 0
        if dt != "u8":
            a = np.maximum(a, np.iinfo(npdt(dt)).min + 1)  # no MIN // -1
        return a, b
    if op == "pow":
        if dt in INTS:
            return S.data(dt, shape, "small"), S.data(dt, shape, "small") % 6
        if dt == "bool":
            return S.data(dt, shape), S.data(dt, shape)
        a = S.data(dt, shape, "pos")
        b = S.data(dt, shape, "unit") * np.asarray(3, npdt(dt))
        return a, b
    if dt in FLOATS:
        a, b = S.data(dt, shape), S.data(dt, shape)
        if op in ("div", "int_div", "mod"):
            b = S.sprinkle(b, [0.0, -0.0, np.inf, np.nan])
            a = S.sprinkle(a, [np.inf, -np.inf, 0.0])
        else:
            a = S.sprinkle(a, [np.nan, np.inf, -np.inf])
            b = S.sprinkle(b, [np.nan, -np.inf, 0.0])
        if a.size:  # some equal elements, for the comparisons
            a.reshape(-1)[: a.size // 2] = b.reshape(-1)[: a.size // 2]
        return a, b
    a, b = S.data(dt, shape), S.data(dt, shape)
    if a.size:  # some equal elements, for the comparisons
        a.reshape(-1)[: a.size // 2] = b.reshape(-1)[: a.size // 2]
    return a, b


def bool_ok(op):
    """Ops NumPy defines on two bools."""
    return op not in ("sub",)


def gen_binary(S):
    # same dtype, same shape
    for dt in ALL:
        for shape in [(), (0,), (6,), (3, 4), (2, 3, 4)]:
            groups = {}
            for op in BINARY:
                if dt == "bool" and not bool_ok(op):
                    continue
                key = (op in ("int_div", "mod"), op == "pow")
                groups.setdefault(key, []).append(op)
            for key, ops in groups.items():
                a, b = binary_inputs(S, ops[0], dt, shape)
                tag = "divmod" if key[0] else "pow" if key[1] else "arith"
                unknown = (0,) if len(shape) >= 2 else ()
                p = S.program("binary_%s_%s_%s" % (tag, dt, "x".join(map(str, shape)) or "0d"),
                              ("a", a, tgtype(a, unknown)), ("b", b, tgtype(b, unknown)))
                for op in ops:
                    exp = BINARY[op](a, b)
                    p.case(op, "%s(a, b)" % op, exp)
            if dt == "bool" and shape:
                a, b = S.data(dt, shape), S.data(dt, shape)
                p = S.program("logical_%s" % "x".join(map(str, shape)), ("a", a), ("b", b))
                for op, fn in LOGICAL.items():
                    p.case(op, "%s(a, b)" % op, fn(a, b))
                p.case("not", "not(a)", np.logical_not(a))
    # mixed dtypes (NEP 50 promotion of strong types)
    pairs = [("f32", "f64"), ("i32", "f32"), ("i8", "u8"), ("u8", "i16"), ("i8", "f32"),
             ("bool", "i32"), ("i64", "f64"), ("u8", "f32"), ("i16", "i64"), ("bool", "f32"),
             ("i16", "f32"), ("i64", "f32"), ("u8", "i64"), ("bool", "u8")]
    for da, db in pairs:
        a, b = S.data(da, (3, 4)), S.data(db, (3, 4))
        p = S.program("mixed_%s_%s" % (da, db), ("a", a), ("b", b))
        for op in ("add", "mul", "div", "maximum", "minimum") + tuple(CMP):
            p.case(op, "%s(a, b)" % op, BINARY[op](a, b))
            p.case(op + "_swapped", "%s(b, a)" % op, BINARY[op](b, a))
        if "bool" not in (da, db):
            p.case("sub", "sub(a, b)", np.subtract(a, b))
    # strong 0-d operands promote like any typed input
    x = S.data("f32", (3,))
    s64 = np.asarray(1.5, np.float64)
    p = S.program("strong_0d", ("x", x), ("s", s64))
    p.case("mul", "mul(x, s)", np.multiply(x, s64))
    p.case("add", "add(s, x)", np.add(s64, x))
    # broadcasting: static 1 axes, lower ranks, '?' axes that meet equal extents
    bcast = [((3, 4), (4,), (), ()), ((3, 1), (1, 4), (), ()), ((2, 1, 4), (3, 1), (), ()),
             ((), (3, 4), (), ()), ((0, 3), (3,), (), ()), ((5, 3), (1, 3), (0,), ()),
             ((5, 3), (5, 1), (0,), (0,)), ((2, 3, 4), (3, 4), (0, 1), (0,)),
             ((4, 1, 1, 3), (1, 2, 5, 1), (0,), ()), ((1, 0), (7, 1), (), ())]
    for dt in ("f32", "f64", "i32", "u8"):
        for k, (sa, sb, ua, ub) in enumerate(bcast):
            a, b = S.data(dt, sa), S.data(dt, sb)
            p = S.program("broadcast_%s_%d" % (dt, k), ("a", a, tgtype(a, ua)),
                          ("b", b, tgtype(b, ub)))
            for op in ("add", "sub", "mul", "maximum", "lt", "eq"):
                p.case(op, "%s(a, b)" % op, BINARY[op](a, b))
                p.case(op + "_swapped", "%s(b, a)" % op, BINARY[op](b, a))
    # weak literals
    for dt in ALL:
        x = S.data(dt, (2, 5), "pos" if dt in INTS else "real")
        p = S.program("weak_literal_" + dt, ("x", x, tgtype(x, (0,))))
        cases = [("add_int", "add(x, 2)", lambda: np.add(x, 2)),
                 ("radd_int", "add(3, x)", lambda: np.add(3, x)),
                 ("mul_float", "mul(x, 0.5)", lambda: np.multiply(x, 0.5)),
                 ("rsub_float", "sub(1.5, x)", lambda: np.subtract(1.5, x)),
                 ("div_int", "div(x, 4)", lambda: np.true_divide(x, 4)),
                 ("maximum_int", "maximum(x, 1)", lambda: np.maximum(x, 1)),
                 ("lt_float", "lt(x, 0.5)", lambda: np.less(x, 0.5)),
                 ("eq_int", "eq(x, 1)", lambda: np.equal(x, 1)),
                 ("mul_neg_float", "mul(x, -2.5)", lambda: np.multiply(x, -2.5)),
                 ("add_bool", "add(x, true)", lambda: np.add(x, True))]
        if dt != "bool":
            cases += [("sub_int", "sub(x, 1)", lambda: np.subtract(x, 1)),
                      ("rsub_int", "sub(1, x)", lambda: np.subtract(1, x)),
                      ("int_div_int", "int_div(x, 3)", lambda: np.floor_divide(x, 3)),
                      ("mod_int", "mod(x, 3)", lambda: np.remainder(x, 3)),
                      ("pow_int", "pow(x, 2)", lambda: np.power(x, 2)),
                      ("mul_neg_int", "mul(x, -3)" if dt != "u8" else "mul(x, 3)",
                       lambda: np.multiply(x, -3 if dt != "u8" else 3))]
        if dt in FLOATS:
            cases += [("pow_half", "pow(x, 0.5)", lambda: np.power(x, 0.5)),
                      ("rpow", "pow(2, x)", lambda: np.power(2, x)),
                      ("add_inf", "add(x, inf)", lambda: np.add(x, np.inf)),
                      ("maximum_neg_inf", "maximum(x, -inf)", lambda: np.maximum(x, -np.inf))]
        if dt in ("i8", "u8"):
            cases += [("wrap_add", "add(x, 100)", lambda: np.add(x, 100)),
                      ("wrap_mul", "mul(x, 127)", lambda: np.multiply(x, 127))]
        for name, expr, fn in cases:
            p.case(name, expr, fn())
    # literals only
    p = S.program("literals_only", ("x", np.asarray(1.0, np.float32)))
    p.case("int_int", "add(1, 2)", np.add(np.int64(1), np.int64(2)))
    p.case("int_float", "add(1, 2.5)", np.asarray(3.5))
    p.case("bool_int", "mul(true, 3)", np.asarray(3, np.int64))
    p.case("float_x", "add(x, mul(2, 0.25))", np.add(np.float32(1), np.float32(0.5)))


def gen_where_clip_cast(S):
    for dt in ALL:
        c = S.data("bool", (3, 4))
        a, b = S.data(dt, (3, 4)), S.data(dt, (4,))
        p = S.program("where_" + dt, ("c", c), ("a", a, tgtype(a, (0,))), ("b", b))
        p.case("where", "where(c, a, b)", np.where(c, a, b))
        ti = npdt("i64" if dt == "bool" else dt)  # a weak int meeting bool gives i64
        p.case("where_lit", "where(c, a, 1)", np.where(c, a.astype(ti), np.asarray(1, ti)))
        tf = npdt(dt if dt in FLOATS else "f64")  # a weak float meeting ints gives f64
        p.case("where_lit_float", "where(c, 0.5, b)",
               np.where(c, np.asarray(0.5, tf), b.astype(tf)))
    c = S.data("bool", (2, 1, 3))
    a, b = S.data("f32", (4, 1)), S.data("f64", ())
    p = S.program("where_mixed", ("c", c), ("a", a), ("b", b))
    p.case("where", "where(c, a, b)", np.where(c, a, b))
    p.case("where_int_float", "where(c, a, 2)", np.where(c, a, np.float32(2)))
    for dt in ("f32", "f64", "i32", "i8", "u8"):
        x = S.sprinkle(S.data(dt, (5, 6), "real"), [np.nan] if dt in FLOATS else [])
        lo, hi = S.data(dt, (6,)), S.data(dt, (5, 1))
        p = S.program("clip_" + dt, ("x", x), ("lo", lo), ("hi", hi))
        p.case("clip_tensors", "clip(x, lo, hi)", np.clip(x, lo, hi))
        p.case("clip_literals", "clip(x, 0, 10)", np.clip(x, 0, 10))
        if dt in FLOATS:
            p.case("clip_float_literals", "clip(x, -0.5, 0.5)", np.clip(x, -0.5, 0.5))
            p.case("clip_reversed", "clip(x, 1, -1)", np.minimum(np.maximum(x, 1), -1))
    # cast: every pair, with values that are defined for the target
    for src in ALL:
        for dst in ALL:
            if src in FLOATS and dst in INTS:
                info = np.iinfo(npdt(dst))
                lo, hi = max(-100, int(info.min)), min(100, int(info.max))
                x = S.rng.uniform(lo, hi, (3, 7)).astype(npdt(src))
                x = S.sprinkle(x, [0.0, -0.0, float(hi) - 0.5])
            elif src in FLOATS:
                x = S.sprinkle(S.data(src, (3, 7), "wide"), [np.nan, np.inf, -np.inf, 0.0, -0.0])
            elif src in INTS:
                x = S.data(src, (3, 7), "full")
            else:
                x = S.data(src, (3, 7))
            p = S.program("cast_%s_to_%s" % (src, dst), ("x", x))
            p.case("cast", 'cast(x, dtype="%s")' % dst, x.astype(npdt(dst)))
            if src in FLOATS and dst in FLOATS:
                xv = x[:, ::-1]
                p.case("cast_view", 'cast(x[:, ::-1], dtype="%s")' % dst, xv.astype(npdt(dst)))
    x = np.array([1e300, -1e300, 3.4e38, 3.5e38, 1e-50, np.nan], np.float64)
    p = S.program("cast_f64_f32_range", ("x", x))
    p.case("cast", 'cast(x, dtype="f32")', x.astype(np.float32))


def gen_reduce(S):
    shapes = [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3), (2, 3, 4, 5)]
    axes_for = {0: [None], 1: [None, 0, -1, [0], []],
                2: [None, 0, 1, -1, [0, 1], [1, 0], []],
                3: [None, 0, 2, -2, [0, 2], [-1, -3], [0, 1, 2]],
                4: [None, 1, -1, [0, 2], [1, 2, 3], [-4, -1]]}
    red = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min,
           "any": np.any, "all": np.all}
    for dt in ("f32", "f64", "i32", "i8", "u8", "bool", "i64"):
        for shape in shapes:
            kind = "near1" if dt in FLOATS else "real"
            x = S.data(dt, shape, kind)
            if dt in FLOATS and x.size > 10:
                x = S.sprinkle(x, [np.nan])
            unknown = (0,) if len(shape) >= 2 else ()
            p = S.program("reduce_%s_%s" % (dt, "x".join(map(str, shape)) or "0d"),
                          ("x", x, tgtype(x, unknown)))
            for ax in axes_for[len(shape)]:
                npax = tuple(ax) if isinstance(ax, list) else ax
                for keep in (False, True):
                    for op, fn in red.items():
                        if op in ("max", "min"):
                            axes = range(x.ndim) if npax is None else \
                                (npax if isinstance(npax, tuple) else (npax,))
                            if any(x.shape[a] == 0 for a in axes):
                                continue  # no identity: an error in NumPy and tgraph
                        exp = fn(x, axis=npax, keepdims=keep)
                        exp = np.asarray(exp)
                        if exp.dtype == np.uint64:
                            exp = exp.astype(np.int64)  # tgraph has no u64
                        scale, rtol = None, None
                        if dt in FLOATS and op in ("sum", "mean", "prod"):
                            n = max(1, x.size // max(1, exp.size))
                            if op == "sum":
                                scale = np.sum(np.abs(f64(x)), axis=npax, keepdims=keep)
                            elif op == "mean":
                                scale = np.mean(np.abs(f64(x)), axis=npax, keepdims=keep)
                            else:
                                rtol = RTOL[dt] * max(1.0, math.sqrt(n))
                        name = "%s_axis%s%s" % (op, attr_axis(ax), "_keep" if keep else "")
                        p.case(name, "%s(x, axis=%s, keepdims=%s)"
                               % (op, attr_axis(ax), "true" if keep else "false"),
                               exp, rtol=rtol, scale=scale)
            # argmax/argmin: one axis or none
            arg_axes = [None] + list(range(-x.ndim, x.ndim))
            for ax in arg_axes:
                axes = range(x.ndim) if ax is None else (ax,)
                if any(x.shape[a] == 0 for a in axes) or (ax is None and x.size == 0):
                    continue
                for keep in (False, True):
                    for op, fn in (("argmax", np.argmax), ("argmin", np.argmin)):
                        if ax is None and keep and x.ndim == 0:
                            continue
                        exp = fn(x, axis=ax, keepdims=keep)
                        p.case("%s_axis%s%s" % (op, attr_axis(ax), "_keep" if keep else ""),
                               "%s(x, axis=%s, keepdims=%s)"
                               % (op, attr_axis(ax), "true" if keep else "false"),
                               np.asarray(exp, np.int64))
            if dt in FLOATS:
                p.case("sum_default", "sum(x)", np.sum(x),
                       scale=np.sum(np.abs(f64(x))))
    # large reductions: 1.2e5 elements
    for dt in FLOATS:
        x = S.data(dt, (300, 400), "real")
        p = S.program("reduce_big_" + dt, ("x", x, tgtype(x, (0,))))
        ax_sum = np.abs(f64(x))
        p.case("sum_all", "sum(x)", np.sum(x), scale=np.sum(ax_sum))
        p.case("sum_0", "sum(x, axis=0)", np.sum(x, axis=0), scale=np.sum(ax_sum, axis=0))
        p.case("sum_1", "sum(x, axis=1)", np.sum(x, axis=1), scale=np.sum(ax_sum, axis=1))
        p.case("mean_all", "mean(x)", np.mean(x), scale=np.mean(ax_sum))
        p.case("max_1", "max(x, axis=1)", np.max(x, axis=1))
        p.case("argmin_0", "argmin(x, axis=0)", np.argmin(x, axis=0).astype(np.int64))
        p.case("sum_rev", "sum(x[::-1, ::-2], axis=0)", np.sum(x[::-1, ::-2], axis=0),
               scale=np.sum(ax_sum[::-1, ::-2], axis=0))
    # NaN and ties in arg reductions, and integer wrap in sums
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, -1.0, -1.0], [np.inf, 0, -np.inf, 5]],
                 np.float32)
    p = S.program("reduce_nan_ties", ("x", x))
    for op, fn in (("argmax", np.argmax), ("argmin", np.argmin)):
        for ax in (None, 0, 1):
            p.case("%s_%s" % (op, ax), "%s(x, axis=%s)" % (op, attr_axis(ax)),
                   np.asarray(fn(x, axis=ax), np.int64))
    for op, fn in (("max", np.max), ("min", np.min)):
        p.case(op, "%s(x, axis=1)" % op, fn(x, axis=1))
    xi = S.data("i64", (4, 6), "full")
    p = S.program("reduce_int_wrap", ("x", xi))
    p.case("sum", "sum(x, axis=1)", np.sum(xi, axis=1))
    p.case("prod", "prod(x, axis=0)", np.prod(xi, axis=0))
    # mean of an empty axis is NaN in NumPy too
    xe = np.zeros((0, 3), np.float32)
    p = S.program("reduce_empty_mean", ("x", xe, "f32[?,3]"))
    p.case("mean0", "mean(x, axis=0)", np.mean(xe, axis=0))
    p.case("sum0", "sum(x, axis=0)", np.sum(xe, axis=0))
    p.case("prod0", "prod(x, axis=0)", np.prod(xe, axis=0))
    p.case("any0", "any(x, axis=0)", np.any(xe, axis=0))
    p.case("all0", "all(x, axis=0)", np.all(xe, axis=0))


def gen_shape(S):
    for dt in ("f32", "i16", "bool", "f64"):
        x = S.data(dt, (2, 3, 4))
        p = S.program("reshape_" + dt, ("x", x, tgtype(x, (0,))))
        for shp in ([24], [4, 6], [-1], [2, -1], [-1, 4], [2, 3, 2, 2], [1, 24, 1], [4, 3, 2]):
            p.case("reshape_" + "_".join(map(str, shp)).replace("-", "m"),
                   "reshape(x, shape=[%s])" % ",".join(map(str, shp)), x.reshape(shp))
        p.case("reshape_view", "reshape(x[:, ::-1, 1:3], shape=[-1])",
               x[:, ::-1, 1:3].reshape(-1))
        p.case("reshape_transposed", "reshape(transpose(x), shape=[4,6])",
               x.transpose().reshape(4, 6))
        for axes in (None, [0, 1, 2], [2, 0, 1], [1, 0, 2], [-1, 0, 1]):
            p.case("transpose_%s" % attr_axis(axes), "transpose(x, axes=%s)" % attr_axis(axes),
                   np.transpose(x, axes))
        for ax in (0, 1, 3, -1, -4, [0, 2], [0, -1]):
            npax = tuple(ax) if isinstance(ax, list) else ax
            p.case("expand_dims_%s" % attr_axis(ax), "expand_dims(x, axis=%s)" % attr_axis(ax),
                   np.expand_dims(x, npax))
        p.case("transpose_default", "transpose(x)", np.transpose(x))
    s = S.data("f32", ())
    p = S.program("reshape_scalar", ("s", s))
    p.case("to1", "reshape(s, shape=[1])", s.reshape(1))
    p.case("to111", "reshape(s, shape=[1,1,1])", s.reshape(1, 1, 1))
    p.case("to_m1", "reshape(s, shape=[-1])", s.reshape(-1))
    p.case("expand", "expand_dims(s, axis=0)", np.expand_dims(s, 0))
    p.case("transpose", "transpose(s)", np.transpose(s))
    one = S.data("f32", (1,))
    p = S.program("reshape_to_scalar", ("x", one))
    p.case("to0d", "reshape(x, shape=[])", one.reshape(()))
    p.case("squeeze", "squeeze(x)", np.squeeze(one))
    z = np.zeros((0, 4), np.float64)
    p = S.program("reshape_empty", ("x", z, "f64[?,4]"))
    p.case("to_2_0", "reshape(x, shape=[2,0,2])", z.reshape(2, 0, 2))
    p.case("transpose", "transpose(x)", z.T)
    p.case("expand", "expand_dims(x, axis=1)", np.expand_dims(z, 1))
    x = S.data("f32", (1, 3, 1, 2))
    p = S.program("squeeze", ("x", x))
    p.case("all", "squeeze(x)", np.squeeze(x))
    p.case("axis0", "squeeze(x, axis=0)", np.squeeze(x, 0))
    p.case("axis_m2", "squeeze(x, axis=-2)", np.squeeze(x, -2))
    p.case("axes", "squeeze(x, axis=[0,2])", np.squeeze(x, (0, 2)))
    for dt in ("f32", "i64", "bool"):
        x = S.data(dt, (3, 1))
        v = S.data(dt, (4,))
        s = S.data(dt, ())
        p = S.program("broadcast_to_" + dt, ("x", x), ("v", v), ("s", s))
        p.case("col", "broadcast_to(x, shape=[3,5])", np.broadcast_to(x, (3, 5)))
        p.case("col_batch", "broadcast_to(x, shape=[2,3,4])", np.broadcast_to(x, (2, 3, 4)))
        p.case("row", "broadcast_to(v, shape=[3,4])", np.broadcast_to(v, (3, 4)))
        p.case("scalar", "broadcast_to(s, shape=[2,2])", np.broadcast_to(s, (2, 2)))
        p.case("scalar_empty", "broadcast_to(s, shape=[0,3])", np.broadcast_to(s, (0, 3)))
        p.case("same", "broadcast_to(v, shape=[4])", np.broadcast_to(v, (4,)))
        p.case("then_add", "add(broadcast_to(x, shape=[3,4]), v)",
               np.add(np.broadcast_to(x, (3, 4)), v))
    # slicing (basic indexing, views with negative steps)
    slices = ["1:", "::-1", "1:4, ::-2, 3", "-1", ":, 2", "::2, 1::3, -2:", "4:1:-1",
              "10:", "-10:2", ":, :, ::-1", "0, 0, 0", "::-1, ::-1, ::-1", "1:2, 2:3, 3:4",
              "-1:-6:-2", ":, -2", "2:-1, ::3", "0:0", ":, 5:1", "::-3, :, 1:7:2",
              "-100:100, 1", "4, ::-1, -7"]
    for dt in ("f32", "i32", "bool", "u8", "f64"):
        x = S.data(dt, (5, 6, 7))
        p = S.program("slice_" + dt, ("x", x))
        for k, sl in enumerate(slices):
            exp = eval("x[%s]" % sl, {"x": x})
            p.case("s%d" % k, "x[%s]" % sl, np.array(exp))
        p.case("chained", "x[::-1][1:, ::2][0]", x[::-1][1:, ::2][0])
        p.case("sliced_param_unknown", "x[1:][::-1]", x[1:][::-1])
    x = S.data("f32", (6, 5))
    p = S.program("slice_unknown_extents", ("x", x, "f32[?,?]"))
    for k, sl in enumerate(["1:", "::-1", ":, -2", "-3:, 1::2", "0", "::-2, ::-1", "10:"]):
        p.case("s%d" % k, "x[%s]" % sl, np.array(eval("x[%s]" % sl, {"x": x})))
    v = S.data("f64", (11,))
    p = S.program("slice_views_feeding_ops", ("v", v), ("m", S.data("f64", (4, 5))))
    m = p.params[1].value
    p.case("add_rev", "add(v, v[::-1])", v + v[::-1])
    p.case("exp_rev", "exp(v[::-2])", np.exp(v[::-2]))
    p.case("sum_rev_cols", "sum(m[:, ::-1], axis=1)", np.sum(m[:, ::-1], axis=1),
           scale=np.sum(np.abs(m), axis=1))
    p.case("transpose_rev", "transpose(m[::-1, 1:])", np.transpose(m[::-1, 1:]))
    p.case("dot_rev", "dot(m[::-1], v[1:6][::-1])", np.dot(m[::-1], v[1:6][::-1]),
           scale=np.dot(np.abs(m[::-1]), np.abs(v[1:6][::-1])))
    p.case("matmul_rev", "matmul(m[:, ::-1], transpose(m[::-1]))",
           np.matmul(m[:, ::-1], m[::-1].T), scale=np.abs(m[:, ::-1]) @ np.abs(m[::-1].T))
    p.case("expand_rev", "expand_dims(v[::-3], axis=0)", np.expand_dims(v[::-3], 0))
    p.case("bcast_rev", "broadcast_to(v[::-1], shape=[2,11])", np.broadcast_to(v[::-1], (2, 11)))


def gen_linalg(S):
    # outer cases do not compare signed zeros: np.outer multiplies (0 * -1 = -0.0) where
    # tgraph's outer gives +0.0 (reported; dot and matmul give +0.0 in both)
    combos = [((), ()), ((), (3, 4)), ((2, 3), ()), ((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)),
              ((3, 5), (5, 4)), ((2, 3, 5), (5, 4)), ((2, 3, 5), (5,)), ((5,), (2, 5, 4)),
              ((2, 3, 5), (4, 5, 2)), ((0, 5), (5, 4)), ((3, 0), (0, 4)), ((0,), (0,)),
              ((1, 5), (5, 1))]
    for dt in ("f32", "f64", "i32", "i8", "bool"):
        for k, (sa, sb) in enumerate(combos):
            a = S.data(dt, sa, "small" if dt in INTS else "real")
            b = S.data(dt, sb, "small" if dt in INTS else "real")
            p = S.program("dot_%s_%d" % (dt, k), ("a", a), ("b", b))
            scale = np.dot(np.abs(f64(a)), np.abs(f64(b))) if dt in FLOATS else None
            p.case("dot", "dot(a, b)", np.dot(a, b), scale=scale)
    mm = [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4)), ((2, 3, 5), (5, 4)),
          ((2, 3, 5), (2, 5, 4)), ((2, 1, 3, 5), (4, 5, 2)), ((5,), (2, 5, 4)),
          ((2, 3, 5), (5,)), ((0, 3, 5), (5, 2)), ((3, 0), (0, 2)), ((1, 3, 5), (6, 5, 1)),
          ((2, 3, 4, 5), (5, 6)), ((3, 1, 4, 5), (1, 5, 6))]  # the last two: one gemm (rows)
    for dt in ("f32", "f64", "i64", "u8", "bool"):
        for k, (sa, sb) in enumerate(mm):
            with _own_stream(S, k >= 12, ("matmul", dt, k)):
                a = S.data(dt, sa, "small" if dt in INTS else "real")
                b = S.data(dt, sb, "small" if dt in INTS else "real")
            ua = (0,) if len(sa) >= 2 and sa[0] != 1 else ()
            p = S.program("matmul_%s_%d" % (dt, k), ("a", a, tgtype(a, ua)), ("b", b))
            scale = np.matmul(np.abs(f64(a)), np.abs(f64(b))) if dt in FLOATS else None
            p.case("matmul", "matmul(a, b)", np.matmul(a, b), scale=scale)
            if k >= 12:  # a batch whose rows do not follow each other: a gemm per block
                at = np.swapaxes(a, 0, 1)
                p.case("matmul_swapped", "matmul(transpose(a, axes=[1, 0, 2, 3]), b)",
                       np.matmul(at, b),
                       scale=np.matmul(np.abs(f64(at)), np.abs(f64(b))) if dt in FLOATS else None)
    for dt in ("f32", "f64", "i16", "bool"):
        for k, (sa, sb) in enumerate([((4,), (3,)), ((2, 2), (3,)), ((), (3,)), ((0,), (3,)),
                                      ((2, 3), (2, 1, 2))]):
            a, b = S.data(dt, sa), S.data(dt, sb)
            p = S.program("outer_%s_%d" % (dt, k), ("a", a), ("b", b))
            p.case("outer", "outer(a, b)", np.outer(a, b), signed_zero=False)
    for da, db in (("f32", "f64"), ("i32", "f32"), ("i8", "i64"), ("bool", "f32")):
        a, b = S.data(da, (3, 4)), S.data(db, (4, 2))
        p = S.program("dot_mixed_%s_%s" % (da, db), ("a", a), ("b", b))
        scale = np.dot(np.abs(f64(a)), np.abs(f64(b)))
        p.case("dot", "dot(a, b)", np.dot(a, b), scale=scale)
        p.case("matmul", "matmul(a, b)", np.matmul(a, b), scale=scale)
        p.case("outer", "outer(a, b)", np.outer(a, b), signed_zero=False)
    for dt in FLOATS:
        a, b = S.data(dt, (200, 300)), S.data(dt, (300, 100))
        v = S.data(dt, (300,))
        p = S.program("dot_big_" + dt, ("a", a, tgtype(a, (0,))), ("b", b), ("v", v))
        p.case("mm", "dot(a, b)", np.dot(a, b), scale=np.abs(f64(a)) @ np.abs(f64(b)))
        p.case("mv", "dot(a, v)", np.dot(a, v), scale=np.abs(f64(a)) @ np.abs(f64(v)))
        p.case("vm", "dot(v, b)", np.dot(v, b), scale=np.abs(f64(v)) @ np.abs(f64(b)))
        p.case("tn", "dot(transpose(b), transpose(a))", np.dot(b.T, a.T),
               scale=np.abs(f64(b.T)) @ np.abs(f64(a.T)))
        p.case("outer", "outer(v, v)", np.outer(v, v), signed_zero=False)


def gen_shift(S):
    for dt in INTS + ["bool"]:
        bits = 8 * npdt(dt).itemsize if dt != "bool" else 8
        a = S.data(dt, (4, 6), "full" if dt != "bool" else "real")
        if dt == "bool":
            c = S.data("bool", (6,))
        else:
            lo = 0 if dt == "u8" else -2
            c = S.rng.integers(lo, bits + 3, size=(6,)).astype(npdt(dt))
        p = S.program("shift_" + dt, ("a", a), ("c", c))
        p.case("left", "left_shift(a, c)", np.left_shift(a, c))
        p.case("right", "right_shift(a, c)", np.right_shift(a, c))
        if dt != "bool":
            p.case("left_lit", "left_shift(a, 3)", np.left_shift(a, 3))
            p.case("right_lit", "right_shift(a, 1)", np.right_shift(a, 1))
            p.case("lit_left", "left_shift(1, c)" if dt != "u8" else "left_shift(1, a)",
                   np.left_shift(1, c) if dt != "u8" else np.left_shift(np.uint8(1), a))
    a, c = S.data("i8", (5,), "full"), S.rng.integers(0, 70, size=(5,)).astype(np.int64)
    p = S.program("shift_mixed", ("a", a), ("c", c))
    p.case("left", "left_shift(a, c)", np.left_shift(a, c))
    p.case("right", "right_shift(a, c)", np.right_shift(a, c))


def slice_attrs(items):
    """items: ints (an index) or (start, stop, step) tuples with None for omitted parts.
    Returns (the .tg attributes of set_subtensor/inc_subtensor, the NumPy index)."""
    st, sp, stp, ix, key = [], [], [], [], []
    for it in items:
        if isinstance(it, int):
            st.append(str(it)), sp.append("none"), stp.append("none"), ix.append("1")
            key.append(it)
        else:
            a, b, c = it
            for lst, v in ((st, a), (sp, b), (stp, c)):
                lst.append("none" if v is None else str(v))
            ix.append("0")
            key.append(slice(a, b, c))
    attrs = "starts=[%s], stops=[%s], steps=[%s], index=[%s]" % (
        ",".join(st), ",".join(sp), ",".join(stp), ",".join(ix))
    return attrs, tuple(key)


def gen_index(S):
    # take: axis none (flattened) or an axis; indices of any int dtype and rank, negative
    for dt in ("f32", "i32", "bool", "f64"):
        x = S.data(dt, (4, 5, 3))
        p_idx = [("i", S.rng.integers(-60, 60, size=(7,)).astype(np.int64), None),
                 ("j", S.rng.integers(-4, 4, size=(2, 3)).astype(np.int32), 0),
                 ("k", S.rng.integers(-5, 5, size=(6,)).astype(np.int8), 1),
                 ("m", np.asarray(-1, np.int16), -1),
                 ("u", S.rng.integers(0, 3, size=(2, 2)).astype(np.uint8), 2),
                 ("e", np.zeros((0,), np.int64), 1)]
        params = [("x", x, tgtype(x, (0,)))] + [(n, v) for n, v, _ in p_idx]
        p = S.program("take_" + dt, *params)
        for n, v, ax in p_idx:
            p.case("take_%s_axis%s" % (n, attr_axis(ax)),
                   "take(x, %s, axis=%s)" % (n, attr_axis(ax)), np.take(x, v, axis=ax))
        p.case("take_rev_view", "take(x[::-1], k, axis=1)", np.take(x[::-1], p_idx[2][1], axis=1))
    # take_along: indices of the same rank, broadcasting against x off the axis
    for dt in ("f32", "i64", "u8"):
        x = S.data(dt, (4, 5, 3))
        i0 = S.rng.integers(-4, 4, size=(2, 5, 3))
        i1 = S.rng.integers(-5, 5, size=(4, 7, 1))
        i2 = S.rng.integers(0, 3, size=(1, 5, 3)).astype(np.int32)
        iflat = S.rng.integers(-60, 60, size=(9,))
        p = S.program("take_along_" + dt, ("x", x), ("i0", i0), ("i1", i1), ("i2", i2),
                      ("f", iflat))
        p.case("axis0", "take_along(x, i0, axis=0)", np.take_along_axis(x, i0, 0))
        p.case("axis1", "take_along(x, i1, axis=1)", np.take_along_axis(x, i1, 1))
        p.case("axis_m1", "take_along(x, i2, axis=-1)", np.take_along_axis(x, i2, -1))
        p.case("flat", "take_along(x, f, axis=none)", np.take_along_axis(x, iflat, None))
    # argmax with take_along: the max again
    x = S.data("f64", (6, 4))
    p = S.program("take_along_argmax", ("x", x))
    p.case("max", "take_along(x, expand_dims(argmax(x, axis=1), axis=1), axis=1)",
           np.take_along_axis(x, np.expand_dims(np.argmax(x, axis=1), 1), 1))
    # set_subtensor / inc_subtensor
    sel = [[(1, None, None)], [(None, None, -1)], [2], [(1, 4, 2), (None, None, -2)],
           [-1, (None, None, 3)], [(None, None, None), 0, (1, None, None)], [(5, 1, -1)],
           [(0, 0, None)]]
    for dt in ("f32", "i32", "u8", "bool"):
        x = S.data(dt, (6, 5, 4))
        p = S.program("subtensor_" + dt, ("x", x, tgtype(x, (0,))))
        for k, items in enumerate(sel):
            attrs, key = slice_attrs(items)
            shape = x[key].shape
            y = S.data(dt, shape)
            yb = S.data(dt, shape[-1:]) if shape else S.data(dt, ())
            p.params += [Param("y%d" % k, y, tgtype(y)), Param("b%d" % k, yb, tgtype(yb))]
            z = x.copy()
            z[key] = y
            p.case("set%d" % k, "set_subtensor(x, y%d, %s)" % (k, attrs), z)
            z = x.copy()
            z[key] = yb
            p.case("set_bcast%d" % k, "set_subtensor(x, b%d, %s)" % (k, attrs), z)
            if dt != "bool":
                z = x.copy()
                z[key] += y
                p.case("inc%d" % k, "inc_subtensor(x, y%d, %s)" % (k, attrs), z)
            z = x.copy()
            z[key] = 1
            p.case("set_lit%d" % k, "set_subtensor(x, 1, %s)" % attrs, z)
    x = S.data("f64", (5, 4))
    yf = S.data("f32", (4,))
    yi = S.data("i8", (5, 1))
    p = S.program("subtensor_casts", ("x", x), ("yf", yf), ("yi", yi))
    attrs, key = slice_attrs([(None, None, -1)])
    z = x.copy()
    z[key] += yf
    p.case("inc_f32_into_f64", "inc_subtensor(x, yf, %s)" % attrs, z)
    z = x.copy()
    z[key] = yi
    p.case("set_i8_into_f64", "set_subtensor(x, yi, %s)" % attrs, z)
    xi = S.data("i32", (5, 4))
    p = S.program("subtensor_set_float_into_int", ("x", xi), ("y", S.data("f64", (4,)) * 10))
    y = p.params[1].value
    z = xi.copy()
    z[1:3] = y  # NumPy's unsafe setitem cast: truncation toward zero
    attrs, _ = slice_attrs([(1, 3, None)])
    p.case("set", "set_subtensor(x, y, %s)" % attrs, z)
    # set_take / inc_take, with repeated and negative indices
    for dt in ("f32", "i64", "i8", "f64"):
        x = S.data(dt, (5, 4, 3))
        for ax in (0, 1, -1, 2):
            n = x.shape[ax]
            idx = S.rng.integers(-n, n, size=(6,))
            key = (slice(None),) * (ax % 3) + (idx,)
            shape = x[key].shape
            y = S.data(dt, shape)
            yb = S.data(dt, (1,) + shape[-1:])
            p = S.program("take_assign_%s_axis%d" % (dt, ax), ("x", x), ("i", idx), ("y", y),
                          ("yb", yb))
            z = x.copy()
            z[key] = y
            # NumPy's fancy assignment with repeated indices writes in order: the last wins
            p.case("set", "set_take(x, i, y, axis=%d)" % ax, z)
            z = x.copy()
            np.add.at(z, key, y)
            p.case("inc", "inc_take(x, i, y, axis=%d)" % ax, z)
            z = x.copy()
            np.add.at(z, key, yb)
            p.case("inc_bcast", "inc_take(x, i, yb, axis=%d)" % ax, z)
            z = x.copy()
            z[key] = 2
            p.case("set_lit", "set_take(x, i, 2, axis=%d)" % ax, z)
    x = S.data("f32", (6,))
    idx = np.array([[0, 1], [1, 5]])
    p = S.program("inc_take_2d_indices", ("x", x), ("i", idx), ("y", S.data("f32", (2, 2))))
    z = x.copy()
    np.add.at(z, idx, p.params[2].value)
    p.case("inc", "inc_take(x, i, y)", z)
    # mask_select: a full mask, a mask over the leading axes, an empty selection
    for dt in ("f32", "i16", "bool"):
        x = S.data(dt, (4, 5))
        m = S.data("bool", (4, 5))
        r = S.data("bool", (4,))
        p = S.program("mask_select_" + dt, ("x", x, tgtype(x, (0,))), ("m", m), ("r", r))
        p.case("full", "mask_select(x, m)", x[m])
        p.case("rows", "mask_select(x, r)", x[r])
        p.case("none", "mask_select(x, ne(m, m))", x[m != m])
        p.case("view", "mask_select(x[::-1], m)", x[::-1][m])
        if dt != "bool":
            p.case("cmp", "mask_select(x, gt(x, 0))", x[x > 0])


def gen_index_sugar(S):
    """The indexing surface of the text format: x[i] (take), x[mask] (mask_select), and
    set_subtensor / inc_subtensor applied to an indexed value."""
    for dt in ("f32", "i32", "bool"):
        x = S.data(dt, (5, 4, 3))
        i0 = S.rng.integers(-5, 5, size=(6,))
        i1 = S.rng.integers(0, 4, size=(2, 2)).astype(np.int32)
        i2 = np.asarray(-1, np.int8)
        m = S.data("bool", (5,))
        mb = S.data("bool", (5, 4, 3))
        y = S.data(dt, (4, 4, 3))
        yi = S.data(dt, (6, 4, 3))
        p = S.program("index_sugar_" + dt, ("x", x, tgtype(x, (0,))), ("i", i0), ("j", i1),
                      ("k", i2), ("m", m), ("mb", mb), ("y", y), ("yi", yi))
        p.case("take0", "x[i]", x[i0])
        p.case("take1", "x[:, j]", x[:, i1])
        p.case("take2", "x[:, :, k]", x[:, :, i2])
        p.case("take_view", "x[::-1][i]", x[::-1][i0])
        p.case("mask_rows", "x[m]", x[m])
        p.case("mask_full", "x[mb]", x[mb])
        z = x.copy()
        z[1:, ::-1] = y
        p.case("set_slice", "set_subtensor(x[1:, ::-1], y)", z)
        z = x.copy()
        z[1:, ::-1] = y[0]
        p.case("set_slice_bcast", "set_subtensor(x[1:, ::-1], y[0])", z)
        z = x.copy()
        z[2] = 0
        p.case("set_index_lit", "set_subtensor(x[2], 0)", z)
        z = x.copy()
        z[i0] = yi  # repeated indices: the last wins
        p.case("set_take", "set_subtensor(x[i], yi)", z)
        if dt != "bool":
            z = x.copy()
            z[1:, ::-1] += y
            p.case("inc_slice", "inc_subtensor(x[1:, ::-1], y)", z)
            z = x.copy()
            np.add.at(z, i0, yi)  # repeated indices accumulate
            p.case("inc_take", "inc_subtensor(x[i], yi)", z)
            z = x.copy()
            np.add.at(z, (slice(None), i1), 1)
            p.case("inc_take_axis1", "inc_subtensor(x[:, j], 1)", z)


def gen_advanced_index(S):
    """Full advanced indexing in .tg: several index arrays broadcast together, integers and
    slices mixed with them (NumPy's placement of the advanced axes, adjacent or separated),
    boolean masks anywhere, `...` and `none`, and the same forms in set_subtensor /
    inc_subtensor (repeated places: the last wins for set, all accumulate for inc)."""
    for dt in ("f32", "i32", "f64"):
        x = S.data(dt, (5, 4, 6))
        r = S.rng.integers(-5, 5, size=(3,))
        c = S.rng.integers(-4, 4, size=(2, 1)).astype(np.int32)
        d = S.rng.integers(0, 6, size=(3,)).astype(np.int16)
        m = S.data("bool", (4, 6))
        mr = S.data("bool", (5,))
        y = S.data(dt, (2, 3, 6))
        yd = S.data(dt, (3,))
        p = S.program("adv_index_" + dt, ("x", x, tgtype(x, (0,))), ("r", r), ("c", c), ("d", d),
                      ("m", m), ("mr", mr), ("y", y), ("yd", yd))
        cases = [
            ("pair", "x[r, c]", x[r, c]),
            ("triple", "x[r, c, d]", x[r, c, d]),
            ("separated", "x[r, :, d]", x[r, :, d]),
            ("int_and_array", "x[1, :, d]", x[1, :, d]),
            ("int_adjacent", "x[:, 2, d]", x[:, 2, d]),
            ("slice_then_pair", "x[1:4, c, d]", x[1:4, c, d]),
            ("pair_then_slice", "x[r, c, ::-2]", x[r, c, ::-2]),
            ("step_between", "x[r, ::2, d]", x[r, ::2, d]),
            ("neg_int", "x[-1, c]", x[-1, c]),
            ("mask_trailing", "x[:, m]", x[:, m]),
            ("mask_and_array", "x[mr, 0]", x[mr, 0]),
            ("mask_rows_slice", "x[mr, 1:3]", x[mr, 1:3]),
            ("view", "x[::-1][r, c]", x[::-1][r, c]),
            ("ellipsis", "x[..., 1]", x[..., 1]),
            ("ellipsis_arrays", "x[r, ..., d]", x[r, ..., d]),
            ("newaxis_array", "x[:, none, :, d]", x[:, None, :, d]),
            ("newaxis_front", "x[none, r, c]", x[None, r, c]),
            ("ellipsis_newaxis", "x[..., none, 0]", x[..., None, 0]),
        ]
        for name, expr, exp in cases:
            p.case(name, expr, exp)
        z = x.copy()
        z[r, c] = y[:, :, 0:1]
        p.case("set_pair", "set_subtensor(x[r, c], y[:, :, 0:1])", z)
        z = x.copy()
        z[r, c] = y
        p.case("set_pair_full", "set_subtensor(x[r, c], y)", z)
        z = x.copy()
        z[r, :, d] = yd[:, None]
        p.case("set_separated", "set_subtensor(x[r, :, d], expand_dims(yd, axis=1))", z)
        z = x.copy()
        z[1:4, c, d] = 0
        p.case("set_slice_pair", "set_subtensor(x[1:4, c, d], 0)", z)
        z = x.copy()
        z[:, m] = 3
        p.case("set_mask", "set_subtensor(x[:, m], 3)", z)
        z = x.copy()
        z[mr] = y[0, 0]
        p.case("set_mask_rows", "set_subtensor(x[mr], y[0, 0])", z)
        z = x.copy()
        np.add.at(z, (r, c), y)
        p.case("inc_pair", "inc_subtensor(x[r, c], y)", z)
        z = x.copy()
        np.add.at(z, (r, slice(None), d), yd[:, None])
        p.case("inc_separated", "inc_subtensor(x[r, :, d], expand_dims(yd, axis=1))", z)
        z = x.copy()
        np.add.at(z, (slice(1, 4), c, d), 1)
        p.case("inc_slice_pair", "inc_subtensor(x[1:4, c, d], 1)", z)
        z = x.copy()
        z[:, m] += 2
        p.case("inc_mask", "inc_subtensor(x[:, m], 2)", z)
        z = x.copy()
        np.add.at(z, (r, Ellipsis, 0), 1)
        p.case("inc_ellipsis", "inc_subtensor(x[r, ..., 0], 1)", z)
        z = x.copy()
        z[None, 1, 2:] = 5
        p.case("set_newaxis", "set_subtensor(x[none, 1, 2:], 5)", z)
    # repeated places: inc accumulates every occurrence, set keeps the last
    x = S.data("f64", (3, 4))
    r = np.array([0, 2, 0, 0, -1])
    c = np.array([1, 3, 1, 1, 0])
    v = S.data("f64", (5,))
    p = S.program("adv_index_repeated", ("x", x), ("r", r), ("c", c), ("v", v))
    z = x.copy()
    np.add.at(z, (r, c), v)
    p.case("inc", "inc_subtensor(x[r, c], v)", z)
    z = x.copy()
    z[r, c] = v
    p.case("set", "set_subtensor(x[r, c], v)", z)
    p.case("index_op", "index(x, r, c, axes=[0, 1])", x[r, c])
    p.case("set_index_op", "set_index(x, v, r, c, axes=[0, 1])", z)


def gen_const(S):
    x32 = S.data("f32", (3,))
    xi8 = S.data("i8", (3,))
    p = S.program("const", ("x", x32), ("n", xi8))
    p.case("scalar_f64", 'const(value=2.5, dtype="f64")', np.asarray(2.5))
    p.case("strong_f64", 'mul(x, const(value=2.5, dtype="f64"))', x32 * np.float64(2.5))
    p.case("strong_i32", 'add(n, const(value=[1, 2, 3], dtype="i32"))',
           xi8 + np.array([1, 2, 3], np.int32))
    p.case("matrix", 'const(value=[1, 2, 3, 4, 5, 6], dtype="f32", shape=[2, 3])',
           np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    p.case("empty", 'const(value=[], dtype="f64", shape=[0, 2])', np.zeros((0, 2)))
    p.case("default_int", "const(value=[1, -2])", np.array([1, -2], np.int64))
    p.case("default_float", "const(value=[1, 2.5])", np.array([1, 2.5]))
    p.case("default_bool", "const(value=[true, false])", np.array([True, False]))
    p.case("nan_inf", 'const(value=[nan, -inf, inf, -0.0], dtype="f32")',
           np.array([np.nan, -np.inf, np.inf, -0.0], np.float32))
    p.case("u8_strong", 'add(const(value=200, dtype="u8"), n)', np.uint8(200) + xi8)
    p.case("i64_extreme", 'const(value=[-9223372036854775808, 9223372036854775807], '
           'dtype="i64")', np.array([-2**63, 2**63 - 1], np.int64))
    p.case("bcast", 'add(x, const(value=[1, 2], dtype="f32", shape=[2, 1]))',
           x32 + np.array([[1], [2]], np.float32))


def gen_join(S):
    for dt in ("f32", "i32", "bool"):
        a, b, c = S.data(dt, (2, 3, 4)), S.data(dt, (2, 5, 4)), S.data(dt, (2, 1, 4))
        p = S.program("concatenate_" + dt, ("a", a, tgtype(a, (0,))), ("b", b), ("c", c))
        p.case("axis1", "concatenate(a, b, c, axis=1)", np.concatenate([a, b, c], axis=1))
        p.case("axis_m2", "concatenate(b, a, axis=-2)", np.concatenate([b, a], axis=-2))
        p.case("axis0", "concatenate(a, a[::-1], axis=0)", np.concatenate([a, a[::-1]], 0))
        p.case("one", "concatenate(a, axis=2)", np.concatenate([a], axis=2))
        p.case("axis2", "concatenate(a, a, a, axis=2)", np.concatenate([a, a, a], axis=2))
        p.case("stack0", "stack(a, a, axis=0)", np.stack([a, a], axis=0))
        p.case("stack_last", "stack(a, a[:, ::-1], a, axis=-1)",
               np.stack([a, a[:, ::-1], a], axis=-1))
        p.case("stack2", "stack(a, a, axis=2)", np.stack([a, a], axis=2))
    a, b = S.data("i8", (3,)), S.data("f32", (2,))
    e = np.zeros((0,), np.float64)
    p = S.program("concatenate_mixed", ("a", a), ("b", b), ("e", e, "f64[?]"))
    p.case("promote", "concatenate(a, b)", np.concatenate([a, b]))
    p.case("empty", "concatenate(e, b, e)", np.concatenate([e, b, e]))
    p.case("stack_promote", "stack(b, cast(a[1:], dtype=\"i64\"))",
           np.stack([b, a[1:].astype(np.int64)]))
    s0 = S.data("f32", ())
    p = S.program("stack_scalars", ("s", s0))
    p.case("stack", "stack(s, s, s)", np.stack([s0, s0, s0]))
    x = S.data("f64", (6, 8))
    for k, (attrs, pieces) in enumerate([("sections=3", np.split(x, 3)),
                                         ("sections=4, axis=1", np.split(x, 4, axis=1)),
                                         ("indices=[1,5], axis=-1", np.split(x, [1, 5], axis=-1)),
                                         ("indices=[2,2,10]", np.split(x, [2, 2, 10])),
                                         ("indices=[]", np.split(x, []))]):
        p = S.program("split_%d" % k, ("x", x))
        names = ", ".join("q%d$" % i for i in range(len(pieces)))
        for i, piece in enumerate(pieces):
            p.case("piece%d" % i, "q%d$" % i, piece,
                   lines=["%s = split(x, %s)" % (names, attrs)])
    for dt in ALL:
        p = S.program("fill_" + dt, ("x", S.data(dt, (2,))))
        p.case("zeros", 'zeros(shape=[2,3], dtype="%s")' % dt, np.zeros((2, 3), npdt(dt)))
        p.case("ones", 'ones(shape=[4], dtype="%s")' % dt, np.ones((4,), npdt(dt)))
        p.case("full_lit", 'full(1, shape=[3,2], dtype="%s")' % dt, np.full((3, 2), 1, npdt(dt)))
        p.case("full_x", "full(x, shape=[3,2])", np.full((3, 2), p.params[0].value))
        p.case("zeros_0d", 'zeros(shape=[], dtype="%s")' % dt, np.zeros((), npdt(dt)))
        p.case("eye", 'eye(n=3, m=4, k=1, dtype="%s")' % dt, np.eye(3, 4, 1, dtype=npdt(dt)))
    p = S.program("fill_defaults", ("x", S.data("f32", (3,))))
    p.case("zeros", "zeros(shape=[2,0])", np.zeros((2, 0)))
    p.case("ones", "ones(shape=[2])", np.ones(2))
    p.case("full_float", "full(2.5, shape=[2,2])", np.full((2, 2), 2.5))
    p.case("full_int", "full(7, shape=[3])", np.full((3,), 7))
    p.case("full_bool", "full(true, shape=[2])", np.full((2,), True))
    p.case("full_trunc", 'full(2.7, shape=[2], dtype="i32")', np.full((2,), 2.7, np.int32))
    p.case("eye", "eye(n=4)", np.eye(4))
    p.case("eye_neg_k", "eye(n=3, k=-1)", np.eye(3, k=-1))
    p.case("eye_far_k", "eye(n=3, m=2, k=5)", np.eye(3, 2, k=5))
    p.case("alloc_lit", "alloc(1.5, 2, 3)", np.full((2, 3), 1.5))
    p.case("alloc_x", "alloc(x, 2, 3)", np.broadcast_to(p.params[0].value, (2, 3)).copy())
    p.case("alloc_size", "alloc(0, size(x))", np.zeros((3,), np.int64))
    p.case("shape", "shape(x)", np.array([3], np.int64))
    p.case("size", "size(x)", np.asarray(3, np.int64))
    x = S.data("f32", (2, 0, 5))
    p = S.program("shape_size", ("x", x, "f32[?,?,5]"))
    p.case("shape", "shape(x)", np.array(x.shape, np.int64))
    p.case("size", "size(x)", np.asarray(x.size, np.int64))
    p.case("shape_view", "shape(x[::-1, :, 1:3])", np.array(x[::-1, :, 1:3].shape, np.int64))
    s0 = S.data("f64", ())
    p = S.program("shape_scalar", ("s", s0))
    p.case("shape", "shape(s)", np.zeros((0,), np.int64))
    p.case("size", "size(s)", np.asarray(1, np.int64))
    ar = [("stop=5", dict(stop=5)), ("start=2, stop=11, step=3", dict(start=2, stop=11, step=3)),
          ("start=10, stop=0, step=-3", dict(start=10, stop=0, step=-3)),
          ("start=0, stop=1, step=0.1", dict(start=0, stop=1, step=0.1)),
          ("start=-1.5, stop=2.5, step=0.5", dict(start=-1.5, stop=2.5, step=0.5)),
          ('stop=5, dtype="f32"', dict(stop=5, dtype=np.float32)),
          ('start=0, stop=1, step=0.1, dtype="f32"', dict(start=0, stop=1, step=0.1,
                                                          dtype=np.float32)),
          ('start=250, stop=260, dtype="u8"', None),
          ('start=5, stop=2', dict(start=5, stop=2)),
          ('start=0, stop=10, step=2.5, dtype="i32"', dict(start=0, stop=10, step=2.5,
                                                           dtype=np.int32)),
          ('stop=4, dtype="bool"', None)]
    p = S.program("arange", ("x", S.data("f32", (1,))))
    for k, (attrs, kw) in enumerate(ar):
        if kw is None:
            continue  # NumPy's answers for these are not well defined
        kw = dict(kw)
        a = np.arange(kw.pop("start", 0), kw.pop("stop"), kw.pop("step", 1), **kw)
        p.case("arange%d" % k, "arange(%s)" % attrs, a)
    for dt in ("f32", "i64", "bool"):
        for shape in [(4, 5), (5, 3), (2, 3, 4), (0, 3)]:
            x = S.data(dt, shape)
            p = S.program("tri_%s_%s" % (dt, "x".join(map(str, shape))),
                          ("x", x, tgtype(x, (0,))))
            for k in (0, 1, -1, 3, -5):
                p.case("tril%d" % k, "tril(x, k=%d)" % k, np.tril(x, k))
                p.case("triu%d" % k, "triu(x, k=%d)" % k, np.triu(x, k))
            p.case("tril_view", "tril(x[::-1])", np.tril(x[::-1]))


def _softmax(x, axis):
    x = f64(x)
    m = np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def _lse_shift(x, axis):
    if x.size == 0:
        return np.zeros(np.sum(x, axis=axis, keepdims=True).shape)
    m = np.max(x, axis=axis, keepdims=True)
    return np.where(np.isfinite(m), m, 0.0)


def _log_softmax(x, axis):
    x = f64(x)
    m = _lse_shift(x, axis)
    return (x - m) - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def _log_softmax_scale(x, axis):
    """log_softmax = (x - m) - L is a difference: its rounding error is relative to
    |x - m| + |L| + 1 (L = log(s) with s >= 1 has an absolute error of about eps), not to
    the (possibly tiny) result."""
    x = f64(x)
    m = _lse_shift(x, axis)
    return np.abs(x - m) + np.abs(np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))) + 1


def _logsumexp(x, axis, keepdims):
    x = f64(x)
    m = _lse_shift(x, axis)
    r = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        r = np.squeeze(r, axis=axis) if axis is not None else r.reshape(())
    return r


def gen_nn(S):
    for dt in ("f32", "f64", "i32", "u8"):
        for shape in [(5,), (3, 4), (2, 3, 4), (0, 4), ()]:
            x = S.data(dt, shape, "wide" if dt in FLOATS else "real")
            rt = npdt(float_for(dt))
            unknown = (0,) if len(shape) >= 2 else ()
            p = S.program("nn_%s_%s" % (dt, "x".join(map(str, shape)) or "0d"),
                          ("x", x, tgtype(x, unknown)))
            axes = [None] + list(range(-len(shape), len(shape)))
            for ax in axes:
                if ax is not None or x.ndim:
                    p.case("softmax_%s" % attr_axis(ax), "softmax(x, axis=%s)" % attr_axis(ax),
                           _softmax(x, ax).astype(rt))
                    p.case("log_softmax_%s" % attr_axis(ax),
                           "log_softmax(x, axis=%s)" % attr_axis(ax),
                           _log_softmax(x, ax).astype(rt), scale=_log_softmax_scale(x, ax))
                for keep in (False, True):
                    p.case("logsumexp_%s%s" % (attr_axis(ax), "_keep" if keep else ""),
                           "logsumexp(x, axis=%s, keepdims=%s)"
                           % (attr_axis(ax), "true" if keep else "false"),
                           _logsumexp(x, ax, keep).astype(rt))
            if x.ndim:
                p.case("softmax_default", "softmax(x)", _softmax(x, -1).astype(rt))
            if x.ndim == 3:
                p.case("logsumexp_list", "logsumexp(x, axis=[0,2])",
                       _logsumexp(x, (0, 2), False).astype(rt))
    x = np.array([[1.0, np.inf, 0.0], [-np.inf, -np.inf, -np.inf], [np.nan, 1.0, 2.0],
                  [1000.0, -1000.0, 999.0], [-np.inf, 0.0, 1.0]], np.float64)
    p = S.program("nn_specials", ("x", x))
    p.case("softmax", "softmax(x, axis=1)", _softmax(x, 1))
    p.case("log_softmax", "log_softmax(x, axis=1)", _log_softmax(x, 1),
           scale=_log_softmax_scale(x, 1))
    p.case("logsumexp", "logsumexp(x, axis=1)", _logsumexp(x, 1, False))
    p.case("logsumexp_rev", "logsumexp(x[::-1, ::-1], axis=0)", _logsumexp(x[::-1, ::-1], 0,
                                                                           False))


def gen_fused(S):
    """Fused nodes written by hand (`tgraph opt` prints them; they must parse and run)."""
    for dt in FLOATS:
        a, b = S.data(dt, (6, 5)), S.data(dt, (5,))
        y = S.data(dt, (6, 5))
        c = S.data("bool", (6, 5))
        p = S.program("fused_" + dt, ("a", a, tgtype(a, (0,))), ("b", b), ("y", y), ("c", c))
        p.case("tanh_add", "fused{tanh(add(%0, %1))}(a, b)", np.tanh(a + b))
        p.case("sum_mul", "fused{sum(mul(%0, %1), axis=[1])}(y, a)", np.sum(y * a, axis=1),
               scale=np.sum(np.abs(f64(y) * f64(a)), axis=1))
        p.case("literals", "fused{mul(add(%0, 1), -0.5)}(a)", (a + 1) * -0.5)
        p.case("shared", "fused{div(exp(%0), add(exp(%0), 1))}(a)", np.exp(a) / (np.exp(a) + 1))
        p.case("where_cmp", "fused{where(%2, %0, neg(%1))}(a, b, c)", np.where(c, a, -b))
        p.case("max_keep", "fused{max(abs(%0), axis=[0], keepdims=true)}(a)",
               np.max(np.abs(a), axis=0, keepdims=True))
        p.case("mean_all", "fused{mean(sqrt(abs(%0)))}(a)", np.mean(np.sqrt(np.abs(a))),
               scale=np.mean(np.sqrt(np.abs(f64(a)))))
        p.case("views", "fused{sub(%0, %1)}(a[::-1], b[::-1])", a[::-1] - b[::-1])
    ai, bi = S.data("i32", (4, 3)), S.data("i8", (3,))
    p = S.program("fused_int", ("a", ai), ("b", bi))
    # fused operands need one dtype: promotion casts are written out
    p.case("mixed", 'fused{mod(add(%0, cast(%1, dtype="i32")), 7)}(a, b)',
           np.remainder(ai + bi, 7))
    p.case("cast", 'fused{cast(mul(%0, 2), dtype="f32")}(a)', (ai * 2).astype(np.float32))


def gen_composed(S):
    for dt in FLOATS:
        rtol = 1e-4 if dt == "f32" else 1e-11
        x = S.data(dt, (16, 8))
        W1 = S.data(dt, (8, 32)) * np.asarray(0.3, npdt(dt))
        b1 = S.data(dt, (32,))
        W2 = S.data(dt, (32, 5)) * np.asarray(0.3, npdt(dt))
        b2 = S.data(dt, (5,))
        y = np.eye(5, dtype=npdt(dt))[S.rng.integers(0, 5, 16)]
        p = S.program("mlp_" + dt, ("x", x, tgtype(x, (0,))), ("W1", W1), ("b1", b1),
                      ("W2", W2), ("b2", b2), ("y", y, tgtype(y, (0,))))
        h = np.tanh(np.dot(x, W1) + b1)
        logits = np.dot(h, W2) + b2
        m = np.max(logits, axis=1, keepdims=True)
        z = logits - m
        lse = np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        logp = z - lse
        loss = -np.mean(np.sum(logp * y, axis=1))
        p.case("hidden", "tanh(add(dot(x, W1), b1))", h, rtol=rtol)
        mlp_lines = ["h$ = tanh(add(dot(x, W1), b1))",
                     "logits$ = add(dot(h$, W2), b2)",
                     "m$ = max(logits$, axis=1, keepdims=true)",
                     "z$ = sub(logits$, m$)",
                     "lse$ = log(sum(exp(z$), axis=1, keepdims=true))",
                     "logp$ = sub(z$, lse$)"]
        # logp is a difference of values as large as the logits: its rounding error is
        # relative to them, not to logp (which is near 0 for the likeliest class)
        p.case("log_softmax", "logp$", logp, rtol=rtol, lines=mlp_lines,
               scale=np.max(np.abs(f64(logits)), axis=1, keepdims=True) + np.abs(f64(lse)))
        p.case("loss", "neg(mean(sum(mul(logp$, y), axis=1)))", loss, rtol=rtol,
               lines=mlp_lines)
        p.case("softmax", "div(exp(sub(logits$, m$)), sum(exp(sub(logits$, m$)), axis=1, "
               "keepdims=true))", np.exp(z) / np.sum(np.exp(z), axis=1, keepdims=True),
               rtol=rtol, lines=mlp_lines[:3])
        p.case("relu_mlp", "maximum(add(matmul(x, W1), b1), 0)",
               np.maximum(np.matmul(x, W1) + b1, 0), rtol=rtol,
               scale=np.abs(f64(x)) @ np.abs(f64(W1)) + np.abs(f64(b1)))
        # a diamond: one value used by several consumers
        p.case("diamond", "mul(add(x, 1), sub(x, 1))", (x + 1) * (x - 1), rtol=rtol,
               scale=np.abs(f64(x)) ** 2 + 1)
        # layer norm by hand
        mu = np.mean(x, axis=1, keepdims=True)
        var = np.mean((x - mu) ** 2, axis=1, keepdims=True)
        ln = (x - mu) / np.sqrt(var + np.asarray(1e-5, npdt(dt)))
        p.case("layer_norm", "div(d$, sqrt(add(mean(mul(d$, d$), axis=1, keepdims=true), "
               "1e-05)))", ln, rtol=rtol * 10,
               lines=["d$ = sub(x, mean(x, axis=1, keepdims=true))"])
        # logsumexp by hand over a '?' axis
        p.case("logsumexp", "add(log(sum(exp(sub(x, mx$)), axis=0)), squeeze(mx$, axis=0))",
               np.log(np.sum(np.exp(x - np.max(x, axis=0, keepdims=True)), axis=0))
               + np.max(x, axis=0), rtol=rtol,
               lines=["mx$ = max(x, axis=0, keepdims=true)"])
    # ints through a mixed graph
    a = S.data("i32", (4, 6))
    b = S.data("i8", (6,))
    p = S.program("int_graph", ("a", a), ("b", b))
    p.case("chain", "mod(add(mul(a, b), 7), 5)", np.remainder(np.multiply(a, b) + 7, 5))
    p.case("cmp_where", "where(gt(a, b), a, neg(b))", np.where(a > b, a, np.negative(b)))
    p.case("mean_cast", 'cast(mean(a, axis=0), dtype="f32")',
           np.mean(a, axis=0).astype(np.float32))
    p.case("sum_bool", "sum(lt(a, 0))", np.sum(a < 0))
    # a long chain of statements
    x = S.data("f64", (10,))
    lines = ["v0$ = x"] + ["v%d$ = add(mul(v%d$, 0.5), 1)" % (i + 1, i) for i in range(200)]
    exp = x.copy()
    for _ in range(200):
        exp = exp * 0.5 + 1
    p = S.program("long_chain", ("x", x))
    p.case("chain200", "v200$", exp, lines=lines)


def gen_npy_layouts(S):
    """Inputs in Fortran order and in the non-native byte order."""
    x = S.data("f64", (3, 4))
    y = S.data("i32", (4, 3))
    p = S.program("npy_layouts",
                  Param("x", x, "f64[3,4]", save=np.asfortranarray),
                  Param("y", y, "i32[4,3]", save=lambda a: a.astype(a.dtype.newbyteorder(">"))))
    p.case("x", "add(x, 0)", x)
    p.case("y", "add(y, 0)", y)
    p.case("xy", "dot(x, y)", np.dot(x, y), scale=np.abs(x) @ np.abs(y))


def _view(name, a, steps):
    """A base array holding `a` under the view name[::s0, ::s1], that index text, and the
    view itself."""
    base_shape = tuple(max(n, 0) * abs(st) if n else 0 for n, st in zip(a.shape, steps))
    base = np.zeros(base_shape, a.dtype)
    sl = tuple(slice(None, None, st) for st in steps)
    base[sl] = a
    idx = "%s[%s]" % (name, ", ".join("::%d" % st for st in steps))
    return base, idx, base[sl]


def gen_blas(S):
    """The lowered BLAS forms (the blas and inplace phases, run in vm mode) on views with
    steps +-1 and +-2 of every operand, 0 and 1 extents, float32 and float64: each case
    is its own program, so no product is shared with another case. Expectations read the
    operands through the views of the parameters (a value written into a parameter reaches
    them: Suite.bind)."""
    mat_steps = [(1, 1), (-1, -1), (2, 2), (-2, -2), (1, -2), (-2, 1)]
    vec_steps = [(1,), (-1,), (2,), (-2,)]
    k = 0

    def prog(dt, arrays, steps):
        nonlocal k
        k += 1
        params, idx, views = [], [], []
        for (nm, a), st in zip(arrays, steps):
            base, ix, view = _view(nm, a, st)
            params.append((nm, base))
            idx.append(ix)
            views.append(view)
        return S.program("blas_%s_%d" % (dt, k), *params), idx, views

    for dt in FLOATS:
        rtol = RTOL[dt] * 10
        M, K, N = 3, 4, 5
        for sx in mat_steps:
            for sy in mat_steps:
                for sz in mat_steps:
                    X, Y, Z = S.data(dt, (M, K)), S.data(dt, (K, N)), S.data(dt, (M, N))
                    p, (x, y, z), (X, Y, Z) = prog(dt, [("X", X), ("Y", Y), ("Z", Z)],
                                                   [sx, sy, sz])
                    sc = np.abs(f64(X)) @ np.abs(f64(Y))
                    p.case("gemm", "sub(mul(0.5, %s), mul(2, dot(%s, %s)))" % (z, x, y),
                           0.5 * Z - 2 * (X @ Y), rtol=rtol, scale=2 * sc + np.abs(f64(Z)))
        # transposed operands and product, a computed accumulator (in place)
        for sx in mat_steps:
            for sy in mat_steps:
                X, Y, Z = S.data(dt, (K, M)), S.data(dt, (N, K)), S.data(dt, (N, M))
                p, (x, y, z), (X, Y, Z) = prog(dt, [("X", X), ("Y", Y), ("Z", Z)],
                                                   [sx, sy, (1, 1)])
                sc = np.abs(f64(Y)) @ np.abs(f64(X))
                p.case("gemm_t", "add(exp(%s), transpose(dot(transpose(%s), transpose(%s))))"
                       % (z, x, y), np.exp(Z) + (X.T @ Y.T).T, rtol=rtol,
                       scale=sc + np.exp(np.abs(f64(Z))))
        # shapes with 0 and 1 extents; symbolic scalars; a row accumulator
        for (m, kk, n) in [(0, 4, 5), (3, 0, 5), (3, 4, 0), (1, 1, 1), (1, 4, 1), (3, 1, 5)]:
            for st in [(1, 1), (-2, -1)]:
                X, Y, Z = S.data(dt, (m, kk)), S.data(dt, (kk, n)), S.data(dt, (m, n))
                r = S.data(dt, (n,))
                a, b = S.data(dt, ()), S.data(dt, ())
                p, (x, y, z), (X, Y, Z) = prog(dt, [("X", X), ("Y", Y), ("Z", Z)],
                                                   [st, st, st])
                p.params += [Param("r", r, tgtype(r)), Param("a", a, tgtype(a)),
                             Param("b", b, tgtype(b))]
                sc = np.abs(f64(X)) @ np.abs(f64(Y))
                p.case("gemm_ab", "add(mul(a, dot(%s, %s)), mul(b, %s))" % (x, y, z),
                       a * (X @ Y) + b * Z, rtol=rtol,
                       scale=np.abs(f64(a)) * sc + np.abs(f64(b) * f64(Z)))
                p.case("gemm_row", "add(r, matmul(%s, %s))" % (x, y), r + X @ Y, rtol=rtol,
                       scale=sc + np.abs(f64(r)))
        for sa in mat_steps:
            for sx in vec_steps:
                for sy in vec_steps:
                    A, x_, y_ = S.data(dt, (6, 4)), S.data(dt, (4,)), S.data(dt, (6,))
                    u = S.data(dt, (6,))
                    p, (A_, xv, yv), (A, x_, y_) = prog(dt, [("A", A), ("x", x_), ("y", y_)],
                                                       [sa, sx, sy])
                    p.params.append(Param("u", u, tgtype(u)))
                    p.case("gemv", "add(dot(%s, %s), mul(3, %s))" % (A_, xv, yv),
                           A @ x_ + 3 * y_, rtol=rtol,
                           scale=np.abs(f64(A)) @ np.abs(f64(x_)) + 3 * np.abs(f64(y_)))
                    p.case("gemv_t", "sub(tanh(%s), dot(%s, %s))" % (xv, yv, A_),
                           np.tanh(x_) - y_ @ A, rtol=rtol,
                           scale=np.abs(f64(y_)) @ np.abs(f64(A)) + 1)
                    P, Q = S.data(dt, (6, 3)), S.data(dt, (3, 4))
                    p.params += [Param("P", P, tgtype(P)), Param("Q", Q, tgtype(Q))]
                    p.case("ger", "add(dot(P, Q), mul(0.5, outer(%s, %s)))" % (yv, xv),
                           P @ Q + 0.5 * np.outer(y_, x_), rtol=rtol,
                           scale=np.abs(f64(P)) @ np.abs(f64(Q)) + np.abs(np.outer(y_, x_)))
                    p.case("ger_fused", "add(%s, mul(0.5, outer(u, %s)))" % (A_, xv),
                           A + 0.5 * np.outer(u, x_), rtol=rtol,
                           scale=np.abs(f64(A)) + np.abs(np.outer(u, x_)))
        for (m, n) in [(0, 3), (3, 0), (1, 1)]:
            A, x_, y_ = S.data(dt, (m, n)), S.data(dt, (m,)), S.data(dt, (n,))
            T = S.data(dt, (2, m, n))
            p = S.program("blas_ger_%s_%d_%d" % (dt, m, n), ("T", T), ("x", x_), ("y", y_))
            p.case("ger_empty", "add(sum(T, axis=0), outer(x, y))", T.sum(axis=0) +
                   np.outer(x_, y_), rtol=rtol, scale=np.abs(f64(T)).sum(axis=0) + 1)
            B, v = S.data(dt, (n, m)), S.data(dt, (m,))
            p2 = S.program("blas_gemv_%s_%d_%d" % (dt, m, n), ("B", B), ("v", v), ("w", y_))
            p2.case("gemv_empty", "add(w, dot(B, v))", y_ + B @ v, rtol=rtol,
                    scale=np.abs(f64(B)) @ np.abs(f64(v)) + np.abs(f64(y_)))


def _spd(S, dt, n):
    """X X^T + n I: symmetric positive definite and well conditioned."""
    x = S.data("f64", (n, n), "unit")
    return np.asarray(x @ x.T + n * np.eye(n), npdt(dt))


def _general(S, dt, n):
    """A random matrix with n added to its diagonal: well conditioned, any sign of det."""
    return np.asarray(S.data("f64", (n, n), "unit") + n * np.eye(n), npdt(dt))


def _maxabs(e):
    """The largest magnitude of e (1 when empty): the scale of a normwise comparison."""
    return float(np.max(np.abs(f64(e)))) if np.size(e) else 1.0


def _sym_lower(a, lower):
    """The symmetric matrix an op reading the `lower` (or upper) triangle of a sees."""
    t = np.tril(a) if lower else np.triu(a)
    return t + t.T - np.diag(np.diag(a))


def gen_lapack(S):
    """The LAPACK ops against numpy.linalg (scipy.linalg's solve_triangular and cho_solve
    written with NumPy): f32 and f64, integer inputs (which become f64), '?' extents, views
    with negative steps, both triangles with junk in the other one, 1-d and 2-d right-hand
    sides, 0 x 0 and singular matrices. Results are compared against the largest
    magnitude of the expected value (LAPACK implementations round differently); the
    eigenvectors, whose signs are LAPACK's choice, as |v| and as v diag(w) v^T."""
    for dt in FLOATS:
        rtol = 2e-4 if dt == "f32" else 1e-10
        rt = npdt(dt)
        for n in (1, 3, 6):
            a = _spd(S, dt, n)
            junk = a + np.triu(S.data(dt, (n, n)), 1)  # the upper triangle is never read
            junk_lo = a + np.tril(S.data(dt, (n, n)), -1)
            g = _general(S, dt, n)
            b, B = S.data(dt, (n,)), S.data(dt, (n, 2))
            base, gv, _ = _view("H", g, (-1, -2))  # gv: the text of a view of H equal to g
            p = S.program("lapack_%s_%d" % (dt, n), ("A", junk, tgtype(junk, (0, 1))),
                          ("U", junk_lo), ("G", g), ("H", base), ("b", b),
                          ("B", B, tgtype(B, (0,))))
            A64, G64 = f64(a), f64(g)
            L = np.linalg.cholesky(A64)
            p.case("cholesky", "cholesky(A)", L.astype(rt), rtol=rtol, scale=_maxabs(L))
            p.case("cholesky_upper", "cholesky(U, lower=false)", L.T.astype(rt), rtol=rtol,
                   scale=_maxabs(L))
            for nm, bb in (("b", f64(b)), ("B", f64(B))):
                x = np.linalg.solve(G64, bb)
                p.case("solve_" + nm, "solve(%s, %s)" % (gv, nm), x.astype(rt), rtol=rtol,
                       scale=_maxabs(x))
                x = np.linalg.solve(A64, bb)
                p.case("cho_solve_" + nm, "cho_solve(cholesky(A), %s)" % nm, x.astype(rt),
                       rtol=rtol, scale=_maxabs(x))
                p.case("cho_solve_upper_" + nm,
                       "cho_solve(add(cholesky(U, lower=false), tril(G, k=-1)), %s, lower=false)"
                       % nm, x.astype(rt), rtol=rtol, scale=_maxabs(x))
                for lower in (True, False):
                    for trans in (0, 1, 2):
                        for unit in (False, True):
                            t = np.tril(G64) if lower else np.triu(G64)
                            if unit:
                                t = t - np.diag(np.diag(t)) + np.eye(n)
                            x = np.linalg.solve(t.T if trans else t, bb)
                            p.case("solve_triangular_%s_%d_%d_%d" % (nm, lower, trans, unit),
                                   "solve_triangular(G, %s, lower=%s, trans=%d, "
                                   "unit_diagonal=%s)" % (nm, lit(lower), trans, lit(unit)),
                                   x.astype(rt), rtol=rtol, scale=_maxabs(x))
            gi = np.linalg.inv(G64)
            p.case("inv", "inv(%s)" % gv, gi.astype(rt), rtol=rtol, scale=_maxabs(gi))
            d = np.linalg.det(G64)
            p.case("det", "det(G)", np.asarray(d, rt), rtol=rtol, scale=abs(d))
            sgn, ld = np.linalg.slogdet(G64)
            p.case("slogdet_sign", "s$", np.asarray(sgn, rt), lines=["s$, l$ = slogdet(G)"])
            p.case("slogdet_log", "l$", np.asarray(ld, rt), rtol=rtol, scale=abs(ld) + 1,
                   lines=["s$, l$ = slogdet(G)"])
            e = _sym_lower(f64(g), True) / n + np.diag(np.arange(n) * 3.0)
            w, v = np.linalg.eigh(e)
            ein = np.asarray(np.tril(e) + np.triu(f64(g), 1), rt)
            p.params.append(Param("E", ein, tgtype(ein)))
            p.case("eigh_w", "w$", w.astype(rt), rtol=rtol, scale=_maxabs(w),
                   lines=["w$, v$ = eigh(E)"])
            p.case("eigh_abs_v", "abs(v$)", np.abs(v).astype(rt), rtol=rtol * 10, scale=1.0,
                   lines=["w$, v$ = eigh(E)"])
            p.case("eigh_rebuild", "dot(mul(v$, w$), transpose(v$))", e.astype(rt), rtol=rtol,
                   scale=_maxabs(e), lines=["w$, v$ = eigh(transpose(E), lower=false)"])
    # integer inputs become f64; f32 with an integer input is f64 too (numpy.linalg)
    ai = np.array([[4, 1, 0], [1, 5, 2], [0, 2, 6]], np.int32)
    bi = np.array([1, -2, 3], np.int8)
    bf = np.array([0.5, 1.5, -1.0], np.float32)
    p = S.program("lapack_int", ("a", ai), ("b", bi), ("c", bf), ("a32", ai.astype(np.float32)))
    A = f64(ai)
    for name, expr, exp in [
            ("cholesky", "cholesky(a)", np.linalg.cholesky(A)),
            ("solve_i8", "solve(a, b)", np.linalg.solve(A, f64(bi))),
            ("solve_f32_i8", "solve(a32, b)", np.linalg.solve(A, f64(bi))),
            ("solve_f32", "solve(a32, c)", np.linalg.solve(ai.astype(np.float32), bf)),
            ("inv", "inv(a)", np.linalg.inv(A)),
            ("det", "det(a)", np.linalg.det(A)),
            ("solve_triangular", "solve_triangular(a, b, lower=true)",
             np.linalg.solve(np.tril(A), f64(bi)))]:
        exp = np.asarray(exp)
        tol = 2e-4 if exp.dtype == np.float32 else 1e-10
        p.case(name, expr, exp, rtol=tol, scale=np.max(np.abs(exp)))
    # 0 x 0 matrices and singular ones (NumPy: det 0, slogdet (0, -inf), no error)
    z = np.zeros((0, 0))
    sing = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    p = S.program("lapack_edge", ("z", z, "f64[?,?]"), ("e", np.zeros((0,)), "f64[?]"),
                  ("s", sing))
    p.case("cholesky_0", "cholesky(z)", z)
    p.case("inv_0", "inv(z)", z)
    p.case("solve_0", "solve(z, e)", np.zeros((0,)))
    p.case("det_0", "det(z)", np.asarray(1.0))
    p.case("slogdet_0", "l$", np.asarray(0.0), lines=["s$, l$ = slogdet(z)"])
    p.case("eigh_0", "v$", np.zeros((0, 0)), lines=["w$, v$ = eigh(z)"])
    p.case("det_singular", "det(s)", np.asarray(np.linalg.det(sing)), scale=1.0)
    sgn, ld = np.linalg.slogdet(sing)
    p.case("slogdet_singular_sign", "s$", np.asarray(sgn), lines=["s$, l$ = slogdet(s)"])
    p.case("slogdet_singular_log", "l$", np.asarray(ld), lines=["s$, l$ = slogdet(s)"])
    with _own_stream(S, True, "lapack_batched"):
        _lapack_batched(S)


@contextlib.contextmanager
def _own_stream(S, own, key):
    """With own, the data drawn inside comes from a stream of its own (seeded by the suite's
    seed and key), so that programs added to a generator leave every other program's data
    as it was."""
    saved = S.rng
    if own:
        S.rng = np.random.default_rng([S.seed, zlib.crc32(repr(key).encode())])
    try:
        yield
    finally:
        S.rng = saved


def _loop(f, *xs):
    """f applied block by block over the broadcast leading dimensions of xs (each x with
    its core rank: (x, core)), the results stacked: the oracle of a Blockwise op."""
    shapes = [x.shape[:x.ndim - c] for x, c in xs]
    batch = np.broadcast_shapes(*shapes)
    outs = None
    for idx in np.ndindex(*batch):
        blocks = []
        for (x, c), sh in zip(xs, shapes):
            lead = len(batch) - len(sh)
            blocks.append(x[tuple(0 if sh[i] == 1 else idx[lead + i] for i in range(len(sh)))])
        r = f(*blocks)
        r = r if isinstance(r, tuple) else (r,)
        if outs is None:
            outs = [np.empty(batch + np.shape(v)) for v in r]
        for o, v in zip(outs, r):
            o[idx] = v
    return outs if len(outs) > 1 else outs[0]


def _lapack_batched(S):
    """The LAPACK ops over leading batch dimensions (Blockwise), against explicit loops of
    numpy.linalg: batches of 2 x 3, batch dimensions broadcast (a static 1, a missing one),
    '?' batch extents, a 1-d right-hand side shared by every block (NumPy 2's rule: b is a
    vector only when it is 1-d), and gradients of a batched objective."""
    for dt in FLOATS:
        rtol = 2e-4 if dt == "f32" else 1e-10
        rt = npdt(dt)
        n = 4
        A = np.stack([np.stack([_spd(S, dt, n) for _ in range(3)]) for _ in range(2)])
        G = np.stack([_general(S, dt, n) for _ in range(3)])
        b1 = S.data(dt, (n,))
        B = S.data(dt, (2, 1, n, 2))
        E = np.stack([_sym_lower(f64(_general(S, dt, n)), True) / n + np.diag(np.arange(n) * 3.0)
                      for _ in range(3)]).astype(rt)
        X = S.data(dt, (3, n, 1))
        # P with noise above the diagonal in its second block: cholesky reads the lower
        # triangle only, so it succeeds, but that block is not its factor's matrix
        Q = A[0].copy()
        Q[1] += (np.triu(S.data(dt, (n, n)), 1) * 0.25).astype(rt)
        p = S.program("lapack_batched_%s" % dt, ("A", A, tgtype(A, (0,))), ("G", G),
                      ("b", b1), ("B", B), ("E", E), ("P", A[0]), ("X", X), ("Q", Q))
        A64, G64, B64, E64, P64, X64 = f64(A), f64(G), f64(B), f64(E), f64(A[0]), f64(X)
        Q64 = f64(Q)

        def case(name, expr, exp, lines=None):
            exp = np.asarray(exp)
            p.case(name, expr, exp.astype(rt), rtol=rtol, scale=_maxabs(exp) + 1e-300,
                   lines=lines or [])
        case("cholesky", "cholesky(A)", _loop(np.linalg.cholesky, (A64, 2)))
        case("cholesky_upper", "cholesky(A, lower=false)",
             _loop(lambda a: np.linalg.cholesky(a).T, (A64, 2)))
        case("solve_vec", "solve(G, b)", _loop(np.linalg.solve, (G64, 2), (f64(b1), 1)))
        case("solve_bcast", "solve(G, B)", _loop(np.linalg.solve, (G64, 2), (B64, 2)))
        case("cho_solve_bcast", "cho_solve(cholesky(A), B)",
             _loop(np.linalg.solve, (A64, 2), (B64, 2)))
        case("solve_triangular", "solve_triangular(G, B, lower=true, trans=1)",
             _loop(lambda a, x: np.linalg.solve(np.tril(a).T, x), (G64, 2), (B64, 2)))
        case("inv", "inv(G)", _loop(np.linalg.inv, (G64, 2)))
        case("det", "det(G)", _loop(np.linalg.det, (G64, 2)))
        case("slogdet_log", "l$", _loop(lambda a: np.linalg.slogdet(a)[1], (G64, 2)),
             ["s$, l$ = slogdet(G)"])
        case("eigh_w", "w$", _loop(lambda a: np.linalg.eigh(a)[0], (E64, 2)),
             ["w$, v$ = eigh(E)"])
        case("eigh_rebuild", "matmul(mul(v$, expand_dims(w$, axis=1)), transpose(v$, axes=[0, 2, 1]))",
             E64, ["w$, v$ = eigh(E)"])
        # log(diag(L)) summed per block: the log-determinant of a batch of Cholesky factors
        # fused programs with core ops (fused.h), run block by block of the batch: elementwise
        # work after a product and a factorization, before one, and two core ops in a row
        case("fused_matmul_bias_tanh", "fused{tanh(add(matmul(%0, %1), %2))}(G, G, b)",
             np.tanh(G64 @ G64 + f64(b1)))
        case("fused_exp_cholesky", "fused{exp(cholesky(%0))}(A)",
             np.exp(_loop(np.linalg.cholesky, (A64, 2))))
        case("fused_cholesky_scaled", "fused{cholesky(mul(%0, 2.0))}(A)",
             _loop(np.linalg.cholesky, (2 * A64, 2)))
        case("fused_inv_cholesky", "fused{inv(cholesky(%0))}(A)",
             _loop(lambda a: np.linalg.inv(np.linalg.cholesky(a)), (A64, 2)))
        # the same, built by the fuse pass from unfused expressions (a static batch of 3):
        # a product with the work after it, a transposed operand read in place, consecutive
        # products, work before a product, a product read twice
        case("fuse_matmul_bias_tanh", "tanh(add(matmul(G, G), b))", np.tanh(G64 @ G64 + f64(b1)))
        case("fuse_matmul_trans_relu", "maximum(matmul(transpose(G, axes=[0, 2, 1]), G), 0.0)",
             np.maximum(np.swapaxes(G64, 1, 2) @ G64, 0))
        case("fuse_matmul_chain", "mul(matmul(matmul(exp(G), G), G), 0.5)",
             0.5 * (np.exp(G64) @ G64 @ G64))
        case("fuse_matmul_both", "add(m$, sigmoid(m$))", G64 @ G64 + 1 / (1 + np.exp(-(G64 @ G64))),
             ["m$ = matmul(G, G)"])
        # 2 sum(log(diag(L))): the log-determinant of each block from its Cholesky factor
        case("logdet_chol", "mul(2.0, sum(log(add(mul(L$, I$), sub(1.0, I$))), axis=[2, 3]))",
             _loop(lambda a: np.linalg.slogdet(a)[1], (A64, 2)),
             ["L$ = cholesky(A)", 'I$ = eye(n=%d, dtype="%s")' % (n, dt)])
        # the LAPACK ops in groups the fuse pass builds (a static batch of 3, P): a batched
        # Gaussian log-density (the factor, the triangular solve, log(diag(L)) and the sums
        # per block in one node), a solve with the work after it, two factorizations in a
        # row, and a factor that is also a result
        def mvn(a, x, mu):
            L = np.linalg.cholesky(a)
            z = np.linalg.solve(L, x - mu)
            return -0.5 * np.sum(z * z) - np.sum(np.log(np.diag(L)))
        case("fuse_mvn_logdensity",
             "sub(mul(-0.5, sum(mul(z$, z$), axis=[1, 2])), "
             "sum(log(add(mul(L$, I$), sub(1.0, I$))), axis=[-2, -1]))",
             _loop(mvn, (P64, 2), (X64, 2), (f64(b1)[:, None], 2)),
             ["L$ = cholesky(P)",
              "z$ = solve_triangular(L$, sub(X, expand_dims(b, axis=1)), lower=true)",
              'I$ = eye(n=%d, dtype="%s")' % (n, dt)])
        case("fuse_solve_tanh", "tanh(mul(solve(P, X), 0.5))",
             np.tanh(0.5 * _loop(np.linalg.solve, (P64, 2), (X64, 2))))
        case("fuse_inv_cholesky", "inv(cholesky(mul(P, 2.0)))",
             _loop(lambda a: np.linalg.inv(np.linalg.cholesky(2 * a)), (P64, 2)))
        case("fuse_cho_solve_twice", "add(cho_solve(L$, X), exp(L$))",
             _loop(np.linalg.solve, (P64, 2), (X64, 2)) + np.exp(_loop(np.linalg.cholesky,
                                                                       (P64, 2))),
             ["L$ = cholesky(P)"])
        # solve beside cholesky of the same matrix (the specialize rule solve_factored): the
        # factor solves the symmetric blocks, LU the one that is not (Q's second), for a
        # lower and an upper factor (read from the upper triangle), a matrix and a vector
        # right-hand side
        Lp = _loop(np.linalg.cholesky, (P64, 2))
        Lq = _loop(np.linalg.cholesky, (Q64, 2))
        case("solve_factored", "add(solve(P, X), sum(L$, axis=[1, 2], keepdims=true))",
             _loop(np.linalg.solve, (P64, 2), (X64, 2)) + Lp.sum(axis=(1, 2), keepdims=True),
             ["L$ = cholesky(P)"])
        case("solve_factored_asym", "add(solve(Q, X), sum(L$, axis=[1, 2], keepdims=true))",
             _loop(np.linalg.solve, (Q64, 2), (X64, 2)) + Lq.sum(axis=(1, 2), keepdims=True),
             ["L$ = cholesky(Q)"])
        case("solve_factored_upper_vec", "add(solve(Q, b), sum(U$, axis=2))",
             _loop(np.linalg.solve, (Q64, 2), (f64(b1), 1)) +
             _loop(lambda q: np.linalg.cholesky(np.triu(q) + np.triu(q, 1).T).T,
                   (Q64, 2)).sum(axis=2),
             ["U$ = cholesky(Q, lower=false)"])
        # reductions of a block's core axes: along one axis, keepdims, each fold
        Xp = _loop(np.linalg.solve, (P64, 2), (X64, 2))
        case("fuse_chol_max_rows", "max(mul(cholesky(P), 2.0), axis=-1)", np.max(2 * Lp, axis=-1))
        case("fuse_chol_mean_keep", "mean(exp(cholesky(P)), axis=[1, 2], keepdims=true)",
             np.mean(np.exp(Lp), axis=(1, 2), keepdims=True))
        case("fuse_solve_min", "min(solve(P, X), axis=1)", np.min(Xp, axis=1))
        case("fuse_solve_prod", "prod(add(solve(P, X), 1.0), axis=[-2, -1])",
             np.prod(Xp + 1, axis=(-2, -1)))


def _as_tg(a):
    """NumPy's result where tgraph's dtype differs on purpose: u64 (cumsum/cumprod of u8)
    is i64 in tgraph."""
    a = np.asarray(a)
    return a.astype(np.int64) if a.dtype == np.uint64 else a


def _accumulate(fn, x, ax):
    """np.maximum/np.minimum.accumulate, axis none meaning x flattened (as np.cumsum)."""
    return fn.accumulate(x.ravel() if ax is None else x, axis=0 if ax is None else ax)


def gen_cumulative(S):
    # cumsum, cumprod, cummax, cummin: every dtype, axis none / int, empty and 0-d inputs.
    # Floats accumulate in double (rounded once per element): NumPy's float64 accumulation
    # of the same values, cast back, is exact for both widths.
    shapes = [(), (0,), (7,), (3, 4), (2, 3, 4), (2, 0, 3)]
    for dt in ("f32", "f64", "i32", "i8", "u8", "bool"):
        for shape in shapes:
            x = S.data(dt, shape, "near1" if dt in FLOATS else "small")
            if dt in FLOATS and x.size > 6:
                x = S.sprinkle(x, [np.nan, -0.0, 0.0])
            unknown = (0,) if len(shape) >= 2 else ()
            p = S.program("cumulative_%s_%s" % (dt, "x".join(map(str, shape)) or "0d"),
                          ("x", x, tgtype(x, unknown)))
            x64 = x.astype(np.float64) if dt in FLOATS else x
            for ax in [None] + sorted({0, -1} if shape else ()):
                a = attr_axis(ax)
                for op, fn in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
                    exp = _as_tg(fn(x64, axis=ax))
                    p.case("%s_axis%s" % (op, a), "%s(x, axis=%s)" % (op, a),
                           exp.astype(x.dtype) if dt in FLOATS else exp)
                for op, fn in (("cummax", np.maximum), ("cummin", np.minimum)):
                    p.case("%s_axis%s" % (op, a), "%s(x, axis=%s)" % (op, a),
                           _accumulate(fn, x, ax), signed_zero=False)
            if shape:
                for n in (0, 1, 3, 9):
                    for ax in sorted({0, -1}):
                        exp = np.diff(x, n=n, axis=ax)
                        scale = None
                        if dt in FLOATS:  # |terms| of the n-th difference: sum |x| 2^n
                            scale = np.sum(np.abs(f64(x))) * 2.0 ** n + 1.0
                        p.case("diff_n%d_axis%d" % (n, ax), "diff(x, n=%d, axis=%d)" % (n, ax),
                               exp, scale=scale)
    # views: reversed and strided inputs, along an axis and flattened
    x = S.data("f64", (5, 6), "near1")
    p = S.program("cumulative_views", ("x", x))
    v = x[::-1, 1::2]
    p.case("cumsum_rev", "cumsum(x[::-1, 1::2], axis=0)", np.cumsum(v, axis=0))
    p.case("cumprod_flat_view", "cumprod(x[::-1, 1::2])", np.cumprod(v))
    p.case("cummax_t", "cummax(transpose(x), axis=none)", np.maximum.accumulate(x.T.ravel()))
    p.case("diff_rev", "diff(x[:, ::-1], n=2, axis=1)", np.diff(x[:, ::-1], n=2, axis=1),
           scale=np.sum(np.abs(x)) * 4)
    # integer wrap-around, as NumPy's int64
    xi = S.data("i64", (3, 5), "full")
    p = S.program("cumulative_wrap", ("x", xi))
    p.case("cumsum", "cumsum(x, axis=1)", np.cumsum(xi, axis=1))
    p.case("cumprod", "cumprod(x, axis=0)", np.cumprod(xi, axis=0))
    p.case("diff", "diff(x, n=3)", np.diff(xi, n=3))


def _topk(x, k, axis):
    """The k largest along axis, largest first (a NaN counts as the largest), ties by the
    lowest index: values and int64 indices."""
    xm = np.moveaxis(x, axis, -1)
    idx = np.zeros(xm.shape[:-1] + (k,), np.int64)
    for pos in np.ndindex(*xm.shape[:-1]):
        line = xm[pos]
        key = [(0 if (line.dtype.kind == "f" and np.isnan(v)) else 1,
                -float(v) if line.dtype.kind == "f" and not np.isnan(v) else
                (0 if line.dtype.kind == "f" else -int(v)), i) for i, v in enumerate(line)]
        idx[pos] = [i for _, _, i in sorted(key)[:k]]
    vals = np.take_along_axis(xm, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def gen_sort(S):
    # sort and argsort (stable; NaN last; signed zeros in their order), topk
    shapes = [(0,), (9,), (4, 6), (2, 5, 3), (3, 0)]
    for dt in ("f32", "f64", "i32", "i8", "u8", "bool"):
        for shape in shapes:
            if dt in FLOATS:
                x = S.data(dt, shape, "halves")
                x = S.sprinkle(x, [np.nan, -0.0, 0.0, np.nan, -np.inf])
            else:
                x = S.data(dt, shape, "small")
            unknown = (0,) if len(shape) >= 2 else ()
            p = S.program("sort_%s_%s" % (dt, "x".join(map(str, shape))),
                          ("x", x, tgtype(x, unknown)))
            for ax in [None, 0, -1]:
                a = attr_axis(ax)
                p.case("sort_axis%s" % a, "sort(x, axis=%s)" % a, np.sort(x, axis=ax, kind="stable"))
                p.case("argsort_axis%s" % a, "argsort(x, axis=%s)" % a,
                       np.argsort(x, axis=ax, kind="stable").astype(np.int64))
            for ax in sorted({0, -1}):
                for k in sorted({0, 3, x.shape[ax]}):
                    if k > x.shape[ax]:
                        continue
                    v, i = _topk(x, k, ax)
                    line = "v$, i$ = topk(x, k=%d, axis=%d)" % (k, ax)
                    p.case("topk_k%d_axis%d_values" % (k, ax), "v$", v, lines=[line])
                    p.case("topk_k%d_axis%d_indices" % (k, ax), "i$", i, lines=[line])
    x = S.data("f64", (6, 5), "halves")
    p = S.program("sort_views", ("x", x))
    p.case("sort_rev", "sort(x[::-1, ::2], axis=0)", np.sort(x[::-1, ::2], axis=0, kind="stable"))
    p.case("argsort_flat_t", "argsort(transpose(x), axis=none)",
           np.argsort(x.T, axis=None, kind="stable").astype(np.int64))
    # searchsorted: a sorted (repeats, NaN last), v of several ranks, both sides
    for dt in ("f64", "f32", "i32", "u8"):
        a = np.sort(S.data(dt, (12,), "halves" if dt in FLOATS else "small"))
        if dt in FLOATS:
            a[-2:] = np.nan
        v = np.concatenate([a[:4], S.data(dt, (5,), "halves" if dt in FLOATS else "small")])
        if dt in FLOATS:
            v = np.concatenate([v, np.array([np.nan, np.inf, -np.inf], a.dtype)])
        p = S.program("searchsorted_" + dt, ("a", a, tgtype(a, (0,))), ("v", v),
                      ("s", np.asarray(v[1])), ("m", v[:6].reshape(2, 3)))
        for side in ("left", "right"):
            for name in ("v", "s", "m"):
                val = {"v": v, "s": np.asarray(v[1]), "m": v[:6].reshape(2, 3)}[name]
                p.case("%s_%s" % (side, name), 'searchsorted(a, %s, side="%s")' % (name, side),
                       np.asarray(np.searchsorted(a, val, side=side), np.int64))
        if dt == "i32":  # a weak float literal: compared as f64, as NumPy
            p.case("literal_float", "searchsorted(a, 2.5)",
                   np.asarray(np.searchsorted(a, 2.5), np.int64))
    a = np.zeros((0,), np.float64)
    p = S.program("searchsorted_empty", ("a", a), ("v", np.array([1.0, np.nan])))
    p.case("left", "searchsorted(a, v)", np.zeros(2, np.int64))
    # quantile (linear) and median: q scalar and lists, axes, keepdims, NaN slices
    qs = [0.5, [0.25, 0.5, 0.9], [0.0, 0.33, 1.0, 0.6]]
    for dt in ("f64", "f32", "i32", "u8"):
        for shape in [(7,), (4, 6), (2, 3, 5)]:
            x = S.data(dt, shape, "halves" if dt in FLOATS else "small")
            unknown = (0,) if len(shape) >= 2 else ()
            p = S.program("quantile_%s_%s" % (dt, "x".join(map(str, shape))),
                          ("x", x, tgtype(x, unknown)))
            axes = [None, -1] + ([0] if len(shape) > 1 else [])
            if len(shape) == 3:
                axes += [[0, 2]]
            fdt = np.float64 if dt not in FLOATS else x.dtype
            for ax in axes:
                npax = tuple(ax) if isinstance(ax, list) else ax
                for keep in (False, True):
                    kk = "true" if keep else "false"
                    for q in qs:
                        qt = "[" + ", ".join(repr(float(v)) for v in q) + "]" \
                            if isinstance(q, list) else repr(float(q))
                        exp = np.quantile(x, np.asarray(q, np.float64), axis=npax, keepdims=keep)
                        p.case("quantile_q%s_axis%s%s" % (qt, attr_axis(ax), "_keep" * keep),
                               "quantile(x, q=%s, axis=%s, keepdims=%s)" % (qt, attr_axis(ax), kk),
                               np.asarray(exp).astype(fdt), signed_zero=False)
                    p.case("median_axis%s%s" % (attr_axis(ax), "_keep" * keep),
                           "median(x, axis=%s, keepdims=%s)" % (attr_axis(ax), kk),
                           np.asarray(np.median(x, axis=npax, keepdims=keep)).astype(fdt),
                           signed_zero=False)
    x = S.data("f64", (4, 5), "halves")
    x[1, 2] = np.nan
    p = S.program("quantile_nan", ("x", x))
    p.case("quantile", "quantile(x, q=[0.1, 0.8], axis=1)", np.quantile(x, [0.1, 0.8], axis=1))
    p.case("median", "median(x, axis=1)", np.median(x, axis=1))
    p.case("median_all", "median(x)", np.asarray(np.median(x)))
    xb = S.data("bool", (3, 4))
    p = S.program("quantile_bool", ("x", xb))
    p.case("median", "median(x, axis=0)", np.median(xb, axis=0))
    xe = np.zeros((0, 3), np.float64)
    p = S.program("quantile_empty", ("x", xe, "f64[?,3]"))
    p.case("median0", "median(x, axis=0)", np.median(xe, axis=0))
    p.case("quantile1", "quantile(x, q=0.5, axis=1)", np.quantile(np.zeros((0, 3)), 0.5, axis=1))


def gen_conveniences(S):
    """relu, square, log_sigmoid, logit, swapaxes and moveaxis: composites of other ops."""
    for dt in ("f32", "f64", "i32", "u8"):
        x = S.data(dt, (3, 4), "wide" if dt in FLOATS else "real")
        rt = npdt(float_for(dt))
        p = S.program("conveniences_" + dt, ("x", x, tgtype(x, (0,))))
        p.case("relu", "relu(x)", np.where(x <= 0, np.zeros((), x.dtype), x), signed_zero=False)
        p.case("square", "square(x)", np.square(x))
        p.case("log_sigmoid", "log_sigmoid(x)",
               (-np.logaddexp(0.0, -f64(x))).astype(rt), scale=1.0)
    b = S.data("bool", (5,))
    p = S.program("square_bool", ("b", b))
    p.case("square", "square(b)", np.square(b))
    for dt in ("f32", "f64"):
        u = S.rng.uniform(1e-6, 1.0 - 1e-6, (7,)).astype(npdt(dt))
        p = S.program("logit_" + dt, ("u", u))
        p.case("logit", "logit(u)", (np.log(f64(u)) - np.log1p(-f64(u))).astype(npdt(dt)),
               scale=1.0)
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -800.0, 800.0])
    p = S.program("conveniences_specials", ("x", x))
    p.case("relu", "relu(x)", np.where(x <= 0, 0.0, x), signed_zero=False)
    with np.errstate(over="ignore"):
        p.case("log_sigmoid", "log_sigmoid(x)", -np.logaddexp(0.0, -x))
    p.case("logit", "logit(const(value=[0.0, 1.0, 0.5]))",
           np.array([-np.inf, np.inf, 0.0]))
    x = S.data("f32", (2, 3, 4, 5))
    p = S.program("axes_moves", ("x", x, tgtype(x, (1,))))
    p.case("swap01", "swapaxes(x, axis1=0, axis2=1)", np.swapaxes(x, 0, 1))
    p.case("swap_neg", "swapaxes(x, axis1=-1, axis2=1)", np.swapaxes(x, -1, 1))
    p.case("swap_same", "swapaxes(x, axis1=2, axis2=2)", np.swapaxes(x, 2, 2))
    p.case("move", "moveaxis(x, source=0, destination=-1)", np.moveaxis(x, 0, -1))
    p.case("move_list", "moveaxis(x, source=[0, 1], destination=[-1, 0])",
           np.moveaxis(x, [0, 1], [-1, 0]))
    p.case("move_view", "moveaxis(x[::-1], source=3, destination=1)",
           np.moveaxis(x[::-1], 3, 1))


def gen_einsum(S):
    """einsum: products (matrix, batched, vector, outer), sums, transposes, diagonals,
    broadcasting and '...', implicit outputs, several operands, integer dtypes."""
    def case(p, name, subs, ops, names, tol_dt):
        exp = np.einsum(subs, *ops)
        absops = [np.abs(f64(o)) for o in ops]
        scale = np.einsum(subs, *absops)
        p.case(name, 'einsum(%s, subscripts="%s")' % (", ".join(names), subs), exp,
               rtol=RTOL[tol_dt] * 4 if tol_dt in RTOL else None,
               scale=scale if tol_dt in RTOL else None)

    for dt in ("f32", "f64"):
        A = S.data(dt, (2, 3, 4))
        B = S.data(dt, (2, 4, 5))
        M = S.data(dt, (3, 4))
        N = S.data(dt, (4, 5))
        v = S.data(dt, (4,))
        w = S.data(dt, (3,))
        Q = S.data(dt, (4, 4))
        T = S.data(dt, (3, 4, 4))
        R = S.data(dt, (1, 4, 5))
        u = S.data(dt, (5,))
        P = S.data(dt, (5, 2))
        arrays = {"A": A, "B": B, "M": M, "N": N, "v": v, "w": w, "Q": Q, "T": T, "R": R,
                  "u": u, "P": P}
        p = S.program("einsum_" + dt, ("A", A, tgtype(A, (0,))), ("B", B), ("M", M), ("N", N),
                      ("v", v), ("w", w), ("Q", Q), ("T", T), ("R", R), ("u", u), ("P", P))
        for name, subs, names in [
                ("bmm", "bij,bjk->bik", "AB"), ("mm", "ij,jk->ik", "MN"),
                ("mm_t", "ij,jk->ki", "MN"), ("mm_implicit", "ij,jk", "MN"),
                ("mv", "ij,j->i", "Mv"), ("vm", "i,ij->j", "wM"), ("inner", "i,i", "vv"),
                ("outer", "i,j->ij", "wv"), ("hadamard", "ij,ij->ij", "MM"),
                ("sum_all", "ij->", "M"), ("sum_rows", "ij->i", "M"),
                ("transpose", "ij->ji", "M"), ("trace", "ii", "Q"), ("diag", "ii->i", "Q"),
                ("batch_diag", "bii->bi", "T"), ("three", "ij,jk,k->i", "MNu"),
                ("chain", "ij,jk,kl->il", "MNP"), ("bilinear", "i,ij,j->", "wMv"),
                ("ellipsis_bmm", "...ij,...jk->...ik", "AB"),
                ("ellipsis_implicit", "...ij,...jk", "AB"),
                ("bcast_batch", "bij,bjk->bik", "AR"), ("keep_k", "bij,bjk->bijk", "AB"),
                ("contract_two", "bij,bij->b", "AA"), ("upper", "Ij,jK", "MN"),
                ("spaces", "i j , j k -> i k", "MN")]:
            case(p, name, subs, [arrays[c] for c in names], list(names), dt)
    # groups merged by reshapes whose extents are known only at run time
    X = S.data("f64", (3, 4, 2))
    Y = S.data("f64", (4, 2, 5))
    p = S.program("einsum_unknown", ("X", X, tgtype(X, (1,))), ("Y", Y, tgtype(Y, (0, 2))))
    case(p, "merged_k", "ijk,jkl->il", [X, Y], ["X", "Y"], "f64")
    case(p, "merged_m", "ijk,jkl->ikl", [X, Y], ["X", "Y"], "f64")
    case(p, "batch_unknown", "ijk,jkl->jil", [X, Y], ["X", "Y"], "f64")
    for dt in ("i32", "i8"):
        M = S.data(dt, (3, 4), "small")
        N = S.data(dt, (4, 5), "small")
        p = S.program("einsum_" + dt, ("M", M), ("N", N))
        case(p, "mm", "ij,jk->ik", [M, N], ["M", "N"], dt)
        case(p, "rows", "ij->i", [M], ["M"], dt)
        case(p, "mixed", "ij,jk->ik", [M, N.astype(np.int64) if dt == "i8" else N],
             ["M", "cast(N, dtype=\"i64\")" if dt == "i8" else "N"], dt)
def _special_oracles():
    """The special functions' oracles (scipy.special; NumPy's logaddexp; log1mexp, which
    SciPy lacks, as log(-expm1(x)) and log1p(-exp(x)) on each side of -log 2), in double:
    name -> (arity, oracle, input domains). None without SciPy."""
    try:
        import scipy.special as sp
    except ImportError:
        return None

    def log1mexp(x):
        with np.errstate(all="ignore"):
            return np.where(x > -np.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))
    return {
        "gammaln": (1, sp.gammaln, ("wide",)),
        "digamma": (1, sp.psi, ("wide",)),
        "polygamma": (2, sp.polygamma, ("order", "wide")),
        "betaln": (2, sp.betaln, ("pos", "pos")),
        "xlogy": (2, sp.xlogy, ("real", "pos")),
        "xlog1py": (2, sp.xlog1py, ("real", "gt-1")),
        "log1mexp": (1, log1mexp, ("neg",)),
        "logaddexp": (2, np.logaddexp, ("wide", "wide")),
        "erfcx": (1, sp.erfcx, ("wide",)),
        "log_ndtr": (1, sp.log_ndtr, ("wide",)),
        "erfinv": (1, sp.erfinv, ("unit",)),
        "gammainc": (2, sp.gammainc, ("pos", "pos")),
        "gammaincc": (2, sp.gammaincc, ("pos", "pos")),
    }


def gen_special(S):
    # gammaln ... gammaincc against scipy.special: f32 and f64 (computed in double and
    # rounded once, as the oracle's double result cast), integer and bool inputs promoted
    # as the unary math's, broadcasting, special values, and weak literals. The error is
    # relative, absolute below magnitude 1 (scale=1), 1e-11 in f64. Their accuracy over
    # 1e5 points each is special_accuracy.py's business.
    ops = _special_oracles()
    if ops is None:
        print("note: scipy not found (Debian: python3-scipy): special functions skipped")
        return

    def dom(dt, shape, kind):
        if kind == "order":
            return S.rng.integers(0, 4, size=shape).astype(npdt(dt if dt in INTS else "i32"))
        if dt not in FLOATS:
            return S.data(dt, shape, "pos" if kind in ("pos", "gt-1") else "real")
        if kind == "neg":
            return -S.data(dt, shape, "pos")
        return S.data(dt, shape, kind)

    def expect(fn, args, out_dt):
        with np.errstate(all="ignore"):
            return np.asarray(fn(*[f64(a) for a in args])).astype(npdt(out_dt))

    specials = {"wide": SPECIAL_F + [1.0, 2.0, -1.0, -2.5, 40.0, -40.0],
                "real": SPECIAL_F + [1.0], "pos": [np.nan, np.inf, 0.0, 1e-30, 1.0],
                "gt-1": [np.nan, np.inf, -1.0, 0.0], "neg": [np.nan, -np.inf, 0.0, -0.0, 1.0],
                "unit": [np.nan, 1.0, -1.0, 0.0, -0.0, 1.5], "order": []}
    for dt in FLOATS + ["i32", "i8", "bool"]:
        for shape in [(), (7,), (3, 4)]:
            name = "special_%s_%s" % (dt, "x".join(map(str, shape)) or "0d")
            for op, (nin, fn, kinds) in ops.items():
                args = [dom(dt, shape, k) for k in kinds]
                if dt in FLOATS and shape == (3, 4):
                    args = [a if k == "order" else S.sprinkle(a, specials[k])
                            for a, k in zip(args, kinds)]
                if nin == 2 and shape == (3, 4):  # broadcast the first input along rows
                    args[0] = args[0][:1]
                params = [("x%d" % i, a, tgtype(a, (0,) if a.ndim == 2 and a.shape[0] > 1
                                                 else ())) for i, a in enumerate(args)]
                p = S.program("%s_%s" % (name, op), *params)
                out_dt = float_for(NP2TG[np.result_type(*[a.dtype for a in args])])
                call = "%s(%s)" % (op, ", ".join("x%d" % i for i in range(nin)))
                p.case(op, call, expect(fn, args, out_dt), rtol=1e-11 if out_dt == "f64"
                       else None, scale=1.0)
                if nin == 2 and dt in FLOATS and kinds[0] in ("order", "real", "pos"):
                    k = 1 if kinds[0] != "real" else 0
                    p.case(op + "_lit", "%s(%d, x1)" % (op, k),
                           expect(fn, [np.asarray(float(k)), args[1]], dt),
                           rtol=1e-11 if dt == "f64" else None, scale=1.0)
    # the tails the ops exist for
    x = np.array([-40.0, -1e3, -1e5, 10.0, 40.0, np.inf, -np.inf])
    p = S.program("special_tails", ("x", x))
    p.case("log_ndtr", "log_ndtr(x)", expect(ops["log_ndtr"][1], [x], "f64"), rtol=1e-11,
           scale=1.0)
    p.case("erfcx", "erfcx(x)", expect(ops["erfcx"][1], [x], "f64"), rtol=1e-11, scale=1.0)
    p.case("log1mexp", "log1mexp(neg(abs(x)))", expect(ops["log1mexp"][1], [-np.abs(x)], "f64"),
           rtol=1e-11, scale=1.0)


def gen_diag(S):
    """diag (numpy.linalg.diagonal: the diagonal of the last two axes over leading ones):
    every dtype, square and non-square blocks, empty ones, batches, '?' extents, views with
    negative steps and a transpose; and in the LAPACK groups the fuse pass builds (a batched
    Gaussian log-density with sum(log(diag(L))) per block, a diagonal with work after it),
    which the VM runs block by block."""
    with _own_stream(S, True, "diag"):
        shapes = [(3, 3), (3, 5), (5, 2), (1, 4), (0, 3), (2, 3, 4), (2, 1, 4, 4), (2, 0, 3)]
        for dt in ("f32", "f64", "i32", "i8", "u8", "bool"):
            for shape in shapes:
                x = S.data(dt, shape, "small" if dt in INTS else "real")
                unknown = (0,) if len(shape) == 2 else (0, -1)
                p = S.program("diag_%s_%s" % (dt, "x".join(map(str, shape))),
                              ("x", x, tgtype(x, unknown)))
                d = np.diagonal(x, axis1=-2, axis2=-1)
                p.case("diag", "diag(x)", d.copy())
                p.case("diag_flipped", "diag(x[..., ::-1, :])",
                       np.diagonal(x[..., ::-1, :], axis1=-2, axis2=-1).copy())
                perm = list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2]
                p.case("diag_mT", "diag(transpose(x, axes=%s))" % perm,
                       np.diagonal(x, axis1=-1, axis2=-2).copy())
        for dt in FLOATS:
            rtol = 2e-4 if dt == "f32" else 1e-10
            rt = npdt(dt)
            n = 4
            P = np.stack([_spd(S, dt, n) for _ in range(3)])
            X = S.data(dt, (3, n, 1))
            R = S.data(dt, (3, n, n + 2))
            p = S.program("diag_lapack_%s" % dt, ("P", P), ("X", X), ("R", R))
            P64, X64 = f64(P), f64(X)

            def mvn(a, x):
                L = np.linalg.cholesky(a)
                z = np.linalg.solve(L, x)
                return -0.5 * np.sum(z * z) - np.sum(np.log(np.diag(L)))
            exp = _loop(mvn, (P64, 2), (X64, 2))
            p.case("fuse_mvn_diag",
                   "sub(mul(-0.5, sum(mul(z$, z$), axis=[1, 2])), sum(log(diag(L$)), axis=-1))",
                   exp.astype(rt), rtol=rtol, scale=_maxabs(exp),
                   lines=["L$ = cholesky(P)", "z$ = solve_triangular(L$, X, lower=true)"])
            Ld = np.diagonal(_loop(np.linalg.cholesky, (P64, 2)), axis1=1, axis2=2)
            p.case("fuse_logdet_diag", "mul(2.0, sum(log(diag(cholesky(P))), axis=-1))",
                   (2 * np.sum(np.log(Ld), axis=1)).astype(rt), rtol=rtol, scale=1.0)
            p.case("fuse_diag_exp", "exp(diag(cholesky(P)))", np.exp(Ld).astype(rt), rtol=rtol,
                   scale=_maxabs(np.exp(Ld)))
            p.case("fuse_diag_factor_too", "add(d$, sum(L$, axis=-1))",
                   (Ld + np.sum(_loop(np.linalg.cholesky, (P64, 2)), axis=-1)).astype(rt),
                   rtol=rtol, scale=10.0, lines=["L$ = cholesky(P)", "d$ = diag(L$)"])
            p.case("fuse_diag_wide", "max(mul(diag(R), 2.0), axis=-1)",
                   np.max(2 * np.diagonal(f64(R), axis1=1, axis2=2), axis=-1).astype(rt),
                   rtol=rtol, scale=1.0)
            p.case("fused_diag_cholesky", "fused{log(diag(cholesky(%0)))}(P)",
                   np.log(Ld).astype(rt), rtol=rtol, scale=1.0)


GENERATORS = [gen_unary, gen_binary, gen_shift, gen_where_clip_cast, gen_reduce, gen_shape,
              gen_index, gen_index_sugar, gen_const, gen_join, gen_nn, gen_linalg, gen_fused,
              gen_composed, gen_npy_layouts, gen_blas, gen_lapack,
              gen_cumulative, gen_sort, gen_conveniences, gen_einsum,
              gen_advanced_index, gen_special, gen_diag]


def generate(seed, sample, rng_seed=None, replace=None):
    """(the Suite, its programs): the first program of each generator and every
    `sample`-th after it. The Suite keeps every program made, so that no array of one
    is freed and its id taken by another (Suite.bind)."""
    S = Suite(seed, rng_seed, replace)
    progs = []
    for gen in GENERATORS:
        first = len(S.programs)
        gen(S)  # every program made, so that a sample has the full suite's data
        progs += S.programs[first::max(1, sample)]
    return S, progs


# ---- pmap (--pmap N) --------------------------------------------------------------------

PMAP = [0]  # the ranks every program is mapped over (--pmap); 0: programs run as they are
PMAP_MAX_RESULTS = 64  # the most results a pmap body may have (docs/pmap.md)
PMAP_MIN_MAPPED = 0.9  # the run fails when a smaller share of its programs could be mapped


class SuiteError(Exception):
    """The suite cannot be run as asked (an error of the suite, not of tgraph)."""


def stacked_decl(decl, axis, n, unknown):
    """The type `decl` with a new axis of extent n (or '?') inserted at `axis`."""
    m = re.fullmatch(r"(\w+)\[(.*)\]", decl.strip())
    dims = [d.strip() for d in m.group(2).split(",")] if m.group(2).strip() else []
    dims.insert(axis % (len(dims) + 1), "?" if unknown else str(n))
    return "%s[%s]" % (m.group(1), ",".join(dims))


def pick_axis(rng, rank):
    """An axis of a value of rank `rank` + 1 (the mapped one), written negative a third of
    the time."""
    axis = rng.randint(0, rank)
    return axis - (rank + 1) if rng.random() < 1 / 3 else axis


def _value_extents(prog, c):
    """The op by which case c of prog has a result whose extent values decide, or None:
    mask_select (or indexing sugar with a bool parameter, `x[m]`), alloc with an extent
    that is not a literal (`alloc(0, size(x))`: tgraph's typing does not fold size or
    shape, so it cannot know that every rank's extent is the same), einsum of an operand
    with a '?' extent (the reshape that merges its axes takes extents from shape())."""
    bools = {p.name for p in prog.params if p.value.dtype == np.bool_}
    unknown = {p.name for p in prog.params if "?" in p.decl}
    for ln in c.lines + [c.expr]:
        if "mask_select(" in ln:
            return "mask_select"
        if "einsum(" in ln and any(n in unknown for n in re.findall(r"\w+", ln)):
            return "einsum"
        for idx in re.findall(r"[\w\])]\[([^\[\]]*)\]", ln):
            if any(part.strip() in bools for part in idx.split(",")):
                return "mask_select"
        for m in re.finditer(r"\balloc\(", ln):
            extents = _call_args(ln, m.end())[1:]  # after the value: literals or tensors
            if not all(re.fullmatch(r"\d+", a) for a in extents):
                return "alloc"
    return None


def _call_args(text, start):
    """The arguments (stripped) of the call whose list starts at text[start], just after
    its '(', up to the ')' that closes it."""
    args, depth, cur = [], 0, start
    for k in range(start, len(text)):
        ch = text[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif ch in ",)" and not depth:
            args.append(text[cur:k].strip())
            cur = k + 1
            if ch == ")":
                break
    return args


def _structure(prog):
    """What every slice of a program must share: names, types, expressions, tolerances."""
    return ([(p.name, p.decl, p.value.dtype, p.value.shape) for p in prog.params],
            [(c.name, c.expr, tuple(c.lines), c.expect.dtype, c.rtol, c.scale is None,
              c.signed_zero) for c in prog.cases])


def unmappable(slices):
    """(why the program, made once per slice (`slices`), cannot be mapped, or None;
    {index: why} of its cases that cannot be)."""
    prog = slices[0]
    if any("<-" in ln for c in prog.cases for ln in c.lines + [c.expr]):
        return "state (a pmap body has none)", {}
    if any(_structure(s) != _structure(prog) for s in slices[1:]):
        return "structure depending on the data", {}
    cases = {}
    for j, c in enumerate(prog.cases):
        op = _value_extents(prog, c)
        if op:
            cases[j] = "value-dependent output shapes (%s)" % op
        elif any(s.cases[j].expect.shape != c.expect.shape for s in slices[1:]):
            cases[j] = "value-dependent output shapes"
    return None, cases


def same_expectations(a, b):
    """Whether two makings of a program expect the same values with the same scales."""
    for c, d in zip(a.cases, b.cases):
        if not same_values(c.expect, d.expect):
            return False
        if c.scale is not None and not same_values(np.asarray(f64(c.scale)),
                                                   np.asarray(f64(d.scale))):
            return False
    return True


def pmap_programs(seed, n, sample, keep):
    """The suite's programs mapped over n ranks (module docstring, --pmap): for each one
    that `keep` keeps and that can be mapped, a program whose parameters are the stacked
    (or replicated) inputs and whose cases expect the stacked (or once returned) results.
    Returns (those programs, {reason: count} of the programs that could not be mapped,
    {reason: count} of the cases of mapped programs that could not be)."""
    _, base = generate(seed, sample)
    names = [p.name for p in base]
    if len(set(names)) != len(names):
        raise SuiteError("--pmap needs distinct program names")
    runs = [base] + [generate(seed, sample, [seed, k])[1] for k in range(1, n)]
    # Slice 0's inputs written into the arrays of another making of the suite must give
    # slice 0's expectations again: then a replicated input's value reaches every slice's
    # expectations (Suite.bind), and the program may have replicated inputs.
    every = {p.name: {q.name: q.value for q in p.params} for p in base}
    check_suite, check = generate(seed, sample, [seed, 1], every)
    for run in runs[1:] + [check]:
        if [p.name for p in run] != names:
            raise SuiteError("the suite's programs depend on its random data")
    skipped, skipped_cases, plans = {}, {}, {}
    for i, prog in enumerate(base):
        kept = [j for j, c in enumerate(prog.cases) if keep(c)]
        if not kept:
            continue
        why, bad = unmappable([run[i] for run in runs] + [check[i]])
        if why is None and all(j in bad for j in kept):
            why = bad[kept[0]]
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        for j in kept:
            if j in bad:
                skipped_cases[bad[j]] = skipped_cases.get(bad[j], 0) + 1
        replicable = prog.name not in check_suite.unbound and same_expectations(prog, check[i])
        rng = random.Random("pmap/%d/%s" % (seed, prog.name))
        axes = []
        for p in prog.params:
            if replicable and rng.random() < 0.25:
                axes.append(None)
            else:
                axes.append((pick_axis(rng, p.value.ndim), rng.random() < 0.25))
        plans[i] = (rng, axes, [j for j in range(len(prog.cases)) if j not in bad])
    # slice k >= 1 made again with the replicated inputs taking slice 0's values
    slices = [base]
    for k in range(1, n):
        replace = {base[i].name: {p.name: p.value for p, ax in zip(base[i].params, axes)
                                  if ax is None} for i, (_, axes, _) in plans.items()}
        S, again = generate(seed, sample, [seed, k], replace)
        if [p.name for p in again] != names:
            raise SuiteError("the suite's programs depend on its random data")
        for i, (_, axes, _) in list(plans.items()):
            ok = base[i].name not in S.unbound or all(ax is not None for ax in axes)
            for p, q, r, ax in zip(again[i].params, runs[k][i].params, base[i].params, axes):
                ok = ok and same_values(p.value, r.value if ax is None else q.value)
            if not ok:  # an input that is not the one its expectations were computed from
                why = "inputs that cannot be made again per slice"
                skipped[why] = skipped.get(why, 0) + 1
                del plans[i]
        slices.append(again)
    mapped = [map_program([s[i] for s in slices], axes, rng, n, cases)
              for i, (rng, axes, cases) in sorted(plans.items())]
    return mapped, skipped, skipped_cases


def map_program(slices, axes, rng, n, cases):
    """The program of the slices `slices` (one making of it per rank) under pmap: each
    parameter stacked along its axis (axes: (axis, declared '?') or None: replicated), and
    each of its cases numbered in `cases` with its expectation stacked along an out_axis
    drawn from rng, or returned once (none) when it reads no mapped parameter."""
    prog = slices[0]
    mp = Program(prog.name, [])
    mp.pmap_devices = rng.random() < 0.5
    for j, p in enumerate(prog.params):
        if axes[j] is None:
            q = Param(p.name, p.value, p.decl, p.save)
        else:
            axis, unknown = axes[j]
            q = Param(p.name, np.stack([s.params[j].value for s in slices], axis=axis),
                      stacked_decl(p.decl, axis, n, unknown), p.save)
            q.in_axis = axis
        q.body_decl = p.decl
        mp.params.append(q)
    mapped_names = [p.name for p in mp.params if p.in_axis is not None]
    uses = _param_uses(mapped_names) if mapped_names else None
    for j in cases:
        c, each = prog.cases[j], [s.cases[j] for s in slices]
        varies = uses is not None and any(uses.search(ln) for ln in c.lines + [c.expr])
        once = not varies and all(same_values(d.expect, c.expect) for d in each)
        if once and rng.random() < 0.5:
            axis, expect, scale = None, c.expect, c.scale
        else:
            axis = pick_axis(rng, c.expect.ndim)
            expect = np.stack([d.expect for d in each], axis=axis)
            scale = None if c.scale is None else np.stack(
                [np.broadcast_to(f64(d.scale), d.expect.shape) for d in each], axis=axis)
        mc = Case(mp, c.name, c.expr, expect, c.rtol, scale, c.lines)
        mc.signed_zero = c.signed_zero
        mc.out_axis = axis
        mp.cases.append(mc)
    return mp


def pmap_summary(progs, skipped, skipped_cases, n):
    """One line saying what --pmap mapped, and how."""
    params = [p for prog in progs for p in prog.params]
    cases = [c for prog in progs for c in prog.cases]
    mapped = [p for p in params if p.in_axis is not None]
    stacked = [c for c in cases if c.out_axis is not None]
    nonzero = lambda xs, at: sum(1 for x in xs if getattr(x, at) != 0)  # noqa: E731
    why = lambda d: ", ".join("%d %s" % (k, w) for w, k in sorted(d.items()))  # noqa: E731
    return ("pmap over %d ranks on %s: %d programs mapped, %d skipped%s, and %d cases of "
            "them%s; inputs: %d mapped (%d along another axis than 0), %d replicated; "
            "results: %d stacked (%d along another axis than 0), %d returned once"
            % (n, "host devices" if DEV.host else "threads", len(progs),
               sum(skipped.values()), skipped and " (%s)" % why(skipped) or "",
               sum(skipped_cases.values()), skipped_cases and " (%s)" % why(skipped_cases)
               or "", len(mapped), nonzero(mapped, "in_axis"),
               len(params) - len(mapped), len(stacked), nonzero(stacked, "out_axis"),
               len(cases) - len(stacked)))


def pmap_text(items, sig, outs):
    """bundle_text under --pmap: main takes the stacked and replicated inputs (sig) and
    calls pmap on bodies that are the bundle's function, split so that none has more than
    PMAP_MAX_RESULTS results, each taking the parameters of the programs it computes."""
    multi = len(items) > 1
    pre = lambda i: "p%d_" % i if multi else ""  # noqa: E731
    calls, bodies = [], []
    for b, start in enumerate(range(0, len(outs), PMAP_MAX_RESULTS)):
        chunk = outs[start:start + PMAP_MAX_RESULTS]
        progs = sorted({i for i, _, _, _ in chunk})
        params = [(pre(i) + p.name, p) for i in progs for p in items[i][0].params]
        results = [o for _, _, o, _ in chunk]
        attrs = 'in_axes=[%s], out_axes=[%s], axis_name="batch"' % (
            ", ".join(attr_axis(p.in_axis) for _, p in params),
            ", ".join(attr_axis(c.out_axis) for _, c, _, _ in chunk))
        if all(p.in_axis is None for _, p in params) or any(items[i][0].pmap_devices
                                                            for i in progs):
            attrs += ", devices=%d" % PMAP[0]
        calls.append("  %s = pmap(@body%d, %s, %s)" % (", ".join(results), b,
                                                      ", ".join(nm for nm, _ in params), attrs))
        bodies += (["func body%d(%s) {" % (b, ", ".join("%s: %s" % (nm, p.body_decl)
                                                          for nm, p in params))] +
                   ["  " + ln for _, _, _, lines in chunk for ln in lines] +
                   ["  return " + ", ".join(results), "}"])
    return "\n".join(["func main(%s) {" % ", ".join(sig)] + calls +
                     ["  return " + ", ".join(o for _, _, o, _ in outs), "}"] + bodies) + "\n"


# ---- running and comparing ------------------------------------------------------------


class Failure(Exception):
    pass


def run_tgraph(tgraph, items, workdir, text=None):
    """Runs the bundle items = [(program, cases)] (or the program `text` with the same
    parameters and outputs); returns the list of outputs, or raises Failure."""
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "prog.tg")
    with open(src, "w") as f:
        f.write(text if text is not None else bundle_text(items))
    args = [tgraph, "run", src] + mode_args(MODE[0]) + DEV.args()
    for name, p in bundle_params(items):
        path = os.path.join(workdir, "in_%s.npy" % name)
        np.save(path, p.save(p.value) if p.save else p.value)
        args += ["--in", "%s=%s" % (name, path)]
    outs = []
    for k in range(sum(len(cases) for _, cases in items)):
        path = os.path.join(workdir, "out_%d.npy" % k)
        if os.path.exists(path):
            os.remove(path)
        outs.append(path)
        args += ["--out", "%d=%s" % (k, path)]  # by position: `o1 = x` may alias x
    try:
        res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                             env=DEV.env())
    except subprocess.TimeoutExpired:
        raise Failure("tgraph timed out after 120 s")
    err = res.stderr.decode("utf-8", "replace").strip()
    if res.returncode < 0:
        raise Failure("tgraph crashed (signal %d)%s" % (-res.returncode,
                                                        ": " + err if err else ""))
    if res.returncode != 0:
        raise Failure("tgraph exited with %d: %s" % (res.returncode, err))
    got = []
    for path in outs:
        try:
            got.append(np.load(path))
        except Exception as e:  # noqa: BLE001 - any unreadable output is a failure
            raise Failure("cannot read tgraph's output %s: %s" % (path, e))
    return got


def compare(case, got):
    """None when got matches case.expect, else a description of the difference."""
    exp = case.expect
    if got.dtype != exp.dtype:
        return "dtype: tgraph %s, NumPy %s" % (NP2TG.get(got.dtype, got.dtype),
                                               NP2TG.get(exp.dtype, exp.dtype))
    if got.shape != exp.shape:
        return "shape: tgraph %s, NumPy %s" % (got.shape, exp.shape)
    if exp.size == 0:
        return None
    if exp.dtype.kind in "biu":
        bad = got != exp
        if not bad.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if exp.ndim else ()
        diff = np.abs(got.astype(np.float64) - exp.astype(np.float64))
        return ("%d of %d elements differ; max error %g; first at index %s: tgraph %s, "
                "NumPy %s" % (int(bad.sum()), exp.size, float(diff.max()), idx,
                              got[idx], exp[idx]))
    g, e = f64(got), f64(exp)
    gn, en = np.isnan(g), np.isnan(e)
    both = ~gn & ~en
    inf = both & (np.isinf(g) | np.isinf(e))
    fin = both & ~inf
    rtol = case.rtol if case.rtol is not None else RTOL[NP2TG[exp.dtype]]
    scale = np.abs(e)
    if case.scale is not None:
        scale = np.maximum(scale, np.broadcast_to(f64(case.scale), e.shape))
    atol = float(np.finfo(exp.dtype).tiny)
    err = np.where(fin, np.abs(g - e), 0.0)
    bad = (gn != en) | (inf & (g != e)) | (fin & (err > rtol * scale + atol))
    if case.signed_zero:  # IEEE results: -0.0 and 0.0 must match where both are zero
        bad |= (g == 0) & (e == 0) & (np.signbit(g) != np.signbit(e))
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if exp.ndim else ()
    rel = np.where(fin & (scale > 0), err / np.where(scale > 0, scale, 1.0), 0.0)
    return ("%d of %d elements differ (rtol %g); max abs error %g, max rel error %g; first at "
            "index %s: tgraph %r, NumPy %r" % (int(bad.sum()), exp.size, rtol, float(err.max()),
                                               float(rel.max()), idx, got[idx].item(),
                                               exp[idx].item()))


def same_values(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def opt_roundtrip(tgraph, prog, workdir):
    """`tgraph opt` must print a program that parses back and computes the same values
    (within each case's tolerance, since rewrites may change the rounding). On devices
    (--devices, --sim) it prints the placed graph (`opt --placed`), with its transfers, and
    that is placed again when it runs. Returns (check name, None or the failure, the text
    involved)."""
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "orig.tg")
    text = prog.text(prog.cases)
    with open(src, "w") as f:
        f.write(text)
    placed = ["--placed"] + DEV.args() if DEV.host or DEV.sim else []
    res = subprocess.run([tgraph, "opt", src] + placed, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=120, env=DEV.env())
    if res.returncode != 0:
        return ("opt_roundtrip", "tgraph opt exited with %d: %s"
                % (res.returncode, res.stderr.decode("utf-8", "replace").strip()), text)
    printed = res.stdout.decode("utf-8", "replace")
    try:
        again = run_tgraph(tgraph, [(prog, prog.cases)], workdir, text=printed)
    except Failure as e:
        return ("opt_roundtrip", "the printed program does not run: %s" % e, printed)
    for c, g in zip(prog.cases, again):
        why = compare(c, g)  # rewrites may change the rounding: compare with NumPy again
        if why is not None:
            return ("opt_roundtrip", "case %s differs from NumPy after `tgraph opt`: %s"
                    % (c.name, why), printed)
    return ("opt_roundtrip", None, printed)


def cli_checks(tgraph, tmp):
    """The printed form of outputs (no --out) and --out by name. Returns (passed, failures)."""
    wd = os.path.join(tmp, "cli")
    os.makedirs(wd, exist_ok=True)
    x = np.array([1.0, -2.5, 0.5], np.float32)
    np.save(os.path.join(wd, "x.npy"), x)
    src = os.path.join(wd, "p.tg")
    with open(src, "w") as f:
        f.write("func main(x: f32[3]) {\n  a = mul(x, 2)\n  n = cast(x, dtype=\"i64\")\n"
                "  return a, n, sum(x)\n}\n")
    xin = "x=" + os.path.join(wd, "x.npy")
    checks = []

    def run(*extra):
        return subprocess.run([tgraph, "run", src] + mode_args(MODE[0]) + DEV.args()
                              + ["--in", xin] + list(extra), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60, env=DEV.env())

    r = run()
    want = "a = %r\nn = %r\n2 = %r\n" % (x * 2, x.astype(np.int64), np.sum(x)[()])
    want = want.replace("2 = %r" % np.sum(x)[()], "2 = %r" % np.asarray(np.sum(x)))
    got = r.stdout.decode("utf-8", "replace")
    checks.append(("print_outputs", None if r.returncode == 0 and got == want else
                   "stdout %r, expected %r (exit %d: %s)" % (got, want, r.returncode,
                                                            r.stderr.decode().strip())))
    outp = os.path.join(wd, "a.npy")
    r = run("--out", "a=" + outp, "--out", "2=" + os.path.join(wd, "s.npy"))
    got = r.stdout.decode("utf-8", "replace")
    ok = r.returncode == 0 and got == "n = %r\n" % x.astype(np.int64)
    ok = ok and same_values(np.load(outp), x * 2)
    checks.append(("out_by_name", None if ok else "exit %d, stdout %r, stderr %r"
                   % (r.returncode, got, r.stderr.decode().strip())))
    src1 = os.path.join(wd, "one.tg")
    with open(src1, "w") as f:
        f.write("func f(x: f32[3]) {\n  return neg(x)\n}\n")
    r = subprocess.run([tgraph, "run", src1] + mode_args(MODE[0]) + DEV.args() + ["--in", xin],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, env=DEV.env())
    got = r.stdout.decode("utf-8", "replace")
    checks.append(("print_single_output", None if r.returncode == 0 and got == "%r\n" % -x
                   else "stdout %r, expected %r" % (got, "%r\n" % -x)))
    passed = sum(1 for _, why in checks if why is None)
    fails = ["FAIL cli/%s: %s" % (n, why) for n, why in checks if why is not None]
    return passed, fails


def _vectorize_cases(rng):
    """[(name, .tg text, {input: array}, [expected outputs])]: programs that vectorize a
    function of the file, with what the loop over the examples gives in NumPy (explicit
    loops, or np.vectorize with a gufunc signature), stacked along each output's axis."""
    def d(*shape):
        return rng.standard_normal(shape)

    def sigmoid(z):
        return 1 / (1 + np.exp(-z))

    cases = []
    xs, cs, rs = d(3, 5, 4), d(5), d(4, 5)
    def f(x, c, r):
        e = np.exp(x - x.max(axis=0))
        return (np.sum(np.exp(x) * c, axis=1), np.max(x), e / e.sum(axis=0),
                np.cumsum(x, axis=-1), np.argmax(x), np.mean(x + r, axis=-2, keepdims=True),
                np.where(x > c, x, r))
    outs = list(zip(*[f(xs[:, k, :], cs[k], rs[:, k]) for k in range(5)]))
    cases.append(("elemwise_axes", """
func f(x: f64[3,4], c: f64[], r: f64[4]) {
  return sum(mul(exp(x), c), axis=1), max(x), softmax(x, axis=0), cumsum(x, axis=-1), argmax(x), mean(add(x, r), axis=-2, keepdims=true), where(gt(x, c), x, r)
}
func main(xs: f64[3,?,4], cs: f64[5], rs: f64[4,5]) {
  o0, o1, o2, o3, o4, o5, o6 = vectorize(@f, xs, cs, rs, in_axes=[1, 0, -1], out_axes=[0, -1, 2, 0, 0, 1, -3])
  return o0, o1, o2, o3, o4, o5, o6
}
""", {"xs": xs, "cs": cs, "rs": rs},
        [np.stack(o, axis=ax) for o, ax in zip(outs, [0, -1, 2, 0, 0, 1, -3])]))
    a, B, M = d(4, 3), d(3, 2, 4), d(2, 3)
    prod = np.vectorize(lambda a, B, M: (a @ B, M @ a, M @ B, np.dot(a, a), np.outer(a, a)),
                        signature="(3),(3,2),(2,3)->(2),(2),(2,2),(),(3,3)")
    cases.append(("products", """
func f(a: f64[3], B: f64[3,2], M: f64[2,3]) {
  return matmul(a, B), dot(M, a), matmul(M, B), dot(a, a), outer(a, a)
}
func main(a: f64[4,3], B: f64[3,2,4], M: f64[2,3]) {
  o0, o1, o2, o3, o4 = vectorize(@f, a, B, M, in_axes=[0, 2, none])
  return o0, o1, o2, o3, o4
}
""", {"a": a, "B": B, "M": M}, list(prod(a, np.moveaxis(B, 2, 0), M))))
    x, v = d(2, 4, 3), d(4, 3)
    def g(x, v):
        return (x.T, x.reshape(3, -1), x[1:, ::-1], np.take(x, [2, 0], axis=1),
                np.concatenate([x, v[None]], axis=0), np.stack([v, v], axis=-1),
                np.broadcast_to(v, (4, 3)))
    outs = list(zip(*[g(x[:, k], v[k]) for k in range(4)]))
    cases.append(("shape_ops", """
func f(x: f64[2,3], v: f64[3]) {
  i = const(value=[2, 0], dtype="i64")
  return transpose(x), reshape(x, shape=[3, -1]), x[1:, ::-1], take(x, i, axis=1), concatenate(x, expand_dims(v, axis=0), axis=0), stack(v, v, axis=-1), broadcast_to(v, shape=[4, 3])
}
func main(x: f64[2,4,3], v: f64[4,3]) {
  o0, o1, o2, o3, o4, o5, o6 = vectorize(@f, x, v, in_axes=[1, 0])
  return o0, o1, o2, o3, o4, o5, o6
}
""", {"x": x, "v": v}, [np.stack(o) for o in outs]))
    X, y, w = d(16, 5), (rng.random(16) > 0.5) * 1.0, d(5)
    r = sigmoid(X @ w + 0.25) - y
    cases.append(("per_example_grad", """
func loss(x: f64[5], y: f64[], w: f64[5]) {
  z = add(dot(x, w), 0.25)
  l = sub(softplus(z), mul(y, z))
  return grad(l, w), l
}
func main(X: f64[16,5], y: f64[16], w: f64[5]) {
  g, l = vectorize(@loss, X, y, w, in_axes=[0, 0, none])
  return g, l
}
""", {"X": X, "y": y, "w": w},
        [r[:, None] * X, np.logaddexp(0, X @ w + 0.25) - y * (X @ w + 0.25)]))
    A, Bm = d(3, 2), d(4, 2)
    cases.append(("nested_calls", """
func sq(v: f64[2]) {
  return mul(v, v)
}
func dist(x: f64[2], y: f64[2]) {
  return sum(sq(sub(x, y)))
}
func row(x: f64[2], ys: f64[4,2]) {
  return vectorize(@dist, x, ys, in_axes=[none, 0])
}
func main(a: f64[3,2], b: f64[4,2]) {
  return vectorize(@row, a, b, in_axes=[0, none])
}
""", {"a": A, "b": Bm}, [np.array([[np.sum((p - q) ** 2) for q in Bm] for p in A])]))
    P = d(2, 3, 4)
    cases.append(("inside_pmap", """
func f(x: f64[4]) {
  return sum(mul(x, x))
}
func body(x: f64[3,4]) {
  return vectorize(@f, x)
}
func main(x: f64[2,3,4]) {
  return pmap(@body, x, axis_name="d")
}
""", {"x": P}, [np.array([[np.sum(r * r) for r in s] for s in P])]))
    return cases


def vectorize_checks(tgraph, tmp):
    """vectorize (docs/vectorize.md) against the loop over the examples in NumPy. Returns
    (passed, failures)."""
    wd = os.path.join(tmp, "vectorize")
    os.makedirs(wd, exist_ok=True)
    passed, fails = 0, []
    for name, src, ins, want in _vectorize_cases(np.random.default_rng(24)):
        path = os.path.join(wd, name + ".tg")
        with open(path, "w") as f:
            f.write(src)
        args = [tgraph, "run", path] + mode_args(MODE[0]) + DEV.args()
        for k, v in ins.items():
            np.save(os.path.join(wd, "%s_%s.npy" % (name, k)), v)
            args += ["--in", "%s=%s" % (k, os.path.join(wd, "%s_%s.npy" % (name, k)))]
        outs = [os.path.join(wd, "%s_out%d.npy" % (name, i)) for i in range(len(want))]
        for i, o in enumerate(outs):
            args += ["--out", "%d=%s" % (i, o)]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                           env=DEV.env())
        why = None
        if r.returncode != 0:
            why = "tgraph failed: %s" % r.stderr.decode("utf-8", "replace").strip()
        for i, (o, e) in enumerate(zip(outs, want)):
            if why:
                break
            got, e = np.load(o), np.asarray(e)
            if got.shape != e.shape:
                why = "output %d has shape %s, expected %s" % (i, got.shape, e.shape)
            elif not np.allclose(got, e, rtol=1e-10, atol=1e-12):
                why = "output %d differs: %r, expected %r" % (i, got, e)
        if why:
            fails.append("FAIL vectorize/%s: %s\n%s" % (name, why, src))
        else:
            passed += 1
    return passed, fails


ROUNDTRIP = ("mlp_", "fused_", "index_sugar_f32", "const", "slice_f32", "slice_unknown",
             "subtensor_f32", "take_f32", "weak_literal_", "literals_only", "cast_f64_to_i8",
             "reduce_f32_2x3x4", "unary_specials_", "long_chain", "where_", "mask_select_f32",
             "shift_i8", "broadcast_to_f32", "reshape_f32", "take_assign_f32_axis1",
             "npy_layouts", "int_graph", "lapack_f64_3", "lapack_edge", "quantile_f64_2x3x5",
             "sort_f32_4x6", "cumulative_f32_2x3x4")


def describe_inputs(prog):
    out = []
    for p in prog.params:
        v = p.value
        s = "%s: %s %s" % (p.name, p.decl, "x".join(map(str, v.shape)) or "0-d")
        if v.size <= 12:
            s += " = " + np.array2string(v, separator=", ").replace("\n", "")
        out.append(s)
    return "; ".join(out)


def run_bundle(tgraph, bundle, tmp, keep, seed):
    """Runs a bundle of programs in one tgraph process; when that fails, each program
    alone, and when a program fails, each of its cases alone. A failure that none of the
    smaller runs repeats is a failure all the same (of the bundle or the program).
    Returns (passed, failures)."""
    wd = os.path.join(tmp, bundle[0].name)
    results = {}  # case -> None or the failure
    outputs = {}  # program -> its outputs, when it ran as a whole
    unrepeated = []  # failures of a whole that no smaller run repeated
    try:
        got = run_tgraph(tgraph, [(p, p.cases) for p in bundle], wd)
        k = 0
        for prog in bundle:
            outputs[prog] = got[k:k + len(prog.cases)]
            k += len(prog.cases)
    except Failure as bundled:
        for prog in bundle:
            pwd = os.path.join(wd, prog.name)
            try:
                outputs[prog] = run_tgraph(tgraph, [(prog, prog.cases)], pwd)
            except Failure as whole:
                if len(prog.cases) == 1:
                    results[prog.cases[0]] = str(whole)
                    continue
                for k, c in enumerate(prog.cases):
                    try:
                        (g,) = run_tgraph(tgraph, [(prog, [c])], os.path.join(pwd, "c%d" % k))
                        results[c] = compare(c, g)
                    except Failure as alone:
                        results[c] = str(alone)
                if all(results[c] is None for c in prog.cases):
                    unrepeated.append("FAIL %s: failed as a whole, each case passed alone: %s"
                                      % (prog.name, whole))
        if len(bundle) > 1 and len(outputs) == len(bundle):
            unrepeated.append("FAIL %s: failed as one run, each program passed alone: %s"
                              % (" ".join(p.name for p in bundle), bundled))
    passed, failures = 0, list(unrepeated)
    for prog, got in outputs.items():
        for c, g in zip(prog.cases, got):
            results[c] = compare(c, g)
        if prog.roundtrip:
            name, why, text = opt_roundtrip(tgraph, prog, os.path.join(wd, "opt"))
            if why is None:
                passed += 1
            else:
                failures.append("\n".join(["FAIL %s/%s: %s" % (prog.name, name, why)] +
                                          ["    " + ln for ln in text.rstrip().split("\n")]))
    for prog in bundle:
        for c in prog.cases:
            why = results[c]
            if why is None:
                passed += 1
            else:
                failures.append(describe_failure(prog, c, why, keep, seed))
    return passed, failures


def describe_failure(prog, c, why, keep, seed):
    text = prog.text([c])
    msg = ["FAIL %s: %s" % (c.full_name(), why),
           "  seed %d; inputs: %s" % (seed, describe_inputs(prog))]
    if DEV.describe():
        msg.append("  run as: " + DEV.describe())
    msg += ["  program:"] + ["    " + ln for ln in text.rstrip().split("\n")]
    if keep:
        d = os.path.join(keep, c.full_name().replace("/", "__"))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "prog.tg"), "w") as f:
            f.write(text)
        for p in prog.params:
            np.save(os.path.join(d, "%s.npy" % p.name), p.value)
        np.save(os.path.join(d, "expected.npy"), c.expect)
        msg.append("  kept in %s" % d)
    return "\n".join(msg)


def make_bundles(progs, max_cases=150, max_params=48, max_elems=300000):
    """Groups consecutive programs so that one tgraph process runs several of them."""
    bundles, cur, nc, npar, nel = [], [], 0, 0, 0
    for prog in progs:
        c, pp = len(prog.cases), len(prog.params)
        el = sum(p.value.size for p in prog.params) + sum(c.expect.size for c in prog.cases)
        if cur and (nc + c > max_cases or npar + pp > max_params or nel + el > max_elems):
            bundles.append(cur)
            cur, nc, npar, nel = [], 0, 0, 0
        cur.append(prog)
        nc, npar, nel = nc + c, npar + pp, nel + el
    if cur:
        bundles.append(cur)
    return bundles


def main():
    ap = argparse.ArgumentParser(description="tgraph vs NumPy differential tests")
    ap.add_argument("--tgraph", required=True, help="path of the tgraph binary")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--filter", default="", help="only cases whose name contains this text")
    ap.add_argument("--sample", type=int, default=1, metavar="K",
                    help="only the first program of each generator and every K-th after it "
                         "(the same programs, data and annotations as in the full suite)")
    ap.add_argument("--keep", default="", help="folder to keep failing programs and inputs in")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--mode", default="reference,vm",
                    help="the backends to run, comma-separated (tgraph run --mode); each one "
                         "is compared with NumPy (default: reference,vm: the graph as written "
                         "and the rewritten graph)")
    ap.add_argument("--devices", type=int, default=0, metavar="N",
                    help="run on N virtual host devices cpu:0..N-1 (tgraph run --devices N)")
    ap.add_argument("--sim", type=int, default=0, metavar="K",
                    help="with K sim devices sim:0..K-1 (TGRAPH_SIM_DEVICES=K)")
    ap.add_argument("--annotate", action="store_true",
                    help="annotate a random half of each case's lines with a device of the "
                         "run (cpu, cpu:i, sim:i), the choice fixed by --seed and the case")
    ap.add_argument("--pmap", type=int, default=0, metavar="N",
                    help="run every program that can be mapped as the body of a pmap over N "
                         "ranks, on stacked inputs, against NumPy slice by slice (on threads; "
                         "with --devices N or more, on the host devices)")
    ap.add_argument("--launch", default="", metavar="CMD",
                    help="start every tgraph process with this command in front, e.g. "
                         "\"mpirun -np 2 --oversubscribe\" (docs/mpi.md)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--no-bundle", dest="bundle", action="store_false",
                    help="one tgraph process per program (default: several per process)")
    args = ap.parse_args()
    tgraph = os.path.abspath(args.tgraph)
    modes = [m for m in args.mode.split(",") if m]
    if not os.access(tgraph, os.X_OK):
        print("diff_numpy.py: %s is not an executable" % tgraph, file=sys.stderr)
        return 2
    if not 0 <= args.devices <= 256 or not 0 <= args.sim <= 256:
        print("diff_numpy.py: --devices and --sim take 0 to 256", file=sys.stderr)
        return 2
    if args.pmap and (args.sim or args.annotate or not 0 < args.pmap <= 64
                      or (0 < args.devices < args.pmap and not args.launch)):
        print("diff_numpy.py: --pmap takes 1 to 64 ranks, on threads or on at least as many "
              "host devices (--devices), without --sim and --annotate", file=sys.stderr)
        return 2
    if args.launch:  # a wrapper in front of tgraph, so that every way of running it gets it
        # Each launch gets a temporary directory of its own: launchers started at once (the
        # modes run side by side) race creating Open MPI's shared session directory under
        # TMPDIR ("mkdir ... File exists" in orte_session_dir).
        wrapper = os.path.join(tempfile.mkdtemp(prefix="tg_launch_"), "tgraph")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    "d=$(mktemp -d \"${TMPDIR:-/tmp}/tg_launch_XXXXXX\") || exit 1\n"
                    "TMPDIR=$d %s %s \"$@\"\n"
                    "rc=$?\nrm -rf \"$d\"\nexit $rc\n" % (args.launch, shlex.quote(tgraph)))
        os.chmod(wrapper, 0o755)
        atexit.register(shutil.rmtree, os.path.dirname(wrapper), True)
        tgraph = wrapper
    DEV.host, DEV.sim, DEV.annotate, DEV.seed = args.devices, args.sim, args.annotate, args.seed
    PMAP[0] = args.pmap

    t0 = time.time()
    if args.pmap:
        try:
            made, skipped, skipped_cases = pmap_programs(
                args.seed, args.pmap, args.sample, lambda c: args.filter in c.full_name())
        except SuiteError as e:
            print("diff_numpy.py: %s" % e, file=sys.stderr)
            return 2
    else:
        made = generate(args.seed, args.sample)[1]
    progs = []
    subset = args.filter or args.sample > 1  # no round trips nor CLI checks then
    for prog in made:
        if args.filter:
            prog.cases = [c for c in prog.cases if args.filter in c.full_name()]
        if prog.cases:
            prog.roundtrip = not subset and prog.name.startswith(ROUNDTRIP)
            progs.append(prog)
    if args.list:
        for prog in progs:
            for c in prog.cases:
                print(c.full_name())
        return 0
    ncases = sum(len(p.cases) for p in progs)
    print("diff_numpy: %d cases in %d programs, seed %d, NumPy %s, modes %s%s"
          % (ncases, len(progs), args.seed, np.__version__, ", ".join(modes),
             "; devices %s%s" % (", ".join(DEV.names()), ", annotated" if DEV.annotate else "")
             if DEV.host or DEV.sim or DEV.annotate else ""))
    if args.pmap:
        print(pmap_summary(progs, skipped, skipped_cases, args.pmap))
        if len(progs) < PMAP_MIN_MAPPED * (len(progs) + sum(skipped.values())) or not progs:
            print("FAIL too few programs mapped: at least %d%% must be"
                  % round(100 * PMAP_MIN_MAPPED))
            return 1
    sys.stdout.flush()

    tmp = tempfile.mkdtemp(prefix="tgdiff.")
    passed, failures = 0, []
    try:
        for mode in modes:  # one mode after the other: MODE is read by the workers
            MODE[0] = mode
            tag = "[%s] " % mode if len(modes) > 1 else ""
            mtmp = os.path.join(tmp, mode)  # no file of one mode is read by another
            os.makedirs(mtmp)
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                bundles = make_bundles(progs) if args.bundle else [[p] for p in progs]
                futs = [pool.submit(run_bundle, tgraph, b, mtmp, args.keep, args.seed)
                        for b in bundles]
                cli = pool.submit(cli_checks, tgraph, mtmp) if not subset else None
                vec = pool.submit(vectorize_checks, tgraph, mtmp) if not subset else None
                for b, fut in zip(bundles, futs):
                    n, fails = fut.result()
                    passed += n
                    failures += [tag + f for f in fails]
                    if args.verbose:
                        print("%s%s: %d passed, %d failed" % (tag, " ".join(p.name for p in b),
                                                              n, len(fails)))
                for checks in (cli, vec):
                    if checks:
                        n, fails = checks.result()
                        passed += n
                        failures += [tag + f for f in fails]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    for f in failures:
        print(f)
    if failures:
        print("seed %d; rerun one case with --filter NAME (and --keep DIR to keep its files)"
              % args.seed)
    print("time: %.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
