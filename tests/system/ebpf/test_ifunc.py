"""GNU indirect functions (glibc's strlen, memcpy...): listed as such, probed where
their calls go (the implementation the resolver picked), refused with a reason when
that cannot be known."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.bpf_objects import none_left
from tests.support.marks import requires_root
from tests.support.probed import rows_after_run

CALLER = r"""
#include <stdio.h>
#include <string.h>
int main(void) {
    char line[64];
    size_t total = 0;
    if (!fgets(line, sizeof line, stdin)) return 1;
    size_t (*volatile len)(const char *) = strlen;  /* a real call, never folded */
    for (int i = 0; i < 5000; i++) total += len(line);
    return total == 0;
}
"""


@pytest.mark.ebpf
@requires_root
def test_an_ifunc_probe_counts_the_calls(tmp_path: Path) -> None:
    src, binary = tmp_path / "caller.c", tmp_path / "caller"
    src.write_text(CALLER)
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(src)], check=True)
    (row,) = [r for r in rows_after_run([str(binary)], "uprobe:c:strlen") if r["name"] == "strlen"]
    # On the resolver, as a by-name attach does, it would count 0 (it ran at startup).
    assert 5000 <= row["count"] <= 5100
    assert none_left()
