"""A worker started while the agent holds more than 1024 descriptors: its socket keeps
the agent's number, past what select() takes. Every such worker died on its first wait
(ValueError: filedescriptor out of range in select()), and users got "the opener for
uid N ended" once the agent had many sessions open."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator

import pytest

from adaptyst_top.agent.core import opener, parser
from tests.support.marks import requires_root
from tests.system.agent.test_agent import User, shared, users  # noqa: F401 - fixtures

pytestmark = [requires_root]


@pytest.fixture
def high_descriptors() -> Iterator[None]:
    """The next descriptors this process opens numbered past 1100, as the agent's are."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.fail(f"RLIMIT_NOFILE's hard limit is {hard}: the agent's own case needs more")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    null = os.open("/dev/null", os.O_RDONLY)
    held = [os.dup(null) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in [null, *held]:
            os.close(fd)
        opener.end_all()
        parser._KEPT.end_all()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_workers_started_past_descriptor_1024_serve(
    high_descriptors: None,
    users: tuple[User, User],  # noqa: F811 - the fixture
    shared: object,  # noqa: F811
) -> None:
    alice, _ = users
    workload = f"{shared}/workload"
    for _ in range(2):  # its first request, and one to the same worker kept
        (fd,) = opener.open_as(alice.uid, alice.gid, [alice.gid], [workload])
        assert fd is not None and fd > 1024
        try:
            info = parser.elf_as(alice.uid, alice.gid, [alice.gid], fd)
        finally:
            os.close(fd)
        assert any(f.name == "fast_fn" for f in info.functions)
        parser._CACHE.clear()
