"""A process's memory bounds as its cgroup enforces them: what a unit's MemoryHigh= and
MemoryMax= became, and what its group uses now. cgroup v2 (memory.max, memory.high) or
v1's memory controller (memory.limit_in_bytes: MemoryMax=; v1 has no MemoryHigh), as the
node mounts them. Read only: every file here is world-readable."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# v1 writes "no limit" as the page counter's maximum, in bytes (PAGE_COUNTER_MAX pages).
_V1_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class MemoryBounds:
    group: str  # the cgroup's path, as /proc/PID/cgroup names it
    high: int | None  # bytes; None: no bound
    max: int | None
    current: int  # bytes the group's processes use now (the agent and its workers)


def memory_bounds(pid: int, proc: Path = Path("/proc")) -> MemoryBounds:
    """PID's group's bounds; OSError when the node's cgroups say nothing of its memory."""
    groups = dict(parse_cgroups((proc / str(pid) / "cgroup").read_text()))
    mounts = parse_mounts((proc / "self" / "mountinfo").read_text())
    if "memory" in groups and "memory" in mounts:  # v1's controller (a hybrid node's too)
        folder = _inside(mounts["memory"], groups["memory"])
        return MemoryBounds(
            groups["memory"],
            None,
            _tightest(folder, mounts["memory"], "memory.limit_in_bytes", _v1_bound),
            int(_read(folder / "memory.usage_in_bytes")),
        )
    if "" in groups and "" in mounts:
        folder = _inside(mounts[""], groups[""])
        if (folder / "memory.max").exists():
            return MemoryBounds(
                groups[""],
                _tightest(folder, mounts[""], "memory.high", _bound),
                _tightest(folder, mounts[""], "memory.max", _bound),
                int(_read(folder / "memory.current")),
            )
    raise OSError(f"no memory controller for PID {pid} in this node's cgroups")


def parse_cgroups(text: str) -> list[tuple[str, str]]:
    """(controller, path) for each of /proc/PID/cgroup's lines; v2's controller is ""."""
    out = []
    for line in text.splitlines():
        _id, controllers, path = line.split(":", 2)
        out += [(c, path) for c in (controllers.split(",") if controllers else [""])]
    return out


def parse_mounts(text: str) -> dict[str, Path]:
    """Where each v1 controller (and v2, as "") is mounted, from /proc/self/mountinfo."""
    out: dict[str, Path] = {}
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, after = left.split(), right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        if after[0] == "cgroup2":
            out.setdefault("", Path(fields[4]))
        elif after[0] == "cgroup":
            for opt in after[2].split(","):
                out.setdefault(opt, Path(fields[4]))
    return out


def _inside(mount: Path, group: str) -> Path:
    folder = (mount / group.lstrip("/")).resolve()
    if not folder.is_relative_to(mount.resolve()):  # the kernel's path: never outside
        raise OSError(f"cgroup {group!r} is outside {mount}")
    return folder


def _read(path: Path) -> str:
    return path.read_text().strip()


def _bound(text: str) -> int | None:
    return None if text == "max" else int(text)


def _v1_bound(text: str) -> int | None:
    return None if int(text) >= _V1_UNLIMITED else int(text)


def _tightest(
    folder: Path, mount: Path, name: str, parse: Callable[[str], int | None]
) -> int | None:
    """The smallest bound NAME sets on FOLDER's group or any group above it (a slice's
    MemoryMax= bounds the units in it), up to the hierarchy's root; None: none."""
    found: list[int] = []
    top = mount.resolve()
    while True:
        with contextlib.suppress(FileNotFoundError):  # the root group has none
            if (b := parse(_read(folder / name))) is not None:
                found.append(b)
        if folder == top or folder == folder.parent:
            return min(found, default=None)
        folder = folder.parent
