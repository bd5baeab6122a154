#!/usr/bin/env python3
"""report.py - turns the result lines collected by bench/run.sh into bench/results.md (a
table per workload with the ratio of every tgraph configuration to the best peer, and the
targets of the benchmark suite) and a bar chart of those ratios (SVG).

usage: report.py RAW_LINES OUT.md OUT.svg [--meta KEY=VALUE ...]

A result line is  NAME: median <t> <unit>, min <t> <unit> ...  (unit ns, us, ms or s),
as bench_util.h's bench_report prints it; one line per round. The first word of NAME is
the workload (w1..w9, or another name); a NAME with a word that starts with numpy, torch,
cblas or cloop is a peer's (that word names the peer), every other NAME is tgraph's. The
median reported for a configuration is the median of its per-round medians, the min the
smallest min. A tgraph configuration is compared with the fastest peer of its workload
whose other words all describe it too: each is one of its words, or a KEY=VALUE whose
KEY it does not mention (so "w6 numpy threads=2" pairs with "w6 vm threads=2" only, and
"w1 numpy" with every W1 configuration). Needs only the Python standard library.
"""
import re
import statistics
import sys
from collections import OrderedDict

LINE = re.compile(r"^(?P<name>[A-Za-z]\S*\b[^:]*): median (?P<med>[0-9.eE+-]+) (?P<mu>ns|us|ms|s)\b"
                  r".*?min (?P<min>[0-9.eE+-]+) (?P<nu>ns|us|ms|s)\b")
SCALE = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}  # to milliseconds
PEERS = ("numpy", "torch", "cblas", "cloop")  # cloop: C written by hand (bench/pe.c)

# Targets of the suite. ("ratio", limit, filter, text, peer): for each thread count, every
# configuration of tgraph (sizes, dtypes, ...) is compared with the peer (None: the best
# peer; "numpy", "cblas": the best of that kind) through its best tgraph line (backend or
# variant; ablations such as `unfused` and `vm-no-blas` are left out), and the worst of
# those ratios is what must meet the limit. ("self", limit, filter, text, twin): the same,
# but each tgraph line is compared with its own twin, the line whose `filter` word is
# replaced by `twin` (W3: x=reversed against x=forward, same backend and threads); twin
# may also be a pair (words, replacement) when the words that differ are not the filter
# (W10: the lowering's `vm` line against its own `vm-no-blas` ablation; W10b: pmap on 2
# devices against the same pmap on 1; W10c: 2 devices against 1 device, each with its own
# thread count).
# ("time", ms, filter, text): the best median.
ABLATIONS = ("unfused", "vm-no-blas")
TARGETS = OrderedDict([
    ("w1", [("ratio", 0.5, None, "W1 <= 0.5x the best peer", None)]),
    ("w2", [("ratio", 1.05, None, "W2 <= 1.05x a direct BLAS call", "cblas")]),
    ("w3", [("self", 1.05, "x=reversed", "W3 reversed <= 1.05x forward", "x=forward")]),
    ("w4", [("ratio", 0.6, None, "W4 <= 0.6x NumPy", "numpy")]),
    ("w5", [("time", 0.5e-3, None, "W5 >= 2M calls/s (<= 0.5 us per call)")]),
    ("w6", [("ratio", 1.0, "threads=1", "W6 <= 1.0x the best peer at 1 thread", None),
            ("ratio", 0.8, "threads=2", "W6 <= 0.8x the best peer at 2 threads", None)]),
    ("w7", [("ratio", 0.95, None, "W7 <= 0.95x NumPy", "numpy")]),
    ("w8", [("time", 1000.0, "cold", "W8 cold compile <= 1 s"),
            ("time", 20.0, "warm", "W8 warm (cached) <= 20 ms")]),
    ("w9", [("time", 0.05, "chains=1", "W9 logp+grad <= 50 us")]),
    ("rw", [("time", 1500.0, "opt chain=cancel n=100000",
             "100k-node cancelling chain optimised in <= 1.5 s"),
            ("time", 1500.0, "opt chain=mixed n=100000",
             "100k-node mixed chain optimised in <= 1.5 s")]),
    ("w10", [("self", 0.99, "linear=fwd+bwd+sgd",
              "W10 training step (fwd+bwd+sgd) with the lowering <= 0.99x --no-blas",
              ("vm", "vm-no-blas"))]),
    ("w10b", [("self", 1 / 1.85, "devices=2",
               "W10b pmap, 2 devices / 1 device <= 0.54x (a speed-up >= 1.85x)", "devices=1"),
              ("ratio", 0.6, "devices=2", "W10b pmap on 2 devices <= 0.6x NumPy in 2 worker "
               "processes", "numpy-mp")]),
    ("w10c", [("self", 1 / 1.6, "devices=2 threads=2",
               "W10c data-parallel step on 2 devices >= 1.6x 1 device (time <= 0.62x)",
               ("devices=2 threads=2", "devices=1 threads=1")),
              ("ratio", 0.6, "devices=2 threads=2",
               "W10c data-parallel step on 2 devices <= 0.6x PyTorch on 2 threads", "torch")]),
    ("w11", [("time", 3000.0, "cold graph=mixed",
              "W11 C JIT cold compile of a 3,010-node graph <= 3 s")]),
    ("w12", [("ratio", 0.7, "vm threads=1",
              "W12 batched Cholesky plus solve (the same ops) <= 0.7x NumPy at 1 thread",
              "numpy")]),
    ("scan-rnn", [("ratio", 0.7, "threads=1",
                   "RNN forward+backward, 1,000 steps, <= 0.7x the best PyTorch form", "torch")]),
    ("scan-map", [("self", 1 / 1.8, "threads=2",
                   "independent map of 10,000 iterations, 2 threads >= 1.8x 1 thread",
                   "threads=1")]),
])


def keyvals(name):
    return dict(w.split("=", 1) for w in name.split() if "=" in w)


def peer_word(name):
    """The word naming the peer, or None for tgraph's lines."""
    for w in name.split()[1:]:
        if w.startswith(PEERS):
            return w
    return None


def is_peer(name):
    return peer_word(name) is not None


def describes(peer, name):
    """True when every word of peer (but the peer's own) describes tgraph's line name."""
    words, kv = set(name.split()), keyvals(name)
    pw = peer_word(peer)
    for w in peer.split():
        if w == pw or w in words:
            continue
        if "=" in w and w.split("=", 1)[0] not in kv:
            continue
        return False
    return True


def fmt_ms(ms):
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3f} ms"
    if ms >= 1e-3:
        return f"{ms * 1e3:.3f} us"
    return f"{ms * 1e6:.1f} ns"


def parse(path):
    runs = OrderedDict()  # name -> ([medians], [mins])
    notes = []
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = LINE.match(line)
            if not m:
                if re.match(r"^\S+ .*(skipped|not importable|missing|failed)", line):
                    notes.append(line)
                continue
            med = float(m["med"]) * SCALE[m["mu"]]
            mn = float(m["min"]) * SCALE[m["nu"]]
            r = runs.setdefault(m["name"].strip(), ([], []))
            r[0].append(med)
            r[1].append(mn)
    res = OrderedDict()
    for name, (meds, mins) in runs.items():
        res[name] = (statistics.median(meds), min(mins), len(meds))
    return res, sorted(set(notes))


def best_peer(res, name, kind=None):
    """The fastest peer line describing name (of that kind: its peer word starts with it)."""
    best = None
    for p, (med, _, _) in res.items():
        if not is_peer(p) or not describes(p, name):
            continue
        if kind is not None and not peer_word(p).startswith(kind):
            continue
        if best is None or med < best[1]:
            best = (p, med)
    return best


def twin_of(res, name, filt, twin):
    """The line name with its word filt replaced by twin (or, twin being a pair (words,
    replacement), with that run of words replaced), and its median (None if absent)."""
    old, rep = twin if isinstance(twin, tuple) else (filt, twin)
    words, old = name.split(), old.split()
    for i in range(len(words) - len(old) + 1):
        if words[i:i + len(old)] == old:
            t = " ".join(words[:i] + rep.split() + words[i + len(old):])
            return (t, res[t][0]) if t != name and t in res else None
    return None


def ratio_target(res, names, wl, limit, filt, text, kind, twin=None):
    """Rows of the targets table for one ratio rule: one per thread count, the worst over
    configurations of the best tgraph line of each configuration. The reference of a line
    is its best peer (of that kind); with twin, the best tgraph line of a configuration is
    compared with the best of the twin lines (twin_of) of the same configuration."""
    groups = {}
    best_twin = {}  # twin: configuration -> (best twin median, its line)
    for n in names:
        words = n.split()
        if words[0] != wl or is_peer(n) or any(a in words for a in ABLATIONS):
            continue
        if filt is not None and filt not in words and filt not in n:
            continue
        peer = twin_of(res, n, filt, twin) if twin else best_peer(res, n, kind)
        if not peer:
            continue
        kv = keyvals(n)
        th = kv.pop("threads", None)
        key = (th, tuple(sorted(kv.items())))
        if twin:  # the best line of the configuration, over the best twin
            if key not in best_twin or peer[1] < best_twin[key]:
                best_twin[key] = peer[1]
            if key not in groups or res[n][0] < groups[key][2]:
                groups[key] = (0.0, n, res[n][0])
            continue
        r = res[n][0] / peer[1]
        if key not in groups or r < groups[key][0]:
            groups[key] = (r, n)
    for key, (_, n, med) in list(groups.items()) if twin else []:
        groups[key] = (med / best_twin[key], n)
    threads = sorted({k[0] for k in groups}, key=lambda t: (t is None, t or ""))
    if not threads:
        return [f"| {text} | not measured | - |"]
    rows = []
    for th in threads:
        r, n = max(v for k, v in groups.items() if k[0] == th)
        label = text if th is None or (filt and "threads=" in filt) else f"{text}, threads={th}"
        rows.append(f"| {label} | {r:.2f}x (worst: {n}) | {'yes' if r <= limit else '**no**'} |")
    return rows


def workload_key(name):
    m = re.match(r"w(\d+)([a-z]?)$", name.split()[0])  # w10b after w10
    return (int(m.group(1)), m.group(2)) if m else (99, name.split()[0])


def svg_chart(rows, path):
    """rows: (label, ratio). Horizontal bars, a line at 1 (parity with the best peer)."""
    if not rows:
        rows = [("no tgraph configuration has a peer", 0.0)]
    top = max(2.0, min(5.0, max(r for _, r in rows) * 1.1))
    W, bar, L, R, T = 900, 20, 360, 70, 50
    H = T + len(rows) * (bar + 6) + 50
    pw = W - L - R

    def x(v):
        return L + pw * min(v, top) / top

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">tgraph time / best '
           'peer time (median; below 1: tgraph is faster)</text>']
    for k in range(int(top * 2) + 1):
        v = k / 2
        out.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{T - 8}" y2="{H - 40}" '
                   f'stroke="{"#333" if v == 1 else "#ddd"}"/>')
        out.append(f'<text x="{x(v):.1f}" y="{H - 25}" text-anchor="middle">{v:g}x</text>')
    for i, (label, r) in enumerate(rows):
        y = T + i * (bar + 6)
        color = "#2ca02c" if r <= 1 else "#d62728"
        out.append(f'<text x="{L - 8}" y="{y + bar - 5}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{L}" y="{y}" width="{x(r) - L:.1f}" height="{bar}" '
                   f'fill="{color}"/>')
        out.append(f'<text x="{x(r) + 4:.1f}" y="{y + bar - 5}">{r:.2f}x'
                   f'{" (clipped)" if r > top else ""}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    raw, md_path, svg_path = argv[1:4]
    meta = [a.split("=", 1) for a in argv[4:] if "=" in a and not a.startswith("--")]
    res, notes = parse(raw)
    names = sorted(res, key=lambda n: (workload_key(n), is_peer(n)))
    lines = ["# Benchmark results", "",
             "Written by `make bench` (bench/run.sh, bench/report.py). Each time is the median "
             "of the per-round medians of interleaved rounds (the min is the fastest single "
             "run); ratio = tgraph's median / the best peer's median for the same thread "
             "count, so below 1 tgraph is faster. Figures from a shared or busy machine are "
             "indicative only.", ""]
    for k, v in meta:
        lines.append(f"- {k}: {v}")
    lines += ["", "| workload | configuration | median | min | best peer (median) | ratio |",
              "|---|---|---:|---:|---|---:|"]
    chart = []
    ratios = {}
    for n in names:
        med, mn, rounds = res[n]
        wl, conf = n.split()[0], " ".join(n.split()[1:])
        peer = "" if is_peer(n) else best_peer(res, n)
        cell, ratio = "(peer)" if is_peer(n) else "no peer", ""
        if peer:
            cell = f"{' '.join(peer[0].split()[1:])} ({fmt_ms(peer[1])})"
            ratios[n] = med / peer[1]
            ratio = f"**{ratios[n]:.2f}x**"
            chart.append((n, ratios[n]))
        lines.append(f"| {wl.upper()} | {conf} | {fmt_ms(med)} | {fmt_ms(mn)} | {cell} | {ratio} |")
    if notes:
        lines += ["", "Notes from the run:", ""] + [f"- {n}" for n in notes]
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for wl, rules in TARGETS.items():
        for rule in rules:
            kind, limit, filt, text = rule[:4]
            if kind == "ratio":
                lines += ratio_target(res, names, wl, limit, filt, text, rule[4])
                continue
            if kind == "self":
                lines += ratio_target(res, names, wl, limit, filt, text, None, twin=rule[4])
                continue
            tg = [n for n in names if n.split()[0] == wl and not is_peer(n)
                  and (filt is None or filt in n.split() or filt in n)]
            have = [(res[n][0], n) for n in tg]
            if not have:
                lines.append(f"| {text} | not measured | - |")
                continue
            t, n = min(have)
            lines.append(f"| {text} | {fmt_ms(t)} ({n}) | {'yes' if t <= limit else '**no**'} |")
    lines += ["", f"Chart of the ratios: [{svg_path.split('/')[-1]}]({svg_path.split('/')[-1]})", ""]
    with open(md_path, "w") as f:
        f.write("\n".join(lines))
    svg_chart(chart, svg_path)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
