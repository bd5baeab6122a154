#!/bin/sh
# limits.sh - the CLI under a file-size limit and a termination signal.
#
# usage: limits.sh PATH/TO/tgraph
#
# Checks: `tgraph run --out NAME=PATH.npy` under `ulimit -f` exits 1 with one message
# naming the file and EFBIG (not killed by SIGXFSZ), leaves no partial or temporary file
# and keeps an older file as it was; `--mode c` under the same limit falls back to the VM
# and leaves no temporary file in the cache; SIGTERM while a (hanging) compiler runs ends
# tgraph as SIGTERM does and leaves neither the compiler nor a temporary file behind.
# Prints PASS/FAIL per check and ends with the line "N passed, N failed".

tgraph=$1
case $tgraph in
/*) ;;
*) tgraph=$(pwd)/$tgraph ;;
esac
if [ ! -x "$tgraph" ]; then
    echo "usage: limits.sh PATH/TO/tgraph" >&2
    exit 2
fi
data=$(cd "$(dirname "$0")" && pwd)/data
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tglim.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 2
mkdir -m 700 cache
TGRAPH_CACHE_DIR=$tmp/cache
export TGRAPH_CACHE_DIR
unset TGRAPH_CC TGRAPH_CFLAGS TGRAPH_CC_TIMEOUT

passed=0
failed=0
check() { # check NAME CONDITION...
    name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "PASS $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name"
    fi
}
no_tmp() { ! ls "$1" | grep -q 'tmp\.'; }

printf 'func main(x: f32[3]) {\n  bo = exp(broadcast_to(x, shape=[1000, 3]))\n  return bo\n}\n' >big.tg

# 1. the output does not fit: EFBIG named, no file
(ulimit -f 4 && exec "$tgraph" run big.tg --in x="$data/f32_3.npy" --out bo=bo.npy) 2>err.txt
rc=$?
check "ulimit: exit 1" [ "$rc" -eq 1 ]
check "ulimit: message names the file" grep -q "bo.npy: write error: File too large" err.txt
check "ulimit: one line" [ "$(wc -l <err.txt)" -eq 1 ]
check "ulimit: no partial file" [ ! -e bo.npy ]
check "ulimit: no temporary file" no_tmp .

# 2. an older file stays as it was
"$tgraph" run big.tg --in x="$data/f32_3.npy" --out bo=bo.npy 2>err.txt
size=$(wc -c <bo.npy)
(ulimit -f 4 && exec "$tgraph" run big.tg --in x="$data/f32_3.npy" --out bo=bo.npy) 2>err.txt
rc=$?
check "ulimit, older file: exit 1" [ "$rc" -eq 1 ]
check "ulimit, older file: kept whole" [ "$(wc -c <bo.npy)" -eq "$size" ]
check "ulimit, older file: no temporary file" no_tmp .
rm -f bo.npy

# 3. --mode c under the limit: the cache writer fails cleanly, the VM runs the graph
(ulimit -f 4 && exec "$tgraph" run big.tg --mode c --in x="$data/f32_3.npy" --out bo=bo.npy) \
    2>err.txt
rc=$?
check "ulimit, mode c: exit 1" [ "$rc" -eq 1 ]
check "ulimit, mode c: the fallback warned" grep -q "running 'main' with the vm backend" err.txt
check "ulimit, mode c: no temporary file in the cache" no_tmp cache

# 4. SIGTERM while the compiler hangs
cat >slowcc <<'EOS'
#!/bin/sh
case "$1" in --version) echo slowcc 1.0; exit 0;; esac
sleep 30 &
echo $! > "$TGLIM_PID"
sleep 30
EOS
chmod +x slowcc
TGLIM_PID=$tmp/pid TGRAPH_CC=$tmp/slowcc "$tgraph" run big.tg --mode c --in x="$data/f32_3.npy" \
    --out bo=bo.npy 2>err.txt &
pid=$!
i=0
while [ ! -s pid ] && [ $i -lt 500 ]; do
    sleep 0.02
    i=$((i + 1))
done
check "sigterm: the compiler started" [ -s pid ]
check "sigterm: temporary files while compiling" ls cache/tmp.* >/dev/null 2>&1
kill -TERM $pid
wait $pid
rc=$?
check "sigterm: ended by SIGTERM" [ "$rc" -eq 143 ]
check "sigterm: no temporary file in the cache" no_tmp cache
kid=$(cat pid)
i=0
while [ $i -lt 100 ] && [ -e /proc/$kid ] && ! grep -q ') Z' /proc/$kid/stat 2>/dev/null; do
    sleep 0.02
    i=$((i + 1))
done
check "sigterm: the compiler's group stopped" \
    sh -c "[ ! -e /proc/$kid ] || grep -q ') Z' /proc/$kid/stat"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
