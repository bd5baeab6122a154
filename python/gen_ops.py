"""Writes python/tgraph/_ops.py: one function per op of src/ops/oplist.h.

usage: gen_ops.py OPLIST_H OUT_PY

The op list is the single source: an op added there becomes tg.<name> at the next build.
Ops that only the compiler makes (fused kernels, in-place BLAS forms, transfers, calls)
are left out, as is pmap, which tgraph.pmap wraps with tracing; ops named like Python
keywords take NumPy's names (logical_and, logical_or, logical_not).
"""
import re
import sys

INTERNAL = {"fused", "call", "transfer", "pmap", "gemm", "gemv", "ger",
            "gemm_inplace", "gemv_inplace", "ger_inplace"}
RENAMED = {"and": "logical_and", "or": "logical_or", "not": "logical_not",
           "xor": "logical_xor"}


def main(src, out):
    text = open(src).read()
    ops = []
    for upper, lower in re.findall(r"X\((\w+), (\w+)\)", text):
        if upper.lower() == lower and lower not in INTERNAL and lower not in ops:
            ops.append(lower)
    lines = ["# Generated from src/ops/oplist.h by python/gen_ops.py: do not edit.",
             '"""The op set as functions: tg.<op>(*inputs, **attributes) (docs/ops.md)."""',
             "from ._symbolic import _op", "",
             "OPS = (", *[f'    "{o}",' for o in ops], ")", ""]
    names = []
    for o in ops:
        name = RENAMED.get(o, o)
        names.append(name)
        lines.append(f'{name} = _op("{o}", "{name}")')
    lines += ["", "__all__ = [", *[f'    "{n}",' for n in names], "]", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
