"""The process list (`l`): each column its width whatever the figure (a newcomer saw RSS
overflow its column: fmt_bytes wrote "1023.9 MiB" in 7 cells)."""

from __future__ import annotations

import pytest

from adaptyst_top.collectors.processes import ProcessRow
from adaptyst_top.tui.format import fmt_bytes_short
from adaptyst_top.tui.screens.processes import HEADER, process_line


@pytest.mark.parametrize(
    "rss", [0, 512, 1023, 1024, 10_240, 1_048_575, 1023.9 * 2**20, 999.6 * 2**20, 2**40, 2**52]
)
@pytest.mark.parametrize("cpu", [0.0, 99.9, 1600.0])
def test_the_command_starts_where_the_header_says(rss: float, cpu: float) -> None:
    row = ProcessRow(4194304, "a-long-user-name", cpu, int(rss), 12345, "x", "cmd --flag")
    line = process_line(row)
    assert line.index("cmd --flag") == HEADER.index("COMMAND"), (line, HEADER)


def test_short_bytes_read_as_top_writes_them() -> None:
    assert [fmt_bytes_short(n) for n in (512, 10_240, 1023.9 * 2**20, 1.5 * 2**30)] == [
        "512B", "10K", "1.0G", "1.5G",
    ]  # fmt: skip
