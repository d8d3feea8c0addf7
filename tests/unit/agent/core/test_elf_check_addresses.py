"""What root takes of a user's parser's claim that a name is attached at its address (a
debug file's name): only where the file's own unwind index says a function starts; a
claim inside a function is attached by name instead (and so fails, harmlessly), never
at that address: a probe there would split an instruction in every process mapping it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from adaptyst_top.agent.core.elf_check import checked
from adaptyst_top.collectors.probes.elf.debug_names import function_at_address
from adaptyst_top.collectors.probes.elf.elf_info import read_elf
from adaptyst_top.collectors.probes.elf.fde_starts import fde_starts, starts_function
from tests.support.programs import build_stripped_lib


def _lib(d: Path) -> tuple[Path, dict[str, int]]:
    lib, debug = build_stripped_lib(d, secrets.token_hex(20))
    starts = {f.name: f.address for f in read_elf(debug, debug=True).functions}
    return lib, starts


def test_a_claimed_address_is_kept_only_at_a_function_start(tmp_path: Path) -> None:
    lib, starts = _lib(tmp_path)
    alpha = starts["hot_alpha"]
    answer = {
        "functions": [
            ["hot_alpha", "hot_alpha", alpha, 16, False, True],
            ["liar", "liar", alpha + 1, 16, False, True],  # inside hot_alpha
        ],
        "usdt": [],
        "stripped": True,
    }
    fd = os.open(lib, os.O_RDONLY)
    try:
        info = checked(answer, fd, str(lib))
        index = fde_starts(fd)
    finally:
        os.close(fd)
    by_name = {f.name: f for f in info.functions}
    assert by_name["hot_alpha"].by_address
    assert not by_name["liar"].by_address
    assert starts_function(index, alpha) and not starts_function(index, alpha + 1)


def test_an_address_spec_needs_a_start(tmp_path: Path) -> None:
    lib, starts = _lib(tmp_path)
    elf = read_elf(lib)
    beta = starts["hot_beta"]
    found = function_at_address(elf, f"0x{beta:x}", str(lib), str(lib))
    assert found is not None and found.by_address and found.file_offset == elf.offset_of(beta)
    assert function_at_address(elf, f"0x{beta + 4:x}", str(lib), str(lib)) is None
    exported = starts["hot_run"]  # the file's own symbol: by name
    own = function_at_address(elf, f"0x{exported:x}", str(lib), str(lib))
    assert own is not None and own.name == "hot_run" and not own.by_address
