"""mpi:[CALL]: the time each rank spends in MPI's blocking calls (waits, collectives,
blocking receives), as uprobes on the MPI library the target maps: MPICH's libmpich, Open
MPI's or Intel MPI's libmpi. Whether a rank sleeps there or spins in the progress engine,
entry to return is the time it waited. CALL, a glob without `MPI_`, narrows the set
(`mpi:Allreduce`, `mpi:Wait*`); without it, every call in BLOCKING. A call named takes
its MPI-4 large-count form (`MPI_Allreduce_c`) with it, where the library has one."""

from __future__ import annotations

import fnmatch
import re
from types import MappingProxyType

from adaptyst_top.collectors.probes.kinds.uprobe import Uprobe
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec, ProbeSpecError
from adaptyst_top.system.targets import TargetError, mapped_library, resolve_target

# Library short names (system/targets.py), in the order asked: a process maps one.
LIBRARIES = ("mpich", "mpi")
# The calls a rank waits in for others: MPI-3's blocking point-to-point completions and
# its blocking collectives.
BLOCKING = (
    "Wait",
    "Waitall",
    "Waitany",
    "Waitsome",
    "Recv",
    "Sendrecv",
    "Probe",
    "Barrier",
    "Bcast",
    "Reduce",
    "Allreduce",
    "Reduce_scatter",
    "Reduce_scatter_block",
    "Scan",
    "Exscan",
    "Gather",
    "Gatherv",
    "Allgather",
    "Allgatherv",
    "Scatter",
    "Scatterv",
    "Alltoall",
    "Alltoallv",
    "Alltoallw",
)
# MPI-4's large-count forms (`MPI_Bcast_c`), which mpi4py 4 and other bindings call where
# the library has them: a call named takes its form with it, a row each.
LARGE_COUNT = tuple(
    c for c in BLOCKING if not c.startswith("Wait") and c not in ("Probe", "Barrier")
)
NAMES = BLOCKING + tuple(f"{c}_c" for c in LARGE_COUNT)
ANY_MPI = "|".join(LIBRARIES)  # the spec's target until the engine finds which
_CALL = re.compile(r"^[A-Za-z_*?]*$")


class Mpi(Uprobe):
    name = "mpi"
    aliases = ()
    shape = "mpi:[CALL]"
    syntax = "mpi:[CALL]"
    what = "time in MPI's blocking calls"
    keys = KeyRules(
        most_args=0,
        why_most="mpi: rows are split by rank, not by argument (use uprobe: for that)",
        why_no_retval="mpi: rows are split by rank, not by return value",
        at_in_names=False,
    )
    # Its rows are uprobes: their classes are the uprobe kind's, declared and measured there.
    cost_classes = MappingProxyType({})
    calibration = ()

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        glob = rest.strip().removeprefix("MPI_") or "*"
        if not _CALL.match(glob):
            raise ProbeSpecError(spec, body_start, len(rest), "expected an MPI call's name")
        named = [c for c in NAMES if fnmatch.fnmatchcase(c, glob)]
        if not named:
            raise ProbeSpecError(
                spec,
                body_start,
                len(rest) or 1,
                f"no blocking MPI call matches {glob!r} (of {', '.join(BLOCKING)}, and "
                "their large-count forms, NAME_c)",
            )
        forms = [f"{c}_c" for c in named if c in LARGE_COUNT]
        calls = list(dict.fromkeys(named + forms))
        func = f"MPI_{calls[0]}" if len(calls) == 1 else "MPI_{" + ",".join(calls) + "}"
        return ProbeSpec(spec, "mpi", ANY_MPI, func=func, label=func, measures_latency=True)

    def target_name(self, spec: ProbeSpec, pid: int | None) -> str:
        """The MPI library PID maps (else this node's): its short name."""
        if pid is not None:  # what the process maps comes first, either library
            for library in LIBRARIES:
                if mapped_library(library, pid) is not None:
                    return library
        for library in LIBRARIES:
            try:
                resolve_target(library, pid)
            except TargetError:
                continue
            return library
        where = f"mapped by PID {pid} or " if pid is not None else ""
        raise ProbeError(f"{spec.text}: no MPI library (libmpich, libmpi) {where}installed here")
