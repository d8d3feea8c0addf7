"""Whether a uprobe may go on a function: its first instruction must be safe for the kernel.

A uprobe replaces a function's first instruction with a breakpoint. The kernel then
either emulates that instruction (push, nop, jumps, calls) or copies it to a page of
its own and single-steps it there. Single-stepping is where a probe can change what
the target computes: on this kind of VM, an AVX-512 (EVEX) instruction on ymm16-31,
which glibc's *_evex string functions start with, came out wrong 99 times in 100.

So every attach point's first instruction is decoded (Capstone) into an encoding
class, and a class that the kernel must single-step is allowed only once it has been
verified on this boot and kernel: a small program (entry_check.c) runs functions that
start with an instruction of each class, with and without a probe, in a child
process, and a class whose results differ (or that could not be checked) is refused.
The verdicts are cached per boot, kernel, CPU and check version.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any

from adaptyst_top.collectors.probes.cost import overhead as ov
from adaptyst_top.collectors.probes.helpers.build import (
    boot_key,
    helper_source,
    load_result,
    save_result,
)

EMULATED = "emulated"  # no single-step: always safe
GP = "gp"  # general-purpose instruction, registers or plain memory
GP_RIPREL = "gp-riprel"  # general-purpose with a RIP-relative operand (rewritten out of line)
SSE = "sse"  # legacy-encoded SIMD (mmx/xmm)
VEX = "vex"  # AVX/AVX2 (VEX prefix)
EVEX = "evex"  # AVX-512 (EVEX prefix)
OTHER = "other"  # x87, XOP, privileged or undecodable: never verified, always refused
LOCKED = "locked"  # a LOCK prefix: the kernel refuses the probe itself (ENOTSUPP)

ENCODING_NAMES = {
    GP: "general-purpose",
    GP_RIPREL: "RIP-relative general-purpose",
    SSE: "SSE",
    VEX: "AVX (VEX)",
    EVEX: "AVX-512 (EVEX)",
    OTHER: "unverifiable",
    LOCKED: "LOCK-prefixed",
}

# The check target's functions per class (all must pass), and the CPU flags each needs.
CHECKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    GP: (("gp",), ()),
    GP_RIPREL: (("riprel",), ()),
    SSE: (("sse",), ("sse2",)),
    VEX: (("vex",), ("avx2",)),
    EVEX: (("evex", "evex_zmm"), ("avx512f", "avx512vl", "avx512bw")),
}
CHECK_CALLS = 3000
_SYSTEM = frozenset(
    ("syscall", "sysenter", "int", "int3", "into", "int1", "ud0", "ud1", "ud2", "hlt", "iretq")
)
_LEGACY_PREFIXES = frozenset((0x66, 0x67, 0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65))


@dataclass(frozen=True)
class EntryInsn:
    """A function's first instruction as the kernel will meet it."""

    text: str  # e.g. "vpbroadcastb ymm17, esi"
    encoding: str  # one of the classes above

    @property
    def description(self) -> str:
        return f"`{self.text}` ({ENCODING_NAMES.get(self.encoding, self.encoding)})"


@functools.cache
def disassembler() -> Any:
    import capstone  # type: ignore[import-untyped]  # 20-50 ms: only when an entry is read

    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    return md


def decode_entry(code: bytes, machine: str = "x86_64") -> EntryInsn:
    """The encoding class of the first instruction in CODE (x86-64)."""
    if machine not in ("x86_64", "EM_X86_64"):
        return EntryInsn(f"({machine} code)", OTHER)
    insn = next(iter(disassembler().disasm(code, 0)), None)
    if insn is None:
        return EntryInsn(f"undecodable bytes {code[:8].hex()}", OTHER)
    text = f"{insn.mnemonic} {insn.op_str}".strip()
    if ov.classify_entry(code, machine) == ov.EMULATED:
        return EntryInsn(text, EMULATED)
    i = 0
    while i < insn.size and code[i] in _LEGACY_PREFIXES:
        i += 1
    if i < insn.size and 0x40 <= code[i] <= 0x4F:  # REX
        i += 1
    if 0xF0 in code[:i]:
        # The kernel's uprobe decoder rejects it (pthread_spin_lock starts so): found
        # here, one such function can no longer fail a multi-uprobe link of thousands.
        return EntryInsn(text, LOCKED)
    lead = code[i] if i < insn.size else 0
    read, written = insn.regs_access()
    regs = {insn.reg_name(r) or "" for r in (*read, *written)}
    if lead == 0x62:
        return EntryInsn(text, EVEX)
    if lead in (0xC4, 0xC5):
        return EntryInsn(text, VEX)
    if lead == 0x8F and i + 1 < insn.size and (code[i + 1] >> 3) & 7:  # XOP
        return EntryInsn(text, OTHER)
    if 0xD8 <= lead <= 0xDF or "st(" in insn.op_str or insn.mnemonic in _SYSTEM:
        return EntryInsn(text, OTHER)
    if any(r.startswith(("xmm", "mm")) for r in regs):
        return EntryInsn(text, SSE)
    if "rip" in insn.op_str:
        return EntryInsn(text, GP_RIPREL)
    return EntryInsn(text, GP)


@dataclass(frozen=True)
class Verdict:
    status: str  # verified | failed | unverifiable
    detail: str


class EntryPolicy:
    """Which encoding classes may be single-stepped under a probe, on this boot."""

    def __init__(self, verdicts: dict[str, Verdict], trust_all: bool = False) -> None:
        self.verdicts = verdicts
        self.trust_all = trust_all

    @classmethod
    def trusting(cls) -> EntryPolicy:
        """For the entry check itself: its own functions, whatever they start with."""
        return cls({}, trust_all=True)

    def refusal(self, insn: EntryInsn) -> str | None:
        """Why a probe on a function starting with INSN is refused; None when it is safe."""
        if self.trust_all or insn.encoding == EMULATED:
            return None
        verdict = self.verdicts.get(insn.encoding)
        if verdict is not None and verdict.status == "verified":
            return None
        if insn.encoding == LOCKED:
            why = "the kernel does not put probes on LOCK-prefixed instructions"
        elif insn.encoding == OTHER:
            why = "the kernel would single-step it and no check covers that class"
        elif verdict is None:
            why = "the kernel would single-step it and the entry check did not run"
        elif verdict.status == "failed":
            why = f"the kernel single-steps this class wrongly on this machine ({verdict.detail})"
        else:
            why = f"the kernel would single-step it and the class is unverified ({verdict.detail})"
        return f"starts with {insn.description}: {why}"


def usdt_site_refusal(code: bytes, machine: str = "x86_64") -> str | None:
    """Why a USDT site may not carry a probe, or None. sys/sdt.h puts a nop at every
    site; a note that points anywhere else (inside an instruction: a hostile or broken
    note) would have the kernel overwrite part of a real instruction, and the target
    compute something else."""
    if machine not in ("x86_64", "EM_X86_64"):
        return None  # decoded on x86-64 only; elsewhere the kernel's own checks stand
    if not code:
        return "its site is not in the file"
    insn = next(iter(disassembler().disasm(code, 0)), None)
    if insn is not None and insn.mnemonic == "nop":
        return None
    found = f"`{insn.mnemonic} {insn.op_str}`".replace(" `", "`") if insn else code.hex()
    return f"its site is not a nop but {found} (the note points inside other code)"


def refusal_line(
    name: str, insn: EntryInsn, reason: str, ifunc: bool, variants: list[str] | None = None
) -> str:
    """One line: the function, the instruction, why, and what to probe instead (for an
    IFUNC, its other implementations that start safely, when the symbol table names them)."""
    where = f"{name} (an IFUNC: the implementation this CPU runs)" if ifunc else name
    alt = "probe its caller instead"
    if variants:
        alt = f"probe its caller, or a variant that starts safely ({', '.join(variants[:3])})"
    return f"refused {where}: {reason}; {alt}"


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cache_key() -> str:
    flags = " ".join(sorted(cpu_flags())).encode()
    return boot_key(helper_source("entry_check"), (__doc__ or "").encode(), flags)


def load_cached() -> dict[str, Verdict] | None:
    verdicts = load_result("entry-check", _cache_key)
    try:
        return {k: Verdict(**v) for k, v in verdicts.items()}
    except (TypeError, AttributeError):
        return None


def save_cached(verdicts: dict[str, Verdict]) -> None:
    save_result("entry-check", _cache_key(), {k: asdict(v) for k, v in verdicts.items()})


_LOCK = threading.Lock()
_POLICY: EntryPolicy | None = None


def cached_policy() -> EntryPolicy | None:
    """The verdicts already known on this boot, without running anything."""
    if _POLICY is not None:
        return _POLICY
    verdicts = load_cached()
    return None if verdicts is None else EntryPolicy(verdicts)


def policy_for_this_boot() -> EntryPolicy:
    """The verdicts from the cache, or from a check run now in a child process (entry_check.py) (once
    per process; a target probed wrongly there harms nobody's work)."""
    global _POLICY
    with _LOCK:
        if _POLICY is None:
            verdicts = load_cached()
            if verdicts is None:
                verdicts = _run_child()
            _POLICY = EntryPolicy(verdicts)
        return _POLICY


def _run_child() -> dict[str, Verdict]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "adaptyst_top.collectors.probes.safety.entry_check"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return _all_unverified(f"the entry check did not finish: {exc}")
    if not isinstance(data, dict):
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        return _all_unverified(f"the entry check failed: {lines[-1]}")
    return {k: Verdict(**v) for k, v in data.items()}


def _all_unverified(why: str) -> dict[str, Verdict]:
    return {cls: Verdict("unverifiable", why) for cls in CHECKS}
