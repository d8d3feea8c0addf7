"""Whose processes alone a user's programs count in, when the agent serves them: the
kernel offsets `theirs_in()` (bpf/theirs.h, which every entry asks first) reads, from
the running kernel's BTF, set as each program's read-only config before load.

Every entry a user's probes see (the agent's, for a user that is not root or an admin)
asks first whether its process is still theirs: their real uid, dumpable as the user,
their ids throughout and no capability. A setuid, setgid or file-capability exec, an
execute-only program or PR_SET_DUMPABLE 0 makes it not, before its first instruction,
so no hit in it counts (the agent's guard then ends the probes)."""

from __future__ import annotations

import ctypes as ct
from dataclasses import dataclass

from adaptyst_top.collectors.probes.bpf.kernel_btf import member_offset


@dataclass(frozen=True)
class Confinement:
    """Whose processes alone a module counts in: the offsets theirs_in() reads, from the
    running kernel's BTF."""

    uid: int
    task_mm: int
    mm_flags: int
    task_cred: int  # real_cred: the ids others see it by (ptrace's)
    ids_at: int  # cred's uid: the ids below are u32 words from here
    id_words: int
    gid: int
    euid: int
    suid: int
    egid: int
    sgid: int
    cred_caps: int  # cap_permitted (kernel_cap_t: 64 bits)

    @classmethod
    def of(cls, uid: int) -> Confinement:
        """BTFError when the running kernel does not describe itself."""
        at = {n: member_offset("cred", n) for n in ("uid", "gid", "suid", "sgid", "euid", "egid")}
        base = min(at.values())
        words = {n: (off - base) // 4 for n, off in at.items()}
        return cls(
            uid,
            member_offset("task_struct", "mm"),
            member_offset("mm_struct", "flags"),
            member_offset("task_struct", "real_cred"),
            base,
            max(words.values()) + 1,
            words["gid"],
            words["euid"],
            words["suid"],
            words["egid"],
            words["sgid"],
            member_offset("cred", "cap_permitted"),
        )


_CONFIG_FIELDS = (
    "confined",
    "uid",
    "task_mm",
    "mm_flags",
    "task_cred",
    "ids_at",
    "cred_caps",
    "id_gid",
    "id_euid",
    "id_suid",
    "id_egid",
    "id_sgid",
)


class ConfineConfig(ct.Structure):
    """`struct confine_config` of bpf/theirs.h: a precompiled program's read-only part
    that says whose processes count."""

    _fields_ = [(n, ct.c_uint32) for n in _CONFIG_FIELDS]


def confine_config(confine: Confinement | None) -> ConfineConfig:
    c = ConfineConfig()
    if confine is not None:
        c.confined, c.uid = 1, confine.uid
        c.task_mm, c.mm_flags, c.task_cred = confine.task_mm, confine.mm_flags, confine.task_cred
        c.ids_at, c.cred_caps = confine.ids_at, confine.cred_caps
        c.id_gid, c.id_euid, c.id_suid = confine.gid, confine.euid, confine.suid
        c.id_egid, c.id_sgid = confine.egid, confine.sgid
    return c
