#!/usr/bin/env bash
# Runs "$@" as a node with only the built package would: no C compiler (clang, llc) and
# no kernel headers (/lib/modules/$(uname -r)/build, source), hidden in a private mount
# namespace that ends with the command; nothing outside it changes. Issue 73: the tool
# and its suite need neither at run time (docs/bpf.md). As root only; otherwise "$@" as is.
set -euo pipefail
if [[ $(id -u) -ne 0 || ${ADAPTYST_NO_COMPILER_INSIDE:-} == 1 ]]; then
    exec "$@"
fi
export ADAPTYST_NO_COMPILER_INSIDE=1
exec unshare --mount --propagation private -- bash -c '
    set -euo pipefail
    hidden=()
    for d in "/lib/modules/$(uname -r)/build" "/lib/modules/$(uname -r)/source"; do
        real=$(readlink -f "$d" 2>/dev/null || true)
        if [[ -n $real && -d $real ]]; then
            mount -t tmpfs -o ro,size=4k none "$real"
            hidden+=("$d")
        fi
    done
    IFS=: read -ra dirs <<< "$PATH"
    for dir in "${dirs[@]}"; do
        for exe in "$dir"/clang "$dir"/clang-[0-9]* "$dir"/llc "$dir"/llc-[0-9]*; do
            real=$(readlink -f "$exe" 2>/dev/null || true)
            if [[ -n $real && -f $real && -x $real ]]; then
                mount --bind /dev/null "$real"  # not executable: which() finds nothing
                hidden+=("$exe")
            fi
        done
    done
    echo "no_compiler.sh: hidden ${#hidden[@]}: ${hidden[*]:-nothing was there}" >&2
    exec "$@"
' no_compiler "$@"
