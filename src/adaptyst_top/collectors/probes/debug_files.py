"""A stripped file's separate debug file, found where gdb and perf find it, in this order:
the distribution's build-ID tree (/usr/lib/debug/.build-id/XX/YYYY.debug), the file's
.gnu_debuglink (beside it, in .debug/ beside it, under /usr/lib/debug), then debuginfod.

A candidate counts only when it is a regular file that is the stripped file's twin: the
same build ID, or for a debug link the CRC the link records. Its names then stand for
the stripped file's functions (same link-time addresses) and say where they came from.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zlib
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection

from adaptyst_top.collectors.probes import debuginfod
from adaptyst_top.snapshot.profile import BUILD_ID, DEBUGINFOD, DEBUGLINK

DEBUG_ROOT = "/usr/lib/debug"
BUILD_ID_DIR = f"{DEBUG_ROOT}/.build-id"
MAX_LINK_NAME = 255


@dataclass(frozen=True, slots=True)
class DebugFile:
    path: str
    named_by: str  # BUILD_ID, DEBUGLINK or DEBUGINFOD


@dataclass(frozen=True, slots=True)
class Notes:
    build_id: str | None
    link: tuple[str, int] | None  # .gnu_debuglink: the file's name, its CRC-32


def read_notes(path: str) -> Notes:
    """PATH's build ID (hex) and debug link, where it has them."""
    build_id, link = None, None
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for section in elf.iter_sections():
                if isinstance(section, NoteSection) and build_id is None:
                    for note in section.iter_notes():
                        desc = note["n_desc"]
                        if note["n_type"] == "NT_GNU_BUILD_ID" and isinstance(desc, str):
                            build_id = desc.lower()
                elif section.name == ".gnu_debuglink" and section["sh_size"] <= 4096:
                    data = bytes(section.data())
                    name = data.partition(b"\0")[0]
                    crc_at = (len(name) + 4) & ~3
                    if 0 < len(name) <= MAX_LINK_NAME and len(data) >= crc_at + 4:
                        link = (name.decode("utf-8", "replace"), _crc_field(data, crc_at))
    except Exception:  # pyelftools raises many kinds on bad bytes
        return Notes(None, None)
    if build_id is not None and not all(c in "0123456789abcdef" for c in build_id):
        build_id = None
    return Notes(build_id, link)


def _crc_field(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def _regular(path: str) -> int | None:
    """A descriptor of PATH when it is a regular file (never a FIFO that would block)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _crc_of(fd: int) -> int:
    crc = 0
    while chunk := os.read(fd, 1 << 20):
        crc = zlib.crc32(chunk, crc)
    return crc


def _twin_by_id(path: str, build_id: str) -> bool:
    fd = _regular(path)
    if fd is None:
        return False
    try:
        return read_notes(f"/proc/self/fd/{fd}").build_id == build_id
    finally:
        os.close(fd)


def _twin_by_crc(path: str, crc: int) -> bool:
    fd = _regular(path)
    if fd is None:
        return False
    try:
        return _crc_of(fd) == crc
    except OSError:
        return False
    finally:
        os.close(fd)


def find_debug_file(opened: str, folder: str | None, shown_dir: str = "") -> DebugFile | None:
    """The debug file of the ELF file read at OPENED, or None. FOLDER: where its debug
    link is looked for (the folder that holds the file, as the reader may see it; None:
    only the host's debug tree and debuginfod); SHOWN_DIR: that folder as the process
    names it (gdb's /usr/lib/debug/SHOWN_DIR/NAME)."""
    notes = read_notes(opened)
    if notes.build_id:
        candidate = f"{BUILD_ID_DIR}/{notes.build_id[:2]}/{notes.build_id[2:]}.debug"
        if _twin_by_id(candidate, notes.build_id):
            return DebugFile(candidate, BUILD_ID)
    if notes.link is not None:
        name, crc = notes.link
        if "/" not in name and name not in (".", ".."):
            places = [f"{DEBUG_ROOT}{shown_dir}/{name}"] if shown_dir.startswith("/") else []
            if folder is not None:
                places = [f"{folder}/{name}", f"{folder}/.debug/{name}", *places]
            for place in places:
                if _twin_by_crc(place, crc):
                    return DebugFile(place, DEBUGLINK)
    if notes.build_id:
        with contextlib.suppress(OSError):
            fetched = debuginfod.fetch(notes.build_id)
            if fetched is not None and _twin_by_id(fetched, notes.build_id):
                return DebugFile(fetched, DEBUGINFOD)
    return None
