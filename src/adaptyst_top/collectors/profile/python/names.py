"""What a code object is called: its qualified name, its file and the line of its
definition, read from the process's memory (/proc/PID/mem, opened as whoever unwinds:
root here, the profiled user's own process through the agent) at the address the kernel
sent. Before 3.11 a code object keeps only its bare name: the qualified one is read from
the definition at that line of its file (ast), as the process's root names the file.

A process's memory is its owner's to write: every string is bounded and shown inert."""

from __future__ import annotations

import ast
import os
import struct
import time
from collections import OrderedDict
from dataclasses import dataclass

from adaptyst_top.collectors.profile.python.offsets import OFFSETS
from adaptyst_top.snapshot.inert import inert
from adaptyst_top.system.regular_files import open_regular_file

MAX_TEXT = 512  # characters of a name or a path
MAX_SOURCE = 4 << 20  # a .py file read for its definitions
MAX_CODES = 65536  # code objects named per process
REOPEN_S = 0.5
_WORD = struct.Struct("<Q")
_INT = struct.Struct("<i")


@dataclass(frozen=True, slots=True)
class CodeName:
    qualname: str
    filename: str
    line: int


class CodeNames:
    """Code objects of one process, named once each."""

    def __init__(self, pid: int, version: tuple[int, int]) -> None:
        self.pid, self.version = pid, version
        self._o = OFFSETS[version]
        self._names: OrderedDict[int, CodeName | None] = OrderedDict()
        self._fd: int | None = None
        self._opened = 0.0
        self._open()

    def _open(self) -> None:
        """/proc/PID/mem (again: a descriptor opened before an exec reads the memory that
        is gone), at most every REOPEN_S."""
        self._opened = time.monotonic()
        self.close()
        try:
            self._fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def name(self, code: int) -> CodeName | None:
        if code in self._names:
            return self._names[code]
        found = self._read(code)
        if found is None and time.monotonic() - self._opened >= REOPEN_S:
            self._open()
            self._names.clear()
            found = self._read(code)
        self._names[code] = found
        if len(self._names) > MAX_CODES:
            self._names.popitem(last=False)
        return found

    def _bytes(self, addr: int, n: int) -> bytes | None:
        if self._fd is None or addr <= 0:
            return None
        try:
            data = os.pread(self._fd, n, addr)
        except (OSError, OverflowError, ValueError):
            return None
        return data if len(data) == n else None

    def _word(self, addr: int) -> int | None:
        data = self._bytes(addr, 8)
        return None if data is None else int(_WORD.unpack(data)[0])

    def _text(self, obj: int | None) -> str | None:
        """A str object's text (compact ASCII or compact of any kind), bounded."""
        o = self._o
        if not obj:
            return None
        length = self._word(obj + o["unicode_length"])
        head = self._bytes(obj + o["unicode_state"], 4)
        if length is None or head is None or not 0 <= length <= 1 << 20:
            return None
        state = int.from_bytes(head, "little")
        kind, compact, ascii_only = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or kind not in (1, 2, 4):
            return None
        n = min(length, MAX_TEXT)
        at = o["unicode_ascii_data"] if ascii_only else o["unicode_compact_data"]
        data = self._bytes(obj + at, n * kind)
        if data is None:
            return None
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace")

    def _read(self, code: int) -> CodeName | None:
        o = self._o
        filename = self._text(self._word(code + o["code_filename"]))
        name = self._text(self._word(code + o["code_qualname"] if "code_qualname" in o else 0))
        bare = self._text(self._word(code + o["code_name"]))
        raw_line = self._bytes(code + o["code_firstlineno"], 4)
        if filename is None or bare is None or raw_line is None:
            return None
        line = max(0, int(_INT.unpack(raw_line)[0]))
        if name is None:
            proc = f"/proc/{self.pid}"
            name = qualname_at(f"{proc}/root", f"{proc}/cwd", filename, line, bare)
        return CodeName(inert(name)[:MAX_TEXT], inert(filename)[:MAX_TEXT], line)


# Qualified name, bare name, [the def's line, its decorators'], whether a function (a
# class's body is a code object too).
Definition = tuple[str, str, list[int], bool]
_DEFINITIONS: OrderedDict[tuple[str, int, int], list[Definition]] = OrderedDict()


def qualname_at(root: str, cwd: str, filename: str, line: int, bare: str) -> str:
    """The qualified name of the definition of BARE at LINE of FILENAME (in ROOT, or in
    CWD where it is relative), as Python 3.11 and later keep it; BARE where the file
    cannot say (gone, not a file, changed since)."""
    if bare.startswith("<") or filename.startswith("<"):
        return bare
    # A script run by a relative path keeps it (3.8): from the process's folder.
    defs = _definitions(f"{root}{filename}" if filename.startswith("/") else f"{cwd}/{filename}")
    return defs.get((line, bare), bare) if defs else bare


def _definitions(path: str) -> dict[tuple[int, str], str] | None:
    """(line, bare name) -> qualified name, at each def's and each decorator's line."""
    found = _read_definitions(path)
    if found is None:
        return None
    defs: dict[tuple[int, str], str] = {}
    for qual, bare, lines, _ in found:
        for at in lines:
            defs[(at, bare)] = qual
    return defs


def functions_in(path: str) -> list[tuple[str, int]] | None:
    """Every function PATH defines: (qualified name, the line of its `def`), in the
    order of the file; None where it is not a readable Python file."""
    found = _read_definitions(path)
    if found is None:
        return None
    return sorted(((q, lines[0]) for q, _, lines, func in found if func), key=lambda d: d[1])


def _read_definitions(path: str) -> list[Definition] | None:
    # The path is the target's (its memory names it): looked at without following a
    # last link or opening anything that is not a regular file (a device's open acts).
    opened = open_regular_file(path, MAX_SOURCE)
    if opened is None:
        return None
    fd, st = opened
    key = (path, st.st_ino, st.st_mtime_ns)
    try:
        if key in _DEFINITIONS:
            return _DEFINITIONS[key]
        source = os.read(fd, MAX_SOURCE)
    except OSError:
        return None
    finally:
        os.close(fd)
    defs: list[Definition] = []
    try:
        # Its own walk, not a recursive one: a deeply nested file costs a loop, never
        # the unwinder's stack.
        todo: list[tuple[ast.AST, str]] = [(ast.parse(source), "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = f"{prefix}{child.name}"
                    lines = [child.lineno] + [d.lineno for d in child.decorator_list]
                    func = not isinstance(child, ast.ClassDef)
                    defs.append((qual, child.name, lines, func))
                    inner = "." if isinstance(child, ast.ClassDef) else ".<locals>."
                    todo.append((child, qual + inner))
                else:
                    todo.append((child, prefix))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    _DEFINITIONS[key] = defs
    if len(_DEFINITIONS) > 256:
        _DEFINITIONS.popitem(last=False)
    return defs
