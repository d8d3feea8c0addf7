/* Which CUPTI the CUDA injection library loads, inside the program's cuInit, as the
 * program's user: ADAPTYST_CUPTI; else a CUPTI the program already loaded; else the one
 * of its CUDA runtime's version beside that runtime; else by name, newest first and no
 * newer than the driver; else the toolkit's ($CUDA_HOME, /usr/local/cuda).
 *
 * Beside the runtime means paths built from the runtime's folder, whose folders above
 * (/tmp/job/lib -> /tmp/extras) may be open to others: a file there is loaded only when
 * every entry on its way, each link followed one at a time, is root's or the user's and
 * no one else may change it (OpenSSH's safe_path), and it is a regular file (a FIFO
 * would hang the open). The path so resolved is the path opened. */
#define _GNU_SOURCE /* secure_getenv, strchrnul */
#include "cupti_open.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* CUPTI's majors tried by name, newest first: a CUPTI newer than the driver fails. */
#define NEWEST_MAJOR 13
#define OLDEST_MAJOR 12
#define MAX_LINKS 40 /* links followed on one path, as the kernel's own limit */
#define OPEN(path) dlopen(path, RTLD_NOW | RTLD_GLOBAL)

struct runtime {
    char dir[PATH_MAX];
    char version[16]; /* ".N" of libcudart.so.N; "" for an unversioned libcudart.so */
};

/* The program's CUDA runtime (libcudart.so.N, else libcudart.so; loaded before cuInit,
 * by an absolute path): where it is and its version suffix. */
static int find_runtime(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct runtime *rt = data;
    const char *name = info->dlpi_name;
    const char *base = name && name[0] == '/' ? strrchr(name, '/') : NULL;
    if (!base || strncmp(base + 1, "libcudart.so", 12)) return 0;
    const char *version = base + 13;
    char *end = NULL;
    long major = *version == '.' ? strtol(version + 1, &end, 10) : 0;
    if (*version && (!end || end == version + 1 || major <= 0 || major > 999 ||
                     (*end && *end != '.') || version[1] < '0' || version[1] > '9'))
        return 0; /* not the runtime's name */
    int len = (int)(base - name);
    if (len <= 0 || len >= (int)sizeof rt->dir || (rt->dir[0] && !*version)) return 0;
    memcpy(rt->dir, name, (size_t)len);
    rt->dir[len] = 0;
    rt->version[0] = 0;
    if (*version) /* ".N" alone: CUPTI's soname carries the major only */
        snprintf(rt->version, sizeof rt->version, ".%ld", major);
    return *version != 0; /* a versioned one ends the search; an unversioned one waits */
}

/* TEXT on stderr with every byte that is not printable ASCII as \xNN: a path may hold
 * another user's bytes (a link's target), never to act on the terminal. */
static void put_inert(const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if (*c < 0x20 || *c >= 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
}

/* One line saying PATH was not loaded because of CULPRIT; each culprit said once. */
static void refuse(const char *path, const char *culprit) {
    static char said[8][PATH_MAX];
    static int n;
    for (int i = 0; i < n; i++)
        if (!strcmp(said[i], culprit)) return;
    if (n < 8) snprintf(said[n++], PATH_MAX, "%s", culprit);
    fputs("adaptyst-top: ", stderr);
    put_inert(path);
    fputs(" not loaded: ", stderr);
    put_inert(culprit);
    fputs(" may be changed by another user\n", stderr);
}

/* Whether the folder holding the resolved path OUT may be written by others (sticky or
 * not: there another may make a hard link to a file or link of ours, where the kernel
 * allows it). OUT holds no links, so its parent is the folder itself. */
static int in_open_folder(const char *out) {
    static char parent[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(out, '/');
    int len = slash ? (int)(slash - out) : 0;
    snprintf(parent, sizeof parent, "%.*s", len, out);
    return lstat(len ? parent : "/", &st) || (st.st_mode & 022);
}

/* Whether the entry ST at OUT (at a path's end: LAST) may have been put there or changed
 * by another user: not root's or ours; a folder others may write without the sticky
 * bit; a hard link (another's, perhaps) in a folder others may write; the file: not a
 * regular one, or others may write it. */
static int foreign(const struct stat *st, const char *out, int last) {
    if (st->st_uid != 0 && st->st_uid != geteuid()) return 1;
    if ((S_ISLNK(st->st_mode) || last) && st->st_nlink > 1 && in_open_folder(out)) return 1;
    if (S_ISLNK(st->st_mode)) return 0;
    if (last) return !S_ISREG(st->st_mode) || (st->st_mode & 022);
    return (st->st_mode & 022) && !(st->st_mode & S_ISVTX);
}

/* PATH resolved into OUT one entry at a time, each judged (foreign) before it is
 * followed; 1: OUT is a file no one else could have chosen or changed. A path that
 * leads nowhere is 0 without a word; one through another's entry, 0 with one line. */
static int resolve_owned(const char *path, char out[PATH_MAX]) {
    static char rest[2 * PATH_MAX], next[2 * PATH_MAX], target[PATH_MAX];
    struct stat st;
    int links = 0;
    if (path[0] != '/' || snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest)
        return 0;
    out[0] = 0; /* "": the root, judged first */
    if (lstat("/", &st) || foreign(&st, "/", 0)) {
        refuse(path, "/");
        return 0;
    }
    for (char *p = rest; *p;) {
        while (*p == '/') p++;
        if (!*p) break;
        char *end = strchrnul(p, '/');
        size_t len = (size_t)(end - p), at = strlen(out);
        int last = !end[strspn(end, "/")];
        if (len == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        if (len == 2 && p[0] == '.' && p[1] == '.') { /* OUT has no links: lexical */
            char *slash = strrchr(out, '/');
            *(slash ? slash : out) = 0;
            p = end;
            continue;
        }
        if (at + 1 + len >= PATH_MAX) return 0;
        out[at] = '/';
        memcpy(out + at + 1, p, len);
        out[at + 1 + len] = 0;
        if (lstat(out, &st)) return 0;
        if (foreign(&st, out, last)) {
            refuse(path, out);
            return 0;
        }
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(out, target, sizeof target - 1);
            if (++links > MAX_LINKS || n <= 0) return 0;
            target[n] = 0;
            out[target[0] == '/' ? 0 : at] = 0; /* its target walks from its folder */
            if (snprintf(next, sizeof next, "%s/%s", target, end) >= (int)sizeof next)
                return 0;
            memcpy(rest, next, strlen(next) + 1);
            p = rest;
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode)) return 0;
        p = end;
    }
    return out[0] != 0 && lstat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* DIR without its last N folders, as written (a toolkit's lib64 is often a link to
 * targets/x86_64-linux/lib, whose ../extras is not the toolkit's); 0: none left. */
static int up(const char *dir, int n, char out[PATH_MAX]) {
    snprintf(out, PATH_MAX, "%s", dir);
    while (n-- > 0) {
        char *slash = strrchr(out, '/');
        if (!slash || slash == out) return 0;
        *slash = 0;
    }
    return 1;
}

/* Where a CUPTI of the runtime's version lies beside it: pip's CUDA 13 keeps both in
 * nvidia/cu13/lib, pip's CUDA 12 in nvidia/cuda_runtime/lib and nvidia/cuda_cupti/lib,
 * a toolkit in lib64 and extras/CUPTI/lib64. The folders above are taken as the program
 * named them, then as its links resolve. Static buffers: this runs once, on the thread
 * that calls cuInit. */
static void *beside_runtime(void) {
    static const struct {
        int up;
        const char *rest;
    } places[] = {{0, ""}, {2, "/cuda_cupti/lib"}, {1, "/extras/CUPTI/lib64"}};
    static struct runtime rt;
    static char resolved[PATH_MAX], base[PATH_MAX], path[PATH_MAX + 64], at[PATH_MAX];
    dl_iterate_phdr(find_runtime, &rt);
    if (!rt.dir[0]) return NULL;
    /* the folder as links resolve it, where that is another */
    const char *dirs[2] = {rt.dir, realpath(rt.dir, resolved)};
    if (dirs[1] && !strcmp(dirs[1], rt.dir)) dirs[1] = NULL;
    void *h = NULL;
    for (int d = 0; !h && d < 2 && dirs[d]; d++)
        for (size_t i = 0; !h && i < sizeof places / sizeof *places; i++)
            if (up(dirs[d], places[i].up, base) &&
                snprintf(path, sizeof path, "%s%s/libcupti.so%s", base, places[i].rest,
                         rt.version) < (int)sizeof path &&
                resolve_owned(path, at))
                h = OPEN(at); /* the path judged, not one resolved anew */
    return h;
}

/* The driver's CUDA major (we run inside its cuInit), or 0. */
static int driver_major(void) {
    /* The driver may be loaded without RTLD_GLOBAL: asked by its own handle first. */
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*version)(int *) =
        (int (*)(int *))dlsym(driver ? driver : RTLD_DEFAULT, "cuDriverGetVersion");
    int v = 0;
    int major = version && version(&v) == 0 ? v / 1000 : 0;
    if (driver) dlclose(driver);
    return major;
}

/* libcupti.so.N by name: one the program loaded first, else the newest the driver takes. */
static void *by_name(int flags) {
    int newest = driver_major();
    if (newest <= 0 || newest > NEWEST_MAJOR) newest = NEWEST_MAJOR;
    char name[32];
    void *h = NULL;
    for (int major = newest; !h && major >= OLDEST_MAJOR; major--) {
        snprintf(name, sizeof name, "libcupti.so.%d", major);
        h = dlopen(name, flags);
    }
    return h ? h : dlopen("libcupti.so", flags);
}

void *open_cupti(void) {
    const char *path = secure_getenv("ADAPTYST_CUPTI"); /* none in a setuid program */
    const char *home = secure_getenv("CUDA_HOME");
    char in_home[4096];
    void *h = path && *path ? OPEN(path) : NULL;
    if (!h) h = by_name(RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (!h) h = beside_runtime();
    if (!h) h = by_name(RTLD_NOW | RTLD_GLOBAL);
    if (!h && home && *home &&
        snprintf(in_home, sizeof in_home, "%s/extras/CUPTI/lib64/libcupti.so", home) <
            (int)sizeof in_home)
        h = OPEN(in_home);
    if (!h) h = OPEN("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
    return h;
}
