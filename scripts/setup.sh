#!/usr/bin/env bash
# Brings a fresh Debian/Ubuntu machine to the point where adaptyst-top runs with
# real eBPF: clang and libbpf-dev to build its BPF programs with the package, libbpf1
# to load them (no kernel headers: the kernel's BTF), tracefs, and a virtualenv that
# sees the distribution's `bcc` module alone (bcc's tools are the benchmarks' peers).
# Idempotent: every step checks first and says "ok" when there is nothing to do.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/bcc_python.sh
. scripts/bcc_python.sh
VENV=${VENV:-.venv}
# openssh-server and passwd (useradd): the agent's tests run a real sshd and real users;
# slurmctld, slurmd, munge and slurm-client: --job's tests run a real one-node Slurm;
# prometheus (with promtool): the agent's metrics are scraped by a real one.
# podman and runc: a probe on a process in a real container (runc: this machine's cgroups
# are hybrid, which crun refuses).
# rustc: a Rust target's functions probed by their demangled names.
# pocl-opencl-icd: the OpenCL CPU device the placement runs on. pip's PoCL 3.0 (LLVM 14)
# builds nothing on a CPU its LLVM does not know (a Zen 5: "unknown target CPU
# 'generic'"); Debian's 3.1 picks its code generation target by the CPU's features.
# opencl-c-headers: the OpenCL layer that times kernels (cl_layer.h) is built with them;
# clpeak: an OpenCL program nobody here wrote, whose kernels the tests count.
# debuginfod: elfutils' server, which the tests start to serve a debug file they made.
# mpich, libmpich-dev: a real MPI job (srun with Slurm's PMI-2) whose ranks are counted
# apart, and the mpi: probes on libmpich.
# clang, libbpf-dev: the BPF programs are compiled once, when the package is built
# (setup.py); the node then needs only libbpf1 and the kernel's BTF to load them.
APT_PACKAGES=(clang libbpf-dev libbpf1 python3-bpfcc bpfcc-tools systemtap-sdt-dev opencl-c-headers clpeak tmux gcc g++ libc6-dev gfortran
    openssh-server openssh-client passwd slurmctld slurmd munge slurm-client prometheus
    htop podman runc rustc pocl-opencl-icd python3-venv bpftrace systemd util-linux
    debuginfod iproute2 binutils mpich libmpich-dev)
# install_agent.sh asks for the agent's packages alone, and the system part only.
[ -n "${SETUP_PACKAGES:-}" ] && read -r -a APT_PACKAGES <<< "$SETUP_PACKAGES"
SYSTEM_ONLY=0
[ "${1:-}" = --system-only ] && SYSTEM_ONLY=1

say() { printf 'setup: %s\n' "$*"; }

is_root() { [ "$(id -u)" -eq 0 ]; }

missing_packages() {
    local p out=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
    done
    printf '%s\n' "${out[@]}"
}

apt_install() {
    # apt-get update only when something is really missing, so that a second
    # run touches nothing.
    if [ -z "${APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

system_packages() {
    local todo
    mapfile -t todo < <(missing_packages "${APT_PACKAGES[@]}")
    if [ "${#todo[@]}" -gt 0 ] && [ -n "${todo[0]}" ]; then
        say "installing ${todo[*]}"
        apt_install "${todo[@]}"
    else
        say "ok: system packages (${APT_PACKAGES[*]})"
    fi
}

tracefs() {
    if [ -e /sys/kernel/tracing/uprobe_events ]; then
        say "ok: tracefs mounted"
    elif mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
        say "mounted tracefs on /sys/kernel/tracing"
    else
        say "WARNING: could not mount tracefs on /sys/kernel/tracing"
    fi
}

venv() {
    choose_python || exit 1
    if [ -x "$VENV/bin/python" ]; then
        local base
        base=$(venv_base_python "$VENV")
        if [ "$base" != "$(realpath "$BCC_PY")" ]; then
            say "$VENV was built on $base, not on $BCC_PY (the interpreter the distribution's bcc belongs to): run \`make clean setup\`"
            exit 1
        fi
    else
        say "creating $VENV on $BCC_PY ($("$BCC_PY" --version 2>&1)${BCC_DIR:+, the interpreter of $BCC_DIR})"
        "$BCC_PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.installed"
    # The C extensions are built by the install: their sources count too.
    local newer=""
    if [ -f "$stamp" ]; then
        newer=$(find pyproject.toml setup.py tests/constraints.txt src/adaptyst_top/placement/_sdt.c \
            src/adaptyst_top/collectors/probes/kinds/opencl_layer.c \
            src/adaptyst_top/collectors/probes/kinds/python_layer.c \
            src/adaptyst_top/collectors/probes/kinds/cuda_inject.c \
            src/adaptyst_top/collectors/probes/kinds/cupti_open.[ch] \
            src/adaptyst_top/collectors/probes/kinds/layer_common.h \
            src/adaptyst_top/collectors/probes/kinds/*.bpf.c src/adaptyst_top/collectors/probes/bpf \
            src/adaptyst_top/collectors/profile/*.bpf.c src/adaptyst_top/collectors/profile/python/*.bpf.h \
            src/adaptyst_top/placement/include -newer "$stamp" 2>/dev/null | head -1 || true)
    fi
    if [ ! -f "$stamp" ] || [ -n "$newer" ]; then
        say "installing adaptyst-top and its dependencies into $VENV"
        "$VENV/bin/python" -m pip install -q --upgrade pip
        "$VENV/bin/python" -m pip install -q -e '.[test,demo,bench,dask]' -c tests/constraints.txt
        touch "$stamp"
    else
        say "ok: $VENV (on $BCC_PY) is up to date"
    fi
}

bcc_in_venv() {
    # Debian's bcc is pure Python over libbcc; PyPI's "bcc" is an unrelated project.
    # Expose that one package alone (not all of dist-packages) through a .pth file.
    local dist=${BCC_DIR:-}
    if [ -z "$dist" ] || [ ! -d "$dist" ]; then
        say "bcc: the distribution's package is absent (install python3-bpfcc as root); eBPF probes unavailable"
        return
    fi
    local shim="$PWD/$VENV/distro-bcc"
    local purelib
    purelib=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    if [ "$(readlink "$shim/bcc" 2>/dev/null)" = "$dist" ] && \
       [ "$(cat "$purelib/distro-bcc.pth" 2>/dev/null)" = "$shim" ]; then
        say "ok: distribution bcc visible in $VENV"
        return
    fi
    mkdir -p "$shim"
    ln -sfn "$dist" "$shim/bcc"
    printf '%s\n' "$shim" > "$purelib/distro-bcc.pth"
    say "linked distribution bcc ($dist) into $VENV"
}

if is_root && command -v apt-get >/dev/null 2>&1; then
    system_packages
    tracefs
elif ! is_root; then
    say "not root: skipping system packages and tracefs; eBPF probes need root (or CAP_BPF+CAP_PERFMON)"
else
    say "no apt-get: install clang, libbpf (and its headers) and sys/sdt.h by hand"
fi
commit_hook() {
    # A clone's own hook is kept; otherwise ruff runs before each commit (scripts/pre-commit).
    local hooks
    hooks=$(git rev-parse --git-path hooks 2>/dev/null) || return 0  # not a git tree
    if [ -e "$hooks/pre-commit" ] || [ -L "$hooks/pre-commit" ]; then
        say "ok: git pre-commit hook"
        return
    fi
    mkdir -p "$hooks"
    ln -s "$(pwd)/scripts/pre-commit" "$hooks/pre-commit"
    say "linked scripts/pre-commit as the git pre-commit hook (ruff on staged files)"
}

[ "$SYSTEM_ONLY" -eq 1 ] && exit 0
venv
bcc_in_venv
commit_hook
say "done: $VENV/bin/adaptyst-top"
