#!/usr/bin/env bash
# What scripts/gpu_check.sh needs on the GPU machine beyond its image (Python 3.12,
# nothing from the network), fetched here into .whl/: the wheels of the packages the
# image lacks, at the versions this checkout's .venv holds, and the task API's USDT
# module built for any CPython 3 (the stable ABI: _sdt.abi3.so), the CUDA injection
# library likewise, and bcc with kernel headers (gpu_bcc.sh). .whl/ stays out of git
# (.git/info/exclude); name it in the device call's `carry`.
#
#   scripts/gpu_wheels.sh [PYTHON_VERSION]     (default 3.12)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pyver=${1:-3.12}
venv=$root/.venv/bin/python
dest=$root/.whl
# The image has numpy, scipy, psutil, nvidia-ml-py, cupy, click, cloudpickle, fsspec,
# jinja2, msgpack, packaging, pyyaml, sortedcontainers, toolz, urllib3, rich and
# prometheus-client; these it lacks (`record`'s, the probes' names, Dask's).
names=(pyelftools capstone orjson zstandard cxxfilt rust-demangler
       dask distributed partd locket tblib tornado zict)
mkdir -p "$dest"
grep -qxF /.whl/ "$root/.git/info/exclude" 2>/dev/null || echo /.whl/ >>"$root/.git/info/exclude"
pins=()
for n in "${names[@]}"; do
    pins+=("$n==$("$venv" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$n")")
done
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${p}_x86_64")
done
"$venv" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
    --implementation cp "${platforms[@]}" -d "$dest" "${pins[@]}"
src=$root/src/adaptyst_top/placement
inc=$("$venv" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
cc -shared -fPIC -O2 -DPy_LIMITED_API=0x030B0000 -I"$inc" -I"$src" \
    -o "$dest/_sdt.abi3.so" "$src/_sdt.c"
# The CUDA injection library (a plain shared library the driver opens; named so that
# any CPython 3 finds it), against the CUPTI headers this .venv builds it with.
cuda_incs=$(cd "$root" && "$venv" -c 'import importlib.util as u
for p in ("nvidia.cuda_cupti", "nvidia.cuda_runtime", "nvidia.cuda_nvcc"):
    print("-I" + list(u.find_spec(p).submodule_search_locations)[0] + "/include")')
kinds=$src/../collectors/probes/kinds
# shellcheck disable=SC2086  # one -I flag a line
cc -shared -fPIC -O2 -fvisibility=hidden -I"$src/include" -I"$kinds" $cuda_incs \
    -o "$dest/_cuda_inject.abi3.so" "$kinds/cuda_inject.c" "$kinds/cupti_open.c" -ldl -lpthread
"$root/scripts/gpu_bcc.sh"
ls -1 "$dest"
