"""A user's ELF files are parsed by a process of that user's, never by the root process:
the worker's answer equals the in-process parse on real files, it runs with exactly the
user's ids, no capability, not dumpable; the root process demangles none of their names;
a parser that lies, hangs or is killed costs its user one line and nothing else."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adaptyst_top.agent.core import kept_workers, parser
from adaptyst_top.agent.core.authorization import Peer
from adaptyst_top.agent.core.elf_check import checked, headers
from adaptyst_top.agent.core.listing import list_for
from adaptyst_top.agent.core.opener import open_as
from adaptyst_top.collectors.probes.elf import demangle
from adaptyst_top.collectors.probes.elf.elf_info import NotELFError, read_elf
from adaptyst_top.runtime.remote.protocol import decode
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import User

pytestmark = requires_root
shared, users = test_agent.shared, test_agent.users  # fixtures
LIBSTDCXX = next(
    (
        p
        for p in Path("/usr/lib").glob("*/libstdc++.so.6")
        if p.is_file() and (p.stat().st_mode & 0o004)
    ),
    None,
)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    """Each test starts and ends with no parser kept and nothing cached."""
    kept_workers.end_all()
    parser._CACHE.clear()
    yield
    kept_workers.end_all()
    parser._CACHE.clear()


def _as(user: User, path: Path | str) -> int:
    (fd,) = open_as(user.uid, user.gid, [user.gid], [str(path)])
    assert fd is not None
    return fd


def _essence(info: Any) -> tuple[object, ...]:
    return (
        [(f.name, f.address, f.size, f.file_offset, f.ifunc) for f in info.functions],
        info.usdt,
        info.loads,
        info.readonly,
        info.machine,
        info.fixed,
        info.stripped,
        info.identity,
    )


def test_the_users_parser_answers_as_the_process_would(
    shared: Path, users: tuple[User, User]
) -> None:
    alice, _ = users
    files = [shared / "workload", Path(os.path.realpath("/proc/self/exe"))]
    if LIBSTDCXX is not None:
        files.append(LIBSTDCXX)
    for path in files:
        fd = _as(alice, path)
        try:
            got = parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        finally:
            os.close(fd)
        want = read_elf(path)
        assert _essence(got) == _essence(want), path
        assert all(f.source == demangle.demangle(f.name).source for f in got.functions)
    assert read_elf(shared / "workload").usdt  # the workload's notes were compared too


def test_the_parser_holds_exactly_the_users_ids_and_nothing_else(
    shared: Path, users: tuple[User, User]
) -> None:
    alice, _ = users
    fd = _as(alice, shared / "workload")
    try:
        parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
    finally:
        os.close(fd)
    (worker,) = parser._KEPT.kept.values()
    status = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{worker.proc.pid}/status").read_text().splitlines()
    )
    assert status["Uid"].split() == [str(alice.uid)] * 4
    assert status["Gid"].split() == [str(alice.gid)] * 4
    assert status["Groups"].split() == [str(alice.gid)]
    for cap in ("CapPrm", "CapEff", "CapAmb"):
        assert int(status[cap], 16) == 0, status[cap]
    assert status["NoNewPrivs"].strip() == "1"
    # Not dumpable: /proc/PID's files belong to root, not to her.
    assert Path(f"/proc/{worker.proc.pid}/mem").stat().st_uid == 0


def test_root_demangles_none_of_a_users_names(
    users: tuple[User, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`list` of a C++ library for a user shows its names as the source spells them,
    with the root process's demangler made to fail."""
    if LIBSTDCXX is None:
        pytest.skip("no readable libstdc++ here")
    alice, _ = users

    def refuse(base: str) -> str:
        raise AssertionError(f"root demangled {base}")

    monkeypatch.setattr(demangle, "_source", refuse)
    demangle.demangle.cache_clear()
    peer = Peer(os.getpid(), alice.uid, alice.gid, frozenset({alice.gid}), privileged=False)
    answer = decode(
        list_for(peer, {"binary": str(LIBSTDCXX), "pattern": "std::*", "functions": True})
    )
    names = [f["name"] for obj in answer["objects"] for f in obj["functions"]]
    assert names and all("std::" in n for n in names), names[:5]
    assert any(f.get("symbol", "").startswith("_Z") for f in answer["objects"][0]["functions"])


def _header(phnum: int = 1, cls: int = 2, phoff: int = 64, sections: int = 0) -> bytes:
    """An ELF header; SECTIONS: that many section headers at 0x200, names the last."""
    ident = b"\x7fELF" + bytes([cls, 1, 1, 0, 0]) + bytes(7)
    shoff, shentsize, shstrndx = (0x200, 64, sections - 1) if sections else (0, 0, 0)
    fields = (3, 62, 1, 0, phoff, shoff, 0, 64, 56, phnum, shentsize, sections, shstrndx)
    return ident + struct.pack("<HHIQQQIHHHHHH", *fields)


def _sections() -> bytes:
    """At 0x180 the section names, at 0x200 three section headers: none, .probes (at
    0x3000, 16 bytes, in the writable segment) and the names."""
    names = b"\0.probes\0.shstrtab\0"
    shdr = struct.Struct("<IIQQQQIIQQ")
    table = shdr.pack(*[0] * 10)
    table += shdr.pack(1, 1, 3, 0x3000, 0x100, 0x10, 0, 0, 2, 0)
    table += shdr.pack(9, 3, 0, 0, 0x180, len(names), 0, 0, 1, 0)
    return names.ljust(0x80, b"\0") + table


def _phdr(vaddr: int, filesz: int, offset: int, flags: int = 5) -> bytes:
    return struct.pack("<IIQQQQQQ", 1, flags, offset, vaddr, vaddr, filesz, filesz, 0x1000)


def _file(tmp_path: Path, data: bytes) -> int:
    path = tmp_path / "f"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def test_root_reads_the_headers_itself_and_places_every_address_by_them(tmp_path: Path) -> None:
    body = _header(2, sections=3) + _phdr(0x1000, 0x100, 0) + _phdr(0x3000, 0x40, 0x100, flags=6)
    fd = _file(tmp_path, body.ljust(0x180, b"\0") + _sections())
    try:
        assert headers(fd, "f") == (
            "EM_X86_64",
            False,
            ((0x1000, 0x100, 0), (0x3000, 0x40, 0x100)),
            ((0x1000, 0x100, 0),),
            ((0x1000, 0x100, 0),),
        )
        info = checked(
            {
                # The worker's offsets are not asked for: root computes them, and
                # leaves out what lies outside the executable segment (g, h; a note).
                "functions": [
                    ["f", "f", 0x1010, 4, False],
                    ["g", "g", 0x9000, 4, False],
                    ["h", "h", 0x3010, 4, False],
                ],
                "usdt": [
                    ["p", "n", 0x1020, 0x3008, "-4@%eax"],
                    ["p", "m", 0x3004, 0, ""],  # a site in data
                    ["p", "s", 0x1024, 0x1030, ""],  # a semaphore in code
                    ["p", "o", 0x1028, 0x3009, ""],  # ... at an odd address
                    ["p", "d", 0x102C, 0x3020, ""],  # ... in data past .probes
                ],
                "stripped": True,
            },
            fd,
            "f",
        )
        assert [(s.name, s.file_offset) for s in info.functions] == [("f", 0x10)]
        assert [u.name for u in info.usdt] == ["n"] and info.usdt[0].semaphore == 0x3008
        assert info.identity[1] == os.fstat(fd).st_ino
        for lie in (
            {"functions": [["f", "f", -1, 4, False]], "usdt": [], "stripped": True},
            {"functions": [["f", "f", 1 << 64, 4, False]], "usdt": [], "stripped": True},
            {"functions": [["", "", 0x1010, 4, False]], "usdt": [], "stripped": True},
            {"functions": [["f" * 5000, "f", 0x1010, 4, False]], "usdt": [], "stripped": True},
            {"functions": [["f", "f", 0x1010, 4, 1]], "usdt": [], "stripped": True},
            {"functions": [["f", "f", 4112.0, 4, False]], "usdt": [], "stripped": True},
            {"functions": [], "usdt": [["p", "n", 1, 2]], "stripped": True},
            {"functions": [], "usdt": [], "stripped": "yes"},
            {"functions": {}, "usdt": [], "stripped": True},
            [],
        ):
            with pytest.raises(NotELFError, match="the parser answered wrongly"):
                checked(lie, fd, "f")
        with pytest.raises(NotELFError, match=r"^f: not an ELF file \(x\)$"):
            checked({"error": "f: not an ELF file (x)\nand a second line"}, fd, "f")
    finally:
        os.close(fd)
    for bad, why in (
        (_header(1, cls=1) + _phdr(0, 8, 0), "only 64-bit"),
        (_header(600), "program headers"),
        (_header(1) + _phdr(0x1000, 0x10_000, 0), "past its end"),
        (b"\x7fELF", "not an ELF file"),
    ):
        fd = _file(tmp_path, bad)
        try:
            with pytest.raises(NotELFError, match=why):
                headers(fd, "f")
        finally:
            os.close(fd)


def test_a_parser_that_hangs_or_is_killed_costs_its_user_one_line(
    shared: Path, users: tuple[User, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = users
    stopped: list[int] = []
    real_popen = subprocess.Popen

    def stopping_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        if "adaptyst_top.agent.worker.parse_elf" in args[0]:
            os.kill(proc.pid, signal.SIGSTOP)  # hers to stop: it runs as her
            stopped.append(proc.pid)
        return proc

    fd = _as(alice, shared / "workload")
    try:
        monkeypatch.setattr(kept_workers.subprocess, "Popen", stopping_popen)
        monkeypatch.setattr(parser, "PARSE_TIMEOUT_S", 0.5)
        with pytest.raises(NotELFError, match=r"took over 0\.5 s"):
            parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        monkeypatch.undo()
        assert stopped and not Path(f"/proc/{stopped[0]}").exists()  # killed and reaped
        got = parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)  # a fresh one
        (worker,) = parser._KEPT.kept.values()
        os.kill(worker.proc.pid, signal.SIGKILL)  # she kills hers between requests
        worker.proc.wait()
        parser._CACHE.clear()
        again = parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        assert _essence(again) == _essence(got)
    finally:
        os.close(fd)
    fd = _as(bob, shared / "workload")
    try:
        assert parser.elf_as(bob.uid, bob.gid, [bob.gid], fd).functions
    finally:
        os.close(fd)


def test_a_hostile_file_costs_its_parser_and_one_line(
    shared: Path, users: tuple[User, User]
) -> None:
    alice, _ = users
    hostile = shared / "hostile"
    real = Path(os.path.realpath("/proc/self/exe")).read_bytes()
    hostile.write_bytes(real[:4096])  # headers and tables that point past the end
    hostile.chmod(0o644)
    fd = _as(alice, hostile)
    try:
        with pytest.raises(NotELFError) as got:
            parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        assert "\n" not in str(got.value) and "hostile" in str(got.value)
    finally:
        os.close(fd)
    (worker,) = parser._KEPT.kept.values()  # her parser lives on, for her next file
    assert worker.proc.poll() is None


def test_a_parser_that_answers_wrongly_is_not_asked_again(
    shared: Path, users: tuple[User, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, _ = users
    fd = _as(alice, shared / "workload")
    try:
        parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        (worker,) = parser._KEPT.kept.values()
        parser._CACHE.clear()
        monkeypatch.setattr(parser, "_ask_as", lambda *a: ({"functions": {}}, 15))
        with pytest.raises(NotELFError, match="answered wrongly"):
            parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        assert parser._KEPT.kept == {} and worker.proc.poll() is not None  # ended
    finally:
        os.close(fd)


def test_the_cache_keeps_each_user_within_a_share(
    shared: Path, users: tuple[User, User], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One user's many files (or one file touched again and again: each change of its
    times is a new entry) push out only that user's oldest answers."""
    alice, bob = users
    fd = _as(bob, shared / "workload")
    try:
        parser.elf_as(bob.uid, bob.gid, [bob.gid], fd)
    finally:
        os.close(fd)
    (bobs,) = parser._CACHE.values()
    monkeypatch.setattr(parser, "CACHE_PER_USER", 3 * bobs[1])
    copies = []
    for i in range(6):
        copy = shared / f"copy{i}"
        copy.write_bytes((shared / "workload").read_bytes())
        copy.chmod(0o644)
        copies.append(copy)
        fd = _as(alice, copy)
        try:
            parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        finally:
            os.close(fd)
    alices = [v[1] for k, v in parser._CACHE.items() if k[0] == alice.uid]
    assert 0 < sum(alices) <= 3 * bobs[1] and len(alices) < 6
    assert any(k[0] == bob.uid for k in parser._CACHE)  # his answer stays
    for copy in copies:
        copy.unlink()
