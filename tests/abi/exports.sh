#!/bin/sh
# exports.sh - libtgraph.so exports exactly the public API: the defined dynamic symbols
# (functions and data, `nm -D --defined-only`) must be the names include/tgraph.h declares
# with TG_API, plus the few listed below with their reason. It names every symbol exported
# but not declared (an internal function leaking into the ABI) and every declaration not
# exported (a public function a program could not link with).
#
# The declarations are read from the header as the compiler sees it: preprocessed with
# TG_BUILDING_LIBRARY, so that TG_API marks each one with visibility("default"), and the
# X-macro lists (TG_UNARY_BUILDERS, ...) are expanded.
#
# usage: exports.sh LIBTGRAPH.so TGRAPH.h CC [NM]
# Exit status 0: they agree; 1: they differ; 2: a tool failed; 77 (ctest: skipped): no nm.
lib=$1
header=$2
cc=$3
nm=${4:-nm}

# Exported on purpose although tgraph.h does not declare them:
#   blas_memory_alloc, blas_memory_free: they take the place of OpenBLAS's buffer
#     allocator to lock its table (src/core/blas.c, docs/hardening.md); OpenBLAS
#     finds them through the dynamic symbol table. Built only with a shared OpenBLAS.
#   _init, _fini, _edata, _end, and names reserved to the implementation (__*, _[A-Z]*):
#     defined by the linker, the C runtime or a sanitizer's instrumentation, never by
#     tgraph's code.
allowed='blas_memory_alloc blas_memory_free _init _fini _edata _end'

if ! command -v "$nm" >/dev/null 2>&1; then
    if command -v nm >/dev/null 2>&1; then
        nm=nm
    else
        echo "SKIP: nm not found (Debian: binutils): the exported symbols are not checked"
        exit 77
    fi
fi
for f in "$lib" "$header"; do
    if [ ! -r "$f" ]; then
        echo "FAIL: cannot read $f"
        exit 2
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgexports.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# Declared: one declaration per ';'; those marked visibility("default") are TG_API's. The
# name is the last identifier before the parameter list (or before ';' for data).
if ! "$cc" -E -P -x c -DTG_BUILDING_LIBRARY "$header" >"$tmp/header.i" 2>"$tmp/cc.err"; then
    echo "FAIL: $cc cannot preprocess $header:"
    cat "$tmp/cc.err"
    exit 2
fi
tr '\n' ' ' <"$tmp/header.i" | tr ';' '\n' |
    grep 'visibility *( *"default" *)' |
    sed -e 's/.*visibility *( *"default" *) *) *)//' -e 's/(.*//' -e 's/\[.*//' \
        -e 's/[^A-Za-z0-9_]*$//' -e 's/.*[^A-Za-z0-9_]//' |
    sort -u >"$tmp/declared"
ndecl=$(wc -l <"$tmp/declared")
if [ "$ndecl" -lt 100 ]; then
    echo "FAIL: only $ndecl TG_API declarations found in $header (does TG_API still" \
        "expand to visibility(\"default\") under TG_BUILDING_LIBRARY?)"
    exit 2
fi

# Exported: defined dynamic symbols of any kind but absolute ones (version nodes).
if ! "$nm" -D --defined-only "$lib" >"$tmp/nm.out" 2>"$tmp/nm.err"; then
    echo "FAIL: $nm -D --defined-only $lib:"
    cat "$tmp/nm.err"
    exit 2
fi
awk 'NF >= 3 && $(NF - 1) != "A" { sub(/@.*/, "", $NF); print $NF }' "$tmp/nm.out" |
    sort -u >"$tmp/exported"
nexp=$(wc -l <"$tmp/exported")

status=0
comm -23 "$tmp/exported" "$tmp/declared" >"$tmp/extra"
while read -r s; do
    case " $allowed " in *" $s "*) continue ;; esac
    case $s in __* | _[A-Z]*) continue ;; esac
    echo "FAIL: $s is exported by $(basename "$lib") but not declared in tgraph.h"
    status=1
done <"$tmp/extra"
comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
while read -r s; do
    echo "FAIL: $s is declared TG_API in tgraph.h but not exported by $(basename "$lib")"
    status=1
done <"$tmp/missing"
echo "$nexp symbols exported, $ndecl declared in tgraph.h"
[ $status = 0 ] && echo "PASS: only the public API is exported"
exit $status
