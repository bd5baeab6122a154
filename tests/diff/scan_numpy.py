#!/usr/bin/env python3
"""scan_numpy.py - scan and map against NumPy loops, with random step bodies.

Each case is a .tg program with a scan or a map (docs/scan.md) and the same loop written
in NumPy. Step bodies are random expressions (fixed seed) over the carried state, the
sequence's row and the constants, kept bounded by a tanh; the forms covered are one and
two states, per-step outputs, taps (an AR(3) recurrence), a stop condition, a count given
as a tensor (dynamic_steps), n_steps shorter than the sequence, reverse, and map. The
script runs `tgraph run` in each --mode and compares every output with NumPy's (float64,
relative tolerance 1e-10). Gradient cases differentiate a loss of the scan's results with
respect to every float input and compare with central differences of the NumPy loop.

usage: scan_numpy.py --tgraph PATH [--mode reference,vm,c,c1] [--seed S]
(c1: the C mode at one thread, where maps run as the C JIT's generated loop too)
Ends with the line "N passed, N failed"; exits 1 when a case failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def rand_expr(rng, leaves, depth):
    """A random expression: (tg text, NumPy function of the leaves' values)."""
    if depth == 0 or rng.random() < 0.25:
        name = leaves[rng.integers(len(leaves))]
        return name, (lambda v, n=name: v[n])
    kind = rng.integers(6)
    a_t, a_f = rand_expr(rng, leaves, depth - 1)
    if kind == 0:
        return f"tanh({a_t})", lambda v: np.tanh(a_f(v))
    if kind == 1:
        return f"sin({a_t})", lambda v: np.sin(a_f(v))
    if kind == 2:
        return f"mul({a_t}, 0.5)", lambda v: a_f(v) * 0.5
    b_t, b_f = rand_expr(rng, leaves, depth - 1)
    if kind == 3:
        return f"add({a_t}, {b_t})", lambda v: a_f(v) + b_f(v)
    if kind == 4:
        return f"sub({a_t}, {b_t})", lambda v: a_f(v) - b_f(v)
    return f"mul({a_t}, {b_t})", lambda v: a_f(v) * b_f(v)


def rnn_case(rng, k):
    """One state h, one sequence xs, constants W and c (exp(sin(c)): work to hoist); a
    per-step output."""
    n, T = 4, 7
    e_t, e_f = rand_expr(rng, ["h", "x", "c", "Wh", "ec"], 3)
    y_t, y_f = rand_expr(rng, ["h", "hn", "x"], 2)
    text = f"""
func step(h: f64[{n}], x: f64[{n}], W: f64[{n},{n}], c: f64[{n}]) {{
  Wh = dot(W, h)
  ec = exp(sin(c))
  hn = tanh(add({e_t}, Wh))
  y = sum({y_t})
  return hn, y
}}
func main(h0: f64[{n}], xs: f64[{T},{n}], W: f64[{n},{n}], c: f64[{n}]) {{
  hl, ys = scan(@step, h0, xs, W, c, n_sequences=1)
  return hl, ys
}}"""

    def ref(v):
        h, ys = v["h0"], []
        for x in v["xs"]:
            env = {"h": h, "x": x, "c": v["c"], "Wh": v["W"] @ h, "ec": np.exp(np.sin(v["c"]))}
            hn = np.tanh(e_f(env) + env["Wh"])
            env["hn"] = hn
            ys.append(np.sum(y_f(env)))
            h = hn
        return {"hl": h, "ys": np.array(ys)}

    shapes = {"h0": (n,), "xs": (T, n), "W": (n, n), "c": (n,)}
    loss = "add(sum(mul(hl, hl)), sum(ys))"
    return f"rnn{k}", text, shapes, ref, loss, lambda o: np.sum(o["hl"] ** 2) + np.sum(o["ys"])


def two_state_case(rng, k):
    """A vector state and a running 0-d sum, no per-step output; reverse on odd k."""
    n, T = 3, 6
    e_t, e_f = rand_expr(rng, ["h", "x", "c"], 3)
    rev = k % 2 == 1
    text = f"""
func step(h: f64[{n}], s: f64[], x: f64[{n}], c: f64[{n}]) {{
  hn = tanh({e_t})
  sn = add(s, sum(mul(hn, hn)))
  return hn, sn
}}
func main(h0: f64[{n}], s0: f64[], xs: f64[{T},{n}], c: f64[{n}]) {{
  hl, sl = scan(@step, h0, s0, xs, c, n_states=2, n_sequences=1{", reverse=true" if rev else ""})
  return hl, sl
}}"""

    def ref(v):
        h, s = v["h0"], v["s0"]
        for x in (v["xs"][::-1] if rev else v["xs"]):
            h = np.tanh(e_f({"h": h, "x": x, "c": v["c"]}))
            s = s + np.sum(h * h)
        return {"hl": h, "sl": np.asarray(s)}

    shapes = {"h0": (n,), "s0": (), "xs": (T, n), "c": (n,)}
    loss = "add(sl, sum(hl))"
    return (f"two_state{k}", text, shapes, ref, loss,
            lambda o: float(o["sl"]) + np.sum(o["hl"]))


def taps_case(rng, k):
    """An AR(3) recurrence through taps=[-1, -3], with an output per step."""
    n, T = 2, 9
    text = f"""
func step(x1: f64[{n}], x3: f64[{n}], e: f64[{n}], a: f64[], b: f64[]) {{
  xn = add(add(mul(a, x1), mul(b, tanh(x3))), e)
  return xn, sum(xn)
}}
func main(x0: f64[3,{n}], es: f64[{T},{n}], a: f64[], b: f64[]) {{
  xl, ys = scan(@step, x0, es, a, b, n_sequences=1, taps=[-1, -3])
  return xl, ys
}}"""

    def ref(v):
        hist, ys = list(v["x0"]), []
        for e in v["es"]:
            xn = v["a"] * hist[-1] + v["b"] * np.tanh(hist[-3]) + e
            hist.append(xn)
            ys.append(np.sum(xn))
        return {"xl": np.array(hist[-3:]), "ys": np.array(ys)}

    shapes = {"x0": (3, n), "es": (T, n), "a": (), "b": ()}
    loss = "add(sum(mul(xl, xl)), sum(ys))"
    return f"taps{k}", text, shapes, ref, loss, lambda o: np.sum(o["xl"] ** 2) + np.sum(o["ys"])


def taps_reverse_case(rng, k):
    """Taps in another order (taps=[-2, -1]) over an initial value longer than they reach,
    the rows read from the last to the first (reverse=true)."""
    n, T = 2, 6
    e_t, e_f = rand_expr(rng, ["x2", "x1", "e"], 2)
    text = f"""
func step(x2: f64[{n}], x1: f64[{n}], e: f64[{n}], a: f64[]) {{
  xn = tanh(add(mul(a, x1), {e_t}))
  return xn, mul(xn, e)
}}
func main(x0: f64[4,{n}], es: f64[{T},{n}], a: f64[]) {{
  xl, ys = scan(@step, x0, es, a, n_sequences=1, taps=[-2, -1], reverse=true)
  return xl, ys
}}"""

    def ref(v):
        hist, ys = list(v["x0"]), [None] * T
        for t in reversed(range(T)):
            e = v["es"][t]
            xn = np.tanh(v["a"] * hist[-1] + e_f({"x2": hist[-2], "x1": hist[-1], "e": e}))
            hist.append(xn)
            ys[t] = xn * e
        return {"xl": np.array(hist[-2:]), "ys": np.array(ys)}

    shapes = {"x0": (4, n), "es": (T, n), "a": ()}
    loss = "add(sum(mul(xl, xl)), sum(ys))"
    return (f"tapsrev{k}", text, shapes, ref, loss,
            lambda o: np.sum(o["xl"] ** 2) + np.sum(o["ys"]))


def taps_until_case(rng, k):
    """Taps and a stop condition, no per-step output: the loop ends after the step whose
    value passes 1.5 in absolute value."""
    n, T = 2, 10
    e_t, e_f = rand_expr(rng, ["x1", "x3", "e"], 2)
    text = f"""
func step(x1: f64[{n}], x3: f64[{n}], e: f64[{n}], a: f64[]) {{
  xn = add(mul(a, x1), tanh({e_t}))
  return xn, gt(abs(sum(xn)), 1.5)
}}
func main(x0: f64[3,{n}], es: f64[{T},{n}], a: f64[]) {{
  xl = scan(@step, x0, es, a, n_sequences=1, taps=[-1, -3], until=true)
  return xl
}}"""

    def ref(v):
        hist = list(v["x0"])
        for e in v["es"]:
            xn = v["a"] * hist[-1] + np.tanh(e_f({"x1": hist[-1], "x3": hist[-3], "e": e}))
            hist.append(xn)
            if abs(np.sum(xn)) > 1.5:
                break
        return {"xl": np.array(hist[-3:])}

    shapes = {"x0": (3, n), "es": (T, n), "a": ()}
    loss = "sum(mul(xl, xl))"
    return f"tapsuntil{k}", text, shapes, ref, loss, lambda o: np.sum(o["xl"] ** 2)


def until_case(rng, k):
    """A stop condition: the loop ends after the step whose running sum passes 2."""
    n, T = 3, 12
    e_t, e_f = rand_expr(rng, ["h", "x"], 2)
    text = f"""
func step(h: f64[{n}], s: f64[], x: f64[{n}]) {{
  hn = tanh({e_t})
  sn = add(s, abs(sum(hn)))
  return hn, sn, sn, gt(sn, 2.0)
}}
func main(h0: f64[{n}], xs: f64[{T},{n}]) {{
  hl, sl, ss = scan(@step, h0, 0.0, xs, n_states=2, n_sequences=1, until=true)
  return hl, sl, ss
}}"""

    def ref(v):
        h, s, ss = v["h0"], 0.0, []
        for x in v["xs"]:
            h = np.tanh(e_f({"h": h, "x": x}))
            s = s + abs(np.sum(h))
            ss.append(s)
            if s > 2.0:
                break
        return {"hl": h, "sl": np.asarray(s), "ss": np.array(ss)}

    loss = "add(add(sum(mul(hl, hl)), sl), sum(mul(ss, ss)))"
    return (f"until{k}", text, {"h0": (n,), "xs": (T, n)}, ref, loss,
            lambda o: np.sum(o["hl"] ** 2) + o["sl"] + np.sum(o["ss"] ** 2))


def until_reverse_case(rng, k):
    """A stop condition with the rows read from the last to the first (reverse=true), over
    the first 10 of 12 rows (n_steps)."""
    n, T, S = 3, 12, 10
    e_t, e_f = rand_expr(rng, ["h", "x"], 2)
    text = f"""
func step(h: f64[{n}], s: f64[], x: f64[{n}]) {{
  hn = tanh({e_t})
  sn = add(s, abs(sum(hn)))
  return hn, sn, mul(hn, x), gt(sn, 2.0)
}}
func main(h0: f64[{n}], xs: f64[{T},{n}]) {{
  hl, sl, ys = scan(@step, h0, 0.0, xs, n_states=2, n_sequences=1, n_steps={S}, until=true,
                    reverse=true)
  return hl, sl, ys
}}"""

    def ref(v):
        h, s, ys = v["h0"], 0.0, []
        for t in reversed(range(S)):
            x = v["xs"][t]
            h = np.tanh(e_f({"h": h, "x": x}))
            s = s + abs(np.sum(h))
            ys.insert(0, h * x)
            if s > 2.0:
                break
        return {"hl": h, "sl": np.asarray(s), "ys": np.array(ys).reshape(-1, n)}

    loss = "add(add(sum(mul(hl, hl)), sl), sum(mul(ys, ys)))"
    return (f"untilrev{k}", text, {"h0": (n,), "xs": (T, n)}, ref, loss,
            lambda o: np.sum(o["hl"] ** 2) + o["sl"] + np.sum(o["ys"] ** 2))


def dynamic_case(rng, k):
    """No sequence: the count is a 0-d i64 input (dynamic_steps=true)."""
    n = 3
    e_t, e_f = rand_expr(rng, ["h", "c"], 3)
    count = int(rng.integers(0, 6))
    text = f"""
func step(h: f64[{n}], c: f64[{n}]) {{
  hn = tanh({e_t})
  return hn, mul(hn, 2.0)
}}
func main(h0: f64[{n}], c: f64[{n}], count: i64[]) {{
  hl, ys = scan(@step, h0, c, count, dynamic_steps=true)
  return hl, ys
}}"""

    def ref(v):
        h, ys = v["h0"], []
        for _ in range(count):
            h = np.tanh(e_f({"h": h, "c": v["c"]}))
            ys.append(h * 2.0)
        return {"hl": h, "ys": np.array(ys).reshape(count, n)}

    fixed = {"count": np.asarray(count, dtype=np.int64)}
    loss = "add(sum(mul(hl, hl)), sum(ys))"
    return (f"dynamic{k}", text, {"h0": (n,), "c": (n,)}, ref, loss,
            lambda o: np.sum(o["hl"] ** 2) + np.sum(o["ys"]), fixed)


def dynamic_seq_case(rng, k):
    """A count given as a tensor, with a sequence longer than the count."""
    n, T = 3, 8
    e_t, e_f = rand_expr(rng, ["h", "x"], 3)
    count = int(rng.integers(0, T + 1))
    text = f"""
func step(h: f64[{n}], x: f64[{n}]) {{
  hn = tanh({e_t})
  return hn, sum(mul(hn, x))
}}
func main(h0: f64[{n}], xs: f64[{T},{n}], count: i64[]) {{
  hl, ys = scan(@step, h0, xs, count, n_sequences=1, dynamic_steps=true)
  return hl, ys
}}"""

    def ref(v):
        h, ys = v["h0"], []
        for x in v["xs"][:count]:
            h = np.tanh(e_f({"h": h, "x": x}))
            ys.append(np.sum(h * x))
        return {"hl": h, "ys": np.array(ys)}

    fixed = {"count": np.asarray(count, dtype=np.int64)}
    loss = "add(sum(hl), sum(mul(ys, ys)))"
    return (f"dynseq{k}", text, {"h0": (n,), "xs": (T, n)}, ref, loss,
            lambda o: np.sum(o["hl"]) + np.sum(o["ys"] ** 2), fixed)


def nsteps_case(rng, k):
    """n_steps shorter than the sequence: its first rows are read."""
    n, T, S = 3, 8, 5
    e_t, e_f = rand_expr(rng, ["h", "x"], 3)
    text = f"""
func step(h: f64[{n}], x: f64[{n}]) {{
  hn = tanh({e_t})
  return hn, hn
}}
func main(h0: f64[{n}], xs: f64[{T},{n}]) {{
  hl, hs = scan(@step, h0, xs, n_sequences=1, n_steps={S})
  return hl, hs
}}"""

    def ref(v):
        h, hs = v["h0"], []
        for x in v["xs"][:S]:
            h = np.tanh(e_f({"h": h, "x": x}))
            hs.append(h)
        return {"hl": h, "hs": np.array(hs)}

    loss = "add(sum(hl), sum(mul(hs, hs)))"
    return (f"nsteps{k}", text, {"h0": (n,), "xs": (T, n)}, ref, loss,
            lambda o: np.sum(o["hl"]) + np.sum(o["hs"] ** 2))


def map_case(rng, k):
    """map: no carried state, two sequences and a constant."""
    n, T = 4, 6
    e_t, e_f = rand_expr(rng, ["x", "z", "c"], 3)
    text = f"""
func f(x: f64[{n}], z: f64[{n}], c: f64[{n}]) {{
  y = {e_t}
  return y, sum(y)
}}
func main(xs: f64[{T},{n}], zs: f64[{T},{n}], c: f64[{n}]) {{
  ys, ss = map(@f, xs, zs, c, n_sequences=2)
  return ys, ss
}}"""

    def ref(v):
        ys = [np.broadcast_to(e_f({"x": x, "z": z, "c": v["c"]}), (n,)) for x, z in
              zip(v["xs"], v["zs"])]
        return {"ys": np.array(ys), "ss": np.array([np.sum(y) for y in ys])}

    shapes = {"xs": (T, n), "zs": (T, n), "c": (n,)}
    loss = "add(sum(mul(ys, ys)), sum(ss))"
    return f"map{k}", text, shapes, ref, loss, lambda o: np.sum(o["ys"] ** 2) + np.sum(o["ss"])


def run(tgraph, mode, src, inputs, outs, work):
    # c1: the C mode at one thread, where maps run as the generated loop too (with more
    # threads they run in parallel through the loop's kernel)
    args = [tgraph, "run", src, "--mode", "c", "--threads", "1"] if mode == "c1" else \
        [tgraph, "run", src, "--mode", mode]
    for name, arr in inputs.items():
        p = os.path.join(work, f"in_{name}.npy")
        np.save(p, arr)
        args += ["--in", f"{name}={p}"]
    for name in outs:
        args += ["--out", f"{name}={os.path.join(work, 'out_' + name + '.npy')}"]
    res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if res.returncode != 0:
        return None, res.stderr.decode()
    return {name: np.load(os.path.join(work, f"out_{name}.npy")) for name in outs}, ""


def close(a, b, tol):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))))


def grad_program(text, shapes, loss):
    """The case's main, returning its loss and its gradient with respect to every input."""
    names = list(shapes)
    head, body = text.rsplit("  return", 1)
    ret = f"""  loss = {loss}
  {", ".join("g_" + n for n in names)} = grad(loss, {", ".join(names)})
  return loss, {", ".join("g_" + n for n in names)}
}}"""
    return head + ret, ["loss"] + ["g_" + n for n in names]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tgraph", required=True)
    ap.add_argument("--mode", default="reference,vm,c")
    ap.add_argument("--seed", type=int, default=20261205)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    gens = [rnn_case, two_state_case, taps_case, taps_reverse_case, taps_until_case, until_case,
            until_reverse_case, dynamic_case, dynamic_seq_case, nsteps_case, map_case]
    cases = [g(rng, k) for k in range(3) for g in gens]
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for case in cases:
            name, text, shapes, ref, loss, np_loss = case[:6]
            fixed = case[6] if len(case) > 6 else {}
            inputs = {n: rng.normal(size=s) for n, s in shapes.items()}
            inputs.update(fixed)
            want = ref(inputs)
            src = os.path.join(work, f"{name}.tg")
            with open(src, "w") as f:
                f.write(text)
            for mode in args.mode.split(","):
                got, err = run(args.tgraph, mode, src, inputs, list(want), work)
                ok = got is not None and all(close(got[k], want[k], 1e-10) for k in want)
                if ok:
                    passed += 1
                    continue
                failed += 1
                print(f"FAIL {name} [{mode}]: {err or got}\nexpected {want}\n{text}")
            if loss is None:
                continue
            gtext, outs = grad_program(text, shapes, loss)
            gsrc = os.path.join(work, f"{name}_grad.tg")
            with open(gsrc, "w") as f:
                f.write(gtext)
            eps, num = 1e-6, {}
            for n in shapes:
                g = np.zeros(shapes[n])
                for idx in np.ndindex(*shapes[n]):
                    x = {k: np.array(v, dtype=np.float64) for k, v in inputs.items()}
                    x[n][idx] += eps
                    hi = np_loss(ref(x))
                    x[n][idx] -= 2 * eps
                    lo = np_loss(ref(x))
                    g[idx] = (hi - lo) / (2 * eps)
                num["g_" + n] = g
            for mode in args.mode.split(","):
                got, err = run(args.tgraph, mode, gsrc, inputs, outs, work)
                ok = got is not None and close(got["loss"], np_loss(want), 1e-10)
                ok = ok and all(close(got[k], num[k], 1e-5) for k in num)
                if ok:
                    passed += 1
                    continue
                failed += 1
                print(f"FAIL {name} gradient [{mode}]: {err or got}\nexpected {num}\n{gtext}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
