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
import zlib
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection

from adaptyst_top.collectors.probes.elf import debuginfod
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, NotELFError, read_elf
from adaptyst_top.snapshot.profile import BUILD_ID, DEBUGINFOD, DEBUGLINK
from adaptyst_top.system.regular_files import open_regular_file

DEBUG_ROOT = "/usr/lib/debug"
BUILD_ID_DIR = f"{DEBUG_ROOT}/.build-id"
MAX_LINK_NAME = 255


@dataclass(frozen=True, slots=True)
class DebugFile:
    path: str
    named_by: str  # BUILD_ID, DEBUGLINK or DEBUGINFOD
    fd: int  # open on the file checked: read through it, never the path again


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


MAX_DEBUG_BYTES = 1 << 30  # a debug file past this is not read (libxul's: ~1 GB)


def _regular(path: str) -> int | None:
    opened = open_regular_file(path, MAX_DEBUG_BYTES)
    return None if opened is None else opened[0]


def _crc_of(fd: int) -> int:
    crc = 0
    while chunk := os.read(fd, 1 << 20):
        crc = zlib.crc32(chunk, crc)
    return crc


def _twin_by_id(path: str, build_id: str) -> int | None:
    fd = _regular(path)
    if fd is not None and read_notes(f"/proc/self/fd/{fd}").build_id == build_id:
        return fd
    if fd is not None:
        os.close(fd)
    return None


def _twin_by_crc(path: str, crc: int) -> int | None:
    fd = _regular(path)
    if fd is None:
        return None
    try:
        if _crc_of(fd) == crc:
            os.lseek(fd, 0, os.SEEK_SET)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def find_debug_file(opened: str, folder: str | None, shown_dir: str = "") -> DebugFile | None:
    """The debug file of the ELF file read at OPENED, or None; its `fd` is open (the
    caller reads through it, and closes it). FOLDER: where its debug link is looked for
    (the folder that holds the file, as the reader may see it; None: only the host's
    debug tree and debuginfod); SHOWN_DIR: that folder as the process names it (gdb's
    /usr/lib/debug/SHOWN_DIR/NAME)."""
    notes = read_notes(opened)
    if notes.build_id:
        candidate = f"{BUILD_ID_DIR}/{notes.build_id[:2]}/{notes.build_id[2:]}.debug"
        if (fd := _twin_by_id(candidate, notes.build_id)) is not None:
            return DebugFile(candidate, BUILD_ID, fd)
    if notes.link is not None:
        name, crc = notes.link
        if "/" not in name and name not in (".", ".."):
            places = [f"{DEBUG_ROOT}{shown_dir}/{name}"] if shown_dir.startswith("/") else []
            if folder is not None:
                places = [f"{folder}/{name}", f"{folder}/.debug/{name}", *places]
            for place in places:
                if (fd := _twin_by_crc(place, crc)) is not None:
                    return DebugFile(place, DEBUGLINK, fd)
    if notes.build_id:
        with contextlib.suppress(OSError):
            fetched = debuginfod.fetch(notes.build_id)
            if fetched is not None and (fd := _twin_by_id(fetched, notes.build_id)) is not None:
                return DebugFile(fetched, DEBUGINFOD, fd)
    return None


def read_debug_names(
    opened: str, folder: str | None, shown_dir: str = ""
) -> tuple[ElfInfo, str] | None:
    """The function names of the ELF file read at OPENED from its debug file (found as
    find_debug_file finds it, read through the descriptor it checked), and which source
    named them; None when it has none or it cannot be read."""
    found = find_debug_file(opened, folder, shown_dir)
    if found is None:
        return None
    try:
        return read_elf(f"/proc/self/fd/{found.fd}", debug=True), found.named_by
    except (OSError, NotELFError, ValueError):
        return None
    finally:
        os.close(found.fd)
