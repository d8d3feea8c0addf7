"""The agent's cache of users' parsed files, counted in what it holds: a file of many
functions whose answer was small in bytes still fills a user's share (the sweep's idle
agent grew 58 MB -> 1 GB on answers counted at ~41 B a function, held at ~260)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adaptyst_top.agent.core import parser
from adaptyst_top.collectors.probes.elf.elf_info import ElfInfo, FunctionSymbol


@pytest.fixture
def empty_cache() -> Iterator[None]:
    saved = dict(parser._CACHE)
    parser._CACHE.clear()
    yield
    parser._CACHE.clear()
    parser._CACHE.update(saved)


def _info(functions: int) -> ElfInfo:
    one = FunctionSymbol("f", 0x1000, 1, 0x1000)
    return ElfInfo("/lib.so", (one,) * functions, (), False, "x86_64")


def test_a_large_file_is_counted_by_its_objects_not_its_answer(empty_cache: None) -> None:
    answer = 41 * 300_000  # bytes a 300,000-function answer takes
    info = _info(300_000)
    held = parser.held_bytes(info, answer)
    assert 2 * answer < parser.CACHE_PER_USER < 2 * held  # by bytes both would stay
    for ino in (1, 2):  # two such files of one user: the first goes
        parser._CACHE[(1000, 1, ino, 0, 0, 0)] = (info, parser.held_bytes(info, answer))
        parser._trim(1000)
    assert list(parser._CACHE) == [(1000, 1, 2, 0, 0, 0)]
