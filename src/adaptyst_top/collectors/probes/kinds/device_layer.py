"""What the device kinds (opencl:, cuda:) share: a library the tool ships and puts
under a command it launches, which hands kernels' device times to the engine through
two USDT sites of one provider:

  PROVIDER:timed(records, n)     n records {name, device_ns, on_cpu}, read by a bounded
                                 BPF loop (slot 0, role usdt-batch)
  PROVIDER:launches(name, n)     n launches of NAME, filed under slot 0's keys and gate
                                 (slot 1, role usdt-add)

A spec is `KIND:GLOB` over kernel names; its one row holds every launch counted exactly
and, as a latency, the device's END - START of the launches timed (a budget samples
them)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from fnmatch import fnmatchcase
from typing import ClassVar

from adaptyst_top.collectors.probes.bpf.keys import HASHED_PREFIX, KEY_BYTES, cut_name, fnv1a
from adaptyst_top.collectors.probes.bpf.program import WHOLE_LEN, Slot, SlotRole
from adaptyst_top.collectors.probes.elf import usdt_args
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, UsdtProbe
from adaptyst_top.collectors.probes.engine.attach_plan import PlanError, plan_usdt
from adaptyst_top.collectors.probes.kinds.base import Plan, PlanContext, ProbeKindDef
from adaptyst_top.collectors.probes.kinds.usdt import site_attachments
from adaptyst_top.collectors.probes.model import ProbeError
from adaptyst_top.collectors.probes.spec import Key, KeyRules, ProbeSpec, ProbeSpecError
from adaptyst_top.snapshot import ProbeKey

TIMED, LAUNCHES, NAME = "timed", "launches", "name"
SITE_ARGS = 2  # each site's two arguments: timed(records, n), launches(name, n), name(key, whole)
# The name site tells a long name whole (layer_common.h): a library without it (the
# Python layer's names are keyed before it sees them) has rows named by their keys.
_SITE_ROLES: tuple[tuple[str, SlotRole], ...] = (
    (TIMED, "usdt-batch"),
    (LAUNCHES, "usdt-add"),
    (NAME, "usdt-name"),
)
_OPTIONAL = (NAME,)
_GLOB = re.compile(r"[A-Za-z0-9_*?\[\]!.~-]{1,128}")
_MAPS_READ = 1 << 22  # a process's maps read up to 4 MiB: the library is among the first


def row_name(kernel: str) -> str:
    """The name KERNEL's row has in the kernel (as layer_common.h's key_text makes it):
    itself when it fits the probes' key, else its first 22 bytes, '~' and 8 hex digits
    of its FNV-1a hash, so that kernels alike in their first bytes stay apart."""
    raw = kernel.encode()
    if len(raw) <= KEY_BYTES:
        return kernel
    return f"{raw[:HASHED_PREFIX].decode(errors='replace')}~{fnv1a(raw):08x}"


def shown_name(kernel: str) -> str:
    """The name KERNEL's row shows once its layer told it whole (its name site): itself,
    or, longer than the names map keeps, its first bytes and its key's hash."""
    raw = kernel.encode()
    return kernel if len(raw) < WHOLE_LEN else cut_name(raw, fnv1a(raw))


def library_path(module: str) -> str | None:
    """MODULE's shared library as installed (built with the package), or None."""
    found = importlib.util.find_spec(module)
    origin = found.origin if found is not None else None
    return os.path.realpath(origin) if origin else None


class DeviceLayerKind(ProbeKindDef):
    """A device kind: its library (MODULE, built by setup.py; NOUN in lines), its
    sites' PROVIDER, the cost classes of a launch timed and of one counted, and what to
    say when the install has no library (MISSING)."""

    bpf_object = "usdt.bpf.o"  # its sites are USDT probes in the layer

    module: ClassVar[str]
    provider: ClassVar[str]
    timed_class: ClassVar[str]
    counted_class: ClassVar[str]
    missing: ClassVar[str]
    noun: ClassVar[str]  # what the library is called in a line: "OpenCL layer"
    device: ClassVar[str]  # where its rows ran, for the Target column: "CUDA device"
    sampled_latency = True
    host_time = False  # the device's clock: on-CPU only where the device is the CPU
    keys = KeyRules(
        most_args=0,
        why_most="a device kernel probe is split by kernel name, not by an argument",
        why_no_retval="a device kernel probe has no @retval",
        at_in_names=False,
    )

    @classmethod
    def library(cls) -> str | None:
        return library_path(cls.module)

    def parse(self, spec: str, rest: str, body_start: int, key: Key) -> ProbeSpec:
        if not _GLOB.fullmatch(rest):
            raise ProbeSpecError(
                spec,
                body_start,
                len(rest) or 1,
                "expected a kernel name or glob (A-Z a-z 0-9 _ * ?)",
            )
        library = self.library()
        if library is None:
            raise ProbeSpecError(spec, 0, len(spec), self.missing)
        return ProbeSpec(
            spec,
            self.name,
            library,
            func=rest,
            provider=self.provider,
            name=TIMED,
            arg=1,
            arg_type="str",
            label=f"{self.name}:{rest}",
            measures_latency=True,
        )

    def plan(self, ctx: PlanContext, spec: ProbeSpec, path: str, source: str, elf: ElfInfo) -> Plan:
        """One row, a program per site: slot 0 on the timed launches' site, slot 1 (filing
        its counts under slot 0's keys and gate) on the counted ones', slot 2 on the site
        that tells long names whole, where the library has it."""
        row = ctx.new_row(spec, spec.label, path, self.timed_class, 0)
        row.count_class = self.counted_class
        slots: list[Slot] = []
        for site, role in _SITE_ROLES:
            if site in _OPTIONAL and not any(
                (u.provider, u.name) == (self.provider, site) for u in elf.usdt
            ):
                continue
            try:
                # Planned unkeyed (no reader of a key argument): the programs read both
                # arguments themselves, the name from a record or from the launches site.
                unkeyed = dataclasses.replace(spec, name=site, arg=None)
                planned = plan_usdt(unkeyed, path, elf, ctx.room())
                args = tuple(self._arg_reader(planned.sites[site], site, path, n) for n in (1, 2))
            except PlanError as exc:
                raise ProbeError(str(exc)) from None
            slot = dataclasses.replace(
                planned.slots[0], index=len(slots), role=role, args=args, arg=1, files_as=0
            )
            planned = dataclasses.replace(planned, slots=[slot])
            row.fns += slot.fn_names
            row.attachments += site_attachments(planned, source, elf)
            slots.append(slot)
        return Plan([row], slots)

    def shown_target(self, target: str) -> str:
        """Its rows ran on a device; the file probed is only the tool's own library."""
        return self.device

    def entry_name(self, spec: ProbeSpec, row_name: str, key: ProbeKey) -> str | None:
        if key is None:
            return row_name  # nothing launched yet: the probe itself
        name = str(key)
        return name if fnmatchcase(name, spec.func or "*") else None

    def not_loaded_in(self, ctx: PlanContext, pid: int, library: str, env: str) -> str | None:
        """Why PID's launches cannot reach the library's sites (started without it), or
        None: it was (its maps hold LIBRARY, or ENV names it), or it cannot be told.
        Read through the process as the scope holds it, never by its number (which
        another may have now)."""
        found = {}
        for name in ("maps", "environ"):
            fd = ctx.proc_file(pid, name)
            if fd is None:
                return None
            with os.fdopen(fd, "rb") as f:
                found[name] = f.read(_MAPS_READ)
        own = os.fsencode(library)
        if any(line.endswith(b" " + own) for line in found["maps"].split(b"\n")):
            return None
        prefix = env.encode() + b"="
        for item in found["environ"].split(b"\0"):
            if item.startswith(prefix) and own in item[len(prefix) :].split(b":"):
                return None
        return (
            f"PID {pid} was not started with this tool's {self.noun} ({library}): "
            "device time needs a command the monitor launches (-- CMD)"
        )

    def _arg_reader(
        self, sites: list[UsdtProbe], site: str, path: str, n: int
    ) -> usdt_args.UsdtArg:
        """Where a site's Nth argument lies, where every site keeps it in one place (one
        program reads every site); PlanError for a site not the library's."""
        where = {p.arg_specs[n - 1] for p in sites if len(p.arg_specs) == SITE_ARGS}
        if len(where) != 1 or any(len(p.arg_specs) != SITE_ARGS for p in sites):
            raise PlanError(f"{path}: its {self.provider}:{site} site is not the {self.noun}'s")
        try:
            return usdt_args.parse_arg(where.pop())
        except usdt_args.ArgError as exc:
            raise PlanError(f"{path}: {self.provider}:{site}'s argument {n}: {exc}") from None
