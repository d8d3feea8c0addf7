#!/usr/bin/env bash
# The NVIDIA path on a real GPU (experiments/gpu/gpu_check.py says what it checks), on a machine
# with nothing from the network: python3 with nvidia-ml-py, cupy, numpy, scipy and
# psutil, and the project as checked out (not installed). Wheels the project needs
# beyond those (pyelftools, capstone, orjson, zstandard for `record`) may travel in
# .whl/ (scripts/gpu_wheels.sh fetches them); they go to a private folder, never into
# the system's Python.
#
#   scripts/gpu_check.sh OUT_DIR [--record-s S] [--cases FILE] [--parts A,B]
#
# It runs `python -m experiments.gpu.gpu_check` from the repository root (a FILE given
# relative is read from there). The last H200 run's results are in results/h200/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [gpu_check.py options]}
shift
python=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the check runs from the repository root
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
paths=()
if compgen -G "$root/.whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$work/site" "$root"/.whl/*.whl
    paths+=("$work/site")
fi
paths+=("$root/src")  # the checkout's package, ahead of any installed copy
paths+=("$root")  # bench.*, experiments.*, wherever a part's process starts
sdt=$root/src/adaptyst_top/placement
if [[ -f $root/.whl/_sdt.abi3.so ]] && ! PYTHONPATH=$root/src "$python" -c \
        'import adaptyst_top.placement._sdt' 2>/dev/null; then
    cp "$root/.whl/_sdt.abi3.so" "$sdt/"  # built here for any CPython 3 (gpu_wheels.sh)
fi
kinds=$root/src/adaptyst_top/collectors/probes/kinds
if [[ -f $root/.whl/_cuda_inject.abi3.so ]] && ! "$python" -c 'import glob, sys
from importlib.machinery import EXTENSION_SUFFIXES as s
sys.exit(not any(glob.glob(sys.argv[1] + "/_cuda_inject" + x) for x in s))' "$kinds"; then
    cp "$root/.whl/_cuda_inject.abi3.so" "$kinds/"  # the injection library, any CPython 3
fi
# bcc where the machine has none (scripts/gpu_bcc.sh): its libraries, those of the ones
# it needs that the machine lacks, and kernel headers where the kernel's are not there.
if ! "$python" -c 'import bcc' 2>/dev/null && [[ -f $root/.whl/bcc.tar.xz ]]; then
    tar -xJf "$root/.whl/bcc.tar.xz" -C "$work"
    libs=$work/bcc/lib
    known=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p)  # once: grep -q cuts a pipe
    for so in "$work"/bcc/fallback/*; do
        if ! grep -qE "^[[:space:]]*$(basename "$so") " <<<"$known"; then
            mkdir -p "$work/lacking" && cp -a "$so" "$work/lacking/"
            echo "bcc: the machine lacks $(basename "$so"): the carried one is used"
        fi
    done
    [[ -d $work/lacking ]] && libs=$libs:$work/lacking
    export ADAPTYST_GPU_LD_BEFORE=${LD_LIBRARY_PATH:-}  # the programs run without bcc's
    export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    paths+=("$work/bcc/py")
    if [[ ! -e /lib/modules/$(uname -r)/build && ! -e /sys/kernel/kheaders.tar.xz ]]; then
        export BCC_KERNEL_SOURCE=$work/bcc/kernel
    fi
fi
export PYTHONPATH
PYTHONPATH=$(IFS=:; echo "${paths[*]}")${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,mig.mode.current \
    --format=csv 2>&1 | tee "$out/log.txt" || true
cd "$root"
"$python" -m experiments.gpu.gpu_check --out "$out" "$@" 2>&1 | tee -a "$out/log.txt"
