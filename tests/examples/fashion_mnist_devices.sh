#!/bin/sh
# fashion_mnist_devices.sh - the data-parallel Fashion-MNIST step (examples/fashion_mnist.c
# --devices N: a pmap of the step, its loss averaged over the devices with pmean, the
# gradient taken through it) follows the one-device run's loss curve: the loss of every
# step of a short run (--steps, --losses) on 2 and 4 devices equals the one-device loss
# within a relative 1e-5 (float rounding: each device sums its share of the batch, the
# collectives the shares).
#
# usage: fashion_mnist_devices.sh PATH/TO/example_fashion_mnist [STEPS]
# Needs Debian's dataset-fashion-mnist (tests/CMakeLists.txt adds the test only then).
# Ends with one line per device count and exits non-zero on the first mismatch.
example=$1
steps=${2:-20}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgmnist.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
for n in 1 2 4; do
    if ! "$example" --devices "$n" --steps "$steps" --losses "$tmp/loss$n.txt" --out "$tmp" \
        >"$tmp/out$n.txt" 2>&1; then
        cat "$tmp/out$n.txt"
        echo "FAIL: --devices $n exited with an error"
        exit 1
    fi
done
[ "$(wc -l <"$tmp/loss1.txt")" -eq "$steps" ] || { echo "FAIL: one device wrote no $steps losses"; exit 1; }
for n in 2 4; do
    awk -v n="$n" -v steps="$steps" '
        NR == FNR { one[$1] = $2; next }
        {
            got++
            a = one[$1] < 0 ? -one[$1] : one[$1]
            d = $2 - one[$1]
            if (d < 0) d = -d
            if (!($1 in one) || d > 1e-5 * a) {
                printf "FAIL: step %d: loss %s on %d devices, %s on one\n", $1, $2, n, one[$1]
                bad = 1
                exit 1
            }
            if (d / a > worst) worst = d / a
        }
        END {
            if (bad) exit 1
            if (got != steps) {
                printf "FAIL: %d losses on %d devices, expected %d\n", got, n, steps
                exit 1
            }
            printf "PASS: %d devices: the losses of %d steps are the one-device run\047s", n, steps
            printf " (largest relative difference %.2g)\n", worst
        }' "$tmp/loss1.txt" "$tmp/loss$n.txt" || exit 1
done
