#!/bin/sh
# run.sh - runs the benchmarks and prints tgraph's times beside its peers'.
#
# usage: bench/run.sh [BUILD_DIR] [-n RUNS]      (default build/, 20 runs)
# Needs bench_w1, bench_w5 and bench_pool built in BUILD_DIR (`make bench` builds them)
# and, for the peers, a python3 with NumPy (Debian: /usr/bin/python3 with python3-numpy;
# PyTorch is timed too when it imports). Everything runs in this one invocation, so the
# peers see the same machine load. Prints the result lines, then the ratios of W1:
#   tgraph median / best peer median   (below 1: tgraph is faster)
set -eu
build=${1:-build}
runs=20
if [ "${2:-}" = "-n" ] && [ -n "${3:-}" ]; then runs=$3; fi
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp "${TMPDIR:-/tmp}/tgbench.XXXXXX")
trap 'rm -f "$out"' EXIT

for b in bench_w1 bench_w5; do
    if [ ! -x "$build/bench/$b" ]; then
        echo "run.sh: $build/bench/$b is missing: build first (make bench)" >&2
        exit 2
    fi
done
py=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then py=$p; break; fi
done

echo "== W1: exp(-x^2/2)*sin(x) + x/2, 1e7 float64, $runs runs (cores: $(nproc 2>/dev/null || echo ?)) =="
"$build/bench/bench_w1" -n "$runs" | tee -a "$out"
if [ -n "$py" ]; then
    "$py" "$here/w1_peers.py" -n "$runs" | tee -a "$out"
else
    echo "(no python3 with numpy: peers skipped)"
fi
echo "== W5: 10 elementwise ops on 10-element vectors, calls from C =="
"$build/bench/bench_w5"
if [ -x "$build/bench/bench_pool" ]; then
    echo "== thread pool dispatch (empty task) =="
    "$build/bench/bench_pool" --threads 2
fi

echo "== W1 ratios: tgraph / best peer (median; below 1 is faster) =="
awk '
/^w1 .*: median / {
    name = $0; sub(/: median.*/, "", name)
    med = $0; sub(/.*: median /, "", med); sub(/ ms.*/, "", med)
    if (name ~ /^w1 vm/) { tg[name] = med + 0; order[++n] = name }
    else if (best == "" || med + 0 < best) { best = med + 0; bestname = name }
}
END {
    if (best == "") { print "no peer timings"; exit }
    printf "best peer: %s, %.3f ms\n", bestname, best
    for (i = 1; i <= n; i++)
        printf "%-40s %9.3f ms  %.2fx\n", order[i], tg[order[i]], tg[order[i]] / best
}' "$out"
