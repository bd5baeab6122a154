"""Writes python/tgraph/_ops.py: one function per op of src/ops/oplist.h and per composite
of src/ops/composite.c (names that build other ops: relu, einsum, ...).

usage: gen_ops.py OPLIST_H COMPOSITE_C OUT_PY

The two lists are the single source: an op or composite added there becomes tg.<name> at
the next build.
Ops that only the compiler makes (fused kernels, in-place BLAS forms, transfers, calls)
are left out, as are pmap, scan and map, which tgraph.pmap, tgraph.scan and tgraph.map
wrap with tracing; set_subtensor and inc_subtensor also take x[...] as their first
argument, as PyTensor's do; ops named like Python keywords take NumPy's names (logical_and,
logical_or, logical_not).
"""
import re
import sys

INTERNAL = {"fused", "call", "transfer", "pmap", "scan", "map", "gemm", "gemv", "ger",
            "gemm_inplace", "gemv_inplace", "ger_inplace", "solve_factored"}
# ops taking x[...] as PyTensor does (set_subtensor(x[1:3], y)), besides their attributes
UPDATES = {"set_subtensor": False, "inc_subtensor": True}
RENAMED = {"and": "logical_and", "or": "logical_or", "not": "logical_not",
           "xor": "logical_xor"}


def main(src, composites, out):
    text = open(src).read()
    ops = []
    for upper, lower in re.findall(r"X\((\w+), (\w+)\)", text):
        if upper.lower() == lower and lower not in INTERNAL and lower not in ops:
            ops.append(lower)
    # the composites' table rows: {"name", min_in, max_in, attrs, nattrs, build}
    for name in re.findall(r'\{"(\w+)", -?\d+, -?\d+, \w+, [^,{}]+, \w+\}',
                           open(composites).read()):
        if name not in ops:
            ops.append(name)
    lines = ["# Generated from src/ops/oplist.h by python/gen_ops.py: do not edit.",
             '"""The op set as functions: tg.<op>(*inputs, **attributes) (docs/ops.md)."""',
             "from ._symbolic import _op, _subtensor_update", "",
             "OPS = (", *[f'    "{o}",' for o in ops], ")", ""]
    names = []
    for o in ops:
        name = RENAMED.get(o, o)
        names.append(name)
        if o in UPDATES:
            lines.append(f'{name} = _subtensor_update("{o}", {UPDATES[o]})')
        else:
            lines.append(f'{name} = _op("{o}", "{name}")')
    lines += ["", "__all__ = [", *[f'    "{n}",' for n in names], "]", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
