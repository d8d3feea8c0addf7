"""The users' workers are bounded node-wide (AgentSettings.max_workers): one person who
connects under many uids (subordinate ids) starts no more than the cap, a hello starts
none past half of it, and a request finds room again once a worker ends."""

from __future__ import annotations

import weakref

import pytest

from adaptyst_top.agent.core import kept_workers, opener, parser
from adaptyst_top.agent.core.kept_workers import WorkerFailed, end
from tests.support.marks import requires_root
from tests.support.waits import wait_until

pytestmark = [requires_root]


@pytest.fixture
def cap_of_4(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cap of 4, counting only this test's workers (not other tests' kept ones)."""
    monkeypatch.setattr(kept_workers, "_CAP", [4])
    monkeypatch.setattr(kept_workers, "_LIVE", weakref.WeakSet())


def test_workers_past_the_cap_are_refused_until_one_ends(cap_of_4: None) -> None:
    # Uids no account names: the workers take them all the same (subordinate ids).
    base = 3_000_000
    started = [opener._KEPT.start(base + i, base + i, [base + i]) for i in range(4)]
    try:
        with pytest.raises(WorkerFailed, match=r"runs 4 workers for users.*max_workers"):
            parser._KEPT.start(base + 9, base + 9, [base + 9])
        parser.warm(base + 9, base + 9, [base + 9])  # a hello past half: nothing started
        assert not parser._KEPT.kept
        end(started.pop())
        room = parser._KEPT.start(base + 9, base + 9, [base + 9])
        end(room)
        end(started.pop())
        end(started.pop())  # one left of 4: under half, a hello takes the spare
        parser.warm(base + 8, base + 8, [base + 8])
        assert not parser._KEPT.kept  # no spare kept: a hello never execs one
        kept_workers.keep_spares()
        assert wait_until(lambda: parser._KEPT._spare is not None, 10.0)
        parser.warm(base + 8, base + 8, [base + 8])
        assert [k[0] for k in parser._KEPT.kept] == [base + 8]
    finally:
        kept_workers.end_spares()
        for w in started:
            end(w)
        opener._KEPT.end_all()
        parser._KEPT.end_all()
