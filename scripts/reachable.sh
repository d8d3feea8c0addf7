#!/usr/bin/env bash
# Run COMMAND where the users the system tests make (useradd) can reach this checkout.
#
# As root, a clone under a folder others cannot pass (root's home is 0700) failed every
# test that starts a user's process on the checkout's interpreter. Then COMMAND runs in
# a private mount namespace where that folder is a fresh tmpfs others may pass (0711),
# holding only the way down to the checkout, bound back at its own path: the same paths
# (the venv's and the editable install's stay true), the rest of the folder hidden from
# the run only. Nothing outside the namespace changes, and it ends with COMMAND however
# it ends. Otherwise (reachable, or not root) COMMAND runs as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd -P)

blocked=""
if [ "$(id -u)" = 0 ]; then
    dir=$here
    while [ "$dir" != / ]; do
        # The highest folder on the way that others cannot pass.
        if [ $(( $(stat -c '%a' "$dir" | sed 's/^.*\(.\)$/\1/') & 1 )) = 0 ]; then
            blocked=$dir
        fi
        dir=$(dirname "$dir")
    done
fi
if [ -z "$blocked" ]; then
    exec "$@"
fi

echo "reachable.sh: $blocked is not o+x: the run sees it as a tmpfs holding this checkout" >&2
exec unshare --mount --propagation private -- bash -euo pipefail -c '
    here=$1 blocked=$2
    shift 2
    keep=$(mktemp -d /run/adaptyst-top-checkout.XXXXXX)
    mount --bind "$here" "$keep"
    mount -t tmpfs -o mode=0711 adaptyst-top-reach "$blocked"
    mkdir -p "$here"
    # Each folder between them: passable by others, as the tmpfs is.
    dir=$here
    while [ "$dir" != "$blocked" ]; do chmod 0711 "$dir"; dir=$(dirname "$dir"); done
    mount --bind "$keep" "$here"
    umount "$keep" && rmdir "$keep"  # the checkout stays bound at its own path
    cd "$here"
    exec "$@"
' reachable "$here" "$blocked" "$@"
