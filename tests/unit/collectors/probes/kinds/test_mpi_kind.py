"""mpi:[CALL]: the blocking calls, narrowed by a glob, on whichever MPI library is there."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.probes.elf.demangle import MAX_ALTERNATIVES
from adaptyst_top.collectors.probes.kinds import kind_of, parse_spec
from adaptyst_top.collectors.probes.kinds import mpi as mpi_kind
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import ProbeSpecError
from adaptyst_top.system.targets import TargetError


def test_the_whole_set_and_a_narrowed_one() -> None:
    spec = parse_spec("mpi:")
    assert spec.kind == "mpi" and spec.measures_latency
    assert spec.func == "MPI_{" + ",".join(mpi_kind.NAMES) + "}"
    # A call takes its large-count form (MPI-4's, what mpi4py 4 calls) with it.
    assert parse_spec("mpi:Allreduce").func == "MPI_{Allreduce,Allreduce_c}"
    assert parse_spec("mpi:Allreduce_c").func == "MPI_Allreduce_c"
    assert parse_spec("mpi:Barrier").func == "MPI_Barrier"  # it has none
    assert parse_spec("mpi:MPI_Wait*").func == "MPI_{Wait,Waitall,Waitany,Waitsome}"
    assert len(mpi_kind.NAMES) <= MAX_ALTERNATIVES  # what one brace of a glob takes


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("mpi:Send", "no blocking MPI call matches"),
        ("mpi:a/b", "an MPI call's name"),
        ("mpi:Allreduce@arg1", "split by rank"),
    ],
)
def test_what_names_no_blocking_call_is_one_line(text: str, why: str) -> None:
    with pytest.raises(ProbeSpecError, match=why) as err:
        parse_spec(text)
    assert "\n" not in err.value.one_line


def test_the_library_a_process_maps_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, int | None]] = []

    def resolve(name: str, pid: int | None) -> str:
        asked.append((name, pid))
        if name != "mpi":
            raise TargetError(f"{name}: no such library")
        return "/usr/lib/libmpi.so.40"

    monkeypatch.setattr(mpi_kind, "resolve_target", resolve)
    monkeypatch.setattr(mpi_kind, "mapped_library", lambda name, pid: None)
    spec = parse_spec("mpi:Barrier")
    assert kind_of(spec).target_name(spec, 42) == "mpi"
    assert asked == [("mpich", 42), ("mpi", 42)]
    # Open MPI mapped by the process, MPICH only installed: the process's wins.
    monkeypatch.setattr(
        mpi_kind, "mapped_library", lambda name, pid: "/x/libmpi.so.40" if name == "mpi" else None
    )
    monkeypatch.setattr(mpi_kind, "resolve_target", lambda name, pid: f"/x/lib{name}.so")
    assert kind_of(spec).target_name(spec, 42) == "mpi"
    assert kind_of(spec).target_name(spec, None) == "mpich"
    monkeypatch.setattr(
        mpi_kind, "resolve_target", lambda n, p: (_ for _ in ()).throw(TargetError(n))
    )
    with pytest.raises(ProbeError, match="no MPI library"):
        kind_of(spec).target_name(spec, None)
