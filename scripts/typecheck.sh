#!/usr/bin/env bash
# mypy over the package as Python sees it (src/adaptyst_top, pyproject's mypy_path),
# then over the benchmarks, which import it.
set -euo pipefail
cd "$(dirname "$0")/.."
mypy=${VENV:-.venv}/bin/mypy
"$mypy" -p adaptyst_top
"$mypy" bench
