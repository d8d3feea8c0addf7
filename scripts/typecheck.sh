#!/usr/bin/env bash
# mypy over the package as Python sees it (src/adaptyst_top, pyproject's mypy_path),
# then over the benchmarks and the experiments, which import it (packages run from the
# repository root: bench.*, experiments.*, and the tests.support helpers they use).
set -euo pipefail
cd "$(dirname "$0")/.."
mypy=${VENV:-.venv}/bin/mypy
"$mypy" -p adaptyst_top
"$mypy" bench experiments
