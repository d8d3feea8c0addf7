#!/usr/bin/env bash
# mypy over the installed package as Python sees it: adaptyst_top.{collectors,placement,runtime,tui}
# live in top-level folders (pyproject's package-dir), which mypy cannot map by itself;
# run on the folders alone, every cross-package import would be Any and go unchecked.
# A tree of links under build/ gives mypy the real package layout.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build/mypy
mkdir -p "$tree/adaptyst_top"
for pkg in collectors placement runtime tui; do
    ln -sfn "$PWD/$pkg" "$tree/adaptyst_top/$pkg"
done
export MYPYPATH="$PWD/$tree"
mypy=${VENV:-.venv}/bin/mypy
(cd "$tree" && "$OLDPWD/$mypy" --config-file "$OLDPWD/pyproject.toml" -p adaptyst_top)
"$mypy" bench
