"""Whose processes alone a user's probe module counts in, when the agent serves them:
the C of `theirs()`, which every entry asks first, and the kernel offsets it reads
(from the running kernel's BTF, not the installed headers)."""

from __future__ import annotations

import ctypes as ct
from dataclasses import asdict, dataclass

from adaptyst_top.collectors.probes.kernel_btf import member_offset

# Every entry a user's probes see (the agent's, for a user that is not root or an
# admin) asks first whether its process is still theirs: their real uid, dumpable as the
# user, their ids throughout and no capability. A setuid, setgid or file-capability
# exec, an execute-only program or PR_SET_DUMPABLE 0 makes it not, before its first
# instruction, so no hit in it counts (the agent's guard then ends the probes).
THEIRS = r"""
static __always_inline int theirs(void) {
    if ((u32)bpf_get_current_uid_gid() != %(uid)d) return 0;
    char *task = (char *)bpf_get_current_task();
    char *mm = 0;
    u64 flags = 0;
    if (bpf_probe_read_kernel(&mm, sizeof(mm), task + %(task_mm)d) || !mm) return 0;
    if (bpf_probe_read_kernel(&flags, sizeof(flags), mm + %(mm_flags)d)) return 0;
    if ((flags & 3) != 1) return 0;  /* SUID_DUMP_USER */
    /* With fs.suid_dumpable=1 a setuid, setgid or file-capability exec stays dumpable:
       its ids and capabilities tell it. uid..egid are one read (contiguous in cred). */
    char *cred = 0;
    u32 ids[%(id_words)d] = {};
    u64 caps = 0;
    if (bpf_probe_read_kernel(&cred, sizeof(cred), task + %(task_cred)d) || !cred) return 0;
    if (bpf_probe_read_kernel(ids, sizeof(ids), cred + %(ids_at)d)) return 0;
    if (bpf_probe_read_kernel(&caps, sizeof(caps), cred + %(cred_caps)d)) return 0;
    return ids[%(euid)d] == %(uid)d && ids[%(suid)d] == %(uid)d
        && ids[%(egid)d] == ids[%(gid)d] && ids[%(sgid)d] == ids[%(gid)d] && caps == 0;
}
"""
ANYONES = "static __always_inline int theirs(void) { return 1; }\n"


@dataclass(frozen=True)
class Confinement:
    """Whose processes alone a module counts in (see THEIRS): the offsets it reads, from
    the running kernel's BTF."""

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


def theirs_source(confine: Confinement | None) -> str:
    return ANYONES if confine is None else THEIRS % asdict(confine)


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
