#!/bin/sh
# run.sh - the benchmark driver behind `make bench`: runs every workload (W1-W13; W10b, the
# sampler's chains on devices; W10c, the data-parallel training step; W12 and W13, batched
# Cholesky plus solve and a Gaussian process's likelihood, from bench_linalg; PE, per-example
# gradients through vectorize; rw, the optimiser's compile time on long chains; scan-*,
# loops: docs/scan.md) for tgraph and for its peers (NumPy, SciPy, PyTorch, direct CBLAS
# calls) in this one invocation, in ROUNDS interleaved rounds (each round runs every
# program once, so slow phases of a busy machine hit all of them alike), then writes
# bench/results.md (a table per workload with tgraph's ratio to the best peer, and the
# suite's targets) and bench/results.svg (a bar chart of the ratios) through
# bench/report.py.
#
# usage: bench/run.sh [BUILD_DIR] [-n RUNS] [-r ROUNDS] [-o OUT.md]
#   BUILD_DIR  where the bench_* programs are built (default build/; `make bench` builds them)
#   RUNS       timed runs per configuration and round (default 10)
#   ROUNDS     interleaved rounds (default 3)
#   OUT.md     the table (default bench/results.md; the chart goes beside it, .svg)
#
# Adding a program: one line in the job list below, "WORKLOAD bin|py PROGRAM ARGS...":
# bin programs are $BUILD_DIR/bench/PROGRAM, py scripts bench/PROGRAM run with a python3
# that has NumPy (Debian's /usr/bin/python3 with python3-numpy; PyTorch, python3-torch, is
# timed where it imports: `make bench` installs it as root when missing, and a peer script
# without it prints a "skipped" line). Each prints result lines "NAME: median <t> <unit>,
# min <t> <unit> ..." (see bench_util.h); NAME starts with the workload, and its second word
# says whose time it is: numpy*, torch* or cblas* for a peer, anything else for tgraph.
# KEY=VALUE words in NAME (threads=2) pair tgraph's configurations with the peers they are
# compared with.
# A program that is not built, or a peer script without NumPy, is skipped with a note.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=build
runs=10
rounds=3
md=$here/results.md
case "${1:-}" in -*|"") ;; *) build=$1; shift ;; esac
while [ $# -gt 0 ]; do
    case "$1" in
    -n) runs=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -o) md=$2; shift 2 ;;
    *) echo "usage: bench/run.sh [BUILD_DIR] [-n RUNS] [-r ROUNDS] [-o OUT.md]" >&2; exit 2 ;;
    esac
done
svg=${md%.md}.svg

# The job list: WORKLOAD KIND PROGRAM ARGS ($runs is expanded when the list is read).
job_list() {
    cat <<EOF
w1 bin bench_w1 -n $runs
w1 py w1_peers.py -n $runs
w5 bin bench_w5
w6 bin bench_w6 -n $runs
w6 bin bench_w6 -n $runs --mode c
w6 py w6_peers.py -n $runs --threads 1
w6 py w6_peers.py -n $runs --threads 2
w8 bin bench_w8 -n $runs
w9 bin bench_w9 -n $runs
w9 bin bench_w9 -n $runs --mode c
w9 py w9_peers.py -n $runs --threads 1
w9 py w9_peers.py -n $runs --threads 2
w10b bin bench_w10b -n $runs
w10b py w10b_peers.py -n $runs
w10c bin bench_w10c -n $runs
w10c py w10c_peers.py -n $runs --threads 2
w11 bin bench_w11 --cold 3
w12 bin bench_linalg -n $runs
w12 py linalg_peers.py -n $runs --threads 1
w12 py linalg_peers.py -n $runs --threads 2
pe bin bench_pe -n $runs
w2 bin bench_blas -n $runs --side tg
w2 bin bench_blas -n $runs --side cblas
w2 py blas_peers.py -n $runs
rw bin bench_rewrite
scan bin bench_scan -n $runs
scan py scan_peers.py -n $runs
EOF
}

py=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then py=$p; break; fi
done
report_py=""
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1; then report_py=$p; break; fi
done
raw=$(mktemp "${TMPDIR:-/tmp}/tgbench.XXXXXX")
one=$(mktemp "${TMPDIR:-/tmp}/tgbench.XXXXXX")
trap 'rm -f "$raw" "$one"' EXIT

# the directory of OpenBLAS's pthread build, for the CBLAS peer (Debian: libopenblas0-pthread)
peer_blas=""
for d in /usr/lib/*/openblas-pthread /usr/lib/openblas-pthread; do
    if [ -e "$d/libopenblas.so.0" ]; then peer_blas="LD_LIBRARY_PATH=$d"; break; fi
done
[ -n "$peer_blas" ] || echo "note: OpenBLAS's pthread build not found; the CBLAS peer runs serial"

cores=$(nproc 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
echo "== tgraph benchmarks: $rounds rounds of $runs runs; $cores cores ($cpu); load $load0 =="
r=1
while [ "$r" -le "$rounds" ]; do
    echo "== round $r of $rounds =="
    job_list | while read -r wl kind prog args; do
        if [ "$kind" = bin ]; then
            if [ ! -x "$build/bench/$prog" ]; then
                echo "$wl $prog: skipped, not built in $build/bench (make bench)" | tee -a "$raw"
                continue
            fi
            set -- "$build/bench/$prog"
        else
            if [ -z "$py" ]; then
                echo "$wl $prog: skipped, no python3 with numpy (Debian: python3-numpy)" | tee -a "$raw"
                continue
            fi
            set -- "$py" "$here/$prog"
        fi
        # tgraph calls BLAS on one thread and splits the work itself: it links OpenBLAS's
        # serial build (CMakeLists.txt). The CBLAS peer is the same program with the pthread
        # build put in its place (same soname, found first through LD_LIBRARY_PATH), so that
        # it keeps OpenBLAS's threads; NumPy keeps its own.
        blas_env=""
        case "$kind $args" in bin*--side\ cblas*) blas_env=$peer_blas ;; esac
        # shellcheck disable=SC2086
        if env $blas_env "$@" $args >"$one" 2>&1; then st=0; else st=$?; fi
        [ "$st" -eq 0 ] || echo "$wl $prog $args: failed (exit status $st)" >>"$one"
        tee -a "$raw" <"$one"
    done
    r=$((r + 1))
done
if [ -x "$build/bench/bench_pool" ]; then
    echo "== thread pool dispatch (empty task; not part of the table) =="
    "$build/bench/bench_pool" --threads 2 || true
fi
if [ -x "$build/bench/bench_bcast" ]; then
    echo "== fused map over an input broadcast along rows / columns vs contiguous (not part of the table) =="
    "$build/bench/bench_bcast" || true
fi
if [ -x "$build/bench/bench_events" ]; then
    echo "== cross-device events between cpu:0 and cpu:1 (not part of the table) =="
    "$build/bench/bench_events" || true
fi
if [ -x "$build/bench/bench_comm" ]; then
    echo "== W11a: psum between 2 threads (src/parallel/comm.c) beside memcpy and a hand-written floor =="
    "$build/bench/bench_comm" || true
fi
# W11b and W10d (docs/mpi.md), in builds with MPI: 2 processes started by mpirun
mpirun_cmd=$(command -v mpirun || command -v mpiexec || true)
if [ -x "$build/bench/bench_w11b" ] && [ -n "$mpirun_cmd" ]; then
    echo "== W11b: psum across 2 MPI processes beside MPI_Allreduce (not part of the table) =="
    "$mpirun_cmd" --oversubscribe -np 2 "$build/bench/bench_w11b" || true
    echo "== W10d: the data-parallel step across 2 MPI processes against 1 (not part of the table) =="
    "$mpirun_cmd" --oversubscribe -np 2 "$build/bench/bench_w10d" -n "$runs" || true
fi
if [ -x "$build/bench/bench_devices" ]; then
    echo "== W10a: two branches on 2 host devices; sim devices with 1 ms transfers =="
    OPENBLAS_NUM_THREADS=1 "$build/bench/bench_devices" || true
fi
# The Python package (python/, built by `make python`; not part of the table): W5's
# per-call overhead from Python beside NumPy, and the Fashion-MNIST loop in Python vs C.
if [ -n "$py" ] && PYTHONPATH="$here/../python" "$py" -c 'import tgraph' 2>/dev/null; then
    echo "== W5 from Python (python/tgraph) beside NumPy; compare with 'w5 vm call' above =="
    PYTHONPATH="$here/../python" "$py" "$here/python_w5.py" || true
    PYTHONPATH="$here/../python" "$py" "$here/python_w5.py" --cpu || true
    [ -x "$build/bench/bench_w5" ] && "$build/bench/bench_w5" --cpu | grep 'vm call' || true
    echo "== the Fashion-MNIST loop in Python vs the C example =="
    PYTHONPATH="$here/../python" "$py" "$here/python_mnist.py" "$build" || true
    PYTHONPATH="$here/../python" "$py" "$here/python_mnist.py" "$build" --threads 1 || true
else
    echo "== Python package: skipped, not built (make python) =="
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

if [ -z "$report_py" ]; then
    echo "run.sh: no python3 to write $md; the result lines are above" >&2
    exit 0
fi
echo
"$report_py" "$here/report.py" "$raw" "$md" "$svg" \
    "date=$(date -u '+%Y-%m-%d %H:%M UTC')" "machine=$cores cores, $cpu" \
    "load average (1, 5, 15 min) before=$load0" "load average after=$load1" \
    "rounds x runs=$rounds x $runs" "tgraph=$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo ?)"
echo
echo "wrote $md and $svg"
