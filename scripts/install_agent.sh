#!/usr/bin/env bash
# An admin's one command for a node's agent (as root; runnable again to update):
# a venv at PREFIX on the distribution's own python3, the package installed into it, the systemd unit pointing at it, a commented agent.toml when there
# is none, and the service enabled where systemd runs (otherwise the command to start it).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bcc_python.sh
. scripts/bcc_python.sh  # venv_base_python
PREFIX=${PREFIX:-/opt/adaptyst-top}
UNITDIR=${UNITDIR:-/etc/systemd/system}
CONFDIR=${CONFDIR:-/etc/adaptyst-top}
UNIT=adaptyst-top-agent.service

say() { printf 'install-agent: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (the agent attaches probes for every user of the node)"
case $PREFIX in /*) ;; *) die "PREFIX must be an absolute path, not $PREFIX" ;; esac
# Every user runs PREFIX/bin/adaptyst-top: each folder on the way must let others pass.
# Root runs it too (the agent): each must be root's, and none writable by others unless
# sticky (/tmp), or another user could plant the agent's code (a PREFIX made before).
reach=$PREFIX
while :; do
    if [ -e "$reach" ]; then
        mode=$(stat -L -c %a "$reach")
        owner=$(stat -L -c %u "$reach")
        m=$((8#$mode))
        [ $((m & 1)) -ne 0 ] ||
            die "users could not run $PREFIX/bin/adaptyst-top: $reach is mode $mode (others may not pass); choose a PREFIX every user can reach, such as /opt/adaptyst-top"
        [ "$owner" = 0 ] ||
            die "$reach belongs to uid $owner, not root: the agent's code must be root's alone; choose a PREFIX such as /opt/adaptyst-top"
        [ $((m & 8#022)) -eq 0 ] || [ $((m & 8#1000)) -ne 0 ] ||
            die "$reach is writable by others (mode $mode): the agent's code must be root's alone; choose a PREFIX such as /opt/adaptyst-top"
    fi
    [ "$reach" = / ] && break
    reach=$(dirname "$reach")
done
umask 022  # the venv is run by every user of the node, the agent's clients included

# System packages and tracefs: the agent's part of setup only. clang and libbpf-dev
# build the BPF programs with the package (below); libbpf1 and the kernel's BTF load
# them. No kernel headers, no bcc (nothing of the agent compiles at run time).
SETUP_PACKAGES="python3-venv systemtap-sdt-dev gcc libc6-dev clang libbpf-dev libbpf1" \
    ./scripts/setup.sh --system-only

# The distribution's interpreter, never whatever `python3` comes first in PATH: a
# module's, conda's or pyenv's under root's home may vanish or be unreadable to users.
AGENT_PY=/usr/bin/python3
[ -x "$AGENT_PY" ] || die "$AGENT_PY is missing: install the distribution's python3"
if [ -x "$PREFIX/bin/python" ]; then
    base=$(venv_base_python "$PREFIX")
    [ "$base" = "$(realpath "$AGENT_PY")" ] ||
        die "$PREFIX is a venv on $base, not on $AGENT_PY (the distribution's): remove it, then run this again"
    say "ok: $PREFIX (on $AGENT_PY)"
    rm -f "$PREFIX"/lib/python3*/site-packages/distro-bcc.pth  # an install's before bcc left it
    rm -rf "$PREFIX/distro-bcc"
elif [ -e "$PREFIX" ] && [ -n "$(ls -A "$PREFIX")" ]; then
    die "$PREFIX exists and is not a venv: choose another PREFIX or remove it"
else
    say "creating $PREFIX on $AGENT_PY ($("$AGENT_PY" --version 2>&1), the distribution's)"
    "$AGENT_PY" -m venv "$PREFIX"
fi
say "installing adaptyst-top into $PREFIX"
"$PREFIX/bin/python" -m pip install -q --disable-pip-version-check --upgrade .

DOCDIR=$PREFIX/share/doc/adaptyst-top  # what the unit's Documentation= names
install -d "$DOCDIR"
install -m 0644 README.md docs/*.md "$DOCDIR/"

mkdir -p "$UNITDIR"
sed -e "s|^ExecStart=.*|ExecStart=$PREFIX/bin/adaptyst-top agent --config $CONFDIR/agent.toml|" \
    -e "s|^Documentation=.*|Documentation=file://$DOCDIR/agent.md file://$DOCDIR/install.md|" \
    systemd/$UNIT > "$UNITDIR/$UNIT.new"
chmod 0644 "$UNITDIR/$UNIT.new"
mv -f "$UNITDIR/$UNIT.new" "$UNITDIR/$UNIT"
say "unit: $UNITDIR/$UNIT"

mkdir -p "$CONFDIR"
if [ -e "$CONFDIR/agent.toml" ]; then
    say "ok: $CONFDIR/agent.toml kept as it is"
else
    install -m 0644 systemd/agent.toml "$CONFDIR/agent.toml"
    say "config: $CONFDIR/agent.toml (every key commented out: the defaults)"
fi

if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && [ "$UNITDIR" = /etc/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable "$UNIT" >/dev/null
    systemctl restart "$UNIT"
    say "started: systemctl status $UNIT"
else
    say "systemd is not running here; start the agent with: $PREFIX/bin/adaptyst-top agent --config $CONFDIR/agent.toml"
fi
say "users run $PREFIX/bin/adaptyst-top, which finds this agent by itself; to let them type"
say "  adaptyst-top alone: ln -s $PREFIX/bin/adaptyst-top /usr/local/bin/adaptyst-top"
