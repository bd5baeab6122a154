#!/bin/sh
# run.sh - runs one libFuzzer target for a while, then merges what it found into the
# committed corpus (minimised: only inputs that add coverage are kept).
#
# usage: tests/fuzz/run.sh TARGET SECONDS [BUILD]
#   TARGET   parse | npy | pipeline | idx
#   SECONDS  how long to fuzz (libFuzzer's -max_total_time)
#   BUILD    a build folder configured with -DTG_FUZZ=ON (default: build-fuzz; `make fuzz`
#            makes it)
# The run works in a scratch copy (tests/fuzz/work/TARGET, git-ignored by being outside
# the corpus) seeded from tests/fuzz/corpus/TARGET and the test files named below; crash
# reproducers are written to tests/fuzz/work/crash-TARGET-*. Replay one with
#   BUILD/tests/fuzz_TARGET FILE        (or the non-fuzz build's replay driver).
# Ends with libFuzzer's final statistics (executions, coverage) on stderr.
set -eu
target=${1:?usage: run.sh TARGET SECONDS [BUILD]}
seconds=${2:?usage: run.sh TARGET SECONDS [BUILD]}
build=${3:-build-fuzz}
cd "$(dirname "$0")/../.."
bin=$build/tests/fuzz_$target
[ -x "$bin" ] || { echo "run.sh: $bin not built (make fuzz)" >&2; exit 2; }
corpus=tests/fuzz/corpus/$target
work=tests/fuzz/work/$target
mkdir -p "$corpus" "$work"
case $target in
parse | pipeline)
    dict=tests/fuzz/tg.dict
    seeds="tests/golden tests/errors tests/parse examples"
    maxlen=4096 ;;
npy)
    dict=tests/fuzz/npy.dict
    seeds="tests/data/npy"
    maxlen=4096 ;;
idx)
    dict=""
    seeds=""
    maxlen=4096 ;;
*) echo "run.sh: unknown target '$target'" >&2; exit 2 ;;
esac
for d in $seeds; do
    find "$d" -maxdepth 2 -type f \( -name '*.tg' -o -name '*.npy' \) -exec cp {} "$work"/ \;
done
cp "$corpus"/* "$work"/ 2>/dev/null || true
nice -n 19 "$bin" "$work" -max_total_time="$seconds" -max_len=$maxlen -timeout=10 \
    -rss_limit_mb=2048 ${dict:+-dict=$dict} -print_final_stats=1 \
    -artifact_prefix=tests/fuzz/work/crash-$target-
# keep only what adds coverage to the committed corpus
"$bin" -merge=1 "$corpus" "$work" 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true
