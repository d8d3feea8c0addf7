"""The wire's line reader: lines come whole whatever the chunks, a line past the cap
is refused without reading it into a buffer copied at every chunk (an 80 MB line took
the client 35 s of CPU)."""

from __future__ import annotations

import time

import pytest

from adaptyst_top.runtime.remote import protocol as proto


class Drip:
    """A stream that hands out DATA at most CHUNK bytes a recv, as a socket does."""

    def __init__(self, data: bytes, chunk: int) -> None:
        self.data = memoryview(data)
        self.chunk = chunk
        self.at = 0

    def recv(self, size: int) -> bytes:
        n = min(size, self.chunk, len(self.data) - self.at)
        out = bytes(self.data[self.at : self.at + n])
        self.at += n
        return out


@pytest.mark.parametrize("chunk", [1, 7, 65536])
def test_lines_come_whole_whatever_the_chunks(chunk: int) -> None:
    data = b'{"type":"a","n":1}\n{"type":"b","s":"x\\ny"}\n{"type":"c"}\n'
    reader = proto.LineReader(Drip(data, chunk), 1 << 10)
    assert [reader.read() for _ in range(4)] == [
        {"type": "a", "n": 1},
        {"type": "b", "s": "x\ny"},
        {"type": "c"},
        None,
    ]


def test_a_line_past_the_cap_is_refused_in_linear_time() -> None:
    cap = proto.MAX_SNAPSHOT_LINE
    stream = Drip(b"x" * (cap + (16 << 20)), 65536)
    reader = proto.LineReader(stream, cap)
    started = time.process_time()
    with pytest.raises(proto.ProtocolError, match="longer than"):
        reader.read()
    # Linear: ~0.1 s here. The buffer copied at every chunk took 35 s; a 100x margin.
    assert time.process_time() - started < 10
    assert stream.at <= cap + (1 << 20)  # it stopped at the cap, not at the line's end


def test_a_line_ending_just_past_the_cap_is_refused() -> None:
    reader = proto.LineReader(Drip(b"y" * 2000 + b"\n", 4096), 1000)
    with pytest.raises(proto.ProtocolError, match="longer than 1000"):
        reader.read()


@pytest.mark.parametrize("chunk", [1, 5, 65536])
def test_the_control_channel_drops_a_long_line_whole_and_reads_on(chunk: int) -> None:
    from adaptyst_top.system.line_socket import LineReader

    told: list[int] = []
    long = b"x" * 100
    data = b"a\n" + long + b"\nb\n" + long + long + b"\n" + b"c\n"
    reader = LineReader(Drip(data, chunk), 16, lambda: told.append(1))
    assert [reader.line() for _ in range(4)] == [b"a", b"b", b"c", None]
    assert len(told) == 2  # once per long line, however many chunks it came in


def test_both_protocols_want_the_version_as_an_integer() -> None:
    from adaptyst_top.placement import protocol as control

    assert control.decode(b'{"v":1,"type":"ack","task":"t","device":"cpu"}').type == "ack"
    for v in (b"true", b"1.0", b'"1"', b"2"):  # true == 1 in Python: was accepted
        with pytest.raises(control.ProtocolError, match="unsupported version"):
            control.decode(b'{"v":' + v + b',"type":"ack","task":"t","device":"cpu"}')
        with pytest.raises(proto.ProtocolError, match="protocol version"):
            proto.check_version(proto.decode(b'{"v":' + v + b',"type":"hello"}'), "agent")
