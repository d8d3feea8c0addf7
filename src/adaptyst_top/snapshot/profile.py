"""The sampled profile's part of a snapshot: on-CPU samples and off-CPU time of the
session's threads, by function (cumulative) and by stack (what the interval added)."""

from __future__ import annotations

from dataclasses import dataclass, field

from adaptyst_top.snapshot.codec import JsonPart, json_field

_NON_NEGATIVE = (lambda v: v >= 0, "a count of zero or more")
_COUNT = json_field(check=_NON_NEGATIVE)

# Where a function's name came from, best first: the file's own symbol table, a separate
# debug file (by build ID, by debug link, from debuginfod), the exported names alone, the
# unwind table's function start (no name at all); a Python function's code object.
SYMTAB, BUILD_ID, DEBUGLINK, DEBUGINFOD, DYNSYM, EH_FRAME, PYTHON = (
    "symtab",
    "build-id",
    "debuglink",
    "debuginfod",
    "dynsym",
    "eh_frame",
    "python",
)
NAMED_BY = (SYMTAB, BUILD_ID, DEBUGLINK, DEBUGINFOD, DYNSYM, EH_FRAME, PYTHON)


@dataclass(frozen=True, slots=True)
class ProfileFunction(JsonPart):
    """One function: samples with it as the leaf (`self`), samples with it anywhere on
    the stack (`total`), and off-CPU ns with it on the stack, since the start."""

    name: str
    module: str  # its file, as the process maps it
    symbol: str = ""  # its ELF symbol: what a uprobe attaches to ("" where none is known)
    self_samples: int = field(default=0, metadata=json_field(name="self", check=_NON_NEGATIVE))
    total: int = field(default=0, metadata=json_field(check=_NON_NEGATIVE))
    off_ns: float = field(default=0.0, metadata=json_field(check=_NON_NEGATIVE))
    # Where its name came from: symtab, dynsym, build-id, debuglink, debuginfod, eh_frame
    # (its start address, nothing named it), python ("" where nothing is known).
    named_by: str = field(
        default="",
        metadata=json_field(omit="empty", check=(lambda v: v in NAMED_BY or v == "", "a source")),
    )
    # A Python function's: the line of its definition in `module` (0: not Python).
    line: int = field(default=0, metadata=json_field(omit="empty", check=_NON_NEGATIVE))


@dataclass(frozen=True, slots=True)
class ProfileStack(JsonPart):
    """One thread's stack, outermost frame first, and what the interval added to it:
    on-CPU samples, ns blocked off the CPU (sleep, I/O, a lock, a device's sync) and ns
    runnable but off it (preempted: another task had the core). A stack whose unwind
    stopped short ends in `[unknown]`."""

    pid: int
    tid: int
    frames: tuple[str, ...]
    samples: int = field(default=0, metadata=json_field(check=_NON_NEGATIVE))
    off_ns: float = field(default=0.0, metadata=json_field(check=_NON_NEGATIVE))
    runnable_ns: float = field(default=0.0, metadata=json_field(check=_NON_NEGATIVE))


@dataclass(frozen=True, slots=True)
class ProfilePart(JsonPart):
    hz: int = field(metadata=json_field(check=(lambda v: v > 0, "a rate above zero")))
    samples: int = field(default=0, metadata=_COUNT)  # on-CPU samples since the start
    # Of them, unwound to the outermost frame (every caller found).
    complete: int = field(default=0, metadata=_COUNT)
    off_ns: float = field(default=0.0, metadata=_COUNT)  # blocked ns since the start
    runnable_ns: float = field(default=0.0, metadata=_COUNT)  # preempted ns since the start
    lost: int = field(default=0, metadata=_COUNT)  # events lost to a full buffer
    functions: tuple[ProfileFunction, ...] = ()  # the hottest, by total then off-CPU
    stacks: tuple[ProfileStack, ...] = ()  # since the previous snapshot
    # What a sample and a context switch cost in the kernel (mean ns of the programs;
    # the switch's at every switch on the node); None until the statistics sampled them.
    sample_ns: float | None = field(default=None, metadata=json_field(omit="none"))
    switch_ns: float | None = field(default=None, metadata=json_field(omit="none"))
    events: int = field(default=0, metadata=_COUNT)  # handed over by the kernel, all kinds
    copied_bytes: int = field(default=0, metadata=_COUNT)  # their bytes (stacks, mostly)
    cpu_s: float = field(
        default=0.0, metadata=_COUNT
    )  # the tool's own CPU spent unwinding and counting, since the start
    # What the profile says of itself, in one line: why its rate was lowered, why it
    # stopped counting ("" while all is well).
    note: str = field(default="", metadata=json_field(omit="empty"))
    # The rate asked for, when the budget lowered it to `hz` (0: not lowered).
    asked_hz: int = field(default=0, metadata=json_field(omit="empty", check=_NON_NEGATIVE))
    # What the samples and switch-outs cost in the target: a share of its CPU time.
    share: float | None = field(default=None, metadata=json_field(omit="none", check=_NON_NEGATIVE))
