"""Hostile files through the agent, as a real user sends them: mutated copies of an ELF
program (headers, section and symbol tables, notes, truncations) and a program whose
symbol names are random mangled-looking text (what the demangler reads). Every answer
is the list or one line; the agent never dies; no opener of the user outlives its idle
time. Seeded: a failure names its case."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaptyst_top.agent.worker.open_files import IDLE_S
from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from tests.support.marks import requires_root
from tests.system.agent import test_agent
from tests.system.agent.test_agent import Agent, AsUser, User, children_as, say

pytestmark = [pytest.mark.ebpf, requires_root]
agent, shared, users = test_agent.agent, test_agent.shared, test_agent.users  # fixtures
CASES = 1000
SEED = 51


def _mutated(original: bytes, rng: random.Random) -> bytes:
    data = bytearray(original)
    kind = rng.randrange(4)
    if kind == 0:  # the ELF and program headers
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(0, 0x200)] = rng.randrange(256)
    elif kind == 1:  # anywhere: tables, strings, notes
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 2:  # cut short
        del data[rng.randrange(16, len(data)) :]
    else:  # a field made huge (offsets, counts)
        at = rng.randrange(0x18, min(len(data), 0x1000) - 8)
        data[at : at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 7 + b"\x7f", rng.randbytes(8)])
    return bytes(data)


def _mangled_names_program(folder: Path, rng: random.Random) -> Path:
    """A program with 300 functions named by random mangled-looking text."""
    alphabet = "NSt3_ZEvIiKPRCDaSdc0123456789lmjsfbxyQ"
    lines = []
    for i in range(300):
        name = "_Z" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        lines.append(f'void f{i}(void) __asm__("{name}{i}"); void f{i}(void) {{}}')
    lines.append("int main(void) { return 0; }")
    source = folder / "names.c"
    source.write_text("\n".join(lines))
    binary = folder / "names"
    subprocess.run(["gcc", "-O0", "-o", str(binary), str(source)], check=True)
    return binary


@pytest.fixture
def hostile(shared: Path, users: tuple[User, User]) -> Iterator[Path]:
    alice, _ = users
    folder = Path(tempfile.mkdtemp(prefix="adt-fuzz-", dir=shared))
    rng = random.Random(SEED)
    original = (shared / "workload").read_bytes()
    try:
        for i in range(CASES):
            (folder / f"case{i:04d}").write_bytes(_mutated(original, rng))
        _mangled_names_program(folder, rng)
        for p in [folder, *folder.iterdir()]:
            os.chown(p, alice.uid, alice.gid)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_hostile_files_get_a_list_or_one_line_and_the_agent_lives(
    agent: Agent, users: tuple[User, User], hostile: Path
) -> None:
    alice, _ = users
    cases = [*sorted(hostile.glob("case*")), hostile / "names"]

    def client(up: int, down: int) -> None:
        conn = AgentConnection(str(agent.path))
        listed = refused = 0
        bad: list[str] = []
        demangled = 0
        for path in cases:
            ask = {"binary": str(path), "pid": None, "functions": True, "usdt": True}
            try:
                objects, _ = conn.list_objects(ask)
                listed += 1
                if path.name == "names":
                    demangled = sum(len(o.get("functions", [])) for o in objects)
            except AgentRefused as exc:
                refused += 1
                line = str(exc)
                if "\n" in line or "Traceback" in line or len(line) > 400:
                    bad.append(f"{path.name}: {line[:200]!r}")
        say(up, listed=listed, refused=refused, bad=bad[:5], demangled=demangled)

    c = AsUser(alice, client)
    said = c.read()
    assert c.wait() == 0
    assert said["bad"] == [], said
    assert int(said["listed"]) + int(said["refused"]) == len(cases), said  # type: ignore[call-overload]
    assert int(said["demangled"]) >= 300, said  # type: ignore[call-overload]
    assert agent.proc.poll() is None and agent.answers()
    deadline = time.monotonic() + IDLE_S + 3  # an opener exits idle, the guard reaps it
    while children_as(agent.proc.pid, alice.uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children_as(agent.proc.pid, alice.uid) == []
