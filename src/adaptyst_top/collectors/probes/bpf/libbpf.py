"""libbpf, the kernel's own loader library, through ctypes: a BPF object compiled with
the package (`*.bpf.o`) opened, set up, loaded and attached with no compiler and no
kernel headers on the node.

ctypes over the distribution's libbpf.so.1 rather than a C extension of our own: bcc's
binding reaches libbcc the same way, nothing is built per Python version, and libbpf's
option structs carry their own size (`sz`), its promise of a stable ABI across versions.
Only what the probe engine uses is declared.
"""

from __future__ import annotations

import contextlib
import ctypes as ct
import errno
import functools
import os
from collections.abc import Iterator
from typing import Any

# The kernel's enum bpf_attach_type (include/uapi/linux/bpf.h).
BPF_TRACE_UPROBE_MULTI = 48
BPF_NOEXIST = 1


class LibbpfError(OSError):
    """libbpf or the kernel refused: errno and what was being done, in one line."""


class _UprobeOpts(ct.Structure):
    # struct bpf_uprobe_opts (libbpf.h, 1.0+)
    _fields_ = [
        ("sz", ct.c_size_t),
        ("ref_ctr_offset", ct.c_size_t),
        ("bpf_cookie", ct.c_uint64),
        ("retprobe", ct.c_bool),
        ("func_name", ct.c_char_p),
    ]


class _BatchOpts(ct.Structure):
    # struct bpf_map_batch_opts (bpf.h)
    _fields_ = [("sz", ct.c_size_t), ("elem_flags", ct.c_uint64), ("flags", ct.c_uint64)]


_PRINT_FN = ct.CFUNCTYPE(ct.c_int, ct.c_int, ct.c_char_p, ct.c_void_p)
# int (*ring_buffer_sample_fn)(void *ctx, void *data, size_t size)
RING_SAMPLE_FN = ct.CFUNCTYPE(ct.c_int, ct.c_void_p, ct.c_void_p, ct.c_size_t)


@functools.cache
def lib() -> Any:
    """libbpf.so.1 with the prototypes used here; OSError when it is not installed."""
    so = ct.CDLL("libbpf.so.1", use_errno=True)
    p, i, u32, sz, u64 = ct.c_void_p, ct.c_int, ct.c_uint32, ct.c_size_t, ct.c_uint64
    protos: dict[str, tuple[Any, list[Any]]] = {
        "bpf_object__open_file": (p, [ct.c_char_p, p]),
        "bpf_object__load": (i, [p]),
        "bpf_object__close": (None, [p]),
        "bpf_object__next_map": (p, [p, p]),
        "bpf_object__find_map_by_name": (p, [p, ct.c_char_p]),
        "bpf_object__find_program_by_name": (p, [p, ct.c_char_p]),
        "bpf_map__name": (ct.c_char_p, [p]),
        "bpf_map__fd": (i, [p]),
        "bpf_map__set_max_entries": (i, [p, u32]),
        "bpf_map__max_entries": (u32, [p]),
        "bpf_map__set_map_flags": (i, [p, u32]),
        "bpf_map__key_size": (u32, [p]),
        "bpf_map__value_size": (u32, [p]),
        "bpf_map__set_initial_value": (i, [p, p, sz]),
        "bpf_program__fd": (i, [p]),
        "bpf_program__set_autoload": (i, [p, ct.c_bool]),
        "bpf_program__set_expected_attach_type": (i, [p, i]),
        "bpf_program__attach_uprobe_opts": (p, [p, i, ct.c_char_p, sz, p]),
        "bpf_link__destroy": (i, [p]),
        "bpf_map_lookup_elem": (i, [i, p, p]),
        "bpf_map_update_elem": (i, [i, p, p, u64]),
        "bpf_map_delete_elem": (i, [i, p]),
        "bpf_map_get_next_key": (i, [i, p, p]),
        "bpf_map_lookup_batch": (i, [i, p, p, p, p, p, p]),
        "libbpf_set_print": (p, [_PRINT_FN]),
        "bpf_program__attach": (p, [p]),
        "bpf_program__attach_perf_event": (p, [p, i]),
        "ring_buffer__new": (p, [i, RING_SAMPLE_FN, p, p]),
        "ring_buffer__poll": (i, [p, i]),
        "ring_buffer__consume": (i, [p]),
        "ring_buffer__free": (None, [p]),
        "btf__parse": (p, [ct.c_char_p, p]),
        "btf__free": (None, [p]),
        "btf__find_by_name_kind": (i, [p, ct.c_char_p, u32]),
        "btf__type_by_id": (p, [p, u32]),
        "btf__name_by_offset": (ct.c_char_p, [p, u32]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(so, name)
        fn.restype, fn.argtypes = res, args
    # libbpf writes its own lines to stderr by default; the errors come back as errno.
    so.libbpf_set_print(_PRINT_FN(0))
    return so


def available() -> str | None:
    """None when libbpf can be used here, else why not (one line)."""
    try:
        lib()
    except (OSError, AttributeError) as exc:
        return f"libbpf.so.1: {exc}"
    return None


def _fail(what: str, err: int | None = None) -> LibbpfError:
    e = abs(err) if err else (ct.get_errno() or errno.EINVAL)
    return LibbpfError(e, f"{what}: {os.strerror(e)}")


class Map:
    """One map of a loaded object: its descriptor and what bcc's tables gave the engine
    (Key/Leaf ctypes types, items, keys, item access)."""

    def __init__(self, fd: int, max_entries: int, key: Any, leaf: Any) -> None:
        self.map_fd = fd
        self.max_entries = max_entries
        self.Key = key
        self.Leaf = leaf

    def _fd(self) -> int:
        if self.map_fd < 0:
            raise LibbpfError(errno.EBADF, "the map's object is closed")
        return self.map_fd

    def __getitem__(self, key: Any) -> Any:
        value = self.Leaf()
        if lib().bpf_map_lookup_elem(self._fd(), ct.byref(key), ct.byref(value)) != 0:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        if lib().bpf_map_update_elem(self._fd(), ct.byref(key), ct.byref(value), 0) != 0:
            raise _fail("map update")

    def __delitem__(self, key: Any) -> None:
        if lib().bpf_map_delete_elem(self._fd(), ct.byref(key)) != 0:
            raise KeyError(key)

    def keys(self) -> list[Any]:
        out: list[Any] = []
        prev: Any = None
        while True:
            nxt = self.Key()
            at = None if prev is None else ct.byref(prev)
            if lib().bpf_map_get_next_key(self._fd(), at, ct.byref(nxt)) != 0:
                return out
            out.append(nxt)
            prev = nxt

    def items(self) -> list[tuple[Any, Any]]:
        out = []
        for k in self.keys():
            try:
                out.append((k, self[k]))
            except KeyError:
                continue  # removed meanwhile
        return out

    def lookup_batch(
        self, in_batch: Any, out_batch: Any, keys: Any, values: Any, count: Any
    ) -> tuple[int, int]:
        """One BPF_MAP_LOOKUP_BATCH call: (its result, errno)."""
        opts = _BatchOpts(ct.sizeof(_BatchOpts), 0, 0)
        res = lib().bpf_map_lookup_batch(
            self._fd(), in_batch, out_batch, keys, values, count, ct.byref(opts)
        )
        return int(res), ct.get_errno()


class Program:
    def __init__(self, fd: int) -> None:
        self.fd = fd


class BpfObject:
    """A compiled object (`*.bpf.o`): opened, set up by the caller (read-only data, map
    sizes, which programs load), loaded, attached; close() undoes all of it."""

    def __init__(
        self, path: str, programs: tuple[str, ...], types: dict[str, tuple[Any, Any]]
    ) -> None:
        """PROGRAMS: those the object holds; TYPES: each map's ctypes key and value."""
        self._lib = lib()
        self.path = path
        self.programs = programs
        self._types = types
        self._obj = self._lib.bpf_object__open_file(path.encode(), None)
        if not self._obj:
            raise _fail(f"opening {os.path.basename(path)}")
        self._links: dict[Any, int] = {}
        self.funcs: dict[str, Program] = {}
        self._tables: dict[str, Map] = {}
        self._rings: list[RingBuffer] = []

    # -- before load --
    def _closed(self) -> LibbpfError:
        return LibbpfError(errno.EBADF, f"{os.path.basename(self.path)}: closed")

    def _find(self, what: str, find: Any, name: str) -> int:
        """NAME's map or program (FIND: libbpf's lookup by name) in this object."""
        if not self._obj:
            raise self._closed()
        found = find(self._obj, name.encode())
        if not found:
            raise LibbpfError(errno.ENOENT, f"{self.path}: no {what} {name}")
        return int(found)

    def _map(self, name: str) -> int:
        return self._find("map", self._lib.bpf_object__find_map_by_name, name)

    def _prog(self, name: str) -> int:
        return self._find("program", self._lib.bpf_object__find_program_by_name, name)

    def _maps(self) -> Iterator[tuple[str, int]]:
        """Every map of the object, with libbpf's name for it (`<obj>.rodata` too)."""
        if not self._obj:
            raise self._closed()
        m = self._lib.bpf_object__next_map(self._obj, None)
        while m:
            yield self._lib.bpf_map__name(m).decode(), int(m)
            m = self._lib.bpf_object__next_map(self._obj, m)

    def map_names(self) -> set[str]:
        return {name for name, _ in self._maps()}

    def size_map(self, name: str, max_entries: int, flags: int | None = None) -> None:
        m = self._map(name)
        if self._lib.bpf_map__set_max_entries(m, max(1, max_entries)) != 0:
            raise _fail(f"sizing map {name}")
        if flags is not None and self._lib.bpf_map__set_map_flags(m, flags) != 0:
            raise _fail(f"map {name}'s flags")

    def set_rodata(self, data: bytes) -> None:
        """The object's read-only data: its one `const volatile` config, at offset 0."""
        for name, m in self._maps():
            if name.endswith(".rodata"):
                size = self._lib.bpf_map__value_size(m)
                if len(data) != size:  # a constant added to the C would shift the config
                    raise LibbpfError(errno.EPROTO, f"{self.path}: .rodata is {size} bytes")
                if self._lib.bpf_map__set_initial_value(m, data, size) != 0:
                    raise _fail("setting .rodata")
                return
        raise LibbpfError(errno.ENOENT, f"{self.path}: no .rodata")

    def select(self, names: dict[str, int | None]) -> None:
        """Load only NAMES, each with its expected attach type (None: its section's)."""
        for name in self.programs:
            p = self._prog(name)
            if name not in names:
                self._lib.bpf_program__set_autoload(p, False)
            elif (attach_type := names[name]) is not None:
                self._lib.bpf_program__set_expected_attach_type(p, attach_type)

    def load(self) -> None:
        res = self._lib.bpf_object__load(self._obj)
        if res != 0:
            raise _fail(f"loading {os.path.basename(self.path)}", res)
        for name in self.programs:
            fd = self._lib.bpf_program__fd(self._prog(name))
            if fd >= 0:
                self.funcs[name] = Program(fd)

    # -- after load --
    def __getitem__(self, name: str) -> Map:
        t = self._tables.get(name)
        if t is None:
            m = self._map(name)
            key, leaf = self._types[name]
            sizes = (self._lib.bpf_map__key_size(m), self._lib.bpf_map__value_size(m))
            if sizes != (ct.sizeof(key), ct.sizeof(leaf)):
                # The C and its Python mirror disagree: never read one as the other.
                raise LibbpfError(errno.EPROTO, f"{self.path}: map {name} is {sizes}")
            t = Map(self._lib.bpf_map__fd(m), self._lib.bpf_map__max_entries(m), key, leaf)
            self._tables[name] = t
        return t

    def attach_uprobe(
        self,
        fn_name: str,
        path: str,
        offset: int,
        pid: int,
        *,
        ret: bool = False,
        cookie: int = 0,
        ref_ctr_offset: int = 0,
    ) -> None:
        """FN_NAME at file OFFSET of PATH for PID (-1: every process), through a BPF link
        that carries COOKIE. OSError when the kernel refuses."""
        key = (path, offset, pid, ret)
        if key in self._links:
            raise LibbpfError(errno.EEXIST, f"already attached at offset {offset:#x}")
        opts = _UprobeOpts(ct.sizeof(_UprobeOpts), ref_ctr_offset, cookie, ret, None)
        link = self._lib.bpf_program__attach_uprobe_opts(
            self._prog(fn_name), pid, path.encode(), offset, ct.byref(opts)
        )
        if not link:
            raise _fail(f"cannot attach {'uretprobe' if ret else 'uprobe'} at {offset:#x}")
        self._links[key] = int(link)

    def attach_all(self) -> None:
        """Every loaded program where its section says (a tracepoint's name)."""
        for name in self.funcs:
            self.attach_program(name)

    def attach_program(self, name: str) -> None:
        """Program NAME where its section says."""
        link = self._lib.bpf_program__attach(self._prog(name))
        if not link:
            raise _fail(f"cannot attach {name}")
        self._links[("auto", name)] = int(link)

    def attach_cpu_clock(self, fn_name: str, hz: int) -> None:
        """FN_NAME on every online CPU's software CPU clock at HZ samples a second (what
        `perf record -F HZ` opens); detach_cpu_clock() undoes it."""
        prog = self._prog(fn_name)
        try:
            for cpu in online_cpus():
                pfd = _perf_open_cpu_clock(hz, cpu)
                link = self._lib.bpf_program__attach_perf_event(prog, pfd)
                if not link:
                    err = _fail(f"cannot attach {fn_name} on CPU {cpu}")
                    os.close(pfd)
                    raise err
                self._links[("clock", cpu)] = int(link)  # the link owns the perf fd now
        except BaseException:
            self.detach_cpu_clock()
            raise

    def detach_cpu_clock(self) -> None:
        for key in [k for k in self._links if k[0] == "clock"]:
            self._lib.bpf_link__destroy(self._links.pop(key))

    def ring_buffer(self, name: str, on_sample: Any) -> RingBuffer:
        """A reader of ring buffer map NAME that calls ON_SAMPLE(bytes) per record."""
        ring = RingBuffer(self._lib, self._lib.bpf_map__fd(self._map(name)), on_sample)
        self._rings.append(ring)
        return ring

    def detach_uprobe(self, path: str, offset: int, pid: int, *, ret: bool = False) -> None:
        link = self._links.pop((path, offset, pid, ret), None)
        if link is not None:
            self._lib.bpf_link__destroy(link)

    def cleanup(self) -> None:
        """Every link destroyed, then the object (its programs and maps) closed. Not while
        another thread polls one of its ring buffers."""
        for ring in self._rings:
            ring.free()
        self._rings.clear()
        for link in self._links.values():
            self._lib.bpf_link__destroy(link)
        self._links.clear()
        # A map kept by a caller reaches nothing after this: its descriptor's number may
        # be another object's soon (the agent loads many, one per user's spec).
        for table in self._tables.values():
            table.map_fd = -1
        self._tables.clear()
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None


class RingBuffer:
    """libbpf's ring buffer reader over one map."""

    def __init__(self, so: Any, map_fd: int, on_sample: Any) -> None:
        self._lib = so

        def sample(_ctx: Any, data: int, size: int) -> int:
            with contextlib.suppress(Exception):  # never unwind through libbpf's C frames
                on_sample(ct.string_at(data, size))
            return 0

        self._fn = RING_SAMPLE_FN(sample)  # kept: libbpf calls it until free()
        self._rb = so.ring_buffer__new(map_fd, self._fn, None, None)
        if not self._rb:
            raise _fail("ring buffer")

    def poll(self, timeout_ms: int) -> int:
        """Records handed to the callback, or -errno (-EINTR when a signal came): those
        that woke it within TIMEOUT_MS, then every one there (a producer may write
        without waking the reader: the sampler does, BPF_RB_NO_WAKEUP)."""
        if not self._rb:
            return 0
        woke = int(self._lib.ring_buffer__poll(self._rb, timeout_ms))
        if woke < 0:
            return woke
        return woke + max(0, int(self._lib.ring_buffer__consume(self._rb)))

    def free(self) -> None:
        if self._rb:
            self._lib.ring_buffer__free(self._rb)
            self._rb = None


_NR_PERF_EVENT_OPEN = 298  # x86-64
_PERF_TYPE_SOFTWARE, _PERF_COUNT_SW_CPU_CLOCK = 1, 0
_PERF_ATTR_FREQ = 1 << 10  # the flags word's `freq` bit: sample_freq, not a period
_PERF_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5 (kernel 4.1+)
_PERF_FLAG_FD_CLOEXEC = 8


def _perf_open_cpu_clock(hz: int, cpu: int) -> int:
    attr = (ct.c_uint8 * _PERF_ATTR_SIZE)()
    ct.c_uint32.from_buffer(attr, 0).value = _PERF_TYPE_SOFTWARE
    ct.c_uint32.from_buffer(attr, 4).value = _PERF_ATTR_SIZE
    ct.c_uint64.from_buffer(attr, 8).value = _PERF_COUNT_SW_CPU_CLOCK
    ct.c_uint64.from_buffer(attr, 16).value = hz  # sample_freq
    ct.c_uint64.from_buffer(attr, 40).value = _PERF_ATTR_FREQ
    libc = ct.CDLL(None, use_errno=True)
    fd = int(libc.syscall(_NR_PERF_EVENT_OPEN, attr, -1, cpu, -1, _PERF_FLAG_FD_CLOEXEC))
    if fd < 0:
        raise _fail(f"perf_event_open on CPU {cpu}")
    return fd


def online_cpus(path: str = "/sys/devices/system/cpu/online") -> list[int]:
    """The online CPUs (`0-3,6`)."""
    with open(path) as f:
        text = f.read().strip()
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
