#!/bin/sh
# A process of an MPI job that fails ends the job, the others exiting with an error that
# names its rank, within a bounded time and never hanging (docs/mpi.md, "Failures").
# Usage: failures.sh TGRAPH MPIRUN PYTHON CASE (PYTHON with NumPy), CASE one of
#   input  rank 1 reads an input of the wrong shape and fails; rank 0 waits in a psum
#   crash  rank 1 dies of SIGSEGV while both run a pmap in a loop
#   kill   rank 1 is killed (SIGKILL) likewise
# Each must end within 60 s with a non-zero status, naming rank 1.
set -u
tgraph=$1
mpirun=$2
python=$3
case_=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/p.tg" <<'TG'
func main(xs: f64[2,1000]) {
  s = pmap(@body, xs, out_axes=[none], axis_name="b")
  return s
}
func body(x: f64[1000]) {
  return psum(sum(mul(x, x)), axis_name="b")
}
TG
"$python" - "$dir" <<'PY'
import sys, numpy as np
np.save(sys.argv[1] + "/good.npy", np.ones((2, 1000)))
np.save(sys.argv[1] + "/bad.npy", np.ones((3, 1000)))
PY
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# rank 1's command: its own input, or a signal from a child after a second of running
case $case_ in
input) r1='exec "$0" run "$1/p.tg" --in xs="$1/bad.npy"' ;;
crash) r1='(sleep 2; kill -SEGV $$) & exec "$0" run "$1/p.tg" --in xs="$1/good.npy" -n 100000000' ;;
kill) r1='(sleep 2; kill -KILL $$) & exec "$0" run "$1/p.tg" --in xs="$1/good.npy" -n 100000000' ;;
*) echo "failures.sh: unknown case '$case_'" >&2; exit 2 ;;
esac
script='if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then '"$r1"'; else exec "$0" run "$1/p.tg" --in xs="$1/good.npy" -n 100000000; fi'
start=$(date +%s)
timeout -k 10 90 "$mpirun" -np 2 sh -c "$script" "$tgraph" "$dir" > "$dir/out" 2>&1
status=$?
took=$(( $(date +%s) - start ))
cat "$dir/out"
echo "failures.sh: $case_: exit status $status after $took s"
hung=no
[ "$status" -eq 124 ] && hung=yes # timeout's own status: mpirun was still running
[ "$took" -gt 60 ] && hung=yes
if [ "$status" -eq 0 ] || [ "$hung" = yes ]; then
    echo "failures.sh: $case_: expected a failure within 60 s" >&2
    exit 1
fi
case $case_ in
input) want='MPI rank 1 failed' ;;
# mpirun's report of rank 1's death; under AddressSanitizer a SIGSEGV becomes ASan's
# report and exit status 1, which mpirun reports by the process's name, [[job,1],1]
*) want='rank 1 with PID [0-9]* on node .* exited on signal|Process name: \[\[[0-9]*,[0-9]*\],1\]' ;;
esac
if ! grep -Eq "$want" "$dir/out"; then
    echo "failures.sh: $case_: the output does not say '$want'" >&2
    exit 1
fi
echo "failures.sh: $case_: ok"
