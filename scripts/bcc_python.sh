# Sourced by setup.sh and install_agent.sh: which interpreter a venv is built on.
# The distribution's bcc is a pure-Python package installed for the distribution's own
# interpreter (Debian: /usr/lib/python3/dist-packages for /usr/bin/python3; RHEL:
# /usr/lib/python3.9/site-packages for /usr/bin/python3.9). Whatever `python3` comes
# first in PATH (pyenv under root's 0700 home, a module, conda) may be unreadable to
# other users and was not what bcc was built for, so it is never taken by default.

# The folder of the distribution's bcc package, from the package manager's file list.
distro_bcc_dir() {
    local init=""
    if command -v dpkg >/dev/null 2>&1; then
        init=$(dpkg -L python3-bpfcc 2>/dev/null | grep -m1 '/bcc/__init__\.py$' || true)
    fi
    if [ -z "$init" ] && command -v rpm >/dev/null 2>&1; then
        init=$(rpm -ql python3-bcc 2>/dev/null | grep -m1 '/bcc/__init__\.py$' || true)
    fi
    [ -n "$init" ] && dirname "$init"
    return 0
}

# Where PY (isolated: no user site, no PYTHONPATH) imports bcc from, or nothing.
bcc_seen_by() {
    "$1" -I -c 'import os, bcc; print(os.path.dirname(os.path.realpath(bcc.__file__)))' 2>/dev/null || true
}

# The interpreter that imports the distribution's bcc from where the package put it:
# /usr/bin/python3, or /usr/bin/python3.X where the package's path names X.
distro_bcc_python() {
    local dir="$1" cand ver
    ver=$(printf '%s\n' "$dir" | sed -n 's|.*/python\(3\.[0-9][0-9]*\)/.*|\1|p')
    for cand in ${ver:+/usr/bin/python$ver} /usr/bin/python3 /usr/libexec/platform-python; do
        [ -x "$cand" ] || continue
        if [ "$(bcc_seen_by "$cand")" = "$(realpath "$dir")" ]; then
            printf '%s\n' "$cand"
            return 0
        fi
    done
    return 0
}

# Sets BCC_PY (the interpreter to build on) and BCC_DIR (empty when bcc is absent), or
# prints one line and returns 1. PYTHON, when set, must be that same interpreter.
choose_python() {
    BCC_DIR=$(distro_bcc_dir)
    if [ -z "$BCC_DIR" ]; then
        # No distribution bcc (not root, or no package): the system's interpreter when
        # there is one, so that the venv is still one every user can run.
        BCC_PY=${PYTHON:-}
        [ -n "$BCC_PY" ] || { [ -x /usr/bin/python3 ] && BCC_PY=/usr/bin/python3; } || BCC_PY=python3
        return 0
    fi
    BCC_PY=$(distro_bcc_python "$BCC_DIR")
    if [ -z "$BCC_PY" ]; then
        echo "no system interpreter imports the distribution's bcc from $BCC_DIR; reinstall python3-bpfcc" >&2
        return 1
    fi
    if [ -n "${PYTHON:-}" ] && [ "$(realpath "$(command -v "$PYTHON" || echo "$PYTHON")")" != "$(realpath "$BCC_PY")" ]; then
        echo "PYTHON=$PYTHON is not the interpreter the distribution's bcc belongs to ($BCC_PY): unset PYTHON or set it to $BCC_PY" >&2
        return 1
    fi
    return 0
}

# The interpreter a venv was built on (its pyvenv.cfg `executable`, or `home`/python3).
venv_base_python() {
    local cfg="$1/pyvenv.cfg" exe home
    [ -f "$cfg" ] || return 0
    exe=$(sed -n 's/^executable *= *//p' "$cfg")
    if [ -z "$exe" ]; then
        home=$(sed -n 's/^home *= *//p' "$cfg")
        exe="$home/python3"
    fi
    realpath "$exe" 2>/dev/null || printf '%s\n' "$exe"
}
