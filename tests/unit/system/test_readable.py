"""Readable descriptors by poll(): numbers past select()'s 1024 included, as a busy
agent's are once its limit is raised."""

from __future__ import annotations

import os
import resource
import socket
import time

import pytest

from adaptyst_top.system.readable import readable

HIGH_FD = 1500


@pytest.fixture
def high_pair() -> tuple[socket.socket, socket.socket]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH_FD:
        if hard != resource.RLIM_INFINITY and hard <= HIGH_FD:
            pytest.skip(f"a hard limit of {hard} descriptors: none numbered {HIGH_FD}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH_FD + 1, hard))
    ours, theirs = socket.socketpair()
    os.dup2(ours.fileno(), HIGH_FD)
    ours.close()
    return socket.socket(fileno=HIGH_FD), theirs


def test_a_descriptor_past_1024_is_waited_on_and_found_readable(
    high_pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = high_pair
    with ours, theirs:
        start = time.monotonic()
        assert readable([ours], 0.05) == []
        assert time.monotonic() - start >= 0.04  # waited, rounded up, not spun
        theirs.sendall(b"x")
        assert readable([ours, theirs], 1.0) == [HIGH_FD]
        ours.recv(1)
        theirs.close()
        assert readable([ours], 0.0) == [HIGH_FD]  # the peer's end reads as readable
