#!/bin/sh
# run.sh - runs every user-error case of this folder through the tgraph CLI.
#
# usage: run.sh PATH/TO/tgraph [CASE.tg ...]
#
# Each case is a .tg file whose header (the comment lines at its top) says how to run it
# and what to expect:
#   # ARGS: run %s --in x=%d/f32_3.npy   arguments; %s = the case file, %d = data/,
#                                        %t = a scratch folder (removed afterwards)
#   # ERROR: text                        stderr must contain text (several lines allowed)
#   # EXIT: 1                            exact exit status (default: any in 1..127)
#   # LINES: 1                           lines stderr must have (default 1)
#   # ENV: NAME=value                    an environment variable for the run (repeatable)
# A case passes when tgraph fails cleanly: non-zero exit below 128 (no crash, no signal,
# no timeout), a one-line message on stderr holding every ERROR text. The input files
# live in data/ (small committed .npy files), so the suite needs no Python.
# Prints PASS/FAIL per case and ends with the line "N passed, N failed".

tgraph=$1
if [ -z "$tgraph" ]; then
    echo "usage: run.sh PATH/TO/tgraph [CASE.tg ...]" >&2
    exit 2
fi
shift
case $tgraph in
/*) ;;
*) tgraph=$(pwd)/$tgraph ;;
esac
if [ ! -x "$tgraph" ]; then
    echo "run.sh: '$tgraph' is not an executable" >&2
    exit 2
fi
cd "$(dirname "$0")" || exit 2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgerr.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

runner=""
if command -v timeout >/dev/null 2>&1; then
    runner="timeout 30"
fi

if [ $# -eq 0 ]; then
    set -- *.tg
fi

passed=0
failed=0
nl='
'
for case_file in "$@"; do
    name=${case_file%.tg}
    # the header: comment lines at the top of the file (read without subprocesses)
    args=""
    envs=""
    want_exit=""
    want_lines=1
    errors=""
    while IFS= read -r line; do
        case $line in
        "# ARGS: "*) [ -n "$args" ] || args=${line#"# ARGS: "} ;;
        "# ERROR: "*) errors="$errors${errors:+$nl}${line#"# ERROR: "}" ;;
        "# EXIT: "*) want_exit=${line#"# EXIT: "} ;;
        "# LINES: "*) want_lines=${line#"# LINES: "} ;;
        "# ENV: "*) envs="$envs ${line#"# ENV: "}" ;;
        "#"*) ;;
        *) break ;;
        esac
    done <"$case_file"
    why=""
    if [ -z "$args" ] || [ -z "$errors" ]; then
        why="the case has no '# ARGS:' or no '# ERROR:' line"
    else
        scratch=$tmp/$name
        mkdir -p "$scratch"
        args=$(printf '%s\n' "$args" | sed -e "s|%s|$case_file|g" -e "s|%d|data|g" \
            -e "s|%t|$scratch|g")
        set -f
        # shellcheck disable=SC2086 # word splitting of the ARGS line is intended
        $runner env $envs "$tgraph" $args >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
        rc=$?
        set +f
        nlines=$(grep -c '' "$tmp/stderr") # counts a last line without a newline too
        if [ "$rc" -eq 0 ]; then
            why="exited with status 0, expected a failure"
        elif [ "$rc" -eq 124 ] && [ -n "$runner" ]; then
            why="timed out"
        elif [ "$rc" -ge 128 ]; then
            why="crashed (exit status $rc: killed by signal $((rc - 128)))"
        elif [ -n "$want_exit" ] && [ "$rc" -ne "$want_exit" ]; then
            why="exit status $rc, expected $want_exit"
        else
            old_ifs=$IFS
            IFS=$nl
            for e in $errors; do
                if ! grep -qF -- "$e" "$tmp/stderr"; then
                    why="stderr lacks '$e'"
                    break
                fi
            done
            IFS=$old_ifs
            if [ -z "$why" ] && [ "$nlines" -ne "$want_lines" ]; then
                why="stderr has $nlines lines, expected $want_lines"
            fi
        fi
    fi
    if [ -z "$why" ]; then
        passed=$((passed + 1))
        echo "PASS $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name: $why"
        echo "     command: tgraph $args"
        if [ -s "$tmp/stderr" ]; then
            sed -e 's/^/     stderr: /' "$tmp/stderr" | head -n 20
        else
            echo "     stderr: (empty)"
        fi
    fi
    rm -f "$tmp/stdout" "$tmp/stderr"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
