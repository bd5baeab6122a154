#!/bin/bash
# check.sh SRC_DIR - fails when a file of src/ includes a header of a layer above its own.
#
# The layers, lowest first (docs/architecture.md): core, parallel, device, ir, ops, grad, rewrite,
# backend (plan.c and plan.h, then interp, vm, cjit), driver, text. A file may include
# headers of its own layer and of the layers below; include/tgraph.h, the public API, is
# open to all. Each `#include "..."` is resolved against the including file's folder.
set -u
src=$(cd "${1:?usage: check.sh SRC_DIR}" && pwd)

rank() { # rank of a path relative to src/, or -1 outside the layers
    case "$1" in
    core/*) echo 0 ;;
    parallel/*) echo 1 ;;
    device/*) echo 2 ;;
    ir/*) echo 3 ;;
    ops/*) echo 4 ;;
    grad/*) echo 5 ;;
    rewrite/*) echo 6 ;;
    backend/interp/*) echo 8 ;;
    backend/vm/*) echo 9 ;;
    backend/cjit/*) echo 10 ;;
    backend/*) echo 7 ;;
    driver/*) echo 11 ;;
    text/*) echo 12 ;;
    *) echo -1 ;;
    esac
}

bad=0
files=0
while IFS= read -r f; do
    files=$((files + 1))
    rel=${f#"$src"/}
    r=$(rank "$rel")
    if [ "$r" -lt 0 ]; then
        echo "layers: $rel: a folder of src/ that no layer holds (add it to tests/layers/check.sh and docs/architecture.md)"
        bad=1
        continue
    fi
    dir=$(dirname "$f")
    while IFS= read -r inc; do
        [ -n "$inc" ] || continue
        target=$(realpath -m "$dir/$inc")
        case "$target" in
        "$src"/*) ;;
        *) continue ;; # the public header, generated files, system headers
        esac
        trel=${target#"$src"/}
        tr=$(rank "$trel")
        if [ "$tr" -gt "$r" ]; then
            echo "layers: $rel includes $trel, a layer above its own"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "$src" -name '*.c' -o -name '*.h' | sort)

if [ "$files" -eq 0 ]; then
    echo "layers: no source file under $src"
    exit 1
fi
if [ "$bad" -ne 0 ]; then
    echo "layers: FAILED (docs/architecture.md says which layer may use which)"
    exit 1
fi
echo "layers: $files files, every include points to the same layer or one below"
