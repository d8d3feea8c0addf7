/* Whose processes alone a user's programs count in, when the agent serves them
 * (confinement.py says why each check): their real uid, dumpable as the user, their
 * ids throughout and no capability. The kernel offsets come from its BTF, set by user
 * space before load with the rest of the read-only config. */
#ifndef ADAPTYST_THEIRS_H
#define ADAPTYST_THEIRS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

typedef __u8 u8;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;

#define ID_WORDS 8   /* cred's uid..fsgid, read at once */

struct confine_config {
    u32 confined;       /* 1: hits count only in uid's processes while they are theirs */
    u32 uid;
    u32 task_mm, mm_flags, task_cred, ids_at, cred_caps;   /* kernel offsets (BTF) */
    u32 id_gid, id_euid, id_suid, id_egid, id_sgid;        /* u32 words from ids_at */
};

static __always_inline int theirs_in(const volatile struct confine_config *c) {
    if (!c->confined) return 1;
    if ((u32)bpf_get_current_uid_gid() != c->uid) return 0;
    char *task = (char *)bpf_get_current_task();
    char *mm = 0;
    u64 flags = 0;
    if (bpf_probe_read_kernel(&mm, sizeof(mm), task + c->task_mm) || !mm) return 0;
    if (bpf_probe_read_kernel(&flags, sizeof(flags), mm + c->mm_flags)) return 0;
    if ((flags & 3) != 1) return 0;  /* SUID_DUMP_USER */
    char *cred = 0;
    u32 ids[ID_WORDS] = {};
    u64 caps = 0;
    if (bpf_probe_read_kernel(&cred, sizeof(cred), task + c->task_cred) || !cred) return 0;
    if (bpf_probe_read_kernel(ids, sizeof(ids), cred + c->ids_at)) return 0;
    if (bpf_probe_read_kernel(&caps, sizeof(caps), cred + c->cred_caps)) return 0;
    u32 uid = c->uid;
    return ids[c->id_euid & (ID_WORDS - 1)] == uid && ids[c->id_suid & (ID_WORDS - 1)] == uid
        && ids[c->id_egid & (ID_WORDS - 1)] == ids[c->id_gid & (ID_WORDS - 1)]
        && ids[c->id_sgid & (ID_WORDS - 1)] == ids[c->id_gid & (ID_WORDS - 1)] && caps == 0;
}

#endif
