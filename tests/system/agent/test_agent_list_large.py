"""A user's `list` of her own large file through the agent: made by her own parser (the
per-function work, names, globs and entry checks, is hers: root's was 80-96 s of CPU for
1,000,000 functions, `bench/bench_agent_list.py`), answered up to the parser's cap with
how many more there are; a narrow pattern answers exactly its functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaptyst_top.agent.worker.parse_elf import MAX_LISTED
from adaptyst_top.runtime.remote.client import AgentConnection, AgentRefused
from tests.support.marks import requires_root
from tests.support.programs import build_many_functions
from tests.system.agent.test_agent import (  # noqa: F401 - fixtures
    Agent,
    AsUser,
    User,
    agent,
    say,
    shared,
    users,
)

pytestmark = [pytest.mark.ebpf, requires_root]
EXTRA = 2_000


def test_a_large_file_is_listed_by_the_user_s_parser_up_to_its_cap(
    agent: Agent,  # noqa: F811
    users: tuple[User, User],  # noqa: F811
    shared: Path,  # noqa: F811
) -> None:
    alice, _ = users
    lib = build_many_functions(shared, MAX_LISTED + EXTRA)
    lib.chmod(0o755)

    def client(up: int, _down: int) -> None:
        out: dict[str, object] = {}
        full = {"pid": None, "functions": True, "usdt": False, "all": False}
        for name, pattern in (("all", "*"), ("narrow", "f1234*")):
            conn = AgentConnection(str(agent.path))
            try:
                objects, _ = conn.list_objects({**full, "binary": str(lib), "pattern": pattern})
                (obj,) = objects
                names = [f["name"] for f in obj["functions"]]
                out[name] = [len(names), obj.get("more"), sorted(names)[:3], obj["path"]]
            except AgentRefused as exc:
                out[name] = str(exc)
            conn.close()
        say(up, **out)

    c = AsUser(alice, client)
    got = c.read()
    assert c.wait() == 0
    assert got["all"][:2] == [MAX_LISTED, EXTRA]  # type: ignore[index]
    assert got["narrow"] == [11, None, ["f1234", "f12340", "f12341"], str(lib)]
