#!/bin/sh
# demo.sh - runs the shipped example end to end with the tgraph command-line tool:
# the forward pass of a small MLP with a softmax cross-entropy loss (mlp_forward.tg) on
# the inputs committed in examples/data/ (no Python needed).
#
# usage: sh examples/demo.sh PATH/TO/tgraph        (`make demo` passes build/tgraph)
set -e
tgraph=${1:-build/tgraph}
if [ ! -x "$tgraph" ]; then
    echo "demo.sh: '$tgraph' is not an executable: build tgraph first (make)" >&2
    exit 2
fi
dir=$(dirname "$0")
data=$dir/data

echo "== the program: $dir/mlp_forward.tg"
grep -v '^#' "$dir/mlp_forward.tg"
echo
echo "== tgraph run (default backend); outputs printed NumPy-style"
"$tgraph" run "$dir/mlp_forward.tg" \
    --in x="$data/x.npy" --in W1="$data/W1.npy" --in b1="$data/b1.npy" \
    --in W2="$data/W2.npy" --in b2="$data/b2.npy" --in y="$data/y.npy"
echo
echo "== the same run writing the loss to a .npy file (--out NAME=PATH)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgdemo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$tgraph" run "$dir/mlp_forward.tg" \
    --in x="$data/x.npy" --in W1="$data/W1.npy" --in b1="$data/b1.npy" \
    --in W2="$data/W2.npy" --in b2="$data/b2.npy" --in y="$data/y.npy" \
    --out loss="$tmp/loss.npy" --out probs="$tmp/probs.npy"
ls -l "$tmp"
echo
echo "== tgraph opt: the graph after the rewrite pipeline (valid .tg text)"
"$tgraph" opt "$dir/mlp_forward.tg"
echo
echo "== examples/logreg.c: a training loop with state (mut W, W <- ...) and random minibatches"
logreg=$(dirname "$tgraph")/example_logreg
if [ -x "$logreg" ]; then
    "$logreg" 300
else
    echo "(example_logreg is not built next to $tgraph: skipped)"
fi
echo
echo "demo: ok"
