"""doctor: real checks where the machine has the thing, fakes with real names elsewhere."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.bpf.ebpf_env import (
    check_ebpf,
)
from tests.support.marks import IS_ROOT


@pytest.mark.ebpf
@pytest.mark.skipif(not IS_ROOT, reason="eBPF needs root")
def test_ebpf_usable_with_real_smoke_test() -> None:
    cap = check_ebpf(run_smoke=True)
    assert cap.status in ("ok", "degraded"), cap.detail
    smoke = [p for p in cap.parts if p.name == "smoke-test"]
    assert smoke and smoke[0].status == "ok", cap.detail
    assert "counted" in smoke[0].detail
