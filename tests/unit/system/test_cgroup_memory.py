"""The agent's memory bounds as a node's cgroups state them: v2, v1's controller (a
hybrid node's too), no bound, and a node that says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.system.cgroup_memory import MemoryBounds, memory_bounds

GROUP = "/system.slice/adaptyst-top-agent.service"


def node(tmp_path: Path, cgroup: str, mounts: list[str]) -> Path:
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)
    (proc / "self").mkdir()
    (proc / "7" / "cgroup").write_text(cgroup)
    (proc / "self" / "mountinfo").write_text("".join(f"{m}\n" for m in mounts))
    return proc


def files(folder: Path, **values: str) -> None:
    folder.mkdir(parents=True)
    for name, value in values.items():
        (folder / name.replace("_", ".", 1)).write_text(value + "\n")


def test_v2_says_high_max_and_current(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    files(root / GROUP.lstrip("/"), memory_high="1073741824", memory_max="2147483648",
          memory_current="63963136")  # fmt: skip
    proc = node(tmp_path, f"0::{GROUP}\n", [f"30 23 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert memory_bounds(7, proc) == MemoryBounds(GROUP, 1 << 30, 2 << 30, 63963136)


def test_v2_without_a_bound_says_none(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    files(root / GROUP.lstrip("/"), memory_high="max", memory_max="max", memory_current="1")
    proc = node(tmp_path, f"0::{GROUP}\n", [f"30 23 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert memory_bounds(7, proc) == MemoryBounds(GROUP, None, None, 1)


def test_v1_controller_on_a_hybrid_node(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    files(mem / GROUP.lstrip("/"), memory_limit_in_bytes="2147483648",
          memory_usage_in_bytes="4096")  # fmt: skip
    proc = node(
        tmp_path,
        f"4:memory:{GROUP}\n1:name=systemd:{GROUP}\n0::{GROUP}\n",
        [
            f"36 31 0:33 / {mem} rw,relatime - cgroup cgroup rw,memory",
            f"41 31 0:38 / {tmp_path / 'unified'} rw,relatime - cgroup2 cgroup2 rw",
        ],
    )
    assert memory_bounds(7, proc) == MemoryBounds(GROUP, None, 2 << 30, 4096)
    (mem / GROUP.lstrip("/") / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory_bounds(7, proc).max is None  # v1's "no limit"


def test_a_node_without_a_memory_controller_is_an_oserror(tmp_path: Path) -> None:
    proc = node(tmp_path, "1:name=systemd:/\n", ["22 1 0:20 / /proc rw - proc proc rw"])
    with pytest.raises(OSError, match="no memory controller"):
        memory_bounds(7, proc)


def test_a_slices_bound_holds_the_unit_in_it(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    files(root / "system.slice", memory_max="1073741824", memory_high="max")
    files(root / GROUP.lstrip("/"), memory_high="max", memory_max="max", memory_current="5")
    proc = node(tmp_path, f"0::{GROUP}\n", [f"30 23 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert memory_bounds(7, proc) == MemoryBounds(GROUP, None, 1 << 30, 5)
