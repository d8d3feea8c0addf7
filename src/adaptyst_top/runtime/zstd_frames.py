"""A compressed recording as a run of small zstd frames, and a reader that gets past a
damaged one.

The writer flushes a block at every line (a killed `record` loses at most the line
being written) and ends the frame, with its checksum, every FRAME_LINES lines. A frame
decodes without the ones before it, so damage costs its frame: the reader hands out a
frame's lines once its checksum passes, skips a bad one to the next frame's magic
number, and says what it skipped (`damage`). A recording of one long
frame (written before frames were cut) loses everything after its damage, as before,
but says so too.
"""

from __future__ import annotations

import io
from typing import BinaryIO

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Lines a frame holds: about a minute at the default refresh. Measured on the test
# recording: 64-line frames compress to within a few percent of one long stream.
FRAME_LINES = 64
_CHUNK = 1 << 16
# Compressed bytes given to the decoder at a time. A zstd block yields at most 128 KiB
# from at least 4 bytes (an RLE block), so one step yields at most 8 MiB however the
# input was made: a 64 KiB bomb is decoded in bounded steps, never in one 4 GB piece.
_FEED = 64
# A frame's lines are handed out once its checksum passes; past this much held (a frame
# written before frames were cut: the whole recording; or one made to be huge) what is
# held is handed out as it comes, and the line reader bounds each line.
HOLD_MAX = 8 << 20
# The most history a frame may ask the decoder to keep. `record` writes 2 MiB windows
# (level 6); `zstd -19` makes 8 MiB; a frame that asks more (up to 2 GiB with --long)
# is damage, not a reason to allocate.
MAX_WINDOW = 16 << 20
# A recording's frames decode to some 20 times their size (64 lines a frame); past
# RATIO_FROM bytes out, input that gave more than RATIO_MAX times itself is a bomb (16 MB
# of newlines from 0.5 KB took 4 s; 36 KB of them ~270 s): the rest is not read.
RATIO_MAX = 1000
RATIO_FROM = 8 << 20


class FramedWriter(io.RawIOBase):
    """The compressing writer beneath `record`'s text stream: a flush (the text layer
    flushes every line) ends a block, every FRAME_LINES-th one the frame."""

    def __init__(self, writer: zstandard.ZstdCompressionWriter) -> None:
        self.writer = writer
        self.flushes = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        return self.writer.write(data)  # type: ignore[no-any-return]

    def flush(self) -> None:
        if self.closed:
            return
        self.flushes += 1
        last = self.flushes % FRAME_LINES == 0
        self.writer.flush(zstandard.FLUSH_FRAME if last else zstandard.FLUSH_BLOCK)

    def close(self) -> None:
        if not self.closed:
            super().close()  # a last flush, through flush() above
            self.writer.close()  # type: ignore[no-untyped-call]  # ends the frame


class FramesReader(io.RawIOBase):
    """The bytes of the frames of RAW one after another. A frame the decoder rejects is
    skipped to the next magic number (its partial last line dropped) and noted in
    `damage` as (offset, length) of the compressed bytes lost; input that ends inside a
    frame (a killed `record`) ends the stream quietly. Input that decodes past RATIO_MAX
    times its size (a bomb, not a recording) ends the stream, said in `stopped`."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.damage: list[tuple[int, int]] = []
        self.stopped: str | None = None
        self._dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._obj: zstandard.ZstdDecompressionObj | None = None
        self._frame_at = 0  # file offset of the frame being decoded
        self._in = b""  # input read; from _at on not yet decoded
        self._at = 0
        self._pos = 0  # file offset of _in[_at]
        self._failed_until = 0  # the furthest offset a failed frame was decoded to
        self._fed = 0  # compressed bytes decoded, and what they gave
        self._given = 0
        self._ready = bytearray()  # whole lines, to hand out
        self._held = bytearray()  # the current frame's output, until its checksum passes
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._ready and not self._done:
            self._step()
        n = min(len(buffer), len(self._ready))
        buffer[:n] = self._ready[:n]
        del self._ready[:n]
        return n

    def _step(self) -> None:
        if self._at >= len(self._in):
            self._pos, self._in, self._at = self.raw.tell(), self.raw.read(_CHUNK), 0
        chunk = self._in[self._at : self._at + _FEED]  # an index, not a copy of the rest
        self._at += len(chunk)
        if not chunk:
            self._done = True  # the end; inside a frame: cut short, its whole lines kept
            self._release(whole_lines=True)
            return
        if self._obj is None:
            self._frame_at = self._pos
            if _skippable(chunk):
                # `record` writes none; one declaring 4 GB swallowed every frame after
                # it without a word. Damage, skipped as a bad frame is.
                self._failed(self._pos + len(chunk))
                return
            self._obj = self._dctx.decompressobj()
        try:
            data = self._obj.decompress(chunk)
        except zstandard.ZstdError:  # a bad block, or a checksum that does not match
            self._held.clear()
            self._obj = None
            self._failed(self._pos + len(chunk))
            return
        self._fed += len(chunk)
        self._given += len(data)
        self._held += data
        if self._obj.eof:
            rest = self._obj.unused_data
            self._pos += len(chunk) - len(rest)
            self._at -= len(rest)
            self._obj = None
            self._release(whole_lines=False)  # checked: all of it
        else:
            self._pos += len(chunk)
            if len(self._held) > HOLD_MAX:
                self._release(whole_lines=False)  # a long frame: handed out unchecked
        if self._given > RATIO_FROM and self._given > RATIO_MAX * self._fed:
            self.stopped = (
                f"decodes to more than {RATIO_MAX} times its size by byte {self._pos} (a "
                "recording is some 20 times): not read further"
            )
            self._done = True
            self._release(whole_lines=True)

    def _failed(self, reached: int) -> None:
        """The frame at _frame_at failed where REACHED: on from the next magic number
        after it began; or, for a frame that began inside one that failed before (frames
        nested in a bad one), after that one's end: each byte is decoded at most twice,
        never once per magic number in it."""
        resume = self._frame_at + 1
        if self._frame_at < self._failed_until:
            resume = self._failed_until
        self._failed_until = max(self._failed_until, reached)
        self._skip_from(resume, self._frame_at)

    def _release(self, whole_lines: bool) -> None:
        cut = self._held.rfind(b"\n") + 1 if whole_lines else len(self._held)
        self._ready += self._held[:cut]
        del self._held[:cut]
        if not whole_lines or self._done:
            self._held.clear()

    def _skip_from(self, offset: int, lost_from: int) -> None:
        """On to the next magic number from OFFSET; the damage from LOST_FROM to it."""
        self.raw.seek(offset)
        at, carry = offset, b""
        while True:
            chunk = self.raw.read(_CHUNK)
            if not chunk:
                self._note(lost_from, at + len(carry) - lost_from)
                self._done = True
                return
            window = carry + chunk
            found = window.find(ZSTD_MAGIC)
            if found >= 0:
                start = at + found
                self._note(lost_from, start - lost_from)
                self._in, self._at, self._pos = window, found, start
                return
            carry = window[-(len(ZSTD_MAGIC) - 1) :]
            at += len(window) - len(carry)

    def _note(self, start: int, length: int) -> None:
        """Damage from START; one stretch with the last when it follows on from it or
        overlaps it (a magic number inside the damage that led nowhere)."""
        if self.damage and start <= sum(self.damage[-1]):
            first = self.damage[-1][0]
            self.damage[-1] = (first, max(sum(self.damage[-1]), start + length) - first)
        else:
            self.damage.append((start, length))

    def close(self) -> None:
        self.raw.close()
        super().close()


def damage_of(stream: object) -> list[tuple[int, int]]:
    """The damage a recording's reader (open_recording's) met so far: (offset, length)
    of each stretch of compressed bytes skipped."""
    raw = getattr(stream, "raw", None)
    return list(raw.damage) if isinstance(raw, FramesReader) else []


def _skippable(chunk: bytes) -> bool:
    """Whether CHUNK starts a skippable frame (magic 0x184D2A50-5F, little-endian)."""
    return len(chunk) >= 4 and chunk[1:4] == b"\x2a\x4d\x18" and chunk[0] & 0xF0 == 0x50


def stopped_line(stream: object, name: str) -> str | None:
    """Why a recording's reader stopped before its end (a bomb), in one line; None if
    it did not."""
    raw = getattr(stream, "raw", None)
    why = raw.stopped if isinstance(raw, FramesReader) else None
    return f"{name}: {why}" if why else None


def damage_line(damage: list[tuple[int, int]], name: str) -> str:
    """What DAMAGE cost, in one line."""
    lost = sum(n for _, n in damage)
    where = ", ".join(f"{at}" for at, _ in damage[:3]) + (", ..." if len(damage) > 3 else "")
    return (
        f"{name}: {lost} compressed bytes damaged (at byte {where}): the lines in them are "
        "lost, what follows was read"
    )
