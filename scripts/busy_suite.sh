#!/bin/bash
# The suite on a busy machine (issue #52): a fresh clone of this checkout in
# /tmp/adt-busy (other users must reach it: see docs/development.md), one busy loop
# per core beside it, and with --uprobe another tool's uprobe on libc's
# clock_nanosleep (bpftrace), then `make test`. Prints make's status and wall time;
# the log is /tmp/adt-busy.log. As root, as CI runs the suite.
#   scripts/busy_suite.sh [--uprobe]
set -u
src=$(git rev-parse --show-toplevel)
clone=/tmp/adt-busy
log=/tmp/adt-busy.log
rm -rf "$clone"
git clone -q "$src" "$clone" && chmod 0755 "$clone" && cd "$clone" || exit 1
pids=()
for _ in $(seq "$(nproc)"); do
    sh -c 'while :; do :; done' &
    pids+=($!)
done
if [ "${1:-}" = --uprobe ]; then
    libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
    bpftrace -e "uprobe:$libc:clock_nanosleep { @n = count(); }" >/dev/null 2>&1 &
    pids+=($!)
    sleep 5  # attached before the suite starts
fi
trap 'kill -INT "${pids[@]}" 2>/dev/null; kill "${pids[@]}" 2>/dev/null' EXIT
start=$(date +%s)
make test >"$log" 2>&1
status=$?
echo "make test: status $status, $(( $(date +%s) - start )) s beside ${#pids[@]} busy process(es); log: $log"
exit "$status"
