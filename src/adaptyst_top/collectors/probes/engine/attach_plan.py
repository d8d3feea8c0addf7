"""Planning a spec. A uprobe spec: which functions of an ELF file it matches, where each
one's calls really go (an IFUNC's implementation), what each costs to probe and whether
its first instruction may carry a probe at all. A USDT spec: its sites in the file, the
argument it is split by, its semaphores, its programs' slots. Pure: it reads files and
decides, it attaches nothing (and so needs no privileges: tests run it on any ELF file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from adaptyst_top.collectors.probes.bpf.program import Slot
from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.elf import debug_names, ifunc, usdt_args
from adaptyst_top.collectors.probes.elf.demangle import matches, name_of
from adaptyst_top.collectors.probes.elf.elf_info import (
    ElfInfo,
    FunctionSymbol,
    UsdtProbe,
    entry_bytes,
)
from adaptyst_top.collectors.probes.safety import entry_retime, entry_safety
from adaptyst_top.collectors.probes.spec import ProbeSpec

# The reason a first instruction is refused, or None (entry_safety.EntryPolicy.refusal).
Refusal = Callable[[entry_safety.EntryInsn], "str | None"]


# Distinct places one USDT argument may lie in among a probe's sites, a program each: an
# inlined probe has a few; a file with thousands would hold the compiler for every user.
MAX_READERS = 16
# Sites one USDT spec attaches (a descriptor each per process): CPython's probes have
# one each, an inlined library probe a few; a file with thousands would spend root's.
MAX_SITES = 64


class PlanError(ValueError):
    """Why a spec matches nothing that can be probed, in one line."""


@dataclass(frozen=True)
class PlannedFunction:
    """One function to probe, or refused (`refused` says why, in one line)."""

    name: str
    cost_class: str  # overhead.EMULATED, SINGLESTEP, UPROBE_OPTIMIZED...
    entry: str  # its first instruction (an IFUNC's: its implementation's)
    sym: str = ""  # attach by name...
    addr: int = 0  # ...or by address (an IFUNC's implementation)
    refused: str | None = None
    offset: int | None = None  # its first instruction's file offset (multi-uprobe links)
    after: int | None = None  # where its interval starts, past a single-stepped entry


def matching_functions(spec: ProbeSpec, elf: ElfInfo) -> list[FunctionSymbol]:
    """Functions matching the spec's glob: one per address (aliases share one: the
    plainest name wins) and one address per name (bcc attaches by name), sorted."""
    glob = spec.func or "*"
    by_addr: dict[int, FunctionSymbol] = {}
    for sym in elf.functions:
        name = name_of(sym.name, sym.source)
        if not name.cold and matches(name, glob):  # a .cold part is not a function
            best = by_addr.get(sym.address)
            if best is None or (best.name.startswith("_"), len(best.name)) > (
                sym.name.startswith("_"),
                len(sym.name),
            ):
                by_addr[sym.address] = sym
    names: dict[str, FunctionSymbol] = {}
    for sym in by_addr.values():
        names.setdefault(sym.name, sym)
    return sorted(names.values(), key=lambda s: s.name)


def plan_uprobes(
    spec: ProbeSpec,
    path: str,
    elf: ElfInfo,
    refusal: Refusal,
    room: int,
    pid: int | None = None,
    source: str | None = None,
    beside: bool = True,
) -> list[PlannedFunction]:
    """Every function the spec matches in PATH, planned; PlanError when none can be probed
    or more than ROOM attach points would be needed. SOURCE: where PATH's bytes are read
    (the descriptor the agent opened as its user), when not PATH itself. BESIDE: the
    planner may look for PATH's debug file itself (False where root plans for a user:
    the user's own parser did)."""
    opened = source or path
    if beside:
        # Root planning for a user (the agent) takes what the user's parser merged
        # (its by-address claims checked by the agent against the file's own index).
        elf = debug_names.with_debug_names(elf, opened, path, beside)
    glob = spec.func or "*"
    if debug_names.ADDRESS.match(glob):
        at = debug_names.function_at_address(elf, glob, opened, path)
        if at is None:
            raise PlanError(
                f"{spec.text}: no function starts at {glob} in {path} (neither a symbol "
                "nor its unwind table says so; `list` shows the functions)"
            )
        matched = [at]
    else:
        matched = matching_functions(spec, elf)
    if not matched:
        hint = " (binary is stripped: only exported functions are visible)" if elf.stripped else ""
        raise PlanError(f"{spec.text}: 0 functions matched {glob!r} in {path}{hint}")
    if len(matched) > room:
        raise PlanError(
            f"{spec.text}: {len(matched)} functions match, more than the limit of "
            f"{room} more attach points (narrow the glob or raise --max-probes)"
        )
    planned: list[PlannedFunction] = []
    unresolved: list[str] = []
    retime = len(matched) <= entry_retime.RETIME_MAX
    for sym in matched:
        try:
            planned.append(plan_function(path, elf, sym, refusal, pid, source, retime))
        except ifunc.IfuncError as exc:
            unresolved.append(str(exc))
    if not planned:
        raise PlanError(f"{spec.text}: {unresolved[0]}")
    # A second probe where another function of the spec starts would be that one's
    # entry's place too: that function's entry alone goes there.
    entries = {p.offset for p in planned}
    planned = [
        replace(p, after=None, cost_class=ov.SINGLESTEP)
        if p.after is not None and p.after in entries
        else p
        for p in planned
    ]
    refused_all = [p.refused for p in planned if p.refused]
    if len(refused_all) == len(planned):
        more = f" (and {len(planned) - 1} more refused)" if len(planned) > 1 else ""
        raise PlanError(f"{refused_all[0]}{more}")
    return planned


def plan_function(
    path: str,
    elf: ElfInfo,
    sym: FunctionSymbol,
    refusal: Refusal,
    pid: int | None = None,
    source: str | None = None,
    retime: bool = True,
) -> PlannedFunction:
    """One function planned (what `list` shows too); IfuncError when an IFUNC's
    implementation cannot be known. RETIME: look for where a single-stepped entry's
    interval starts again (entry_retime.py)."""
    by_name, addr = ("", sym.address) if sym.by_address else (sym.name, 0)
    if sym.ifunc:
        # Probed where its calls go: the implementation its resolver picked.
        impl = ifunc.resolve(elf, sym.name, pid)
        sym = replace(sym, address=impl, file_offset=elf.offset_of(impl))
        by_name, addr = "", impl
    code = entry_bytes(source or path, sym)
    skip = ov.entry_skip(code, sym.file_offset, elf.machine)
    if skip:
        # Past an endbr64, on the 5-byte nop: the kernel's fast path instead of a step.
        assert sym.file_offset is not None
        code = code[skip:]
        by_name, addr = "", sym.address + skip
        sym = replace(sym, address=addr, file_offset=sym.file_offset + skip)
    insn = entry_safety.decode_entry(code, elf.machine)
    reason = None if insn.encoding == entry_safety.EMULATED else refusal(insn)
    refused = None
    if reason is not None:
        variants = safe_variants(source or path, elf, sym, refusal) if sym.ifunc else []
        refused = entry_safety.refusal_line(sym.name, insn, reason, sym.ifunc, variants)
    cls = ov.classify_entry(code, elf.machine, sym.file_offset)
    after = None
    if retime and cls in entry_retime.RETIMED and refused is None and not sym.ifunc:
        body = entry_retime.function_code(source or path, sym.file_offset, sym.size)
        at = entry_retime.after_entry(body, elf.machine)
        if at is not None and sym.file_offset is not None:
            cls, after = ov.SINGLESTEP_RETIMED, sym.file_offset + at
    shown = name_of(sym.name, sym.source).display
    text = f"endbr64; {insn.text}" if skip else insn.text
    return PlannedFunction(
        shown,
        cls,
        text,
        sym=by_name,
        addr=addr,
        refused=refused,
        offset=sym.file_offset,
        after=after,
    )


def safe_variants(path: str, elf: ElfInfo, sym: FunctionSymbol, refusal: Refusal) -> list[str]:
    """Named implementations of an IFUNC (glibc's __strchr_sse2...) that may be probed."""
    out = []
    for other in elf.functions:
        if other.name.strip("_").startswith(f"{sym.name}_") and not other.ifunc:
            insn = entry_safety.decode_entry(entry_bytes(path, other), elf.machine)
            if insn.encoding == entry_safety.EMULATED or refusal(insn) is None:
                out.append(other.name)
    return sorted(out)


@dataclass(frozen=True)
class PlannedUsdt:
    """A USDT spec's one row: the probes it names (BEGIN, and END for a pair), their sites,
    the file offsets of their semaphores (by name), and the programs' slots."""

    names: list[str]
    sites: dict[str, list[UsdtProbe]]
    ref_ctrs: dict[str, int]
    slots: list[Slot]
    cost_class: str  # overhead.USDT or USDT_PAIR, or their OPTIMIZED (5-byte nop sites)
    # (probe, site address) -> which of its slot's argument readers the site takes
    variant: dict[tuple[str, int], int] = field(default_factory=dict)


def find_usdt(elf: ElfInfo, path: str, provider: str, name: str) -> list[UsdtProbe]:
    found = [p for p in elf.usdt if p.provider == provider and p.name == name]
    if not found:
        have = sorted({f"{p.provider}:{p.name}" for p in elf.usdt})
        listing = ", ".join(have[:8]) + (" ..." if len(have) > 8 else "") if have else "none"
        raise PlanError(f"USDT probe {provider}:{name} not found in {path} (it has: {listing})")
    return found


def plan_usdt(spec: ProbeSpec, path: str, elf: ElfInfo, room: int) -> PlannedUsdt:
    """The spec's sites in PATH; PlanError when a probe, its argument or its semaphore is
    not there, or when there is no ROOM for one more attach point."""
    assert spec.provider is not None and spec.name is not None
    names = [spec.name] + ([spec.end] if spec.end else [])
    sites = {n: find_usdt(elf, path, spec.provider, n) for n in names}
    placed = [p.address for n in names for p in sites[n]]
    if len(set(placed)) < len(placed):
        # Two probes at one place would share the kernel's name for it: one could never
        # be taken off again (a pair whose END is its BEGIN, or a note given twice).
        raise PlanError(f"{spec.text}: two of its probe sites lie at one address")
    if len(placed) > MAX_SITES:
        raise PlanError(
            f"{spec.text}: {len(placed)} probe sites (at most {MAX_SITES} are attached for one spec)"
        )
    readers: tuple[usdt_args.UsdtArg, ...] = ()
    variant: dict[tuple[str, int], int] = {}
    if spec.arg is not None:
        have = min(len(p.arg_specs) for p in sites[spec.name])
        if spec.arg > have:
            raise PlanError(
                f"{spec.text}: {spec.provider}:{spec.name} has {have} argument"
                f"{'' if have == 1 else 's'}: there is no @arg{spec.arg}"
            )
        # Each site may keep the argument elsewhere (a probe inlined in many places):
        # one reader per distinct location, each site to its own.
        where = {p.address: p.arg_specs[spec.arg - 1] for p in sites[spec.name]}
        distinct = sorted(set(where.values()))
        if len(distinct) > MAX_READERS:
            raise PlanError(
                f"{spec.text}: @arg{spec.arg} lies in {len(distinct)} places among its sites "
                f"(at most {MAX_READERS} are read: a program each)"
            )
        try:
            readers = tuple(usdt_args.parse_arg(t) for t in distinct)
        except usdt_args.ArgError as exc:
            raise PlanError(f"{spec.text}: @arg{spec.arg}: {exc}") from None
        variant = {(spec.name, a): distinct.index(t) for a, t in where.items()}
    # A semaphore-gated probe is enabled by the kernel (uprobe ref_ctr_offset): it raises
    # the semaphore in each probed process while the probe is attached and drops it when
    # the probe goes, whatever ends the monitor (SIGKILL included).
    ref_ctrs: dict[str, int] = {}
    for n in names:
        sems = {p.semaphore for p in sites[n] if p.semaphore}
        if sems:
            offset = elf.offset_of(min(sems))
            if offset is None:
                raise PlanError(f"{spec.text}: the semaphore of {n} is not in the file")
            ref_ctrs[n] = offset
    if room < 1:
        raise PlanError(f"{spec.text}: more than the limit of attach points")
    named = [(n, p) for n in names for p in sites[n]]
    at = [(site_code(path, elf, p), elf.offset_of(p.address)) for _, p in named]
    for (code, _), (n, site) in zip(at, named, strict=True):
        if why := entry_safety.usdt_site_refusal(code, elf.machine):
            raise PlanError(
                f"{spec.text}: {spec.provider}:{n} at {site.address:#x} is not probed: {why}"
            )
    cls = ov.usdt_class(at, spec.is_pair)
    # One spec, one module: slots start at 0 and a pair has its own chain 1.
    if spec.is_pair:
        slots = [
            Slot(0, "usdt-begin", 1, spec.arg, spec.arg_type, readers=readers),
            Slot(1, "usdt-end", 1),
        ]
        return PlannedUsdt(names, sites, ref_ctrs, slots, cls, variant)
    slots = [Slot(0, "usdt-count", 0, spec.arg, spec.arg_type, readers=readers)]
    return PlannedUsdt(names, sites, ref_ctrs, slots, cls, variant)


def site_code(path: str, elf: ElfInfo, probe: UsdtProbe) -> bytes:
    """The instruction bytes at a USDT site, as the file has them (b"": not in the file)."""
    offset = elf.offset_of(probe.address)
    if offset is None:
        return b""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(len(ov.NOP5))
    except OSError:
        return b""
