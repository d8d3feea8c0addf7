"""Imports point one way: cli -> tui -> runtime -> {placement, collectors} -> system ->
snapshot (the contract); placement and collectors meet only through the snapshot; only
tui/ knows Textual; and no module imports itself back through others (no cycle, the
imports inside functions counted too). docs/architecture.md draws the same picture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO / "src" / "adaptyst_top"
MAY_IMPORT = {
    "snapshot": {"snapshot"},
    "system": {"system", "snapshot"},
    "collectors": {"collectors", "system", "snapshot"},
    # collectors.devices.opencl_platforms: the one rule for which OpenCL devices are opencl:N;
    # collectors.energy.task_runs: a run's joules, computed where every joule is.
    "placement": {
        "placement",
        "system",
        "snapshot",
        "collectors.devices.opencl_platforms",
        "collectors.energy.task_runs",
    },
    "runtime": {"runtime", "collectors", "placement", "system", "snapshot"},
    # Placement across nodes: the advisor inside Dask's scheduler, devices from collectors.
    "dask": {"dask", "placement", "collectors", "system", "snapshot"},
    # The node agent's privileged core; the clients' side is runtime's and never
    # imports it (runtime may not import agent).
    "agent": {"agent", "runtime", "collectors", "placement", "system", "snapshot"},
    "tui": {"tui", "runtime", "collectors", "placement", "system", "snapshot"},
    "cli": {"cli", "tui", "agent", "runtime", "collectors", "placement", "system", "snapshot"},
}
MAX_LINES = 450


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def module_name(path: Path) -> str:
    parts = ("adaptyst_top", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(MAY_IMPORT)


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_imports_point_one_way(layer: str) -> None:
    allowed = MAY_IMPORT[layer]
    modules = {module_name(p) for p in ROOT.rglob("*.py")}
    for path in sorted((ROOT / layer).rglob("*.py")):
        for module in imports_of(path):
            if module.split(".")[0] in ("textual", "rich"):
                assert layer == "tui", f"{path.relative_to(ROOT)} imports {module}"
            if module not in modules:  # a name imported from a module, or not ours
                continue
            ours = module.removeprefix("adaptyst_top.")
            assert any(ours == a or ours.startswith(a + ".") for a in allowed), (
                f"{path.relative_to(ROOT)} imports {module}"
            )


# Building rows and formatting figures needs no Textual: they are tested, and could be
# used, without a screen; only the widgets and screens that show them know Textual.
PLAIN_TUI = ("rows", "advisor_rows", "task_plot_data", "format", "glyphs", "columns")


@pytest.mark.parametrize("name", PLAIN_TUI)
def test_row_builders_know_no_widget(name: str) -> None:
    for module in imports_of(ROOT / "tui" / f"{name}.py"):
        assert module.split(".")[0] not in ("textual", "rich"), f"tui/{name}.py: {module}"
        assert not module.startswith(("adaptyst_top.tui.widgets", "adaptyst_top.tui.screens")), (
            f"tui/{name}.py imports {module}"
        )


# Beyond the standard library, what each of the agent's workers may import: the opener
# nothing; the parser its sibling's `become` and, loaded in a function, the parsers.
WORKER_MAY_IMPORT = {
    "__init__.py": (),
    "open_files.py": (),
    "parse_elf.py": (
        "orjson",
        "adaptyst_top.agent.worker.open_files",
        "adaptyst_top.collectors.probes.elf.demangle",
        "adaptyst_top.collectors.probes.elf.elf_info",
        # A stripped file's debug file (build ID, debug link, debuginfod), as the user.
        "adaptyst_top.collectors.probes.elf.debug_names",
        # What `list` shows of a user's file (names, globs, entry checks), as the user.
        "adaptyst_top.collectors.probes.safety.entry_safety",
        "adaptyst_top.runtime.listing",
    ),
    "unwind_stacks.py": (
        "orjson",
        "adaptyst_top.agent.worker.open_files",
        "adaptyst_top.collectors.profile.sampler",
        "adaptyst_top.collectors.profile.tally",
    ),
}
PARSERS = ("adaptyst_top.collectors",)


def test_the_agents_workers_import_what_they_are_allowed() -> None:
    """A worker runs as a user from a fresh `python -I`: what runs with a user's rights
    is in its own file, the opener's the standard library only; the parser imports the
    package's ELF parsers and demangler inside a function (loaded before it is told whose
    it is: their code, never a user's bytes, which it reads only once it runs as her)."""
    import sys

    for path in sorted((ROOT / "agent" / "worker").glob("*.py")):
        allowed = WORKER_MAY_IMPORT[path.name]
        for module in imports_of(path):
            ok = module.split(".")[0] in sys.stdlib_module_names | {"__future__"} or any(
                module == a or module.startswith(f"{a}.") for a in allowed
            )
            assert ok, f"{path.relative_to(ROOT)} imports {module}"
        top_level = ast.parse(path.read_text()).body
        for node in top_level:
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(PARSERS), (
                    f"{path.relative_to(ROOT)} imports {node.module} before it runs as the user"
                )


def test_no_import_cycle() -> None:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph = {m: sorted(paths.keys() & imports_of(p) - {m}) for m, p in paths.items()}
    # Tarjan's strongly connected components: a component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for n in graph[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = [stack.pop()]
            while component[-1] != m:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert cycles == [], "\n".join(" <-> ".join(c) for c in cycles)


def test_modules_stay_small() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in ROOT.rglob("*.py")
        if (n := p.read_text().count("\n")) > MAX_LINES
    }
    assert long == {}
