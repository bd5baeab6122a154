"""tg_devices.py - devices for the differential tests (diff_numpy.py, grad_cli.py).

Devices: the virtual host devices cpu:0..N-1 (`tgraph run --devices N`) and the sim devices
sim:0..K-1 (TGRAPH_SIM_DEVICES=K) of a run, as options and environment of `tgraph`.

Annotations: `device="..."` added to the outermost call of a random half of a program's
lines `names = expr` (an op, a call of a function of the file, `fused{...}(...)`, the
derivative forms), naming `cpu` or a device of the run. Never a constant (`const(...)`
refuses a device) nor indexing sugar (`x[1:2]`, `f(x)[0]`), which takes no keyword; the
calls among the arguments keep theirs. The choices depend only on a key and the lines, so a
program is annotated the same wherever it runs (in a bundle, alone) and failures reproduce.
"""
import os
import random
import re

ASSIGN = re.compile(r"(\s*\w+(?:\s*,\s*\w+)*\s*=\s*)(.*?)\s*")
CALL_HEAD = re.compile(r"fused\{|([A-Za-z_]\w*)\(")


def names(host, sim):
    """The devices an annotation may name: the whole host and every device of the run."""
    return ["cpu"] + ["cpu:%d" % i for i in range(host)] + ["sim:%d" % i for i in range(sim)]


def run_args(host):
    """Options of `tgraph run` and `tgraph opt` for `host` virtual host devices."""
    return ["--devices", str(host)] if host else []


def env(sim):
    """The environment of tgraph with `sim` sim devices (None: this one). Sim memory is
    protected, in release builds too, so a host read of it (a missing transfer) faults
    rather than passes."""
    if not sim:
        return None
    e = dict(os.environ)
    e["TGRAPH_SIM_DEVICES"] = str(sim)
    e["TGRAPH_SIM_PROTECT"] = "1"
    return e


def env_words(sim):
    """env(sim) as words of a shell command line."""
    return ["TGRAPH_SIM_DEVICES=%d" % sim, "TGRAPH_SIM_PROTECT=1"] if sim else []


def _closing(s, i):
    """The index of the bracket that closes the one at s[i] (string literals skipped), or
    None when there is none."""
    depth, k = 0, i
    while k < len(s):
        ch = s[k]
        if ch == '"':
            k += 1
            while k < len(s) and s[k] != '"':
                k += 2 if s[k] == "\\" else 1
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return None


def outer_call(expr):
    """(open, close): the parentheses of the argument list when expr is one call with
    nothing after it (`op(...)`, `f(...)`, `fused{...}(...)`); None for a name, a literal,
    indexing sugar and `const(...)`."""
    m = CALL_HEAD.match(expr)
    if not m or m.group(1) == "const":
        return None
    i = m.end() - 1
    if expr[i] == "{":
        i = _closing(expr, i)
        if i is None or expr[i + 1:i + 2] != "(":
            return None
        i += 1
    j = _closing(expr, i)
    return (i, j) if j == len(expr) - 1 else None


def annotate_lines(lines, key, devices):
    """lines with `device="..."` added to the outermost call of a random half of those of
    the form `names = expr`, each naming one of `devices`; the choices are fixed by `key`."""
    rng = random.Random(key)
    out = []
    for ln in lines:
        pick, dev = rng.random() < 0.5, rng.choice(devices)
        m = ASSIGN.fullmatch(ln)
        call = outer_call(m.group(2)) if m and pick else None
        if call is None:
            out.append(ln)
            continue
        head, expr = m.group(1), m.group(2)
        i, j = call
        sep = ", " if expr[i + 1:j].strip() else ""
        out.append('%s%s%sdevice="%s")' % (head, expr[:j], sep, dev))
    return out
