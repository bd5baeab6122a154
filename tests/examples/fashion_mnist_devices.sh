#!/bin/sh
# fashion_mnist_devices.sh - the data-parallel Fashion-MNIST step (examples/fashion_mnist.c
# --devices N: a pmap of the step, its loss averaged over the devices with pmean, the
# gradient taken through it) follows the one-device run's loss curve: the loss of every
# step of a short run (--steps, --losses) on 2 and 4 devices equals the one-device loss
# within a relative 1e-5 (float rounding: each device sums its share of the batch, the
# collectives the shares).
#
# With MPIRUN (an mpirun command, docs/mpi.md), the runs are instead 2 processes with 1 and
# with 2 devices each ("2mpi" and "4mpi": the same global batch of 512 over 2 and 4 ranks
# spanning the processes), each against the one-process run on one device.
#
# usage: fashion_mnist_devices.sh PATH/TO/example_fashion_mnist [STEPS [MPIRUN]]
# Needs Debian's dataset-fashion-mnist (tests/CMakeLists.txt adds the test only then).
# Ends with one line per device count and exits non-zero on the first mismatch.
example=$1
steps=${2:-20}
mpirun=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgmnist.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
runs="1 2 4"
[ -n "$mpirun" ] && runs="1 2mpi 4mpi"
for n in $runs; do
    case $n in
    *mpi) launch="$mpirun -np 2" devices=$(( ${n%mpi} / 2 )) threads=1 ;;
    *) launch="" devices=$n threads=0 ;;
    esac
    set -- --devices "$devices" --steps "$steps" --losses "$tmp/loss$n.txt" --out "$tmp"
    [ "$threads" -gt 0 ] && set -- "$@" --threads "$threads"
    if ! $launch "$example" "$@" >"$tmp/out$n.txt" 2>&1; then
        cat "$tmp/out$n.txt"
        echo "FAIL: $launch --devices $devices exited with an error"
        exit 1
    fi
done
[ "$(wc -l <"$tmp/loss1.txt")" -eq "$steps" ] || { echo "FAIL: one device wrote no $steps losses"; exit 1; }
for n in $runs; do
    [ "$n" = 1 ] && continue
    awk -v n="$n" -v steps="$steps" '
        NR == FNR { one[$1] = $2; next }
        {
            got++
            a = one[$1] < 0 ? -one[$1] : one[$1]
            d = $2 - one[$1]
            if (d < 0) d = -d
            if (!($1 in one) || d > 1e-5 * a) {
                printf "FAIL: step %d: loss %s on %s devices, %s on one\n", $1, $2, n, one[$1]
                bad = 1
                exit 1
            }
            if (d / a > worst) worst = d / a
        }
        END {
            if (bad) exit 1
            if (got != steps) {
                printf "FAIL: %d losses on %s devices, expected %d\n", got, n, steps
                exit 1
            }
            printf "PASS: %s devices: the losses of %d steps are the one-device run\047s", n, steps
            printf " (largest relative difference %.2g)\n", worst
        }' "$tmp/loss1.txt" "$tmp/loss$n.txt" || exit 1
done
