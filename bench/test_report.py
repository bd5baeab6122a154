#!/usr/bin/env python3
"""test_report.py - checks bench/report.py on fixed result lines: medians of per-round
medians, unit conversion, pairing of tgraph's configurations with peers of the same
thread count (and with peers that name no thread count), the ratios, the targets table,
a target judged against a line's own twin (W3 reversed against forward, W10 the lowering
against its --no-blas ablation, W10b 2 devices against 1, W10c 2 devices against 1 device,
two words apart), a target against one kind of peer (W10b: NumPy's worker processes, not
its faster sequential line), a time target read from its wall-clock line (rw), notes about
skipped programs, and that the chart is well-formed SVG with one bar per ratio. Exits
non-zero on the first mismatch (ctest: bench_report)."""
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

RAW = """\
== round 1 of 2 ==
w6 vm threads=1: median 4.000 ms, min 3.000 ms (10 runs)
w6 vm threads=2: median 3.000 ms, min 2.500 ms (10 runs)
w6 numpy threads=1: median 10.000 ms, min 9.000 ms (10 runs)
w6 numpy threads=2: median 6.000 ms, min 5.000 ms (10 runs)
w6 torch threads=1: median 2.500 ms, min 2.000 ms (10 runs)
w9 vm chains=1 threads=1: median 40.000 us, min 35.000 us (10 runs of 500 calls)
w9 numpy chains=1 threads=1: median 0.200 ms, min 0.150 ms (10 runs of 100 calls)
w1 vm fused threads=1: median 50.000 ms, min 45.000 ms (10 runs)
w1 numpy: median 200.000 ms, min 190.000 ms (10 runs)
w5 vm call: median 0.400 us per call, min 0.300 us (11 batches of 100)
w8 compile cold (empty cache, incl. first call): median 1.500 s, min 1.200 s (5 runs)
w7 bench_w7: skipped, not built in build/bench (make bench)
w9 bench_w9 -n 10 --mode c: failed (exit status 139)
w2 n=256 f64 tgraph threads=1: median 1.000 ms, min 0.900 ms (10 runs)
w2 n=256 f64 cblas threads=1: median 0.800 ms, min 0.700 ms (10 runs)
w2 n=256 f32 cblas threads=1: median 0.400 ms, min 0.300 ms (10 runs)
lin tgraph threads=1: median 2.000 ms, min 1.900 ms (10 runs)
lin cblas threads=1: median 4.000 ms, min 3.900 ms (10 runs)
w4 vm n=10 threads=1: median 1.000 ms, min 1.000 ms (10 runs)
w4 vm n=20 threads=1: median 3.000 ms, min 3.000 ms (10 runs)
w4 vm-no-blas n=20 threads=1: median 0.500 ms, min 0.500 ms (10 runs)
w4 numpy n=10 threads=1: median 4.000 ms, min 4.000 ms (10 runs)
w4 numpy n=20 threads=1: median 4.000 ms, min 4.000 ms (10 runs)
w4 cblas n=20 threads=1: median 1.000 ms, min 1.000 ms (10 runs)
w3 vm n=8 x=forward threads=1: median 2.000 ms, min 2.000 ms (10 runs)
w3 vm n=8 x=reversed threads=1: median 2.200 ms, min 2.200 ms (10 runs)
w3 cblas n=8 x=reversed threads=1: median 1.000 ms, min 1.000 ms (10 runs)
w3 c n=8 x=forward threads=1: median 5.000 ms, min 5.000 ms (10 runs)
w3 c n=8 x=reversed threads=1: median 5.000 ms, min 5.000 ms (10 runs)
w10 vm linear=fwd+bwd+sgd threads=1: median 0.900 ms, min 0.800 ms (10 runs)
w10 vm-no-blas linear=fwd+bwd+sgd threads=1: median 0.950 ms, min 0.900 ms (10 runs)
w10 vm linear=fwd+bwd+sgd threads=2: median 0.500 ms, min 0.400 ms (10 runs)
w10 vm-no-blas linear=fwd+bwd+sgd threads=2: median 0.500 ms, min 0.400 ms (10 runs)
w10 vm linear=fwd+bwd threads=1: median 2.000 ms, min 2.000 ms (10 runs)
w10 vm-no-blas linear=fwd+bwd threads=1: median 1.000 ms, min 1.000 ms (10 runs)
rw opt chain=cancel n=100000: median 200.000 ms, min 180.000 ms (5 runs)
rw opt-cpu chain=cancel n=100000: median 150.000 ms, min 140.000 ms (5 runs)
rw opt chain=mixed n=100000: median 1600.000 ms, min 1400.000 ms (5 runs)
rw opt-cpu chain=mixed n=100000: median 700.000 ms, min 650.000 ms (5 runs)
== round 2 of 2 ==
w10c vm devices=1 threads=1: median 4.000 ms, min 3.900 ms (10 runs)
w10c vm devices=1 threads=2: median 2.200 ms, min 2.100 ms (10 runs)
w10c vm devices=2 threads=2: median 2.400 ms, min 2.300 ms (10 runs)
w10c torch threads=2: median 5.000 ms, min 4.800 ms (10 runs)
w10c torch-manual threads=2: median 3.000 ms, min 2.900 ms (10 runs)
w6 vm threads=1: median 6.000 ms, min 2.800 ms (10 runs)
w6 vm threads=2: median 3.000 ms, min 2.900 ms (10 runs)
w6 numpy threads=1: median 10.000 ms, min 9.500 ms (10 runs)
w6 numpy threads=2: median 6.000 ms, min 5.500 ms (10 runs)
w6 torch threads=1: median 2.500 ms, min 2.100 ms (10 runs)
w9 vm chains=1 threads=1: median 60.000 us, min 36.000 us (10 runs of 500 calls)
w9 numpy chains=1 threads=1: median 0.200 ms, min 0.160 ms (10 runs of 100 calls)
w1 vm fused threads=1: median 50.000 ms, min 44.000 ms (10 runs)
w1 numpy: median 200.000 ms, min 180.000 ms (10 runs)
w5 vm call: median 0.400 us per call, min 0.350 us (11 batches of 100)
w8 compile cold (empty cache, incl. first call): median 1.500 s, min 1.100 s (5 runs)
w7 bench_w7: skipped, not built in build/bench (make bench)
w10b pmap devices=2: median 140.000 ms, min 130.000 ms (10 runs)
w10b pmap devices=1: median 270.000 ms, min 260.000 ms (10 runs)
w10b batched threads=1: median 300.000 ms, min 290.000 ms (10 runs)
w10b numpy-mp workers=2: median 200.000 ms, min 190.000 ms (10 runs)
w10b numpy workers=1: median 190.000 ms, min 180.000 ms (10 runs)
w10c vm devices=1 threads=1: median 4.000 ms, min 3.900 ms (10 runs)
w10c vm devices=1 threads=2: median 2.200 ms, min 2.100 ms (10 runs)
w10c vm devices=2 threads=2: median 2.400 ms, min 2.300 ms (10 runs)
w10c torch threads=2: median 5.000 ms, min 4.800 ms (10 runs)
w10c torch-manual threads=2: median 3.000 ms, min 2.900 ms (10 runs)
"""


def row(md, conf):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[1] == conf:
            return cells
    raise AssertionError(f"no row for {conf!r}")


def target(md, text):
    for line in md.splitlines():
        if line.startswith(f"| {text} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no target {text!r}")


def main():
    d = tempfile.mkdtemp()
    raw, md_path, svg_path = (os.path.join(d, n) for n in ("raw", "r.md", "r.svg"))
    with open(raw, "w") as f:
        f.write(RAW)
    devnull = open(os.devnull, "w")
    stdout, sys.stdout = sys.stdout, devnull
    try:
        rc = report.main(["report.py", raw, md_path, svg_path, "machine=test"])
    finally:
        sys.stdout = stdout
    assert rc == 0
    md = open(md_path).read()
    # median of the round medians (4, 6 -> 5), the smallest min, the best peer at 1 thread
    r = row(md, "vm threads=1")
    assert r[2] == "5.000 ms" and r[3] == "2.800 ms", r
    assert r[4].startswith("torch threads=1") and r[5] == "**2.00x**", r
    r = row(md, "vm threads=2")
    assert r[4].startswith("numpy threads=2") and r[5] == "**0.50x**", r
    # microseconds against milliseconds: 50 us / 0.2 ms
    r = row(md, "vm chains=1 threads=1")
    assert r[2] == "50.000 us" and r[5] == "**0.25x**", r
    # a peer without a thread count pairs with every thread count
    r = row(md, "vm fused threads=1")
    assert r[4].startswith("numpy (") and r[5] == "**0.25x**", r
    assert row(md, "numpy threads=1")[4] == "(peer)"
    assert row(md, "vm call")[4] == "no peer"
    # targets
    assert target(md, "W6 <= 1.0x the best peer at 1 thread")[2] == "**no**"
    assert target(md, "W6 <= 0.8x the best peer at 2 threads")[2] == "yes"
    assert target(md, "W9 logp+grad <= 50 us")[2] == "yes"  # 50 us exactly
    assert target(md, "W1 <= 0.5x the best peer, threads=1")[2] == "yes"
    # W4: against NumPy (not the faster cblas line), the worst size, ablations left out
    w4 = target(md, "W4 <= 0.6x NumPy, threads=1")
    assert w4[1].startswith("0.75x (worst: w4 vm n=20 threads=1)") and w4[2] == "**no**"
    # W2 against a direct BLAS call (not the best peer of any kind): 1.0 / 0.8 ms
    w2 = target(md, "W2 <= 1.05x a direct BLAS call, threads=1")
    assert w2[1].startswith("1.25x (worst: w2 n=256 f64 tgraph threads=1)") and w2[2] == "**no**"
    # W3: tgraph's best reversed line against its best forward line (vm 2.2 / vm 2.0), not
    # against cblas, and not c's 5.0 / 5.0 (a slow backend with no penalty)
    w3 = target(md, "W3 reversed <= 1.05x forward, threads=1")
    assert w3[1].startswith("1.10x (worst: w3 vm n=8 x=reversed threads=1)"), w3
    assert w3[2] == "**no**", w3
    # W10: the lowering's line against its own --no-blas line, the training step only
    # (0.90 / 0.95 ms; 0.5 / 0.5 ms is not faster); the fwd+bwd lines stay out of it
    t = "W10 training step (fwd+bwd+sgd) with the lowering <= 0.99x --no-blas"
    w10 = target(md, t + ", threads=1")
    assert w10[1].startswith("0.95x (worst: w10 vm linear=fwd+bwd+sgd threads=1)"), w10
    assert w10[2] == "yes", w10
    assert target(md, t + ", threads=2")[1:] == [
        "1.00x (worst: w10 vm linear=fwd+bwd+sgd threads=2)", "**no**"]
    # W10b: 2 devices against 1 (140 / 270 ms), and against NumPy's 2 worker processes
    # (140 / 200 ms), not against the faster sequential NumPy line
    w10b = target(md, "W10b pmap, 2 devices / 1 device <= 0.54x (a speed-up >= 1.85x)")
    assert w10b[1:] == ["0.52x (worst: w10b pmap devices=2)", "yes"], w10b
    w10b = target(md, "W10b pmap on 2 devices <= 0.6x NumPy in 2 worker processes")
    assert w10b[1:] == ["0.70x (worst: w10b pmap devices=2)", "**no**"], w10b
    assert md.index("| W10 |") < md.index("| W10B |") < md.index("| W10C |") < md.index("| RW |")
    # W10c: 2 devices against 1 device with 1 thread (two words differ: 2.4 / 4.0 ms), and
    # against the faster of the two PyTorch lines (torch-manual: 2.4 / 3.0 ms)
    w10c = target(md, "W10c data-parallel step on 2 devices >= 1.6x 1 device (time <= 0.62x)")
    assert w10c[1:] == ["0.60x (worst: w10c vm devices=2 threads=2)", "yes"], w10c
    w10c = target(md, "W10c data-parallel step on 2 devices <= 0.6x PyTorch on 2 threads")
    assert w10c[1:] == ["0.80x (worst: w10c vm devices=2 threads=2)", "**no**"], w10c
    assert row(md, "vm devices=1 threads=1")[4] == "no peer"
    assert target(md, "W5 >= 2M calls/s (<= 0.5 us per call)")[2] == "yes"
    # rw: the wall-clock line of each chain, not its CPU-time line
    assert target(md, "100k-node cancelling chain optimised in <= 1.5 s")[1:] == [
        "200.000 ms (rw opt chain=cancel n=100000)", "yes"]
    assert target(md, "100k-node mixed chain optimised in <= 1.5 s")[1:] == [
        "1.6 s (rw opt chain=mixed n=100000)", "**no**"]
    assert target(md, "W8 cold compile <= 1 s")[2] == "**no**"
    assert target(md, "W7 <= 0.95x NumPy")[1] == "not measured"
    assert "w7 bench_w7: skipped" in md
    assert "- w9 bench_w9 -n 10 --mode c: failed (exit status 139)" in md
    # the peer word anywhere after the workload; plain words (f64) must match too
    r = row(md, "n=256 f64 tgraph threads=1")
    assert r[4].startswith("n=256 f64 cblas threads=1") and r[5] == "**1.25x**", r
    assert row(md, "n=256 f32 cblas threads=1")[4] == "(peer)"
    assert row(md, "tgraph threads=1")[5] == "**0.50x**"  # lin: a workload of another name
    assert "- machine: test" in md
    # the chart: well-formed, one bar per tgraph configuration with a peer
    root = ET.parse(svg_path).getroot()
    bars = [e for e in root.iter() if e.tag.endswith("rect") and e.get("height") == "20"]
    ratios = re.findall(r"\*\*([0-9.]+)x\*\*", md.split("## Targets")[0])
    assert len(bars) == len(ratios) == 16, (len(bars), ratios)
    print("bench_report: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
