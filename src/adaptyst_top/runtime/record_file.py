"""Record files: JSON lines, plain or zstd-compressed (a name ending in `.zst`).

A compressed recording is zstd flushed at the end of every line and cut into frames
(runtime/zstd_frames.py): a recording killed mid-run loses at most the line being
written, a damaged block its frame, and both are read past. Either kind is read back by `open_recording`, which knows
them by their first bytes, not their names.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from typing import IO, BinaryIO

import zstandard

from adaptyst_top.runtime.zstd_frames import ZSTD_MAGIC, FramedWriter, FramesReader
from adaptyst_top.system.private_files import open_for_replacing, open_for_writing

ZSTD_LEVEL = 6  # ~25x on snapshot lines at a few ms per second of a 200-row run
# The longest recorded line read back. Below the wire's cap (64 MiB) because a line costs
# its reader about 4x its length (the line, its text, the values: sources.PARSE_BUDGET),
# and `export` of any recording stays under 200 MB; 24 MiB holds ~34,000 probe rows.
LINE_MAX = 24 << 20


def open_output(path: str) -> IO[str]:
    """The record file, compressed when PATH ends in .zst. In a folder another user may
    write to (/tmp, a user's folder for root), a symlink planted there is refused rather
    than followed (system/private_files.py)."""
    return _text_out(open_for_writing(path), path)


@contextlib.contextmanager
def replaced_output(path: str) -> Iterator[IO[str]]:
    """A file that takes PATH's place only when the block ends well (export: a failure or
    an interruption leaves what was there). A FIFO or a device is written as it is."""
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        special = False  # absent (or unreadable: the walk says why)
    if special:
        with open_output(path) as out:
            yield out
        return
    new = open_for_replacing(path)
    try:
        out = _text_out(new.fd, path)
    except BaseException:
        os.close(new.fd)
        new.abort()
        raise
    try:
        with out:
            yield out
    except BaseException:
        new.abort()
        raise
    new.commit()


def same_file(a: str, b: str) -> bool:
    """Whether paths A and B name one file (a link, a hard link, or the very path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _text_out(fd: int, path: str) -> IO[str]:
    if not path.endswith(".zst"):
        return os.fdopen(fd, "w")
    raw = os.fdopen(fd, "wb")
    # A line's flush ends a zstd block, every FRAME_LINES-th a frame (zstd_frames.py).
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    writer = compressor.stream_writer(raw, closefd=True)
    framed = FramedWriter(writer)  # flushed by the text layer at every line
    return io.TextIOWrapper(framed, encoding="utf-8", line_buffering=True)  # type: ignore[type-var]


def open_recording(path: str | os.PathLike[str]) -> BinaryIO:
    """A recording's bytes, decompressed when it is zstd (whatever its name); a stream
    cut short (a killed `record`) reads to its last complete line, a damaged frame is
    skipped and noted (zstd_frames.damage_of). Only a regular file is read: a FIFO
    another user left in /tmp is refused at once (ValueError, one line), never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{os.fsdecode(path)}: not a regular file, so not a recording")
        os.set_blocking(fd, True)
        raw = open(fd, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except BaseException:
        os.close(fd)
        raise
    if raw.peek(4)[:4] != ZSTD_MAGIC:
        return raw
    return io.BufferedReader(FramesReader(raw))  # type: ignore[arg-type]


def recording_lines(stream: BinaryIO) -> Iterator[bytes | None]:
    """The lines of a recording, each at most LINE_MAX bytes; a longer one is read past
    in bounded pieces and given as None: one damaged line, never held whole."""
    while line := stream.readline(LINE_MAX + 1):
        if len(line) <= LINE_MAX or line.endswith(b"\n"):
            yield line
            continue
        while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass
        yield None
