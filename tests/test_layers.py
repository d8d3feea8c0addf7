"""Imports point one way: tui -> runtime -> {placement, collectors}; placement and
collectors meet only through the snapshot contract; only tui/ knows Textual."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "src" / "adaptyst_top"
MAY_IMPORT = {
    "collectors": {"collectors"},
    # collectors.opencl_platforms: the one rule for which OpenCL devices are opencl:N.
    "placement": {
        "placement",
        "collectors.snapshot",
        "collectors.private_files",
        "collectors.opencl_platforms",
    },
    "runtime": {"runtime", "collectors", "placement"},
    "tui": {"tui", "runtime", "collectors", "placement"},
}
MAX_LINES = 400  # a module longer than this says why at its top ("Long on purpose: ...")


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_imports_point_one_way(layer: str) -> None:
    allowed = MAY_IMPORT[layer]
    for path in sorted((ROOT / layer).rglob("*.py")):
        for module in imports_of(path):
            if module.split(".")[0] == "textual":
                assert layer == "tui", f"{path.relative_to(ROOT)} imports Textual"
            if not module.startswith("adaptyst_top."):
                continue
            ours = module.removeprefix("adaptyst_top.")
            assert any(ours == a or ours.startswith(a + ".") for a in allowed), (
                f"{path.relative_to(ROOT)} imports {module}"
            )


def test_modules_stay_small_or_say_why() -> None:
    for layer in MAY_IMPORT:
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text()
            if text.count("\n") > MAX_LINES:
                head = ast.get_docstring(ast.parse(text)) or ""
                assert "Long on purpose:" in head, f"{path.relative_to(ROOT)}: long, not said why"
