#!/bin/sh
# run.sh - tgraph under an address-space limit (ulimit -v): it must start, fail an
# allocation with a message, and exit, never hang. The pthread build of OpenBLAS starts a
# worker thread as it loads; under such a limit that worker blocks allocating its buffer
# and the process waits for it forever at exit. tgraph links the serial build (no BLAS
# thread at all), which this test also checks with ldd.
#
# usage: run.sh PATH/TO/tgraph SERIAL    (SERIAL: 1 when built with TG_BLAS_SERIAL)
# Ends with the line "N passed, N failed". Not run under sanitizers (their shadow memory
# does not fit in a small address space).
tgraph=$1
serial=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tglimits.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }

if [ "$serial" = 1 ] && command -v ldd >/dev/null 2>&1; then
    if ldd "$tgraph" | grep -q 'openblas-pthread'; then
        bad "ldd: the pthread OpenBLAS is loaded: $(ldd "$tgraph" | grep blas)"
    elif ldd "$tgraph" | grep -q 'openblas-serial'; then
        ok "ldd: the serial OpenBLAS is loaded"
    else
        bad "ldd: no serial OpenBLAS among: $(ldd "$tgraph" | grep -i blas)"
    fi
fi

# 1. --version in 100 MB of address space exits at once
out=$( (ulimit -v 100000 && timeout 30 "$tgraph" --version) 2>&1)
st=$?
if [ $st -eq 0 ]; then ok "--version under ulimit -v 100000"; else bad "--version under ulimit -v 100000: exit $st: $out"; fi

# 2. a run whose allocation fails under 200 MB says so and exits non-zero
out=$( (ulimit -v 200000 && timeout 60 "$tgraph" run "$here/big.tg" --in "x=$here/x8.npy" \
    --out "z=$tmp/z.npy") 2>&1)
st=$?
case "$st:$out" in
1:*"out of memory"*) ok "failed allocation under ulimit -v 200000" ;;
*) bad "failed allocation under ulimit -v 200000: exit $st: $out" ;;
esac
[ ! -e "$tmp/z.npy" ] || bad "a failed run left its output file"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
