"""What a probe kind is: the one place that says how its specs are parsed, planned into
rows and programs, loaded, costed, calibrated and shown. The engine, the agent, the CLI
and the TUI ask the kind (kinds.KINDS) instead of testing a spec's kind themselves."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol

from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.cost.class_cost import ClassCost
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo
from adaptyst_top.collectors.probes.model import ProbeModule, Row
from adaptyst_top.collectors.probes.safety import entry_safety
from adaptyst_top.collectors.probes.safety.confinement import Confinement
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec
from adaptyst_top.snapshot.probes import ProbeKey, ProbeKind


class PlanContext(Protocol):
    """What planning asks of the engine it plans for."""

    @property
    def pid(self) -> int | None: ...

    @property
    def confine(self) -> Confinement | None:
        """Whose processes alone it probes (root serving a user), or None."""
        ...

    def new_row(self, spec: ProbeSpec, name: str, path: str, cls: str, slot: int) -> Row:
        """A row with the engine's next id."""
        ...

    def room(self) -> int:
        """Attach points the engine (and its user's account) may still add."""
        ...

    def entry_refusal(self, insn: entry_safety.EntryInsn) -> str | None:
        """Why a function's first instruction may not carry a probe, or None."""
        ...

    def proc_file(self, pid: int, name: str) -> int | None:
        """/proc/PID/NAME of a process of the scope as it was checked (a descriptor, the
        caller closes it); None when it is not held, gone, or not readable."""
        ...


@dataclass
class Plan:
    """A spec planned: the rows to attach, their programs' slots, the rows refused (in
    state error, with why), and whether its rows may share multi-uprobe links."""

    rows: list[Row]
    slots: list[Slot]
    refused: list[Row] = field(default_factory=list)
    multi_links: bool = False


@dataclass(frozen=True)
class CalibrationCase:
    """One cost class measured at start-up: the calibrator's function or probe that
    exercises it (its command-line word), the spec on it ({bin}: the calibrator), and
    how many calls to time (fewer where each costs more)."""

    cost_class: str
    word: str
    spec: str
    calls: int


class ProbeKindDef(ABC):
    """A kind of probe. NAME is the snapshot's `kind`; ALIASES other words a spec may
    start with; SYNTAX how its specs read (help and errors); WHAT one line on what its rows
    measure; KEYS how an @argN/@retval suffix reads on it."""

    name: ClassVar[ProbeKind]
    aliases: ClassVar[tuple[str, ...]] = ()
    shape: ClassVar[str]  # the spec without options: "uprobe:TARGET:FUNC"
    syntax: ClassVar[str]  # with them: "uprobe:TARGET:FUNC[@argN|@retval]"
    what: ClassVar[str]
    keys: ClassVar[KeyRules]
    calibration: ClassVar[tuple[CalibrationCase, ...]] = ()
    # Each cost class its rows may be in, with the figures measured on this kind of
    # machine (docs/data-flow.md, bench/), used until calibration answers (or where it
    # cannot run: no gcc, not x86-64) and labelled "default".
    cost_classes: ClassVar[Mapping[str, ClassCost]] = MappingProxyType({})
    # Its latencies are of some hits only (a budget samples them): the snapshot says how
    # many were timed, and a mean is over those.
    sampled_latency: ClassVar[bool] = False
    # Its latencies are host threads' time, so their on-CPU part is measured (and joules
    # charged by it); False for a device's own clock.
    host_time: ClassVar[bool] = True
    # Variables of launch_env that name one thing only (the driver loads one injection
    # library): a value of the user's there is lost, and the user is told.
    exclusive_env: ClassVar[tuple[str, ...]] = ()
    # Its program, compiled with the package (`kinds/<file>.bpf.c` -> `.bpf.o`, loaded
    # by libbpf: module_object.py); its plan's slot names map onto that object's
    # programs, the slot in the attach cookie.
    bpf_object: ClassVar[str | None] = None

    @abstractmethod
    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        """SPEC from its body REST (after `kind:`, at column BODY_START, its KEY suffix
        split off); ProbeSpecError when malformed."""

    @abstractmethod
    def plan(self, ctx: PlanContext, spec: ProbeSpec, path: str, source: str, elf: ElfInfo) -> Plan:
        """The rows and slots SPEC becomes in PATH (its bytes read at SOURCE); ProbeError
        when nothing in it can be probed."""

    def instead(self, ctx: PlanContext, spec: ProbeSpec) -> tuple[ProbeSpec, str] | None:
        """A spec to build in SPEC's place where SPEC cannot work on the target (and the
        line that says so), or None."""
        return None

    def target_name(self, spec: ProbeSpec, pid: int | None) -> str:
        """The file SPEC names, as a path or a library name (targets.py) for PID's view;
        a kind whose specs name none itself (mpi:) finds it. ProbeError when none."""
        return spec.target

    def instead_targets(self, spec: ProbeSpec) -> tuple[str, ...]:
        """The files a spec built instead (`instead`) may name: the agent opens them as
        the user beside SPEC's own, so that the spec instead can be built there too."""
        return ()

    def loaded(self, module: ProbeModule, spec: ProbeSpec, source: str, elf: ElfInfo) -> None:
        """After the module compiled, before its rows attach (what its readers need from
        the file)."""
        return None

    def shown_name(self, name: str) -> str:
        """A row's name as a table shows it."""
        return name

    def shown_target(self, target: str) -> str:
        """A row's probed file as a table's Target column shows it."""
        return target.rsplit("/", 1)[-1]

    def entry_name(self, spec: ProbeSpec, row_name: str, key: ProbeKey) -> str | None:
        """The name of a row's entry for KEY in a snapshot; None: the entry is not shown
        (a key its spec does not ask for)."""
        return row_name

    def launch_env(
        self, env: dict[str, str], budget: float, spec: ProbeSpec | None = None
    ) -> dict[str, str]:
        """Variables a command launched with a probe of this kind runs with (ENV: its
        environment as it would be; BUDGET: the probes' share of its time; SPEC: the
        probe)."""
        return {}
