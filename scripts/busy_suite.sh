#!/bin/bash
# The suite on a busy machine (issues #52, #76): a fresh clone of this checkout in a new
# folder under /tmp (mktemp: other users must reach it, see docs/development.md, and
# none may have made it first), busy loops beside it (one per core unless --loops N),
# and with --uprobe another tool's uprobe program on libc's clock_nanosleep (bpftrace),
# then `make test`, --runs N times in a row (a fresh clone each). Prints each run's make
# status and wall time, and where its log is. Stops at the first failing run. As root,
# as CI runs the suite. --in DIR: the clone's folder is made in DIR instead (root's
# 0700 home: the suite must pass from a clone other users cannot reach).
#   scripts/busy_suite.sh [--uprobe] [--loops N] [--runs N] [--in DIR]
set -u
src=$(git rev-parse --show-toplevel)
loops=$(nproc) runs=1 uprobe=0 under=/tmp
while [ $# -gt 0 ]; do
    case $1 in
        --uprobe) uprobe=1 ;;
        --loops) loops=$2; shift ;;
        --runs) runs=$2; shift ;;
        --in) under=$2; shift ;;
        *) echo "usage: $0 [--uprobe] [--loops N] [--runs N] [--in DIR]" >&2; exit 2 ;;
    esac
    shift
done
work=$(mktemp -d "$under/adt-busy.XXXXXX") && chmod 0755 "$work" || exit 1
clone=$work/clone
pids=()
trap 'kill -INT "${pids[@]}" 2>/dev/null; kill "${pids[@]}" 2>/dev/null; rm -rf "$clone"' EXIT
for _ in $(seq "$loops"); do
    sh -c 'while :; do :; done' &
    pids+=($!)
done
if [ "$uprobe" = 1 ]; then
    libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
    bpftrace -e "uprobe:$libc:clock_nanosleep { @n = count(); }" >/dev/null 2>&1 &
    pids+=($!)
    sleep 5  # attached before the suite starts
fi
for run in $(seq "$runs"); do
    log=$work/$run.log
    rm -rf "$clone"
    git clone -q "$src" "$clone" && chmod 0755 "$clone" || exit 1
    start=$(date +%s)
    (cd "$clone" && make test >"$log" 2>&1)
    status=$?
    echo "run $run at $(git -C "$clone" rev-parse --short HEAD): make test status $status," \
        "$(( $(date +%s) - start )) s beside $loops busy loop(s), uprobe=$uprobe; log: $log"
    [ "$status" = 0 ] || exit "$status"
done
