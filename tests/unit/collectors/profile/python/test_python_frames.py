"""Python frames without the kernel: code objects named from a live process's memory
(this one's), qualified names from source before 3.11, the kernel's words interleaved
with native frames, the event's encoding, and offsets.py against each interpreter's own
headers on this node."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from adaptyst_top.collectors.profile.python.interleave import entries, groups, interleave
from adaptyst_top.collectors.profile.python.names import CodeNames, qualname_at
from adaptyst_top.collectors.profile.python.offsets import OFFSETS
from adaptyst_top.collectors.profile.sampler import PY_FRAMES, Event, decode, encode

ROOT = Path(__file__).resolve().parents[5]


class Outer:
    class Inner:
        def method(self) -> int:
            def local() -> int:
                return 1

            return local()


def test_code_objects_are_named_from_the_process_memory() -> None:
    version = sys.version_info[:2]
    if version not in OFFSETS:
        pytest.skip(f"CPython {version} is not one offsets.py knows")
    names = CodeNames(os.getpid(), version)
    try:
        code = Outer.Inner.method.__code__
        got = names.name(id(code))
        assert got is not None
        assert got.qualname == "Outer.Inner.method"
        assert got.filename == __file__ and got.line == code.co_firstlineno
        assert names.name(1) is None  # not mapped: no name, no error
    finally:
        names.close()


def test_qualified_names_from_source_before_311(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "class A:\n    @staticmethod\n    def f():\n        def g():\n            pass\n\n"
        "def h():\n    pass\n"
    )
    assert qualname_at("", "", str(src), 2, "f") == "A.f"  # the decorator's line (3.8+)
    assert qualname_at("", "", str(src), 3, "f") == "A.f"
    assert qualname_at("", "", str(src), 4, "g") == "A.f.<locals>.g"
    assert qualname_at("", str(tmp_path), "m.py", 7, "h") == "h"  # relative: from cwd
    assert qualname_at("", "", str(src), 7, "other") == "other"  # not what is there
    os.mkfifo(tmp_path / "fifo.py")
    assert qualname_at("", "", str(tmp_path / "fifo.py"), 1, "x") == "x"  # never blocks


def test_entries_mark_where_each_loop_began() -> None:
    # 3.12: owner in the top byte; a C-stack shim (3) marks the frame above it.
    raw = [0x10, 0x20, 3 << 56 | 0x99, 0x30, 3 << 56 | 0x98]
    assert entries((3, 12), raw) == [(0x10, False), (0x20, True), (0x30, True)]
    # 3.11: is_entry in the top byte; before: every frame is a loop of its own.
    assert entries((3, 11), [0x10, 1 << 56 | 0x20, 0x30]) == [
        (0x10, False),
        (0x20, True),
        (0x30, True),
    ]
    assert entries((3, 9), [1 << 56 | 0x10, 1 << 56 | 0x20]) == [(0x10, True), (0x20, True)]


def test_python_frames_stand_where_their_loops_are() -> None:
    native = ["leaf_c", "_PyEval_EvalFrameDefault", "call", "_PyEval_EvalFrameDefault", "main"]
    python = groups([("spin", False), ("big", True), ("module", True)])
    out = interleave(native, native, python)
    assert out == ["leaf_c", "spin", "big", "call", "module", "main"]
    # A native unwind cut short: the rest go outermost, before [unknown].
    cut = ["leaf_c", "_PyEval_EvalFrameDefault", "[unknown]"]
    assert interleave(cut, cut, python) == ["leaf_c", "spin", "big", "module", "[unknown]"]


def test_frames_event_round_trips() -> None:
    e = Event(PY_FRAMES, 42, 43, 1234, py=(1, 2 << 56 | 3))
    assert decode(encode(e)) == e
    assert decode(encode(e)[:-3]) == Event(PY_FRAMES, 42, 43, 1234, py=(1,))  # cut short


def _headers() -> list[tuple[tuple[int, int], list[str]]]:
    found = []
    for inc in sorted(glob.glob("/root/.pyenv/versions/3.*/include/python3.*")):
        m = re.search(r"python3\.(\d+)$", inc)
        if m and (3, int(m.group(1))) in OFFSETS:
            found.append(((3, int(m.group(1))), [inc]))
    if os.path.exists("/usr/include/python3.11/internal/pycore_frame.h"):
        plat = glob.glob("/usr/include/*-linux-gnu/python3.11")
        found.append(((3, 11), ["/usr/include/python3.11", *plat]))
    return found


@pytest.mark.parametrize(("version", "include"), _headers())
def test_offsets_match_each_interpreters_own_headers(
    version: tuple[int, int], include: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        flags = [f"-I{i}" for i in include] + [f"-I{i}/internal" for i in include]
        src = ROOT / "scripts" / "python_offsets.c"
        subprocess.run(["gcc", *flags, "-o", f"{d}/off", str(src)], check=True)
        out = subprocess.run([f"{d}/off"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == OFFSETS[version]
