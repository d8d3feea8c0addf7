"""Settings merge as documented: the command line over the config file over the
defaults; every option reaches every engine the session makes."""

from __future__ import annotations

import pytest

from tests.support.marks import requires_root


@pytest.mark.ebpf
@requires_root
def test_enforce_budget_reaches_an_engine_started_by_adding_a_probe(workload) -> None:  # type: ignore[no-untyped-def]
    from adaptyst_top.runtime.session import open_session
    from adaptyst_top.runtime.session_options import ProbeSettings, SessionOptions, Target

    session = open_session(
        SessionOptions(Target(pid=workload.pid), ProbeSettings(enforce_budget=True, budget=0.001))
    )
    try:
        assert session.engine is None  # no probe yet: started by the first `a`
        engine = session.ensure_engine()
        assert engine.enforce_budget and engine.budget == 0.001
    finally:
        session.close()
