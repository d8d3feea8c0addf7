#!/usr/bin/env bash
# Run COMMAND where the users the system tests make (useradd) can reach this checkout.
#
# As root, a clone under a folder others cannot pass (root's home is 0700) failed every
# test that starts a user's process on the checkout's interpreter. Then COMMAND runs in
# a private mount namespace where that folder is a tmpfs others may pass (0711) with
# each of its entries bound back in it: the same paths everywhere (the venv's and the
# editable install's stay true), only the folder's own mode differs, for this run. A
# folder below it that is 0700 too is not opened. Nothing outside the namespace changes,
# and it ends with COMMAND however it ends. Otherwise (reachable, or not root) COMMAND
# runs as it is.
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

echo "reachable.sh: $blocked is not o+x: the run sees it as a passable tmpfs with its entries bound back" >&2
exec unshare --mount --propagation private -- bash -euo pipefail -c '
    here=$1 blocked=$2
    shift 2
    keep=$(mktemp -d /run/adaptyst-top-reach.XXXXXX)
    mount --bind "$blocked" "$keep"
    mount -t tmpfs -o mode=0711 adaptyst-top-reach "$blocked"
    # Every entry of the folder as it was, bound back: only the folder itself is new
    # (root'"'"'s Pythons under ~/.pyenv, its caches, the checkout all where they were).
    for entry in "$keep"/* "$keep"/.[!.]* "$keep"/..?*; do
        [ -e "$entry" ] || [ -L "$entry" ] || continue
        name=${entry##*/}
        if [ -L "$entry" ]; then
            cp -P "$entry" "$blocked/$name"
        elif [ -d "$entry" ]; then
            mkdir "$blocked/$name" && mount --bind "$entry" "$blocked/$name"
        else
            touch "$blocked/$name" && mount --bind "$entry" "$blocked/$name"
        fi
    done
    umount -l "$keep" && rmdir "$keep"
    cd "$here"
    exec "$@"
' reachable "$here" "$blocked" "$@"
